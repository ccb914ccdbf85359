// SPDX-License-Identifier: MIT
/*
 * read.c - the read side of file data: striped member reads through io_uring with O_DIRECT,
 * checksums verified (in the worker pool for large reads). Member I/O is always in whole
 * 4096-byte blocks; readers hold inode->iolock shared and need no meta.lock.
 */
#include "engine/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/internal.h"
#include "io/uring.h"
#include "io/workpool.h"

void fs_io_error(struct fs *fs, const struct inode *ino, const struct uring_op *op,
		 uint64_t foff, const char *what)
{
	log_err("%s error on member %d (%s) at member offset %llu (+%u bytes), inode %llu file offset %llu: %s",
		what, op->tag, fs->members[op->tag].path, (unsigned long long)op->off, op->len,
		(unsigned long long)ino->ino, (unsigned long long)foff, strerror(-op->res));
}

int run_ops(struct fs *fs, const struct inode *ino, struct uring_op *ops, size_t n,
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

void opvec_init(struct opvec *v)
{
	v->op = v->sop;
	v->foff = v->sfoff;
	v->n = 0;
	v->cap = MAX_OPS;
}

void opvec_free(struct opvec *v)
{
	if (v->op != v->sop) {
		free(v->op);
		free(v->foff);
	}
}

int opvec_push(struct opvec *v, const struct uring_op *op, uint64_t foff)
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

	if (d->recovered) /* checked against the other copy's checksums already */
		return 0;
	fs_csum_span(fs, d, &p0, &ca, &cb);
	sums = (const uint8_t *)csums + (p0 - ca);
	for (uint32_t k = 0; k < d->len; k += DMAFS_BLOCK) {
		if (fmt_csum((const char *)d->buf + k, d->tag, d->off + k) == get_u64(sums + k / DMAFS_BLOCK * 8))
			continue;
		ret = -EIO;
		if (fs->mirror) /* the other copy serves it: fs_mirror_recover says how it went */
			break;
		log_err("checksum mismatch: inode %llu file offset %llu (member %d %s, offset %llu): the data there is damaged; reads of it fail with EIO (dmafs-fsck --scrub lists every damaged file)",
			(unsigned long long)ino->ino, (unsigned long long)(foff + k),
			d->tag, fs->members[d->tag].path, (unsigned long long)(d->off + k));
	}
	return ret;
}

static int verify_pairs(struct fs *fs, const struct inode *ino, struct uring_op *op,
			const uint64_t *foff, size_t npairs)
{
	int ret = 0;

	for (size_t i = 0; i < npairs; i++)
		if (fs_verify_or_recover(fs, ino, &op[2 * i], op[2 * i + 1].buf, foff[2 * i], NULL))
			ret = -EIO;
	return ret;
}

/*
 * The mirror profile, after a read of @v failed: each data read that failed, or whose
 * checksum read did (pairs, with @pairs), is served from the other copy; with @pairs, the
 * others are checked (again, where they were: a recovered one is not).
 */
