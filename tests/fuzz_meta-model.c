// SPDX-License-Identifier: MIT
/*
 * fuzz_meta-model.c - fuzz_meta's model of a filesystem image: record lists, log halves
 * and whole images (made, cloned, freed, encoded), the random values the mutations take
 * and what they know of each record type's body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "util/util.h"

#include "fuzz_meta.h"

/* ---------------------------------------------------------------- the image model */

void rl_free(struct rlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->r[i].body);
	free(l->r);
	memset(l, 0, sizeof(*l));
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "fuzz_meta: out of memory\n");
		exit(2);
	}
	return p;
}

/* Insert a copy of @r (which may be in @l) at @at (clamped). Lists stop at MAXREC. */
void rl_insert(struct rlist *l, size_t at, const struct frec *r)
{
	struct frec c = *r;

	if (l->n >= MAXREC)
		return;
	c.body = xrealloc(NULL, c.blen);
	memcpy(c.body, r->body, c.blen);
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->r = xrealloc(l->r, l->cap * sizeof(*l->r));
	}
	at = MIN(at, l->n);
	memmove(&l->r[at + 1], &l->r[at], (l->n - at) * sizeof(*l->r));
	l->r[at] = c;
	l->n++;
}

void rl_remove(struct rlist *l, size_t at)
{
	free(l->r[at].body);
	memmove(&l->r[at], &l->r[at + 1], (l->n - at - 1) * sizeof(*l->r));
	l->n--;
}

void rl_clone(struct rlist *d, const struct rlist *s)
{
	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < s->n; i++)
		rl_insert(d, d->n, &s->r[i]);
}

/* Split encoded records (as fmt_rec_encode wrote them) into a list. */
void rl_from(struct rlist *l, const uint8_t *p, size_t len)
{
	size_t pos = 0;

	while (pos + 6 <= len) {
		struct frec r = { get_u16(p + pos), 0, get_u32(p + pos + 2), (uint8_t *)p + pos + 6 };

		rl_insert(l, l->n, &r);
		pos += 6 + r.blen;
	}
}

size_t rl_bytes(const struct rlist *l)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += 6 + l->r[i].blen;
	return n;
}

/* Encode the list at @dst, writing no more than @room bytes; returns the full length. */
size_t rl_encode(const struct rlist *l, uint8_t *dst, size_t room)
{
	size_t pos = 0;

	for (size_t i = 0; i < l->n; i++) {
		const struct frec *r = &l->r[i];
		uint8_t h[6];

		put_u16(h, r->type);
		put_u32(h + 2, (uint32_t)(r->blen + (uint64_t)r->ldelta));
		for (size_t k = 0; k < 6; k++, pos++)
			if (pos < room)
				dst[pos] = h[k];
		if (pos < room)
			memcpy(dst + pos, r->body, MIN(r->blen, room - pos));
		pos += r->blen;
	}
	return pos;
}

void half_free(struct half *h)
{
	rl_free(&h->snap);
	for (size_t i = 0; i < h->nb; i++)
		rl_free(&h->b[i].recs);
	free(h->b);
	memset(h, 0, sizeof(*h));
}

void half_clone(struct half *d, const struct half *s)
{
	*d = *s;
	rl_clone(&d->snap, &s->snap);
	d->b = xrealloc(NULL, MAXBATCH * sizeof(*d->b));
	for (size_t i = 0; i < s->nb; i++) {
		d->b[i] = s->b[i];
		rl_clone(&d->b[i].recs, &s->b[i].recs);
	}
}

void img_free(struct img *im)
{
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++)
			half_free(&im->log[c][h]);
}

void img_clone(struct img *d, const struct img *s)
{
	*d = *s;
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++)
			half_clone(&d->log[c][h], &s->log[c][h]);
}

/* ---------------------------------------------------------------- random values */

uint64_t rs;

uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) | 1;
}

/* Values of the input's own fields, so that a mutation can make two fields agree. */
static uint64_t pool[512];
static size_t npool;

static void pool_add(uint64_t v)
{
	if (npool < sizeof(pool) / sizeof(pool[0]))
		pool[npool++] = v;
}

static const uint64_t edges[] = {
	2, 3, 4, 7, 8, 63, 64, 65, 255, 256, 4095, 4096, 4097, 8192, 65535, 65536, 65537,
	1 << 20, (1 << 20) + 4096, (1 << 20) - 4096, 64ull << 20, (64ull << 20) - 4096,
	64ull << 10, 32ull << 10, 128ull << 10, 0x7fffffff, 0x80000000, 0xfffff000, 1ull << 32,
	(1ull << 32) - 4096, 1ull << 62, 1ull << 63, (1ull << 63) - 4096, UINT64_MAX - 4095,
	INT64_MAX, (uint64_t)INT64_MIN,
};

