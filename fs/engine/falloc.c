// SPDX-License-Identifier: MIT
/*
 * falloc.c - fallocate(2): reserving the blocks of a file range, and punching holes.
 *
 * Reserved blocks are ordinary extents whose data is zeros. They are allocated exactly as
 * a write of the range would allocate them (same stripe units, same contiguity goals), so
 * a later write fits into the file's runs, and reads, dmafs-fsck --scrub and the format
 * need nothing new. Ordering is that of data: the blocks are zeroed on the members and
 * their checksums stored before the EXTENT records that map them are logged, and the
 * commit that takes those records flushes the members first. Until that commit the blocks
 * are fresh (write.c), so writes into them go in place; after it, an overwrite is
 * copy-on-write like any other (dmafs(8), "Preallocation and hole punching").
 *
 * Zeroing uses what the member offers: BLKZEROOUT on a block device (Write Zeroes or a
 * deallocation that reads back as zeros, done by the drive, or by the kernel writing zeros
 * where the drive cannot), FALLOC_FL_ZERO_RANGE or else FALLOC_FL_PUNCH_HOLE on an image
 * file (both read back as zeros), and O_DIRECT writes of zeros where the member refuses
 * those.
 */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define ZBUF (1u << 20)
#define ZWRITE_OPS 32	/* zero writes in flight per member when falling back to writes */
#define LOG_CHUNK 4096	/* EXTENT records logged under one fs_begin */

/* Never written: the source of zero writes and of zero-block checksums. */
static char zbuf[ZBUF] __attribute__((aligned(DMAFS_BLOCK)));

/* How each member is zeroed, learnt at first use; only ever moves down the list. Per
 * process: a daemon serves one filesystem. */
enum { Z_NATIVE, Z_PUNCH, Z_WRITE };

struct pieces {
	struct newext *ne;
	size_t n, cap;
};

static int pieces_grow(struct pieces *p)
{
	return dm_grow(&p->ne, &p->cap, p->cap + 1, sizeof(*p->ne), 256);
}

static void pieces_put(struct fs *fs, struct pieces *p, size_t from)
{
	for (size_t k = from; k < p->n; k++)
		alloc_put(&fs->alloc, p->ne[k].member, p->ne[k].moff, p->ne[k].len);
	p->n = from;
}

/* The first hole of @ino in [pos, b): [*h0, *h1). Returns 0 when there is none. */
static int next_hole(const struct inode *ino, uint64_t pos, uint64_t b, uint64_t *h0, uint64_t *h1)
{
	size_t i = meta_ext_find(ino, pos);

	while (pos < b) {
		if (i >= ino->next || ino->ext[i].off >= b) {
			*h0 = pos;
			*h1 = b;
			return 1;
		}
		if (ino->ext[i].off > pos) {
			*h0 = pos;
			*h1 = ino->ext[i].off;
			return 1;
		}
		pos = ino->ext[i].off + ino->ext[i].len;
		i++;
	}
	return 0;
}

static int mapped(const struct inode *ino, uint64_t a, uint64_t b)
{
	size_t i = meta_ext_find(ino, a);

	return i < ino->next && ino->ext[i].off < b;
}

/* Is there room on every member for the holes of [a, b)? */
static int room_for(struct fs *fs, struct inode *ino, uint64_t a, uint64_t b, uint64_t total)
{
	uint64_t need[FMT_MAX_MEMBERS] = { 0 }, su = fs->su, h0, h1;

	/* checked first: it bounds the walk below by the free space */
	if (total > alloc_free_bytes(&fs->alloc))
		return 0;
	for (uint64_t pos = a; next_hole(ino, pos, b, &h0, &h1); pos = h1)
		for (uint64_t p = h0, e; p < h1; p = e) {
			e = MIN(h1, ALIGN_DOWN(p, su) + su);
			need[meta_slot_member(&fs->meta, ino, p / su)] += e - p;
		}
	for (unsigned m = 0; m < fs->n; m++)
		if (need[m] > alloc_member_free(&fs->alloc, m))
			return 0;
	return 1;
}

/*
 * Allocate every hole of blocks [a, b) into @p, all or nothing: -ENOSPC leaves nothing
 * allocated. Space freed by changes not yet durable is only reusable after a commit, so one
 * is made before giving up. Caller holds iolock exclusively.
 */
