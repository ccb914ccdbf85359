// SPDX-License-Identifier: MIT
/* Description: data checksums and copy-on-write: punch records, overwrites in new space, in-place rewrites of blocks allocated since the last commit (appends stay one extent), a crash keeping the old data readable, damaged data and checksums failing with EIO, truncate rewriting the last block. */
#include "t_fs.h"

static void add_ext(struct meta *m, uint64_t off, uint32_t len, uint64_t moff)
{
	struct fmt_rec r = { .type = REC_EXTENT, .ino = 2, .off = off, .len = len, .member = 0,
			     .moff = moff };

	T_EQ(meta_apply(m, &r), 0);
}

static void punch(struct meta *m, uint64_t off, uint64_t len)
{
	struct fmt_rec r = { .type = REC_PUNCH, .ino = 2, .off = off, .plen = len };

	T_EQ(meta_apply(m, &r), 0);
}

#define K4 4096u

/* Punch against every extent shape: inside one (split), across ends, over holes. */
static void test_punch(void)
{
	struct meta m;
	struct fmt_rec r = { .type = REC_INODE, .ino = 2 };
	struct inode *ino;

	T_EQ(meta_init(&m, 1 << 20, 1), 0);
	r.a.mode = S_IFREG | 0644;
	r.a.nlink = 1;
	r.a.size = 1 << 20;
	T_EQ(meta_apply(&m, &r), 0);
	ino = meta_iget(&m, 2);
	add_ext(&m, 0, 16 * K4, 100 * K4);	       /* blocks 0..15 */
	add_ext(&m, 20 * K4, 4 * K4, 200 * K4);        /* blocks 20..23 */
	add_ext(&m, 30 * K4, 10 * K4, 300 * K4);       /* blocks 30..39 */
	T_EQ(ino->next, 3);

	punch(&m, 4 * K4, 2 * K4); /* inside the first: split */
	T_EQ(ino->next, 4);
	T_CHECK(ino->ext[0].off == 0 && ino->ext[0].len == 4 * K4 && ino->ext[0].moff == 100 * K4, "head");
	T_CHECK(ino->ext[1].off == 6 * K4 && ino->ext[1].len == 10 * K4 && ino->ext[1].moff == 106 * K4,
		"tail %llu %u %llu", (unsigned long long)ino->ext[1].off, ino->ext[1].len,
		(unsigned long long)ino->ext[1].moff);

	punch(&m, 14 * K4, 18 * K4); /* end of [6,16), all of [20,24), head of [30,40) */
	T_EQ(ino->next, 3);
	T_CHECK(ino->ext[1].off == 6 * K4 && ino->ext[1].len == 8 * K4, "cut end");
	T_CHECK(ino->ext[2].off == 32 * K4 && ino->ext[2].len == 8 * K4 && ino->ext[2].moff == 302 * K4,
		"cut head");

	punch(&m, 50 * K4, 5 * K4); /* only a hole: nothing changes */
	T_EQ(ino->next, 3);
	punch(&m, 0, 64 * K4); /* everything */
	T_EQ(ino->next, 0);
	meta_destroy(&m);
}

static const struct extent *first_ext(struct fs *fs, uint64_t ino)
{
	struct inode *i = meta_iget(&fs->meta, ino);

	return i && i->next ? &i->ext[0] : NULL;
}

