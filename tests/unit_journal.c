// SPDX-License-Identifier: MIT
/* Description: metadata log: replay after clean unmount and crash, torn and corrupt tails, mirror fallback, corrupt snapshot, orphans, compaction, growth into log areas and a crash in every step of a move. */
#include "t_fs.h"
#include "store/journal-int.h"

/* Offset of the active half on member @m and the tail (next batch position) inside it. */
static void log_pos(struct fs *fs, uint64_t *half_base, uint64_t *tail)
{
	*half_base = fs->j.log_offset + (uint64_t)fs->j.active * fs->j.half;
	*tail = fs->j.tail;
}

/* Crash, then damage a payload byte of the batch that starts at @tail (from log_pos), on
 * both copies of the log: a torn batch. */
static void crash_tearing(struct fs *fs, uint64_t base, uint64_t tail)
{
	t_crash(fs);
	t_flip(0, base + tail + FMT_TX_HDR + 10);
	t_flip(1, base + tail + FMT_TX_HDR + 10);
}

static void test_persist_and_crash(void)
{
	struct fs fs;
	uint64_t a, d, base, tail;
	struct stat st;

	T_EQ(t_mount(&fs, 0), 0);
	a = t_create(&fs, FMT_ROOT_INO, "a");
	T_EQ(t_write(&fs, a, 0, 3 << 20, 1), 0);
	T_EQ(fs_mknod(&fs, &t_root, FMT_ROOT_INO, "dir", S_IFDIR | 0755, 0, NULL, &st), 0);
	d = st.st_ino;
	T_EQ(fs_mknod(&fs, &t_root, d, "link", S_IFLNK | 0777, 0, "../a", &st), 0);
	T_EQ(fs_setxattr(&fs, NULL, a, "user.k", "v", 1, 0), 0);
	T_EQ(fs_fsync(&fs), 0);
	/* after the fsync: b is committed, then c only appended (never committed) */
	t_create(&fs, d, "b");
	T_EQ(fs_fsync(&fs), 0);
	log_pos(&fs, &base, &tail);
	t_create(&fs, d, "c");
	t_crash(&fs);

	T_EQ(t_mount(&fs, 0), 0);
	a = t_lookup(&fs, FMT_ROOT_INO, "a");
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(a && d, "a or dir missing after crash");
	T_CHECK(t_lookup(&fs, d, "b"), "fsynced b lost");
	T_CHECK(!t_lookup(&fs, d, "c"), "uncommitted c present");
	T_EQ(fs_getattr(&fs, a, &st), 0);
	T_EQ(st.st_size, 3 << 20);
	T_EQ(t_verify(&fs, a, 0, 3 << 20, 1), 0);
	{
		char buf[64];

		T_EQ(fs_readlink(&fs, t_lookup(&fs, d, "link"), buf, sizeof(buf)), 0);
		T_CHECK(!strcmp(buf, "../a"), "symlink target %s", buf);
		T_EQ(fs_getxattr(&fs, a, "user.k", buf, sizeof(buf)), 1);
	}
	/* torn tail: two committed batches, the second damaged on both mirrors */
	t_create(&fs, d, "e");
	T_EQ(fs_fsync(&fs), 0);
	log_pos(&fs, &base, &tail);
	t_create(&fs, d, "f");
	T_EQ(fs_fsync(&fs), 0);
	crash_tearing(&fs, base, tail); /* the batch holding f */
	T_EQ(t_mount(&fs, 0), 0);
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(t_lookup(&fs, d, "e"), "batch before the torn one lost");
	T_CHECK(!t_lookup(&fs, d, "f"), "torn batch was trusted");
	/* a damaged batch header likewise ends the log */
	t_create(&fs, d, "g");
	T_EQ(fs_fsync(&fs), 0);
	log_pos(&fs, &base, &tail);
	t_create(&fs, d, "h");
	T_EQ(fs_fsync(&fs), 0);
	t_crash(&fs);
	t_flip(0, base + tail + 17);
	t_flip(1, base + tail + 17);
	T_EQ(t_mount(&fs, 0), 0);
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(t_lookup(&fs, d, "g") && !t_lookup(&fs, d, "h"), "header damage handling");
	/* only one mirror damaged: the other copy still has everything */
	t_create(&fs, d, "i");
	T_EQ(fs_fsync(&fs), 0);
	log_pos(&fs, &base, &tail);
	t_crash(&fs);
	t_flip(0, base + 40); /* active half header on member 0 */
	T_EQ(t_mount(&fs, 0), 0);
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(t_lookup(&fs, d, "i"), "mirror copy not used");
	t_umount(&fs);
}

