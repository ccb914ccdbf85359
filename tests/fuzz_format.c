// SPDX-License-Identifier: MIT
/*
 * Description: fuzz target for the on-disk format decoders and the code that consumes
 * what they decode: fmt_sb_decode, fmt_loghdr_decode, fmt_txhdr_decode, a loop of
 * fmt_rec_decode, meta_apply of every decoded record into a fresh struct meta (log replay
 * of hostile records: errors, never a crash), then meta_cleanup + meta_snapshot and a
 * replay of that snapshot into a second meta (what compaction writes must replay
 * cleanly), and place_validate on a request built from the input. A crash, a sanitizer
 * report or an abort on a broken invariant is a finding.
 *
 * Input: byte 0 = mode flags, the rest = body.
 *   mode bit 0: recompute the checksums (superblock/log header at 4088, batch header
 *               at 40) before decoding, so mutations reach the field checks;
 *   mode bits 4-5: nmembers - 1 for the meta (1..4).
 *   body: the superblock and log header buffers are body[0..4096) zero padded; the batch
 *   header is body[0..64); records are decoded from body[64..] when the body starts with
 *   a batch header, else from the whole body; place_validate gets bufsize = body[0..8),
 *   fsize = body[8..16), the request from body[16..].
 *
 * libFuzzer (clang), a long run:
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZING -D_GNU_SOURCE \
 *         -DFUSE_USE_VERSION=312 -Ifs -Ilib tests/fuzz_format.c fs/format/format.c \
 *         fs/store/meta.c fs/util/hash.c fs/util/util.c fs/store/alloc.c -lxxhash -lpthread \
 *         -o fuzz_fmt
 *     (plus fs/place/place.c and the rest of the core, or link fs/libdmafscore.a built
 *     with clang; see tests/fuzz_format.sh)
 *     tests/fuzz_format -c corpus     # the driver writes its seeds
 *     ./fuzz_fmt -max_len=16384 -timeout=10 -max_total_time=3600 corpus
 *
 * Standalone driver (built by make check):
 *     fuzz_format [-k] [-n N] [-s SEED] [-c CORPUS_DIR] [FILE...]
 * runs every FILE, then N mutations of the built-in seeds (and the FILEs). Exit 0 when
 * nothing crashed. -c writes the seeds to CORPUS_DIR and exits; -k reports broken
 * invariants (saving up to 5 inputs of each kind as fuzz_format-finding-KIND-N) and goes on, exit 1 at the end.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/format.h"
#include "store/meta.h"
#include "place/place.h"
#include "util/util.h"

/* Driver -k: count broken invariants and go on instead of aborting (sanitizer reports
 * still abort). */
static int keep_going;
static unsigned long findings;
static const uint8_t *cur_in;
static size_t cur_len;

