// SPDX-License-Identifier: MIT
/*
 * fsck-scrub.c - dmafs-fsck --scrub: every block of every file read and checked against
 * its checksum, and whole blocks past the end of file checked to hold zeros. On a mirror
 * both copies are read: a block whose one copy is bad (or unreadable) and the other good
 * is reported, and with --repair the bad copy is rewritten from the good one, checksums
 * with it; a block with no good copy is damaged data, as on a single-copy filesystem.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "fsck.h"
#include "io/uring.h"
#include "tool.h"

#define SCRUB_CHUNK (4u << 20)

static uint64_t scrub_total, scrub_done;
static uint64_t scrub_t0, scrub_drawn; /* monotonic ns: start, last redraw */
static int written[FMT_MAX_MEMBERS];   /* members a repair wrote: flushed at the end */

/* The bar, on a terminal only, redrawn at most five times a second. */
static void progress(void)
{
	uint64_t now;

	if (!tty || !scrub_total)
		return;
	now = dm_mono_ns();
	if (now - scrub_drawn < 200000000u && scrub_done < scrub_total)
		return;
	scrub_drawn = now;
	tool_progress("scrub", scrub_done, scrub_total, (now - scrub_t0) / 1e9, 0);
}

/* One copy of a chunk of an extent: where it lies, its bytes and its checksum blocks. */
struct copy {
	unsigned m;
	uint64_t moff, p0, ca, cb;
	char *buf, *cbuf;
	int err;	/* the read failed: -errno */
	int cdirty;	/* cbuf changed by a repair: to be written back */
};

/* Read @len bytes of copy @c and their checksum blocks; c->err says how it went. */
static void read_copy(struct copy *c, uint32_t len)
{
	const struct fmt_sb *sb = &ms[c->m].sb;

	c->p0 = fmt_csum_pos(sb, c->moff);
	c->ca = ALIGN_DOWN(c->p0, DMAFS_BLOCK);
	c->cb = ALIGN_UP(fmt_csum_pos(sb, c->moff + len), DMAFS_BLOCK);
	c->cdirty = 0;
	struct uring_op op[2] = {
		{ .fd = ms[c->m].fd, .buf = c->buf, .len = len, .off = c->moff, .tag = (int)c->m },
		{ .fd = ms[c->m].fd, .buf = c->cbuf, .len = (uint32_t)(c->cb - c->ca), .off = c->ca,
		  .tag = (int)c->m },
	};

	c->err = uring_rw(op, 2) ? (op[0].res ? op[0].res : op[1].res) : 0;
}

static uint8_t *csum_at(const struct copy *c, uint32_t b)
{
	return (uint8_t *)c->cbuf + (c->p0 - c->ca) + b / DMAFS_BLOCK * 8;
}

/* Does block @b (byte offset in the chunk) of copy @c match its checksum? */
static int block_ok(const struct copy *c, uint32_t b)
{
	return !c->err && fmt_csum(c->buf + b, c->m, c->moff + b) == get_u64(csum_at(c, b));
}

static int all_zero(const char *p, size_t len)
{
	return len == 0 || (p[0] == 0 && !memcmp(p, p + 1, len - 1));
}

/* Rewrite blocks [b, b + len) of copy @bad from copy @good, their checksums in bad->cbuf. */
static int rewrite(struct copy *bad, const struct copy *good, uint32_t b, uint32_t len)
{
	int ret;

	if (bad->err) /* its checksum blocks were not read: the others there are unknown */
		return bad->err;
	ret = member_pwrite(&ms[bad->m], good->buf + b, len, bad->moff + b);
	if (ret)
		return ret;
	for (uint32_t k = b; k < b + len; k += DMAFS_BLOCK)
		put_u64(csum_at(bad, k), fmt_csum(good->buf + k, bad->m, bad->moff + k));
	bad->cdirty = 1;
	written[bad->m] = 1;
	return 0;
}

/* The blocks [b, b + len) of a chunk at file offset @foff of inode @ino, in state @kind. */
enum { K_OK, K_DAMAGED, K_BAD0, K_BAD1, K_NOTZERO };

static void report(const struct inode *i, uint64_t foff, int kind, struct copy *c, int nc,
		   uint32_t b, uint32_t len)
{
	char pb[4096];

	if (kind == K_DAMAGED) {
		problem(FIX_NONE, "", "%s: damaged data (checksum mismatch%s) at file offset %llu (+%u bytes) on member %u (%s) offset %llu%s; reads there fail with EIO: restore the file from its source",
			path_of(i->ino, pb, sizeof(pb)), nc > 1 ? " in both copies" : "",
			(unsigned long long)(foff + b), len, c[0].m, ms[c[0].m].path,
			(unsigned long long)(c[0].moff + b), nc > 1 ? " and its second copy" : "");
	} else if (kind == K_NOTZERO) {
		problem(FIX_NONE, "", "%s: blocks past the end of file (size %llu) at file offset %llu (+%u bytes) on member %u (%s) offset %llu are not zeros; extending the file would expose them",
			path_of(i->ino, pb, sizeof(pb)), (unsigned long long)i->a.size,
			(unsigned long long)(foff + b), len, c[0].m, ms[c[0].m].path,
			(unsigned long long)(c[0].moff + b));
	} else {
		struct copy *bad = &c[kind == K_BAD0 ? 0 : 1], *good = &c[kind == K_BAD0 ? 1 : 0];
		int fix = fixes(FIX_ANY);

		if (fix && rewrite(bad, good, b, len)) {
			problem(FIX_NONE, "", "%s: %s copy of file offset %llu (+%u bytes) on member %u (%s) offset %llu is bad and could not be rewritten from the good copy on member %u",
				path_of(i->ino, pb, sizeof(pb)), bad == c ? "the first" : "the second",
				(unsigned long long)(foff + b), len, bad->m, ms[bad->m].path,
				(unsigned long long)(bad->moff + b), good->m);
			return;
		}
		problem(FIX_ANY, "; rewritten from the good copy", "%s: %s copy of file offset %llu (+%u bytes) on member %u (%s) offset %llu is %s; the copy on member %u is good",
			path_of(i->ino, pb, sizeof(pb)), bad == c ? "the first" : "the second",
			(unsigned long long)(foff + b), len, bad->m, ms[bad->m].path,
			(unsigned long long)(bad->moff + b),
			bad->err ? "unreadable" : "damaged (checksum mismatch)", good->m);
	}
}

