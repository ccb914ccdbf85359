// SPDX-License-Identifier: MIT
/* Description: data checksums and copy-on-write: punch records, overwrites in new space, a crash keeping the old data readable, damaged data and checksums failing with EIO, truncate rewriting the last block. */
#include "t_fs.h"

/* XOR one byte at @off of member image @i (the filesystem must not be mounted). */
static void flip(int i, uint64_t off)
{
	char path[512];
	FILE *f;
	int c;

	snprintf(path, sizeof(path), "%s/m%d.img", t_dir, i);
	f = fopen(path, "r+b");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, off, SEEK_SET);
	c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);
}

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

/* A crash before the commit leaves the old data, readable (no checksum mismatch). */
static void test_crash(void)
{
	struct fs fs;
	uint64_t f;

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "crash");
	T_EQ(t_write(&fs, f, 0, 4 << 20, 5), 0);
	T_EQ(fs_fsync(&fs), 0);
	T_EQ(t_write(&fs, f, 0, 4 << 20, 6), 0); /* not committed */
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(t_verify(&fs, f, 0, 4 << 20, 5), 0);
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

		flip(member, at);
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
		flip(member, at);
	}
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(t_verify(&fs, f, 0, 1 << 20, 7), 0);
	t_umount(&fs);
	free(raw);
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
	T_EQ(fs_setattr(&fs, f, &st, FUSE_SET_ATTR_SIZE, &st), 0);
	st.st_size = 3 * K4;
	T_EQ(fs_setattr(&fs, f, &st, FUSE_SET_ATTR_SIZE, &st), 0);
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

int main(void)
{
	t_images(2, 64, NULL);
	test_punch();
	test_cow();
	test_crash();
	test_damage();
	test_truncate();
	return t_done("unit_csum");
}