static int reserve(struct fs *fs, struct inode *ino, uint64_t a, uint64_t b, struct pieces *p)
{
	uint64_t total = 0, h0, h1;
	int ret, tries = 0;

	for (uint64_t pos = a; next_hole(ino, pos, b, &h0, &h1); pos = h1)
		total += h1 - h0;
	if (!total)
		return 0;
again:
	ret = 0;
	if (!room_for(fs, ino, a, b, total))
		ret = -ENOSPC;
	for (uint64_t pos = a; !ret && next_hole(ino, pos, b, &h0, &h1); pos = h1) {
		for (uint64_t at = h0; !ret && at < h1;) {
			int64_t got;

			if (p->n == p->cap && (ret = pieces_grow(p)))
				break;
			got = fs_alloc_blocks(fs, ino, at, h1, p->ne, &p->n, p->cap);
			if (got < 0)
				ret = (int)got;
			else if ((uint64_t)got < h1 && p->n < p->cap)
				ret = -ENOSPC; /* another writer took the space */
			else
				at = got;
		}
	}
	if (!ret)
		return 0;
	pieces_put(fs, p, 0);
	if (ret == -ENOSPC && tries++ == 0) {
		ret = journal_commit(&fs->j);
		if (!ret)
			goto again;
	}
	return ret;
}

static int unsupported(int err)
{
	return err == -EOPNOTSUPP || err == -ENOTTY || err == -EINVAL || err == -ENOSYS;
}

static void downgrade(struct fs *fs, unsigned mi, int from, int to, int err)
{
	static const char *const what[] = { "BLKZEROOUT", "FALLOC_FL_ZERO_RANGE",
					    "FALLOC_FL_PUNCH_HOLE" };
	const struct member *m = &fs->members[mi];
	int w = from == Z_PUNCH ? 2 : m->is_blkdev ? 0 : 1;

	if (!atomic_compare_exchange_strong(&fs->zero_how[mi], &from, to))
		return;
	if (to == Z_WRITE)
		log_info("member %u (%s): %s not supported (%s); fallocate zeroes its blocks by writing zeros",
			 mi, m->path, what[w], strerror(-err));
}

/* Write zeros over [off, off + len) of member @mi with O_DIRECT. */
static int zero_write(struct fs *fs, unsigned mi, uint64_t off, uint64_t len)
{
	struct uring_op ops[ZWRITE_OPS];

	while (len) {
		size_t n = 0;

		for (; n < ZWRITE_OPS && len; n++) {
			uint32_t l = (uint32_t)MIN(len, ZBUF);

			ops[n] = (struct uring_op){ .fd = fs->members[mi].fd, .write = 1, .buf = zbuf,
						    .len = l, .off = off, .tag = (int)mi };
			off += l;
			len -= l;
		}
		if (uring_rw(ops, n)) {
			for (size_t k = 0; k < n; k++)
				if (ops[k].res) {
					log_err("fallocate: zeroing member %u (%s) at offset %llu (+%u bytes) failed: %s",
						mi, fs->members[mi].path, (unsigned long long)ops[k].off,
						ops[k].len, strerror(-ops[k].res));
					break;
				}
			return -EIO;
		}
	}
	return 0;
}

/* Make [off, off + len) of member @mi read as zeros. Returns 0 or -EIO. */
static int zero_member(struct fs *fs, unsigned mi, uint64_t off, uint64_t len)
{
	struct member *m = &fs->members[mi];
	int ret;

	if (atomic_load(&fs->zero_how[mi]) == Z_NATIVE) {
		if (m->is_blkdev) {
			uint64_t r[2] = { off, len };

			ret = ioctl(m->fd, BLKZEROOUT, r) ? -errno : 0;
		} else {
			ret = fallocate(m->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
					(off_t)len) ? -errno : 0;
		}
		if (!ret)
			return 0;
		if (ret == -EIO || (m->is_blkdev && !unsupported(ret)))
			goto fail;
		/* an image file: ZERO_RANGE may be missing (tmpfs) or need space the host lacks */
		downgrade(fs, mi, Z_NATIVE, m->is_blkdev ? Z_WRITE : Z_PUNCH, ret);
	}
	if (atomic_load(&fs->zero_how[mi]) == Z_PUNCH) {
		ret = fallocate(m->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				(off_t)len) ? -errno : 0;
		if (!ret)
			return 0;
		if (!unsupported(ret))
			goto fail;
		downgrade(fs, mi, Z_PUNCH, Z_WRITE, ret);
	}
	return zero_write(fs, mi, off, len);
fail:
	log_err("fallocate: zeroing member %u (%s) at offset %llu (+%llu bytes) failed: %s", mi,
		m->path, (unsigned long long)off, (unsigned long long)len, strerror(-ret));
	return -EIO;
}

