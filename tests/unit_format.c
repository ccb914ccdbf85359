// SPDX-License-Identifier: MIT
/* Description: format encode/decode round trips, rejection of damaged or malformed input, and the checksum and hash functions against fixed values (the on-disk format must not change with the CPU or the XXH3 implementation). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "format/format.h"
#include "t_unit.h"

static void test_sb(void)
{
	uint8_t b[FMT_SB_SIZE];
	struct fmt_sb sb, out;

	memset(&sb, 0, sizeof(sb));
	sb.version = FMT_VERSION;
	sb.member_index = 2;
	sb.member_count = 4;
	sb.stripe_unit = 1 << 20;
	strcpy(sb.label, "models");
	for (int i = 0; i < 16; i++)
		sb.fs_uuid[i] = i;
	for (int m = 0; m < 4; m++)
		memset(sb.member_uuid[m], 0x10 + m, 16);
	T_EQ(fmt_sb_geometry(&sb, 1ull << 30, fmt_log_half_for(1ull << 30)), 0);
	T_EQ(sb.log_offset, 0); /* member 2 carries no log */
	T_EQ(sb.data_offset, FMT_LOG_OFFSET);
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), 0);
	T_EQ(out.member_index, 2);
	T_EQ(out.member_count, 4);
	T_EQ(out.stripe_unit, 1 << 20);
	T_EQ(out.data_end, sb.data_end);
	T_EQ(out.csum_offset, sb.csum_offset);
	/* the checksum region holds 8 bytes per data block and ends before the copy's MiB */
	T_CHECK(sb.csum_offset >= sb.data_end && sb.csum_offset + fmt_csum_bytes(sb.data_end - sb.data_offset) <= sb.member_size - (1u << 20), "checksum region %llu", (unsigned long long)sb.csum_offset);
	T_CHECK(!strcmp(out.label, "models"), "label %s", out.label);
	T_CHECK(!memcmp(out.member_uuid[3], sb.member_uuid[3], 16), "member uuid");
	T_CHECK(!memcmp(out.fs_uuid, sb.fs_uuid, 16), "fs uuid");

	/* every single flipped byte is detected */
	for (int i = 8; i < FMT_SB_SIZE; i += 97) {
		b[i] ^= 0x40;
		T_CHECK(fmt_sb_decode(b, &out) == -EBADMSG, "flip at %d not detected", i);
		b[i] ^= 0x40;
	}
	b[0] = 'X';
	T_EQ(fmt_sb_decode(b, &out), -ENODATA);

	/* wrong version and inconsistent fields, with valid checksums */
	sb.version = 1; /* v1 had no data checksums */
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), -EPROTONOSUPPORT);
	sb.version = FMT_VERSION_MAX + 1;
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), -EPROTONOSUPPORT);
	sb.version = 2; /* version 2 is read (a read-write mount upgrades it) */
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), 0);
	T_EQ(out.version, 2);
	sb.version = FMT_VERSION;
	sb.member_index = 4;
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	sb.member_index = 1;
	sb.stripe_unit = 3 << 20;
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	sb.stripe_unit = 1 << 20;
	sb.data_end = sb.member_size;
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	T_EQ(fmt_sb_geometry(&sb, 1ull << 30, fmt_log_half_for(1ull << 30)), 0);
	sb.csum_offset = sb.member_size - 8192; /* no room for the checksums */
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	sb.csum_offset = sb.data_end - DMAFS_BLOCK; /* inside the data region */
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);

	/* too small a member */
	T_EQ(fmt_sb_geometry(&sb, 32 << 20, 4 << 20), -ENOSPC);
	T_EQ(fmt_log_half_for(1ull << 40), FMT_LOG_HALF_MAX_AUTO);
	T_EQ(fmt_log_half_for(16ull << 30), 256ull << 20);
	T_EQ(FMT_LOG_HALF_MAX_AUTO, 1ull << 30);
	T_EQ(fmt_log_half_for(64ull << 20), 4ull << 20);
}

