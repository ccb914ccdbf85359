/* SPDX-License-Identifier: MIT */
/*
 * meta.h - the in-memory metadata: inodes, directories, extent maps, xattrs. Every change
 * is a format record applied by meta_apply(), both live (after the record is appended to
 * the journal) and at replay, so the log and memory cannot disagree.
 *
 * Locking: meta.lock protects every field below that is not marked otherwise. Lock order:
 * inode->iolock, then journal commit lock, then journal inplace lock, then meta.lock, then
 * alloc.lock.
 */
#ifndef DMAFS_META_H
#define DMAFS_META_H

#include <pthread.h>
#include <stdint.h>

#include "store/alloc.h"
#include "util/rwlock.h"
#include "format/format.h"
#include "util/hash.h"

struct extent {
	uint64_t off;	 /* file offset, block aligned */
	uint32_t len;	 /* bytes, block multiple; never crosses a stripe-unit boundary */
	uint32_t member;
	uint64_t moff;	 /* member byte offset */
};

struct xattr {
	struct xattr *next;
	char *name;
	void *val;
	size_t len;
};

struct dentry {
	struct hnode h; /* key: fmt_hash(name) */
	uint64_t ino;
	uint32_t slot;	/* index in dir->slots */
	uint16_t namelen;
	char name[];	/* NUL terminated */
};

/*
 * Directory entries in creation order, for readdir. Each entry gets a cookie when it is
 * made, from a counter that only grows, and keeps it while it lives: the offset readdir
 * hands out after an entry is its cookie + 3 ("." and ".." are 1 and 2), so an offset
 * stays valid across creates, unlinks and slot compaction, also in another open of the
 * directory (telldir/seekdir, NFS). Cookies start again from 0 at each mount.
 */
struct dir {
	struct htab names;
	struct dentry **slots; /* creation order; NULL where removed */
	uint64_t *cookies;     /* cookie of each slot (removed ones too): increasing */
	uint64_t next_cookie;
	size_t nslots, capslots, holes;
	size_t count;
	uint64_t parent;
	unsigned nopen;	/* walks of the slots inside the daemon; no compaction meanwhile */
};

struct wbi;
struct tier_chunk;

struct inode {
	struct hnode h; /* key: ino */
	uint64_t ino;
	struct fmt_attr a;
	char *symlink;
	struct extent *ext; /* sorted by off, non-overlapping */
	uint32_t next, capext;
	struct xattr *xattrs;
	struct dir *dir;
	uint64_t parent;  /* not a directory: the directory its latest name was made in */
	const struct dentry *name; /* not a directory: that name (NULL once it is removed) */
	uint64_t nlookup; /* kernel references (FUSE lookup count) */
	/*
	 * Held shared by readers, exclusive by writers and truncate, around member I/O. A
	 * waiting writer goes before new readers: readers that keep coming (placements of a
	 * file, by any user who may read it) cannot hold its writers off for good. Nothing
	 * takes it shared twice in one thread, which that rule would deadlock.
	 */
	struct dm_rwlock iolock;
	/*
	 * File blocks [fresh_lo, fresh_hi) were all allocated by changes of journal epoch
	 * fresh_epoch: while that epoch lasts, no durable metadata refers to them, so they may
	 * be rewritten in place (engine/write.c). Changed under iolock held exclusively.
	 */
	uint64_t fresh_lo, fresh_hi, fresh_epoch;
	struct wbi *wb; /* write-behind state (wback.c); changed under meta.lock */
	/* What the warm tier holds of the file (engine/tier.h): */
	uint64_t tier_gen;	      /* bumped by every change of the data; atomic */
	struct tier_chunk *tier_list; /* those chunks; under the tier's lock */
	uint32_t tier_n;	      /* chunks held; atomic, changed under the tier's lock */
	unsigned nopen;		      /* open file handles */
	uint32_t xattr_bytes;	 /* names and values of xattrs (bounded by the log) */
	unsigned char atime_dirty; /* a.atime changed, not logged yet (atime.c); meta.lock */
	/* had several names since the mount: the kernel revalidates its names (fuse/ops.h) */
	unsigned char several_names;
	/*
	 * open_fill (engine/file.c fs_open_fill): the file's data is being sent to the kernel
	 * with an open's reply; other opens and size changes wait (meta.lock, fs->fill_cond).
	 */
	unsigned char filling;
	/* The kernel may hold pages of the file: a read was answered or its data sent since
	 * the kernel last forgot the inode (a hint: set atomically, cleared under meta.lock). */
	unsigned char kpages;
};

struct meta {
	pthread_mutex_t lock;
	struct htab inodes;
	uint64_t next_ino;
	uint32_t stripe_unit;
	unsigned nmembers;
	struct alloc *alloc; /* NULL during replay: frees are not tracked then */
	/*
	 * Replay (meta_defer_names): the names made by LINK records, for their inodes to
	 * learn in the table's order rather than one random lookup each (a million files'
	 * links took half their replay so).
	 */
	struct meta_name_fix *fix;
	size_t nfix, capfix;
	int defer_names;
};

int meta_init(struct meta *m, uint32_t stripe_unit, unsigned nmembers);
void meta_destroy(struct meta *m);
struct inode *meta_iget(struct meta *m, uint64_t ino);
/* Prefetch for a meta_iget of @ino (htab_prefetch): replay looks records up ahead. With
 * @node 0 the bucket; with 1 the inode's fields that replaying a record touches. */
void meta_iget_prefetch(const struct meta *m, uint64_t ino, int node);
/* Room for @n inodes in the table by number (replay, from a snapshot's length). */
void meta_reserve(struct meta *m, size_t n);
/*
 * From now on (replay), an inode learns the name a LINK record gives it (inode->parent,
 * ->name; a directory's parent) only when a record of another kind comes or at
 * meta_names_done, all together in the table's order. Nothing reads those fields
 * meanwhile.
 */
void meta_defer_names(struct meta *m);
/* Give the inodes their deferred names and stop deferring. */
void meta_names_done(struct meta *m);
/*
 * Apply one record. Returns 0, -ENOMEM, or -EUCLEAN when the record does not fit the
 * current state (replay of damaged metadata; never for records built by the live code).
 */
int meta_apply(struct meta *m, const struct fmt_rec *r);
struct dentry *meta_lookup(struct inode *dir, const char *name, size_t len);
/* Encode the whole state as records (inodes, symlinks, extents, xattrs, then links). */
int meta_snapshot(struct meta *m, struct buf *b);
/* Index of the first extent ending after @off. */
size_t meta_ext_find(const struct inode *ino, uint64_t off);
/* Member of file stripe unit @k. */
static inline uint32_t meta_slot_member(const struct meta *m, const struct inode *ino, uint64_t k)
{
	return (ino->a.start_member + k) % m->nmembers;
}
/* Fill attrs into a record of type INODE for @ino. */
void meta_inode_rec(const struct inode *ino, struct fmt_rec *r);
/* Index of the first slot of @d whose cookie is @cookie or more (nslots if none). */
size_t meta_dir_seek(const struct dir *d, uint64_t cookie);
/*
 * After replay: delete inodes with nlink 0 (orphans of a crash), drop entries pointing at
 * missing inodes, and fix directory parents. Returns the number of repairs made.
 */
int meta_cleanup(struct meta *m, void (*report)(const char *msg));
/* Iterate all inodes: calls fn until it returns non-zero; returns that value. */
int meta_for_each(struct meta *m, int (*fn)(struct inode *, void *), void *arg);

#endif
