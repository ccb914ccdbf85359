// SPDX-License-Identifier: MIT
/* pipeline.c - the continuous placement pipeline (see pipeline.h). */
#include "place/pipeline.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/tier.h"
#include "gpu.h"
#include "io/uring.h"
#include "place/usermem.h"
#include "io/workpool.h"

#define PIECE STAGE_SLOT	 /* file window a piece stays inside */
#define QD_PER_MEMBER 32	 /* member reads in flight per member and placement */
#define QD_MIN 64
#define QD_SHARE_MIN 8		 /* a request's part of QD_MIN never goes below this */
#define MAX_RECS 1024
#define POLL_US 50		 /* wait slice while copies or hashing are outstanding */
#define PACK_MAX 256		 /* pieces packed into one slot at most */
/*
 * A copy out of the tier takes chunks that follow one another in the file, the target and
 * tier memory at once, up to this much: from pinned memory, device copies of 1 MiB each
 * reach 48 GB/s on an H100, of 8 MiB 54, of 64 MiB 55 (dmafs(8), Warm tier).
 */
#define TIER_COPY_MAX (16u << 20)

_Static_assert(TIER_CHUNK == PIECE, "a piece lies inside one chunk of the warm tier");


/* A piece: file bytes [off, off + len) go to buffer offset dst. */
struct piece {
	uint64_t off, len, dst;
	int direct; /* read straight into the client's pages (host, block aligned) */
	int whole;  /* a whole chunk of the warm tier (to the end of the file in the last) */
};

struct pipe;

/* One member read of a piece in flight. */
struct pop {
	struct uring_op op;
	uint64_t foff;	/* file offset of the op's first byte (data reads) */
	uint32_t done;	/* bytes transferred so far */
	struct rec *rec;
	const char *csum; /* data reads with checksums: where the checksum blocks of its
			   * first block begin (fs_verify_read's @csums) */
};

/*
 * A slot's worth in flight: read, then (verified and) delivered, then released. Small
 * pieces whose destinations follow one another share a slot (a row slice of a matrix is
 * one piece per row): each is read on its own, aligned to the members' sector, and the
 * slot is packed (memmove) before one device copy takes them all.
 */
struct rec {
	struct work w;		/* with the hash pool */
	struct rec *next;	/* copy FIFO, hash queue, verified list */
	struct pipe *p;
	const struct piece *pc;	/* pc[0 .. npc) */
	unsigned npc;
	uint32_t *from;		/* slot offset of each piece's first byte */
	size_t fcap;
	uint64_t len;		/* bytes of all its pieces */
	uint32_t pitch;		/* with npc > 1: the pieces are alike, this far apart in the
				 * slot (one 2-D device copy takes them); 0: they are not */
	int slot;		/* staging slot, or -1 when direct or from the tier to the host */
	char *buf;		/* the slot (direct: the client's pages at pc[0].dst; tier: the chunk) */
	struct tier_chunk *tc;	/* the tier chunk it is placed from, or read into (fill) */
	int fill;		/* read into tc, published once verified */
	int verify;		/* its checksum reads follow its data reads in ops */
	int copied;		/* a host target's copy is done (on the hash pool) */
	unsigned left;		/* reads outstanding */
	int err;
	struct pop *ops;	/* data reads [0, nd), then their checksum reads [nd, 2 nd) */
	unsigned nd, nops;
	size_t cap;
	char *cbuf;		/* checksum blocks */
	size_t ccap;
	uint64_t t_sub, t_copy;	/* when its reads went out, when its copy was queued */
	uint64_t t_ready;	/* when it joined the ready list */
};

/* What a placement waited on, logged at debug level when it ends. */
struct pstats {
	uint64_t t0, last;
	uint64_t held_ns, inflight_ns;	/* time-weighted: slots held, reads in flight */
	uint64_t read_ns, copy_ns;	/* summed over pieces */
	uint64_t nread, ncopy, nops;
	uint64_t wait_ns[4];		/* in wait_some: reads, copies, hashing, no slot */
	uint64_t starved;
};