static void test_headers(void)
{
	uint8_t b[DMAFS_BLOCK];
	struct fmt_loghdr h = { .gen = 7, .first_seq = 99, .next_ino = 1234, .snap_len = 4000,
				.snap_xxh3 = 0xabcdef }, ho;
	struct fmt_txhdr t = { .gen = 7, .seq = 100, .payload_len = 123, .payload_xxh3 = 42 }, to;

	memset(h.fs_uuid, 9, 16);
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), 0);
	T_EQ(ho.gen, 7);
	T_EQ(ho.first_seq, 99);
	T_EQ(ho.next_ino, 1234);
	T_EQ(ho.snap_len, 4000);
	T_EQ(ho.version, FMT_VERSION);
	h.version = 2; /* a version 2 filesystem's log is written as one */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), 0);
	T_EQ(ho.version, 2);
	h.version = FMT_VERSION_MAX + 1;
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), -EBADMSG);
	h.version = FMT_VERSION_MIRROR; /* a mirror's log */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), 0);
	h.version = 0;
	fmt_loghdr_encode(&h, b);
	b[40] ^= 1;
	T_EQ(fmt_loghdr_decode(b, &ho), -EBADMSG);
	memset(b, 0, sizeof(b));
	T_EQ(fmt_loghdr_decode(b, &ho), -ENODATA);
	/* version 4: log areas in pieces; whole blocks, adding up, not overlapping, not wrapping */
	h.version = FMT_VERSION_GROW;
	h.ext_len = 8 << 20;
	h.area[0][0] = (struct fmt_area){ .n = 2, .off = { 100 << 20, 20 << 20 }, .len = { 6 << 20, 2 << 20 } };
	h.area[1][0] = (struct fmt_area){ .n = 1, .off = { 60 << 20 }, .len = { 8 << 20 } };
	h.area[0][1] = (struct fmt_area){ .n = 1, .off = { 60 << 20 }, .len = { 8 << 20 } };
	h.area[1][1] = (struct fmt_area){ .n = 1, .off = { 100 << 20 }, .len = { 8 << 20 } };
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), 0);
	T_EQ(ho.ext_len, 8 << 20);
	T_EQ(ho.area[0][0].n, 2);
	T_EQ(ho.area[0][0].off[1], 20 << 20);
	T_EQ(ho.area[0][0].len[1], 2 << 20);
	T_EQ(ho.area[1][1].off[0], 100 << 20);
	h.area[1][0].off[0] = (20 << 20) + (1 << 20); /* overlaps a piece of area 0 */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), -EBADMSG);
	h.area[1][0].off[0] = (60 << 20) + 512; /* not a whole block */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), -EBADMSG);
	h.area[1][0].off[0] = UINT64_MAX - (4 << 20) + 1; /* wraps */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), -EBADMSG);
	h.area[1][0].off[0] = 60 << 20;
	h.area[1][0].len[0] = 4 << 20; /* does not add up to ext_len */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), -EBADMSG);
	h.area[1][0].len[0] = 8 << 20;
	h.area[1][1].n = 0; /* copy 1 with one area only */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), -EBADMSG);
	h.area[0][1].n = 0; /* copy 1 with none: a one-member filesystem */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), 0);
	h.version = 3; /* a version 3 header has no areas: the fields are not read */
	fmt_loghdr_encode(&h, b);
	T_EQ(fmt_loghdr_decode(b, &ho), 0);
	T_EQ(ho.ext_len, 0);
	T_EQ(ho.area[0][0].n, 0);
	h.version = 0;
	h.ext_len = 0;
	memset(h.area, 0, sizeof(h.area));

	fmt_txhdr_encode(&t, b);
	T_EQ(fmt_txhdr_decode(b, &to), 0);
	T_EQ(to.seq, 100);
	T_EQ(to.payload_len, 123);
	b[20] ^= 1;
	T_EQ(fmt_txhdr_decode(b, &to), -EBADMSG);
	T_EQ(fmt_tx_size(0), DMAFS_BLOCK);
	T_EQ(fmt_tx_size(DMAFS_BLOCK - FMT_TX_HDR + 1), 2 * DMAFS_BLOCK);
}

