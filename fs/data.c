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
#include <stdlib.h>
#include <string.h>

#include "uring.h"

#define MAX_OPS 64

/* Per-thread aligned bounce buffers, reused: a fresh 1 MiB buffer per request would cost
 * an mmap and 256 page faults each time. */
static __thread void *tbuf[2];
static __thread size_t tbuf_len[2];

static void *thread_buf(int which, size_t len)
{
	if (tbuf_len[which] < len) {
		free(tbuf[which]);
		tbuf[which] = util_aligned_alloc(len);
		tbuf_len[which] = tbuf[which] ? ALIGN_UP(len, DMAFS_BLOCK) : 0;
	}
	return tbuf[which];
}

struct iovec_ops {
	struct uring_op op[MAX_OPS];
	size_t n;
};

static void io_error(struct fs *fs, const struct inode *ino, const struct uring_op *op,
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
				io_error(fs, ino, &ops[i], foffs[i], what);
		return -EIO;
	}
	return 0;
}

/*
 * Read the block-aligned file ranges rg[i].a..b into rg[i].buf from the extent map,
 * zeroing holes. All member reads of all ranges go out at once, so every member holding a
 * part is busy. Caller holds iolock.
 */
int fs_read_ranges(struct fs *fs, struct inode *ino, const struct fs_range *rg, size_t nr)
{
	struct uring_op sops[MAX_OPS], *ops = sops;
	uint64_t sfoffs[MAX_OPS], *foffs = sfoffs;
	size_t n = 0, cap = MAX_OPS;
	int ret = 0;

	for (size_t r = 0; r < nr; r++) {
	char *buf = rg[r].buf;
	uint64_t a = rg[r].a, b = rg[r].b, pos = a;
	size_t i = meta_ext_find(ino, a);

	while (pos < b) {
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
		if (n == cap) {
			size_t ncap = cap * 4;
			struct uring_op *nops = malloc(ncap * sizeof(*nops));
			uint64_t *nf = malloc(ncap * sizeof(*nf));

			if (!nops || !nf) {
				free(nops);
				free(nf);
				ret = -ENOMEM;
				goto out;
			}
			memcpy(nops, ops, n * sizeof(*ops));
			memcpy(nf, foffs, n * sizeof(*nf));
			if (ops != sops) {
				free(ops);
				free(foffs);
			}
			ops = nops;
			foffs = nf;
			cap = ncap;
		}
		ops[n] = (struct uring_op){ .fd = fs->members[e->member].fd, .write = 0,
					    .buf = buf + (pos - a), .len = end - pos,
					    .off = e->moff + (pos - e->off), .tag = e->member };
		foffs[n++] = pos;
		pos = end;
		i++;
	}
	}
	if (n)
		ret = run_ops(fs, ino, ops, n, foffs, "read");
out:
	if (ops != sops) {
		free(ops);
		free(foffs);
	}
	return ret;
}

