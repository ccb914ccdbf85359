// SPDX-License-Identifier: MIT
/* options.c - the daemon's command line: parsing, defaults, and the checks of each value. */
#include "daemon/options.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "place/pipeline.h"
#include "place/placeq.h"

#define THREADS_AUTO UINT_MAX

enum {
	KEY_DISCARD, KEY_RO, KEY_RW, KEY_DEGRADED, KEY_HELP, KEY_VERSION, KEY_FG, KEY_DEBUG,
	KEY_NOATIME, KEY_ATIME, KEY_RELATIME, KEY_STRICTATIME, KEY_NOSTRICTATIME,
	KEY_NODIRATIME, KEY_DIRATIME, KEY_SYNC, KEY_ASYNC, KEY_DIRSYNC, KEY_USER_MOUNT
};

#define OPT(t, p) { t, offsetof(struct options, p), 1 }
static const struct fuse_opt opt_spec[] = {
	OPT("commit=%u", fs.commit_interval),
	OPT("threads=%u", threads),
	OPT("readahead_kb=%u", readahead_kb),
	OPT("max_background=%u", max_background),
	OPT("open_fill_kb=%u", open_fill_kb),
	OPT("staging_mb=%u", staging_mb),
	OPT("copy_delay_us=%u", copy_delay_us),
	OPT("writebehind_mb=%u", fs.writebehind_mb),
	OPT("place_threads=%u", place_threads),
	OPT("place_queue=%u", place_queue),
	OPT("place_threads_user=%u", place_threads_user),
	OPT("reg_max=%u", reg_max),
	OPT("reg_max_user=%u", reg_max_user),
	OPT("reg_bytes=%s", reg_bytes),
	OPT("reg_bytes_user=%s", reg_bytes_user),
	OPT("tier=%s", tier),
	OPT("tier_min_free=%s", tier_min_free),
	OPT("tier_pin=%s", tier_pin),
	OPT("tier_fill=%s", tier_fill),
	OPT("p2p=%s", p2p),
	OPT("gpu_setup=%s", gpu_setup),
	OPT("user=%s", user),
	OPT("writeback_cache", writeback),
	OPT("verify_place", fs.verify_place),
	OPT("wronly_cache", wronly_cache),
	OPT("no_handles", no_handles),
	OPT("noacl", noacl),
	{ "acl", offsetof(struct options, noacl), 0 },
	OPT("nolistxattr", nolistxattr),
	{ "listxattr", offsetof(struct options, nolistxattr), 0 },
	OPT("sync_dio", sync_dio),
	OPT("verbose", verbose),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("rw", KEY_RW),
	FUSE_OPT_KEY("degraded", KEY_DEGRADED),
	FUSE_OPT_KEY("-f", KEY_FG),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* words fstab and mount(8) pass that mean nothing to a FUSE mount here */
	FUSE_OPT_KEY("defaults", KEY_DISCARD),
	FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_USER_MOUNT),
	FUSE_OPT_KEY("nouser", KEY_DISCARD),
	FUSE_OPT_KEY("users", KEY_USER_MOUNT),
	FUSE_OPT_KEY("owner", KEY_USER_MOUNT),
	FUSE_OPT_KEY("group", KEY_USER_MOUNT),
	FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", KEY_DISCARD),
	/* access times: the daemon keeps them (the kernel leaves a FUSE inode's atime alone) */
	FUSE_OPT_KEY("atime", KEY_ATIME),
	FUSE_OPT_KEY("noatime", KEY_NOATIME),
	FUSE_OPT_KEY("relatime", KEY_RELATIME),
	FUSE_OPT_KEY("norelatime", KEY_DISCARD), /* relatime stays, as in mount(2) */
	FUSE_OPT_KEY("strictatime", KEY_STRICTATIME),
	FUSE_OPT_KEY("nostrictatime", KEY_NOSTRICTATIME),
	FUSE_OPT_KEY("nodiratime", KEY_NODIRATIME),
	FUSE_OPT_KEY("diratime", KEY_DIRATIME),
	FUSE_OPT_KEY("lazytime", KEY_DISCARD), /* atime changes always wait for a commit */
	FUSE_OPT_KEY("nolazytime", KEY_DISCARD),
	/* the daemon acts on these; libfuse passes them on as kernel mount flags too */
	FUSE_OPT_KEY("sync", KEY_SYNC),
	FUSE_OPT_KEY("async", KEY_ASYNC),
	FUSE_OPT_KEY("dirsync", KEY_DIRSYNC),
	FUSE_OPT_KEY("default_permissions", KEY_DISCARD), /* always on */
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct options *o = data;

	switch (key) {
	case KEY_DISCARD:
		return 0;
	case KEY_USER_MOUNT:
		o->user_mount = 1;
		return 0;
	case KEY_ATIME: /* undoes noatime */
		if (o->fs.atime == FS_ATIME_NEVER)
			o->fs.atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_NOATIME:
		o->fs.atime = FS_ATIME_NEVER;
		return 0;
	case KEY_RELATIME:
		o->fs.atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_STRICTATIME:
		o->fs.atime = FS_ATIME_STRICT;
		return 0;
	case KEY_NOSTRICTATIME:
		if (o->fs.atime == FS_ATIME_STRICT)
			o->fs.atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_NODIRATIME:
		o->fs.nodiratime = 1;
		return 0;
	case KEY_DIRATIME:
		o->fs.nodiratime = 0;
		return 0;
	case KEY_SYNC:
		o->fs.sync = 1;
		return 1;
	case KEY_ASYNC:
		o->fs.sync = 0;
		return 1;
	case KEY_DIRSYNC:
		o->fs.dirsync = 1;
		return 1;
	case KEY_RO:
		o->ro = 1;
		return 1; /* also a kernel mount option */
	case KEY_RW:
		o->ro = 0;
		return 0;
	case KEY_DEGRADED: /* always read-only (mirror.c): the kernel mount too */
		o->degraded = 1;
		return fuse_opt_add_arg(out, "-oro") ? -1 : 0;
	case KEY_FG:
		o->foreground = 1;
		return 0;
	case KEY_DEBUG:
		o->debug = o->foreground = 1;
		return 0;
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_VERSION:
		o->version = 1;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		/* MEMBER,MEMBER MOUNTPOINT or MEMBER MEMBER ... MOUNTPOINT (as mkfs.dmafs takes
		 * them): the last word is the mount point, the ones before it the members */
		if (o->mountpoint) {
			char *m = o->members;

			if (asprintf(&o->members, "%s%s%s", m ? m : "", m ? "," : "", o->mountpoint) < 0) {
				o->members = m;
				return -1;
			}
			free(m);
			free(o->mountpoint);
		}
		o->mountpoint = strdup(arg);
		return o->mountpoint ? 0 : -1;
	case FUSE_OPT_KEY_OPT:
		if (!strncmp(arg, "attr_timeout=", 13)) {
			o->attr_timeout = atof(arg + 13);
			return 0;
		}
		if (!strncmp(arg, "entry_timeout=", 14)) {
			o->entry_timeout = atof(arg + 14);
			return 0;
		}
		return 1;
	}
	return 1;
}