/* Overwrites go to new space; the old space comes back once the change is durable. */
static void test_cow(void)
{
	struct fs fs;
	uint64_t f, free0, moff0;
	char *buf = malloc(1 << 20), *want = malloc(64 << 10);
	const char *got;

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "cow");
	T_EQ(t_write(&fs, f, 0, 8 << 20, 1), 0);
	T_EQ(fs_fsync(&fs), 0);
	free0 = alloc_free_bytes(&fs.alloc);
	moff0 = first_ext(&fs, f)->moff;

	T_EQ(t_write(&fs, f, 0, 8 << 20, 2), 0);
	T_CHECK(first_ext(&fs, f)->moff != moff0, "an overwrite stayed in place");
	T_EQ(t_verify(&fs, f, 0, 8 << 20, 2), 0);
	T_EQ(fs_fsync(&fs), 0);
	T_EQ(alloc_free_bytes(&fs.alloc), free0);

	/* an unaligned overwrite across block edges keeps the bytes around it */
	t_fill(buf, 10000, 5000, 3);
	T_EQ(fs_write(&fs, f, buf, 10000, 5000), 10000);
	T_EQ(fs_read(&fs, f, 0, 64 << 10, &got), 64 << 10);
	t_fill(want, 64 << 10, 0, 2);
	t_fill(want + 5000, 10000, 5000, 3);
	T_CHECK(!memcmp(got, want, 64 << 10), "unaligned overwrite");
	T_EQ(fs_fsync(&fs), 0);
	T_EQ(alloc_free_bytes(&fs.alloc), free0);
	t_umount(&fs);

	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(fs_read(&fs, f, 0, 64 << 10, &got), 64 << 10);
	T_CHECK(!memcmp(got, want, 64 << 10), "unaligned overwrite after remount");
	T_EQ(t_verify(&fs, f, 64 << 10, (8 << 20) - (64 << 10), 2), 0);
	t_umount(&fs);
	free(buf);
	free(want);
}

/*
 * Blocks allocated since the last commit are rewritten in place (nothing durable refers
 * to them), so small appends do not fragment a file; once committed, they are not.
 */
static void test_fresh(void)
{
	struct fs fs;
	uint64_t f, moff;
	char *p = malloc(1000), *want = malloc(1 << 20);
	const char *got;

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "appends");
	for (int i = 0; i < 1000; i++) {
		memset(p, 'a' + i % 26, 1000);
		memcpy(want + i * 1000, p, 1000);
		T_EQ(fs_write(&fs, f, p, 1000, (uint64_t)i * 1000), 1000);
	}
	T_EQ(meta_iget(&fs.meta, f)->next, 1); /* one extent: appends stayed in place */
	moff = first_ext(&fs, f)->moff;
	T_EQ(fs_read(&fs, f, 0, 1000000, &got), 1000000);
	T_CHECK(!memcmp(got, want, 1000000), "appended bytes");
	T_EQ(fs_fsync(&fs), 0);
	T_EQ(fs_write(&fs, f, "Z", 1, 0), 1); /* committed now: copy on write */
	T_CHECK(first_ext(&fs, f)->moff != moff, "a committed block was rewritten in place");
	want[0] = 'Z';
	t_umount(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(fs_read(&fs, f, 0, 1000000, &got), 1000000);
	T_CHECK(!memcmp(got, want, 1000000), "appended bytes after remount");
	t_umount(&fs);
	free(p);
	free(want);
}

/*
 * A crash before the commit leaves the old data, readable (no checksum mismatch), even
 * when the new copy was itself rewritten in place before the crash.
 */
static void test_crash(void)
{
	struct fs fs;
	uint64_t f;

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "crash");
	T_EQ(t_write(&fs, f, 0, 4 << 20, 5), 0);
	T_EQ(fs_fsync(&fs), 0);
	T_EQ(t_write(&fs, f, 0, 4 << 20, 6), 0); /* not committed: new blocks */
	T_EQ(t_write(&fs, f, 0, 4 << 20, 7), 0); /* those, in place */
	T_EQ(t_verify(&fs, f, 0, 4 << 20, 7), 0);
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(t_verify(&fs, f, 0, 4 << 20, 5), 0);
	/* and the in-place rewrite of uncommitted blocks is durable once committed */
	T_EQ(t_write(&fs, f, 0, 4 << 20, 8), 0);
	T_EQ(t_write(&fs, f, 1 << 20, 1 << 20, 9), 0);
	T_EQ(fs_fsync(&fs), 0);
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(t_verify(&fs, f, 0, 1 << 20, 8), 0);
	T_EQ(t_verify(&fs, f, 1 << 20, 1 << 20, 9), 0);
	T_EQ(t_verify(&fs, f, 2 << 20, 2 << 20, 8), 0);
	t_umount(&fs);
}

