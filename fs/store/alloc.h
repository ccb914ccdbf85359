/* SPDX-License-Identifier: MIT */
/*
 * alloc.h - per-member free-space allocator. The free map is not stored on disk: the
 * daemon and dmafs-fsck rebuild it from the extent maps at mount, so it can never
 * disagree with the metadata. Units are bytes, always multiples of DMAFS_BLOCK.
 */
#ifndef DMAFS_ALLOC_H
#define DMAFS_ALLOC_H

#include <pthread.h>
#include <stdint.h>

#include "format/format.h"

struct alloc_range {
	uint64_t off, len;
};

struct alloc_member {
	struct alloc_range *free; /* sorted by off, non-adjacent; protected by alloc.lock */
	size_t n, cap;
	size_t cursor; /* next-fit position into free[] */
	uint64_t start, end, free_bytes;
};

struct alloc_deferred {
	uint32_t member;
	uint64_t off, len;
};

struct alloc {
	pthread_mutex_t lock;
	unsigned nmembers;
	struct alloc_member m[FMT_MAX_MEMBERS];
	/* Space freed by records not yet durable; see alloc_defer(). Protected by lock. */
	struct alloc_deferred *deferred;
	size_t ndeferred, capdeferred;
};

/* Everything in [start[i], end[i]) free on each member. Returns 0 or -ENOMEM. */
int alloc_init(struct alloc *a, unsigned nmembers, const uint64_t *start, const uint64_t *end);
void alloc_destroy(struct alloc *a);
/*
 * Mark [off, off+len) on @member in use while rebuilding from extent maps. Returns 0, or
 * -EUCLEAN when part of the range is outside the data region or already in use (an overlap
 * or a doubly-owned extent: the metadata is damaged).
 */
int alloc_mark_used(struct alloc *a, uint32_t member, uint64_t off, uint64_t len);
/*
 * Mark all of @used (@n ranges sorted by off) in use on @member, whose free space is still
 * the whole data region: the free ranges are the gaps, made in one pass. Returns 0,
 * -ENOMEM, or -EUCLEAN with *@bad the index of the first range outside the data region or
 * overlapping the one before it.
 */
int alloc_set_used(struct alloc *a, uint32_t member, const struct alloc_range *used, size_t n,
		   size_t *bad);
/*
 * Allocate up to @want bytes on @member, at @goal when that offset is free (so a file's run
 * stays contiguous), otherwise next-fit, preferring a free range that holds all of @want.
 * Returns the length allocated (> 0, <= want) with *off set, or -ENOSPC.
 */
int64_t alloc_get(struct alloc *a, uint32_t member, uint64_t goal, uint64_t want, uint64_t *off);
/*
 * Allocate @len bytes on @member in at most @max pieces, the largest free ranges first
 * (the log areas): piece i at @off[i], @plen[i] bytes. Returns the number of pieces, or
 * -ENOSPC (not enough in @max pieces; nothing kept) or -EINVAL.
 */
int alloc_get_pieces(struct alloc *a, uint32_t member, uint64_t len, unsigned max, uint64_t *off,
		     uint64_t *plen);
/* Return space to the free map immediately (only for space never made durable). */
void alloc_put(struct alloc *a, uint32_t member, uint64_t off, uint64_t len);
/* Queue space freed by a metadata record; it becomes allocatable at alloc_release_deferred. */
void alloc_defer(struct alloc *a, uint32_t member, uint64_t off, uint64_t len);
/* Take the queue (caller owns the array) at commit start; release it once durable. */
size_t alloc_take_deferred(struct alloc *a, struct alloc_deferred **out);
/* Is freed space waiting for the next commit? */
int alloc_has_deferred(struct alloc *a);
void alloc_release_deferred(struct alloc *a, struct alloc_deferred *d, size_t n);
uint64_t alloc_free_bytes(struct alloc *a);
uint64_t alloc_member_free(struct alloc *a, uint32_t member);

#endif