struct pipe {
	struct fs *fs;
	struct inode *ino;
	const struct pipe_target *t;
	int verify;
	uint64_t gran;		/* slot reads are aligned to this (read_granule) */
	struct tier *tier;	/* the warm tier, or NULL */
	uint64_t tgen;		/* the file's tier generation before any read went out */
	uint64_t fsize;		/* the file's size (fixed: the caller holds iolock) */
	struct io_uring *ring;
	struct stage *st;	/* slots: the GPU pool, or the host bounce pool once needed */
	int entered;		/* stage_enter() done on st */
	void *stream;
	struct piece *pc;
	size_t npc, next;
	struct rec *recs, **free_recs;
	unsigned nrecs, nfree_recs;
	struct rec *pending;	/* built but not submitted: the queue was full */
	unsigned held;		/* slots held */
	unsigned qd, inflight;	/* member reads in flight (limit, now) */
	unsigned hashing;	/* pieces with the hash pool */
	struct rec *rd_head, *rd_tail; /* read (and verified), device copy not queued yet */
	struct rec *cq_head, *cq_tail; /* device copies in flight, in stream order */
	int starved;		/* the last issue found no slot */
	int err;
	pthread_mutex_t vlock;
	pthread_cond_t vcond;
	struct rec *verified;	/* back from the hash pool; protected by vlock */
	struct pstats *ps;	/* NULL unless debug logging is on */
	struct pipe_fill *fo;	/* a prefetch: no target, whole chunks read into the warm
				 * tier only, counted here; NULL for a placement */
	uint64_t tier_bytes;	/* a placement: bytes of its pieces placed from the tier */
	int nofill;		/* tier_fill=idle: a placement fills nothing, it notes... */
	uint64_t miss_from, miss_to; /* ...the whole chunks it missed, [from, to) */
	/*
	 * Chunks copied out of the tier that no record holds any more: a GPU target's
	 * records hold no staging slot (the chunk is the source, pinned), so they are not
	 * bounded by the pool, and their chunks stay referenced until the placement's stream
	 * is synchronised at its end; the chunks join_hits added to a record, of any target,
	 * stay until then too.
	 */
	struct tier_chunk **keep;
	size_t nkeep, keepcap;
	/* checksum blocks read ahead for the verified reads (csum_ahead), by member, offset */
	struct cspan *cs;
	size_t ncs;
	char *csbuf;
	const struct tier_chunk *last_fill; /* the chunk it reserved last: the next goes after */
	const struct pipe_stop *stop; /* the request's: asked before each record is built */
	struct share *share;	/* the user's part of qd (share.h), or NULL: all of it */
	uid_t uid;
};

/* The request is to stop (interrupted, its client killed)? */
static int stopped(const struct pipe *p)
{
	return p->stop && p->stop->fn && p->stop->fn(p->stop->arg);
}

/* Checksum bytes [a, b) of member @tag, read ahead into buf (NULL: the read failed). */
struct cspan {
	uint32_t tag;
	uint64_t a, b;
	char *buf;
};

/* ---- the hash pool: checks pieces' checksums while the reads go on ---- */

static int rec_verify(struct rec *r)
{
	struct pipe *p = r->p;
	int ret = 0;

	for (unsigned i = 0; i < r->nd; i++)
		if (fs_verify_read(p->fs, p->ino, &r->ops[i].op, r->ops[i].csum, r->ops[i].foff))
			ret = -EIO;
	return ret;
}

/*
 * A GPU target takes a packed slot in one copy: pieces at an even pitch in one 2-D copy
 * (a row slice of rows whose length is a multiple of the sector); others are moved
 * together at the slot's start first.
 */
static int needs_pack(const struct pipe *p, const struct rec *r)
{
	return p->t->gpu && r->npc > 1 && !r->pitch && !r->tc; /* tier chunks: join_hits */
}

