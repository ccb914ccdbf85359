// SPDX-License-Identifier: MIT
/* tier.c - the warm tier: chunks of file data in daemon memory, LRU, invalidation (see tier.h). */
#include "engine/tier.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "util/hash.h"
#include "util/util.h"

enum { C_FREE, C_RESERVED, C_LIVE, C_DEAD };

struct tier_chunk {
	struct hnode h;			/* key: key(ino, idx); in the table while LIVE */
	struct tier_chunk *prev, *next;	/* LRU list (LIVE), free list (FREE, next only) */
	struct tier_chunk *fprev, *fnext; /* the owner's chunks (LIVE) */
	struct inode *owner;		/* LIVE: whose data; cleared when it leaves */
	uint64_t ino, idx;
	uint32_t valid;			/* file bytes held from idx * TIER_CHUNK */
	uint32_t refs;
	int state;
};

/* Lock order: the tier's lock is taken last; nothing is taken while holding it. */
struct tier {
	pthread_mutex_t lock;
	char *mem;			/* nchunks * TIER_CHUNK bytes */
	size_t nchunks;
	struct tier_chunk *c;		/* the chunks' descriptors */
	struct htab tab;		/* LIVE chunks; lock */
	struct tier_chunk *free;	/* FREE chunks; lock */
	struct tier_chunk lru;		/* LIVE: lru.next most, lru.prev least recently used; lock */
	size_t nlive;			/* lock */
	uint64_t hits, misses, served, filled, evicted; /* atomic */
};

_Static_assert(TIER_CHUNK % 4096 == 0, "chunks take O_DIRECT reads");

static uint64_t key(uint64_t ino, uint64_t idx) { return ino ^ (idx * 0x9e3779b97f4a7c15ull); }

static char *chunk_mem(const struct tier *t, const struct tier_chunk *c)
{
	return t->mem + (size_t)(c - t->c) * TIER_CHUNK;
}

int tier_init(struct tier **out, uint64_t bytes)
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
	t->c = calloc(t->nchunks, sizeof(*t->c));
	/* untouched until filled: taking a large tier costs no memory at mount */
	t->mem = util_huge_alloc(t->nchunks * (size_t)TIER_CHUNK);
	while (nb < t->nchunks) /* the table never grows: at most nchunks are LIVE */
		nb *= 2;
	if (!t->c || !t->mem || htab_init(&t->tab, nb)) {
		free(t->c);
		free(t->mem);
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->lru.next = t->lru.prev = &t->lru;
	for (size_t i = t->nchunks; i-- > 0;) {
		t->c[i].next = t->free;
		t->free = &t->c[i];
	}
	*out = t;
	return 0;
}

void tier_destroy(struct tier *t)
{
	if (!t)
		return;
	htab_destroy(&t->tab);
	pthread_mutex_destroy(&t->lock);
	free(t->mem);
	free(t->c);
	free(t);
}

void *tier_mem(const struct tier *t, size_t *len)
{
	*len = t->nchunks * (size_t)TIER_CHUNK;
	return t->mem;
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
	c->state = C_FREE;
	c->owner = NULL;
	c->next = t->free;
	t->free = c;
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

struct tier_chunk *tier_reserve(struct tier *t, char **data)
{
	struct tier_chunk *c;

	pthread_mutex_lock(&t->lock);
	c = t->free;
	if (c) {
		t->free = c->next;
	} else {
		/* the least recently used chunk that no copy is reading */
		for (c = t->lru.prev; c != &t->lru && c->refs; c = c->prev)
			;
		if (c == &t->lru) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		unpublish(t, c); /* unreferenced: straight to the free list */
		t->free = c->next;
		__atomic_fetch_add(&t->evicted, 1, __ATOMIC_RELAXED);
	}
	c->next = c->prev = NULL;
	c->state = C_RESERVED;
	c->refs = 1;
	pthread_mutex_unlock(&t->lock);
	*data = chunk_mem(t, c);
	return c;
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
	*st = (struct tier_stats){ 0 };
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	st->held = (uint64_t)t->nlive * TIER_CHUNK;
	pthread_mutex_unlock(&t->lock);
	st->size = (uint64_t)t->nchunks * TIER_CHUNK;
	st->hits = __atomic_load_n(&t->hits, __ATOMIC_RELAXED);
	st->misses = __atomic_load_n(&t->misses, __ATOMIC_RELAXED);
	st->served = __atomic_load_n(&t->served, __ATOMIC_RELAXED);
	st->filled = __atomic_load_n(&t->filled, __ATOMIC_RELAXED);
	st->evicted = __atomic_load_n(&t->evicted, __ATOMIC_RELAXED);
}
