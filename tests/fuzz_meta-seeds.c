// SPDX-License-Identifier: MIT
/*
 * fuzz_meta-seeds.c - the inputs fuzz_meta starts from: the built-in images (made with the
 * format's encoders and meta_snapshot) and the regression inputs, each of which must stop
 * at a given stage of the mount.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/format.h"
#include "store/journal.h"
#include "io/member.h"
#include "store/meta.h"
#include "util/util.h"

#include "fuzz_meta.h"

/* ---------------------------------------------------------------- seeds */

struct builder {
	struct img *im;
	struct buf b;
	uint64_t cur[MAXM]; /* next free byte of each member's data region */
	uint32_t su;
};

static void enc(struct builder *s, const struct fmt_rec *r)
{
	if (fmt_rec_encode(&s->b, r)) {
		fprintf(stderr, "fuzz_meta: a seed record does not encode\n");
		exit(2);
	}
}

static void b_inode(struct builder *s, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t size,
		    uint32_t start)
{
	struct fmt_rec r = { .type = REC_INODE, .ino = ino };

	r.a.mode = mode;
	r.a.nlink = nlink;
	r.a.size = size;
	r.a.uid = 1000;
	r.a.gid = 1000;
	r.a.start_member = start;
	r.a.atime = r.a.mtime = r.a.ctime = 1700000000000000000ll + (int64_t)ino;
	if (S_ISCHR(mode) || S_ISBLK(mode))
		r.a.rdev = 0x0801;
	enc(s, &r);
}

static void b_named(struct builder *s, uint16_t type, uint64_t ino, uint64_t dir, const char *name)
{
	struct fmt_rec r = { .type = type, .ino = ino, .dir = dir };

	r.name = (const uint8_t *)name;
	r.name_len = strlen(name);
	enc(s, &r);
}

static void b_xset(struct builder *s, uint64_t ino, const char *name, const void *val, size_t len)
{
	struct fmt_rec r = { .type = REC_XSET, .ino = ino };

	r.name = (const uint8_t *)name;
	r.name_len = strlen(name);
	r.val = val;
	r.val_len = len;
	enc(s, &r);
}

static void b_op(struct builder *s, uint16_t type, uint64_t ino, uint64_t off, uint64_t len)
{
	struct fmt_rec r = { .type = type, .ino = ino, .off = off, .plen = len };

	enc(s, &r);
}

/* Extents for bytes [from, from + len) of a file, on the members its stripe units go to. */
static void b_data(struct builder *s, uint64_t ino, uint32_t start, uint64_t from, uint64_t len)
{
	for (uint64_t off = from; off < from + len;) {
		uint64_t piece = MIN(s->su - off % s->su, from + len - off);
		struct fmt_rec r = { .type = REC_EXTENT, .ino = ino, .off = off };

		r.len = (uint32_t)piece;
		r.member = (start + off / s->su) % s->im->n;
		r.moff = s->cur[r.member];
		s->cur[r.member] += piece;
		enc(s, &r);
		off += piece;
	}
}

/* The records built so far into @l; the builder starts a new list. */
static void b_take(struct builder *s, struct rlist *l)
{
	rl_from(l, s->b.p, s->b.len);
	s->b.len = 0;
}

static void b_batch(struct builder *s, struct half *h)
{
	struct batch *b = &h->b[h->nb];

	memset(b, 0, sizeof(*b));
	b->gen = h->gen;
	b->seq = h->first_seq + h->nb;
	b_take(s, &b->recs);
	h->nb++;
}

