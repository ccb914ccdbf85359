/* SPDX-License-Identifier: MIT */
/* options.h - the daemon's command line (dmafs(8)): what it asks for, parsed and checked. */
#ifndef DMAFS_OPTIONS_H
#define DMAFS_OPTIONS_H

#include <fuse_lowlevel.h>
#include <stdio.h>

#include "engine/engine.h"

struct options {
	char *members;
	char *mountpoint;
	char *user; /* user=NAME from mount(8): recorded in utab, for umount(8) */
	struct fs_settings fs; /* what the engine is asked for: fs->set */
	unsigned threads, readahead_kb, staging_mb, copy_delay_us, open_fill_kb;
	unsigned max_background; /* the kernel's asynchronous requests in flight (session.c) */
	unsigned place_threads, place_queue, place_threads_user, reg_max, reg_max_user;
	char *reg_bytes, *reg_bytes_user;
	char *tier;	     /* tier=SIZE or N% of the RAM, as given */
	uint64_t tier_bytes; /* the warm tier's size from it (options_check; 0: none) */
	char *tier_min_free; /* tier_min_free=SIZE or N% of the RAM, as given */
	uint64_t tier_min_free_bytes; /* from it, or the default (options_check) */
	char *tier_pin;	     /* tier_pin=all|fill, as given (NULL: all) */
	char *tier_fill;     /* tier_fill=now|idle, as given (NULL: now) */
	int writeback, wronly_cache, verbose, no_handles, sync_dio;
	int noacl; /* -o noacl: POSIX ACLs off (session.c) */
	int nolistxattr; /* -o nolistxattr: listxattr(2) answered ENOSYS (fuse/xattr.c) */
	char *p2p, *gpu_setup;
	int ro, foreground, debug, help, version;
	int degraded; /* -o degraded: a mirror's missing member allowed (read-only) */
	int user_mount; /* user, users, owner or group: a mount for users, nosuid,nodev */
	double attr_timeout, entry_timeout;
};

/* Parse @args (defaults first); libfuse's own options stay in @args. Returns 0 or -1 (said). */
int options_parse(struct options *o, struct fuse_args *args);
/* Fill in the defaults that depend on the machine and check every value's range. Returns 0
 * or -1 (said on stderr). */
int options_check(struct options *o);
void options_usage(FILE *f);
/*
 * A control character (0x01-0x1f, 0x7f) in an argument would split a line of a log or of
 * the mount table, or reach a terminal as an escape sequence: refuse it before anything
 * runs, naming the option (one comma-separated piece of a -o argument) or the argument.
 * mount.dmafs refuses the same. Returns 0 or 1 (refused, said on stderr).
 */
int options_refuse_control(int argc, char *argv[]);

#endif
