/* SPDX-License-Identifier: MIT */
/*
 * daemon.h - the daemon object: made once from the options by main.c, served by libfuse
 * (session.c). Its srv part is libfuse's userdata, all that requests see (fuse/ops.h).
 */
#ifndef DMAFS_DAEMON_H
#define DMAFS_DAEMON_H

#include <limits.h>

#include "daemon/options.h"
#include "fuse/ops.h"
#include "place/place.h"
#include "util/mountrec.h"

#define DAEMON_NOTES_MAX 8

struct tier_press;

struct daemon {
	struct srv srv;		/* the filesystem and the settings requests use */
	struct options o;	/* the command line, checked */
	struct place_limits lim;
	struct member *ms;	/* the members, opened and verified */
	int nms;
	char *member_list;	/* their absolute paths, commas escaped */
	struct fuse_session *se;
	struct tier_press *press; /* the warm tier's memory watcher, or NULL */
	int notify_fd;		/* the waiting parent, until the mount answers (-1: none) */
	/*
	 * What the daemon notes about a mount that works but is not all it could be (written
	 * data copied twice, no POSIX ACLs, fewer registrations): not failures, so a mount
	 * prints nothing. They are info messages, which wait for the log (util_log_hold_info:
	 * syslog once detached; stderr at once with -f or -o verbose), and go into the mount
	 * record, where dmafs-check shows them.
	 */
	char notes[DAEMON_NOTES_MAX][320];
	int nnotes;
	struct mountrec rec;	/* what umount.dmafs and dmafs-check read (pid 0: none) */
	char rec_dir[PATH_MAX];
};

/* session.c */
extern const struct fuse_lowlevel_ops daemon_ops;
void daemon_note(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* atexit: a daemon that exits before it detached prints the info messages it held. */
void daemon_release_held(void);
/*
 * Detach like a daemon, but keep the parent until the kernel's INIT has been answered,
 * so "dmafs ... && ls MNT" works and every failure up to then reaches the terminal.
 * Returns 0 or -1 (errno).
 */
int daemon_detach(struct daemon *d);
/* The mount record and the utab marker (umount waits for the daemon through them). */
void daemon_publish(struct daemon *d);
/* The last act: the final state, for umount.dmafs to report. */
void daemon_unpublish(struct daemon *d, int ret, const char *why);
/* @s with each comma and backslash escaped by a backslash (malloc'd; NULL: no memory). */
char *daemon_escape_commas(const char *s);
/* The member list with absolute paths (malloc'd), commas escaped with @esc. */
char *daemon_members_abs(const struct member *ms, int n, int esc);
/* Was fsname= among libfuse's options? */
int daemon_fsname_given(const struct fuse_args *args);
/* Is the running kernel @major.@minor or later? */
int daemon_kernel_at_least(int major, int minor);

#endif
