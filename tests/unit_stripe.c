// SPDX-License-Identifier: MIT
/* Description: stripe mapping and data path: member of each stripe unit, one contiguous run per member, unaligned I/O, holes, truncate. */
#include "t_fs.h"

static void test_mapping(void)
{
	struct fs fs;
	uint64_t f, su, bytes[4] = { 0 };
	struct inode *ino;
	int runs[4] = { 0 };
	uint64_t last_end[4] = { 0 };

	T_EQ(t_mount(&fs, 0), 0);
	su = fs.su;
	f = t_create(&fs, FMT_ROOT_INO, "big");
	T_EQ(t_write(&fs, f, 0, 64 << 20, 7), 0);
	ino = meta_iget(&fs.meta, f);
	for (size_t i = 0; i < ino->next; i++) {
		const struct extent *e = &ino->ext[i];

		T_EQ(e->member, (ino->a.start_member + e->off / su) % 4);
		T_CHECK(e->off / su == (e->off + e->len - 1) / su, "extent crosses a stripe unit");
		bytes[e->member] += e->len;
		if (e->moff != last_end[e->member])
			runs[e->member]++;
		last_end[e->member] = e->moff + e->len;
	}
	for (int m = 0; m < 4; m++) {
		T_EQ(bytes[m], 16 << 20);
		T_EQ(runs[m], 1); /* a sequentially written file is one run per member */
	}
	T_EQ(t_verify(&fs, f, 0, 64 << 20, 7), 0);
	{
		int err;
		char *t = fs_layout(&fs, f, 0, &err);

		T_CHECK(t && !strncmp(t, "stripe_unit=1048576 members=4", 29), "layout: %s", t);
		free(t);
	}
	t_umount(&fs);
}

static void test_unaligned_holes_truncate(void)
{
	struct fs fs;
	uint64_t f;
	unsigned long long seed = 5;
	size_t size = 5 << 20;
	char *model = calloc(1, size + (1 << 20));
	char *p = malloc(1 << 20);
	const char *got;
	ssize_t r;

	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "rw");
	uint64_t fsize = 0;
	for (int i = 0; i < 400; i++) {
		uint64_t off = t_rand(&seed) % size;
		size_t len = 1 + t_rand(&seed) % (300 << 10);

		if (off + len > size)
			len = size - off;
		for (size_t k = 0; k < len; k++)
			p[k] = (char)t_rand(&seed);
		T_EQ(fs_write(&fs, f, p, len, off), (ssize_t)len);
		memcpy(model + off, p, len);
		if (off + len > fsize)
			fsize = off + len;
		if (i % 50 == 49) {
			/* truncate down to an odd size and back up: the cut bytes read as zeros */
			uint64_t cut = t_rand(&seed) % fsize;
			struct stat in = { .st_size = cut }, out;

			T_EQ(fs_setattr(&fs, NULL, f, &in, FUSE_SET_ATTR_SIZE, &out), 0);
			memset(model + cut, 0, size - cut);
			fsize = cut;
		}
	}
	for (uint64_t off = 0; off < fsize; off += 777777) {
		size_t len = fsize - off < 999999 ? fsize - off : 999999;

		r = fs_read(&fs, f, off, len, &got);
		T_EQ(r, (ssize_t)len);
		T_CHECK(r == (ssize_t)len && !memcmp(got, model + off, len), "mismatch at %llu", (unsigned long long)off);
	}
	/* a sparse write far away: the hole reads as zeros and allocates nothing */
	uint64_t before = alloc_free_bytes(&fs.alloc);
	T_EQ(fs_write(&fs, f, "x", 1, 1ull << 34), 1);
	T_CHECK(before - alloc_free_bytes(&fs.alloc) == DMAFS_BLOCK, "sparse write allocated %llu",
		(unsigned long long)(before - alloc_free_bytes(&fs.alloc)));
	r = fs_read(&fs, f, (1ull << 33), 4096, &got);
	T_EQ(r, 4096);
	{
		int zero = 1;

		for (int k = 0; k < 4096; k++)
			zero &= got[k] == 0;
		T_CHECK(zero, "hole not zero");
	}
	r = fs_read(&fs, f, (1ull << 34) - 1, 10, &got);
	T_EQ(r, 2);
	T_CHECK(r == 2 && got[0] == 0 && got[1] == 'x', "bytes around the sparse write");
	t_umount(&fs);
	/* everything survives a remount */
	T_EQ(t_mount(&fs, 0), 0);
	f = t_lookup(&fs, FMT_ROOT_INO, "rw");
	r = fs_read(&fs, f, 0, fsize < (1 << 20) ? fsize : (1 << 20), &got);
	T_CHECK(r > 0 && !memcmp(got, model, r), "data after remount");
	t_umount(&fs);
	free(model);
	free(p);
}

static void test_enospc(void)
{
	struct fs fs;
	uint64_t f, keep, written = 0;
	char *p = malloc(1 << 20);
	ssize_t w;

	T_EQ(t_mount(&fs, 0), 0);
	/* a file written before the filesystem fills: it must read back whole afterwards */
	keep = t_create(&fs, FMT_ROOT_INO, "keep");
	T_EQ(t_write(&fs, keep, 0, 3 << 20, 11), 0);
	f = t_create(&fs, FMT_ROOT_INO, "fill");
	memset(p, 0xab, 1 << 20);
	while ((w = fs_write(&fs, f, p, 1 << 20, written)) > 0)
		written += w;
	T_EQ(w, -ENOSPC);
	{
		/* strict round-robin: the write stops when the next unit's member is full;
		 * the others may still hold space, usable by files starting elsewhere */
		struct inode *ino = meta_iget(&fs.meta, f);
		uint32_t m = meta_slot_member(&fs.meta, ino, written / fs.su);

		T_EQ(alloc_member_free(&fs.alloc, m), 0);
	}
	T_CHECK(written > 200ull << 20, "only %llu bytes fit", (unsigned long long)written);
	/* the rest of the filesystem still works: the file written before reads back, every
	 * byte; and deleting frees the space */
	T_EQ(t_lookup(&fs, FMT_ROOT_INO, "keep"), keep);
	T_EQ(t_verify(&fs, keep, 0, 3 << 20, 11), 0);
	T_EQ(fs_unlink(&fs, FMT_ROOT_INO, "fill", 0), 0);
	fs_forget(&fs, f, 2);
	T_EQ(fs_fsync(&fs), 0);
	T_CHECK(alloc_free_bytes(&fs.alloc) >= written, "space not returned");
	t_umount(&fs);
	free(p);
}

int main(void)
{
	t_images(4, 96, NULL);
	test_mapping();
	test_unaligned_holes_truncate();
	test_enospc();
	return t_done("unit_stripe");
}