static void b_start(struct builder *s, struct img *im, unsigned n, uint32_t su, uint64_t half)
{
	memset(im, 0, sizeof(*im));
	memset(s, 0, sizeof(*s));
	s->im = im;
	s->su = su;
	im->n = n;
	im->half = half;
	for (unsigned i = 0; i < n; i++) {
		struct fmt_sb *sb = &im->sb[i][0];

		im->fsize[i] = (64ull << 20) + i * (8ull << 20);
		sb->version = FMT_VERSION;
		sb->member_index = i;
		sb->member_count = n;
		sb->stripe_unit = su;
		sb->block_size = DMAFS_BLOCK;
		memcpy(sb->fs_uuid, fs_uuid, 16);
		for (unsigned k = 0; k < n; k++)
			memset(sb->member_uuid[k], 0x10 + k, 16);
		strcpy(sb->label, "fuzz");
		sb->mkfs_time = 1700000000;
		if (fmt_sb_geometry(sb, im->fsize[i], half)) {
			fprintf(stderr, "fuzz_meta: seed geometry does not fit\n");
			exit(2);
		}
		im->sb[i][1] = *sb;
		s->cur[i] = sb->data_offset;
	}
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++)
			im->log[c][h].b = xrealloc(NULL, MAXBATCH * sizeof(struct batch));
}

static void b_half(struct half *h, uint64_t gen, uint64_t first_seq, uint64_t next_ino)
{
	h->present = 1;
	h->gen = gen;
	h->first_seq = first_seq;
	h->next_ino = next_ino;
}

/* Copy 0 to copy 1: the mirror on member 1. */
static void b_finish(struct builder *s)
{
	struct img *im = s->im;

	for (int h = 0; h < 2; h++) {
		half_free(&im->log[1][h]);
		half_clone(&im->log[1][h], &im->log[0][h]);
	}
	buf_free(&s->b);
}

/* A populated tree: directories, files over several stripe units, a symlink, special files. */
static void b_tree(struct builder *s)
{
	static uint8_t big[65536];
	char long_name[FMT_NAME_MAX + 1], target[FMT_SYMLINK_MAX + 1];

	memset(long_name, 'n', FMT_NAME_MAX);
	long_name[FMT_NAME_MAX] = 0;
	memset(target, 't', FMT_SYMLINK_MAX);
	target[FMT_SYMLINK_MAX] = 0;
	memset(big, 0x5a, sizeof(big));
	b_inode(s, 1, S_IFDIR | 0755, 4, 0, 0);
	b_inode(s, 2, S_IFDIR | 0755, 3, 0, 0);
	b_inode(s, 3, S_IFREG | 0644, 2, 5 * s->su / 2, 1 % s->im->n);
	b_data(s, 3, 1 % s->im->n, 0, ALIGN_UP(5 * s->su / 2, DMAFS_BLOCK));
	b_xset(s, 3, "user.k", "value", 5);
	b_xset(s, 3, "user.empty", "", 0);
	b_inode(s, 4, S_IFLNK | 0777, 1, 9, 0);
	b_named(s, REC_SYMLINK, 4, 0, "../w.bin");
	b_inode(s, 5, S_IFIFO | 0600, 1, 0, 0);
	b_inode(s, 6, S_IFCHR | 0600, 1, 0, 0);
	b_inode(s, 7, S_IFDIR | 0700, 2, 0, 0);
	b_xset(s, 7, "user.big", big, sizeof(big));
	b_inode(s, 8, S_IFLNK | 0777, 1, FMT_SYMLINK_MAX, 0);
	b_named(s, REC_SYMLINK, 8, 0, target);
	b_inode(s, 9, S_IFREG | 0600, 1, 3 * DMAFS_BLOCK, 0);
	/* a sparse file: a hole, then one block, a hole, then two */
	b_data(s, 9, 0, DMAFS_BLOCK, DMAFS_BLOCK);
	b_data(s, 9, 0, s->su + DMAFS_BLOCK, 2 * DMAFS_BLOCK);
	b_named(s, REC_LINK, 2, 1, "models");
	b_named(s, REC_LINK, 3, 2, "w.bin");
	b_named(s, REC_LINK, 3, 1, "hard");
	b_named(s, REC_LINK, 4, 1, "sym");
	b_named(s, REC_LINK, 5, 2, "fifo");
	b_named(s, REC_LINK, 6, 2, "tty");
	b_named(s, REC_LINK, 7, 1, "deep");
	b_named(s, REC_LINK, 8, 7, long_name);
	b_named(s, REC_LINK, 9, 7, "sparse");
}

