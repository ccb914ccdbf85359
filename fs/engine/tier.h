/* SPDX-License-Identifier: MIT */
/*
 * tier.h - the warm tier: file data kept in memory the daemon owns, so that a second
 * placement of a file copies it from memory instead of reading the members (mount option
 * tier=SIZE; dmafs(8), WARM TIER).
 *
 * The tier is one region of SIZE bytes cut into chunks of TIER_CHUNK bytes, each holding
 * the file bytes [idx * TIER_CHUNK, idx * TIER_CHUNK + valid) of one inode. The placement
 * pipeline (place/pipeline.h) looks pieces up here and fills whole chunks it reads from
 * the members, after their checksums verify. Every change of a file's data invalidates
 * the chunks it touches (tier_invalidate, tier_forget); those calls cost one NULL check
 * when the tier is off, and one atomic load when the file has nothing in the tier.
 *
 * Chunks: FREE (on the free list), RESERVED (taken by a fill, invisible to lookups),
 * LIVE (in the table, the LRU list and the owner's list) and DEAD (invalidated or
 * evicted while still referenced: freed by the last tier_put). A referenced chunk is
 * never evicted, so a copy out of it may run without the lock.
 *
 * Memory: the chunks are grouped in segments of TIER_SEG_CHUNKS. A fill takes a free chunk
 * of the lowest segment that has memory already (touched), else of the lowest untouched
 * one, so that what the tier holds stays in few segments. A segment with no chunk in use
 * (none RESERVED, LIVE or DEAD) can be released: its pages go back to the system with
 * madvise(MADV_DONTNEED) and read as zeros until a fill writes them again. The place
 * layer, which talks to the GPU runtimes, registers pinners (tier_add_pinner): a segment
 * is pinned by each before a fill reads into it, and unpinned before its memory is
 * released. Threads of the tier (preparers) populate and pin the next untouched segments
 * while the fills run, keeping a window of free pinned chunks ahead of them, so that a
 * first load does not wait for pinning; a fill that finds its segment unpinned pins it
 * itself. Pinning a segment waits for no lookup: the tier's lock is not held over it.
 *
 * Memory pressure (tier-press.c): while the machine's available memory is under the
 * tier's min_free, the tier takes no new chunks (tier_set_short) and gives back least
 * recently used ones a segment at a time (tier_shrink).
 *
 * The race rule: every invalidation bumps ino->tier_gen (after the change it stands for
 * is visible to readers), then removes the chunks. A fill reads tier_gen before its member
 * reads go out and publishes only when it is unchanged, under the tier's lock, so bytes
 * read before a change never enter the tier after the invalidation that followed it. The
 * engine invalidates under ino->iolock held exclusively and placements hold it shared, so
 * the rule is a second fence, not the only one.
 */
#ifndef DMAFS_TIER_H
#define DMAFS_TIER_H

#include <stdint.h>

#include "store/meta.h"

#define TIER_CHUNK (1u << 20) /* file-offset aligned; the placement pipeline's piece size */
#define TIER_SEG_CHUNKS 64    /* chunks per segment: the unit of pinning and of release */
#define TIER_SEG ((uint64_t)TIER_SEG_CHUNKS * TIER_CHUNK)
#define TIER_PINNERS 4	      /* at most this many pinners (one per GPU runtime) */
#define TIER_PREPARERS 8      /* at most this many threads pin segments ahead of fills */

/* The tier of one mount (tier.c); NULL where the mount has none. */
struct tier;
struct tier_chunk;

