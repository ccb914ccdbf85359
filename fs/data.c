// SPDX-License-Identifier: MIT
/*
 * data.c - the file data path: striped reads and writes through io_uring with O_DIRECT.
 *
 * Member I/O is always in whole 4096-byte blocks. Unaligned writes read-modify-write the
 * partial head and tail blocks; bytes past EOF inside an allocated block are kept zero on
 * disk (truncate zeroes them), so a file that grows again reads zeros there.
 * inode->iolock is held shared by readers and exclusively by writers and truncate; the
 * extent map and size only change under it exclusively, so readers need no meta.lock.
 */
#include "fsops.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uring.h"
#include "wback.h"
#include "workpool.h"

#define MAX_OPS 64
/* Checksum buffers up to this size stay with the thread for its next request. */
#define CSUM_KEEP (256u << 10)

/* Per-thread aligned buffers, reused: a fresh 1 MiB buffer per request would cost an mmap
 * and 256 page faults each time. 0: read data, 1: write data, 2: checksum blocks. */
static __thread void *tbuf[3];
static __thread size_t tbuf_len[3];

static void *thread_buf(int which, size_t len)
{
	if (tbuf_len[which] < len) {
		free(tbuf[which]);
		tbuf[which] = util_aligned_alloc(len);
		tbuf_len[which] = tbuf[which] ? ALIGN_UP(len, DMAFS_BLOCK) : 0;
	}
	return tbuf[which];
}

void fs_io_error(struct fs *fs, const struct inode *ino, const struct uring_op *op,
		 uint64_t foff, const char *what)
{
	log_err("%s error on member %d (%s) at member offset %llu (+%u bytes), inode %llu file offset %llu: %s",
		what, op->tag, fs->members[op->tag].path, (unsigned long long)op->off, op->len,
		(unsigned long long)ino->ino, (unsigned long long)foff, strerror(-op->res));
}

static int run_ops(struct fs *fs, const struct inode *ino, struct uring_op *ops, size_t n,
		   const uint64_t *foffs, const char *what)
{
	int ret = uring_rw(ops, n);

	if (ret) {
		for (size_t i = 0; i < n; i++)
			if (ops[i].res)
				fs_io_error(fs, ino, &ops[i], foffs[i], what);
		return -EIO;
	}
	return 0;
}

/* A growable list of member I/Os, each with the file offset it serves (for messages). */
struct opvec {
	struct uring_op *op;
	uint64_t *foff;
	size_t n, cap;
	struct uring_op sop[MAX_OPS];
	uint64_t sfoff[MAX_OPS];
};

static void opvec_init(struct opvec *v)
{
	v->op = v->sop;
	v->foff = v->sfoff;
	v->n = 0;
	v->cap = MAX_OPS;
}

static void opvec_free(struct opvec *v)
{
	if (v->op != v->sop) {
		free(v->op);
		free(v->foff);
	}
}

static int opvec_push(struct opvec *v, const struct uring_op *op, uint64_t foff)
{
	if (v->n == v->cap) {
		size_t ncap = v->cap * 4;
		struct uring_op *nops = malloc(ncap * sizeof(*nops));
		uint64_t *nf = malloc(ncap * sizeof(*nf));

		if (!nops || !nf) {
			free(nops);
			free(nf);
			return -ENOMEM;
		}
		memcpy(nops, v->op, v->n * sizeof(*nops));
		memcpy(nf, v->foff, v->n * sizeof(*nf));
		opvec_free(v);
		v->op = nops;
		v->foff = nf;
		v->cap = ncap;
	}
	v->op[v->n] = *op;
	v->foff[v->n++] = foff;
	return 0;
}

void fs_csum_span(const struct fs *fs, const struct uring_op *op, uint64_t *p0, uint64_t *a,
		  uint64_t *b)
{
	const struct fmt_sb *sb = &fs->members[op->tag].sb;

	*p0 = fmt_csum_pos(sb, op->off);
	*a = ALIGN_DOWN(*p0, DMAFS_BLOCK);
	*b = ALIGN_UP(fmt_csum_pos(sb, op->off + op->len), DMAFS_BLOCK);
}

/*
 * Check data reads against their checksums. @op holds pairs: op[2i] read a data piece and
 * op[2i + 1] the checksum blocks that cover it; @foff[2i] is the piece's file offset.
 * Every mismatch is logged; returns 0 or -EIO.
 */
int fs_verify_read(struct fs *fs, const struct inode *ino, const struct uring_op *d,
		   const void *csums, uint64_t foff)
{
	uint64_t p0, ca, cb;
	const uint8_t *sums;
	int ret = 0;

	fs_csum_span(fs, d, &p0, &ca, &cb);
	sums = (const uint8_t *)csums + (p0 - ca);
	for (uint32_t k = 0; k < d->len; k += DMAFS_BLOCK) {
		if (fmt_csum((const char *)d->buf + k, d->tag, d->off + k) == get_u64(sums + k / DMAFS_BLOCK * 8))
			continue;
		log_err("checksum mismatch: inode %llu file offset %llu (member %d %s, offset %llu): the data there is damaged; reads of it fail with EIO (dmafs-fsck --scrub lists every damaged file)",
			(unsigned long long)ino->ino, (unsigned long long)(foff + k),
			d->tag, fs->members[d->tag].path, (unsigned long long)(d->off + k));
		ret = -EIO;
	}
	return ret;
}