/*
 * A host target takes a slot's or a tier chunk's bytes by memcpy into its pages: on the
 * hash pool's threads, several at once, not one after the other in the placement's own
 * thread (a placement served from the warm tier is nothing but these copies).
 */
static int host_copy(const struct pipe *p, const struct rec *r)
{
	return !p->t->gpu && !p->fo && (r->tc || r->slot >= 0);
}

/* @r's pieces into the client's pages; -EFAULT when they are gone (the client's fault). */
static int copy_to_host(struct pipe *p, struct rec *r)
{
	for (unsigned k = 0; k < r->npc; k++)
		if (usermem_copy(p->t->base + r->pc[k].dst, r->buf + r->from[k], r->pc[k].len))
			return -EFAULT;
	return 0;
}

static void rec_pack(struct rec *r)
{
	uint64_t at = 0;

	if (!needs_pack(r->p, r))
		return;
	for (unsigned k = 0; k < r->npc; k++) {
		memmove(r->buf + at, r->buf + r->from[k], r->pc[k].len);
		r->from[k] = (uint32_t)at;
		at += r->pc[k].len;
	}
}

/* On a pool thread: check one slot's pieces and pack them, hand it back to its placement. */
static void rec_hash(struct work *w)
{
	struct rec *r = container_of(w, struct rec, w);
	struct pipe *p = r->p;

	r->err = r->verify ? rec_verify(r) : 0;
	if (!r->err)
		rec_pack(r);
	if (!r->err && host_copy(p, r)) {
		r->err = copy_to_host(p, r);
		r->copied = 1;
	}
	pthread_mutex_lock(&p->vlock);
	r->next = p->verified;
	p->verified = r;
	pthread_cond_signal(&p->vcond);
	pthread_mutex_unlock(&p->vlock);
}

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
static int cut(struct pipe *p, const struct dmafs_ioc_place *rq)
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
static int cut_chunks(struct pipe *p, uint64_t from, uint64_t to)
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

/* Add @r at the tail of the queue @head..@tail (the ready list, the copy list). */
static void rec_append(struct rec **head, struct rec **tail, struct rec *r)
{
	r->next = NULL;
	if (*tail)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
}

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
	r->buf = buf;
	r->err = 0;
	r->nops = 0;
	return r;
}

/* Give back what @r holds: its slot and the record itself. */
static void rec_release(struct pipe *p, struct rec *r)
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

