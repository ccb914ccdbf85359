// SPDX-License-Identifier: MIT
/*
 * rebuild.c - a lost member of a mirror rebuilt onto a new device from the other copies
 * (rebuild.h): the offline tool dmafs-replace(8) and the daemon (a rebuild while mounted)
 * run the same plan and copy. Every block the lost member held is written to the new
 * one: the first copies of its files' blocks from their second copies on the next member,
 * the second copies it kept for the member before it from their first copies, and
 * (members 0 and 1) the metadata log from the other log copy. The blocks read are
 * checked against their checksums on the way: a block with no good copy is written with
 * a checksum that does not match, so reads of it keep failing with EIO rather than
 * passing on damaged bytes as good. The caller writes the new member's superblocks
 * last.
 */
#include "engine/rebuild.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/uring.h"

#define PIECE (4u << 20) /* bytes of one copy job at most */
#define BATCH 16	 /* jobs read (and written) at once */
#define CWIN (1u << 20)	 /* checksum bytes built in memory before they are written */

static int add_job(struct rebuild *R, unsigned sm, uint64_t soff, uint64_t doff, uint64_t len,
		   int data, uint64_t ino, uint64_t foff)
{
	while (len) {
		uint32_t l = (uint32_t)MIN(len, PIECE);

		if (dm_grow(&R->job, &R->cap, R->njob + 1, sizeof(*R->job), 1024))
			return -ENOMEM;
		R->job[R->njob++] = (struct job){ soff, doff, ino, foff, l, sm, data };
		R->total += l;
		soff += l;
		doff += l;
		foff += l;
		len -= l;
	}
	return 0;
}

/* An inode's extents: what the lost member held of them, and where the other copy is. */
static int plan_inode(struct inode *i, void *arg)
{
	struct rebuild *R = arg;
	uint64_t doff[FMT_MAX_MEMBERS], half = R->ms[0].sb.mirror_half;
	int ret = 0;

	for (unsigned m = 0; m < R->n; m++)
		doff[m] = R->ms[m].sb.data_offset;
	for (size_t x = 0; x < i->next && !ret; x++) {
		const struct extent *e = &i->ext[x];
		unsigned m2;
		uint64_t o2;

		fmt_mirror_of(doff, R->n, half, e->member, e->moff, &m2, &o2);
		if (e->member == R->k) /* its first copy: from the second */
			ret = add_job(R, m2, o2, e->moff, e->len, 1, i->ino, e->off);
		else if (m2 == R->k) /* the second copy it kept: from the first */
			ret = add_job(R, e->member, e->moff, o2, e->len, 1, i->ino, e->off);
	}
	return ret;
}

/* Where piece @i of area @ar starts in the area's bytes. */
static uint64_t piece_start(const struct fmt_area *ar, uint32_t i)
{
	uint64_t at = 0;

	for (uint32_t k = 0; k < i; k++)
		at += ar->len[k];
	return at;
}

/* Members 0 and 1: the log halves, and the log areas piece by piece, from the other copy. */
static int plan_log(struct rebuild *R, const struct journal *j)
{
	unsigned o = 1 - R->k;
	int ret;

	if (R->k > 1 || R->n < 2)
		return 0;
	ret = add_job(R, o, j->log_offset, j->log_offset, 2 * j->half, 0, 0, 0);
	for (int h = 0; h < 2 && !ret && j->ext_len; h++) {
		const struct fmt_area *from = &j->area[h][o], *to = &j->area[h][R->k];
		uint64_t pos = 0;

		/* both copies' pieces hold the same bytes in order: walk them together */
		for (uint32_t a = 0, b = 0; !ret && pos < j->ext_len && a < from->n && b < to->n;) {
			uint64_t ua = pos - piece_start(from, a), ub = pos - piece_start(to, b);
			uint64_t l = MIN(from->len[a] - ua, to->len[b] - ub);

			ret = add_job(R, o, from->off[a] + ua, to->off[b] + ub, l, 0, 0, 0);
			pos += l;
			if (ua + l == from->len[a])
				a++;
			if (ub + l == to->len[b])
				b++;
		}
	}
	return ret;
}

static int job_cmp(const void *x, const void *y)
{
	const struct job *a = x, *b = y;

	return a->doff < b->doff ? -1 : a->doff > b->doff;
}