static int verify_pairs(struct fs *fs, const struct inode *ino, const struct uring_op *op,
			const uint64_t *foff, size_t npairs)
{
	int ret = 0;

	for (size_t i = 0; i < npairs; i++)
		if (fs_verify_read(fs, ino, &op[2 * i], op[2 * i + 1].buf, foff[2 * i]))
			ret = -EIO;
	return ret;
}

/*
 * Large verified reads (placements) hand each piece, as soon as it and its checksums have
 * arrived, to a pool of threads that check it while the other reads are still in flight,
 * so that hashing, which one core does at a few GB/s, keeps pace with the members.
 */
#define VERIFY_POOL_MIN (8u << 20) /* smaller reads are checked by the reading thread */

struct vbatch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t left;
	int ret;
};

struct vjob {
	struct work w;
	struct fs *fs;
	const struct inode *ino;
	const struct uring_op *op; /* a pair: data read, checksum read */
	const uint64_t *foff;
	struct vbatch *b;
};

/* On a pool thread: check one pair, count it done in its batch. */
static void vjob_run(struct work *w)
{
	struct vjob *j = container_of(w, struct vjob, w);
	int r = verify_pairs(j->fs, j->ino, j->op, j->foff, 1);

	pthread_mutex_lock(&j->b->lock);
	if (r)
		j->b->ret = r;
	if (--j->b->left == 0)
		pthread_cond_signal(&j->b->cond);
	pthread_mutex_unlock(&j->b->lock);
}

/* A verified read in flight: which pairs still wait for one of their two reads. */
struct vread {
	struct fs *fs;
	const struct inode *ino;
	const struct opvec *v;
	uint8_t *left;
	struct vjob *jobs;
	struct vbatch b;
};

/* uring completion of op @i: once both reads of its pair are in, queue the pair. */
static void vread_done(void *arg, size_t i)
{
	struct vread *r = arg;
	size_t p = i / 2;
	struct vjob *j = &r->jobs[p];

	if (--r->left[p])
		return;
	*j = (struct vjob){ { vjob_run, NULL }, r->fs, r->ino, &r->v->op[2 * p],
			    &r->v->foff[2 * p], &r->b };
	pthread_mutex_lock(&r->b.lock);
	r->b.left++;
	pthread_mutex_unlock(&r->b.lock);
	workpool_queue(&j->w);
}

/* Read the pairs of @v, checking each one in the pool as soon as it has arrived. */
static int read_verify_pooled(struct fs *fs, const struct inode *ino, struct opvec *v)
{
	size_t np = v->n / 2;
	struct vread r = { .fs = fs, .ino = ino, .v = v, .left = malloc(np),
			   .jobs = malloc(np * sizeof(struct vjob)) };
	int ret;

	if (!r.left || !r.jobs) {
		free(r.left);
		free(r.jobs);
		return -ENOMEM;
	}
	memset(r.left, 2, np);
	pthread_mutex_init(&r.b.lock, NULL);
	pthread_cond_init(&r.b.cond, NULL);
	ret = uring_rw_cb(v->op, v->n, vread_done, &r);
	if (ret)
		for (size_t i = 0; i < v->n; i++)
			if (v->op[i].res)
				fs_io_error(fs, ino, &v->op[i], v->foff[i], "read");
	pthread_mutex_lock(&r.b.lock);
	while (r.b.left)
		pthread_cond_wait(&r.b.cond, &r.b.lock);
	pthread_mutex_unlock(&r.b.lock);
	if (ret)
		ret = -EIO;
	else
		ret = r.b.ret;
	pthread_mutex_destroy(&r.b.lock);
	pthread_cond_destroy(&r.b.cond);
	free(r.left);
	free(r.jobs);
	return ret;
}

int fs_map_reads(struct fs *fs, const struct inode *ino, char *buf, uint64_t a, uint64_t b,
		 int (*emit)(void *arg, const struct uring_op *op, uint64_t foff), void *arg)
{
	size_t i = meta_ext_find(ino, a);
	uint64_t pos = a;
	int ret = 0;

	while (pos < b && !ret) {
		const struct extent *e = i < ino->next ? &ino->ext[i] : NULL;

		if (!e || e->off >= b) {
			memset(buf + (pos - a), 0, b - pos);
			break;
		}
		if (e->off > pos) {
			memset(buf + (pos - a), 0, e->off - pos);
			pos = e->off;
		}
		uint64_t end = MIN(b, e->off + e->len);
		struct uring_op op = { .fd = fs->members[e->member].fd, .write = 0,
				       .buf = buf + (pos - a), .len = end - pos,
				       .off = e->moff + (pos - e->off), .tag = e->member };

		ret = emit(arg, &op, pos);
		pos = end;
		i++;
	}
	return ret;
}

