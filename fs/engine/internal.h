/* SPDX-License-Identifier: MIT */
/* internal.h - what the engine's files share among themselves; nothing above the engine uses it. */
#ifndef DMAFS_ENGINE_INTERNAL_H
#define DMAFS_ENGINE_INTERNAL_H

#include "engine/acl.h"
#include "engine/engine.h"
#include "io/uring.h"

#define REC_ROOM 1024 /* log bytes reserved for one namespace operation */
#define ACL_ROOM (ACL_MAX_BYTES + 128) /* log bytes for one ACL xattr record */
#define LAYOUT_XATTR "user.dmafs.layout"
#define TIER_XATTR "user.dmafs.tier" /* bytes of the file in the warm tier (read-only) */
#define TIER_MIN_FREE_XATTR "user.dmafs.tier_min_free" /* the root's: root may set it */
#define MEMBERS_XATTR "user.dmafs.members" /* the filesystem's UUID, label, space per member */
#define CAPS_XATTR "security.capability"
#define MAX_OPS 64 /* member I/Os one request keeps on its stack */
/* Checksum buffers up to this size stay with the thread for its next request. */
#define CSUM_KEEP (256u << 10)

/* records.c: log one change of an inode; caller holds meta.lock (fs_begin) */
int rec_attr(struct fs *fs, struct inode *ino);
int rec_touch(struct fs *fs, struct inode *ino, int64_t now); /* mtime and ctime of a dir */
int rec_link(struct fs *fs, uint64_t dir, uint64_t ino, const char *name);
int rec_unlink(struct fs *fs, uint64_t dir, const char *name);
int rec_xset(struct fs *fs, uint64_t ino, const char *name, const void *val, size_t len);
int rec_xdel(struct fs *fs, uint64_t ino, const char *name);
/* The xattr @name of @ino, or NULL. */
struct xattr *rec_xattr(const struct inode *ino, const char *name);
/* Free an inode nobody can reach or use any more. */
void rec_maybe_drop(struct fs *fs, struct inode *ino);
/* @ino (NULL if gone), after waiting for what write-behind holds of it; *@err gets its
 * background write error (taken, with @take_err) or 0. */
struct inode *fs_wait_written(struct fs *fs, uint64_t ino, int take_err, int *err);
/* A change of @ino's size waits for a fill of it to end (file.c, fs_open_fill). */
void fs_fill_wait(struct fs *fs, uint64_t ino);

/* A growing list of member I/Os with the file offset of each (read.c). */
struct opvec {
	struct uring_op *op;
	uint64_t *foff;
	size_t n, cap;
	struct uring_op sop[MAX_OPS];
	uint64_t sfoff[MAX_OPS];
};
void opvec_init(struct opvec *v);
void opvec_free(struct opvec *v);
int opvec_push(struct opvec *v, const struct uring_op *op, uint64_t foff);
/* Submit @ops and wait; a failure is logged (fs_io_error, @what) for the op that failed. */
int run_ops(struct fs *fs, const struct inode *ino, struct uring_op *ops, size_t n,
	    const uint64_t *foffs, const char *what);

/* read.c: per-thread aligned buffers, reused (0: read data, 1: write data, 2: checksums) */
void *fs_thread_buf(int which, size_t len);

#endif
