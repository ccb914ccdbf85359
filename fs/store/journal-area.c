// SPDX-License-Identifier: MIT
/*
 * journal-area.c - where the metadata log's generations are: the two log halves, or, once
 * the metadata outgrows them, two log areas taken in pieces from the data region of
 * members 0 and 1 (format version 4); the I/O that maps a generation's bytes onto them,
 * and the choice of the next place at each compaction.
 */
#include "store/journal-int.h"

#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/uring.h"

uint64_t journal_cap(const struct journal *j) { return j->ext_len ? j->ext_len : j->half; }

int journal_areas(const struct journal *j, int (*fn)(void *arg, unsigned member, uint64_t off,
						     uint64_t len), void *arg)
{
	int ret = 0;

	for (int a = 0; a < 2 && j->ext_len; a++)
		for (unsigned c = 0; c < j->ncopies; c++)
			for (uint32_t i = 0; i < j->area[a][c].n && !ret; i++)
				ret = fn(arg, c, j->area[a][c].off[i], j->area[a][c].len[i]);
	return ret;
}

/*
 * Where the snapshot and batches of a generation in @half are on log copy @c (the first
 * block unused): its log area's pieces, or the half itself as one piece.
 */
void jr_loc_of(const struct journal *j, uint64_t ext_len, const struct fmt_area area[2][2],
	       int half, unsigned c, struct fmt_area *out)
{
	if (ext_len) {
		*out = area[half][c];
	} else {
		out->n = 1;
		out->off[0] = jr_half_off(j, half);
		out->len[0] = j->half;
	}
}

/*
 * The I/O for bytes [@pos, @pos + @len) of location @loc at @buf, as ops on @fd appended
 * to @ops (room for FMT_LOG_PIECES + 1 more); returns how many were added.
 */
static size_t loc_ops(const struct fmt_area *loc, uint64_t pos, void *buf, uint64_t len, int fd,
		      int write, unsigned tag, struct uring_op *ops)
{
	uint64_t start = 0;
	size_t n = 0;

	for (uint32_t i = 0; i < loc->n && len; i++) {
		uint64_t end = start + loc->len[i];

		if (pos < end) {
			uint64_t k = MIN(len, end - pos);

			ops[n++] = (struct uring_op){ .fd = fd, .write = write, .buf = buf, .len = k,
						      .off = loc->off[i] + (pos - start), .tag = tag };
			buf = (char *)buf + k;
			pos += k;
			len -= k;
		}
		start = end;
	}
	return n;
}

/* Read @len bytes at @pos of location @loc on member @m into a fresh aligned buffer. */
int jr_read_loc_into(struct member *m, const struct fmt_area *loc, uint64_t pos, void *b,
		     uint64_t alen)
{
	struct uring_op ops[FMT_LOG_PIECES + 1];
	size_t n = loc_ops(loc, pos, b, alen, m->fd, 0, 0, ops);
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		ret = member_pread(m, ops[i].buf, ops[i].len, ops[i].off);
		alen -= ops[i].len;
	}
	if (!ret && alen) /* past the end of the location */
		ret = -EIO;
	return ret;
}

uint8_t *jr_read_loc(struct member *m, const struct fmt_area *loc, uint64_t pos, uint64_t len,
		     int *ret)
{
	uint64_t alen = ALIGN_UP(len ? len : 1, DMAFS_BLOCK);
	uint8_t *b = util_aligned_alloc(alen);

	if (!b) {
		*ret = -ENOMEM;
		return NULL;
	}
	*ret = jr_read_loc_into(m, loc, pos, b, alen);
	if (*ret) {
		free(b);
		return NULL;
	}
	return b;
}

/* Do @ops[0..@n) cover @len bytes for each copy? A write past a location's end would
 * otherwise lose its tail without a word (callers check the room first: a bug). */
static int covered(const struct journal *j, const struct uring_op *ops, size_t n, uint64_t len)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += ops[i].len;
	if (sum == len * j->ncopies)
		return 0;
	log_err("internal error: a metadata log write of %llu bytes runs past its location",
		(unsigned long long)len);
	return -EIO;
}

/* The copies still written (journal.dead); 0: none is left. */
static unsigned live_copies(const struct journal *j, int fds[2])
{
	uint64_t dead = atomic_load(&j->dead);
	unsigned k = 0;

	for (unsigned i = 0; i < j->ncopies; i++)
		if (!(dead & (1ull << i)))
			fds[k++] = j->copy[i]->fd;
	return k;
}