struct tier_stats {
	uint64_t size;	  /* bytes the tier may hold (whole chunks) */
	uint64_t held;	  /* bytes of the chunks it holds now */
	uint64_t hits;	  /* pieces placed from the tier */
	uint64_t misses;  /* pieces looked up and read from the members */
	uint64_t served;  /* bytes placed from the tier */
	uint64_t filled;  /* bytes that entered the tier */
	uint64_t evicted; /* chunks given up to make room or memory */
	uint64_t cap;	  /* bytes it may hold now: size, or held while memory is short */
	uint64_t resident; /* bytes of its touched segments: the memory it may take now */
	uint64_t pinned;   /* bytes of its segments pinned by every pinner there is (none: 0) */
	uint64_t shrunk;  /* bytes given back to the system because memory was short */
	uint64_t min_free; /* the available memory it leaves the machine (tier_set_min_free) */
};

/*
 * A pinner: pin (register for device copies) or unpin @len bytes at @mem, a segment that
 * is not in use elsewhere by the same pinner. pin returns 0 or -errno; a segment it failed
 * on stays usable (pageable) and is not tried again until it has been released.
 */
typedef int (*tier_pin_fn)(void *arg, void *mem, size_t len);
typedef void (*tier_unpin_fn)(void *arg, void *mem, size_t len);

/*
 * A tier of @bytes rounded down to whole chunks (at least one) in *@out, that leaves
 * @min_free bytes of the machine's memory available (tier_set_min_free). The memory is
 * reserved, not touched: pages are taken as chunks are first filled, and never more than
 * the rounded size. @preparers threads pin ahead of the fills (tier_preparers; < 0: as
 * many as suit the machine, 0: none, the fills pin for themselves). With @pin_all they
 * prepare every segment as soon as a pinner comes, and while there is a pinner empty
 * segments are not released while idle, until memory pressure first makes the tier give
 * memory back (tier_shrink); without a pinner it changes nothing;
 * from then on, as without it, they keep a window ahead of the fills. Returns 0, -EINVAL
 * (less than one chunk) or -ENOMEM.
 */
int tier_init(struct tier **out, uint64_t bytes, uint64_t min_free, int preparers, int pin_all);
/* Free the tier (NULL: nothing); no placement may run, no chunk be referenced, and every
 * pinner be gone (tier_drop_pinners). */
void tier_destroy(struct tier *t);

/*
 * Add a pinner (see tier_pin_fn): every segment with memory now is pinned by it before
 * this returns, every other one when a chunk of it is first taken. Call from a thread
 * that may wait (pinning takes milliseconds per segment). Returns 0, or -ENOSPC when
 * TIER_PINNERS are there already. @t NULL: nothing, 0.
 */
int tier_add_pinner(struct tier *t, tier_pin_fn pin, tier_unpin_fn unpin, void *arg);
/*
 * The threads that populate and pin segments ahead of the fills (half the CPUs, at most
 * TIER_PREPARERS), and in *@ahead the bytes of free chunks they keep ready.
 */
unsigned tier_preparers(const struct tier *t, uint64_t *ahead);
/*
 * A placement that fills nothing (tier_fill=idle) starts (@delta 1) or ends (-1). While
 * one runs, the preparers pinning the whole tier (@pin_all) start no segment: populating
 * and registering gigabytes right after a mount took the memory bandwidth and the
 * runtime's locks from a load running beside it, several times slower; they go on once
 * none runs. Fills still pin what they take. @t NULL: nothing.
 */
void tier_yield(struct tier *t, int delta);
/* Whether the preparers still pin the whole tier (tier_init's @pin_all, until pressure). */
int tier_pins_all(const struct tier *t);
/* Unpin every segment and forget the pinners (before their runtimes go). @t NULL: nothing. */
void tier_drop_pinners(struct tier *t);

/*
 * The LIVE chunk @idx of @ino when it holds the file bytes up to @end (bytes from the
 * chunk's start), referenced, with its memory in *@data; NULL when it does not. Moves it
 * to the head of the LRU list. Caller holds ino->iolock (shared is enough).
 */
struct tier_chunk *tier_get(struct tier *t, const struct inode *ino, uint64_t idx, uint32_t end,
			    char **data);