/* Piece @k of @p as copy @copy of it lies (the second copy of a mirror: fs_second_copy). */
static struct newext piece_copy(struct fs *fs, const struct pieces *p, size_t k, int copy)
{
	struct newext e = p->ne[k];
	unsigned m2;

	if (copy) {
		fs_second_copy(fs, e.member, e.moff, &m2, &e.moff);
		e.member = m2;
	}
	return e;
}

/*
 * Zero copy @copy of the new pieces on their members and store the checksums of zero
 * blocks for them. Pieces that follow each other on a member are zeroed as one range.
 */
static int zero_copy(struct fs *fs, const struct pieces *p, int copy)
{
	struct { uint64_t off, end; } run[FMT_MAX_MEMBERS] = { { 0, 0 } }; /* end 0: none */
	struct uring_op ops[64];
	size_t nops = 0;
	int ret = 0;

	for (size_t k = 0; k < p->n && !ret; k++) {
		const struct newext ec = piece_copy(fs, p, k, copy), *e = &ec;

		if (run[e->member].end == e->moff) {
			run[e->member].end += e->len;
			continue;
		}
		if (run[e->member].end && (ret = zero_member(fs, e->member, run[e->member].off,
							    run[e->member].end - run[e->member].off)))
			fs_member_failed(fs, e->member, "zeroing", ret); /* a mirror's: see mirror.c */
		run[e->member].off = e->moff;
		run[e->member].end = e->moff + e->len;
	}
	for (unsigned m = 0; m < fs->n && !ret; m++)
		if (run[m].end && (ret = zero_member(fs, m, run[m].off, run[m].end - run[m].off)))
			fs_member_failed(fs, m, "zeroing", ret);
	/* checksums: every new block holds zeros now */
	for (size_t k = 0; k < p->n && !ret; k++) {
		const struct newext ec = piece_copy(fs, p, k, copy), *e = &ec;

		for (uint32_t o = 0; o < e->len && !ret; o += ZBUF) {
			ops[nops++] = (struct uring_op){ .fd = fs->members[e->member].fd, .buf = zbuf,
							 .len = MIN(e->len - o, ZBUF),
							 .off = e->moff + o, .tag = (int)e->member };
			if (nops == sizeof(ops) / sizeof(ops[0])) {
				ret = fs_csum_store(fs, ops, nops);
				nops = 0;
			}
		}
	}
	if (!ret && nops)
		ret = fs_csum_store(fs, ops, nops);
	return ret;
}

/* Zero the new pieces, both copies of a mirror; a member that fails then fails. */
static int zero_pieces(struct fs *fs, const struct pieces *p)
{
	int ret = 0;

	for (int copy = 0; copy < (fs->mirror ? 2 : 1) && !ret; copy++)
		ret = zero_copy(fs, p, copy);
	return ret;
}

/* Log the INODE record of a change by fallocate; @size: the new size. Locked (fs_begin). */
static int log_touch(struct fs *fs, struct inode *ino, uint64_t size)
{
	struct fmt_rec r;

	/* as file_modified() in the kernel's own fallocate: times change (privileges went
	 * first, fs_killpriv) */
	meta_inode_rec(ino, &r);
	r.a.size = size;
	r.a.mtime = r.a.ctime = fs_now();
	return journal_log(&fs->j, &r);
}

/*
 * Log the EXTENT records of @p and then the INODE record (size @size), in chunks; *logged
 * counts the pieces in the map. The blocks are fresh for the epoch their records went
 * into. Caller holds iolock exclusively.
 */