static int recover_failed(struct fs *fs, const struct inode *ino, struct opvec *v, int pairs)
{
	int ret = 0;

	for (size_t i = 0; i < v->n; i += pairs ? 2 : 1) {
		int r;

		if (v->op[i].res || (pairs && v->op[i + 1].res))
			r = fs_mirror_recover(fs, ino, &v->op[i], v->foff[i], 1, NULL);
		else
			r = pairs ? fs_verify_or_recover(fs, ino, &v->op[i], v->op[i + 1].buf,
							 v->foff[i], NULL) : 0;
		if (r)
			ret = -EIO;
	}
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
	struct uring_op *op; /* a pair: data read, checksum read */
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
	*j = (struct vjob){ { vjob_run, NULL, 0 }, r->fs, r->ino, &r->v->op[2 * p],
			    &r->v->foff[2 * p], &r->b };
	pthread_mutex_lock(&r->b.lock);
	r->b.left++;
	pthread_mutex_unlock(&r->b.lock);
	workpool_queue(r->fs->pool, &j->w);
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

static int zero_plain(void *dst, size_t n)
{
	memset(dst, 0, n);
	return 0;
}

int fs_map_reads(struct fs *fs, const struct inode *ino, char *buf, uint64_t a, uint64_t b,
		 int (*emit)(void *arg, const struct uring_op *op, uint64_t foff), void *arg)
{
	return fs_map_reads_z(fs, ino, buf, a, b, emit, arg, zero_plain);
}

int fs_map_reads_z(struct fs *fs, const struct inode *ino, char *buf, uint64_t a, uint64_t b,
		   int (*emit)(void *arg, const struct uring_op *op, uint64_t foff), void *arg,
		   int (*zero)(void *dst, size_t n))
{
	size_t i = meta_ext_find(ino, a);
	uint64_t pos = a;
	int ret = 0;

	while (pos < b && !ret) {
		const struct extent *e = i < ino->next ? &ino->ext[i] : NULL;

		if (!e || e->off >= b) {
			ret = zero(buf + (pos - a), b - pos);
			break;
		}
		if (e->off > pos) {
			ret = zero(buf + (pos - a), e->off - pos);
			if (ret)
				break;
			pos = e->off;
		}
		uint64_t end = MIN(b, e->off + e->len);
		struct uring_op op = { .fd = fs->members[e->member].fd, .write = 0,
				       .buf = buf + (pos - a), .len = end - pos,
				       .off = e->moff + (pos - e->off), .tag = e->member };

		fs_pick_copy(fs, &op, pos); /* a mirror's copy to read (mirror.c) */
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
/* A block-aligned file range [a, b) and where its bytes go. */
struct fs_range {
	char *buf;
	uint64_t a, b;
};
/*
 * Read all ranges at once (holes zeroed); caller holds ino->iolock. With @verify, every
 * block is checked against its checksum and a damaged one fails the read with -EIO (and a
 * log line naming inode, file offset, member and member offset).
 */
static int read_ranges(struct fs *fs, struct inode *ino, const struct fs_range *rg, size_t nr,
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
		if (ret && fs->mirror)
			ret = recover_failed(fs, ino, &v, 0);
		goto out;
	}
	/* pairs: each data read followed by the read of the checksum blocks covering it */
	for (size_t i = 0; i < v.n; i++) {
		uint64_t p0, ca, cb;

		fs_csum_span(fs, &v.op[i], &p0, &ca, &cb);
		total += cb - ca;
		bytes += v.op[i].len;
	}
	/* a whole-file placement can need megabytes of checksums: those are not kept; nor
	 * are a mirror's, whose recovery stores checksums through the thread's buffer */
	cbuf = total <= CSUM_KEEP && !fs->mirror ? fs_thread_buf(2, total)
						 : (big = util_aligned_alloc(total));
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
	if (bytes >= VERIFY_POOL_MIN && workpool_start(fs->pool) > 0) {
		ret = read_verify_pooled(fs, ino, &pv);
	} else {
		ret = run_ops(fs, ino, pv.op, pv.n, pv.foff, "read");
		if (!ret)
			ret = verify_pairs(fs, ino, pv.op, pv.foff, pv.n / 2);
	}
	/* a read that failed: what arrived was checked (and recovered where it did not
	 * match); the failed ones come from the other copy now */
	if (ret && fs->mirror)
		ret = recover_failed(fs, ino, &pv, 1);
out:
	free(big);
	opvec_free(&pv);
	opvec_free(&v);
	return ret;
}

int fs_read_blocks(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b, int verify)
{
	struct fs_range r = { buf, a, b };

	return read_ranges(fs, ino, &r, 1, verify);
}

/* ---- the mirror profile: a bad copy served from the other one (mirror.c) ---- */

/* The checksums of the blocks @op's place holds, read: a pointer to the first block's, in
 * *@mem (free it), or NULL when they cannot be read. */
static const uint8_t *sums_of(struct fs *fs, const struct uring_op *op, char **mem)
{
	uint64_t p0, ca, cb;
	struct uring_op c;

	fs_csum_span(fs, op, &p0, &ca, &cb);
	*mem = util_aligned_alloc(cb - ca);
	if (!*mem)
		return NULL;
	c = (struct uring_op){ .fd = op->fd, .buf = *mem, .len = (uint32_t)(cb - ca), .off = ca,
			       .tag = op->tag };
	return uring_rw(&c, 1) ? NULL : (const uint8_t *)*mem + (p0 - ca);
}

/* Does @blk, block @k (its byte offset) of @op's place, match its checksum? */
static int block_ok(const struct uring_op *op, const char *blk, uint32_t k, const uint8_t *sums)
{
	return sums && fmt_csum(blk, (uint32_t)op->tag, op->off + k) ==
			       get_u64(sums + k / DMAFS_BLOCK * 8);
}

/* Block @k of @op's place read on its own into @blk (4096 bytes, aligned): 0 or -EIO. */
static int read_block(const struct uring_op *op, uint32_t k, char *blk)
{
	struct uring_op r = { .fd = op->fd, .buf = blk, .len = DMAFS_BLOCK, .off = op->off + k,
			      .tag = op->tag };

	return uring_rw(&r, 1) ? -EIO : 0;
}

/*
 * Rewrite the blocks of @place flagged in @bad (@nb of them) from @good, runs at a time,
 * with their checksums. Returns 0 or -errno (the member then failed).
 */
static int heal_copy(struct fs *fs, const struct uring_op *place, const char *good,
		     const uint8_t *bad, uint32_t nb)
{
	for (uint32_t i = 0; i < nb;) {
		uint32_t j = i;
		struct uring_op w;

		if (!bad[i]) {
			i++;
			continue;
		}
		while (j < nb && bad[j])
			j++;
		w = (struct uring_op){ .fd = place->fd, .write = 1, .buf = (char *)good + i * DMAFS_BLOCK,
				       .len = (j - i) * DMAFS_BLOCK, .off = place->off + i * DMAFS_BLOCK,
				       .tag = place->tag };
		if (uring_rw(&w, 1) || fs_csum_store(fs, &w, 1)) {
			fs_member_failed(fs, (unsigned)place->tag, "rewriting a bad copy", w.res ? w.res : -EIO);
			return -EIO;
		}
		i = j;
	}
	return 0;
}

static int copy_plain(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

/* Count, log once per member, and (read-write) rewrite the bad blocks of copy @place. */
static const char *heal_and_count(struct fs *fs, const struct uring_op *place, const char *good,
				  const uint8_t *bad, uint32_t nb)
{
	struct fs_mstat *st = &fs->mst[place->tag];
	uint64_t n = 0;

	for (uint32_t k = 0; k < nb; k++)
		n += bad[k];
	if (!n)
		return NULL;
	atomic_fetch_add(&st->bad, n);
	/* the caller's iolock keeps writers of this file out; the blocks' contents do not
	 * change, only the bad copy becomes good */
	if (__atomic_load_n(&fs->ro, __ATOMIC_SEQ_CST) || fs->members_ro ||
	    !fs_member_ok(fs, (unsigned)place->tag))
		return "left as it is (a read-only mount: dmafs-fsck --scrub --repair rewrites it)";
	if (heal_copy(fs, place, good, bad, nb))
		return "could not be rewritten";
	atomic_fetch_add(&st->healed, n);
	return "rewritten from it";
}

int fs_mirror_recover(struct fs *fs, const struct inode *ino, struct uring_op *op, uint64_t foff,
		      int io_err, int (*copy)(void *dst, const void *src, size_t n))
{
	uint32_t nb = op->len / DMAFS_BLOCK, both = 0;
	char *priv = NULL, *om = NULL, *bm = NULL, *blk = NULL;
	const uint8_t *osums, *bsums;
	uint8_t *obad = NULL, *bbad = NULL;
	struct uring_op o;
	int ret = 0, oread;

	if (!fs->mirror)
		return -EIO;
	fs_other_copy(fs, op, &o);
	if (!fs_member_ok(fs, (unsigned)o.tag)) {
		log_err("inode %llu file offset %llu: the %s of member %u (%s) at offset %llu failed, and the other copy's member %u is %s: no good copy",
			(unsigned long long)ino->ino, (unsigned long long)foff,
			io_err ? "read" : "checksum", op->tag, fs->members[op->tag].path,
			(unsigned long long)op->off, o.tag,
			atomic_load(&fs->mstate[o.tag]) == FS_MEMBER_MISSING ? "missing" : "failed");
		return -EIO;
	}
	/* the daemon's own memory: what is checked is what a bad copy is rewritten from (a
	 * client could change its pages between the two), block by block from whichever
	 * copy has it good (each copy may have bad blocks of its own) */
	priv = util_aligned_alloc(op->len);
	blk = util_aligned_alloc(DMAFS_BLOCK);
	obad = calloc(nb, 1);
	bbad = calloc(nb, 1);
	if (!priv || !blk || !obad || !bbad) {
		ret = -ENOMEM;
		goto out;
	}
	/* one recovery at a time: one rewriting a copy while another reads it could see a
	 * block and its checksum of different moments (recoveries are rare) */
	pthread_mutex_lock(&fs->heal_lock);
	o.buf = priv;
	oread = uring_rw(&o, 1);
	if (oread)
		fs_io_error(fs, ino, &o, foff, "read");
	osums = oread ? NULL : sums_of(fs, &o, &om);
	bsums = sums_of(fs, op, &bm);
	for (uint32_t k = 0; k < nb * DMAFS_BLOCK; k += DMAFS_BLOCK) {
		const char *mine = io_err ? NULL : (const char *)op->buf + k;
		int ook = block_ok(&o, priv + k, k, osums), bok;

		/* this copy's block: as read (its daemon memory: fs_verify_or_recover's
		 * callers); where the other copy's is bad too, read again on its own (after a
		 * read error, or in case another recovery was rewriting it when it was read) */
		bok = mine && block_ok(op, mine, k, bsums);
		if (!bok && !ook && !read_block(op, k, blk)) {
			mine = blk;
			bok = block_ok(op, mine, k, bsums);
		}
		bbad[k / DMAFS_BLOCK] = !bok;
		obad[k / DMAFS_BLOCK] = !ook;
		if (!ook && bok)
			memcpy(priv + k, mine, DMAFS_BLOCK);
		else if (!ook && !both++)
			log_err("inode %llu file offset %llu: both copies are damaged (member %u offset %llu: %s; member %u offset %llu: %s); reads of it fail with EIO",
				(unsigned long long)ino->ino, (unsigned long long)(foff + k), op->tag,
				(unsigned long long)(op->off + k), io_err ? "read error" : "checksum mismatch",
				o.tag, (unsigned long long)(o.off + k), oread ? "read error" : "checksum mismatch");
	}
	if (both) {
		pthread_mutex_unlock(&fs->heal_lock);
		ret = -EIO;
		goto out;
	}
	for (int c = 0; c < 2; c++) { /* this copy, then the other's bad blocks */
		const struct uring_op *pl = c ? &o : op, *other = c ? op : &o;
		const char *how = heal_and_count(fs, pl, priv, c ? obad : bbad, nb);

		if (how && !atomic_exchange(&fs->mst[pl->tag].said, 1))
			log_warn("member %u (%s): %s at member offset %llu (inode %llu file offset %llu, %u bytes): read from the copy on member %u instead, the bad copy %s; later ones on this member are counted in user.dmafs.members, not logged",
				 pl->tag, fs->members[pl->tag].path,
				 (c ? oread : io_err) ? "read error" : "checksum mismatch",
				 (unsigned long long)pl->off, (unsigned long long)ino->ino,
				 (unsigned long long)foff, op->len, other->tag, how);
	}
	pthread_mutex_unlock(&fs->heal_lock);
	ret = (copy ? copy : copy_plain)(op->buf, priv, op->len);
	if (!ret)
		op->recovered = 1;
out:
	free(priv);
	free(blk);
	free(om);
	free(bm);
	free(obad);
	free(bbad);
	return ret;
}

int fs_verify_or_recover(struct fs *fs, const struct inode *ino, struct uring_op *op,
			 const void *csums, uint64_t foff,
			 int (*copy)(void *dst, const void *src, size_t n))
{
	if (!fs_verify_read(fs, ino, op, csums, foff))
		return 0;
	return fs->mirror ? fs_mirror_recover(fs, ino, op, foff, 0, copy) : -EIO;
}
