// SPDX-License-Identifier: MIT
/* tier.c - the warm tier: chunks of file data in daemon memory, LRU, invalidation (see tier.h). */
#include "engine/tier.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/hash.h"
#include "util/util.h"

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

#define TIER_SEG_ALIGN ((size_t)2 << 20) /* segments start on huge page boundaries */

static void start_preparers(struct tier *t, int n);

static uint64_t key(uint64_t ino, uint64_t idx) { return ino ^ (idx * 0x9e3779b97f4a7c15ull); }

static char *chunk_mem(const struct tier *t, const struct tier_chunk *c)
{
	return t->mem + (size_t)(c - t->c) * TIER_CHUNK;
}

static struct tier_seg *seg_of(const struct tier *t, const struct tier_chunk *c)
{
	return &t->seg[(size_t)(c - t->c) / TIER_SEG_CHUNKS];
}

static char *seg_mem(const struct tier *t, const struct tier_seg *s)
{
	return t->mem + (size_t)(s - t->seg) * TIER_SEG;
}

static size_t seg_len(const struct tier_seg *s) { return (size_t)s->nchunks * TIER_CHUNK; }

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

/* ---- segments: preparing (populating and pinning) and release ---- */

/*
 * Prepare @s: populate its pages and pin it by every pinner that has not pinned it, or
 * failed to, yet. pin_lock held on entry and on return; it is dropped over the work, with
 * s->preparing set so that no other thread prepares @s and no release takes it meanwhile.
 * Populating first is what makes pinning fast: a runtime registering pages nobody has
 * touched faults them in one by one under its own lock (about 5.5 GB/s on a 16-core
 * machine, however many threads register), while populating runs in parallel in every
 * thread that does it (5-6 GB/s each) and registering populated pages runs at 40+ GB/s.
 * MADV_POPULATE_WRITE (Linux 5.14) faults the pages in writable without writing them, so
 * a segment that holds data already keeps it.
 */
static void prepare(struct tier *t, struct tier_seg *s)
{
	unsigned want, todo, ok = 0, bad = 0;

	while (s->preparing)
		pthread_cond_wait(&t->prepared, &t->pin_lock);
	want = __atomic_load_n(&t->pinners, __ATOMIC_ACQUIRE);
	todo = want & ~(s->pinned | s->failed);
	if (!todo)
		return;
	s->preparing = 1;
	pthread_mutex_unlock(&t->pin_lock);
	(void)madvise(seg_mem(t, s), seg_len(s), MADV_HUGEPAGE); /* advice: fine if refused */
#ifdef MADV_POPULATE_WRITE
	(void)madvise(seg_mem(t, s), seg_len(s), MADV_POPULATE_WRITE); /* else pinning faults */
#endif
	for (int i = 0; i < TIER_PINNERS; i++) {
		unsigned bit = 1u << i;

		if (!(todo & bit))
			continue;
		if (t->pin[i].pin(t->pin[i].arg, seg_mem(t, s), seg_len(s)))
			bad |= bit;
		else
			ok |= bit;
	}
	pthread_mutex_lock(&t->pin_lock);
	__atomic_or_fetch(&s->failed, bad, __ATOMIC_RELEASE);
	__atomic_or_fetch(&s->pinned, ok, __ATOMIC_RELEASE);
	s->preparing = 0;
	pthread_cond_broadcast(&t->prepared);
}

/*
 * Pin @s, of which the caller has taken a chunk (so it cannot be released meanwhile), by
 * every pinner not done with it: the fill then reads into pinned memory, and the copies
 * out of the chunk run at the link's speed from the first. Usually a preparer has done it
 * already, or is doing it (then this waits). t->lock not held.
 */
static void seg_pin(struct tier *t, struct tier_seg *s)
{
	unsigned want = __atomic_load_n(&t->pinners, __ATOMIC_ACQUIRE);
	unsigned done = __atomic_load_n(&s->pinned, __ATOMIC_ACQUIRE) |
			__atomic_load_n(&s->failed, __ATOMIC_ACQUIRE);

	if ((done & want) == want)
		return; /* the common case: one load each, no lock */
	pthread_mutex_lock(&t->pin_lock);
	prepare(t, s);
	pthread_mutex_unlock(&t->pin_lock);
}

/* Unpin @s for every pinner that pinned it. pin_lock held; @s not in use nor preparing. */
static void unpin_all(struct tier *t, struct tier_seg *s)
{
	for (int i = 0; i < TIER_PINNERS; i++)
		if (s->pinned & (1u << i))
			t->pin[i].unpin(t->pin[i].arg, seg_mem(t, s), seg_len(s));
	__atomic_store_n(&s->pinned, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&s->failed, 0, __ATOMIC_RELEASE);
}