static void fail(struct pipe *p, int err)
{
	if (!p->err)
		p->err = err;
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
 * its chunks are all held by other placements' copies. Returns as build().
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
static int build(struct pipe *p, struct rec **out)
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

static int submit_op(struct pipe *p, struct pop *o)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(p->ring);

	if (!sqe) {
		io_uring_submit(p->ring);
		sqe = io_uring_get_sqe(p->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_read(sqe, o->op.fd, (char *)o->op.buf + o->done, o->op.len - o->done,
			   o->op.off + o->done);
	io_uring_sqe_set_data(sqe, o);
	p->inflight++;
	return 0;
}

/* ---- delivery ---- */

static void deliver(struct pipe *p, struct rec *r);
static void copy_out(struct pipe *p, struct rec *r);

/* All reads of @r are in. */
static void rec_read(struct pipe *p, struct rec *r)
{
	if (p->ps && r->nops) {
		p->ps->read_ns += dm_mono_ns() - r->t_sub;
		p->ps->nread++;
		p->ps->nops += r->nd;
	}
	if (r->err || p->err) {
		fail(p, r->err);
		rec_release(p, r);
		return;
	}
	if (r->verify || needs_pack(p, r) || host_copy(p, r)) {
		if (workpool_start(p->fs->pool) > 0) {
			p->hashing++;
			r->w.fn = rec_hash;
			workpool_queue(p->fs->pool, &r->w);
			return;
		}
		r->err = r->verify ? rec_verify(r) : 0;
		if (r->err) {
			fail(p, r->err);
			rec_release(p, r);
			return;
		}
		rec_pack(r);
	}
	deliver(p, r);
}

static void deliver(struct pipe *p, struct rec *r)
{
	const struct piece *pc = &r->pc[0];

	if (p->fo) { /* a prefetch: kept, or someone else's copy is there, or the file changed */
		if (tier_publish(p->tier, r->tc, p->ino, pc->off / PIECE, (uint32_t)pc->len, p->tgen))
			p->fo->read += pc->len;
		else if (tier_has(p->tier, p->ino, pc->off / PIECE, (uint32_t)pc->len))
			p->fo->held += pc->len;
		else
			p->fo->skipped += pc->len;
		rec_release(p, r);
		return;
	}
	if (r->fill) /* read and verified: the tier may keep it */
		tier_publish(p->tier, r->tc, p->ino, pc->off / PIECE, (uint32_t)pc->len, p->tgen);
	if (r->slot < 0 && !r->tc) { /* direct: the bytes are where they belong */
		rec_release(p, r);
		return;
	}
	if (!p->t->gpu) {
		/* the client may have shrunk its memory object: its fault, not a member's */
		if (!r->copied && copy_to_host(p, r))
			fail(p, -EFAULT);
		rec_release(p, r);
		return;
	}
	if (!p->t->copy_delay_ns) {
		copy_out(p, r);
		return;
	}
	r->t_ready = dm_mono_ns();
	rec_append(&p->rd_head, &p->rd_tail, r);
}

/*
 * Queue the device copies of ready pieces that have waited the copy delay; with @all,
 * of every ready piece. A slot just filled by a CPU copy (a loop device's worker) still
 * sits in that core's private cache, and the device reading it from there slows the
 * reads that follow; a short wait lets it reach the shared cache first (pipeline.h).
 */
static int flush_ready(struct pipe *p, int all)
{
	uint64_t now = dm_mono_ns();
	int n = 0;

	while (p->rd_head && (all || now - p->rd_head->t_ready >= p->t->copy_delay_ns)) {
		struct rec *r = p->rd_head;

		p->rd_head = r->next;
		if (!p->rd_head)
			p->rd_tail = NULL;
		if (p->err)
			rec_release(p, r);
		else
			copy_out(p, r);
		n++;
	}
	return n;
}

/*
 * Queue @r's host-to-device copy (its pieces lie together from from[0], rec_pack, or at
 * an even pitch); its slot comes back when the copy's event fires. A copy out of a tier
 * chunk has no slot: the chunk joins keep, the record is free at once.
 */
static void copy_out(struct pipe *p, struct rec *r)
{
	struct stage *s = p->st;
	char *dst = p->t->base + r->pc[0].dst;
	int ret = r->npc > 1 && r->pitch ?
		gpu_copy_htod_2d_async(s->gpu, s->dev, dst, r->pc[0].len, r->buf + r->from[0],
				       r->pitch, r->pc[0].len, r->npc, p->stream) :
		gpu_copy_htod_async(s->gpu, s->dev, dst, r->buf + r->from[0], r->len, p->stream);

	if (ret) {
		fail(p, -ENODEV);
		rec_release(p, r);
		return;
	}
	if (r->slot < 0) {
		if (dm_grow(&p->keep, &p->keepcap, p->nkeep + 1, sizeof(*p->keep), 256)) {
			gpu_stream_sync(s->gpu, s->dev, p->stream); /* then the chunk can go */
		} else {
			p->keep[p->nkeep++] = r->tc;
			r->tc = NULL;
		}
		rec_release(p, r);
		return;
	}
	if (gpu_event_record(s->gpu, s->dev, s->event[r->slot], p->stream)) {
		/* without the event, only a full sync says the slot is free again */
		fail(p, -ENODEV);
		gpu_stream_sync(s->gpu, s->dev, p->stream);
		rec_release(p, r);
		return;
	}
	if (p->ps)
		r->t_copy = dm_mono_ns();
	rec_append(&p->cq_head, &p->cq_tail, r);
}

/* Release the slots whose device copies have finished; with @wait, the oldest at least. */
static int reclaim(struct pipe *p, int wait)
{
	struct stage *s = p->st;
	int n = 0;

	while (p->cq_head) {
		struct rec *r = p->cq_head;
		int q = wait && !n ? (gpu_event_sync(s->gpu, s->dev, s->event[r->slot]) ? -ENODEV : 1)
				   : gpu_event_query(s->gpu, s->dev, s->event[r->slot]);

		if (q == 0)
			break;
		if (q < 0) {
			/* the device is in trouble: wait for the stream so no copy reads a
			 * slot after it is given back */
			fail(p, -ENODEV);
			gpu_stream_sync(s->gpu, s->dev, p->stream);
		}
		p->cq_head = r->next;
		if (!p->cq_head)
			p->cq_tail = NULL;
		if (p->ps) {
			p->ps->copy_ns += dm_mono_ns() - r->t_copy;
			p->ps->ncopy++;
		}
		rec_release(p, r);
		n++;
	}
	return n;
}

/* Pieces back from the hash pool: deliver them, or fail. */
static int take_verified(struct pipe *p, int wait)
{
	struct rec *list;
	int n = 0;

	pthread_mutex_lock(&p->vlock);
	if (wait && !p->verified) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += POLL_US * 1000;
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&p->vcond, &p->vlock, &ts);
	}
	list = p->verified;
	p->verified = NULL;
	pthread_mutex_unlock(&p->vlock);
	while (list) {
		struct rec *r = list;

		list = r->next;
		p->hashing--;
		n++;
		if (r->err || p->err) {
			fail(p, r->err);
			rec_release(p, r);
		} else {
			deliver(p, r);
		}
	}
	return n;
}