/*
 * The first block is what a first mount needs; the rest is grouped by what it is about.
 * tests/help_man.sh checks that every -o option here is in dmafs(8)'s OPTIONS and every
 * one there, and every one opt_spec takes, is here: add an option to all three.
 */
void options_usage(FILE *f)
{
	fprintf(f,
		"usage: dmafs [-f] [-d] [-o OPTION[,OPTION...]] MEMBER[,MEMBER...] MOUNTPOINT\n"
		"       dmafs [-f] [-d] [-o OPTION[,OPTION...]] MEMBER [MEMBER...] MOUNTPOINT\n"
		"       dmafs [-f] [-d] [-o OPTION[,OPTION...]] LABEL=LABEL|UUID=UUID MOUNTPOINT\n"
		"\n"
		"Mount the dmafs filesystem made of MEMBERs (in order) at MOUNTPOINT, or the one\n"
		"with that label or UUID, its members found on the block devices (also spelled\n"
		"dmafs:LABEL=LABEL and dmafs:UUID=UUID, which mount(8) and fstab pass on as they are).\n"
		"For example:  dmafs /dev/nvme0n1,/dev/nvme1n1 /data\n"
		"              dmafs -o allow_other,tier=16G LABEL=models /models\n"
		"\n"
		"Most used:\n"
		"  -o ro               read-only\n"
		"  -o degraded         mount a mirror with a member missing (read-only)\n"
		"  -o allow_other      let other users access the mount\n"
		"  -o tier=SIZE|N%%     keep up to SIZE bytes (or N%% of the RAM) of placed files\n"
		"                      in the daemon's memory: placing them again copies from\n"
		"                      there instead of reading the members (default 0: off)\n"
		"  -o threads=N        FUSE worker threads (default: 2 per CPU, 4 to 16)\n"
		"  -o writeback_cache  let the kernel batch writes in its page cache (faster\n"
		"                      buffered writes; unsynced data dies with the daemon)\n"
		"  -o verify_place     placements check every block's checksum too, in host\n"
		"                      memory (costs CPU; the GPU direct path is not used)\n"
		"  -f                  stay in the foreground\n"
		"  -h, --help          this text\n"
		"  -V, --version       the version of dmafs and of its on-disk format\n"
		"\n"
		"Writes and durability:\n"
		"  -o commit=SECONDS   metadata commit interval (default 5)\n"
		"  -o sync, dirsync, async  every change (sync) or every directory change\n"
		"                      (dirsync) is committed to the members before it returns;\n"
		"                      async (the default) undoes sync\n"
		"  -o writebehind_mb=N memory for writes accepted before they reach the members\n"
		"                      (default 256; 0: every write waits for its members)\n"
		"  -o wronly_cache     write-only opens go through the kernel's page cache too\n"
		"                      (by default they bypass it: one copy fewer per write)\n"
		"  -o sync_dio         no asynchronous O_DIRECT through the kernel: slower large\n"
		"                      O_DIRECT calls, but a buffered reader never keeps stale\n"
		"                      pages after an aio O_DIRECT write (see dmafs(8))\n"
		"\n"
		"Reads, access times and kernel caches:\n"
		"  -o readahead_kb=N   kernel readahead on the mount (default 16384)\n"
		"  -o max_background=N the kernel's readahead and other asynchronous requests\n"
		"                      in flight to the daemon at most (default 256)\n"
		"  -o open_fill_kb=N   files up to N KiB opened for reading get their data into\n"
		"                      the kernel's page cache with the open (default 128; 0: off)\n"
		"  -o relatime|strictatime|noatime, nodiratime  when reads update access\n"
		"                      times (default relatime)\n"
		"  -o atime, nostrictatime, diratime  undo noatime, strictatime, nodiratime\n"
		"  -o norelatime, lazytime, nolazytime  accepted; they change nothing\n"
		"  -o attr_timeout=S, entry_timeout=S   kernel cache timeouts (default 1)\n"
		"  -o noacl            POSIX ACLs off (not shown, set or enforced): ls -l asks\n"
		"                      the daemon nothing per file; acl (the default): on\n"
		"  -o nolistxattr      names of extended attributes not listed (values still\n"
		"                      read and written by name): ls -l of coreutils 9.4\n"
		"                      asks the daemon nothing per file; listxattr: listed\n"
		"  -o no_handles       file handles of inodes the kernel has cached only (for\n"
		"                      an overlayfs lower layer; see dmafs(8))\n"
		"\n"
		"Placements into GPU and host memory:\n"
		"  -o staging_mb=N     pinned staging memory per GPU for placements (default 64)\n"
		"  -o copy_delay_us=N  a staged piece waits N us before its copy to the GPU\n"
		"                      (default 300; 0: at once)\n"
		"  -o gpu_setup=mount|first_use  set up every GPU's staging in the background\n"
		"                      at mount (default), or at its first placement\n"
		"  -o p2p=auto|off|force  cuFile direct path: when nvidia-fs is loaded (auto),\n"
		"                      never, or always (testing: without nvidia-fs cuFile\n"
		"                      bounces through host memory; placements say p2p-compat)\n"
		"  -o place_threads=N  threads that run registrations and placements, apart\n"
		"                      from the FUSE workers (default: as many as threads)\n"
		"  -o place_queue=N    requests of one user that may wait for them (default 256)\n"
		"  -o place_threads_user=N  of those threads, how many one user's requests may\n"
		"                      hold at once (default: all but one)\n"
		"  -o reg_max=N, reg_max_user=N  registrations on the mount (default 8192) and\n"
		"                      per user (default 4096)\n"
		"  -o reg_bytes=SIZE, reg_bytes_user=SIZE  host buffer bytes registered on the\n"
		"                      mount (default twice the RAM) and per user (default the RAM)\n"
		"\n"
		"Warm tier (with tier=):\n"
		"  -o tier_min_free=SIZE|N%%  while the machine has less memory available, the\n"
		"                      tier gives memory back and takes no more (default 5%%\n"
		"                      of the RAM, at least 1G or 10%% of the RAM; 0: never)\n"
		"  -o tier_pin=all|fill  on a GPU machine, pin the whole tier when the GPU\n"
		"                      runtime is set up, so that first loads do not wait for\n"
		"                      pinning (all, the default), or only as fills come (fill)\n"
		"  -o tier_fill=idle|now  what placements missed is read again into the tier\n"
		"                      once no placement has run for 50 ms (idle, the default:\n"
		"                      first loads at the drives' rate), or placements fill it\n"
		"                      as they read (now: slower first loads)\n"
		"\n"
		"Mounts, users and permissions:\n"
		"  -o rw               read-write (the default)\n"
		"  -o fsname=NAME      source shown in /proc/mounts\n"
		"  -o user=NAME        the user mount(8) mounts for: recorded in\n"
		"                      /run/mount/utab, where umount(8) looks for it\n"
		"  -o user, users, owner, group  a mount for users (nosuid,nodev, as mount(8))\n"
		"  -o nosuid, nodev, noexec, dev, suid, exec  kernel mount flags (root's mounts\n"
		"                      are suid,dev, as a kernel filesystem's; mounts by other\n"
		"                      users and with user, users, owner, group are nosuid,nodev)\n"
		"  -o default_permissions  the kernel checks permissions (always so; accepted)\n"
		"  -o defaults, auto, noauto, nouser, nofail, _netdev  fstab words: ignored\n"
		"\n"
		"Debugging:\n"
		"  -d, -o debug        libfuse's trace of every request (implies -f)\n"
		"  -o verbose          log the daemon's own debugging messages (placement\n"
		"                      pipeline statistics among them) without -d's trace\n"
		"\n"
		"dmafs --remount [-v] -o OPTIONS MOUNTPOINT  (run by mount -o remount through\n"
		"mount.dmafs) changes ro/rw and the options above of a running mount.\n"
		"See dmafs(8).\n");
}