/*
 * A torn batch with an intact one after it: the mount replays up to the torn one; the next
 * batch written must not be followed, at the next mount, by the intact stale one (it has
 * the right generation and, once a batch of the same size takes the torn one's place, the
 * right position and sequence number). A fresh generation before any append prevents it.
 */
static void test_torn_then_append(void)
{
	struct fs fs;
	uint64_t d, base, tail;

	T_EQ(t_mount(&fs, 0), 0);
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	t_create(&fs, d, "te");
	T_EQ(fs_fsync(&fs), 0);
	log_pos(&fs, &base, &tail);
	t_create(&fs, d, "tf");
	T_EQ(fs_fsync(&fs), 0);
	t_create(&fs, d, "tg");
	T_EQ(fs_fsync(&fs), 0);
	crash_tearing(&fs, base, tail); /* the batch holding tf */
	T_EQ(t_mount(&fs, 0), 0);
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(t_lookup(&fs, d, "te") && !t_lookup(&fs, d, "tf") && !t_lookup(&fs, d, "tg"),
		"replay past a torn batch");
	t_create(&fs, d, "tx"); /* the same size as tf's batch */
	T_EQ(fs_fsync(&fs), 0);
	T_CHECK(!fs.j.compact_due, "the first commit compacted");
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(t_lookup(&fs, d, "tx"), "fsynced tx lost");
	T_CHECK(!t_lookup(&fs, d, "tg"), "a stale batch after the torn one was replayed");
	t_umount(&fs);
}

/*
 * After a clean unmount the next mount does not compact (the log ends with the clean
 * mark); it commits a batch that changes nothing first, so that a crash that tears its
 * first real batch still leaves a log whose replay ends on a batch other than the mark.
 */