/* ---- reads ---- */

static void op_done(struct pipe *p, struct pop *o)
{
	struct rec *r = o->rec;

	if (--r->left == 0)
		rec_read(p, r);
}

/* Handle one completion. */
static void complete(struct pipe *p, struct io_uring_cqe *cqe)
{
	struct pop *o = io_uring_cqe_get_data(cqe);
	int res = cqe->res;

	p->inflight--;
	if (res == -EAGAIN || res == -EINTR) {
		res = 0;
	} else if (res == -EFAULT && o->rec->slot < 0 && !o->rec->tc) {
		/* a direct read into client pages that are gone: the client's fault, so no
		 * member is blamed (staging slots and tier chunks are the daemon's and never
		 * fault) */
		o->op.res = res;
		o->rec->err = -EFAULT;
		op_done(p, o);
		return;
	} else if (res < 0 || (res == 0 && o->done < o->op.len)) {
		o->op.res = res < 0 ? res : -EIO;
		fs_io_error(p->fs, p->ino, &o->op, o->foff, "read");
		o->rec->err = -EIO;
		op_done(p, o);
		return;
	}
	o->done += (uint32_t)res;
	if (o->done < o->op.len) { /* short read: the rest */
		if (submit_op(p, o)) {
			o->op.res = -EBUSY;
			o->rec->err = -EIO;
			op_done(p, o);
		}
		return;
	}
	op_done(p, o);
}

static int reap(struct pipe *p)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(p->ring, head, cqe) {
		complete(p, cqe);
		n++;
	}
	io_uring_cq_advance(p->ring, n);
	if (io_uring_sq_ready(p->ring)) /* resubmitted short reads */
		io_uring_submit(p->ring);
	return (int)n;
}

