// SPDX-License-Identifier: MIT
/*
 * fuzz_meta-mutate.c - fuzz_meta's mutations of an image: record fields, names, headers
 * and lists, batches, log halves, superblocks and the member set.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/format.h"
#include "util/util.h"

#include "fuzz_meta.h"

/* ---------------------------------------------------------------- mutations */

/* Every record list of one log copy, to pick from. */
static size_t lists_of(struct img *im, int c, struct rlist **out)
{
	size_t n = 0;

	for (int h = 0; h < 2; h++) {
		struct half *hf = &im->log[c][h];

		if (!hf->present)
			continue;
		out[n++] = &hf->snap;
		for (size_t b = 0; b < hf->nb; b++)
			out[n++] = &hf->b[b].recs;
	}
	return n;
}

/* A record of copy @c, or NULL; *lp gets its list. */
static struct frec *pick_rec(struct img *im, int c, struct rlist **lp)
{
	struct rlist *ls[2 + 2 * MAXBATCH];
	size_t n = lists_of(im, c, ls), tot = 0, k;

	for (size_t i = 0; i < n; i++)
		tot += ls[i]->n;
	if (!tot)
		return NULL;
	k = rnd() % tot;
	for (size_t i = 0; i < n; i++) {
		if (k < ls[i]->n) {
			*lp = ls[i];
			return &ls[i]->r[k];
		}
		k -= ls[i]->n;
	}
	return NULL;
}

static const uint32_t modes[] = {
	S_IFREG | 0644, S_IFDIR | 0755, S_IFLNK | 0777, S_IFCHR | 0600, S_IFBLK | 0600,
	S_IFIFO | 0600, S_IFSOCK | 0755, 0, 0170000, S_IFREG | 07777, S_IFDIR | 010000, 0xffffffff,
	S_IFREG, 0644
};

static void mut_field(struct frec *r)
{
	size_t nf = nfields(r->type), i;
	struct field f;
	uint64_t cur;

	if (!nf)
		return;
	/* the inode number is one field among many; pick it less often than the rest */
	i = nf > 1 && rnd() % 4 ? 1 + rnd() % (nf - 1) : 0;
	f = fields[tix(r->type)][i];
	if (f.off + f.bytes > r->blen)
		return;
	cur = get_n(r->body + f.off, f.bytes);
	if (r->type == REC_INODE && f.off == 8 && rnd() % 2)
		cur = modes[rnd() % (sizeof(modes) / sizeof(modes[0]))];
	else if ((r->type == REC_INODE && f.off == 64) || (r->type == REC_EXTENT && f.off == 20))
		cur = rnd() % 2 ? rnd() % (MAXM + 2) : pick(cur, f.bytes); /* members */
	else
		cur = pick(cur, f.bytes);
	put_n(r->body + f.off, f.bytes, cur);
}

/* Resize a body to @len, filling new bytes with name-like bytes. */
static void body_resize(struct frec *r, size_t at, size_t oldn, size_t newn)
{
	size_t len = r->blen - oldn + newn;
	uint8_t *b = xrealloc(NULL, len);

	memcpy(b, r->body, at);
	for (size_t i = 0; i < newn; i++)
		b[at + i] = i < oldn ? r->body[at + i] : (uint8_t)('a' + (at + i) % 26);
	memcpy(b + at + newn, r->body + at + oldn, r->blen - at - oldn);
	free(r->body);
	r->body = b;
	r->blen = len;
}