static void test_clean_mount(void)
{
	struct fs fs;
	uint64_t d, base, tail;

	T_EQ(t_mount(&fs, 0), 0);
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	t_create(&fs, d, "c1");
	t_umount(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_CHECK(fs.j.clean && !fs.j.compact_due, "a mount after a clean unmount compacts");
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(t_lookup(&fs, d, "c1"), "c1 lost by a clean unmount");
	/* the first batch of this mount torn by a crash */
	log_pos(&fs, &base, &tail);
	t_create(&fs, d, "c2");
	T_EQ(fs_fsync(&fs), 0);
	crash_tearing(&fs, base, tail);
	T_EQ(t_mount(&fs, 0), 0);
	T_CHECK(!fs.j.clean && fs.j.compact_due, "a log torn after a clean mount was taken as clean");
	d = t_lookup(&fs, FMT_ROOT_INO, "dir");
	T_CHECK(t_lookup(&fs, d, "c1") && !t_lookup(&fs, d, "c2"), "replay past a torn batch");
	t_umount(&fs);
}

static void test_corrupt_snapshot(void)
{
	struct fs fs;
	uint64_t base, tail;

	T_EQ(t_mount(&fs, 0), 0);
	log_pos(&fs, &base, &tail);
	t_crash(&fs);
	/* the snapshot of the active half on both mirrors; the other half is older but its
	 * generation is lower, so the mount must refuse rather than silently go back */
	t_flip(0, base + DMAFS_BLOCK + 3);
	t_flip(1, base + DMAFS_BLOCK + 3);
	{
		char err[1024] = "";
		struct member *ms;
		int n = members_open(t_list, 0, &ms, err, sizeof(err));
		int ret;

		T_CHECK(n == 2, "members_open: %s", err);
		ret = fs_mount(&fs, ms, n, 0, err, sizeof(err));
		T_EQ(ret, -EUCLEAN);
		T_CHECK(strstr(err, "snapshot checksum") != NULL, "message: %s", err);
		members_close(ms, n);
	}
	/* repair for the next tests: flip back */
	t_flip(0, base + DMAFS_BLOCK + 3);
	t_flip(1, base + DMAFS_BLOCK + 3);
}

static void test_orphans_and_compaction(void)
{
	struct fs fs;
	uint64_t f, free0;
	char name[64];

	T_EQ(t_mount(&fs, 0), 0);
	free0 = alloc_free_bytes(&fs.alloc);
	f = t_create(&fs, FMT_ROOT_INO, "orphan");
	T_EQ(t_write(&fs, f, 0, 2 << 20, 3), 0);
	T_EQ(fs_open(&fs, f, O_RDONLY), 0);
	T_EQ(fs_unlink(&fs, FMT_ROOT_INO, "orphan", 0), 0);
	T_EQ(t_verify(&fs, f, 0, 2 << 20, 3), 0); /* still readable while open */
	T_EQ(fs_fsync(&fs), 0);
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_CHECK(!meta_iget(&fs.meta, f), "orphan inode survived the remount");
	T_EQ(alloc_free_bytes(&fs.alloc), free0);

	/* enough metadata to wrap a 4 MiB log half several times */
	unsigned long compactions = fs.j.compactions;
	for (int i = 0; i < 30000; i++) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%06d", i);
		uint64_t ino = t_create(&fs, FMT_ROOT_INO, name);

		fs_forget(&fs, ino, 1);
		if (i % 2)
			T_EQ(fs_unlink(&fs, FMT_ROOT_INO, name, 0), 0);
		if (i % 500 == 0)
			T_EQ(fs_fsync(&fs), 0);
	}
	T_EQ(fs_fsync(&fs), 0);
	T_CHECK(fs.j.compactions > compactions + 1, "log never compacted (%lu)", (unsigned long)fs.j.compactions);
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	for (int i = 0; i < 30000; i += 997) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%06d", i);
		T_CHECK(!!t_lookup(&fs, FMT_ROOT_INO, name) == !(i % 2), "%s wrong after compaction", name);
	}
	t_umount(&fs);
}

/* Make the images' superblocks and log headers say @version (fresh images only hold
 * records that every version reads). */
static void set_version(uint32_t version)
{
	struct member *ms;
	char err[512];
	int n = members_open(t_list, 0, &ms, err, sizeof(err));
	uint8_t *b = util_aligned_alloc(DMAFS_BLOCK);

	T_CHECK(n > 0 && b, "members_open: %s", err);
	for (int i = 0; i < n; i++) {
		ms[i].sb.version = version;
		T_EQ(member_write_sb(&ms[i]), 0);
		for (int h = 0; h < 2 && fmt_has_log(i); h++) {
			uint64_t off = ms[i].sb.log_offset + h * ms[i].sb.log_half;
			struct fmt_loghdr lh;

			T_EQ(member_pread(&ms[i], b, DMAFS_BLOCK, off), 0);
			if (fmt_loghdr_decode(b, &lh))
				continue;
			lh.version = version;
			fmt_loghdr_encode(&lh, b);
			T_EQ(member_pwrite(&ms[i], b, DMAFS_BLOCK, off), 0);
		}
	}
	free(b);
	members_close(ms, n);
}

/*
 * A version 2 filesystem: read as it is by a read-only mount, which leaves it version 2;
 * a read-write mount makes it version 3 first, and new inodes then get generation numbers
 * that survive a remount, while old ones keep 0.
 */