/* Submit the reads of every piece that can go now. Returns how many pieces went. */
static int issue(struct pipe *p)
{
	/* this user's part of the queue depth, as the users running requests are now */
	unsigned qd = p->share ? MAX(QD_SHARE_MIN, p->qd / share_parts(p->share, p->uid)) : p->qd;
	int n = 0;

	p->starved = 0;
	while (!p->err && (p->pending || p->next < p->npc)) {
		struct rec *r = p->pending;
		int ret;

		if (!r) {
			if (stopped(p)) { /* no new reads: what is in flight finishes */
				fail(p, -EINTR);
				break;
			}
			ret = build(p, &r);
			if (ret < 0) {
				fail(p, ret);
				break;
			}
			if (ret == 0)
				break;
		}
		if (p->inflight && p->inflight + r->nops > qd) {
			p->pending = r;
			break;
		}
		p->pending = NULL;
		r->left = r->nops;
		if (p->ps)
			r->t_sub = dm_mono_ns();
		if (r->nops == 0) { /* all hole */
			rec_read(p, r);
			n++;
			continue;
		}
		for (unsigned i = 0; i < r->nops; i++) {
			r->ops[i].done = 0;
			if (submit_op(p, &r->ops[i])) {
				/* the ring is wedged: treat the rest as failed reads */
				fail(p, -EIO);
				r->left -= r->nops - i;
				if (r->left == 0)
					rec_read(p, r);
				break;
			}
		}
		n++;
	}
	if (n)
		io_uring_submit(p->ring);
	return n;
}

static int finished(const struct pipe *p)
{
	return (p->err || (p->next == p->npc && !p->pending)) && !p->inflight && !p->hashing &&
	       !p->rd_head && !p->cq_head;
}

/* Nothing moved: sleep until something can. */
static void wait_some(struct pipe *p)
{
	struct io_uring_cqe *cqe;
	int why = p->starved ? 3 : p->inflight ? 0 : p->hashing ? 2 : 1;
	uint64_t t = p->ps ? dm_mono_ns() : 0;

	if (p->rd_head && !p->inflight && !p->hashing) {
		flush_ready(p, 1); /* nothing else is coming: no reason to wait */
	} else if (p->inflight) {
		if (p->cq_head || p->hashing || p->starved || p->rd_head) {
			struct __kernel_timespec ts = { 0, POLL_US * 1000 };

			io_uring_wait_cqe_timeout(p->ring, &cqe, &ts);
		} else {
			io_uring_wait_cqe(p->ring, &cqe);
		}
	} else if (p->hashing) {
		take_verified(p, 1);
	} else if (p->cq_head) {
		reclaim(p, 1);
	} else if (p->starved) {
		stage_wait(p->st, 1000);
	}
	if (p->ps) {
		p->ps->wait_ns[why] += dm_mono_ns() - t;
		p->ps->starved += p->starved;
	}
}

/* Account the time since the last step to the slots held and reads in flight. */
static void pstats_step(struct pipe *p)
{
	uint64_t now = dm_mono_ns(), dt = now - p->ps->last;

	p->ps->held_ns += dt * p->held;
	p->ps->inflight_ns += dt * p->inflight;
	p->ps->last = now;
}

static void pstats_log(const struct pipe *p, uint64_t bytes)
{
	const struct pstats *s = p->ps;
	double t = (double)(dm_mono_ns() - s->t0);

	log_debug("placement pipeline: inode %llu, %zu pieces (%llu member reads), %.1f MiB in "
		  "%.2f ms (%.2f GB/s); average slots held %.1f, reads in flight %.1f (limit %u); "
		  "per piece: read %.0f us, copy %.0f us after a delay of %llu us; waited for reads "
		  "%.2f ms, copies %.2f ms, hashing %.2f ms, a slot %.2f ms (%llu times)",
		  (unsigned long long)p->ino->ino, p->npc, (unsigned long long)s->nops,
		  bytes / 1048576.0, t / 1e6, bytes / t, s->held_ns / t, s->inflight_ns / t, p->qd,
		  s->nread ? s->read_ns / 1e3 / s->nread : 0.0,
		  s->ncopy ? s->copy_ns / 1e3 / s->ncopy : 0.0,
		  (unsigned long long)(p->t->gpu ? p->t->copy_delay_ns / 1000 : 0), s->wait_ns[0] / 1e6,
		  s->wait_ns[1] / 1e6, s->wait_ns[2] / 1e6, s->wait_ns[3] / 1e6,
		  (unsigned long long)s->starved);
}