static void mut_name(struct img *im, int c, struct frec *r)
{
	static const size_t lens[] = { 0, 1, 2, 254, 255, 256, 4094, 4095, 4096, 65535, 65536,
				       65537 };
	size_t fl = fixed_of(r->type), at = fl, nl;
	struct rlist *ol;
	struct frec *o;

	if (!has_name(r->type) || r->blen < fl)
		return;
	nl = r->blen - fl;
	if (r->type == REC_XSET)
		nl = MIN(get_u16(r->body + 8), r->blen - fl);
	switch (rnd() % 6) {
	case 0: { /* length to a boundary */
		size_t want = rnd() % 3 ? lens[rnd() % 9] : nl + (rnd() % 3) - 1;

		body_resize(r, at, nl, MIN(want, 65535));
		if (r->type == REC_XSET && rnd() % 4)
			put_u16(r->body + 8, MIN(want, 65535));
		break;
	}
	case 1: /* XSET value length to a boundary */
		if (r->type == REC_XSET)
			body_resize(r, at + nl, r->blen - at - nl, lens[rnd() % 12]);
		break;
	case 2: /* a byte a name may not hold */
		if (nl)
			r->body[at + rnd() % nl] = "/\0\377."[rnd() % 4];
		break;
	case 3: { /* "." or ".." */
		size_t dots = 1 + rnd() % 2;

		body_resize(r, at, nl, dots);
		memset(r->body + at, '.', dots);
		if (r->type == REC_XSET)
			put_u16(r->body + 8, dots);
		break;
	}
	default: /* the name of another record: two entries or xattrs with one name */
		o = pick_rec(im, c, &ol);
		if (o && o != r && has_name(o->type) && o->blen > fixed_of(o->type)) {
			size_t ofl = fixed_of(o->type), onl = o->blen - ofl;
			uint8_t *name;

			if (o->type == REC_XSET)
				onl = MIN(get_u16(o->body + 8), onl);
			name = xrealloc(NULL, onl);
			memcpy(name, o->body + ofl, onl);
			body_resize(r, at, nl, onl);
			memcpy(r->body + at, name, onl);
			if (r->type == REC_XSET)
				put_u16(r->body + 8, onl);
			free(name);
		}
		break;
	}
}

static void mut_header(struct frec *r)
{
	size_t fl = fixed_of(r->type);

	switch (rnd() % 4) {
	case 0: /* type confusion: another type over the same body */
		r->type = rnd() % 8 ? 1 + rnd() % 10 : (uint16_t)pick(r->type, 2);
		break;
	case 1:
		r->ldelta = (int64_t[]){ -1, 1, 6, -6 }[rnd() % 4];
		break;
	case 2: /* body_len just under the fixed part, or zero */
		r->ldelta = rnd() % 2 ? (int64_t)fl - (int64_t)r->blen - 1 : -(int64_t)r->blen;
		break;
	default:
		r->ldelta = (int64_t)(pick(r->blen, 4) - r->blen);
		break;
	}
}

/* A new record of any type, its fields taken from the pool. */
static void new_rec(struct frec *r, uint8_t *store)
{
	r->type = 1 + rnd() % 10;
	r->ldelta = 0;
	r->blen = fixed_of(r->type) + (has_name(r->type) ? 1 + rnd() % 12 : 0);
	r->body = store;
	memset(store, 0, r->blen);
	for (size_t i = 0; i < nfields(r->type); i++) {
		struct field f = fields[r->type][i];

		put_n(store + f.off, f.bytes, pick(0, f.bytes));
	}
	if (r->type == REC_INODE)
		put_u32(store + 8, modes[rnd() % 7]);
	if (has_name(r->type)) {
		for (size_t i = fixed_of(r->type); i < r->blen; i++)
			store[i] = 'a' + rnd() % 4;
		if (r->type == REC_XSET)
			put_u16(store + 8, 1 + rnd() % (r->blen - fixed_of(r->type)));
	}
}

const struct img *donors;
size_t ndonors;

