// SPDX-License-Identifier: MIT
/*
 * csum.c - storing the checksums of data blocks just written (fs_csum_store): the
 * writes (write.c), fallocate's zero blocks (falloc.c) and a mirror's self-heal
 * (read.c) all end here.
 */
#include "engine/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "engine/internal.h"
#include "io/uring.h"

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

/* Group @idx (@n ops sorted by op_order) into runs of adjacent ranges; returns how many. */
static size_t group_runs(const struct uring_op **idx, size_t n, struct csum_run *run)
{
	size_t nr = 0;

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
	return nr;
}

/* Give each run its checksum blocks and its part of the thread's checksum buffer. */
static int place_runs(struct fs *fs, struct csum_run *run, size_t nr)
{
	size_t total = 0, r;
	char *cbuf;

	for (r = 0; r < nr; r++) {
		const struct fmt_sb *sb = &fs->members[run[r].tag].sb;

		run[r].ca = ALIGN_DOWN(fmt_csum_pos(sb, run[r].off), DMAFS_BLOCK);
		run[r].cb = ALIGN_UP(fmt_csum_pos(sb, run[r].end), DMAFS_BLOCK);
		total += run[r].cb - run[r].ca;
	}
	cbuf = fs_thread_buf(2, total);
	if (!cbuf)
		return -ENOMEM;
	for (r = 0, total = 0; r < nr; r++) {
		run[r].buf = cbuf + total;
		total += run[r].cb - run[r].ca;
	}
	return 0;
}

/*
 * Build run @u's checksum blocks: its partly covered first and last blocks from @prev (the
 * member's run before it in this batch, or NULL), the cache @c or the member, then the
 * checksums of its ops. Caller holds c->lock.
 */
static int fill_run(struct fs *fs, const struct uring_op **idx, struct csum_run *u,
		    struct csum_run *prev, struct fs_csum_cache *c)
{
	const struct fmt_sb *sb = &fs->members[u->tag].sb;
	struct member *m = &fs->members[u->tag];
	uint64_t p0 = fmt_csum_pos(sb, u->off), p1 = fmt_csum_pos(sb, u->end);
	int ret = 0;

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
	return ret;
}

/* Write the runs' checksum blocks in one batch, with @wo room for @nr I/Os. */
static int write_runs(struct fs *fs, const struct csum_run *run, size_t nr, struct uring_op *wo)
{
	size_t nw = 0;
	int ret;

	for (size_t r = 0; r < nr; r++)
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
	return ret;
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
int fs_csum_store(struct fs *fs, const struct uring_op *ops, size_t n)
{
	const struct uring_op *sidx[MAX_OPS], **idx = sidx;
	struct csum_run srun[MAX_OPS], *run = srun;
	struct uring_op swo[MAX_OPS], *wo = swo;
	size_t nr, r;
	uint64_t held = 0; /* members whose checksum lock is held; bit i = member i */
	int ret = 0;

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
	nr = group_runs(idx, n, run);
	ret = place_runs(fs, run, nr);
	if (ret)
		goto out;

	for (r = 0; r < nr && !ret; r++) {
		struct csum_run *u = &run[r], *prev = r && run[r - 1].tag == u->tag ? &run[r - 1] : NULL;
		struct fs_csum_cache *c = &fs->cc[u->tag];

		if (!(held & (1ull << u->tag))) { /* runs are in member order: so are the locks */
			pthread_mutex_lock(&c->lock);
			held |= 1ull << u->tag;
		}
		ret = fill_run(fs, idx, u, prev, c);
	}
	if (!ret)
		ret = write_runs(fs, run, nr, wo);
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