/* the records pieces are read into, all on the free list: 0 or -ENOMEM (nothing kept) */
static int recs_alloc(struct pipe *p)
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

/* Move every stage along until all pieces are placed or the pipe failed; sleep only when stuck. */
static void drive(struct pipe *p)
{
	for (;;) {
		int moved = 0;

		if (p->ps)
			pstats_step(p);
		if (p->rd_head)
			moved += flush_ready(p, p->err != 0);
		if (p->cq_head)
			moved += reclaim(p, 0);
		if (p->hashing)
			moved += take_verified(p, 0);
		moved += issue(p);
		moved += reap(p);
		if (finished(p))
			break;
		if (!moved)
			wait_some(p);
	}
}

/* release what pipeline_run() set up, the statistics logged first */
static void teardown(struct pipe *p)
{
	if (p->ps) {
		uint64_t bytes = 0;

		for (size_t i = 0; i < p->npc; i++)
			bytes += p->pc[i].len;
		pstats_log(p, bytes);
		free(p->ps);
	}
	if (p->pending)
		rec_release(p, p->pending);
	if (p->entered)
		stage_leave(p->st);
	for (unsigned i = 0; i < p->nrecs; i++) {
		free(p->recs[i].ops);
		free(p->recs[i].cbuf);
		free(p->recs[i].from);
	}
	pthread_mutex_destroy(&p->vlock);
	pthread_cond_destroy(&p->vcond);
	free(p->cs);
	free(p->csbuf);
	free(p->recs);
	free(p->free_recs);
	free(p->pc);
}

/*
 * The alignment of slot reads: the filesystem block when checksums are checked (they
 * cover whole blocks), else the members' largest sector, so that a slice narrower than a
 * block costs little more than its bytes (an image file's sector is the O_DIRECT
 * alignment of the filesystem under it: read_geometry in io/member.c).
 */