int fs_read_blocks(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b)
{
	struct fs_range r = { buf, a, b };

	return fs_read_ranges(fs, ino, &r, 1);
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
	ret = fs_read_blocks(fs, ino, buf, a, b);
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

/* A new extent not yet in the map: allocated, written, then logged. */
struct newext {
	uint64_t off, moff;
	uint32_t len, member;
};

/*
 * Allocate the holes of blocks [a, b). New pieces go to @ne (at most @max). Returns the
 * end of the allocated prefix (b when everything got space) or -ENOMEM.
 */
static int64_t allocate(struct fs *fs, struct inode *ino, uint64_t a, uint64_t b,
			struct newext *ne, size_t *nne, size_t max)
{
	uint64_t pos = a;
	size_t i = meta_ext_find(ino, a);

	while (pos < b) {
		const struct extent *e = i < ino->next ? &ino->ext[i] : NULL;

		if (e && e->off <= pos) {
			pos = e->off + e->len;
			i++;
			continue;
		}
		uint64_t hole_end = e ? MIN(b, e->off) : b;
		uint64_t su_end = ALIGN_DOWN(pos, fs->su) + fs->su;
		uint64_t want = MIN(hole_end, su_end) - pos;
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

/* Build write ops for blocks [a, b) from buffer @buf (mapping offset @a), using both the
 * existing map and the new pieces. */
static size_t plan_writes(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b,
			  const struct newext *ne, size_t nne, struct uring_op *ops,
			  uint64_t *foffs, size_t max, uint64_t *reached)
{
	size_t n = 0, i = meta_ext_find(ino, a), k = 0;
	uint64_t pos = a;

	while (pos < b && n < max) {
		const struct extent *e = i < ino->next ? &ino->ext[i] : NULL;
		uint64_t off, moff, len;
		uint32_t member;

		if (e && e->off <= pos) {
			off = e->off, moff = e->moff, len = e->len, member = e->member;
			i++;
		} else if (k < nne && ne[k].off <= pos) {
			off = ne[k].off, moff = ne[k].moff, len = ne[k].len, member = ne[k].member;
			k++;
		} else {
			break; /* unreachable: allocate() covered every hole */
		}
		uint64_t end = MIN(b, off + len);
		ops[n] = (struct uring_op){ .fd = fs->members[member].fd, .write = 1,
					    .buf = buf + (pos - a), .len = end - pos,
					    .off = moff + (pos - off), .tag = member };
		foffs[n++] = pos;
		pos = end;
	}
	*reached = pos;
	return n;
}

static int log_extents(struct fs *fs, struct inode *ino, const struct newext *ne, size_t nne)
{
	for (size_t k = 0; k < nne; k++) {
		struct fmt_rec r = { .type = REC_EXTENT, .ino = ino->ino, .off = ne[k].off,
				     .len = ne[k].len, .member = ne[k].member, .moff = ne[k].moff };
		int ret = journal_log(&fs->j, &r);

		if (ret)
			return ret;
	}
	return 0;
}

static int block_mapped(struct inode *ino, uint64_t blk)
{
	size_t i = meta_ext_find(ino, blk);

	return i < ino->next && ino->ext[i].off <= blk;
}

ssize_t fs_write(struct fs *fs, uint64_t ino_nr, const char *data, size_t size, uint64_t off)
{
	struct newext ne[MAX_OPS];
	struct uring_op ops[2 * MAX_OPS];
	uint64_t foffs[2 * MAX_OPS];
	struct inode *ino;
	uint64_t a, b, end, done_end, reached;
	size_t nne = 0, nops;
	int64_t got;
	char *buf;
	int ret;

	if (fs->ro)
		return -EROFS;
	if (size == 0)
		return 0;
	if (off + size < off || off + size > (1ull << 60))
		return -EFBIG;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	if (!S_ISREG(ino->a.mode))
		return -EINVAL;
	pthread_rwlock_wrlock(&ino->iolock);
	end = off + size;
	a = ALIGN_DOWN(off, DMAFS_BLOCK);
	b = ALIGN_UP(end, DMAFS_BLOCK);
	buf = thread_buf(1, b - a);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	/* partial head and tail blocks: old contents (or zeros) around the new bytes */
	if (off != a) {
		if (block_mapped(ino, a)) {
			ret = fs_read_blocks(fs, ino, buf, a, a + DMAFS_BLOCK);
			if (ret)
				goto out;
		} else {
			memset(buf, 0, DMAFS_BLOCK);
		}
	}
	if (end != b && (b - DMAFS_BLOCK != a || off == a)) {
		char *t = buf + (b - DMAFS_BLOCK - a);

		if (block_mapped(ino, b - DMAFS_BLOCK)) {
			ret = fs_read_blocks(fs, ino, t, b - DMAFS_BLOCK, b);
			if (ret)
				goto out;
		} else {
			memset(t, 0, DMAFS_BLOCK);
		}
	}
	memcpy(buf + (off - a), data, size);

	got = allocate(fs, ino, a, b, ne, &nne, MAX_OPS);
	if (got < 0) {
		ret = got;
		goto undo;
	}
	done_end = got;
	if (done_end <= off) {
		ret = -ENOSPC;
		goto undo;
	}
	if (done_end < b) /* short write at ENOSPC (or a very fragmented request) */
		end = MIN(end, done_end);
	nops = plan_writes(fs, ino, buf, a, done_end, ne, nne, ops, foffs, 2 * MAX_OPS, &reached);
	if (reached < done_end) {
		/* too many pieces for one pass: write the prefix, give back the rest */
		while (nne && ne[nne - 1].off >= reached) {
			nne--;
			alloc_put(&fs->alloc, ne[nne].member, ne[nne].moff, ne[nne].len);
		}
		if (reached <= off) {
			ret = -EIO;
			goto undo;
		}
		end = MIN(end, reached);
	}
	ret = run_ops(fs, ino, ops, nops, foffs, "write");
	if (ret)
		goto undo;
	for (size_t k = 0; k < nops; k++)
		journal_dirty(&fs->j, ops[k].tag);

	ret = fs_begin(fs, 256 + nne * 64, nne > 0);
	if (ret)
		goto undo;
	ret = log_extents(fs, ino, ne, nne);
	if (!ret) {
		struct fmt_rec r;
		int64_t now = fs_now();

		meta_inode_rec(ino, &r);
		r.a.size = MAX(ino->a.size, end);
		r.a.mtime = r.a.ctime = now;
		r.a.mode = fs_kill_suid(r.a.mode);
		ret = journal_log(&fs->j, &r);
	}
	fs_end(fs);
	pthread_rwlock_unlock(&ino->iolock);
	return ret ? ret : (ssize_t)(end - off);
undo:
	for (size_t k = 0; k < nne; k++)
		alloc_put(&fs->alloc, ne[k].member, ne[k].moff, ne[k].len);
out:
	pthread_rwlock_unlock(&ino->iolock);
	return ret;
}

int fs_truncate_locked_data(struct fs *fs, struct inode *ino, uint64_t size)
{
	struct fmt_rec r;
	int ret = 0;

	if (size > (1ull << 60))
		return -EFBIG;
	pthread_rwlock_wrlock(&ino->iolock);
	if (size < ino->a.size && size % DMAFS_BLOCK && block_mapped(ino, ALIGN_DOWN(size, DMAFS_BLOCK))) {
		/* zero the tail of the new last block: bytes past EOF stay zero on disk */
		uint64_t blk = ALIGN_DOWN(size, DMAFS_BLOCK);
		char *buf = thread_buf(1, DMAFS_BLOCK);
		struct uring_op op;
		uint64_t foff = blk;
		size_t i = meta_ext_find(ino, blk);

		if (!buf) {
			ret = -ENOMEM;
			goto out;
		}
		ret = fs_read_blocks(fs, ino, buf, blk, blk + DMAFS_BLOCK);
		if (ret)
			goto out;
		memset(buf + (size - blk), 0, DMAFS_BLOCK - (size - blk));
		op = (struct uring_op){ .fd = fs->members[ino->ext[i].member].fd, .write = 1,
					.buf = buf, .len = DMAFS_BLOCK,
					.off = ino->ext[i].moff + (blk - ino->ext[i].off),
					.tag = ino->ext[i].member };
		ret = run_ops(fs, ino, &op, 1, &foff, "write");
		if (ret)
			goto out;
		journal_dirty(&fs->j, op.tag);
	}
	ret = fs_begin(fs, 256, 0);
	if (ret)
		goto out;
	memset(&r, 0, sizeof(r));
	r.type = REC_TRUNC;
	r.ino = ino->ino;
	r.off = size;
	ret = journal_log(&fs->j, &r);
	if (!ret) { /* like ftruncate(2) on Linux: mtime changes even if the size does not */
		meta_inode_rec(ino, &r);
		r.a.mtime = r.a.ctime = fs_now();
		r.a.mode = fs_kill_suid(r.a.mode);
		ret = journal_log(&fs->j, &r);
	}
	fs_end(fs);
out:
	pthread_rwlock_unlock(&ino->iolock);
	return ret;
}