static void mut_list(struct img *im, int c)
{
	struct rlist *ls[2 + 2 * MAXBATCH], *l, *l2;
	size_t n = lists_of(im, c, ls), i, j;
	struct frec *r, nr;
	uint8_t store[128];

	if (!n)
		return;
	l = ls[rnd() % n];
	l2 = ls[rnd() % n];
	switch (rnd() % 7) {
	case 0: /* duplicate a record, next to it or anywhere */
		if (l->n) {
			i = rnd() % l->n;
			rl_insert(l, rnd() % 2 ? i + 1 : rnd() % (l->n + 1), &l->r[i]);
		}
		break;
	case 1:
		if (l->n)
			rl_remove(l, rnd() % l->n);
		break;
	case 2: /* reorder */
		if (l->n > 1) {
			struct frec t;

			i = rnd() % l->n;
			j = rnd() % 2 && i + 1 < l->n ? i + 1 : rnd() % l->n;
			t = l->r[i];
			l->r[i] = l->r[j];
			l->r[j] = t;
		}
		break;
	case 3: /* move a record into another list (snapshot <-> batch, batch -> batch) */
		if (l->n) {
			i = rnd() % l->n;
			rl_insert(l2, rnd() % (l2->n + 1), &l->r[i]);
			if (l2 != l)
				rl_remove(l, i);
		}
		break;
	case 4: { /* splice a record from another image */
		const struct img *d = &donors[rnd() % ndonors];
		struct img *dd = (struct img *)d; /* pick_rec does not change the image */
		struct rlist *dl;

		r = pick_rec(dd, 0, &dl);
		if (r)
			rl_insert(l, rnd() % (l->n + 1), r);
		break;
	}
	case 5: /* a run of records copied from the other list */
		if (l2->n && l2 != l) {
			i = rnd() % l2->n;
			for (j = i; j < l2->n && j < i + 1 + rnd() % 8; j++)
				rl_insert(l, l->n, &l2->r[j]);
		}
		break;
	default:
		new_rec(&nr, store);
		rl_insert(l, rnd() % (l->n + 1), &nr);
		break;
	}
}

static struct half *pick_half(struct img *im, int c)
{
	struct half *a = &im->log[c][0], *b = &im->log[c][1];

	if (a->present && b->present)
		return rnd() % 2 ? a : b;
	return b->present ? b : a;
}

void renumber(struct half *h)
{
	for (size_t i = 0; i < h->nb; i++) {
		h->b[i].seq = h->first_seq + i;
		h->b[i].gen = h->gen;
	}
}

static void mut_batch(struct img *im, int c)
{
	struct half *h = pick_half(im, c);
	struct batch *b;
	size_t i;

	if (!h->nb) {
		h->b[0] = (struct batch){ h->gen, h->first_seq, 0, 0, { 0 } };
		h->nb = 1;
		return;
	}
	i = rnd() % h->nb;
	b = &h->b[i];
	switch (rnd() % 10) {
	case 0: b->gen = rnd() % 2 ? pick(b->gen, 8) : h->gen + (rnd() % 3) - 1; break;
	case 1: b->seq = rnd() % 2 ? pick(b->seq, 8) : b->seq + (rnd() % 3) - 1; break;
	case 2: b->pdelta = rnd() % 2 ? (int64_t[]){ -1, 1, 4096, -6 }[rnd() % 4]
				      : (int64_t)(pick(rl_bytes(&b->recs), 4) - rl_bytes(&b->recs));
		break;
	case 3: b->bad = rnd() % 4 == 0 ? 1 + rnd() % 2 : 0; break;
	case 4: /* drop a batch; half the time the chain is renumbered to stay whole */
		rl_free(&b->recs);
		memmove(b, b + 1, (h->nb - i - 1) * sizeof(*b));
		h->nb--;
		if (rnd() % 2)
			renumber(h);
		break;
	case 5: /* duplicate or split a batch */
		if (h->nb < MAXBATCH) {
			memmove(b + 1, b, (h->nb - i) * sizeof(*b));
			h->nb++;
			rl_clone(&b[1].recs, &b[0].recs);
			if (rnd() % 2) { /* split: the first keeps the head, the second the tail */
				size_t cut = b->recs.n ? rnd() % (b->recs.n + 1) : 0;

				while (b[0].recs.n > cut)
					rl_remove(&b[0].recs, b[0].recs.n - 1);
				for (size_t k = 0; k < cut && b[1].recs.n; k++)
					rl_remove(&b[1].recs, 0);
			}
			if (rnd() % 3)
				renumber(h);
		}
		break;
	case 6: /* merge with the next */
		if (i + 1 < h->nb) {
			for (size_t k = 0; k < b[1].recs.n; k++)
				rl_insert(&b->recs, b->recs.n, &b[1].recs.r[k]);
			rl_free(&b[1].recs);
			memmove(b + 1, b + 2, (h->nb - i - 2) * sizeof(*b));
			h->nb--;
			if (rnd() % 2)
				renumber(h);
		}
		break;
	case 7: /* swap with the next: out of order */
		if (i + 1 < h->nb) {
			struct batch t = b[0];

			b[0] = b[1];
			b[1] = t;
			if (rnd() % 2)
				renumber(h);
		}
		break;
	case 8: /* an empty batch */
		if (h->nb < MAXBATCH) {
			memmove(b + 1, b, (h->nb - i) * sizeof(*b));
			h->nb++;
			memset(&b->recs, 0, sizeof(b->recs));
			renumber(h);
		}
		break;
	default: /* many batches: the walk to the end of the half */
		for (size_t k = 0, want = 1 + rnd() % 40; k < want && h->nb < MAXBATCH; k++) {
			struct rlist from = h->b[rnd() % h->nb].recs;

			h->b[h->nb] = h->b[0];
			rl_clone(&h->b[h->nb].recs, &from);
			h->nb++;
		}
		renumber(h);
		break;
	}
}