static int push_read(void *arg, const struct uring_op *op, uint64_t foff)
{
	return opvec_push(arg, op, foff);
}

/*
 * Read the block-aligned file ranges rg[i].a..b into rg[i].buf from the extent map,
 * zeroing holes, and (with @verify) check every block against its checksum. All member
 * reads of all ranges, checksum blocks included, go out at once, so every member holding
 * a part is busy. Caller holds iolock.
 */
int fs_read_ranges(struct fs *fs, struct inode *ino, const struct fs_range *rg, size_t nr,
		   int verify)
{
	struct opvec v, pv;
	uint64_t total = 0, bytes = 0;
	char *cbuf, *big = NULL;
	int ret = 0;

	opvec_init(&v);
	opvec_init(&pv);
	for (size_t r = 0; r < nr && !ret; r++)
		ret = fs_map_reads(fs, ino, rg[r].buf, rg[r].a, rg[r].b, push_read, &v);
	if (ret || !v.n)
		goto out;
	if (!verify) {
		ret = run_ops(fs, ino, v.op, v.n, v.foff, "read");
		goto out;
	}
	/* pairs: each data read followed by the read of the checksum blocks covering it */
	for (size_t i = 0; i < v.n; i++) {
		uint64_t p0, ca, cb;

		fs_csum_span(fs, &v.op[i], &p0, &ca, &cb);
		total += cb - ca;
		bytes += v.op[i].len;
	}
	/* a whole-file placement can need megabytes of checksums: those are not kept */
	cbuf = total <= CSUM_KEEP ? thread_buf(2, total) : (big = util_aligned_alloc(total));
	if (!cbuf) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < v.n && !ret; i++) {
		uint64_t p0, ca, cb;
		struct uring_op op = v.op[i];

		fs_csum_span(fs, &op, &p0, &ca, &cb);
		op.buf = cbuf;
		op.off = ca;
		op.len = cb - ca;
		cbuf += cb - ca;
		ret = opvec_push(&pv, &v.op[i], v.foff[i]);
		if (!ret)
			ret = opvec_push(&pv, &op, v.foff[i]);
	}
	if (ret)
		goto out;
	if (bytes >= VERIFY_POOL_MIN && workpool_start() > 0) {
		ret = read_verify_pooled(fs, ino, &pv);
	} else {
		ret = run_ops(fs, ino, pv.op, pv.n, pv.foff, "read");
		if (!ret)
			ret = verify_pairs(fs, ino, pv.op, pv.foff, pv.n / 2);
	}
out:
	free(big);
	opvec_free(&pv);
	opvec_free(&v);
	return ret;
}

int fs_read_blocks(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b, int verify)
{
	struct fs_range r = { buf, a, b };

	return fs_read_ranges(fs, ino, &r, 1, verify);
}

ssize_t fs_read(struct fs *fs, uint64_t ino_nr, uint64_t off, size_t size, const char **data)
{
	struct inode *ino;
	uint64_t a, b, end;
	char *buf;
	int ret;

	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	if (!S_ISREG(ino->a.mode))
		return -EINVAL;
	wback_wait(fs, ino, 0); /* reads see what was written */
	pthread_rwlock_rdlock(&ino->iolock);
	end = MIN(off + size, ino->a.size);
	if (off >= end) {
		pthread_rwlock_unlock(&ino->iolock);
		return 0;
	}
	a = ALIGN_DOWN(off, DMAFS_BLOCK);
	b = ALIGN_UP(end, DMAFS_BLOCK);
	buf = thread_buf(0, b - a);
	if (!buf) {
		pthread_rwlock_unlock(&ino->iolock);
		return -ENOMEM;
	}
	ret = fs_read_blocks(fs, ino, buf, a, b, 1);
	pthread_rwlock_unlock(&ino->iolock);
	if (ret)
		return ret;
	*data = buf + (off - a);
	return end - off;
}

/* Allocation goal on the member of stripe unit @k: right after this file's previous run
 * there, so a large file is one contiguous run per member. */
static uint64_t goal_for(struct fs *fs, struct inode *ino, uint64_t pos)
{
	uint64_t su = fs->su, k = pos / su;
	size_t i = meta_ext_find(ino, pos);

	if (i > 0 && ino->ext[i - 1].off / su == k) /* same stripe unit, earlier piece */
		return ino->ext[i - 1].moff + ino->ext[i - 1].len;
	if (k >= fs->n) {
		uint64_t prev = (k - fs->n) * su; /* the previous stripe unit on this member */
		size_t j = meta_ext_find(ino, prev + su - 1);

		if (j < ino->next && ino->ext[j].off / su == k - fs->n)
			return ino->ext[j].moff + ino->ext[j].len;
		if (j > 0 && ino->ext[j - 1].off / su == k - fs->n)
			return ino->ext[j - 1].moff + ino->ext[j - 1].len;
	}
	return 0;
}