/* Write the checksum window out (the bytes it was filled up to). */
static int cwin_flush(struct rebuild *R)
{
	int ret = 0;

	if (R->cw_end > R->cw_a)
		ret = member_pwrite(R->dst, R->cwin, ALIGN_UP(R->cw_end - R->cw_a, DMAFS_BLOCK), R->cw_a);
	R->cw_end = R->cw_a;
	return ret;
}

/* Set the new member's checksum of its block at @moff to @v. Positions only grow. */
static int cwin_put(struct rebuild *R, uint64_t moff, uint64_t v)
{
	uint64_t pos = fmt_csum_pos(&R->dst->sb, moff);
	int ret = 0;

	if (pos < R->cw_a || pos + 8 > R->cw_a + CWIN) {
		ret = cwin_flush(R);
		memset(R->cwin, 0, CWIN);
		R->cw_a = R->cw_end = ALIGN_DOWN(pos, DMAFS_BLOCK);
	}
	put_u64((uint8_t *)R->cwin + (pos - R->cw_a), v);
	R->cw_end = MAX(R->cw_end, pos + 8);
	return ret;
}

/*
 * The checksums of one job's blocks: checked at the source (@good, 0 where the block or
 * its checksum read failed or does not match) and made for the new member (@sum, a bad
 * block's made not to match, so that reads of it keep failing).
 */
struct hashing {
	const struct rebuild *R;
	const struct job *jb;
	const char *buf, *cs;
	uint64_t ca;
	int read_err;
	uint64_t sum[PIECE / DMAFS_BLOCK];
	uint8_t good[PIECE / DMAFS_BLOCK];
};

static void hash_job(struct hashing *h)
{
	const struct job *jb = h->jb;
	const struct fmt_sb *sb = &h->R->ms[jb->sm].sb;
	uint64_t p0 = fmt_csum_pos(sb, jb->soff);

	for (uint32_t b = 0, k = 0; b < jb->len; b += DMAFS_BLOCK, k++) {
		h->good[k] = !h->read_err &&
			     fmt_csum(h->buf + b, jb->sm, jb->soff + b) ==
				     get_u64((const uint8_t *)h->cs + (p0 - h->ca) + k * 8);
		h->sum[k] = fmt_csum(h->buf + b, h->R->k, jb->doff + b) ^ !h->good[k];
	}
}

/*
 * A batch's hashing, over threads (two XXH3 passes a byte would bound the rebuild), while
 * the next batch's reads and this one's writes are in flight: hash_start, hash_wait.
 */
struct hash_pool {
	struct hashing *h;
	size_t n, next; /* next: atomic */
	pthread_t t[BATCH];
	size_t started;
};

static void *hash_main(void *arg)
{
	struct hash_pool *P = arg;
	size_t i;

	while ((i = __atomic_fetch_add(&P->next, 1, __ATOMIC_RELAXED)) < P->n)
		hash_job(&P->h[i]);
	return NULL;
}

static void hash_start(struct hash_pool *P, struct hashing *h, size_t n)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = (size_t)MAX(1, MIN((long)n, MIN(cpus, (long)BATCH)));

	P->h = h;
	P->n = n;
	P->next = 0;
	P->started = 0;
	for (size_t i = 0; i < nt; i++)
		if (!pthread_create(&P->t[P->started], NULL, hash_main, P))
			P->started++;
	if (!P->started) /* no thread: here, now */
		hash_main(P);
}

static void hash_wait(struct hash_pool *P)
{
	for (size_t i = 0; i < P->started; i++)
		pthread_join(P->t[i], NULL);
	P->started = 0;
}