/* The changes a live daemon logs: create, write, overwrite, truncate, rename, unlink. */
static void b_changes(struct builder *s, struct half *h, uint64_t base)
{
	b_inode(s, base, S_IFREG | 0644, 1, 0, 0);
	b_named(s, REC_LINK, base, 2, "new");
	b_batch(s, h);
	b_data(s, base, 0, 0, 2 * s->su);
	b_inode(s, base, S_IFREG | 0644, 1, 2 * s->su, 0);
	b_batch(s, h);
	/* an overwrite of blocks 1-2: PUNCH, then their new copies (copy on write) */
	b_op(s, REC_PUNCH, base, DMAFS_BLOCK, 2 * DMAFS_BLOCK);
	b_data(s, base, 0, DMAFS_BLOCK, 2 * DMAFS_BLOCK);
	b_xset(s, base, "user.k", "1", 1);
	b_batch(s, h);
	b_op(s, REC_TRUNC, base, s->su + 5000, 0);
	b_inode(s, base, S_IFREG | 0644, 1, s->su + 5000, 0);
	b_named(s, REC_XDEL, base, 0, "user.k");
	b_batch(s, h);
	/* rename models/new to renamed */
	b_named(s, REC_UNLINK, 0, 2, "new");
	b_named(s, REC_LINK, base, 1, "renamed");
	b_batch(s, h);
	/* unlink sym: nlink 0, then the inode goes */
	b_named(s, REC_UNLINK, 0, 1, "sym");
	b_inode(s, 4, S_IFLNK | 0777, 0, 9, 0);
	b_op(s, REC_IDEL, 4, 0, 0);
	b_batch(s, h);
}

static void replay_into(struct meta *m, const struct half *h)
{
	uint8_t *p;
	size_t len, pos;
	struct fmt_rec r;

	for (size_t i = 0; i <= h->nb; i++) {
		const struct rlist *l = i ? &h->b[i - 1].recs : &h->snap;

		len = rl_bytes(l);
		p = xrealloc(NULL, len);
		rl_encode(l, p, len);
		pos = 0;
		while (fmt_rec_decode(p, len, &pos, &r) > 0)
			if (meta_apply(m, &r)) {
				fprintf(stderr, "fuzz_meta: a seed record does not apply\n");
				exit(2);
			}
		free(p);
	}
}

struct img seeds[8];
size_t nseeds;

void make_seeds(void)
{
	struct builder s;
	struct img *im;
	struct meta m;
	struct buf snap = { 0 };

	memset(fs_uuid, 0xa5, 16);
	/* what mkfs.dmafs writes: the root directory, on 1 and on 3 members */
	for (unsigned n = 1; n <= 3; n += 2) {
		im = &seeds[nseeds++];
		b_start(&s, im, n, 1u << 20, 1u << 20);
		b_inode(&s, 1, S_IFDIR | 0755, 2, 0, 0);
		b_half(&im->log[0][0], 1, 1, 2);
		b_take(&s, &im->log[0][0].snap);
		b_finish(&s);
	}
	/* a tree, then batches of changes; the smallest stripe unit */
	im = &seeds[nseeds++];
	b_start(&s, im, 2, 64u << 10, 1u << 20);
	b_tree(&s);
	b_half(&im->log[0][0], 3, 7, 10);
	b_take(&s, &im->log[0][0].snap);
	b_changes(&s, &im->log[0][0], 10);
	b_finish(&s);
	/* half A an older generation, half B its compaction plus batches (3 members) */
	im = &seeds[nseeds++];
	b_start(&s, im, 3, 1u << 20, 1u << 20);
	b_tree(&s);
	b_half(&im->log[0][0], 4, 10, 10);
	b_take(&s, &im->log[0][0].snap);
	b_changes(&s, &im->log[0][0], 10);
	if (meta_init(&m, s.su, 3))
		exit(2);
	replay_into(&m, &im->log[0][0]);
	if (meta_snapshot(&m, &snap))
		exit(2);
	meta_destroy(&m);
	b_half(&im->log[0][1], 5, 10 + im->log[0][0].nb, 11);
	rl_from(&im->log[0][1].snap, snap.p, snap.len);
	buf_free(&snap);
	b_inode(&s, 11, S_IFDIR | 0755, 2, 0, 0);
	b_named(&s, REC_LINK, 11, 1, "later");
	b_batch(&s, &im->log[0][1]);
	b_data(&s, 9, 0, 2 * s.su, DMAFS_BLOCK);
	b_batch(&s, &im->log[0][1]);
	b_finish(&s);
	/* many small batches, 4 members, the log half mkfs.dmafs gives 64 MiB members */
	im = &seeds[nseeds++];
	b_start(&s, im, 4, 64u << 10, fmt_log_half_for(64ull << 20));
	b_inode(&s, 1, S_IFDIR | 0755, 2, 0, 0);
	b_half(&im->log[0][0], 2, 1, 2);
	b_take(&s, &im->log[0][0].snap);
	for (uint64_t i = 0; i < 60; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%llu", (unsigned long long)i);
		b_inode(&s, 2 + i, S_IFREG | 0644, 1, DMAFS_BLOCK, i % 4);
		b_named(&s, REC_LINK, 2 + i, 1, name);
		b_data(&s, 2 + i, i % 4, 0, DMAFS_BLOCK);
		b_batch(&s, &im->log[0][0]);
	}
	b_finish(&s);
	/* what a crash leaves: an orphan (nlink 0, data, no entry) and an entry whose inode
	 * record was lost, for meta_cleanup */
	im = &seeds[nseeds++];
	b_start(&s, im, 2, 64u << 10, 1u << 20);
	b_tree(&s);
	b_inode(&s, 20, S_IFREG | 0644, 0, 3 * DMAFS_BLOCK, 1);
	b_data(&s, 20, 1, 0, 3 * DMAFS_BLOCK);
	b_named(&s, REC_LINK, 21, 2, "lost");
	b_half(&im->log[0][0], 9, 1, 22);
	b_take(&s, &im->log[0][0].snap);
	b_finish(&s);
	donors = seeds;
	ndonors = nseeds;
}

