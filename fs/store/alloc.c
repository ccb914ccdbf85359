// SPDX-License-Identifier: MIT
/*
 * alloc.c - free-extent allocator: a sorted array of free ranges per member. Arrays stay
 * short because files are allocated in long runs; insertion is a memmove.
 */
#include "store/alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put_locked(struct alloc_member *m, uint64_t off, uint64_t len);

static int grow(struct alloc_member *m)
{
	return dm_grow(&m->free, &m->cap, m->cap + 1, sizeof(*m->free), 64);
}

int alloc_init(struct alloc *a, unsigned nmembers, const uint64_t *start, const uint64_t *end)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
	a->nmembers = nmembers;
	for (unsigned i = 0; i < nmembers; i++) {
		struct alloc_member *m = &a->m[i];

		if (grow(m))
			return -ENOMEM;
		m->start = start[i];
		m->end = end[i];
		m->free[0] = (struct alloc_range){ start[i], end[i] - start[i] };
		m->n = 1;
		m->free_bytes = end[i] - start[i];
	}
	return 0;
}

void alloc_destroy(struct alloc *a)
{
	for (unsigned i = 0; i < a->nmembers; i++)
		free(a->m[i].free);
	free(a->deferred);
	pthread_mutex_destroy(&a->lock);
}

/* Index of the first free range with off + len > x (the one containing x or after it). */
static size_t find(const struct alloc_member *m, uint64_t x)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->free[mid].off + m->free[mid].len <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void remove_at(struct alloc_member *m, size_t i)
{
	memmove(&m->free[i], &m->free[i + 1], (m->n - i - 1) * sizeof(m->free[0]));
	m->n--;
}

/* Carve [off, off+len) out of free range i, which must contain it. Returns 0 or -ENOMEM. */
static int carve(struct alloc_member *m, size_t i, uint64_t off, uint64_t len)
{
	struct alloc_range *r = &m->free[i];
	uint64_t rend = r->off + r->len, end = off + len;

	m->free_bytes -= len;
	if (r->off == off && rend == end) {
		remove_at(m, i);
	} else if (r->off == off) {
		r->off = end;
		r->len = rend - end;
	} else if (rend == end) {
		r->len = off - r->off;
	} else {
		if (m->n == m->cap && grow(m)) {
			m->free_bytes += len;
			return -ENOMEM;
		}
		r = &m->free[i];
		memmove(&m->free[i + 2], &m->free[i + 1], (m->n - i - 1) * sizeof(*r));
		m->n++;
		r->len = off - r->off;
		m->free[i + 1] = (struct alloc_range){ end, rend - end };
	}
	return 0;
}

int alloc_mark_used(struct alloc *a, uint32_t member, uint64_t off, uint64_t len)
{
	struct alloc_member *m;
	size_t i;

	if (member >= a->nmembers || len == 0)
		return -EUCLEAN;
	m = &a->m[member];
	if (off < m->start || off + len > m->end || off + len < off)
		return -EUCLEAN;
	i = find(m, off);
	if (i == m->n || m->free[i].off > off || m->free[i].off + m->free[i].len < off + len)
		return -EUCLEAN;
	return carve(m, i, off, len);
}

int alloc_set_used(struct alloc *a, uint32_t member, const struct alloc_range *used, size_t n,
		   size_t *bad)
{
	struct alloc_member *m;
	uint64_t pos;
	size_t k = 0;

	if (member >= a->nmembers)
		return -EUCLEAN;
	m = &a->m[member];
	pos = m->start;
	/* at most n + 1 gaps */
	if (dm_grow(&m->free, &m->cap, n + 1, sizeof(*m->free), 64))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct alloc_range *u = &used[i];

		if (u->len == 0 || u->off < pos || u->off + u->len > m->end ||
		    u->off + u->len < u->off) {
			*bad = i;
			return -EUCLEAN;
		}
		if (u->off > pos)
			m->free[k++] = (struct alloc_range){ pos, u->off - pos };
		pos = u->off + u->len;
	}
	if (pos < m->end)
		m->free[k++] = (struct alloc_range){ pos, m->end - pos };
	m->n = k;
	m->cursor = 0;
	m->free_bytes = 0;
	for (size_t i = 0; i < k; i++)
		m->free_bytes += m->free[i].len;
	return 0;
}

int64_t alloc_get(struct alloc *a, uint32_t member, uint64_t goal, uint64_t want, uint64_t *off)
{
	struct alloc_member *m = &a->m[member];
	size_t i, best = SIZE_MAX;
	uint64_t got;

	want = ALIGN_UP(want, DMAFS_BLOCK);
	pthread_mutex_lock(&a->lock);
	if (goal) {
		i = find(m, goal);
		if (i < m->n && m->free[i].off <= goal) {
			got = MIN(want, m->free[i].off + m->free[i].len - goal);
			*off = goal;
			goto take;
		}
	}
	/* Next-fit from the cursor for a range holding the whole request, else the largest. */
	for (size_t k = 0; k < m->n; k++) {
		i = (m->cursor + k) % m->n;
		if (m->free[i].len >= want) {
			best = i;
			break;
		}
		if (best == SIZE_MAX || m->free[i].len > m->free[best].len)
			best = i;
	}
	if (best == SIZE_MAX) {
		pthread_mutex_unlock(&a->lock);
		return -ENOSPC;
	}
	i = best;
	*off = m->free[i].off;
	got = MIN(want, m->free[i].len);
take:
	if (carve(m, i, *off, got)) {
		pthread_mutex_unlock(&a->lock);
		return -ENOMEM;
	}
	m->cursor = i;
	pthread_mutex_unlock(&a->lock);
	return got;
}