static int log_pieces(struct fs *fs, struct inode *ino, const struct pieces *p, uint64_t size,
		      size_t *logged)
{
	size_t i = 0;
	int ret = 0;

	do {
		size_t k = MIN(p->n - i, LOG_CHUNK);
		uint64_t epoch;

		ret = fs_begin(fs, 256 + k * 64, 1);
		if (ret)
			return ret;
		epoch = atomic_load(&fs->j.epoch);
		for (size_t j = i; j < i + k && !ret; j++) {
			const struct newext *e = &p->ne[j];
			struct fmt_rec r = { .type = REC_EXTENT, .ino = ino->ino, .off = e->off,
					     .len = e->len, .member = e->member, .moff = e->moff };

			ret = journal_log(&fs->j, &r);
			if (!ret) {
				*logged = j + 1;
				fs_fresh_add(ino, e->off, e->off + e->len, epoch);
			}
		}
		i += k;
		if (!ret && i == p->n)
			ret = log_touch(fs, ino, size);
		fs_end(fs);
	} while (!ret && i < p->n);
	return ret;
}

/* Take back a reservation that failed half way: unmap the logged pieces, free the rest. */
static void unreserve(struct fs *fs, struct inode *ino, struct pieces *p, size_t logged)
{
	int ret = 0;

	pieces_put(fs, p, logged);
	ino->fresh_lo = ino->fresh_hi = 0;
	for (size_t i = 0; i < logged && !ret; i += LOG_CHUNK) {
		ret = fs_begin(fs, 256 + LOG_CHUNK * 64, 0);
		if (ret)
			break;
		for (size_t j = i; !ret && j < MIN(logged, i + LOG_CHUNK); j++) {
			struct fmt_rec r = { .type = REC_PUNCH, .ino = ino->ino, .off = p->ne[j].off,
					     .plen = p->ne[j].len };

			ret = journal_log(&fs->j, &r);
		}
		fs_end(fs);
	}
	if (ret)
		log_err("fallocate of inode %llu failed and its blocks could not be released (%s); they stay mapped as zeros",
			(unsigned long long)ino->ino, strerror(-ret));
	else if (logged)
		journal_commit(&fs->j); /* so that the space is free again now */
}

static int fallocate_reserve(struct fs *fs, struct inode *ino, int keep, uint64_t off,
			     uint64_t len)
{
	struct pieces p = { NULL, 0, 0 };
	size_t logged = 0;
	uint64_t from;
	int ret;

	dm_rwlock_wrlock(&ino->iolock);
	from = MIN(off, ino->a.size);
	ret = reserve(fs, ino, ALIGN_DOWN(off, DMAFS_BLOCK), ALIGN_UP(off + len, DMAFS_BLOCK), &p);
	if (!ret && p.n)
		ret = zero_pieces(fs, &p);
	if (!ret)
		ret = log_pieces(fs, ino, &p, keep ? ino->a.size : MAX(ino->a.size, off + len),
				 &logged);
	if (ret)
		unreserve(fs, ino, &p, logged);
	/* holes became zeroed blocks and the size may have grown: the same bytes, but the
	 * warm tier lets go of the range rather than reason about it */
	tier_invalidate(fs->tier, ino, from, off + len);
	dm_rwlock_unlock(&ino->iolock);
	free(p.ne);
	return ret;
}

/*
 * Punch, and zero range: whole blocks inside the range are unmapped (a PUNCH record; their
 * space is reusable once it is durable, as for truncate), and the bytes of partial blocks
 * that lie before the end of file are overwritten with zeros by an ordinary write. Bytes
 * past the end of file are zeros on disk already, so a zero range that extends the file
 * (@newsize larger than its size) only changes the size, at the end.
 */
