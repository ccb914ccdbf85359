/* SPDX-License-Identifier: MIT */
/*
 * tier-int.h - what the warm tier's files share: its chunks, segments and pinners, and
 * the calls of tier-seg.c (segments populated, pinned and released, the preparers) that
 * tier.c (chunks: lookups, fills, invalidation, memory pressure) makes. tier.c calls
 * tier-seg.c, never the reverse. Nothing outside the tier's files includes it.
 */
#ifndef DMAFS_ENGINE_TIER_INT_H
#define DMAFS_ENGINE_TIER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tier.h"
#include "util/hash.h"

enum { C_FREE, C_RESERVED, C_LIVE, C_DEAD };

struct tier_chunk {
	struct hnode h;			/* key: key(ino, idx); in the table while LIVE */
	struct tier_chunk *prev, *next;	/* LRU list (LIVE), its segment's free list (FREE, next only) */
	struct tier_chunk *fprev, *fnext; /* the owner's chunks (LIVE) */
	struct inode *owner;		/* LIVE: whose data; cleared when it leaves */
	uint64_t ino, idx;
	uint32_t valid;			/* file bytes held from idx * TIER_CHUNK */
	uint32_t refs;
	int state;
};

/*
 * TIER_SEG_CHUNKS chunks of memory, pinned and released as one. Its chunks are in use
 * when they are not FREE (nfree < nchunks); a segment in use is never released.
 */
struct tier_seg {
	struct tier_chunk *free; /* its FREE chunks, lowest first at the start; lock */
	unsigned nchunks;	 /* chunks in it (the last segment may have fewer) */
	unsigned nfree;		 /* lock */
	int touched;		 /* a chunk was taken since the last release; lock (read
				    atomically under pin_lock) */
	int idle;		 /* had no chunk in use at the last tier_release_idle; lock */
	int releasing;		 /* being released: no chunk is taken; set and cleared under
				    both locks */
	unsigned scan;		 /* the tier_shrink() that last judged it; lock */
	int preparing;			 /* populated and pinned outside pin_lock by one thread
					    (prepare): no other pins it, none releases it; pin_lock */
	unsigned pinned, failed; /* bit i: pinner i pinned it / failed to; written under
				    pin_lock, read atomically */
};

struct pinner {
	tier_pin_fn pin;
	tier_unpin_fn unpin;
	void *arg;
};

/*
 * Lock order: pin_lock, then lock. Nothing is taken while holding lock; pin_lock is held
 * over the pinners' calls and madvise, never over a lookup.
 */
struct tier {
	pthread_mutex_t lock;
	pthread_mutex_t pin_lock;	/* pinning, unpinning, releasing segments */
	pthread_cond_t prepared;	/* a segment's preparing ended; with pin_lock */
	/* the preparers: threads that populate and pin segments ahead of the fills */
	pthread_mutex_t ahead_lock;
	pthread_cond_t ahead_cond;	/* with ahead_lock: ahead_gen moved, or stop */
	uint64_t ahead_gen;		/* bumped when fills move on to a new segment; ahead_lock */
	int stop;			/* ahead_lock */
	pthread_t *ahead;
	unsigned nahead;		/* preparers running */
	size_t ahead_chunks;		/* free chunks with memory they keep ready */
	uint64_t t_ahead;		/* when the first preparer started on a segment (ns) */
	size_t nprepared;		/* segments the preparers prepared; atomic */
	int pin_all;			/* they prepare every segment, and no empty one is
					   released while idle (tier_init); cleared by the first
					   tier_shrink; atomic */
	char *mem;			/* nchunks * TIER_CHUNK bytes */
	size_t nchunks, nsegs;
	struct tier_chunk *c;		/* the chunks' descriptors */
	struct tier_seg *seg;		/* the segments */
	struct htab tab;		/* LIVE chunks; lock */
	struct tier_chunk lru;		/* LIVE: lru.next most, lru.prev least recently used; lock */
	size_t nlive;			/* lock */
	unsigned scan;			/* tier_shrink() calls; lock */
	struct pinner pin[TIER_PINNERS]; /* pin_lock */
	unsigned pinners;		/* bit i: pin[i] is set; written under pin_lock, atomic */
	int short_mem;			/* tier_set_short; atomic */
	unsigned yielding;		/* placements pin_all's preparers wait for (tier_yield); atomic */
	uint64_t min_free;		/* atomic */
	uint64_t hits, misses, served, filled, evicted, shrunk; /* atomic */
};

_Static_assert(TIER_CHUNK % 4096 == 0, "chunks take O_DIRECT reads");

static inline char *seg_mem(const struct tier *t, const struct tier_seg *s)
{
	return t->mem + (size_t)(s - t->seg) * TIER_SEG;
}

static inline size_t seg_len(const struct tier_seg *s) { return (size_t)s->nchunks * TIER_CHUNK; }

/* tier-seg.c */

/* Start the preparers (< 0: half the CPUs, 1 to TIER_PREPARERS; 0: none). */
void start_preparers(struct tier *t, int want);
/* Wake the preparers: fills took the first chunk of a segment, or a pinner came. */
void kick_ahead(struct tier *t);
/* Pin @s, of which the caller has taken a chunk, by every pinner not done with it. */
void seg_pin(struct tier *t, struct tier_seg *s);
/* Mark @s for release when it may go; returns its bytes, or 0. Both locks held. */
uint64_t mark(struct tier_seg *s);
/* Unpin the marked segments and give their memory back. pin_lock held, t->lock not. */
void release_marked(struct tier *t);

#endif