/* FUSE worker threads when threads= is not given: two per CPU this process may run on
 * (one works while the other waits for its member reads), at least 4 and at most 16
 * (dmafs(8) gives the measurements behind the bounds). */
static unsigned default_threads(void)
{
	cpu_set_t set;
	long n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n <= 2 ? 4 : n >= 8 ? 16 : (unsigned)(2 * n);
}

/* @s up to @end (or its end when NULL) with control characters and backslashes escaped. */
static void put_escaped(FILE *f, const char *s, const char *end)
{
	for (const unsigned char *c = (const unsigned char *)s; *c && (!end || c < (const unsigned char *)end); c++) {
		if (*c == '\n')
			fputs("\\n", f);
		else if (*c == '\t')
			fputs("\\t", f);
		else if (*c == '\\')
			fputs("\\\\", f);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(f, "\\x%02x", *c);
		else
			fputc(*c, f);
	}
}

/*
 * A control character (0x01-0x1f, 0x7f) in an argument would split a line of a log or of
 * the mount table, or reach a terminal as an escape sequence: refuse it before anything
 * runs, naming the option (one comma-separated piece of a -o argument) or the argument.
 * mount.dmafs refuses the same. Returns 0 or 1 (refused, said on stderr).
 */
int options_refuse_control(int argc, char *argv[])
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *c = a, *start, *end;
		int opt = i > 1 && !strcmp(argv[i - 1], "-o");

		while (*c && (unsigned char)*c >= 0x20 && *c != 0x7f)
			c++;
		if (!*c)
			continue;
		if (!strncmp(a, "-o", 2) && a[2])
			a += 2, opt = 1;
		start = a;
		end = NULL;
		if (opt) {
			/* the comma-separated piece with the character in it */
			for (const char *p = a; p < c; p++)
				if (*p == ',')
					start = p + 1;
			end = strchr(c, ',');
		}
		fprintf(stderr, "dmafs: %s \"", opt ? "option" : "argument");
		put_escaped(stderr, start, end);
		fprintf(stderr, "\" contains a control character: refused\n");
		return 1;
	}
	return 0;
}