static int fallocate_punch(struct fs *fs, struct inode *ino, uint64_t off, uint64_t len,
			   uint64_t newsize)
{
	uint64_t end = off + len, a = ALIGN_UP(off, DMAFS_BLOCK), b = ALIGN_DOWN(end, DMAFS_BLOCK);
	uint64_t part[2][2], size;
	int np = 0, ret;

	dm_rwlock_wrlock(&ino->iolock);
	ret = fs_begin(fs, 512, 0);
	if (ret)
		goto out;
	if (a < b && mapped(ino, a, b)) {
		struct fmt_rec r = { .type = REC_PUNCH, .ino = ino->ino, .off = a, .plen = b - a };

		ret = journal_log(&fs->j, &r);
		/* in-place rewrites need mapped blocks: keep the larger fresh part outside */
		if (!ret && ino->fresh_lo < b && ino->fresh_hi > a) {
			uint64_t left = a > ino->fresh_lo ? a - ino->fresh_lo : 0;
			uint64_t right = ino->fresh_hi > b ? ino->fresh_hi - b : 0;

			if (left >= right)
				ino->fresh_hi = ino->fresh_lo + left;
			else
				ino->fresh_lo = b;
		}
	}
	size = ino->a.size;
	if (!ret)
		ret = log_touch(fs, ino, size);
	fs_end(fs);
	/* the partial blocks' zeros go through fs_write, which lets go of them again */
	tier_invalidate(fs->tier, ino, off, end);
	if (ret)
		goto out;
	/* the partial head block, and the partial tail block when it is another one */
	if (off % DMAFS_BLOCK) {
		uint64_t blk = ALIGN_DOWN(off, DMAFS_BLOCK);

		part[np][0] = off;
		part[np][1] = MIN(MIN(end, blk + DMAFS_BLOCK), size);
		if (part[np][0] < part[np][1] && mapped(ino, blk, blk + DMAFS_BLOCK))
			np++;
	}
	if (end % DMAFS_BLOCK && (off % DMAFS_BLOCK == 0 || b != ALIGN_DOWN(off, DMAFS_BLOCK))) {
		part[np][0] = MAX(b, off);
		part[np][1] = MIN(end, size);
		if (part[np][0] < part[np][1] && mapped(ino, b, b + DMAFS_BLOCK))
			np++;
	}
out:
	dm_rwlock_unlock(&ino->iolock);
	/*
	 * The zeros go through fs_write, which takes iolock itself: the kernel holds the
	 * inode lock across the whole request, so no write or truncate from the mount slips
	 * in between.
	 */
	for (int k = 0; k < np && !ret; k++) {
		ssize_t n = fs_write(fs, ino->ino, zbuf, part[k][1] - part[k][0], part[k][0]);

		if (n >= 0 && (uint64_t)n != part[k][1] - part[k][0])
			n = -ENOSPC;
		if (n < 0)
			ret = (int)n;
	}
	/* the zeroed bytes go through write-behind: on the members first */
	if (!ret)
		ret = wback_wait(fs, ino, 1);
	if (!ret && newsize) {
		ret = fs_begin(fs, 256, 0);
		if (!ret) {
			if (newsize > ino->a.size)
				ret = log_touch(fs, ino, newsize);
			fs_end(fs);
		}
	}
	return ret;
}

int fs_fallocate(struct fs *fs, const struct fs_ctx *c, uint64_t ino_nr, int mode, uint64_t off,
		 uint64_t len)
{
	struct inode *ino;
	int ret;

	if (fs->ro)
		return -EROFS;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	/* as vfs_fallocate(): a punch never changes the size, and zeroes nothing more */
	if ((mode & FALLOC_FL_PUNCH_HOLE) &&
	    (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
		return -EOPNOTSUPP;
	if (len == 0 || off > INT64_MAX || len > INT64_MAX)
		return -EINVAL;
	if (off + len > (1ull << 60))
		return -EFBIG;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	if (S_ISDIR(ino->a.mode))
		return -EISDIR;
	if (!S_ISREG(ino->a.mode))
		return -ENODEV;
	/* vfs_fallocate(): nothing on an immutable file, only reservations on an append-only */
	if (fs_immutable(ino) || (fs_append(ino) && (mode & ~FALLOC_FL_KEEP_SIZE)))
		return -EPERM;
	/* as file_modified() in xfs_file_fallocate(), whatever the mode */
	ret = c ? fs_killpriv(fs, c, ino_nr) : 0;
	if (ret)
		return ret;
	/* what write-behind holds of the file lands first: the extent map is then complete */
	wback_wait(fs, ino, 0);
	/*
	 * A zero range is a punch, which may then extend the file: there are no unwritten
	 * extents, and reserving zeroed blocks would cost writes while guaranteeing nothing,
	 * since an overwrite of committed blocks needs new space anyway (copy on write).
	 */
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return fallocate_punch(fs, ino, off, len,
				       (mode & FALLOC_FL_KEEP_SIZE) ? 0 : off + len);
	return fallocate_reserve(fs, ino, mode & FALLOC_FL_KEEP_SIZE, off, len);
}