/* Job @h's checksums into the new member's window, its blocks without a good copy said. */
static int job_sums(struct rebuild *R, const struct hashing *h)
{
	const struct job *jb = h->jb;
	uint64_t bad_from = 0, bad_len = 0;
	int ret = 0;

	for (uint32_t b = 0, k = 0; b < jb->len && !ret; b += DMAFS_BLOCK, k++) {
		if (!h->good[k]) {
			if (!bad_len)
				bad_from = b;
			bad_len += DMAFS_BLOCK;
			R->damaged += DMAFS_BLOCK;
		}
		ret = cwin_put(R, jb->doff + b, h->sum[k]);
		if ((h->good[k] || b + DMAFS_BLOCK >= jb->len) && bad_len) {
			char msg[512];

			snprintf(msg, sizeof(msg), "inode %llu file offset %llu (+%llu bytes): no good copy (the copy on member %u offset %llu is %s): written as it is, and reads of it fail with EIO as before; restore the file from its source",
				 (unsigned long long)jb->ino, (unsigned long long)(jb->foff + bad_from),
				 (unsigned long long)bad_len, jb->sm, (unsigned long long)(jb->soff + bad_from),
				 h->read_err ? "unreadable" : "damaged");
			R->note(R->arg, msg);
			bad_len = 0;
		}
	}
	return ret;
}

/*
 * Copy every job: the reads of one batch go out with the writes of the one before, while
 * threads hash the one before (its checksums go to the window after that).
 */
static int copy_all(struct rebuild *R)
{
	size_t csmax = 4 * DMAFS_BLOCK + ALIGN_UP(PIECE / DMAFS_BLOCK * 8, DMAFS_BLOCK);
	char *mem = util_aligned_alloc(2 * BATCH * ((size_t)PIECE + csmax));
	struct hashing *hs[2] = { calloc(BATCH, sizeof(struct hashing)),
				  calloc(BATCH, sizeof(struct hashing)) };
	struct hash_pool pool = { 0 };
	struct uring_op ops[4 * BATCH];
	uint64_t ca[BATCH], t0 = dm_mono_ns(), drawn = 0;
	int ret = 0, cur = 0;
	size_t at = 0, prev_n = 0, prev_at = 0, prev_nh = 0;

	if (!mem || !hs[0] || !hs[1]) {
		free(mem);
		free(hs[0]);
		free(hs[1]);
		return -ENOMEM;
	}
	while (at < R->njob || prev_n) {
		size_t n, no = 0, nh = 0, nw;

		if (!ret && __atomic_load_n(&R->stop, __ATOMIC_RELAXED)) {
			snprintf(R->err, sizeof(R->err), "stopped before it was done");
			ret = -EINTR;
		}
		n = ret ? 0 : MIN(BATCH, R->njob - at);
		char *base = mem + (size_t)cur * BATCH * (PIECE + csmax);
		char *pbase = mem + (size_t)(1 - cur) * BATCH * (PIECE + csmax);

		for (size_t i = 0; i < prev_n && !ret; i++) { /* the last batch's writes */
			const struct job *jb = &R->job[prev_at + i];

			ops[no++] = (struct uring_op){ .fd = R->dst->fd, .write = 1,
						       .buf = pbase + i * (PIECE + csmax),
						       .len = jb->len, .off = jb->doff, .tag = (int)R->k };
		}
		nw = no;
		for (size_t i = 0; i < n; i++) { /* this batch's reads, with their checksums */
			const struct job *jb = &R->job[at + i];
			const struct fmt_sb *sb = &R->ms[jb->sm].sb;
			char *b = base + i * (PIECE + csmax);

			ops[no++] = (struct uring_op){ .fd = R->ms[jb->sm].fd, .buf = b, .len = jb->len,
						       .off = jb->soff, .tag = (int)jb->sm };
			if (jb->data) {
				uint64_t a = ALIGN_DOWN(fmt_csum_pos(sb, jb->soff), DMAFS_BLOCK);
				uint64_t e = ALIGN_UP(fmt_csum_pos(sb, jb->soff + jb->len), DMAFS_BLOCK);

				ca[i] = a;
				ops[no++] = (struct uring_op){ .fd = R->ms[jb->sm].fd, .buf = b + PIECE,
							       .len = (uint32_t)(e - a), .off = a,
							       .tag = (int)jb->sm };
			}
		}
		if (no)
			uring_rw(ops, no); /* each op's res says how it went */
		/* the last batch: hashed meanwhile, its checksums into the window now */
		hash_wait(&pool);
		for (size_t i = 0; i < prev_nh && !ret; i++)
			ret = job_sums(R, &hs[1 - cur][i]);
		for (size_t i = 0; i < nw && !ret; i++)
			if (ops[i].res) {
				snprintf(R->err, sizeof(R->err), "member %u (%s), the new member: write at offset %llu failed: %s",
					 R->k, R->dst->path, (unsigned long long)ops[i].off,
					 strerror(-ops[i].res));
				ret = ops[i].res;
			}
		for (size_t i = 0, o = nw; i < n && !ret; i++) {
			const struct job *jb = &R->job[at + i];
			char *b = base + i * (PIECE + csmax);
			int rerr = ops[o].res || (jb->data && ops[o + 1].res);

			if (rerr && !jb->data) {
				snprintf(R->err, sizeof(R->err), "member %u (%s): reading the metadata log at offset %llu failed: %s",
					 jb->sm, R->ms[jb->sm].path, (unsigned long long)jb->soff,
					 strerror(-ops[o].res));
				ret = -EIO;
				break;
			}
			if (rerr)
				memset(b, 0, jb->len);
			if (jb->data)
				hs[cur][nh++] = (struct hashing){ .R = R, .jb = jb, .buf = b,
								  .cs = b + PIECE, .ca = ca[i],
								  .read_err = rerr };
			o += jb->data ? 2 : 1;
			__atomic_add_fetch(&R->done, jb->len, __ATOMIC_RELAXED);
		}
		if (ret)
			nh = n = 0; /* nothing more goes out */
		if (nh)
			hash_start(&pool, hs[cur], nh);
		prev_nh = nh;
		prev_n = n;
		prev_at = at;
		at += n;
		cur = 1 - cur;
		if (R->progress && (dm_mono_ns() - drawn > 200000000u || at >= R->njob)) {
			drawn = dm_mono_ns();
			R->progress(R->arg, R->done, R->total, (drawn - t0) / 1e9, 0);
		}
		if (ret)
			break;
	}
	hash_wait(&pool);
	if (R->progress)
		R->progress(R->arg, R->done, R->total, (dm_mono_ns() - t0) / 1e9, 1);
	free(mem);
	free(hs[0]);
	free(hs[1]);
	if (!ret)
		ret = cwin_flush(R);
	return ret;
}

