// SPDX-License-Identifier: MIT
/*
 * pipeline-build.c - the placement pipeline's pieces and records: a request cut into
 * pieces, each record's slot, tier chunk, member reads and checksum reads built, and the
 * checksum blocks read ahead (see pipeline.h, pipeline-int.h).
 */
#include "place/pipeline-int.h"
#include "place/usermem.h"

#include <errno.h>
#include <stdlib.h>

/* ---- pieces ---- */

static int add_piece(struct pipe *p, size_t *cap, uint64_t off, uint64_t len, uint64_t dst,
		     int direct)
{
	if (dm_grow(&p->pc, cap, p->npc + 1, sizeof(*p->pc), 64))
		return -ENOMEM;
	p->pc[p->npc++] = (struct piece){ off, len, dst, direct, 0 };
	return 0;
}

/*
 * With the warm tier, a window that is a whole chunk stays one piece, so that it can be
 * filled into the tier (or served from it); it keeps the direct read for when the tier
 * cannot take it.
 */
static int whole_chunk(const struct pipe *p, uint64_t off, uint64_t we)
{
	return p->tier && off % PIECE == 0 && (we - off == PIECE || we == p->fsize);
}

/*
 * Cut every entry at PIECE-aligned file offsets. For the host target, the block-aligned
 * middle of a window whose buffer address agrees with the file offset modulo 4096 is read
 * straight into the client's pages; its partial blocks, and whole windows that disagree,
 * go through a slot.
 */
int pipe_cut(struct pipe *p, const struct dmafs_ioc_place *rq)
{
	size_t cap = 0;
	int ret = 0;

	for (uint32_t i = 0; i < rq->count && !ret; i++) {
		uint64_t off = rq->e[i].file_offset, end = off + rq->e[i].length;
		uint64_t dst = rq->e[i].buffer_offset;

		while (off < end && !ret) {
			uint64_t we = MIN(end, ALIGN_DOWN(off, PIECE) + PIECE);
			uint64_t a = ALIGN_UP(off, DMAFS_BLOCK), b = ALIGN_DOWN(we, DMAFS_BLOCK);
			/* verified placements check the bytes in a slot of the daemon's
			 * own: the client could change its pages between read and hash */
			int congruent = !p->t->gpu && !p->verify &&
					((uintptr_t)(p->t->base + dst) - off) % DMAFS_BLOCK == 0;

			if (whole_chunk(p, off, we)) {
				ret = add_piece(p, &cap, off, we - off, dst,
						congruent && a == off && b == we);
				if (!ret)
					p->pc[p->npc - 1].whole = 1;
			} else if (congruent && a < b) {
				if (off < a)
					ret = add_piece(p, &cap, off, a - off, dst, 0);
				if (!ret)
					ret = add_piece(p, &cap, a, b - a, dst + (a - off), 1);
				if (!ret && b < we)
					ret = add_piece(p, &cap, b, we - b, dst + (b - off), 0);
			} else {
				ret = add_piece(p, &cap, off, we - off, dst, 0);
			}
			dst += we - off;
			off = we;
		}
	}
	return ret;
}

/*
 * A prefetch's pieces: the chunks of [from, to) (@from chunk aligned, @to a chunk boundary
 * or the end of the file), each a whole chunk, less those the tier holds already.
 */
int pipe_cut_chunks(struct pipe *p, uint64_t from, uint64_t to)
{
	size_t cap = 0;
	int ret = 0;

	for (uint64_t off = from; off < to && !ret; off += PIECE) {
		uint64_t len = MIN(PIECE, to - off);

		size_t e = meta_ext_find(p->ino, off);

		if (e >= p->ino->next || p->ino->ext[e].off >= off + len) {
			p->fo->skipped += len; /* a hole: nothing to read */
			continue;
		}
		if (tier_has(p->tier, p->ino, off / PIECE, (uint32_t)len)) {
			p->fo->held += len;
			continue;
		}
		ret = add_piece(p, &cap, off, len, 0, 0);
		if (!ret)
			p->pc[p->npc - 1].whole = 1;
	}
	return ret;
}