/* @ops (tag: the copy) less those of dead copies: their new count. */
static size_t live_ops(const struct journal *j, struct uring_op *ops, size_t n)
{
	uint64_t dead = atomic_load(&j->dead);
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (!(dead & (1ull << ops[i].tag)))
			ops[k++] = ops[i];
	return k;
}

/* fdatasync every live copy; one that fails is dropped where the filesystem allows. */
int jr_sync_copies(struct journal *j)
{
	int fds[2], ret;
	unsigned k = live_copies(j, fds);

	ret = k ? uring_fsync(fds, k) : -EIO;
	if (ret && k && j->member_failed) {
		ret = 0;
		for (unsigned i = 0; i < j->ncopies; i++)
			if (!(atomic_load(&j->dead) & (1ull << i)) && fdatasync(j->copy[i]->fd) &&
			    !journal_drop_member(j, i, -errno))
				ret = -EIO;
		if (!ret && !live_copies(j, fds))
			ret = -EIO;
	}
	return ret;
}

/* Run @ops (@n) on the live copies: a copy whose write fails is dropped where the
 * filesystem allows (journal.member_failed), and the rest go on. */
static int run_live(struct journal *j, struct uring_op *ops, size_t n)
{
	int ret;

	n = live_ops(j, ops, n);
	ret = n ? uring_rw(ops, n) : -EIO; /* no copy left: nothing can be logged */
	if (ret && n && j->member_failed) {
		int dropped = 0;

		for (size_t i = 0; i < n; i++)
			if (ops[i].res && journal_drop_member(j, (unsigned)ops[i].tag, ops[i].res))
				dropped = 1;
		if (dropped) { /* the ops of the copy left, again (the same bytes) */
			n = live_ops(j, ops, n);
			ret = n ? uring_rw(ops, n) : -EIO;
		}
	}
	return ret;
}

/* Run @ops (@n) on the live copies and fdatasync them. */
static int write_ops(struct journal *j, struct uring_op *ops, size_t n)
{
	int ret = run_live(j, ops, n);

	if (!ret)
		ret = jr_sync_copies(j);
	return ret;
}

/* Write @len bytes (aligned) at @pos of the location of @half in every copy, then
 * fdatasync them. */
int jr_write_loc(struct journal *j, int half, const void *b, size_t len, uint64_t pos)
{
	struct uring_op ops[2 * (FMT_LOG_PIECES + 1)];
	struct fmt_area loc;
	size_t n = 0;
	int ret;

	for (unsigned i = 0; i < j->ncopies; i++) {
		jr_loc_of(j, j->ext_len, j->area, half, i, &loc);
		n += loc_ops(&loc, pos, (void *)b, len, j->copy[i]->fd, 1, i, ops + n);
	}
	ret = covered(j, ops, n, len);
	return ret ? ret : write_ops(j, ops, n);
}

/* Bytes of the snapshot written at a time: the copy of a snapshot of millions of
 * files is not held whole (it would double compaction's memory). */
#define SNAP_CHUNK (8u << 20)

/*
 * Write the snapshot @p (@len bytes) from block 1 of the location of @half in every copy,
 * padded with zeros to a block and followed by a block of zeros, through an aligned
 * chunk; then fdatasync them.
 */
int jr_write_snapshot(struct journal *j, int half, const uint8_t *p, size_t len)
{
	uint64_t total = ALIGN_UP(len, DMAFS_BLOCK) + DMAFS_BLOCK, done = 0;
	size_t chunk = (size_t)MIN(total, SNAP_CHUNK);
	uint8_t *io = util_aligned_alloc(chunk);
	int ret = 0;

	if (!io)
		return -ENOMEM;
	while (done < total && !ret) {
		struct uring_op ops[2 * (FMT_LOG_PIECES + 1)];
		struct fmt_area loc;
		size_t k = (size_t)MIN(chunk, total - done), have = 0, n = 0;

		if (done < len)
			have = (size_t)MIN(k, len - done);
		memcpy(io, p + done, have);
		memset(io + have, 0, k - have);
		for (unsigned i = 0; i < j->ncopies; i++) {
			jr_loc_of(j, j->ext_len, j->area, half, i, &loc);
			n += loc_ops(&loc, DMAFS_BLOCK + done, io, k, j->copy[i]->fd, 1, i, ops + n);
		}
		ret = covered(j, ops, n, k);
		if (!ret)
			ret = run_live(j, ops, n);
		done += k;
	}
	free(io);
	if (!ret)
		ret = jr_sync_copies(j);
	return ret;
}