/* An interesting value for a field of @bytes bytes that holds @cur. */
uint64_t pick(uint64_t cur, unsigned bytes)
{
	uint64_t max = bytes >= 8 ? UINT64_MAX : (1ull << (8 * bytes)) - 1, v;
	static const int64_t small[] = { 0, 0, 0, 1, -1, 4096, -4096 };

	switch (rnd() % 17) {
	case 16: /* minus another field: their sum wraps to exactly 0 */
		v = 0 - (npool ? pool[rnd() % npool] : cur);
		break;
	case 0: v = 0; break;
	case 1: v = 1; break;
	case 2: v = max; break;
	case 3: v = max - 1; break;
	case 4: v = cur + 1; break;
	case 5: v = cur - 1; break;
	case 6: v = cur + DMAFS_BLOCK; break;
	case 7: v = cur - DMAFS_BLOCK; break;
	case 8: v = rnd() % 2 ? cur * 2 : cur / 2; break;
	case 9: case 10: v = edges[rnd() % (sizeof(edges) / sizeof(edges[0]))]; break;
	case 11: case 12: case 13: case 14:
		v = npool ? pool[rnd() % npool] : cur;
		v += (uint64_t)small[rnd() % (sizeof(small) / sizeof(small[0]))];
		break;
	default: v = rnd(); break;
	}
	return v & max;
}

void put_n(uint8_t *p, unsigned bytes, uint64_t v)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t get_n(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = bytes; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* ---------------------------------------------------------------- record knowledge */

/* Fixed body bytes of each type (format.c's table; names and values follow). */
size_t fixed_of(uint16_t t)
{
	static const size_t f[NTYPES] = { 0, 68, 8, 32, 16, 8, 16, 8, 10, 8, 24, 0 };

	return f[tix(t)];
}

int has_name(uint16_t t)
{
	return t == REC_LINK || t == REC_UNLINK || t == REC_SYMLINK || t == REC_XSET ||
	       t == REC_XDEL;
}

/* The numeric fields of a record body, by type; fields[t][0] is the inode number. */
const struct field fields[NTYPES][12] = {
	[REC_INODE] = { { 0, 8 }, { 8, 4 }, { 12, 4 }, { 16, 4 }, { 20, 4 }, { 24, 8 }, { 32, 8 },
			{ 40, 8 }, { 48, 8 }, { 56, 8 }, { 64, 4 } },
	[REC_SYMLINK] = { { 0, 8 } },
	[REC_EXTENT] = { { 0, 8 }, { 8, 8 }, { 16, 4 }, { 20, 4 }, { 24, 8 } },
	[REC_TRUNC] = { { 0, 8 }, { 8, 8 } },
	[REC_IDEL] = { { 0, 8 } },
	[REC_LINK] = { { 0, 8 }, { 8, 8 } },
	[REC_UNLINK] = { { 0, 8 } },
	[REC_XSET] = { { 0, 8 }, { 8, 2 } },
	[REC_XDEL] = { { 0, 8 } },
	[REC_PUNCH] = { { 0, 8 }, { 8, 8 }, { 16, 8 } },
};

size_t nfields(uint16_t t)
{
	size_t n = 0;

	while (n < 12 && fields[tix(t)][n].bytes)
		n++;
	return n;
}

static void pool_rec(const struct frec *r)
{
	size_t nf = nfields(r->type);

	for (size_t i = 0; i < nf; i++)
		if (fields[tix(r->type)][i].off + fields[tix(r->type)][i].bytes <= r->blen)
			pool_add(get_n(r->body + fields[tix(r->type)][i].off,
				       fields[tix(r->type)][i].bytes));
}

void pool_img(const struct img *im)
{
	npool = 0;
	pool_add(im->n);
	pool_add(im->n + 1);
	pool_add(im->sb[0][0].stripe_unit);
	for (unsigned i = 0; i < im->n; i++) {
		const struct fmt_sb *sb = &im->sb[i][0];

		pool_add(sb->member_size);
		pool_add(sb->data_offset);
		pool_add(sb->data_end);
		pool_add(sb->csum_offset);
		pool_add(sb->log_half);
		pool_add(im->fsize[i]);
	}
	for (int h = 0; h < 2; h++) {
		const struct half *hf = &im->log[0][h];

		pool_add(hf->gen);
		pool_add(hf->first_seq);
		pool_add(hf->next_ino);
		for (size_t i = 0; i < hf->snap.n && npool < 400; i += 1 + rnd() % 3)
			pool_rec(&hf->snap.r[i]);
		for (size_t b = 0; b < hf->nb; b++)
			for (size_t i = 0; i < hf->b[b].recs.n && npool < 500; i++)
				pool_rec(&hf->b[b].recs.r[i]);
	}
}