/* ---- records ---- */

static int push_op(struct rec *r, const struct uring_op *op, uint64_t foff)
{
	if (dm_grow(&r->ops, &r->cap, (size_t)r->nops + 1, sizeof(*r->ops), 8))
		return -ENOMEM;
	r->ops[r->nops++] = (struct pop){ .op = *op, .foff = foff, .rec = r };
	return 0;
}

static int emit_read(void *arg, const struct uring_op *op, uint64_t foff)
{
	return push_op(arg, op, foff);
}

/* A free record for the pieces from @pc, read into @buf, empty so far. */
static struct rec *rec_take(struct pipe *p, const struct piece *pc, int slot,
			    struct tier_chunk *tc, int fill, int verify, char *buf)
{
	struct rec *r = p->free_recs[--p->nfree_recs];

	r->p = p;
	r->pc = pc;
	r->npc = 0;
	r->len = 0;
	r->pitch = 0;
	r->slot = slot;
	r->tc = tc;
	r->fill = fill;
	r->verify = verify;
	r->copied = 0;
	r->csum_err = 0;
	r->buf = buf;
	r->err = 0;
	r->nops = 0;
	return r;
}

/* Give back what @r holds: its slot and the record itself. */
void rec_release(struct pipe *p, struct rec *r)
{
	if (r->slot >= 0) {
		stage_put(p->st, (unsigned)r->slot);
		p->held--;
		r->slot = -1;
	}
	if (r->tc) {
		tier_put(p->tier, r->tc);
		r->tc = NULL;
	}
	p->free_recs[p->nfree_recs++] = r;
}

/* The read-ahead span of member @tag that holds checksum bytes [a, b), or NULL. */
static const struct cspan *csum_find(const struct pipe *p, uint32_t tag, uint64_t a, uint64_t b)
{
	size_t lo = 0, hi = p->ncs;

	while (lo < hi) { /* the first span not before (tag, a) */
		size_t mid = (lo + hi) / 2;
		const struct cspan *c = &p->cs[mid];

		if (c->tag < tag || (c->tag == tag && c->b <= a))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->ncs && p->cs[lo].tag == tag && p->cs[lo].a <= a && b <= p->cs[lo].b &&
	    p->cs[lo].buf)
		return &p->cs[lo];
	return NULL;
}

/*
 * Add the checksum reads that cover each data read of @r, unless csum_ahead read them
 * already. Data reads that follow one another on a member (the rows of a packed slot)
 * share their checksum blocks: a span that starts inside the last checksum read of the
 * same member extends it.
 */
static int add_csum_reads(struct pipe *p, struct rec *r)
{
	size_t total = 0;
	unsigned last = 0; /* index of the last checksum read; 0: none yet */
	char *c;
	int ret = 0;

	for (unsigned i = 0; i < r->nd; i++) {
		uint64_t p0, ca, cb;

		fs_csum_span(p->fs, &r->ops[i].op, &p0, &ca, &cb);
		total += cb - ca;
	}
	if (r->ccap < total) {
		free(r->cbuf);
		r->cbuf = util_aligned_alloc(total);
		r->ccap = r->cbuf ? total : 0;
		if (!r->cbuf)
			return -ENOMEM;
	}
	c = r->cbuf;
	for (unsigned i = 0; i < r->nd && !ret; i++) {
		struct uring_op op = r->ops[i].op;
		uint64_t p0, ca, cb;

		fs_csum_span(p->fs, &op, &p0, &ca, &cb);
		const struct cspan *ahead = csum_find(p, op.tag, ca, cb);

		if (ahead) {
			r->ops[i].csum = ahead->buf + (ca - ahead->a);
			continue;
		}
		if (last) {
			struct uring_op *l = &r->ops[last].op;

			if (l->tag == op.tag && ca >= l->off && ca <= l->off + l->len) {
				r->ops[i].csum = (char *)l->buf + (ca - l->off);
				if (cb > l->off + l->len) {
					c += cb - (l->off + l->len);
					l->len = (uint32_t)(cb - l->off);
				}
				continue;
			}
		}
		r->ops[i].csum = c;
		op.buf = c;
		op.off = ca;
		op.len = (uint32_t)(cb - ca);
		c += cb - ca;
		last = r->nops;
		ret = push_op(r, &op, r->ops[i].foff);
	}
	return ret;
}