/* Whether tier_get would find it now (no reference taken, no LRU change). */
int tier_has(struct tier *t, const struct inode *ino, uint64_t idx, uint32_t end);
/*
 * A chunk for a fill: the FREE one right after @after in memory (the chunk the same
 * placement took last; NULL at its start) unless, the tier not being pinned whole, that
 * one lies in a segment without memory while one with memory has a free chunk; else a
 * FREE one (the lowest of an empty segment where the whole tier is pinned, else in the
 * order of tier.c's pick()), or the least recently used LIVE one
 * nobody references (evicted). RESERVED and referenced, its memory in *@data, pinned by
 * every pinner that could; NULL when every chunk is in use or memory is short
 * (tier_set_short). May wait for a segment's pinning.
 */
struct tier_chunk *tier_reserve(struct tier *t, char **data, const struct tier_chunk *after);
/*
 * Whether @c is the @k-th chunk after @first in memory, in the same segment: a device copy
 * may take both at once (a pinner registers each segment on its own, and a copy may not
 * span two registrations).
 */
int tier_follows(const struct tier *t, const struct tier_chunk *first, const struct tier_chunk *c,
		 size_t k);
/* The generation a fill of @ino reads before its member reads (tier_publish checks it). */
uint64_t tier_gen(const struct inode *ino);
/*
 * Make RESERVED chunk @c the chunk @idx of @ino holding @valid bytes (read, and verified,
 * from the members after tier_gen() gave @gen). Nothing is published when @ino's data
 * changed since (its generation moved), or a chunk at least as full is there already; a
 * shorter one there is replaced. The caller keeps its reference either way. Returns 1
 * when published, 0 when not. Caller holds ino->iolock.
 */
int tier_publish(struct tier *t, struct tier_chunk *c, struct inode *ino, uint64_t idx,
		 uint32_t valid, uint64_t gen);
/* Drop a reference of tier_get() or tier_reserve(); a RESERVED or DEAD chunk is freed. */
void tier_put(struct tier *t, struct tier_chunk *c);
/* Count a piece placed from the tier (@hit, @bytes) or looked up and missed. */
void tier_count(struct tier *t, int hit, uint64_t bytes);

/*
 * The data of @ino in file bytes [from, to) changed (or the size did): the chunks that
 * overlap the range go, and fills of @ino under way publish nothing. Call after the change
 * is visible to readers, with ino->iolock held exclusively. @t NULL: nothing to do.
 */
void tier_invalidate(struct tier *t, struct inode *ino, uint64_t from, uint64_t to);
/* @ino is being freed: all its chunks go. Caller holds meta.lock. @t NULL: nothing. */
void tier_forget(struct tier *t, struct inode *ino);
/* Bytes of @ino's data in the tier now (the virtual xattr user.dmafs.tier). */
uint64_t tier_file_bytes(struct tier *t, const struct inode *ino);
/* The tier's size and counters (all 0 for @t NULL). */
void tier_stats(struct tier *t, struct tier_stats *st);

/*
 * Memory pressure (called by tier-press.c). While @on, tier_reserve() takes nothing: the
 * placements read the members, as on a miss; lookups still serve what the tier holds.
 */
void tier_set_short(struct tier *t, int on);
/*
 * Give back at least @bytes of memory (UINT64_MAX: all it can): release the segments
 * with no chunk in use, then evict least recently used chunks nobody references and
 * release each segment that empties, until enough is released or nothing more can be.
 * Unpins before releasing. Returns the bytes released, counted in tier_stats' shrunk.
 */
uint64_t tier_shrink(struct tier *t, uint64_t bytes);
/*
 * Release the segments that had no chunk in use at the previous call and still have none
 * (memory the tier does not use, kept one period in case a fill comes back). Returns the
 * bytes released (not counted as shrunk).
 */
uint64_t tier_release_idle(struct tier *t);
/* The available memory the tier leaves the machine (tier_min_free= and its xattr). */
void tier_set_min_free(struct tier *t, uint64_t bytes);
uint64_t tier_min_free(struct tier *t);

#endif