int options_parse(struct options *o, struct fuse_args *args)
{
	*o = (struct options){ .fs = { .commit_interval = 5, .writebehind_mb = 256 },
			       .threads = THREADS_AUTO, .readahead_kb = 16384, .max_background = 256, .open_fill_kb = 128, .staging_mb = 64,
			       .copy_delay_us = PIPELINE_COPY_DELAY_US, .attr_timeout = 1.0,
			       .entry_timeout = 1.0 };
	if (fuse_opt_parse(args, o, opt_spec, opt_proc) == -1)
		return -1;
	if (o->mountpoint && !o->members) { /* one word: the members, no mount point */
		o->members = o->mountpoint;
		o->mountpoint = NULL;
	}
	if (o->mountpoint) {
		char *real = realpath(o->mountpoint, NULL);

		if (!real) {
			fprintf(stderr, "dmafs: mount point %s: %s\n", o->mountpoint, strerror(errno));
			return -1;
		}
		free(o->mountpoint);
		o->mountpoint = real;
	}
	return 0;
}

/*
 * tier=SIZE (512M, 8G) or N% of the RAM: the warm tier's bytes in o->tier_bytes, whole
 * chunks. 0 is off; otherwise at least one chunk and at most 90% of the RAM, so that a
 * typo cannot have the daemon take the machine's memory.
 * tier_min_free=SIZE or N% (0 to 100) in o->tier_min_free_bytes; by default 5% of the
 * RAM, but at least 1 GiB or 10% of the RAM, whichever is less: enough for the kernel and
 * the jobs that load models beside the tier. Any size is taken: one above the RAM keeps
 * the tier empty (main.c notes it). Returns 0 or -1 (said).
 */