/* Damage in data or in its checksum: EIO for the block, the rest of the file reads. */
static void test_damage(void)
{
	struct fs fs;
	uint64_t f, moff, cpos;
	uint32_t member;
	char *raw = util_aligned_alloc(K4), *want = malloc(K4);
	const char *got;
	struct inode *ino;

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "damaged");
	T_EQ(t_write(&fs, f, 0, 1 << 20, 7), 0);
	member = first_ext(&fs, f)->member;
	moff = first_ext(&fs, f)->moff + 3 * K4; /* block 3 */
	cpos = fmt_csum_pos(&fs.members[member].sb, moff);
	t_umount(&fs);

	for (int round = 0; round < 2; round++) {
		uint64_t at = round == 0 ? moff + 100 : cpos + 3;

		t_flip(member, at);
		T_EQ(t_mount(&fs, 0), 0);
		T_EQ(fs_read(&fs, f, 3 * K4, K4, &got), -EIO);
		T_EQ(fs_read(&fs, f, 0, 1 << 20, &got), -EIO); /* a read covering it */
		T_EQ(t_verify(&fs, f, 0, 3 * K4, 7), 0);
		T_EQ(t_verify(&fs, f, 4 * K4, (1 << 20) - 4 * K4, 7), 0);
		/* a partial write into the block must not launder the damage */
		T_EQ(fs_write(&fs, f, "x", 1, 3 * K4 + 10), -EIO);
		if (round == 0) {
			/* the bytes really are wrong: verification is what stops them */
			ino = meta_iget(&fs.meta, f);
			pthread_rwlock_rdlock(&ino->iolock);
			T_EQ(fs_read_blocks(&fs, ino, raw, 3 * K4, 4 * K4, 0), 0);
			pthread_rwlock_unlock(&ino->iolock);
			t_fill(want, K4, 3 * K4, 7);
			T_CHECK(memcmp(raw, want, K4) != 0, "flip not on disk");
		}
		/* overwriting the whole block gives it new, good data */
		t_umount(&fs);
		t_flip(member, at);
	}
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(t_verify(&fs, f, 0, 1 << 20, 7), 0);
	t_umount(&fs);
	free(raw);
	free(want);
}

/* Where file offset @foff of @ino lives: member and member offset. */
static void locate(struct fs *fs, uint64_t ino_nr, uint64_t foff, uint32_t *member, uint64_t *moff)
{
	struct inode *ino = meta_iget(&fs->meta, ino_nr);
	size_t k = meta_ext_find(ino, foff);

	*member = ino->ext[k].member;
	*moff = ino->ext[k].moff + (foff - ino->ext[k].off);
}

static int read_range(struct fs *fs, uint64_t ino_nr, char *buf, uint64_t a, uint64_t b)
{
	struct inode *ino = meta_iget(&fs->meta, ino_nr);
	int ret;

	pthread_rwlock_rdlock(&ino->iolock);
	ret = fs_read_blocks(fs, ino, buf, a, b, 1);
	pthread_rwlock_unlock(&ino->iolock);
	return ret;
}

/*
 * Large verified reads are checked by a pool of threads, each piece as soon as it has
 * arrived; damage anywhere still fails the read, and the rest reads.
 */