static void test_records(void)
{
	struct buf b = { 0 };
	struct fmt_rec r, o;
	size_t pos = 0;
	char longname[300];

	memset(&r, 0, sizeof(r));
	r.type = REC_INODE;
	r.ino = 77;
	r.a = (struct fmt_attr){ .mode = S_IFREG | 0644, .uid = 1000, .gid = 100, .nlink = 3,
				 .size = 1ull << 40, .atime = -5, .mtime = 1700000000123456789ll,
				 .ctime = 42, .start_member = 3 };
	T_EQ(fmt_rec_encode(&b, &r), 0);
	r = (struct fmt_rec){ .type = REC_EXTENT, .ino = 77, .off = 1 << 20, .len = 8192,
			      .member = 3, .moff = 5 << 20 };
	T_EQ(fmt_rec_encode(&b, &r), 0);
	r = (struct fmt_rec){ .type = REC_LINK, .dir = 1, .ino = 77,
			      .name = (const uint8_t *)"model.safetensors", .name_len = 17 };
	T_EQ(fmt_rec_encode(&b, &r), 0);
	r = (struct fmt_rec){ .type = REC_UNLINK, .dir = 5, .name = (const uint8_t *)"x", .name_len = 1 };
	T_EQ(fmt_rec_encode(&b, &r), 0);
	r = (struct fmt_rec){ .type = REC_XSET, .ino = 77, .name = (const uint8_t *)"user.k",
			      .name_len = 6, .val = (const uint8_t *)"", .val_len = 0 };
	T_EQ(fmt_rec_encode(&b, &r), 0);
	r = (struct fmt_rec){ .type = REC_SYMLINK, .ino = 78,
			      .name = (const uint8_t *)"../../blobs/abc", .name_len = 15 };
	T_EQ(fmt_rec_encode(&b, &r), 0);
	r = (struct fmt_rec){ .type = REC_TRUNC, .ino = 77, .off = 12345 };
	T_EQ(fmt_rec_encode(&b, &r), 0);
	r = (struct fmt_rec){ .type = REC_PUNCH, .ino = 77, .off = 8192, .plen = 3ull << 32 };
	T_EQ(fmt_rec_encode(&b, &r), 0);

	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.type, REC_INODE);
	T_EQ(o.a.size, 1ull << 40);
	T_EQ(o.a.atime, -5);
	T_EQ(o.a.mtime, 1700000000123456789ll);
	T_EQ(o.a.start_member, 3);
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.type, REC_EXTENT);
	T_EQ(o.moff, 5 << 20);
	T_EQ(o.len, 8192);
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.type, REC_LINK);
	T_EQ(o.dir, 1);
	T_EQ(o.ino, 77);
	T_CHECK(o.name_len == 17 && !memcmp(o.name, "model.safetensors", 17), "link name");
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.type, REC_UNLINK);
	T_EQ(o.dir, 5);
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.type, REC_XSET);
	T_EQ(o.val_len, 0);
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.type, REC_SYMLINK);
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.off, 12345);
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 1);
	T_EQ(o.type, REC_PUNCH);
	T_EQ(o.off, 8192);
	T_EQ(o.plen, 3ull << 32);
	T_EQ(fmt_rec_decode(b.p, b.len, &pos, &o), 0);

	/*
	 * INODE records: without generation and flags, version 2's 68-byte body (what a
	 * version 2 filesystem holds and keeps); with them, version 3's 76 bytes.
	 */
	{
		struct buf e = { 0 };

		r = (struct fmt_rec){ .type = REC_INODE, .ino = 9, .a = { .mode = S_IFREG | 0600 } };
		T_EQ(fmt_rec_encode(&e, &r), 0);
		T_EQ(e.len, 6 + 68);
		T_EQ(get_u32(e.p + 2), 68);
		r.a.generation = 0xdeadbeef;
		T_EQ(fmt_rec_encode(&e, &r), 0);
		T_EQ(e.len, 2 * 6 + 68 + 76);
		T_EQ(get_u32(e.p + 6 + 68 + 2), 76);
		T_EQ(get_u32(e.p + 6 + 68 + 6 + 68), 0xdeadbeef);
		pos = 0;
		T_EQ(fmt_rec_decode(e.p, e.len, &pos, &o), 1);
		T_EQ(o.a.generation, 0);
		T_EQ(o.a.flags, 0);
		T_EQ(fmt_rec_decode(e.p, e.len, &pos, &o), 1);
		T_EQ(o.a.generation, 0xdeadbeef);
		T_EQ(o.a.mode, S_IFREG | 0600);
		/* flags this version does not define, and other body lengths, are refused */
		put_u32(e.p + 6 + 68 + 6 + 72, 0x80000000u);
		pos = 6 + 68;
		T_EQ(fmt_rec_decode(e.p, e.len, &pos, &o), -EBADMSG);
		put_u32(e.p + 6 + 68 + 6 + 72, 0);
		put_u32(e.p + 6 + 68 + 2, 72);
		pos = 6 + 68;
		T_EQ(fmt_rec_decode(e.p, e.len, &pos, &o), -EBADMSG);
		buf_free(&e);
	}

	/* encoder refuses what the decoder would refuse */
	memset(longname, 'a', sizeof(longname));
	r = (struct fmt_rec){ .type = REC_LINK, .dir = 1, .ino = 2,
			      .name = (const uint8_t *)longname, .name_len = 256 };
	T_EQ(fmt_rec_encode(&b, &r), -EINVAL);
	r.type = 99;
	T_EQ(fmt_rec_encode(&b, &r), -EINVAL);

	/* malformed input: truncated, unknown type, slash in a name, unaligned extent */
	pos = 0;
	T_EQ(fmt_rec_decode(b.p, 5, &pos, &o), -EBADMSG);
	{
		uint8_t bad[64];
		struct buf e = { 0 };

		memcpy(bad, b.p, 6);
		put_u16(bad, 200);
		pos = 0;
		T_EQ(fmt_rec_decode(bad, 6, &pos, &o), -EBADMSG);
		r = (struct fmt_rec){ .type = REC_LINK, .dir = 1, .ino = 2,
				      .name = (const uint8_t *)"a/b", .name_len = 3 };
		fmt_rec_encode(&e, &r);
		pos = 0;
		T_EQ(fmt_rec_decode(e.p, e.len, &pos, &o), -EBADMSG);
		e.len = 0;
		r = (struct fmt_rec){ .type = REC_EXTENT, .ino = 2, .off = 100, .len = 4096 };
		fmt_rec_encode(&e, &r);
		pos = 0;
		T_EQ(fmt_rec_decode(e.p, e.len, &pos, &o), -EBADMSG);
		/* punches: unaligned, empty, wrapping past 2^64 */
		{
			const uint64_t pv[3][2] = { { 100, 4096 }, { 4096, 0 }, { ~0ull - 4095, 8192 } };

			for (int k = 0; k < 3; k++) {
				e.len = 0;
				r = (struct fmt_rec){ .type = REC_PUNCH, .ino = 2, .off = pv[k][0], .plen = pv[k][1] };
				fmt_rec_encode(&e, &r);
				pos = 0;
				T_CHECK(fmt_rec_decode(e.p, e.len, &pos, &o) == -EBADMSG, "punch %d accepted", k);
			}
		}
		/* a body length running past the buffer */
		e.len = 0;
		r = (struct fmt_rec){ .type = REC_IDEL, .ino = 2 };
		fmt_rec_encode(&e, &r);
		put_u32(e.p + 2, 1000);
		pos = 0;
		T_EQ(fmt_rec_decode(e.p, e.len, &pos, &o), -EBADMSG);
		buf_free(&e);
	}
	/* random bytes never crash the decoder and never read out of bounds (run under ASan) */
	{
		unsigned long long seed = 12345;
		uint8_t junk[512];

		for (int round = 0; round < 20000; round++) {
			size_t len = t_rand(&seed) % sizeof(junk), p = 0;
			int ret;

			for (size_t i = 0; i < len; i++)
				junk[i] = t_rand(&seed);
			if (len >= 2)
				put_u16(junk, 1 + t_rand(&seed) % 9);
			if (len >= 6)
				put_u32(junk + 2, t_rand(&seed) % (len + 8));
			while ((ret = fmt_rec_decode(junk, len, &p, &o)) > 0)
				T_CHECK(p <= len, "decoder ran past the end");
		}
	}
	buf_free(&b);
}