/*
 * Check one chunk (@len bytes at extent offset @o of @e): each block's state, runs of
 * the same state reported (and repaired) together.
 */
static void scrub_chunk(const struct inode *i, const struct extent *e, uint64_t o, uint32_t len,
			struct copy *c, int nc)
{
	uint64_t keep = ALIGN_UP(i->a.size, DMAFS_BLOCK), foff = e->off + o;
	uint32_t from = 0;
	int run = K_OK;

	c[0].m = e->member;
	c[0].moff = e->moff + o;
	if (nc > 1) {
		uint64_t doff[FMT_MAX_MEMBERS];

		for (unsigned k = 0; k < ms[0].sb.member_count; k++)
			doff[k] = ms[k].sb.data_offset;
		fmt_mirror_of(doff, ms[0].sb.member_count, ms[0].sb.mirror_half, e->member,
			      c[0].moff, &c[1].m, &c[1].moff);
	}
	for (int k = 0; k < nc; k++)
		read_copy(&c[k], len);
	if (nc == 1 && c[0].err) {
		char pb[4096];

		problem(FIX_NONE, "", "%s: unreadable data or checksums at file offset %llu (+%u bytes) on member %u (%s) offset %llu: %s",
			path_of(i->ino, pb, sizeof(pb)), (unsigned long long)foff, len, c[0].m,
			ms[c[0].m].path, (unsigned long long)c[0].moff, strerror(-c[0].err));
		return;
	}
	for (uint32_t b = 0; b <= len; b += DMAFS_BLOCK) {
		int kind = K_OK;

		if (b < len) {
			int ok0 = block_ok(&c[0], b), ok1 = nc > 1 && block_ok(&c[1], b);
			const struct copy *g = ok0 ? &c[0] : &c[1];

			if (!ok0 && !ok1)
				kind = K_DAMAGED;
			else if (nc > 1 && ok0 != ok1)
				kind = ok0 ? K_BAD1 : K_BAD0;
			else if (foff + b >= keep && !all_zero(g->buf + b, DMAFS_BLOCK))
				kind = K_NOTZERO;
		}
		if (kind == run)
			continue;
		if (run != K_OK)
			report(i, foff, run, c, nc, from, b - from);
		run = kind;
		from = b;
	}
	for (int k = 0; k < nc; k++)
		if (c[k].cdirty && member_pwrite(&ms[c[k].m], c[k].cbuf, c[k].cb - c[k].ca, c[k].ca))
			printf("dmafs-fsck: member %u (%s): writing repaired checksums at offset %llu failed\n",
			       c[k].m, ms[c[k].m].path, (unsigned long long)c[k].ca);
}

static int scrub_inode(struct inode *i, void *arg)
{
	struct copy *c = arg;
	int nc = fmt_is_mirror(&ms[0].sb) ? 2 : 1;

	for (size_t k = 0; k < i->next; k++) {
		const struct extent *e = &i->ext[k];

		for (uint64_t o = 0; o < e->len; o += SCRUB_CHUNK) {
			uint32_t len = (uint32_t)MIN(SCRUB_CHUNK, e->len - o);

			scrub_chunk(i, e, o, len, c, nc);
			scrub_done += len;
			progress();
		}
	}
	return 0;
}

static int count_bytes(struct inode *i, void *arg)
{
	(void)arg;
	for (size_t k = 0; k < i->next; k++)
		scrub_total += i->ext[k].len;
	return 0;
}

int scrub_all(void)
{
	/* a chunk's checksums take 8 bytes per block: 8 KiB, in at most 4 blocks */
	size_t one = SCRUB_CHUNK + 4 * DMAFS_BLOCK;
	char *mem = util_aligned_alloc(2 * one);
	struct copy c[2];
	int mirror = fmt_is_mirror(&ms[0].sb);

	if (!mem)
		return -ENOMEM;
	for (int k = 0; k < 2; k++)
		c[k] = (struct copy){ .buf = mem + k * one, .cbuf = mem + k * one + SCRUB_CHUNK };
	meta_for_each(&meta, count_bytes, NULL);
	if (!quiet)
		printf("dmafs-fsck: scrub: reading and verifying %.2f GiB of file data%s\n",
		       scrub_total / 1073741824.0, mirror ? " (both copies)" : "");
	scrub_t0 = dm_mono_ns();
	meta_for_each(&meta, scrub_inode, c);
	if (tty && scrub_total)
		tool_progress("scrub", scrub_done, scrub_total, (dm_mono_ns() - scrub_t0) / 1e9, 1);
	for (unsigned m = 0; m < FMT_MAX_MEMBERS; m++)
		if (written[m] && fdatasync(ms[m].fd))
			printf("dmafs-fsck: member %u (%s): flushing the repairs failed: %s\n", m,
			       ms[m].path, strerror(errno));
	free(mem);
	return 0;
}