static void test_upgrade(void)
{
	struct fs fs;
	uint64_t a, b;

	t_images(2, 64, NULL);
	T_EQ(t_mount(&fs, 0), 0);
	a = t_create(&fs, FMT_ROOT_INO, "before");
	T_CHECK(fs_generation(&fs, a) != 0, "no generation on a version 3 filesystem");
	t_umount(&fs);
	/* "before" has a generation: a version 2 log could not hold it; start afresh */
	t_rmdir();
	t_images(2, 64, NULL);
	set_version(2);
	T_EQ(t_mount(&fs, 1), 0);
	T_EQ(t_ms[0].sb.version, 2);
	T_EQ(t_ms[1].sb.version, 2);
	t_umount(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(t_ms[0].sb.version, 3);
	T_EQ(t_ms[1].sb.version, 3);
	T_EQ(fs_generation(&fs, FMT_ROOT_INO), 0);
	b = t_create(&fs, FMT_ROOT_INO, "after");
	a = fs_generation(&fs, b);
	T_CHECK(a != 0, "new inode without a generation after the upgrade");
	t_umount(&fs);
	T_EQ(t_mount(&fs, 1), 0);
	T_EQ(t_ms[0].sb.version, 3);
	T_EQ(t_lookup(&fs, FMT_ROOT_INO, "after"), b);
	T_EQ(fs_generation(&fs, b), a);
	t_umount(&fs);
}

/* Read (@save) or write back the two log half headers of log copy @i. */
static void headers(int i, uint8_t *b, int save)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/m%d.img", t_dir, i);
	f = fopen(path, "r+b");
	T_CHECK(f != NULL, "open %s", path);
	for (int h = 0; h < 2 && f; h++) {
		fseek(f, FMT_LOG_OFFSET + (long)h * (4 << 20), SEEK_SET);
		if (save)
			T_EQ(fread(b + h * DMAFS_BLOCK, 1, DMAFS_BLOCK, f), DMAFS_BLOCK);
		else
			T_EQ(fwrite(b + h * DMAFS_BLOCK, 1, DMAFS_BLOCK, f), DMAFS_BLOCK);
	}
	if (f)
		fclose(f);
}

/* Create "g%06d" files from *@next on, fsync after each 100, until the log's place changes. */
static void create_until_moved(struct fs *fs, int *next, uint8_t saved[2][2 * DMAFS_BLOCK])
{
	uint64_t len0 = fs->j.ext_len, off0 = fs->j.area[0][0].off[0];
	char name[64];

	while (fs->j.ext_len == len0 && fs->j.area[0][0].off[0] == off0 && *next < 400000) {
		/* the headers as they are before this step's commits */
		headers(0, saved[0], 1);
		headers(1, saved[1], 1);
		for (int k = 0; k < 100; k++, (*next)++) {
			uint64_t ino;

			snprintf(name, sizeof(name), "g%06d-with-a-name-that-takes-some-log-room", *next);
			ino = t_create(fs, FMT_ROOT_INO, name);
			if (!ino)
				return; /* said by t_create */
			fs_forget(fs, ino, 1);
		}
		T_EQ(fs_fsync(fs), 0);
	}
}

static void check_names(struct fs *fs, int from, int to)
{
	char name[64];
	int missing = 0;

	for (int i = from; i < to; i++) {
		snprintf(name, sizeof(name), "g%06d-with-a-name-that-takes-some-log-room", i);
		missing += !t_lookup(fs, FMT_ROOT_INO, name);
	}
	T_CHECK(missing == 0, "%d of the names %d..%d missing", missing, from, to - 1);
}

/*
 * The log outgrows its 4 MiB halves: it moves into two areas of the data region (a version
 * 3 filesystem becomes version 4 then), later into larger ones, and back when the files go. A crash in each step of
 * a move (neither, one or the other copy's new header written) replays what was
 * committed, and the space of the areas in use is never given to a file.
 */