/*
 * Allocate new space for blocks [a, b): data is never overwritten in place (see
 * struct cow). Pieces go to @ne (at most @max). Returns the end of the allocated prefix
 * (b when everything got space) or -ENOMEM.
 */
static int64_t allocate(struct fs *fs, struct inode *ino, uint64_t a, uint64_t b,
			struct newext *ne, size_t *nne, size_t max)
{
	uint64_t pos = a;

	while (pos < b) {
		uint64_t su_end = ALIGN_DOWN(pos, fs->su) + fs->su;
		uint64_t want = MIN(b, su_end) - pos;
		uint32_t member = meta_slot_member(&fs->meta, ino, pos / fs->su);
		uint64_t goal, moff;
		int64_t got;

		if (*nne == max)
			return pos;
		goal = *nne && ne[*nne - 1].member == member &&
				       ne[*nne - 1].off + ne[*nne - 1].len == pos
			       ? ne[*nne - 1].moff + ne[*nne - 1].len
			       : goal_for(fs, ino, pos);
		if (!goal && *nne) {
			/* follow this write's earlier run on the same member */
			for (size_t k = *nne; k-- > 0;)
				if (ne[k].member == member) {
					goal = ne[k].moff + ne[k].len;
					break;
				}
		}
		got = alloc_get(&fs->alloc, member, goal, want, &moff);
		if (got < 0)
			return got == -ENOSPC ? (int64_t)pos : got;
		if (*nne && ne[*nne - 1].member == member && ne[*nne - 1].off + ne[*nne - 1].len == pos &&
		    ne[*nne - 1].moff + ne[*nne - 1].len == moff && ne[*nne - 1].off / fs->su == pos / fs->su)
			ne[*nne - 1].len += got;
		else
			ne[(*nne)++] = (struct newext){ pos, moff, got, member };
		pos += got;
	}
	return b;
}

/* A run of @ops on one member whose member ranges follow each other: one stretch of
 * checksum blocks [ca, cb), built in @buf and written with one I/O. */
struct csum_run {
	int tag;
	uint64_t off, end; /* member data range */
	uint64_t ca, cb;   /* its checksum blocks */
	size_t first, n;   /* ops idx[first .. first + n) */
	char *buf;
};