static void mut_half(struct img *im, int c)
{
	struct half *h = pick_half(im, c), *o = h == &im->log[c][0] ? &im->log[c][1] : &im->log[c][0];

	switch (rnd() % 10) {
	case 0: h->gen = rnd() % 2 ? pick(h->gen, 8) : o->gen + (rnd() % 3) - 1; break;
	case 1: h->first_seq = pick(h->first_seq, 8); if (rnd() % 2) renumber(h); break;
	case 2: h->next_ino = pick(h->next_ino, 8); break;
	case 3: h->sdelta = rnd() % 2 ? (int64_t[]){ -1, 1, -6, 4096, -4096 }[rnd() % 5]
				      : (int64_t)(pick(rl_bytes(&h->snap), 8) - rl_bytes(&h->snap));
		break;
	case 4: h->present = !h->present; break;
	case 5: h->bad = rnd() % 4 == 0 ? 1 + rnd() % 2 : 0; break;
	case 6: h->baduuid = rnd() % 4 == 0; break;
	case 7: { /* swap the halves */
		struct half t = *h;

		*h = *o;
		*o = t;
		break;
	}
	default: /* the other half becomes a copy of this one, a generation apart */
		half_free(o);
		half_clone(o, h);
		o->gen = h->gen + (rnd() % 3) - 1;
		if (rnd() % 2)
			renumber(o);
		break;
	}
}

/* The u64 geometry fields of a superblock, 0..5. */
static uint64_t *sb_field(struct fmt_sb *sb, unsigned k)
{
	uint64_t *f[] = { &sb->member_size, &sb->log_offset, &sb->log_half, &sb->data_offset,
			  &sb->data_end, &sb->csum_offset };

	return f[k];
}