static void test_grow(void)
{
	static uint8_t saved[2][2 * DMAFS_BLOCK];
	struct fs fs;
	int next = 0, before;
	uint64_t len1, free0, big;

	set_version(3); /* as a filesystem made before logs grew: it stays version 3 until then */
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(fs.j.ext_len, 0);
	T_EQ(t_ms[0].sb.version, 3);
	free0 = alloc_free_bytes(&fs.alloc);
	create_until_moved(&fs, &next, saved);
	T_CHECK(fs.j.ext_len > fs.j.half, "log moved to areas of %llu bytes", (unsigned long long)fs.j.ext_len);
	T_EQ(t_ms[0].sb.version, FMT_VERSION_GROW);
	T_EQ(t_ms[1].sb.version, FMT_VERSION_GROW);
	T_EQ(alloc_free_bytes(&fs.alloc) + 4 * fs.j.ext_len <= free0, 1);
	/* a file written after the move must not land in the areas: replayed and checked */
	big = t_create(&fs, FMT_ROOT_INO, "big");
	T_EQ(t_write(&fs, big, 0, 8 << 20, 7), 0);
	T_EQ(fs_fsync(&fs), 0);
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0); /* map_space refuses areas that overlap an extent */
	check_names(&fs, 0, next);
	T_EQ(t_verify(&fs, t_lookup(&fs, FMT_ROOT_INO, "big"), 0, 8 << 20, 7), 0);

	/* the next move, torn: each copy's old headers put back in turn, then both */
	len1 = fs.j.ext_len;
	before = next;
	create_until_moved(&fs, &next, saved);
	T_CHECK(fs.j.ext_len > len1, "log grew from %llu to %llu bytes", (unsigned long long)len1,
		(unsigned long long)fs.j.ext_len);
	t_crash(&fs);
	for (int torn = 0; torn < 3; torn++) {
		static uint8_t now[2][2 * DMAFS_BLOCK];

		headers(0, now[0], 1);
		headers(1, now[1], 1);
		if (torn != 1)
			headers(0, saved[0], 0);
		if (torn != 0)
			headers(1, saved[1], 0);
		T_EQ(t_mount(&fs, 1), 0);
		/* the step before the move committed everything up to `before` at least */
		check_names(&fs, 0, before);
		t_umount(&fs);
		headers(0, now[0], 0);
		headers(1, now[1], 0);
	}
	/* one copy moved, the other not: a read-write mount picks the moved one and
	 * compacts both into step; nothing committed is lost */
	headers(1, saved[1], 0);
	T_EQ(t_mount(&fs, 0), 0);
	check_names(&fs, 0, next);
	t_umount(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(fs.j.copy_differs[0] || fs.j.copy_differs[1], 0);
	check_names(&fs, 0, next);

	/* every file gone: back into the halves, all space free again */
	{
		char name[64];

		for (int i = 0; i < next; i++) {
			snprintf(name, sizeof(name), "g%06d-with-a-name-that-takes-some-log-room", i);
			T_EQ(fs_unlink(&fs, FMT_ROOT_INO, name, 0), 0);
		}
		T_EQ(fs_unlink(&fs, FMT_ROOT_INO, "big", 0), 0);
	}
	t_umount(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	T_EQ(fs_fsync(&fs), 0); /* the first commit after a mount compacts */
	T_EQ(fs.j.ext_len, 0);
	T_EQ(alloc_free_bytes(&fs.alloc), free0);
	t_umount(&fs);
}

/*
 * Free space in 1 MiB holes only: the log's areas are taken in pieces, replayed after a
 * crash, and none of a file's extents is given their space.
 */
static void test_grow_pieces(void)
{
	static uint8_t saved[2][2 * DMAFS_BLOCK];
	struct fs fs;
	uint64_t fill, sz;
	int next = 0;

	T_EQ(t_mount(&fs, 0), 0);
	fill = t_create(&fs, FMT_ROOT_INO, "fill");
	/* most of the data space, then two of every four MiB punched out: stripe units of 1
	 * MiB alternate between the two members, so each gets a 1 MiB hole every 2 MiB */
	sz = ALIGN_DOWN(alloc_free_bytes(&fs.alloc) - (4 << 20), 4 << 20);
	T_EQ(t_write(&fs, fill, 0, sz, 5), 0);
	for (uint64_t off = 0; off + (4 << 20) <= sz && off < (96ull << 20); off += 4 << 20)
		T_EQ(fs_fallocate(&fs, &t_root, fill, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
				  2 << 20), 0);
	T_EQ(fs_fsync(&fs), 0);
	T_CHECK(fs.alloc.m[0].n > 16 && fs.alloc.m[1].n > 16, "free space in %zu and %zu ranges",
		fs.alloc.m[0].n, fs.alloc.m[1].n);
	T_EQ(fs_fsync(&fs), 0);
	create_until_moved(&fs, &next, saved);
	T_CHECK(fs.j.ext_len > 0, "the log did not move");
	T_CHECK(fs.j.area[0][0].n > 1 && fs.j.area[0][1].n > 1, "areas in %u and %u pieces",
		fs.j.area[0][0].n, fs.j.area[0][1].n);
	for (int i = 0; i < 40; i++) { /* batches in the pieces */
		char name[32];

		snprintf(name, sizeof(name), "after%02d", i);
		fs_forget(&fs, t_create(&fs, FMT_ROOT_INO, name), 1);
		T_EQ(fs_fsync(&fs), 0);
	}
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0); /* map_space refuses pieces that overlap an extent */
	check_names(&fs, 0, next);
	T_CHECK(t_lookup(&fs, FMT_ROOT_INO, "after39") != 0, "the last batch in the pieces lost");
	fill = t_lookup(&fs, FMT_ROOT_INO, "fill");
	T_EQ(t_verify(&fs, fill, sz - (1 << 20), 1 << 20, 5), 0);
	t_umount(&fs);
}