/*
 * fmt_csum and fmt_hash are XXH3-64 as written on disk: whichever XXH3 code the build
 * picks (libxxhash's baseline entry points or its run-time CPU dispatch), the values must
 * be those of the XXH3 specification. These were computed with xxhash's scalar code.
 */
static void test_hash_values(void)
{
	uint8_t b[DMAFS_BLOCK];

	for (unsigned i = 0; i < DMAFS_BLOCK; i++)
		b[i] = (uint8_t)(i * 31 + 7);
	T_CHECK(fmt_csum(b, 3, 0x12345000ull) == 0xfc5e779fa9c53602ull, "block checksum %016llx",
		(unsigned long long)fmt_csum(b, 3, 0x12345000ull));
	T_CHECK(fmt_hash(b, DMAFS_BLOCK) == 0xa3c19f8174cde0bbull, "hash of a block %016llx",
		(unsigned long long)fmt_hash(b, DMAFS_BLOCK));
	T_CHECK(fmt_hash(b, 100) == 0x8c97158042fbf926ull, "hash of 100 bytes %016llx",
		(unsigned long long)fmt_hash(b, 100));
	/* the seed carries member and offset: another member or offset, another checksum */
	T_CHECK(fmt_csum(b, 2, 0x12345000ull) != fmt_csum(b, 3, 0x12345000ull), "member not in the seed");
	T_CHECK(fmt_csum(b, 3, 0x12346000ull) != fmt_csum(b, 3, 0x12345000ull), "offset not in the seed");
}