/*
 * Mark @s for release when it has memory, no chunk in use and no preparer on it; returns
 * its bytes, or 0. Both locks held: from here until release_marked() ends no chunk is
 * taken from it and no preparer starts on it.
 */
static uint64_t mark(struct tier_seg *s)
{
	if (!s->touched || s->releasing || s->preparing || s->nfree != s->nchunks)
		return 0;
	s->releasing = 1;
	return seg_len(s);
}

/*
 * Give the memory of the marked segments back: unpinned first (a pinned page stays with
 * the driver whatever the mapping does), then MADV_DONTNEED, which frees the pages of
 * this private anonymous range and leaves it mapped, reading as zeros until a fill
 * writes it again. pin_lock held, t->lock not.
 */
static void release_marked(struct tier *t)
{
	for (size_t i = 0; i < t->nsegs; i++) {
		struct tier_seg *s = &t->seg[i];

		if (!s->releasing)
			continue;
		unpin_all(t, s);
		if (madvise(seg_mem(t, s), seg_len(s), MADV_DONTNEED))
			log_warn("warm tier: cannot give back %zu MiB at segment %zu: %s", seg_len(s) >> 20,
				 i, strerror(errno));
		pthread_mutex_lock(&t->lock);
		s->releasing = 0;
		__atomic_store_n(&s->touched, 0, __ATOMIC_RELAXED);
		s->idle = 0;
		pthread_mutex_unlock(&t->lock);
	}
}

/* Wake the preparers: fills took the first chunk of a segment, or a pinner came. */
static void kick_ahead(struct tier *t)
{
	pthread_mutex_lock(&t->ahead_lock);
	t->ahead_gen++;
	pthread_cond_broadcast(&t->ahead_cond);
	pthread_mutex_unlock(&t->ahead_lock);
}

/*
 * The next segment a preparer should prepare, claimed (touched, so fills take their
 * chunks from it before any untouched one): the lowest untouched one, while the segments
 * with memory have fewer than ahead_chunks free chunks. NULL: enough are ready, there is
 * nothing to pin with, or memory is short. pin_lock held (so no release runs meanwhile).
 */
static struct tier_seg *claim_ahead(struct tier *t)
{
	struct tier_seg *fresh = NULL;
	size_t ready = 0, want = __atomic_load_n(&t->pin_all, __ATOMIC_RELAXED) ?
				 t->nchunks : __atomic_load_n(&t->ahead_chunks, __ATOMIC_RELAXED);

	if (!__atomic_load_n(&t->pinners, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&t->short_mem, __ATOMIC_RELAXED))
		return NULL;
	/* pinning the whole tier is not worth slowing a placement for (tier_yield) */
	if (__atomic_load_n(&t->pin_all, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&t->yielding, __ATOMIC_ACQUIRE))
		return NULL;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nsegs && ready < want; i++) {
		struct tier_seg *s = &t->seg[i];

		if (!s->nfree || s->releasing)
			continue;
		if (s->touched)
			ready += s->nfree;
		else if (!fresh)
			fresh = s;
	}
	if (fresh && ready < want) {
		__atomic_store_n(&fresh->touched, 1, __ATOMIC_RELAXED);
		fresh->idle = 0;
	} else {
		fresh = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	return fresh;
}

/*
 * A preparer: keeps ahead_chunks free chunks populated and pinned ahead of the fills, so
 * that a first load does not wait for pinning, segment after segment, in the fills'
 * threads. An empty prepared segment is released like any other after TIER_PRESS_MS of
 * disuse (tier-press.c), so a tier that stops filling gives the window back.
 */