/*
 * A snapshot read in pieces of three blocks (jr_snap_piece; 8 MiB outside the tests):
 * records are cut between pieces everywhere, and an xattr of 64 KiB spans many of them.
 */
static void test_snapshot_pieces(void)
{
	static char val[65536];
	struct fs fs;
	uint64_t f;
	char name[64];

	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (char)(i * 7 + 3);
	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "bigx");
	T_EQ(fs_setxattr(&fs, NULL, f, "user.big", val, sizeof(val), 0), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "piece-%03d-%.*s", i, i % 40, "abcdefghijklmnopqrstuvwxyz0123456789ABCD");
		t_create(&fs, FMT_ROOT_INO, name);
	}
	T_EQ(journal_compact(&fs.j), 0); /* all of it in the snapshot */
	T_CHECK(fs.j.snap_len > 20 * jr_snap_piece, "snapshot of %llu bytes", (unsigned long long)fs.j.snap_len);
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "piece-%03d-%.*s", i, i % 40, "abcdefghijklmnopqrstuvwxyz0123456789ABCD");
		T_CHECK(t_lookup(&fs, FMT_ROOT_INO, name), "%s lost", name);
	}
	{
		static char got[65536];

		f = t_lookup(&fs, FMT_ROOT_INO, "bigx");
		T_EQ(fs_getxattr(&fs, f, "user.big", got, sizeof(got)), (int)sizeof(got));
		T_CHECK(!memcmp(got, val, sizeof(val)), "the 64 KiB xattr differs");
	}
	t_umount(&fs);
}

int main(void)
{
	jr_snap_piece = 3 * DMAFS_BLOCK; /* every test's snapshots cut in pieces */
	t_images(2, 64, NULL);
	test_persist_and_crash();
	test_torn_then_append();
	test_clean_mount();
	test_corrupt_snapshot();
	test_orphans_and_compaction();
	test_snapshot_pieces();
	t_rmdir();
	test_upgrade();
	t_rmdir();
	t_images(2, 64, NULL);
	test_grow();
	t_rmdir();
	t_images(2, 96, NULL);
	test_grow_pieces();
	return t_done("unit_journal");
}
