// SPDX-License-Identifier: MIT
/*
 * tier.c - the warm tier: chunks of file data in daemon memory, LRU, lookups and fills,
 * invalidation and memory pressure (see tier.h); its segments are tier-seg.c's.
 */
#include "engine/tier-int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "util/hash.h"
#include "util/util.h"

#define TIER_SEG_ALIGN ((size_t)2 << 20) /* segments start on huge page boundaries */

static uint64_t key(uint64_t ino, uint64_t idx) { return ino ^ (idx * 0x9e3779b97f4a7c15ull); }

static char *chunk_mem(const struct tier *t, const struct tier_chunk *c)
{
	return t->mem + (size_t)(c - t->c) * TIER_CHUNK;
}

static struct tier_seg *seg_of(const struct tier *t, const struct tier_chunk *c)
{
	return &t->seg[(size_t)(c - t->c) / TIER_SEG_CHUNKS];
}

int tier_init(struct tier **out, uint64_t bytes, uint64_t min_free, int preparers, int pin_all)
{
	struct tier *t;
	size_t nb = 1;

	*out = NULL;
	if (bytes < TIER_CHUNK)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->nchunks = (size_t)(bytes / TIER_CHUNK);
	t->nsegs = (t->nchunks + TIER_SEG_CHUNKS - 1) / TIER_SEG_CHUNKS;
	t->c = calloc(t->nchunks, sizeof(*t->c));
	t->seg = calloc(t->nsegs, sizeof(*t->seg));
	/*
	 * Untouched until filled: taking a large tier costs no memory at mount. Not advised
	 * for huge pages here: a fill faulting in a huge page may first have the kernel
	 * compact memory (0.44 GB/s against 2.4 GB/s for small pages in a 2-core VM); a
	 * segment is advised when it is prepared for pinning, where huge pages make
	 * registering it cheaper and the faults run in the preparers, not in the fills.
	 */
	if (posix_memalign((void **)&t->mem, TIER_SEG_ALIGN, t->nchunks * (size_t)TIER_CHUNK))
		t->mem = NULL;
	while (nb < t->nchunks) /* the table never grows: at most nchunks are LIVE */
		nb *= 2;
	if (!t->c || !t->seg || !t->mem || htab_init(&t->tab, nb)) {
		free(t->c);
		free(t->seg);
		free(t->mem);
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->pin_lock, NULL);
	pthread_cond_init(&t->prepared, NULL);
	pthread_mutex_init(&t->ahead_lock, NULL);
	pthread_cond_init(&t->ahead_cond, NULL);
	t->lru.next = t->lru.prev = &t->lru;
	t->min_free = min_free;
	for (size_t i = t->nchunks; i-- > 0;) {
		struct tier_seg *s = seg_of(t, &t->c[i]);

		t->c[i].next = s->free;
		s->free = &t->c[i];
		s->nchunks++;
	}
	for (size_t i = 0; i < t->nsegs; i++)
		t->seg[i].nfree = t->seg[i].nchunks;
	t->pin_all = pin_all;
	start_preparers(t, preparers);
	*out = t;
	return 0;
}

void tier_destroy(struct tier *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->ahead_lock);
	t->stop = 1;
	pthread_cond_broadcast(&t->ahead_cond);
	pthread_mutex_unlock(&t->ahead_lock);
	for (unsigned i = 0; i < t->nahead; i++)
		pthread_join(t->ahead[i], NULL);
	free(t->ahead);
	htab_destroy(&t->tab);
	pthread_cond_destroy(&t->prepared);
	pthread_cond_destroy(&t->ahead_cond);
	pthread_mutex_destroy(&t->ahead_lock);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->pin_lock);
	free(t->mem);
	free(t->seg);
	free(t->c);
	free(t);
}

/* ---- lists; all under t->lock ---- */