/* ---------------------------------------------------------------- regression inputs */

/* Records built by @fn appended to list @l of image @im. */
static void append(struct img *im, struct rlist *l, void (*fn)(struct builder *))
{
	struct builder s;
	struct rlist add = { 0 };

	memset(&s, 0, sizeof(s));
	s.im = im;
	s.su = im->sb[0][0].stripe_unit;
	for (unsigned i = 0; i < im->n; i++)
		s.cur[i] = im->sb[i][0].data_offset + (32ull << 20);
	fn(&s);
	b_take(&s, &add);
	buf_free(&s.b);
	for (size_t i = 0; i < add.n; i++)
		rl_insert(l, l->n, &add.r[i]);
	rl_free(&add);
}

static void both_sb(struct img *im, unsigned i, void (*fn)(struct fmt_sb *))
{
	fn(&im->sb[i][0]);
	fn(&im->sb[i][1]);
}

static void sync_copies(struct img *im)
{
	for (int h = 0; h < 2; h++) {
		half_free(&im->log[1][h]);
		half_clone(&im->log[1][h], &im->log[0][h]);
	}
}

static void csum_at_end(struct fmt_sb *sb) { sb->csum_offset = sb->member_size; }
static void half_wraps(struct fmt_sb *sb) { sb->log_half = 1ull << 63; }
static void data_at_zero(struct fmt_sb *sb) { sb->data_offset = 0; }
static void half_8m(struct fmt_sb *sb) { fmt_sb_geometry(sb, sb->member_size, 8ull << 20); }
static void ino_max(struct builder *s) { b_inode(s, UINT64_MAX, S_IFREG | 0644, 1, 0, 0); }
static void link_orphan(struct builder *s) { b_named(s, REC_LINK, 20, 2, "still-named"); }
static void punch_empty(struct builder *s)
{
	b_inode(s, 30, S_IFREG | 0644, 1, 0, 0);
	b_op(s, REC_PUNCH, 30, 0, DMAFS_BLOCK);
}

/* The last block a u64 file offset can address: off + len wraps to 0. */
static void ext_wraps(struct builder *s)
{
	struct fmt_rec r = { .type = REC_EXTENT, .ino = 30, .off = 0 - (uint64_t)DMAFS_BLOCK };

	b_inode(s, 30, S_IFREG | 0644, 1, 0, 1);
	r.len = DMAFS_BLOCK;
	r.member = (1 + r.off / s->su) % s->im->n; /* the member of that stripe unit */
	r.moff = s->cur[r.member];
	enc(s, &r);
}

