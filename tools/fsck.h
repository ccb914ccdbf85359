/* SPDX-License-Identifier: MIT */
/*
 * fsck.h - what dmafs-fsck's files share: fsck.c checks the superblocks, the log and the
 * metadata; fsck-scrub.c reads every data block (--scrub) and, on a mirror, rewrites a
 * bad copy from the good one; fsck-problem.c holds what both use (the members, the
 * problems found, paths for messages).
 */
#ifndef DMAFS_TOOLS_FSCK_H
#define DMAFS_TOOLS_FSCK_H

#include <stdint.h>

#include "io/member.h"
#include "store/meta.h"

/* How much to repair: nothing (-n), what loses nothing (fsck -p), everything (--repair). */
enum { REPAIR_NONE, REPAIR_SAFE, REPAIR_ALL };
/* What a problem's repair costs: none exists, it may lose data, it loses nothing. */
enum { FIX_NONE, FIX_ANY, FIX_SAFE };

extern int repair, quiet, tty;
extern unsigned errors, fixed; /* problems found, and repaired in this run */
extern struct member *ms; /* the members, in order */
extern struct meta meta;  /* the metadata, replayed */

/* Each inode's place in the tree, for paths in messages (fsck.c fills them). */
struct parent {
	uint64_t dir;
	const char *name;
	unsigned refs;
	unsigned subdirs;
};
extern struct parent *parents; /* [0, maxino] */
extern uint64_t maxino;
struct parent *par(uint64_t ino);

/* Is a problem of @level repaired in this run? */
int fixes(int level);
/* One problem: "FIXED: msg done" when this run repairs it, "ERROR: msg" when not. */
void problem(int level, const char *done, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Print the problems held back (fsck -p), as repaired when @written, else as errors. */
void flush_problems(int written);
/* The path of inode @ino, for messages ("<inode N>/..." where unknown). */
const char *path_of(uint64_t ino, char *buf, size_t len);
/* --scrub: read every data block and check it (both copies of a mirror, the bad one
 * rewritten from the good with --repair). 0, or -ENOMEM. */
int scrub_all(void);

#endif