/*
 * Read the piece @q into @r's slot at @at, aligned to @g: its member reads (holes zeroed
 * now) join @r's. Sets *@next to the slot offset after it.
 */
static int add_to_slot(struct pipe *p, struct rec *r, const struct piece *q, uint64_t at,
		       uint64_t g, uint64_t *next)
{
	uint64_t a = ALIGN_DOWN(q->off, g), b = ALIGN_UP(q->off + q->len, g);

	if (dm_grow(&r->from, &r->fcap, (size_t)r->npc + 1, sizeof(*r->from), 16))
		return -ENOMEM;
	r->from[r->npc] = (uint32_t)(at + (q->off - a));
	if (r->npc == 1)
		r->pitch = q->len == r->pc[0].len ? r->from[1] - r->from[0] : 0;
	else if (r->npc > 1 && (q->len != r->pc[0].len ||
				r->from[r->npc] - r->from[r->npc - 1] != r->pitch))
		r->pitch = 0;
	r->npc++;
	r->len += q->len;
	*next = at + (b - a);
	/* read straight into the client's pages: its holes are zeroed there too, where the
	 * client may have taken the memory away (usermem.h) */
	if (r->slot < 0 && !r->tc)
		return fs_map_reads_z(p->fs, p->ino, r->buf + at, a, b, emit_read, r, usermem_zero);
	return fs_map_reads(p->fs, p->ino, r->buf + at, a, b, emit_read, r);
}

/* Whether the piece @q may join @r's slot, whose next free byte is @at. */
static int packs(const struct pipe *p, const struct rec *r, const struct piece *q, uint64_t at)
{
	const struct piece *last = &r->pc[r->npc - 1];

	/* what the tier holds or would take is placed on its own */
	if (p->tier && (q->whole || tier_has(p->tier, p->ino, q->off / PIECE,
					     (uint32_t)(q->off % PIECE + q->len))))
		return 0;
	return !q->direct && q->dst == last->dst + last->len && r->npc < PACK_MAX &&
	       r->nops < p->qd / 2 &&
	       at + ALIGN_UP(q->off + q->len, p->gran) - ALIGN_DOWN(q->off, p->gran) <= STAGE_SLOT;
}

/* Take a staging slot for the next record. Returns 1 (*@slot set), 0 none free now, -errno. */
static int take_slot(struct pipe *p, int *slot)
{
	int ret;

	if (!p->st) {
		ret = stage_get(p->t->stages, DMAFS_TARGET_HOST, NULL, 0, &p->st);
		if (ret)
			return ret;
	}
	if (!p->entered) {
		stage_enter(p->st);
		p->entered = 1;
	}
	/* the user's part of the slots, as of the reads (share.h), or the placement's */
	*slot = stage_take(p->st, p->held, p->share ? share_parts(p->share, p->uid) : 0);
	if (*slot < 0) {
		p->starved = 1;
		return 0;
	}
	p->held++;
	return 1;
}

/*
 * The piece @pc in the warm tier: *@tc the chunk holding it (*@fill 0), or else, for a
 * whole chunk, a chunk reserved to read it into (*@fill 1); *@tc NULL when neither.
 */
static void tier_lookup(struct pipe *p, const struct piece *pc, struct tier_chunk **tc,
			char **mem, int *fill)
{
	*fill = 0;
	*tc = tier_get(p->tier, p->ino, pc->off / PIECE, (uint32_t)(pc->off % PIECE + pc->len), mem);
	if (!*tc && pc->whole && !p->nofill) {
		*tc = tier_reserve(p->tier, mem, p->last_fill);
		if (*tc)
			p->last_fill = *tc;
		*fill = *tc != NULL;
	}
}