static int check_tier(struct options *o)
{
	uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	const char *s = o->tier;
	uint64_t v = 0;

	o->tier_min_free_bytes = MAX(ram / 20, MIN(ram / 10, 1ull << 30));
	if (o->tier_min_free && util_parse_size_pct(o->tier_min_free, ram, &o->tier_min_free_bytes)) {
		fprintf(stderr, "dmafs: tier_min_free=%s: want a size (such as 0, 512M, 4G) or a percentage of the RAM from 0%% to 100%% (such as 5%%)\n",
			o->tier_min_free);
		return -1;
	}
	if (o->tier_pin && strcmp(o->tier_pin, "all") && strcmp(o->tier_pin, "fill")) {
		fprintf(stderr, "dmafs: tier_pin=%s: want all (pin the whole tier when a GPU runtime is set up) or fill (pin as fills come)\n",
			o->tier_pin);
		return -1;
	}
	if (o->tier_fill && strcmp(o->tier_fill, "now") && strcmp(o->tier_fill, "idle")) {
		fprintf(stderr, "dmafs: tier_fill=%s: want now (placements fill the tier as they read) or idle (the tier is filled once placements are idle)\n",
			o->tier_fill);
		return -1;
	}
	o->fs.tier_fill_idle = !o->tier_fill || !strcmp(o->tier_fill, "idle");
	if (!s)
		return 0;
	if (util_parse_size_pct(s, ram, &v) || (v && v < TIER_CHUNK) || v > ram / 10 * 9) {
		fprintf(stderr, "dmafs: tier=%s: want 0 (off), or a size (such as 512M, 8G) or a percentage of the RAM (such as 25%%) of at least 1M and at most 90%% of the RAM (%llu MiB)\n",
			s, (unsigned long long)(ram >> 20));
		return -1;
	}
	o->tier_bytes = v / TIER_CHUNK * TIER_CHUNK;
	return 0;
}