static uint64_t read_granule(const struct fs *fs, int verify)
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
			const struct fmt_sb *sb = &p->fs->members[e->member].sb;
			uint64_t x = MAX(a, e->off), y = MIN(b, e->off + e->len);

			if (e->off >= b)
				break;
			if (x >= y)
				continue;
			if (dm_grow(&p->cs, &cap, p->ncs + 1, sizeof(*p->cs), 64))
				return -ENOMEM;
			p->cs[p->ncs++] = (struct cspan){
				.tag = e->member,
				.a = ALIGN_DOWN(fmt_csum_pos(sb, e->moff + (x - e->off)), DMAFS_BLOCK),
				.b = ALIGN_UP(fmt_csum_pos(sb, e->moff + (y - e->off)), DMAFS_BLOCK),
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
static void csum_ahead(struct pipe *p)
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

/* Set up what @p's pieces need, drive them through, tear down. Returns p->err. */
static int run(struct pipe *p)
{
	const struct pipe_target *t = p->t;

	p->ring = uring_pipe_ring();
	if (!p->ring) {
		free(p->pc);
		return -ENOMEM;
	}
	p->qd = MIN(URING_PIPE_DEPTH, MAX(QD_MIN, QD_PER_MEMBER * p->fs->n));
	if (recs_alloc(p)) {
		free(p->pc);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->vlock, NULL);
	pthread_cond_init(&p->vcond, NULL);
	if (t->gpu) {
		stage_enter(p->st);
		p->entered = 1;
		p->stream = p->st->stream[__atomic_fetch_add(&p->st->next_stream, 1, __ATOMIC_RELAXED) %
					  STAGE_STREAMS];
	}
	if (util_log_enabled(LOG_LVL_DEBUG)) {
		p->ps = calloc(1, sizeof(*p->ps));
		if (p->ps)
			p->ps->t0 = p->ps->last = dm_mono_ns();
	}
	if (p->verify || p->tier)
		csum_ahead(p);
	drive(p);
	if (p->nkeep) {
		/* the copies out of the tier are done (the placement's bytes are in place when
		 * it returns; a host target's were made on the pool before drive() ended), then
		 * their chunks may go */
		if (p->t->gpu && gpu_stream_sync(p->st->gpu, p->st->dev, p->stream))
			fail(p, -ENODEV);
		for (size_t i = 0; i < p->nkeep; i++)
			tier_put(p->tier, p->keep[i]);
		free(p->keep);
	}
	teardown(p);
	return p->err;
}

int pipeline_run(struct fs *fs, struct inode *ino, const struct pipe_target *t,
		 const struct dmafs_ioc_place *rq, int verify, struct pipe_out *out)
{
	struct pipe p = { .fs = fs, .ino = ino, .t = t, .verify = verify, .st = t->stage,
			  .gran = read_granule(fs, verify), .tier = fs->tier, .fsize = ino->a.size,
			  .nofill = fs->tier && fs->set.tier_fill_idle, .stop = t->stop,
			  .share = t->share, .uid = t->uid };
	int ret;

	if (p.tier) /* before any read goes out: a change after it keeps fills out */
		p.tgen = tier_gen(ino);

	ret = cut(&p, rq);
	if (ret || !p.npc) {
		free(p.pc);
		return ret;
	}
	ret = run(&p);
	if (!ret) {
		out->tier_bytes += p.tier_bytes;
		if (p.miss_to) {
			out->miss_from = out->miss_to ? MIN(out->miss_from, p.miss_from) : p.miss_from;
			out->miss_to = MAX(out->miss_to, p.miss_to);
		}
	}
	return ret;
}

int pipeline_prefetch(struct fs *fs, struct inode *ino, uint64_t from, uint64_t to,
		      struct pipe_fill *out, const struct pipe_target *req)
{
	static const struct pipe_target none; /* no target: deliver only publishes */
	struct pipe p = { .fs = fs, .ino = ino, .t = &none, .verify = 1,
			  .gran = read_granule(fs, 1), .tier = fs->tier, .fsize = ino->a.size,
			  .fo = out, .stop = req ? req->stop : NULL,
			  .share = req ? req->share : NULL, .uid = req ? req->uid : 0 };
	int ret;

	if (!p.tier)
		return -EOPNOTSUPP;
	p.tgen = tier_gen(ino); /* before any read goes out, as for placements */
	ret = cut_chunks(&p, from, MIN(to, p.fsize));
	if (ret || !p.npc) {
		free(p.pc);
		return ret;
	}
	return run(&p);
}

int pipeline_prefetch_window(struct fs *fs, struct inode *ino, uint64_t *off, uint64_t end,
			     uint64_t window, struct pipe_fill *f, const struct pipe_target *req)
{
	uint64_t from = ALIGN_DOWN(*off, TIER_CHUNK), last, to;
	size_t e;
	int ret;

	wback_wait(fs, ino, 0); /* what was written is on the members before we read */
	dm_rwlock_rdlock(&ino->iolock);
	last = MIN(end, ino->a.size); /* the size may have changed since the last window */
	if (from >= last || *off >= last) { /* an empty range widens to nothing */
		dm_rwlock_unlock(&ino->iolock);
		return 1;
	}
	/* holes are not read: the window starts at the chunk of the next mapped byte */
	e = meta_ext_find(ino, from);
	if (e >= ino->next || ino->ext[e].off >= last) {
		f->skipped += last - from;
		dm_rwlock_unlock(&ino->iolock);
		*off = last;
		return 1;
	}
	if (ino->ext[e].off >= from + TIER_CHUNK) {
		uint64_t at = ALIGN_DOWN(ino->ext[e].off, TIER_CHUNK);

		f->skipped += at - from;
		from = at;
	}
	to = MIN(ALIGN_UP(MIN(last, from + window), TIER_CHUNK), ino->a.size);
	ret = pipeline_prefetch(fs, ino, from, to, f, req);
	dm_rwlock_unlock(&ino->iolock);
	*off = to;
	return ret;
}

