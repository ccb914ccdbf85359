/* SPDX-License-Identifier: MIT */
/*
 * tool.h - what the C tools share: error messages on standard error that start with the
 * tool's name, and each tool's exit codes as its manual page lists them under EXIT
 * STATUS (scripts and umount(8) act on them: change a code only with its page).
 */
#ifndef DMAFS_TOOL_H
#define DMAFS_TOOL_H

/* dmafs-load(1): a verify mismatch outranks an error. */
enum { LOAD_EXIT_OK = 0, LOAD_EXIT_ERR = 1, LOAD_EXIT_MISMATCH = 2 };
/* dmafs-check(1): MISSING is a --require or --list verdict, ERR an operational error. */
enum { CHECK_EXIT_OK = 0, CHECK_EXIT_MISSING = 1, CHECK_EXIT_ERR = 2 };
/* mkfs.dmafs(8) */
enum { MKFS_EXIT_OK = 0, MKFS_EXIT_ERR = 1 };
/* dmafs-label(8) */
enum { LABEL_EXIT_OK = 0, LABEL_EXIT_ERR = 1 };
/* dmafs-replace(8): DAMAGED, rebuilt but some blocks had no good copy. */
enum { REPLACE_EXIT_OK = 0, REPLACE_EXIT_ERR = 1, REPLACE_EXIT_DAMAGED = 2 };
/* dmafs-fsck(8), as e2fsck(8): fsck(8) and boot scripts read them; USAGE only as fsck.dmafs. */
enum { FSCK_EXIT_OK = 0, FSCK_EXIT_FIXED = 1, FSCK_EXIT_UNFIXED = 4, FSCK_EXIT_ERR = 8, FSCK_EXIT_USAGE = 16 };
/* umount.dmafs(8): umount(8) passes them on; 1 and 32 mean what they mean for mount(8). */
enum {
	UMOUNT_EXIT_OK = 0,
	UMOUNT_EXIT_USAGE = 1,	    /* bad invocation or not permitted */
	UMOUNT_EXIT_UNFINISHED = 2, /* unmounted, but the daemon did not finish cleanly */
	UMOUNT_EXIT_FAIL = 32,	    /* not unmounted: not mounted, not dmafs, busy */
};
/* dmafs-bench-place, the measuring half of dmafs-bench(1). */
enum { BENCH_EXIT_OK = 0, BENCH_EXIT_ERR = 1 };

/*
 * The name messages start with, once at the top of main(): the tool's own, or the one it
 * was run by where several lead to it (umount.dmafs, umount.fuse.dmafs). @name must
 * outlive the process (a literal or argv[0]); a path is cut to its last component.
 */
void tool_init(const char *name);
const char *tool_name(void);
/* "NAME: message\n" on standard error. */
void tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A progress bar on standard error (the caller draws it only on a terminal): "WHAT [###  ]
 * 42% 1.23/3.00 GB 2.10 GB/s 0:01 left", @done of @total bytes since @elapsed_s seconds.
 * @final ends it: the line is cleared. Call it a few times a second, not per piece.
 */
void tool_progress(const char *what, unsigned long long done, unsigned long long total,
		   double elapsed_s, int final);

#endif