int options_check(struct options *o)
{
	if (o->threads == THREADS_AUTO)
		o->threads = default_threads();
	if (!o->place_threads)
		o->place_threads = o->threads;
	if (!o->place_queue)
		o->place_queue = PLACEQ_PER_USER;
	if (o->place_threads > 1024 || o->place_queue > 65536) {
		fprintf(stderr, "dmafs: place_threads must be 1..1024 and place_queue 1..65536\n");
		return -1;
	}
	{
		/* each option out of its range is named with the value given */
		const struct {
			const char *name, *unit;
			unsigned v, lo, hi;
		} r[] = {
			{ "threads", "", o->threads, 1, 1024 },
			{ "commit", " seconds", o->fs.commit_interval, 1, 3600 },
			{ "staging_mb", " MiB", o->staging_mb, 4, 65536 },
			{ "writebehind_mb", " MiB", o->fs.writebehind_mb, 0, 65536 },
			{ "copy_delay_us", " microseconds", o->copy_delay_us, 0, 100000 },
			{ "open_fill_kb", " KiB", o->open_fill_kb, 0, 1024 },
			{ "max_background", " requests", o->max_background, 1, 65535 },
		};
		int bad = 0;

		for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
			if (r[i].v < r[i].lo || r[i].v > r[i].hi) {
				/* a negative value given reads back as a large one: shown as given */
				fprintf(stderr, "dmafs: %s=%lld: want %u to %u%s (see dmafs --help)\n",
					r[i].name, r[i].v > INT_MAX ? (long long)(int)r[i].v : (long long)r[i].v,
					r[i].lo, r[i].hi, r[i].unit);
				bad = 1;
			}
		if (bad)
			return -1;
	}
	if (!o->place_threads_user)
		o->place_threads_user = PLACEQ_USER_THREADS(o->place_threads);
	if (o->place_threads_user > o->place_threads) {
		fprintf(stderr, "dmafs: place_threads_user=%u is more than place_threads=%u: give at most %u (see dmafs --help)\n",
			o->place_threads_user, o->place_threads, o->place_threads);
		return -1;
	}
	if (o->p2p && strcmp(o->p2p, "auto") && strcmp(o->p2p, "off") && strcmp(o->p2p, "force")) {
		fprintf(stderr, "dmafs: p2p=%s: want auto, off or force\n", o->p2p);
		return -1;
	}
	if (o->gpu_setup && strcmp(o->gpu_setup, "mount") && strcmp(o->gpu_setup, "first_use")) {
		fprintf(stderr, "dmafs: gpu_setup=%s: want mount or first_use\n", o->gpu_setup);
		return -1;
	}
	return check_tier(o);
}