static void mut_sb(struct img *im)
{
	unsigned i = rnd() % 3 ? rnd() % MIN(im->n, 2) : rnd() % im->n, which = rnd() % 4, k;
	struct fmt_sb sb = im->sb[i][which == 1], *s = &sb;
	uint32_t *f32[] = { &s->version, &s->flags, &s->member_index, &s->member_count,
			    &s->stripe_unit, &s->block_size };

	k = rnd() % 14;
	if (k < 6) { /* the u64 geometry, often set to another field's value */
		uint64_t *f = sb_field(s, k);
		uint64_t other[] = { s->member_size, s->log_offset + 2 * s->log_half, s->data_offset,
				     s->data_end, s->csum_offset, s->member_size - FMT_SB_SIZE,
				     im->fsize[i], 0, FMT_SB_SIZE };

		*f = rnd() % 3 ? pick(*f, 8) : other[rnd() % 9] + (uint64_t)((int)(rnd() % 3) - 1) * 4096;
	} else if (k < 12) {
		uint32_t *f = f32[k - 6];

		if (k == 10 && rnd() % 2) /* stripe unit: powers of two around the limits */
			*f = (1u << (15 + rnd() % 13)) + (rnd() % 4 == 0);
		else if (k == 8 || k == 9)
			*f = rnd() % 2 ? rnd() % (MAXM + 2) : (uint32_t)pick(*f, 4);
		else
			*f = (uint32_t)pick(*f, 4);
	} else if (k == 12) { /* uuids: another filesystem, another member */
		if (rnd() % 2)
			s->fs_uuid[rnd() % 16] ^= 1;
		else
			s->member_uuid[rnd() % MAXM][rnd() % 16] ^= 1;
	} else { /* a whole valid geometry for another size or log half */
		uint64_t size = rnd() % 2 ? s->member_size : pick(s->member_size, 8);
		uint64_t half = rnd() % 2 ? s->log_half : (1ull << 20) * (1 + rnd() % 8);

		if (fmt_sb_geometry(s, size, half))
			return;
	}
	if (which != 1)
		im->sb[i][0] = sb;
	if (which != 0)
		im->sb[i][1] = sb;
	if (which == 3 && rnd() % 8 == 0)
		im->sbstate[i][rnd() % 2] = rnd() % 3;
}

static void mut_members(struct img *im)
{
	unsigned i = rnd() % im->n, j = rnd() % im->n;

	switch (rnd() % 4) {
	case 0: /* fewer or more members given than the set has */
		if (rnd() % 2 && im->n > 1)
			im->n--;
		else if (im->n < MAXM) {
			im->fsize[im->n] = im->fsize[im->n - 1];
			im->sb[im->n][0] = im->sb[im->n][1] = im->sb[im->n - 1][0];
			im->sbstate[im->n][0] = im->sbstate[im->n][1] = SB_OK;
			im->n++;
		}
		break;
	case 1: /* the file size of a member around its member_size */
		im->fsize[i] = rnd() % 2 ? im->sb[i][0].member_size - (rnd() % 2) * 4096 - rnd() % 2
				    : pick(im->fsize[i], 8);
		im->fsize[i] %= 256ull << 20; /* sparse, but a file size all the same */
		break;
	case 2: /* two members given in the wrong order, or one twice */
		if (i != j) {
			struct fmt_sb t[2];

			memcpy(t, im->sb[i], sizeof(t));
			memcpy(im->sb[i], im->sb[j], sizeof(t));
			if (rnd() % 2)
				memcpy(im->sb[j], t, sizeof(t));
		}
		break;
	default: /* a member's superblock copy only */
		im->sbstate[i][0] = rnd() % 2 ? SB_ABSENT : SB_BADSUM;
		break;
	}
}

/* Apply one mutation. Most go to log copy 0 and are copied to copy 1 (the mirrors agree). */
void mutate(struct img *im)
{
	int t = rnd() % 4, c = t == 3 ? 1 : 0, sync = t < 2 && im->n > 1;
	struct rlist *l;
	struct frec *r;

	switch (rnd() % 20) {
	case 0: case 1: case 2: case 3: case 4: case 5:
		if ((r = pick_rec(im, c, &l)))
			mut_field(r);
		break;
	case 6: case 7:
		if ((r = pick_rec(im, c, &l)))
			mut_name(im, c, r);
		break;
	case 8:
		if ((r = pick_rec(im, c, &l)))
			mut_header(r);
		break;
	case 9: case 10: case 11:
		mut_list(im, c);
		break;
	case 12: case 13:
		mut_batch(im, c);
		break;
	case 14: case 15:
		mut_half(im, c);
		break;
	case 16: case 17:
		mut_sb(im);
		sync = 0;
		break;
	default:
		mut_members(im);
		sync = 0;
		break;
	}
	if (sync) {
		half_free(&im->log[1][0]);
		half_free(&im->log[1][1]);
		half_clone(&im->log[1][0], &im->log[0][0]);
		half_clone(&im->log[1][1], &im->log[0][1]);
	}
}