/* Write the header block @b of @half in every copy, then fdatasync them. */
int jr_write_hdr(struct journal *j, int half, const void *b)
{
	struct uring_op ops[2];

	for (unsigned i = 0; i < j->ncopies; i++)
		ops[i] = (struct uring_op){ .fd = j->copy[i]->fd, .write = 1, .buf = (void *)b,
					    .len = DMAFS_BLOCK, .off = jr_half_off(j, half), .tag = i };
	return write_ops(j, ops, j->ncopies);
}

/* Log areas are multiples of this: few sizes, few moves. */
#define AREA_ROUND (1ull << 20)

void jr_put_areas(struct journal *j, const struct jr_geom *g)
{
	for (int a = 0; a < 2 && g->len; a++)
		for (unsigned c = 0; c < j->ncopies; c++)
			for (uint32_t i = 0; i < g->area[a][c].n; i++)
				alloc_put(j->meta->alloc, c, g->area[a][c].off[i], g->area[a][c].len[i]);
}

/*
 * Take two log areas of @len bytes on each copy's member into @g, each in at most
 * FMT_LOG_PIECES pieces. Returns 0 or -ENOSPC/-ENOMEM (nothing kept).
 */
static int take_areas(struct journal *j, uint64_t len, struct jr_geom *g)
{
	int ret = 0;

	memset(g, 0, sizeof(*g));
	g->len = len;
	if (j->may_take && !j->may_take(j->may_take_arg, 2 * len))
		return -ENOSPC;
	for (int a = 0; a < 2 && ret >= 0; a++)
		for (unsigned c = 0; c < j->ncopies && ret >= 0; c++) {
			struct fmt_area *ar = &g->area[a][c];

			ret = alloc_get_pieces(j->meta->alloc, c, len, FMT_LOG_PIECES, ar->off, ar->len);
			ar->n = ret > 0 ? (uint32_t)ret : 0;
		}
	if (ret < 0) {
		jr_put_areas(j, g);
		return ret;
	}
	return 0;
}

void jr_geom_now(const struct journal *j, struct jr_geom *g)
{
	g->len = j->ext_len;
	memcpy(g->area, j->area, sizeof(g->area));
}

/*
 * Choose where the next generation goes, for @need bytes of snapshot (with its header
 * block and the zero block after it). Grows when the snapshot would take more than 3/4
 * of the room (so batches always have a quarter, and compactions stay rare); moves back
 * to the halves or to smaller areas when it takes less than 1/8. New areas are taken
 * here; *@g is the old geometry when nothing changes. Returns 0 or -ENOSPC (no room and
 * none to be had). Caller holds meta.lock.
 */
int jr_plan_geometry(struct journal *j, uint64_t need, struct jr_geom *g)
{
	uint64_t cap = journal_cap(j), want = ALIGN_UP(2 * need, AREA_ROUND);

	jr_geom_now(j, g);
	if (!j->meta->alloc) /* dmafs-fsck: no allocator to take or give back space */
		return need <= cap ? 0 : -ENOSPC;
	if (j->ext_len && need <= j->half / 2) {
		memset(g, 0, sizeof(*g)); /* back into the halves */
		return 0;
	}
	if (need <= cap / 4 * 3 && !(j->ext_len && need < cap / 8))
		return 0;
	if (!take_areas(j, want, g))
		return 0;
	jr_geom_now(j, g);
	if (!j->grow_failed_said) {
		char h1[32], h2[32];

		j->grow_failed_said = 1;
		log_warn("the metadata log needs two areas of %s on member 0%s, in at most %d pieces each, and there is not that much free space there (its snapshot takes %s)",
			 util_fmt_size(want, h1, sizeof(h1)), j->ncopies > 1 ? " and on member 1" : "",
			 FMT_LOG_PIECES, util_fmt_size(need, h2, sizeof(h2)));
	}
	return need <= cap ? 0 : -ENOSPC;
}

/* A log in areas needs format version 4: the superblocks say so before a header does. */
int jr_allow_areas(struct journal *j)
{
	char err[512];
	unsigned from = j->members[0].sb.version;
	int ret;

	if (from >= FMT_VERSION_GROW)
		return 0;
	ret = members_set_version(j->members, j->nmembers, FMT_VERSION_GROW, err, sizeof(err));
	if (ret) {
		log_err("%s", err);
		return ret;
	}
	log_info("on-disk format upgraded from version %u to %d (a metadata log that grows into the data region); a dmafs that reads only version %u refuses it now",
		 from, FMT_VERSION_GROW, from);
	return 0;
}
