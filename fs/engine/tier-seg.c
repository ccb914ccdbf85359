// SPDX-License-Identifier: MIT
/*
 * tier-seg.c - the warm tier's segments: populated and pinned by the preparers (or by the
 * fill that needs one), unpinned and given back to the system, and the pinners that
 * register them with the GPU runtimes (see tier.h, tier-int.h).
 */
#include "engine/tier-int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/util.h"

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
void seg_pin(struct tier *t, struct tier_seg *s)
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
uint64_t mark(struct tier_seg *s)
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
void release_marked(struct tier *t)
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
void kick_ahead(struct tier *t)
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
void start_preparers(struct tier *t, int want)
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
