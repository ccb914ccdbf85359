// SPDX-License-Identifier: MIT
/*
 * write.c - the write side of file data: allocation, copy-on-write or in-place block writes,
 * checksums, and truncation. Unaligned writes read-modify-write their partial head and tail
 * blocks; bytes past EOF inside an allocated block are kept zero on disk. Writers and
 * truncate hold inode->iolock exclusively.
 */
#include "engine/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/internal.h"
#include "io/uring.h"

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

int fs_data_write(struct fs *fs, const struct inode *ino, struct uring_op *ops, size_t n,
		  const uint64_t *foffs)
{
	struct uring_op *all = ops;
	uint64_t *af = (uint64_t *)foffs;
	size_t total = n;
	int ret;

	if (fs->mirror && n) {
		if (__atomic_load_n(&fs->ro, __ATOMIC_SEQ_CST))
			return -EROFS; /* a member failed: see fs_member_failed */
		all = malloc(2 * n * sizeof(*all));
		af = malloc(2 * n * sizeof(*af));
		if (!all || !af) {
			free(all);
			free(af);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++) {
			all[i] = ops[i];
			af[i] = af[n + i] = foffs[i];
			fs_other_copy(fs, &ops[i], &all[n + i]);
		}
		total = 2 * n;
	}
	ret = run_ops(fs, ino, all, total, af, "write");
	if (ret && fs->mirror)
		for (size_t i = 0; i < total; i++)
			if (all[i].res)
				fs_member_failed(fs, (unsigned)all[i].tag, "write", all[i].res);
	if (!ret)
		ret = fs_csum_store(fs, all, total); /* also marks the members dirty */
	if (all != ops) {
		free(all);
		free(af);
	}
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
	if (got >= 0 && got < (int64_t)b && w->nne < MAX_OPS &&
	    (got == (int64_t)a || alloc_has_deferred(&fs->alloc))) {
		/*
		 * Space freed by earlier changes (the old blocks of copy-on-write overwrites,
		 * deleted files) returns once they are durable: commit, then take the rest. A
		 * short write here would reach an O_DIRECT writer as EIO (the kernel's
		 * asynchronous direct I/O turns any short reply into it).
		 */
		ret = journal_commit(&fs->j);
		if (ret) {
			cow_undo(fs, w);
			return ret;
		}
		got = allocate(fs, ino, (uint64_t)got, b, w->ne, &w->nne, MAX_OPS);
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
	ret = fs_data_write(fs, ino, ops, w->nne, foffs); /* both copies of a mirror */
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
		ret = fs_data_write(fs, ino, v.op, v.n, v.foff); /* both copies of a mirror */
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

/*
 * The partial head and tail blocks of a write of [off, end) into blocks [a, b) at @buf:
 * their old contents (verified) or zeros around the new bytes. Caller holds iolock.
 */
static int fill_edges(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b,
		      uint64_t off, uint64_t end)
{
	int ret;

	if (off != a) {
		if (block_mapped(ino, a)) {
			ret = fs_read_blocks(fs, ino, buf, a, a + DMAFS_BLOCK, 1);
			if (ret)
				return ret;
		} else {
			memset(buf, 0, DMAFS_BLOCK);
		}
	}
	if (end != b && (b - DMAFS_BLOCK != a || off == a)) {
		char *t = buf + (b - DMAFS_BLOCK - a);

		if (block_mapped(ino, b - DMAFS_BLOCK)) {
			ret = fs_read_blocks(fs, ino, t, b - DMAFS_BLOCK, b, 1);
			if (ret)
				return ret;
		} else {
			memset(t, 0, DMAFS_BLOCK);
		}
	}
	return 0;
}

/*
 * Write blocks [a, b) from @buf: those allocated since the last commit in place, the rest
 * by COW into @w (at most 3; *@nw of them used, to be undone by the caller on failure).
 * *@done gets the end of what was written, short when space runs out. Caller holds iolock
 * exclusively.
 */
static int write_blocks(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b,
			struct cow *w, int *nw, uint64_t *done)
{
	uint64_t pos;
	int ret = 0;

	for (pos = a; pos < b && *nw < 3;) {
		uint64_t seg;

		pthread_rwlock_rdlock(&fs->j.inplace);
		if (fresh_at(fs, ino, pos)) {
			seg = MIN(b, ino->fresh_hi);
			ret = write_inplace(fs, ino, buf + (pos - a), pos, seg);
			pthread_rwlock_unlock(&fs->j.inplace);
			if (ret)
				return ret;
			pos = seg;
			continue;
		}
		pthread_rwlock_unlock(&fs->j.inplace);
		/* up to the fresh blocks, if they follow */
		seg = ino->fresh_epoch == atomic_load(&fs->j.epoch) && ino->fresh_lo > pos &&
				      ino->fresh_lo < b && ino->fresh_hi > ino->fresh_lo
			      ? ino->fresh_lo
			      : b;
		ret = cow_write(fs, ino, buf + (pos - a), pos, seg, &w[*nw]);
		if (ret == -ENOSPC && pos > a) {
			ret = 0;
			break; /* a short write */
		}
		if (ret)
			return ret;
		pos = w[(*nw)++].end;
		if (pos < seg && w[*nw - 1].nne < MAX_OPS)
			break; /* space ran out (else the pieces did: the next cow goes on) */
	}
	*done = pos;
	return 0;
}

/* Log a write's new blocks, size and times. Caller holds iolock and meta.lock (fs_begin). */
static int log_write(struct fs *fs, struct inode *ino, struct cow *w, int nw, uint64_t end,
		     int64_t mtime)
{
	int ret = 0;

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
	return ret;
}

ssize_t fs_write_inode(struct fs *fs, struct inode *ino, const char *data, size_t size,
		       uint64_t off, int64_t mtime)
{
	struct cow w[3];
	uint64_t a, b, end, pos, from;
	size_t need = 256;
	int ret, nw = 0;
	char *buf;

	dm_rwlock_wrlock(&ino->iolock);
	/* the warm tier's chunks of the bytes written go (from the old end of file when the
	 * write starts past it), on every way out: blocks rewritten in place stay so */
	from = MIN(off, ino->a.size);
	end = off + size;
	a = ALIGN_DOWN(off, DMAFS_BLOCK);
	b = ALIGN_UP(end, DMAFS_BLOCK);
	if (a == off && b == end && (uintptr_t)data % DMAFS_BLOCK == 0) {
		/* whole blocks from an aligned buffer (write-behind): written as they are */
		buf = (char *)data;
	} else {
		buf = fs_thread_buf(1, b - a);
		if (!buf) {
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = fill_edges(fs, ino, buf, a, b, off, end);
	if (ret)
		goto out;
	if (buf != data)
		memcpy(buf + (off - a), data, size);

	ret = write_blocks(fs, ino, buf, a, b, w, &nw, &pos);
	if (ret)
		goto undo;
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
	ret = log_write(fs, ino, w, nw, end, mtime);
	fs_end(fs);
	tier_invalidate(fs->tier, ino, from, b);
	dm_rwlock_unlock(&ino->iolock);
	return ret ? ret : (ssize_t)(end - off);
undo:
	for (int k = 0; k < nw; k++)
		cow_undo(fs, &w[k]);
out:
	tier_invalidate(fs->tier, ino, from, b);
	dm_rwlock_unlock(&ino->iolock);
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
	uint64_t old;
	int ret = 0;

	if (size > (1ull << 60))
		return -EFBIG;
	dm_rwlock_wrlock(&ino->iolock);
	old = ino->a.size;
	ino->fresh_lo = ino->fresh_hi = 0; /* blocks past the new end go away */
	if (size < ino->a.size && size % DMAFS_BLOCK && block_mapped(ino, ALIGN_DOWN(size, DMAFS_BLOCK))) {
		/* a new copy of the new last block with its tail zeroed: bytes past EOF stay
		 * zero on disk */
		uint64_t blk = ALIGN_DOWN(size, DMAFS_BLOCK);
		char *buf = fs_thread_buf(1, DMAFS_BLOCK);

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
	/* the warm tier's chunks from the old or new end on (the new last block was rewritten) */
	tier_invalidate(fs->tier, ino, MIN(old, size), UINT64_MAX);
	dm_rwlock_unlock(&ino->iolock);
	return ret;
}

/* Entry points for falloc.c into the helpers above (see their comments). */
int64_t fs_alloc_blocks(struct fs *fs, struct inode *ino, uint64_t a, uint64_t b,
			struct newext *ne, size_t *nne, size_t max)
{
	return allocate(fs, ino, a, b, ne, nne, max);
}

void fs_fresh_add(struct inode *ino, uint64_t a, uint64_t b, uint64_t epoch)
{
	fresh_add(ino, a, b, epoch);
}