/* The labels mkfs.dmafs and dmafs-label write, and the ones they refuse. */
static void test_labels(void)
{
	static const char *const ok[] = { "", "models", "a b", "Qwen2.5-7B_v1.0", "\xc3\xa9t\xc3\xa9" };
	static const char *const bad[] = { "a/b", "a,b", "a\"b", "a\\b", " a", "a ", "a\tb", "\x7f" };
	char why[256], l65[66];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		T_EQ(fmt_label_check(ok[i], why, sizeof(why)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		T_EQ(fmt_label_check(bad[i], why, sizeof(why)), -EINVAL);
	memset(l65, 'x', 65);
	l65[65] = '\0';
	T_EQ(fmt_label_check(l65, why, sizeof(why)), -EINVAL);
	T_CHECK(strstr(why, "at most 64") != NULL, "a long label's reason");
	l65[64] = '\0';
	T_EQ(fmt_label_check(l65, why, sizeof(why)), 0);
}

/* Version 5: the mirror profile's superblock fields and the copies' places. */
static void test_mirror(void)
{
	uint8_t b[FMT_SB_SIZE];
	struct fmt_sb sb, out;
	uint64_t doff[3], half;

	memset(&sb, 0, sizeof(sb));
	sb.version = FMT_VERSION_MIRROR;
	sb.member_index = 1;
	sb.member_count = 3;
	sb.stripe_unit = 1 << 20;
	T_EQ(fmt_sb_geometry(&sb, 1ull << 30, 8 << 20), 0);
	half = ALIGN_DOWN((sb.data_end - sb.data_offset) / 2, DMAFS_BLOCK);
	sb.flags = FMT_SB_MIRROR;
	sb.mirror_half = half;
	fmt_sb_encode(&sb, b);
	T_EQ(fmt_sb_decode(b, &out), 0);
	T_CHECK(fmt_is_mirror(&out), "mirror flag");
	T_EQ(out.mirror_half, half);
	T_EQ(fmt_alloc_end(&out), out.data_offset + half);
	/* each refused: a half that does not fit twice, or is not whole blocks, or none; the
	 * flag on an older version; one member; a flag this version does not know */
	out = sb;
	out.mirror_half = half + DMAFS_BLOCK;
	fmt_sb_encode(&out, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	out = sb;
	out.mirror_half = half - 512;
	fmt_sb_encode(&out, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	out = sb;
	out.mirror_half = 0;
	fmt_sb_encode(&out, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	out = sb;
	out.version = FMT_VERSION_GROW;
	fmt_sb_encode(&out, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	out = sb;
	out.member_count = 1;
	out.member_index = 0;
	T_EQ(fmt_sb_geometry(&out, 1ull << 30, 8 << 20), 0);
	fmt_sb_encode(&out, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	out = sb;
	out.flags = 2;
	fmt_sb_encode(&out, b);
	T_EQ(fmt_sb_decode(b, &out), -EUCLEAN);
	/* a single-profile version 5 superblock is read too */
	out = sb;
	out.flags = 0;
	fmt_sb_encode(&out, b);
	T_EQ(fmt_sb_decode(b, &out), 0);
	T_EQ(fmt_alloc_end(&out), out.data_end);

	/* the second copy of member m's block is on member m + 1 (mod n), as far into its
	 * second half as the first copy is into m's first half; the other copy of either is
	 * the other */
	doff[0] = doff[1] = FMT_LOG_OFFSET + (16 << 20);
	doff[2] = FMT_LOG_OFFSET;
	for (unsigned m = 0; m < 3; m++)
		for (uint64_t at = 0; at < half; at += half / 7 & ~4095ull) {
			unsigned m2, m3;
			uint64_t o2, o3;

			fmt_mirror_of(doff, 3, half, m, doff[m] + at, &m2, &o2);
			T_EQ(m2, (m + 1) % 3);
			T_EQ(o2, doff[m2] + half + at);
			fmt_mirror_other(doff, 3, half, m2, o2, &m3, &o3);
			T_EQ(m3, m);
			T_EQ(o3, doff[m] + at);
			fmt_mirror_other(doff, 3, half, m, doff[m] + at, &m3, &o3);
			T_EQ(m3, m2);
			T_EQ(o3, o2);
		}
}

int main(void)
{
	test_sb();
	test_mirror();
	test_headers();
	test_records();
	test_hash_values();
	test_labels();
	return t_done("unit_format");
}