static void bug(const char *what, long detail)
{
	fprintf(stderr, "fuzz_format: broken invariant: %s (%ld)\n", what, detail);
	if (!keep_going)
		abort();
	findings++;
	/* keep the first 5 inputs of each kind of finding */
	static const char *kinds[16];
	static unsigned nkind[16];
	unsigned k = 0;

	while (k < 16 && kinds[k] && kinds[k] != what)
		k++;
	if (k < 16 && nkind[k]++ < 5) {
		char path[64];
		FILE *f;

		kinds[k] = what;
		snprintf(path, sizeof(path), "fuzz_format-finding-%u-%u", k, nkind[k]);
		f = fopen(path, "wb");
		if (f) {
			fwrite(cur_in, 1, cur_len, f);
			fclose(f);
			fprintf(stderr, "fuzz_format: input saved as %s\n", path);
		}
	}
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void quiet(const char *msg) { (void)msg; }

/* The record a replay stopped at (for the report of a broken invariant). */
static struct fmt_rec last_bad;
static size_t last_bad_pos;

/* Replay records from buf into a fresh meta; returns the number applied. */
static size_t replay(struct meta *m, const uint8_t *buf, size_t len, int *err)
{
	size_t pos = 0, n = 0, last = 0;
	struct fmt_rec r;
	int ret;

	*err = 0;
	while ((ret = fmt_rec_decode(buf, len, &pos, &r)) > 0) {
		if (pos <= last || pos > len)
			bug("fmt_rec_decode did not advance inside the buffer", (long)pos);
		last = pos;
		if (r.name_len && (r.name < buf || r.name + r.name_len > buf + len))
			bug("record name outside the buffer", (long)r.name_len);
		if (r.val_len && (r.val < buf || r.val + r.val_len > buf + len))
			bug("record value outside the buffer", (long)r.val_len);
		ret = meta_apply(m, &r);
		if (ret && ret != -EUCLEAN && ret != -ENOMEM && ret != -EINVAL)
			bug("meta_apply returned an unexpected error", ret);
		if (ret) {
			last_bad = r;
			last_bad_pos = pos;
			*err = ret;
			return n; /* replay stops at the first inconsistent record, as journal.c */
		}
		n++;
	}
	if (ret && ret != -EBADMSG)
		bug("fmt_rec_decode returned an unexpected error", ret);
	*err = ret;
	return n;
}

static void fuzz_meta(const uint8_t *recs, size_t len, unsigned nmembers)
{
	struct meta m, m2;
	struct buf snap = { 0 };
	int err;

	if (meta_init(&m, 1u << 20, nmembers))
		return;
	replay(&m, recs, len, &err);
	if (meta_cleanup(&m, quiet) < 0)
		goto out;
	/* What compaction would write after this replay must replay cleanly. */
	if (meta_snapshot(&m, &snap) == 0 && meta_init(&m2, 1u << 20, nmembers) == 0) {
		replay(&m2, snap.p, snap.len, &err);
		if (err && err != -ENOMEM) {
			fprintf(stderr, "fuzz_format: snapshot record at byte %zu: type %u ino %llu dir %llu "
				"off %llu len %u member %u name_len %zu\n", last_bad_pos,
				last_bad.type, (unsigned long long)last_bad.ino,
				(unsigned long long)last_bad.dir, (unsigned long long)last_bad.off,
				last_bad.len, last_bad.member, last_bad.name_len);
			bug("snapshot of a replayed state does not replay", err);
		}
		meta_destroy(&m2);
	}
	buf_free(&snap);
out:
	meta_destroy(&m);
}

static void fuzz_place(const uint8_t *b, size_t len)
{
	struct dmafs_ioc_place *p;
	uint64_t bufsize, fsize;

	if (len < 16)
		return;
	bufsize = rd64(b);
	fsize = rd64(b + 8);
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	memcpy(p, b + 16, MIN(len - 16, sizeof(*p)));
	if (place_validate(p, bufsize, fsize) == 0) {
		uint64_t total = 0;

		if (p->count > DMAFS_PLACE_MAX)
			bug("place_validate accepted count", p->count);
		for (uint32_t i = 0; i < p->count; i++) {
			const struct dmafs_place_entry *e = &p->e[i];

			if (e->length > bufsize - MIN(total, bufsize) || total > bufsize)
				bug("place_validate accepted entries placing more than the buffer", i);
			total += e->length;

			if (e->buffer_offset > bufsize || e->length > bufsize - e->buffer_offset)
				bug("place_validate accepted an entry past the buffer", i);
			if (e->length && (e->file_offset >= fsize || e->length > fsize - e->file_offset))
				bug("place_validate left a length past the end of file", i);
		}
	}
	free(p);
}

#ifdef FUZZING
/* FUZZ_KEEP_GOING=1: report broken invariants without aborting, so that a libFuzzer run
 * goes on looking for crashes past a known finding. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	keep_going = getenv("FUZZ_KEEP_GOING") != NULL;
	return 0;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *blk, mode;
	const uint8_t *body;
	size_t len;
	struct fmt_sb sb;
	struct fmt_loghdr lh;
	struct fmt_txhdr tx;
	int ret;

	if (size < 1)
		return 0;
	cur_in = data;
	cur_len = size;
	mode = data[0];
	body = data + 1;
	len = size - 1;
	blk = calloc(1, DMAFS_BLOCK);
	if (!blk)
		return 0;
	memcpy(blk, body, MIN(len, DMAFS_BLOCK));
	if (mode & 1)
		wr64(blk + 4088, fmt_hash(blk, 4088));
	ret = fmt_sb_decode(blk, &sb);
	if (ret && ret != -ENODATA && ret != -EBADMSG && ret != -EPROTONOSUPPORT && ret != -EUCLEAN)
		bug("fmt_sb_decode error", ret);
	if (ret == 0) {
		uint8_t *again = malloc(FMT_SB_SIZE);
		struct fmt_sb sb2;

		if (sb.member_count == 0 || sb.member_count > FMT_MAX_MEMBERS ||
		    sb.member_index >= sb.member_count)
			bug("fmt_sb_decode accepted member index/count", sb.member_index);
		if (sb.data_offset > sb.data_end || sb.data_end > sb.member_size)
			bug("fmt_sb_decode accepted data region outside the member", 0);
		if (sb.csum_offset < sb.data_end || sb.csum_offset > sb.member_size ||
		    fmt_csum_bytes(sb.data_end - sb.data_offset) > sb.member_size - FMT_SB_SIZE - sb.csum_offset)
			bug("fmt_sb_decode accepted a checksum region outside the member or over data", 0);
		if (again) {
			fmt_sb_encode(&sb, again);
			if (fmt_sb_decode(again, &sb2))
				bug("re-encoded superblock does not decode", 0);
			free(again);
		}
	}
	ret = fmt_loghdr_decode(blk, &lh);
	if (ret && ret != -ENODATA && ret != -EBADMSG)
		bug("fmt_loghdr_decode error", ret);

	memset(blk, 0, FMT_TX_HDR);
	memcpy(blk, body, MIN(len, FMT_TX_HDR));
	if (mode & 1)
		wr64(blk + 40, fmt_hash(blk, 40));
	ret = fmt_txhdr_decode(blk, &tx);
	if (ret && ret != -ENODATA && ret != -EBADMSG)
		bug("fmt_txhdr_decode error", ret);
	free(blk);

	if (len >= FMT_TX_HDR && !memcmp(body, FMT_TX_MAGIC, 8))
		fuzz_meta(body + FMT_TX_HDR, len - FMT_TX_HDR, 1 + ((mode >> 4) & 3));
	else
		fuzz_meta(body, len, 1 + ((mode >> 4) & 3));
	fuzz_place(body, len);
	return 0;
}

#ifndef FUZZING
/* ---------------------------------------------------------------- standalone driver */
#include <unistd.h>

struct seed {
	uint8_t *p;
	size_t len;
};
static struct seed *seeds;
static size_t nseeds;

static void add_seed(const void *p, size_t len)
{
	struct seed *s = realloc(seeds, (nseeds + 1) * sizeof(*s));

	if (!s || !(s[nseeds].p = malloc(len ? len : 1)))
		exit(2);
	memcpy(s[nseeds].p, p, len);
	s[nseeds].len = len;
	seeds = s;
	nseeds++;
}

static void add_body(uint8_t mode, const void *body, size_t len)
{
	uint8_t *b = malloc(len + 1);

	if (!b)
		exit(2);
	b[0] = mode;
	memcpy(b + 1, body, len);
	add_seed(b, len + 1);
	free(b);
}

static void rec(struct buf *b, uint16_t type, uint64_t ino, uint64_t dir, const char *name,
		const char *val)
{
	struct fmt_rec r;

	memset(&r, 0, sizeof(r));
	r.type = type;
	r.ino = ino;
	r.dir = dir;
	if (name) {
		r.name = (const uint8_t *)name;
		r.name_len = strlen(name);
	}
	if (val) {
		r.val = (const uint8_t *)val;
		r.val_len = strlen(val);
	}
	if (fmt_rec_encode(b, &r))
		exit(2);
}

static void rec_inode(struct buf *b, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t size)
{
	struct fmt_rec r;

	memset(&r, 0, sizeof(r));
	r.type = REC_INODE;
	r.ino = ino;
	r.a.mode = mode;
	r.a.nlink = nlink;
	r.a.size = size;
	r.a.mtime = r.a.ctime = r.a.atime = 1700000000000000000LL;
	if (fmt_rec_encode(b, &r))
		exit(2);
}

static void rec_extent(struct buf *b, uint64_t ino, uint64_t off, uint32_t len, uint32_t member,
		       uint64_t moff)
{
	struct fmt_rec r;

	memset(&r, 0, sizeof(r));
	r.type = REC_EXTENT;
	r.ino = ino;
	r.off = off;
	r.len = len;
	r.member = member;
	r.moff = moff;
	if (fmt_rec_encode(b, &r))
		exit(2);
}

static void rec_trunc(struct buf *b, uint64_t ino, uint64_t size)
{
	struct fmt_rec r;

	memset(&r, 0, sizeof(r));
	r.type = REC_TRUNC;
	r.ino = ino;
	r.off = size;
	if (fmt_rec_encode(b, &r))
		exit(2);
}

static void rec_punch(struct buf *b, uint64_t ino, uint64_t off, uint64_t len)
{
	struct fmt_rec r;

	memset(&r, 0, sizeof(r));
	r.type = REC_PUNCH;
	r.ino = ino;
	r.off = off;
	r.plen = len;
	if (fmt_rec_encode(b, &r))
		exit(2);
}

/* A batch a live daemon could write: mkdir, create, write, overwrite, xattr, symlink, ... */
static void records(struct buf *b)
{
	rec_inode(b, 1, S_IFDIR | 0755, 3, 0);
	rec_inode(b, 2, S_IFDIR | 0755, 2, 0);
	rec(b, REC_LINK, 2, 1, "dir", NULL);
	rec_inode(b, 3, S_IFREG | 0644, 1, 3 << 20);
	rec(b, REC_LINK, 3, 2, "model.safetensors", NULL);
	rec_extent(b, 3, 0, 1 << 20, 0, 16 << 20);
	rec_extent(b, 3, 1 << 20, 1 << 20, 1, 16 << 20);
	rec_extent(b, 3, 2 << 20, 1 << 20, 0, 17 << 20);
	/* an overwrite in the middle of the first extent: punch, then the new copy */
	rec_punch(b, 3, 8192, 16384);
	rec_extent(b, 3, 8192, 16384, 0, 20 << 20);
	rec(b, REC_XSET, 3, 0, "user.k", "value");
	rec_inode(b, 4, S_IFLNK | 0777, 1, 8);
	rec(b, REC_SYMLINK, 4, 0, "../x/y/z", NULL);
	rec(b, REC_LINK, 4, 1, "link", NULL);
	rec(b, REC_LINK, 3, 1, "hard", NULL);
	rec_inode(b, 3, S_IFREG | 0644, 2, 3 << 20);
	rec_trunc(b, 3, 1500000);
	rec(b, REC_XDEL, 3, 0, "user.k", NULL);
	rec(b, REC_UNLINK, 0, 1, "link", NULL);
	rec_inode(b, 4, S_IFLNK | 0777, 0, 8);
	rec(b, REC_IDEL, 4, 0, NULL, NULL);
	rec_inode(b, 5, S_IFREG | 0600, 1, 4096);
	rec(b, REC_LINK, 5, 1, "small", NULL);
	rec_extent(b, 5, 0, 4096, 1, 18 << 20);
}

static void make_seeds(void)
{
	uint8_t *blk = calloc(1, DMAFS_BLOCK + 65536);
	struct fmt_sb sb;
	struct fmt_loghdr lh;
	struct fmt_txhdr tx;
	struct buf b = { 0 };
	struct dmafs_ioc_place *p;

	if (!blk)
		exit(2);
	for (uint32_t idx = 0; idx < 3; idx++) {
		memset(&sb, 0, sizeof(sb));
		sb.version = FMT_VERSION;
		sb.member_index = idx;
		sb.member_count = 3;
		sb.stripe_unit = 1 << 20;
		sb.block_size = DMAFS_BLOCK;
		memset(sb.fs_uuid, 0xa5, 16);
		for (int i = 0; i < 3; i++)
			memset(sb.member_uuid[i], 0x10 + i, 16);
		strcpy(sb.label, "fuzz");
		sb.mkfs_time = 1700000000;
		if (fmt_sb_geometry(&sb, (256ull << 20) * (idx + 1),
				    fmt_log_half_for(256ull << 20)))
			exit(2);
		fmt_sb_encode(&sb, blk);
		if (fmt_sb_decode(blk, &sb))
			fprintf(stderr, "fuzz_format: note: own superblock seed %u does not decode\n", idx);
		add_body(0, blk, FMT_SB_SIZE);
		add_body(1, blk, FMT_SB_SIZE);
	}
	memset(blk, 0, DMAFS_BLOCK);
	memset(&lh, 0, sizeof(lh));
	memset(lh.fs_uuid, 0xa5, 16);
	lh.gen = 7;
	lh.first_seq = 100;
	lh.next_ino = 6;
	lh.snap_len = 4096;
	lh.snap_xxh3 = 0x1234;
	fmt_loghdr_encode(&lh, blk);
	add_body(0, blk, DMAFS_BLOCK);
	add_body(1, blk, DMAFS_BLOCK);

	records(&b);
	memset(blk, 0, DMAFS_BLOCK + 65536);
	memset(&tx, 0, sizeof(tx));
	tx.gen = 7;
	tx.seq = 100;
	tx.payload_len = (uint32_t)b.len;
	tx.payload_xxh3 = fmt_hash(b.p, b.len);
	fmt_txhdr_encode(&tx, blk);
	memcpy(blk + FMT_TX_HDR, b.p, b.len);
	for (uint8_t m = 0; m < 4; m++)
		add_body((uint8_t)(m << 4), blk, FMT_TX_HDR + b.len);
	add_body(0, b.p, b.len);
	add_body(1, blk, FMT_TX_HDR);
	buf_free(&b);

	p = calloc(1, sizeof(*p));
	if (!p)
		exit(2);
	p->count = 3;
	p->e[0] = (struct dmafs_place_entry){ 0, 4096, 0 };
	p->e[1] = (struct dmafs_place_entry){ 4096, DMAFS_TO_EOF, 8192 };
	p->e[2] = (struct dmafs_place_entry){ 1 << 20, 1 << 20, 1 << 20 };
	wr64(blk, 4 << 20);
	wr64(blk + 8, 3 << 20);
	memcpy(blk + 16, p, offsetof(struct dmafs_ioc_place, e[4]));
	add_body(0, blk, 16 + offsetof(struct dmafs_ioc_place, e[4]));
	free(p);
	free(blk);
}

static uint64_t rs;
static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* Offsets of length-like fields worth editing (byte offsets in the body + 1 for mode). */
static const size_t hot[] = { 1 + 8, 1 + 12, 1 + 16, 1 + 24, 1 + 32, 1 + 36, 1 + 40, 1 + 48,
			      1 + 56, 1 + 64, 1 + 66, 1 + 68, 1 + 72, 1 + 76, 1 + 80, 1 + 88 };

static size_t mutate(uint8_t *d, size_t len, size_t cap)
{
	int k = 1 + (int)(rnd() % 6);

	while (k--) {
		switch (rnd() % 8) {
		case 0: case 1: /* bit flips */
			if (len)
				d[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 2: /* random byte */
			if (len)
				d[rnd() % len] = (uint8_t)rnd();
			break;
		case 3: /* truncate */
			if (len)
				len = rnd() % (len + 1);
			break;
		case 4: { /* length-field edit: a hot offset or anywhere, interesting values */
			static const uint64_t v[] = { 0, 1, 0xff, 0xffff, 0x10000, 0xffffffff,
						      0x100000000ull, UINT64_MAX, UINT64_MAX - 1,
						      INT64_MAX, 4096, 4095, 1 << 20 };
			size_t at = rnd() % 2 ? hot[rnd() % (sizeof(hot) / sizeof(hot[0]))]
					     : (len ? rnd() % len : 0);
			unsigned w = 1u << (rnd() % 4);
			uint64_t x = v[rnd() % (sizeof(v) / sizeof(v[0]))];

			if (rnd() % 3 == 0)
				x += (uint64_t)(int64_t)((int)(rnd() % 17) - 8);
			if (at + w <= len)
				memcpy(d + at, &x, w);
			break;
		}
		case 5: /* duplicate a chunk (records twice) */
			if (len > 2 && len < cap / 2) {
				size_t a = rnd() % len, n = 1 + rnd() % (len - a);

				if (len + n <= cap) {
					memmove(d + a + n, d + a, len - a);
					len += n;
				}
			}
			break;
		case 6: /* delete a chunk */
			if (len > 2) {
				size_t a = rnd() % len, n = 1 + rnd() % (len - a);

				memmove(d + a, d + a + n, len - a - n);
				len -= n;
			}
			break;
		default: /* toggle the checksum-fixing mode bit */
			if (len)
				d[0] ^= 1;
			break;
		}
	}
	return len;
}

static int write_corpus(const char *dir)
{
	char path[4096];

	for (size_t i = 0; i < nseeds; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/seed-%03zu", dir, i);
		f = fopen(path, "wb");
		if (!f || fwrite(seeds[i].p, 1, seeds[i].len, f) != seeds[i].len || fclose(f)) {
			perror(path);
			return 2;
		}
	}
	printf("fuzz_format: %zu seeds written to %s\n", nseeds, dir);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long long n = 20000, seed = 1;
	const char *corpus = NULL;
	size_t cap = 1 << 16;
	uint8_t *d;
	int opt;

	while ((opt = getopt(argc, argv, "kn:s:c:")) != -1) {
		switch (opt) {
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'c': corpus = optarg; break;
		case 'k': keep_going = 1; break;
		default:
			fprintf(stderr, "usage: %s [-k] [-n N] [-s SEED] [-c CORPUS_DIR] [FILE...]\n", argv[0]);
			return 2;
		}
	}
	make_seeds();
	if (corpus)
		return write_corpus(corpus);
	for (int i = optind; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		size_t got;

		if (!f) {
			perror(argv[i]);
			return 2;
		}
		d = malloc(cap);
		got = d ? fread(d, 1, cap, f) : 0;
		fclose(f);
		LLVMFuzzerTestOneInput(d, got);
		add_seed(d, got);
		free(d);
	}
	d = malloc(cap);
	if (!d)
		return 2;
	rs = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < nseeds; i++)
		LLVMFuzzerTestOneInput(seeds[i].p, seeds[i].len);
	for (unsigned long long it = 0; it < n; it++) {
		const struct seed *s = &seeds[rnd() % nseeds];
		size_t len;

		memcpy(d, s->p, MIN(s->len, cap));
		len = mutate(d, MIN(s->len, cap), cap);
		/* Keep batch payload hashes in step sometimes, so record mutations are "valid". */
		if (len > 1 + FMT_TX_HDR && !memcmp(d + 1, FMT_TX_MAGIC, 8) && rnd() % 2) {
			uint32_t pl = (uint32_t)(len - 1 - FMT_TX_HDR);

			memcpy(d + 1 + 24, &pl, 4);
			wr64(d + 1 + 32, fmt_hash(d + 1 + FMT_TX_HDR, pl));
		}
		if (getenv("FUZZ_SAVE")) {
			FILE *f = fopen(getenv("FUZZ_SAVE"), "wb");

			if (f) {
				fwrite(d, 1, len, f);
				fclose(f);
			}
		}
		LLVMFuzzerTestOneInput(d, len);
	}
	free(d);
	if (findings) {
		printf("fuzz_format: %zu seeds, %llu mutations: %lu broken invariants\n", nseeds, n, findings);
		return 1;
	}
	printf("fuzz_format: %zu seeds, %llu mutations, no crash\n", nseeds, n);
	return 0;
}
#endif