static void lru_unlink(struct tier_chunk *c)
{
	c->prev->next = c->next;
	c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void lru_push(struct tier *t, struct tier_chunk *c)
{
	c->prev = &t->lru;
	c->next = t->lru.next;
	t->lru.next->prev = c;
	t->lru.next = c;
}

static void free_chunk(struct tier *t, struct tier_chunk *c)
{
	struct tier_seg *s = seg_of(t, c);

	c->state = C_FREE;
	c->owner = NULL;
	c->next = s->free;
	s->free = c;
	s->nfree++;
}

/*
 * The segment a fill takes its chunk from: the lowest one with memory already and a free
 * chunk, else the lowest untouched one with a free chunk (NULL: none). The walk is over
 * segments, not chunks: a 64 GiB tier has 1024 of them. Under lock.
 */
static struct tier_seg *pick(struct tier *t)
{
	struct tier_seg *fresh = NULL;

	for (size_t i = 0; i < t->nsegs; i++) {
		struct tier_seg *s = &t->seg[i];

		if (!s->nfree || s->releasing)
			continue;
		if (s->touched)
			return s;
		if (!fresh)
			fresh = s;
	}
	return fresh;
}

/*
 * The segment a run of fills starts in where the whole tier is pinned: the lowest empty
 * one, one with memory first, so that placements filling at once each take chunks one
 * after another in memory (a warm placement copies such a run to the device at once:
 * join_hits in pipeline-build.c); else as pick(). Under lock.
 */
static struct tier_seg *pick_run(struct tier *t)
{
	struct tier_seg *fresh = NULL;

	for (size_t i = 0; i < t->nsegs; i++) {
		struct tier_seg *s = &t->seg[i];

		if (s->nfree != s->nchunks || s->releasing)
			continue;
		if (s->touched)
			return s;
		if (!fresh)
			fresh = s;
	}
	return fresh ? fresh : pick(t);
}

/*
 * The chunk right after @after in memory when it is FREE, taken off its free list. Not
 * one in a segment without memory yet while a segment with memory has a free chunk,
 * unless the whole tier is pinned anyway: a run going on would take memory (and a pin)
 * that a fill elsewhere would not. Under lock.
 */
static struct tier_chunk *take_after(struct tier *t, const struct tier_chunk *after)
{
	size_t i = (size_t)(after - t->c) + 1;
	struct tier_chunk *c, **pp;
	struct tier_seg *s, *p;

	if (i >= t->nchunks || t->c[i].state != C_FREE)
		return NULL;
	c = &t->c[i];
	s = seg_of(t, c);
	if (s->releasing)
		return NULL;
	if (!__atomic_load_n(&s->touched, __ATOMIC_RELAXED) &&
	    !(tier_pins_all(t) && __atomic_load_n(&t->pinners, __ATOMIC_RELAXED)) &&
	    (p = pick(t)) && __atomic_load_n(&p->touched, __ATOMIC_RELAXED))
		return NULL;
	for (pp = &s->free; *pp && *pp != c; pp = &(*pp)->next)
		;
	if (!*pp)
		return NULL;
	*pp = c->next;
	return c;
}

/*
 * Take LIVE chunk @c out of the table, the LRU list and its owner's list: it is freed, or
 * DEAD until its last reference goes.
 */
static void unpublish(struct tier *t, struct tier_chunk *c)
{
	struct inode *o = c->owner;

	htab_remove(&t->tab, &c->h);
	lru_unlink(c);
	if (c->fprev)
		c->fprev->fnext = c->fnext;
	else
		o->tier_list = c->fnext;
	if (c->fnext)
		c->fnext->fprev = c->fprev;
	c->fprev = c->fnext = NULL;
	__atomic_fetch_sub(&o->tier_n, 1, __ATOMIC_SEQ_CST);
	t->nlive--;
	c->owner = NULL;
	if (c->refs)
		c->state = C_DEAD;
	else
		free_chunk(t, c);
}

static struct tier_chunk *find(struct tier *t, uint64_t ino, uint64_t idx)
{
	for (struct hnode *n = htab_first(&t->tab, key(ino, idx)); n; n = htab_next(n, key(ino, idx))) {
		struct tier_chunk *c = container_of(n, struct tier_chunk, h);

		if (c->ino == ino && c->idx == idx)
			return c;
	}
	return NULL;
}

/* ---- lookups and fills ---- */

struct tier_chunk *tier_get(struct tier *t, const struct inode *ino, uint64_t idx, uint32_t end,
			    char **data)
{
	struct tier_chunk *c;

	if (!__atomic_load_n(&ino->tier_n, __ATOMIC_ACQUIRE))
		return NULL;
	pthread_mutex_lock(&t->lock);
	c = find(t, ino->ino, idx);
	if (c && c->valid >= end) {
		c->refs++;
		lru_unlink(c);
		lru_push(t, c);
		*data = chunk_mem(t, c);
	} else {
		c = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	return c;
}

int tier_has(struct tier *t, const struct inode *ino, uint64_t idx, uint32_t end)
{
	struct tier_chunk *c;
	int ret;

	if (!__atomic_load_n(&ino->tier_n, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&t->lock);
	c = find(t, ino->ino, idx);
	ret = c && c->valid >= end;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

struct tier_chunk *tier_reserve(struct tier *t, char **data, const struct tier_chunk *after)
{
	struct tier_chunk *c = NULL;
	struct tier_seg *s;
	int first;

	if (__atomic_load_n(&t->short_mem, __ATOMIC_RELAXED))
		return NULL; /* memory is short: the placement reads the members, as on a miss */
	pthread_mutex_lock(&t->lock);
	if (after)
		c = take_after(t, after);
	/* runs spread over empty segments only where every segment is pinned anyway: else
	 * fills keep to the segments that have memory (pick) */
	if (!c)
		s = tier_pins_all(t) && __atomic_load_n(&t->pinners, __ATOMIC_RELAXED) ? pick_run(t)
										 : pick(t);
	else
		s = seg_of(t, c);
	if (!s) {
		/* the least recently used chunk that no copy is reading */
		for (c = t->lru.prev; c != &t->lru && c->refs; c = c->prev)
			;
		if (c == &t->lru) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		unpublish(t, c); /* unreferenced: to the head of its segment's free list */
		__atomic_fetch_add(&t->evicted, 1, __ATOMIC_RELAXED);
		s = seg_of(t, c);
		c = NULL;
	}
	if (!c) {
		c = s->free;
		s->free = c->next;
	}
	first = s->nfree-- == s->nchunks;
	__atomic_store_n(&s->touched, 1, __ATOMIC_RELAXED);
	s->idle = 0;
	c->next = c->prev = NULL;
	c->state = C_RESERVED;
	c->refs = 1;
	pthread_mutex_unlock(&t->lock);
	if (first && t->nahead) /* the fills moved on: the preparers keep their window ahead */
		kick_ahead(t);
	seg_pin(t, s);
	*data = chunk_mem(t, c);
	return c;
}

int tier_follows(const struct tier *t, const struct tier_chunk *first, const struct tier_chunk *c,
		 size_t k)
{
	size_t i = (size_t)(first - t->c);

	return (size_t)(c - t->c) == i + k && (i + k) / TIER_SEG_CHUNKS == i / TIER_SEG_CHUNKS;
}

uint64_t tier_gen(const struct inode *ino)
{
	return __atomic_load_n(&ino->tier_gen, __ATOMIC_SEQ_CST);
}

int tier_publish(struct tier *t, struct tier_chunk *c, struct inode *ino, uint64_t idx,
		 uint32_t valid, uint64_t gen)
{
	struct tier_chunk *old;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	/*
	 * Count the chunk in before looking at the generation (both sequentially consistent):
	 * an invalidation bumps the generation and then reads tier_n, so either this sees
	 * its bump, or it sees this chunk counted and takes the lock, waiting for us.
	 */
	__atomic_fetch_add(&ino->tier_n, 1, __ATOMIC_SEQ_CST);
	if (c->state != C_RESERVED || __atomic_load_n(&ino->tier_gen, __ATOMIC_SEQ_CST) != gen)
		goto out;
	old = find(t, ino->ino, idx);
	if (old && old->valid >= valid)
		goto out;
	if (old)
		unpublish(t, old);
	c->state = C_LIVE;
	c->owner = ino;
	c->ino = ino->ino;
	c->idx = idx;
	c->valid = valid;
	c->h.key = key(ino->ino, idx);
	htab_insert(&t->tab, &c->h); /* cannot fail: the table holds nchunks without growing */
	lru_push(t, c);
	c->fprev = NULL;
	c->fnext = ino->tier_list;
	if (c->fnext)
		c->fnext->fprev = c;
	ino->tier_list = c;
	t->nlive++;
	__atomic_fetch_add(&t->filled, valid, __ATOMIC_RELAXED);
	ret = 1;
out:
	if (!ret)
		__atomic_fetch_sub(&ino->tier_n, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void tier_put(struct tier *t, struct tier_chunk *c)
{
	pthread_mutex_lock(&t->lock);
	if (--c->refs == 0 && (c->state == C_RESERVED || c->state == C_DEAD))
		free_chunk(t, c);
	pthread_mutex_unlock(&t->lock);
}

void tier_count(struct tier *t, int hit, uint64_t bytes)
{
	if (hit) {
		__atomic_fetch_add(&t->hits, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->served, bytes, __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_add(&t->misses, 1, __ATOMIC_RELAXED);
	}
}

/* ---- invalidation ---- */

void tier_invalidate(struct tier *t, struct inode *ino, uint64_t from, uint64_t to)
{
	uint64_t first, last;

	if (!t || from >= to)
		return;
	__atomic_fetch_add(&ino->tier_gen, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&ino->tier_n, __ATOMIC_SEQ_CST))
		return;
	first = from / TIER_CHUNK;
	last = (to - 1) / TIER_CHUNK;
	pthread_mutex_lock(&t->lock);
	if (last - first < __atomic_load_n(&ino->tier_n, __ATOMIC_RELAXED)) {
		/* a few chunks of a file with many: look them up */
		for (uint64_t i = first; i <= last; i++) {
			struct tier_chunk *c = find(t, ino->ino, i);

			if (c)
				unpublish(t, c);
		}
	} else {
		struct tier_chunk *c = ino->tier_list, *next;

		for (; c; c = next) {
			next = c->fnext;
			if (c->idx >= first && c->idx <= last)
				unpublish(t, c);
		}
	}
	pthread_mutex_unlock(&t->lock);
}

void tier_forget(struct tier *t, struct inode *ino)
{
	tier_invalidate(t, ino, 0, UINT64_MAX);
}

uint64_t tier_file_bytes(struct tier *t, const struct inode *ino)
{
	uint64_t n = 0;

	if (!t || !__atomic_load_n(&ino->tier_n, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&t->lock);
	for (const struct tier_chunk *c = ino->tier_list; c; c = c->fnext)
		n += c->valid;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tier_stats(struct tier *t, struct tier_stats *st)
{
	unsigned want;

	*st = (struct tier_stats){ 0 };
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	st->held = (uint64_t)t->nlive * TIER_CHUNK;
	want = __atomic_load_n(&t->pinners, __ATOMIC_ACQUIRE);
	for (size_t i = 0; i < t->nsegs; i++) {
		if (t->seg[i].touched)
			st->resident += seg_len(&t->seg[i]);
		if (want && (__atomic_load_n(&t->seg[i].pinned, __ATOMIC_ACQUIRE) & want) == want)
			st->pinned += seg_len(&t->seg[i]);
	}
	pthread_mutex_unlock(&t->lock);
	st->size = (uint64_t)t->nchunks * TIER_CHUNK;
	st->cap = __atomic_load_n(&t->short_mem, __ATOMIC_RELAXED) ? st->held : st->size;
	st->shrunk = __atomic_load_n(&t->shrunk, __ATOMIC_RELAXED);
	st->min_free = __atomic_load_n(&t->min_free, __ATOMIC_RELAXED);
	st->hits = __atomic_load_n(&t->hits, __ATOMIC_RELAXED);
	st->misses = __atomic_load_n(&t->misses, __ATOMIC_RELAXED);
	st->served = __atomic_load_n(&t->served, __ATOMIC_RELAXED);
	st->filled = __atomic_load_n(&t->filled, __ATOMIC_RELAXED);
	st->evicted = __atomic_load_n(&t->evicted, __ATOMIC_RELAXED);
}

/* ---- memory pressure ---- */

void tier_set_short(struct tier *t, int on)
{
	__atomic_store_n(&t->short_mem, on, __ATOMIC_RELAXED);
}

/* Whether every chunk of @s is FREE, or LIVE with no reference (no copy reads it). Under lock. */
static int evictable(const struct tier *t, const struct tier_seg *s)
{
	const struct tier_chunk *c = t->c + (size_t)(s - t->seg) * TIER_SEG_CHUNKS;

	for (unsigned i = 0; i < s->nchunks; i++)
		if (c[i].state != C_FREE && (c[i].state != C_LIVE || c[i].refs))
			return 0;
	return 1;
}

/*
 * Memory goes back a segment at a time, so chunks are given up a segment at a time: the
 * segment of the least recently used chunk, when nothing of it is in use, loses all its
 * chunks, and no chunk is given up that would not return memory.
 */
uint64_t tier_shrink(struct tier *t, uint64_t bytes)
{
	uint64_t got = 0, evicted = 0;

	/* the machine needs memory: from now on the tier holds what fills bring, no more */
	__atomic_store_n(&t->pin_all, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&t->pin_lock);
	pthread_mutex_lock(&t->lock);
	t->scan++;
	/* segments with nothing in use cost no eviction */
	for (size_t i = 0; i < t->nsegs && got < bytes; i++)
		got += mark(&t->seg[i]);
	for (struct tier_chunk *c = t->lru.prev, *prev; c != &t->lru && got < bytes; c = prev) {
		struct tier_seg *s = seg_of(t, c);
		struct tier_chunk *sc = t->c + (size_t)(s - t->seg) * TIER_SEG_CHUNKS;

		prev = c->prev;
		if (s->scan == t->scan)
			continue; /* judged already */
		s->scan = t->scan;
		if (!evictable(t, s))
			continue; /* a copy reads one of its chunks, or a fill writes one */
		while (prev != &t->lru && seg_of(t, prev) == s)
			prev = prev->prev; /* every chunk of @s leaves the list */
		for (unsigned i = 0; i < s->nchunks; i++)
			if (sc[i].state == C_LIVE) {
				unpublish(t, &sc[i]);
				evicted++;
			}
		got += mark(s);
	}
	pthread_mutex_unlock(&t->lock);
	release_marked(t);
	pthread_mutex_unlock(&t->pin_lock);
	__atomic_fetch_add(&t->evicted, evicted, __ATOMIC_RELAXED);
	__atomic_fetch_add(&t->shrunk, got, __ATOMIC_RELAXED);
	return got;
}

uint64_t tier_release_idle(struct tier *t)
{
	/* pinned whole (a GPU machine, tier_pin=all): the empty segments stay, ready */
	int keep = __atomic_load_n(&t->pin_all, __ATOMIC_RELAXED) &&
		   __atomic_load_n(&t->pinners, __ATOMIC_ACQUIRE);
	uint64_t got = 0;

	pthread_mutex_lock(&t->pin_lock);
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nsegs; i++) {
		struct tier_seg *s = &t->seg[i];
		int empty = s->touched && !s->releasing && s->nfree == s->nchunks && !keep;

		if (empty && s->idle)
			got += mark(s);
		s->idle = empty;
	}
	pthread_mutex_unlock(&t->lock);
	if (got)
		release_marked(t);
	pthread_mutex_unlock(&t->pin_lock);
	return got;
}

void tier_set_min_free(struct tier *t, uint64_t bytes)
{
	__atomic_store_n(&t->min_free, bytes, __ATOMIC_RELAXED);
}

uint64_t tier_min_free(struct tier *t)
{
	return __atomic_load_n(&t->min_free, __ATOMIC_RELAXED);
}