/*
 * A copy out of the tier: the pieces after @r's first join it (up to TIER_COPY_MAX) while
 * they follow on in the file and the target and the tier holds them in the chunks right
 * after its own in memory, in its segment (tier_follows), so that one device copy takes
 * them all (a host target's pool thread copies them piece by piece). Their chunks join
 * keep at once; @r's own goes with @r (host) or joins keep too (copy_out).
 */
static int join_hits(struct pipe *p, struct rec *r)
{
	const struct piece *pc = r->pc;

	while (p->next + r->npc < p->npc && r->len + PIECE <= TIER_COPY_MAX) {
		const struct piece *last = &pc[r->npc - 1], *q = &pc[r->npc];
		struct tier_chunk *c;
		char *m = NULL;

		if ((last->off + last->len) % PIECE || q->off != last->off + last->len ||
		    q->dst != last->dst + last->len)
			break;
		c = tier_get(p->tier, p->ino, q->off / PIECE, (uint32_t)q->len, &m);
		if (!c)
			break;
		if (!tier_follows(p->tier, r->tc, c, r->npc) ||
		    dm_grow(&r->from, &r->fcap, (size_t)r->npc + 1, sizeof(*r->from), 16) ||
		    dm_grow(&p->keep, &p->keepcap, p->nkeep + 1, sizeof(*p->keep), 256)) {
			tier_put(p->tier, c);
			break;
		}
		p->keep[p->nkeep++] = c;
		r->from[r->npc] = r->npc * PIECE;
		r->npc++;
		r->len += q->len;
	}
	return 0;
}

/*
 * A prefetch's next record: the next chunk not in the tier, read into a chunk reserved
 * for it, with its checksums. A chunk someone else filled meanwhile counts as held. When
 * every chunk of the tier is in use, wait for this prefetch's own fills to publish (which
 * frees chunks it can evict next); with none of them outstanding, the chunk is skipped:
 * its chunks are all held by other placements' copies. Returns as pipe_build().
 */
static int build_fill(struct pipe *p, struct rec **out)
{
	const struct piece *pc = NULL;
	struct tier_chunk *tc = NULL;
	struct rec *r;
	char *tmem = NULL;
	uint64_t at = 0;
	int ret;

	if (!p->nfree_recs)
		return 0;
	for (; p->next < p->npc; p->next++) {
		pc = &p->pc[p->next];
		if (tier_has(p->tier, p->ino, pc->off / PIECE, (uint32_t)pc->len)) {
			p->fo->held += pc->len;
			continue;
		}
		tc = tier_reserve(p->tier, &tmem, p->last_fill);
		if (tc) {
			p->last_fill = tc;
			break;
		}
		if (p->inflight || p->hashing)
			return 0;
		p->fo->skipped += pc->len;
	}
	if (!tc)
		return 0; /* nothing left */
	r = rec_take(p, pc, -1, tc, 1, 1, tmem);
	ret = add_to_slot(p, r, pc, 0, DMAFS_BLOCK, &at);
	r->nd = r->nops;
	if (!ret)
		ret = add_csum_reads(p, r);
	if (ret) {
		rec_release(p, r);
		return ret;
	}
	p->next++;
	*out = r;
	return 1;
}

/*
 * Build the record of the next pieces: a slot when they need one (pieces that pack
 * share it), their member reads (holes zeroed now). With the warm tier, a piece it holds
 * is placed from there with no read (a GPU target still takes a slot, for its copy's
 * event), and a whole chunk it does not hold is read into a chunk reserved for it, with
 * its checksums, whether or not placements verify. Returns 1 built, 0 nothing to do now
 * (no record or slot free), -errno.
 */