static void test_pooled_verify(void)
{
	const uint64_t len = 96 << 20, bad[2] = { 10 << 20, 70 << 20 };
	struct fs fs;
	uint64_t f, moff[2];
	uint32_t member[2];
	char *buf = util_aligned_alloc(len), *want = malloc(len);

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "big");
	T_EQ(t_write(&fs, f, 0, len, 11), 0);
	T_EQ(read_range(&fs, f, buf, 0, len), 0);
	t_fill(want, len, 0, 11);
	T_CHECK(!memcmp(buf, want, len), "pooled verified read returned other bytes");
	for (int k = 0; k < 2; k++)
		locate(&fs, f, bad[k], &member[k], &moff[k]);
	t_umount(&fs);
	for (int k = 0; k < 2; k++)
		t_flip(member[k], moff[k] + 5);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(read_range(&fs, f, buf, 0, len), -EIO);
	T_EQ(read_range(&fs, f, buf, 0, 60 << 20), -EIO);   /* only the first damage */
	T_EQ(read_range(&fs, f, buf, 40 << 20, len), -EIO); /* only the second */
	T_EQ(read_range(&fs, f, buf, 0, bad[0]), 0);
	T_EQ(read_range(&fs, f, buf, bad[0] + DMAFS_BLOCK, bad[1]), 0);
	T_CHECK(!memcmp(buf, want + bad[0] + DMAFS_BLOCK, bad[1] - bad[0] - DMAFS_BLOCK), "bytes between");
	T_EQ(read_range(&fs, f, buf, bad[1] + DMAFS_BLOCK, len), 0);
	t_umount(&fs);
	for (int k = 0; k < 2; k++)
		t_flip(member[k], moff[k] + 5);
	free(buf);
	free(want);
}

/* Truncating into a block writes a new copy of it with the tail zeroed. */
static void test_truncate(void)
{
	struct fs fs;
	struct stat st;
	uint64_t f;
	char *want = calloc(1, 3 * K4);
	const char *got;

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "trunc");
	T_EQ(t_write(&fs, f, 0, 3 * K4, 9), 0);
	T_EQ(fs_fsync(&fs), 0);
	st.st_size = K4 + 100;
	T_EQ(fs_setattr(&fs, NULL, f, &st, FUSE_SET_ATTR_SIZE, &st), 0);
	st.st_size = 3 * K4;
	T_EQ(fs_setattr(&fs, NULL, f, &st, FUSE_SET_ATTR_SIZE, &st), 0);
	t_fill(want, K4 + 100, 0, 9);
	T_EQ(fs_read(&fs, f, 0, 3 * K4, &got), 3 * K4);
	T_CHECK(!memcmp(got, want, 3 * K4), "truncate down and up");
	t_umount(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(fs_read(&fs, f, 0, 3 * K4, &got), 3 * K4);
	T_CHECK(!memcmp(got, want, 3 * K4), "truncate down and up, after remount");
	t_umount(&fs);
	free(want);
}

/* A member of format version 1 (before checksums) is refused with a message that says so. */
static void test_old_version(void)
{
	char path[512], err[1024] = "";
	uint8_t b[FMT_SB_SIZE];
	struct fmt_sb sb;
	struct member *ms;
	FILE *f;

	snprintf(path, sizeof(path), "%s/m0.img", t_dir);
	f = fopen(path, "r+b");
	T_CHECK(f && fread(b, 1, sizeof(b), f) == sizeof(b), "read superblock");
	T_EQ(fmt_sb_decode(b, &sb), 0);
	sb.version = 1;
	fmt_sb_encode(&sb, b);
	for (int c = 0; c < 2; c++) {
		fseek(f, c ? (long)fmt_sb_copy_offset(sb.member_size) : 0, SEEK_SET);
		T_CHECK(fwrite(b, 1, sizeof(b), f) == sizeof(b), "write superblock");
	}
	fclose(f);
	T_EQ(members_open(t_list, 1, &ms, err, sizeof(err)), -EPROTONOSUPPORT);
	T_CHECK(strstr(err, "format version 1; this dmafs reads versions 2 to 5 (made before data checksums)") != NULL,
		"message: %s", err);
}

int main(void)
{
	t_images(2, 128, NULL);
	test_punch();
	test_cow();
	test_fresh();
	test_crash();
	test_damage();
	test_pooled_verify();
	test_truncate();
	test_old_version(); /* last: it leaves member 0 unusable */
	return t_done("unit_csum");
}