int alloc_get_pieces(struct alloc *a, uint32_t member, uint64_t len, unsigned max, uint64_t *off,
		     uint64_t *plen)
{
	struct alloc_member *m;
	unsigned n = 0;

	if (member >= a->nmembers || !len || len % DMAFS_BLOCK || !max)
		return -EINVAL;
	m = &a->m[member];
	pthread_mutex_lock(&a->lock);
	/* the largest free range each time, from its top: few pieces, data runs kept low */
	while (len && n < max) {
		size_t best = SIZE_MAX;
		uint64_t take;

		for (size_t i = 0; i < m->n; i++)
			if (best == SIZE_MAX || m->free[i].len > m->free[best].len)
				best = i;
		if (best == SIZE_MAX)
			break;
		take = MIN(len, m->free[best].len);
		off[n] = m->free[best].off + m->free[best].len - take;
		plen[n] = take;
		if (carve(m, best, off[n], take))
			break;
		if (m->cursor >= m->n)
			m->cursor = 0;
		len -= take;
		n++;
	}
	if (len) { /* not enough in @max pieces: give back what was taken */
		while (n--)
			put_locked(m, off[n], plen[n]);
		pthread_mutex_unlock(&a->lock);
		return -ENOSPC;
	}
	pthread_mutex_unlock(&a->lock);
	return (int)n;
}

static void put_locked(struct alloc_member *m, uint64_t off, uint64_t len)
{
	size_t i = find(m, off);
	int join_prev = i > 0 && m->free[i - 1].off + m->free[i - 1].len == off;
	int join_next = i < m->n && m->free[i].off == off + len;

	m->free_bytes += len;
	if (join_prev && join_next) {
		m->free[i - 1].len += len + m->free[i].len;
		remove_at(m, i);
	} else if (join_prev) {
		m->free[i - 1].len += len;
	} else if (join_next) {
		m->free[i].off = off;
		m->free[i].len += len;
	} else {
		if (m->n == m->cap && grow(m)) {
			m->free_bytes -= len; /* leaked until remount rebuilds the map */
			return;
		}
		memmove(&m->free[i + 1], &m->free[i], (m->n - i) * sizeof(m->free[0]));
		m->free[i] = (struct alloc_range){ off, len };
		m->n++;
	}
	if (m->cursor >= m->n)
		m->cursor = 0;
}

void alloc_put(struct alloc *a, uint32_t member, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&a->lock);
	put_locked(&a->m[member], off, len);
	pthread_mutex_unlock(&a->lock);
}

void alloc_defer(struct alloc *a, uint32_t member, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&a->lock);
	if (dm_grow(&a->deferred, &a->capdeferred, a->ndeferred + 1, sizeof(*a->deferred), 256)) {
		/* leaked until remount rebuilds the map: safe, never reused early */
		pthread_mutex_unlock(&a->lock);
		return;
	}
	a->deferred[a->ndeferred++] = (struct alloc_deferred){ member, off, len };
	pthread_mutex_unlock(&a->lock);
}

int alloc_has_deferred(struct alloc *a)
{
	int has;

	pthread_mutex_lock(&a->lock);
	has = a->ndeferred > 0;
	pthread_mutex_unlock(&a->lock);
	return has;
}

size_t alloc_take_deferred(struct alloc *a, struct alloc_deferred **out)
{
	size_t n;

	pthread_mutex_lock(&a->lock);
	*out = a->deferred;
	n = a->ndeferred;
	a->deferred = NULL;
	a->ndeferred = a->capdeferred = 0;
	pthread_mutex_unlock(&a->lock);
	return n;
}

void alloc_release_deferred(struct alloc *a, struct alloc_deferred *d, size_t n)
{
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < n; i++)
		put_locked(&a->m[d[i].member], d[i].off, d[i].len);
	pthread_mutex_unlock(&a->lock);
	free(d);
}

uint64_t alloc_free_bytes(struct alloc *a)
{
	uint64_t t = 0;

	pthread_mutex_lock(&a->lock);
	for (unsigned i = 0; i < a->nmembers; i++)
		t += a->m[i].free_bytes;
	pthread_mutex_unlock(&a->lock);
	return t;
}

uint64_t alloc_member_free(struct alloc *a, uint32_t member)
{
	uint64_t t;

	pthread_mutex_lock(&a->lock);
	t = a->m[member].free_bytes;
	pthread_mutex_unlock(&a->lock);
	return t;
}