int pipe_build(struct pipe *p, struct rec **out)
{
	const struct piece *pc = &p->pc[p->next];
	struct tier_chunk *tc = NULL;
	struct rec *r;
	char *tmem = NULL;
	uint64_t at = 0;
	int slot = -1, fill = 0, direct, ret;

	if (p->fo)
		return build_fill(p, out);
	if (!p->nfree_recs)
		return 0;
	if (p->tier)
		tier_lookup(p, pc, &tc, &tmem, &fill);
	if (p->nofill && !tc && pc->whole) {
		p->miss_from = p->miss_to ? MIN(p->miss_from, pc->off) : pc->off;
		p->miss_to = MAX(p->miss_to, pc->off + pc->len);
	}
	direct = pc->direct && !tc;
	/* a GPU copy goes from a slot, or from the tier's chunk (then no slot: see keep) */
	if ((p->t->gpu || !direct) && !tc) {
		ret = take_slot(p, &slot);
		if (ret <= 0)
			return ret;
	}
	r = rec_take(p, pc, slot, tc, fill, p->verify || fill,
		     tc ? tmem : slot >= 0 ? stage_mem(p->st, (unsigned)slot) : p->t->base + pc->dst);
	if (tc && !fill) { /* in the tier: verified when it went in */
		ret = dm_grow(&r->from, &r->fcap, 1, sizeof(*r->from), 16) ? -ENOMEM : 0;
		if (!ret) {
			r->from[0] = (uint32_t)(pc->off % PIECE);
			r->npc = 1;
			r->len = pc->len;
		}
		r->verify = 0;
		if (!ret)
			ret = join_hits(p, r);
	} else {
		/* a direct piece is block-aligned in the file and in the client's pages; a
		 * fill starts at its chunk and is checked whole blocks at a time */
		ret = add_to_slot(p, r, pc, 0, direct || fill ? DMAFS_BLOCK : p->gran, &at);
		while (!ret && !direct && !tc && p->next + r->npc < p->npc &&
		       packs(p, r, &pc[r->npc], at))
			ret = add_to_slot(p, r, &pc[r->npc], at, p->gran, &at);
	}
	r->nd = r->nops;
	if (!ret && r->verify)
		ret = add_csum_reads(p, r);
	if (ret) {
		rec_release(p, r);
		return ret;
	}
	if (p->tier)
		for (unsigned k = 0; k < r->npc; k++) {
			tier_count(p->tier, tc && !fill, pc[k].len);
			if (tc && !fill)
				p->tier_bytes += pc[k].len;
		}
	p->next += r->npc;
	*out = r;
	return 1;
}

/* the records pieces are read into, all on the free list: 0 or -ENOMEM (nothing kept) */
int recs_alloc(struct pipe *p)
{
	p->nrecs = (unsigned)MIN(MAX_RECS, p->npc);
	p->recs = calloc(p->nrecs, sizeof(*p->recs));
	p->free_recs = malloc(p->nrecs * sizeof(*p->free_recs));
	if (!p->recs || !p->free_recs) {
		free(p->recs);
		free(p->free_recs);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < p->nrecs; i++)
		p->free_recs[p->nfree_recs++] = &p->recs[p->nrecs - 1 - i];
	return 0;
}

/*
 * The alignment of slot reads: the filesystem block when checksums are checked (they
 * cover whole blocks), else the members' largest sector, so that a slice narrower than a
 * block costs little more than its bytes (an image file's sector is the O_DIRECT
 * alignment of the filesystem under it: read_geometry in io/member.c).
 */
uint64_t read_granule(const struct fs *fs, int verify)
{
	uint64_t g = 512;

	if (verify)
		return DMAFS_BLOCK;
	for (unsigned i = 0; i < fs->n; i++)
		g = MAX(g, fs->members[i].lbs);
	return g;
}

/*
 * Checksum read-ahead. A verified member read (verify_place, a fill of the warm tier, a
 * prefetch) needs the checksum blocks that cover it, a 4 KiB read of its own: two reads
 * where one would do, which emulated drives (a loop device pays per read) and busy ones
 * feel. Before the first data read goes out, the checksum bytes of every piece that will
 * be read and checked are read in a few long reads, spans of one member closer than
 * CSUM_GAP joined: 8 bytes per 4 KiB block, 2 MiB for a 1 GiB placement. The placement
 * holds the file's iolock, so no write changes them meanwhile. A span that cannot be
 * read is left to the per-read checksum reads, which report what failed.
 */
#define CSUM_GAP (64u << 10)