int rebuild_plan(struct rebuild *R, struct meta *meta, const struct journal *j)
{
	int ret = meta_for_each(meta, plan_inode, R);

	if (!ret)
		ret = plan_log(R, j);
	if (ret)
		return -ENOMEM;
	qsort(R->job, R->njob, sizeof(*R->job), job_cmp);
	return 0;
}

int rebuild_copy(struct rebuild *R)
{
	int ret;

	R->cwin = util_aligned_alloc(CWIN);
	if (!R->cwin)
		return -ENOMEM;
	memset(R->cwin, 0, CWIN);
	R->cw_a = R->cw_end = 0;
	ret = copy_all(R);
	if (!ret && fdatasync(R->dst->fd)) {
		ret = -errno;
		snprintf(R->err, sizeof(R->err), "member %u (%s), the new member: flushing failed: %s",
			 R->k, R->dst->path, strerror(errno));
	}
	return ret;
}

void rebuild_free(struct rebuild *R)
{
	free(R->job);
	free(R->cwin);
	R->job = NULL;
	R->cwin = NULL;
	R->njob = R->cap = 0;
}

int rebuild_new_sb(const struct member *ms, unsigned n, unsigned k, struct member *nm, char *err,
		   size_t errlen)
{
	struct fmt_sb sb = ms[(k + 1) % n].sb;
	uint64_t doff = fmt_has_log(k) ? FMT_LOG_OFFSET + 2 * sb.log_half : FMT_LOG_OFFSET;
	char s1[32];

	sb.member_index = k;
	if (fmt_sb_geometry(&sb, nm->size, sb.log_half) || sb.data_offset != doff ||
	    sb.data_end < sb.data_offset + 2 * sb.mirror_half) {
		snprintf(err, errlen, "%s is %s: too small to take member %u's place (its data region needs %llu bytes from offset %llu, and room for the checksums after it)",
			 nm->path, util_fmt_size(nm->size, s1, sizeof(s1)), k,
			 (unsigned long long)(2 * sb.mirror_half), (unsigned long long)doff);
		return -ENOSPC;
	}
	nm->sb = sb;
	return 0;
}