static void r_csum(struct img *im) { both_sb(im, 0, csum_at_end); }
static void r_half(struct img *im) { both_sb(im, 0, half_wraps); }
static void r_data0(struct img *im) { both_sb(im, 2, data_at_zero); }
static void r_geom(struct img *im) { both_sb(im, 1, half_8m); }
static void r_gen(struct img *im)
{
	im->log[0][0].gen = UINT64_MAX;
	renumber(&im->log[0][0]);
	sync_copies(im);
}
static void r_gen1(struct img *im)
{
	im->log[0][0].gen = UINT64_MAX - 1;
	renumber(&im->log[0][0]);
	sync_copies(im);
}
static void r_older(struct img *im)
{
	im->log[0][1].bad = 1;
	sync_copies(im);
}
static void r_ino(struct img *im)
{
	append(im, &im->log[0][0].snap, ino_max);
	sync_copies(im);
}
static void r_extwrap(struct img *im)
{
	append(im, &im->log[0][0].snap, ext_wraps);
	sync_copies(im);
}
static void r_orphan(struct img *im)
{
	append(im, &im->log[0][0].snap, link_orphan);
	sync_copies(im);
}
static void r_punch(struct img *im)
{
	struct half *h = &im->log[0][0];

	h->b[h->nb] = (struct batch){ h->gen, h->first_seq + h->nb, 0, 0, { 0 } };
	append(im, &h->b[h->nb++].recs, punch_empty);
	sync_copies(im);
}

/*
 * Inputs that once broke an invariant, each a seed with the edit that did it, and the stage
 * where the mount must stop now.
 */
static const struct regress {
	const char *what;
	size_t seed;
	void (*edit)(struct img *);
	int expect;
	int older;
} regressions[] = {
	{ "checksum region at the end of the member (csum_offset = member_size)", 2, r_csum, AT_MEMBERS, 0 },
	{ "log_offset + 2 * log_half wrapping (log_half = 2^63)", 2, r_half, AT_MEMBERS, 0 },
	{ "data region over the superblock of a member without log (data_offset = 0)", 1, r_data0, AT_MEMBERS, 0 },
	{ "log members with different log halves", 2, r_geom, AT_MEMBERS, 0 },
	{ "log half of generation UINT64_MAX (compaction would wrap to 0)", 5, r_gen, AT_COMPACTION, 0 },
	{ "log half of generation UINT64_MAX - 1 (compaction writes the last one)", 5, r_gen1, AT_MOUNTED, 0 },
	{ "inode number UINT64_MAX (next_ino would wrap to 0)", 2, r_ino, AT_JOURNAL, 0 },
	{ "extent whose end wraps past 2^64 (off = 2^64 - 4096)", 2, r_extwrap, AT_JOURNAL, 0 },
	{ "orphan (nlink 0) still named by a directory entry", 5, r_orphan, AT_MOUNTED, 0 },
	{ "PUNCH of a file without extents", 2, r_punch, AT_MOUNTED, 0 },
	/* not a finding: the fallback of dmafs-fsck --repair, which random inputs seldom reach */
	{ "older generation, the current one damaged in both copies", 3, r_older, AT_MOUNTED, 1 },
};

int run_regressions(void)
{
	static const char *const stage[] = { "members_open", "journal_open", "the mount checks",
					     "compaction", "mounted" };
	int failed = 0;

	for (size_t i = 0; i < sizeof(regressions) / sizeof(regressions[0]); i++) {
		const struct regress *g = &regressions[i];
		struct img im;
		int at;

		cur_what = g->what;
		img_clone(&im, &seeds[g->seed]);
		g->edit(&im);
		at = run_one(&im, 0, g->older);
		img_free(&im);
		if (at != g->expect) {
			fprintf(stderr, "fuzz_meta: regression input '%s': stopped at %s, expected %s\n",
				g->what, stage[at], stage[g->expect]);
			failed = 1;
		}
	}
	return failed;
}