static int cspan_cmp(const void *x, const void *y)
{
	const struct cspan *a = x, *b = y;

	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	return a->a < b->a ? -1 : a->a > b->a;
}

/* Whether piece @q will be read from the members and checked. */
static int piece_checked(const struct pipe *p, const struct piece *q)
{
	if (p->verify)
		return 1;
	return p->tier && !p->nofill && q->whole &&
	       !tier_has(p->tier, p->ino, q->off / PIECE, (uint32_t)(q->off % PIECE + q->len));
}

/* The checksum spans of @p's checked pieces, sorted and joined, into p->cs. */
static int csum_spans(struct pipe *p)
{
	size_t cap = 0, n = 0;

	for (size_t i = 0; i < p->npc; i++) {
		const struct piece *q = &p->pc[i];
		uint64_t a = ALIGN_DOWN(q->off, DMAFS_BLOCK), b = ALIGN_UP(q->off + q->len, DMAFS_BLOCK);

		if (!piece_checked(p, q))
			continue;
		for (size_t k = meta_ext_find(p->ino, a); k < p->ino->next; k++) {
			const struct extent *e = &p->ino->ext[k];
			const struct fmt_sb *sb;
			uint64_t x = MAX(a, e->off), y = MIN(b, e->off + e->len);
			struct uring_op op;

			if (e->off >= b)
				break;
			if (x >= y)
				continue;
			/* the copy the data reads will take (a mirror's: fs_pick_copy) */
			op = (struct uring_op){ .tag = (int)e->member, .off = e->moff + (x - e->off),
						.len = (uint32_t)(y - x) };
			fs_pick_copy(p->fs, &op, x);
			sb = &p->fs->members[op.tag].sb;
			if (dm_grow(&p->cs, &cap, p->ncs + 1, sizeof(*p->cs), 64))
				return -ENOMEM;
			p->cs[p->ncs++] = (struct cspan){
				.tag = (uint32_t)op.tag,
				.a = ALIGN_DOWN(fmt_csum_pos(sb, op.off), DMAFS_BLOCK),
				.b = ALIGN_UP(fmt_csum_pos(sb, op.off + op.len), DMAFS_BLOCK),
			};
		}
	}
	if (!p->ncs)
		return 0;
	qsort(p->cs, p->ncs, sizeof(*p->cs), cspan_cmp);
	for (size_t i = 1; i < p->ncs; i++) {
		struct cspan *c = &p->cs[n];

		if (p->cs[i].tag == c->tag && p->cs[i].a <= c->b + CSUM_GAP)
			c->b = MAX(c->b, p->cs[i].b);
		else
			p->cs[++n] = p->cs[i];
	}
	p->ncs = n + 1;
	return 0;
}

/*
 * Read p->cs's spans, all at once (uring_rw: it gives up, bounded, when the ring fails).
 * A span that fails is left to the checksum reads of the data reads it covers.
 */
void pipe_csum_ahead(struct pipe *p)
{
	struct uring_op *ops;
	size_t total = 0;
	char *at;

	if (csum_spans(p) || !p->ncs) {
		p->ncs = 0; /* without them, the per-read checksum reads */
		return;
	}
	for (size_t i = 0; i < p->ncs; i++)
		total += p->cs[i].b - p->cs[i].a;
	p->csbuf = util_aligned_alloc(total);
	ops = calloc(p->ncs, sizeof(*ops));
	if (!p->csbuf || !ops) {
		free(ops);
		p->ncs = 0;
		return;
	}
	at = p->csbuf;
	for (size_t i = 0; i < p->ncs; i++) {
		struct cspan *c = &p->cs[i];

		c->buf = at;
		at += c->b - c->a;
		ops[i] = (struct uring_op){ .fd = p->fs->members[c->tag].fd, .buf = c->buf,
					    .len = (uint32_t)(c->b - c->a), .off = c->a, .tag = c->tag };
	}
	(void)uring_rw(ops, p->ncs); /* each op's res says how it went */
	for (size_t i = 0; i < p->ncs; i++)
		if (ops[i].res)
			p->cs[i].buf = NULL;
	free(ops);
}