static int op_order(const void *a, const void *b)
{
	const struct uring_op *x = *(const struct uring_op *const *)a;
	const struct uring_op *y = *(const struct uring_op *const *)b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * Store the checksums of the blocks that @ops wrote and mark their members dirty for the
 * next commit. Ops are grouped into runs per member (a chunk's stripe units on one member
 * are usually one run), each run's checksum blocks are built in memory and all runs are
 * written in one batch. The checksum blocks are shared with other files' data, so a
 * partly covered first or last block is read first (or taken from the member's cache of
 * the block written last, which spares the read for sequential writes), and the member's
 * checksum lock is held, in member order, from that read until the batch is written.
 * Two runs sharing a block: the later one carries the earlier one's entries and only it
 * writes that block, so no block is written twice in one batch.
 */
static int csum_store(struct fs *fs, const struct uring_op *ops, size_t n)
{
	const struct uring_op *sidx[MAX_OPS], **idx = sidx;
	struct csum_run srun[MAX_OPS], *run = srun;
	struct uring_op swo[MAX_OPS], *wo = swo;
	size_t nr = 0, nw = 0, total = 0, r;
	uint64_t held = 0; /* members whose checksum lock is held; bit i = member i */
	int ret = 0;
	char *cbuf;

	if (n == 0)
		return 0;
	if (n > MAX_OPS) {
		idx = malloc(n * sizeof(*idx));
		run = malloc(n * sizeof(*run));
		wo = malloc(n * sizeof(*wo));
		if (!idx || !run || !wo) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++)
		idx[i] = &ops[i];
	qsort(idx, n, sizeof(*idx), op_order);
	for (size_t i = 0; i < n; i++) {
		const struct uring_op *op = idx[i];

		if (nr && run[nr - 1].tag == op->tag && run[nr - 1].end == op->off) {
			run[nr - 1].end += op->len;
			run[nr - 1].n++;
			continue;
		}
		run[nr++] = (struct csum_run){ .tag = op->tag, .off = op->off,
					       .end = op->off + op->len, .first = i, .n = 1 };
	}
	for (r = 0; r < nr; r++) {
		const struct fmt_sb *sb = &fs->members[run[r].tag].sb;

		run[r].ca = ALIGN_DOWN(fmt_csum_pos(sb, run[r].off), DMAFS_BLOCK);
		run[r].cb = ALIGN_UP(fmt_csum_pos(sb, run[r].end), DMAFS_BLOCK);
		total += run[r].cb - run[r].ca;
	}
	cbuf = thread_buf(2, total);
	if (!cbuf) {
		ret = -ENOMEM;
		goto out;
	}
	for (r = 0, total = 0; r < nr; r++) {
		run[r].buf = cbuf + total;
		total += run[r].cb - run[r].ca;
	}

	for (r = 0; r < nr && !ret; r++) {
		struct csum_run *u = &run[r], *prev = r && run[r - 1].tag == u->tag ? &run[r - 1] : NULL;
		const struct fmt_sb *sb = &fs->members[u->tag].sb;
		struct member *m = &fs->members[u->tag];
		struct fs_csum_cache *c = &fs->cc[u->tag];
		uint64_t p0 = fmt_csum_pos(sb, u->off), p1 = fmt_csum_pos(sb, u->end);

		if (!(held & (1ull << u->tag))) { /* runs are in member order: so are the locks */
			pthread_mutex_lock(&c->lock);
			held |= 1ull << u->tag;
		}
		/* the partly covered first and last blocks: from an earlier run of this batch, the
		 * cache, or the member */
		for (int end = 0; end < 2 && !ret; end++) {
			uint64_t blk = end ? u->cb - DMAFS_BLOCK : u->ca;
			char *dst = u->buf + (blk - u->ca);

			if (end ? p1 == u->cb : p0 == u->ca)
				continue; /* wholly rewritten */
			if (end && blk == u->ca && p0 != u->ca)
				continue; /* one block, already read as the first */
			if (prev && blk == prev->cb - DMAFS_BLOCK) {
				memcpy(dst, prev->buf + (blk - prev->ca), DMAFS_BLOCK);
				prev->cb -= DMAFS_BLOCK; /* written by this run instead */
			} else if (c->valid && c->pos == blk) {
				memcpy(dst, c->blk, DMAFS_BLOCK);
			} else {
				ret = member_pread(m, dst, DMAFS_BLOCK, blk);
			}
		}
		for (size_t k = u->first; k < u->first + u->n && !ret; k++) {
			const struct uring_op *op = idx[k];
			char *at = u->buf + (fmt_csum_pos(sb, op->off) - u->ca);

			for (uint32_t b = 0; b < op->len; b += DMAFS_BLOCK)
				put_u64((uint8_t *)at + b / DMAFS_BLOCK * 8,
					fmt_csum((const char *)op->buf + b, op->tag, op->off + b));
		}
		if (ret)
			log_err("checksum read failed on member %d (%s) near member offset %llu: %s",
				u->tag, m->path, (unsigned long long)u->ca, strerror(-ret));
	}
	if (!ret) {
		for (r = 0; r < nr; r++)
			if (run[r].cb > run[r].ca)
				wo[nw++] = (struct uring_op){ .fd = fs->members[run[r].tag].fd, .write = 1,
							      .buf = run[r].buf, .len = run[r].cb - run[r].ca,
							      .off = run[r].ca, .tag = run[r].tag };
		ret = uring_rw(wo, nw);
		if (ret)
			for (size_t k = 0; k < nw; k++)
				if (wo[k].res)
					log_err("checksum update failed on member %d (%s) at member offset %llu: %s",
						wo[k].tag, fs->members[wo[k].tag].path,
						(unsigned long long)wo[k].off, strerror(-wo[k].res));
	}
	/* each member's last run leaves its last block in the member's cache */
	for (r = 0; r < nr; r++) {
		struct fs_csum_cache *c = &fs->cc[run[r].tag];

		if (!(held & (1ull << run[r].tag)) || (r + 1 < nr && run[r + 1].tag == run[r].tag))
			continue;
		c->valid = !ret;
		if (!ret) {
			c->pos = run[r].cb - DMAFS_BLOCK;
			memcpy(c->blk, run[r].buf + (c->pos - run[r].ca), DMAFS_BLOCK);
			journal_dirty(&fs->j, run[r].tag);
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (ret)
		ret = -EIO;
out:
	if (idx != sidx)
		free(idx);
	if (run != srun)
		free(run);
	if (wo != swo)
		free(wo);
	return ret;
}

/*
 * Copy-on-write: blocks that durable metadata refers to are never written in place. New
 * data and its checksums go to newly allocated space, and only the metadata commit that
 * follows (made after that space is durable) switches the file over, while the old blocks
 * are freed once that commit is durable. A crash therefore leaves every block either old
 * data with its old checksum or new data with its new one, never a mix that would read as
 * damaged. The exception, blocks allocated in the current journal epoch (see
 * inode.fresh_*), is safe for the same reason: nothing durable refers to them yet.
 */
struct cow {
	struct newext ne[MAX_OPS];
	size_t nne;
	uint64_t a, end; /* blocks [a, end) were written */
};

static void cow_undo(struct fs *fs, struct cow *w)
{
	for (size_t k = 0; k < w->nne; k++)
		alloc_put(&fs->alloc, w->ne[k].member, w->ne[k].moff, w->ne[k].len);
	w->nne = 0;
}

/*
 * Write blocks [a, b) from @buf (which maps offset @a) to new space with checksums.
 * Returns 0 with w->end set (short only when space runs out) or -errno (-ENOSPC when not
 * even one block could be had). Caller holds iolock exclusively.
 */
static int cow_write(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b,
		     struct cow *w)
{
	struct uring_op ops[MAX_OPS];
	uint64_t foffs[MAX_OPS];
	int64_t got;
	int ret;

	w->a = a;
	w->nne = 0;
	got = allocate(fs, ino, a, b, w->ne, &w->nne, MAX_OPS);
	if (got == (int64_t)a) {
		/* space freed by earlier changes returns once they are durable: commit, retry */
		cow_undo(fs, w);
		ret = journal_commit(&fs->j);
		if (ret)
			return ret;
		got = allocate(fs, ino, a, b, w->ne, &w->nne, MAX_OPS);
	}
	if (got < 0) {
		cow_undo(fs, w);
		return got;
	}
	if (got == (int64_t)a)
		return -ENOSPC;
	w->end = got;
	for (size_t k = 0; k < w->nne; k++) {
		const struct newext *e = &w->ne[k];

		ops[k] = (struct uring_op){ .fd = fs->members[e->member].fd, .write = 1,
					    .buf = buf + (e->off - a), .len = e->len,
					    .off = e->moff, .tag = e->member };
		foffs[k] = e->off;
	}
	ret = run_ops(fs, ino, ops, w->nne, foffs, "write");
	if (!ret)
		ret = csum_store(fs, ops, w->nne); /* also marks the members dirty */
	if (ret)
		cow_undo(fs, w);
	return ret;
}

/* Log the switch to the new blocks. Caller holds iolock and meta.lock (fs_begin). */
static int cow_log(struct fs *fs, struct inode *ino, const struct cow *w)
{
	size_t i = meta_ext_find(ino, w->a);
	int ret = 0;

	if (i < ino->next && ino->ext[i].off < w->end) {
		struct fmt_rec r = { .type = REC_PUNCH, .ino = ino->ino, .off = w->a,
				     .plen = w->end - w->a };

		ret = journal_log(&fs->j, &r);
	}
	for (size_t k = 0; !ret && k < w->nne; k++) {
		struct fmt_rec r = { .type = REC_EXTENT, .ino = ino->ino, .off = w->ne[k].off,
				     .len = w->ne[k].len, .member = w->ne[k].member,
				     .moff = w->ne[k].moff };

		ret = journal_log(&fs->j, &r);
	}
	return ret;
}

/* May block @pos of @ino be rewritten in place? Caller holds iolock and j.inplace. */
static int fresh_at(struct fs *fs, const struct inode *ino, uint64_t pos)
{
	return ino->fresh_epoch == atomic_load(&fs->j.epoch) && pos >= ino->fresh_lo &&
	       pos < ino->fresh_hi;
}

/* Note blocks [a, b) newly allocated in @epoch (extends the fresh range when they touch). */
static void fresh_add(struct inode *ino, uint64_t a, uint64_t b, uint64_t epoch)
{
	if (ino->fresh_epoch == epoch && ino->fresh_lo < ino->fresh_hi && a <= ino->fresh_hi &&
	    b >= ino->fresh_lo) {
		ino->fresh_lo = MIN(ino->fresh_lo, a);
		ino->fresh_hi = MAX(ino->fresh_hi, b);
	} else {
		ino->fresh_lo = a;
		ino->fresh_hi = b;
		ino->fresh_epoch = epoch;
	}
}

/*
 * Rewrite blocks [a, b), all mapped and fresh, in place from @buf (which maps @a), with
 * their checksums. Caller holds iolock exclusively and j.inplace shared.
 */
static int write_inplace(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b)
{
	struct opvec v;
	size_t i = meta_ext_find(ino, a);
	uint64_t pos = a;
	int ret = 0;

	opvec_init(&v);
	while (pos < b && !ret) {
		const struct extent *e = i < ino->next ? &ino->ext[i] : NULL;

		if (!e || e->off > pos) { /* cannot be: fresh blocks are mapped */
			ret = -EIO;
			log_err("inode %llu: block at file offset %llu of the fresh range is not mapped",
				(unsigned long long)ino->ino, (unsigned long long)pos);
			break;
		}
		uint64_t end = MIN(b, e->off + e->len);
		struct uring_op op = { .fd = fs->members[e->member].fd, .write = 1,
				       .buf = buf + (pos - a), .len = end - pos,
				       .off = e->moff + (pos - e->off), .tag = e->member };

		ret = opvec_push(&v, &op, pos);
		pos = end;
		i++;
	}
	if (!ret)
		ret = run_ops(fs, ino, v.op, v.n, v.foff, "write");
	if (!ret)
		ret = csum_store(fs, v.op, v.n); /* also marks the members dirty */
	opvec_free(&v);
	return ret;
}

/* Log bytes per extent record, with room to spare. */
#define COW_LOG_BYTES(w) (64 + (w)->nne * 64)

static int block_mapped(struct inode *ino, uint64_t blk)
{
	size_t i = meta_ext_find(ino, blk);

	return i < ino->next && ino->ext[i].off <= blk;
}

static int copy_mem(void *arg, char *dst, size_t size)
{
	memcpy(dst, arg, size);
	return 0;
}

ssize_t fs_write(struct fs *fs, uint64_t ino_nr, const char *data, size_t size, uint64_t off)
{
	return fs_write_from(fs, NULL, ino_nr, size, off, copy_mem, (void *)data);
}

ssize_t fs_write_from(struct fs *fs, const struct fs_ctx *c, uint64_t ino_nr, size_t size,
		      uint64_t off, int (*copy)(void *arg, char *dst, size_t size), void *arg)
{
	struct inode *ino;
	int priv = 0;

	if (fs->ro)
		return -EROFS;
	if (size == 0)
		return 0;
	if (off + size < off || off + size > (1ull << 60))
		return -EFBIG;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	if (ino) { /* something fs_killpriv may take away: a bit, or an xattr */
		priv = (ino->a.mode & (S_ISUID | S_ISGID)) || ino->xattrs;
		/*
		 * An immutable file takes no data at all, also through a descriptor opened
		 * before it became immutable: xfs lets write(2) through one, but refuses
		 * copy_file_range(2) into it, and the kernel sends both to us as writes. An
		 * append-only file takes data only at its end: the kernel sends O_APPEND
		 * writes there; a descriptor whose O_APPEND was cleared (F_SETFL, which the
		 * kernel cannot refuse: it does not see the flag) or a mapping would not.
		 */
		if (fs_immutable(ino) ||
		    (fs_append(ino) && off != MAX(ino->a.size, wback_size(ino))))
			priv = -EPERM;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	if (priv < 0)
		return priv;
	if (!S_ISREG(ino->a.mode))
		return -EINVAL;
	/* as file_remove_privs() before the kernel's own filesystems write */
	if (c && priv) {
		int ret = fs_killpriv(fs, c, ino_nr);

		if (ret)
			return ret;
	}
	return wback_write(fs, ino, size, off, copy, arg);
}

ssize_t fs_write_inode(struct fs *fs, struct inode *ino, const char *data, size_t size,
		       uint64_t off, int64_t mtime)
{
	struct cow w[3];
	uint64_t a, b, end, pos;
	size_t need = 256;
	int ret, nw = 0;
	char *buf;

	pthread_rwlock_wrlock(&ino->iolock);
	end = off + size;
	a = ALIGN_DOWN(off, DMAFS_BLOCK);
	b = ALIGN_UP(end, DMAFS_BLOCK);
	if (a == off && b == end && (uintptr_t)data % DMAFS_BLOCK == 0) {
		/* whole blocks from an aligned buffer (write-behind): written as they are */
		buf = (char *)data;
	} else {
		buf = thread_buf(1, b - a);
		if (!buf) {
			ret = -ENOMEM;
			goto out;
		}
	}
	/* partial head and tail blocks: old contents (verified) or zeros around the new bytes */
	if (off != a) {
		if (block_mapped(ino, a)) {
			ret = fs_read_blocks(fs, ino, buf, a, a + DMAFS_BLOCK, 1);
			if (ret)
				goto out;
		} else {
			memset(buf, 0, DMAFS_BLOCK);
		}
	}
	if (end != b && (b - DMAFS_BLOCK != a || off == a)) {
		char *t = buf + (b - DMAFS_BLOCK - a);

		if (block_mapped(ino, b - DMAFS_BLOCK)) {
			ret = fs_read_blocks(fs, ino, t, b - DMAFS_BLOCK, b, 1);
			if (ret)
				goto out;
		} else {
			memset(t, 0, DMAFS_BLOCK);
		}
	}
	if (buf != data)
		memcpy(buf + (off - a), data, size);

	/* blocks allocated since the last commit are rewritten in place, the rest by COW */
	for (pos = a; pos < b && nw < 3;) {
		uint64_t seg;

		pthread_rwlock_rdlock(&fs->j.inplace);
		if (fresh_at(fs, ino, pos)) {
			seg = MIN(b, ino->fresh_hi);
			ret = write_inplace(fs, ino, buf + (pos - a), pos, seg);
			pthread_rwlock_unlock(&fs->j.inplace);
			if (ret)
				goto undo;
			pos = seg;
			continue;
		}
		pthread_rwlock_unlock(&fs->j.inplace);
		/* up to the fresh blocks, if they follow */
		seg = ino->fresh_epoch == atomic_load(&fs->j.epoch) && ino->fresh_lo > pos &&
				      ino->fresh_lo < b && ino->fresh_hi > ino->fresh_lo
			      ? ino->fresh_lo
			      : b;
		ret = cow_write(fs, ino, buf + (pos - a), pos, seg, &w[nw]);
		if (ret == -ENOSPC && pos > a)
			break; /* a short write */
		if (ret)
			goto undo;
		pos = w[nw++].end;
		if (pos < seg)
			break; /* space ran out */
	}
	if (pos <= off) { /* not one new byte got space */
		ret = -ENOSPC;
		goto undo;
	}
	end = MIN(end, pos); /* short write at ENOSPC (or a very fragmented request) */

	for (int k = 0; k < nw; k++)
		need += COW_LOG_BYTES(&w[k]);
	ret = fs_begin(fs, need, nw > 0);
	if (ret)
		goto undo;
	for (int k = 0; k < nw && !ret; k++)
		ret = cow_log(fs, ino, &w[k]);
	if (!ret) {
		struct fmt_rec r;
		int64_t now = mtime ? mtime : fs_now();

		meta_inode_rec(ino, &r);
		r.a.size = MAX(ino->a.size, end);
		r.a.mtime = r.a.ctime = now;
		ret = journal_log(&fs->j, &r);
	}
	if (!ret) /* these records are in the current epoch's batch */
		for (int k = 0; k < nw; k++)
			fresh_add(ino, w[k].a, w[k].end, atomic_load(&fs->j.epoch));
	fs_end(fs);
	pthread_rwlock_unlock(&ino->iolock);
	return ret ? ret : (ssize_t)(end - off);
undo:
	for (int k = 0; k < nw; k++)
		cow_undo(fs, &w[k]);
out:
	pthread_rwlock_unlock(&ino->iolock);
	return ret;
}

/* Log a size change, with the rewritten last block @w (may be NULL or empty). */
static int truncate_log(struct fs *fs, struct inode *ino, uint64_t size, struct cow *w)
{
	struct fmt_rec r;
	int ret = fs_begin(fs, 256 + (w ? COW_LOG_BYTES(w) : 0), w && w->nne > 0);

	if (ret) {
		if (w)
			cow_undo(fs, w);
		return ret;
	}
	memset(&r, 0, sizeof(r));
	r.type = REC_TRUNC;
	r.ino = ino->ino;
	r.off = size;
	ret = journal_log(&fs->j, &r);
	if (!ret && w && w->nne)
		ret = cow_log(fs, ino, w);
	if (!ret) { /* like ftruncate(2) on Linux: mtime changes even if the size does not */
		meta_inode_rec(ino, &r);
		r.a.mtime = r.a.ctime = fs_now();
		ret = journal_log(&fs->j, &r);
	}
	fs_end(fs);
	return ret;
}

int fs_truncate_locked_data(struct fs *fs, struct inode *ino, uint64_t size)
{
	struct cow w = { .nne = 0 };
	int ret = 0;

	if (size > (1ull << 60))
		return -EFBIG;
	wback_wait(fs, ino, 0); /* buffered writes land before the size changes */
	pthread_rwlock_wrlock(&ino->iolock);
	ino->fresh_lo = ino->fresh_hi = 0; /* blocks past the new end go away */
	if (size < ino->a.size && size % DMAFS_BLOCK && block_mapped(ino, ALIGN_DOWN(size, DMAFS_BLOCK))) {
		/* a new copy of the new last block with its tail zeroed: bytes past EOF stay
		 * zero on disk */
		uint64_t blk = ALIGN_DOWN(size, DMAFS_BLOCK);
		char *buf = thread_buf(1, DMAFS_BLOCK);

		if (!buf) {
			ret = -ENOMEM;
			goto out;
		}
		ret = fs_read_blocks(fs, ino, buf, blk, blk + DMAFS_BLOCK, 1);
		if (ret)
			goto out;
		memset(buf + (size - blk), 0, DMAFS_BLOCK - (size - blk));
		ret = cow_write(fs, ino, buf, blk, blk + DMAFS_BLOCK, &w);
		if (ret == -ENOSPC) {
			/* a full filesystem: the shrink itself frees space, once durable */
			ret = truncate_log(fs, ino, size, NULL);
			if (!ret)
				ret = journal_commit(&fs->j);
			if (!ret && cow_write(fs, ino, buf, blk, blk + DMAFS_BLOCK, &w) == 0) {
				ret = fs_begin(fs, COW_LOG_BYTES(&w), 1);
				if (!ret) {
					ret = cow_log(fs, ino, &w);
					fs_end(fs);
				} else {
					cow_undo(fs, &w);
				}
			} else if (!ret) {
				log_warn("truncate of inode %llu to %llu bytes: no free block to rewrite its last block; stale bytes stay past the end of file",
					 (unsigned long long)ino->ino, (unsigned long long)size);
			}
			goto out;
		}
		if (ret)
			goto out;
	}
	ret = truncate_log(fs, ino, size, &w);
out:
	pthread_rwlock_unlock(&ino->iolock);
	return ret;
}

/* Entry points for falloc.c into the helpers above (see their comments). */
int64_t fs_alloc_blocks(struct fs *fs, struct inode *ino, uint64_t a, uint64_t b,
			struct newext *ne, size_t *nne, size_t max)
{
	return allocate(fs, ino, a, b, ne, nne, max);
}

int fs_csum_store(struct fs *fs, const struct uring_op *ops, size_t n)
{
	return csum_store(fs, ops, n);
}

void fs_fresh_add(struct inode *ino, uint64_t a, uint64_t b, uint64_t epoch)
{
	fresh_add(ino, a, b, epoch);
}