static void *preparer(void *arg)
{
	struct tier *t = arg;
	uint64_t seen;

	for (;;) {
		struct tier_seg *s;

		pthread_mutex_lock(&t->ahead_lock);
		if (t->stop) {
			pthread_mutex_unlock(&t->ahead_lock);
			return NULL;
		}
		seen = t->ahead_gen;
		pthread_mutex_unlock(&t->ahead_lock);
		pthread_mutex_lock(&t->pin_lock);
		while ((s = claim_ahead(t))) {
			uint64_t t0 = 0;

			__atomic_compare_exchange_n(&t->t_ahead, &t0, dm_mono_ns(), 0, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
			prepare(t, s);
			if (__atomic_add_fetch(&t->nprepared, 1, __ATOMIC_RELAXED) == t->nsegs &&
			    __atomic_load_n(&t->pin_all, __ATOMIC_RELAXED))
				log_info("warm tier: all of its %zu MiB pinned, by %u threads in %.2f s",
					 t->nchunks * (size_t)TIER_CHUNK >> 20, t->nahead,
					 (dm_mono_ns() - t->t_ahead) / 1e9);
		}
		pthread_mutex_unlock(&t->pin_lock);
		pthread_mutex_lock(&t->ahead_lock);
		while (t->ahead_gen == seen && !t->stop)
			pthread_cond_wait(&t->ahead_cond, &t->ahead_lock);
		pthread_mutex_unlock(&t->ahead_lock);
	}
}

/*
 * @n preparers (< 0: half the CPUs, 1 to TIER_PREPARERS), each keeping two segments
 * ready: on 16 cores, 8 threads populate and pin about 30 GB/s (about the rate of 8 NVMe
 * drives) and keep 1 GiB ready. Without preparers the fills pin for themselves.
 */
static void start_preparers(struct tier *t, int want)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = want >= 0 ? (unsigned)want : cpus > 1 ? (unsigned)(cpus / 2) : 1;

	n = MIN(n, TIER_PREPARERS);
	if (!n)
		return;
	t->ahead = calloc(n, sizeof(*t->ahead));
	/* set before they start: they read it */
	t->ahead_chunks = MIN((size_t)n * 2 * TIER_SEG_CHUNKS, t->nchunks);
	for (unsigned i = 0; t->ahead && i < n; i++) {
		if (pthread_create(&t->ahead[i], NULL, preparer, t))
			break;
		pthread_setname_np(t->ahead[i], "dmafs-tierpin");
		t->nahead++;
	}
	__atomic_store_n(&t->ahead_chunks, MIN((size_t)t->nahead * 2 * TIER_SEG_CHUNKS, t->nchunks),
			 __ATOMIC_RELAXED);
	if (t->nahead < n)
		log_warn("warm tier: %u of %u threads that pin it ahead of fills started; fills pin the rest as they come",
			 t->nahead, n);
}

void tier_yield(struct tier *t, int delta)
{
	if (t && !__atomic_add_fetch(&t->yielding, (unsigned)delta, __ATOMIC_ACQ_REL))
		kick_ahead(t); /* the last one ended: the preparers go on */
}

int tier_pins_all(const struct tier *t)
{
	return t->nahead && __atomic_load_n(&t->pin_all, __ATOMIC_RELAXED);
}

unsigned tier_preparers(const struct tier *t, uint64_t *ahead)
{
	*ahead = (uint64_t)__atomic_load_n(&t->ahead_chunks, __ATOMIC_RELAXED) * TIER_CHUNK;
	return t->nahead;
}

int tier_add_pinner(struct tier *t, tier_pin_fn pin, tier_unpin_fn unpin, void *arg)
{
	int i;

	if (!t)
		return 0;
	pthread_mutex_lock(&t->pin_lock);
	for (i = 0; i < TIER_PINNERS && (t->pinners & (1u << i)); i++)
		;
	if (i == TIER_PINNERS) {
		pthread_mutex_unlock(&t->pin_lock);
		return -ENOSPC;
	}
	t->pin[i] = (struct pinner){ .pin = pin, .unpin = unpin, .arg = arg };
	/* set before the walk: a fill that takes a chunk meanwhile prepares its segment */
	__atomic_or_fetch(&t->pinners, 1u << i, __ATOMIC_RELEASE);
	for (size_t k = 0; k < t->nsegs; k++)
		if (__atomic_load_n(&t->seg[k].touched, __ATOMIC_RELAXED))
			prepare(t, &t->seg[k]); /* not released meanwhile: that takes pin_lock */
	pthread_mutex_unlock(&t->pin_lock);
	kick_ahead(t);
	return 0;
}

void tier_drop_pinners(struct tier *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->pin_lock);
	/* first: no preparing starts with them; those under way are waited for below */
	__atomic_store_n(&t->pinners, 0, __ATOMIC_RELEASE);
	for (size_t k = 0; k < t->nsegs; k++) {
		while (t->seg[k].preparing)
			pthread_cond_wait(&t->prepared, &t->pin_lock);
		unpin_all(t, &t->seg[k]);
	}
	pthread_mutex_unlock(&t->pin_lock);
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
 * join_hits in pipeline.c); else as pick(). Under lock.
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
