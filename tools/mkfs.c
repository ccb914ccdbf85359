// SPDX-License-Identifier: MIT
/* mkfs.c - mkfs.dmafs: format block devices or image files as one striped filesystem. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "format/format.h"
#include "store/journal.h"
#include "io/member.h"
#include "io/scan.h"
#include "tool.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mkfs.dmafs [-s STRIPE_UNIT] [-L LABEL] [--size BYTES] [--log-size BYTES]\n"
		"                  [--data single|mirror]\n"
		"                  [-f] [-q] MEMBER...\n"
		"Format 1 to %d members (block devices or image files) as one dmafs filesystem.\n"
		"  -s, --stripe-unit SIZE  bytes per stripe unit, power of two, 64K..64M (default 1M)\n"
		"  -L, --label LABEL       filesystem label (up to 64 bytes; no control characters,\n"
		"                          none of / \\ \" , and no space at either end)\n"
		"      --size BYTES        create image files, or extend shorter ones, to BYTES\n"
		"      --data single|mirror  one copy of file data (default), or two on different\n"
		"                          members: survives a lost member, half the capacity\n"
		"      --log-size BYTES    each half of the metadata log, where metadata lives until\n"
		"                          it grows into the data region (about 170 bytes a file;\n"
		"                          default: 1/64 of member 0, 4M to 1G)\n"
		"  -f, --force             overwrite existing filesystems or dmafs members, and\n"
		"                          take a label another dmafs filesystem has\n"
		"  -q, --quiet             print only errors\n"
		"See mkfs.dmafs(8).\n",
		FMT_MAX_MEMBERS);
}

/* Known signatures: offset, bytes, name. Enough to stop formatting over real data. */
static const struct sig {
	uint64_t off;
	const char *magic;
	size_t len;
	const char *name;
} sigs[] = {
	{ 0, FMT_SB_MAGIC, 8, "dmafs" },
	{ 1080, "\x53\xef", 2, "ext2/3/4" },
	{ 0, "XFSB", 4, "xfs" },
	{ 65600, "_BHRfS_M", 8, "btrfs" },
	{ 4086, "SWAPSPACE2", 10, "swap" },
	{ 4086, "SWAP-SPACE", 10, "swap" },
	{ 0, "LUKS\xba\xbe", 6, "LUKS" },
	{ 512, "EFI PART", 8, "GPT partition table" },
	{ 0, "hsqs", 4, "squashfs" },
	{ 32769, "CD001", 5, "ISO 9660" },
	{ 3, "NTFS    ", 8, "NTFS" },
	{ 82, "FAT32   ", 8, "FAT32" },
	{ 0x10040, "ReIsEr", 6, "reiserfs" },
	{ 0, "\x31\x41\x59\x26", 4, "zfs/other" },
};

/* Returns the name of a signature found on @m, or NULL. */
static const char *find_signature(struct member *m)
{
	uint8_t *b = util_aligned_alloc(128 << 10);
	const char *found = NULL;

	if (!b)
		return NULL;
	memset(b, 0, 128 << 10);
	if (pread(m->fd, b, MIN(128u << 10, ALIGN_DOWN(m->size, DMAFS_BLOCK)), 0) < 0) {
		free(b);
		return NULL;
	}
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]) && !found; i++)
		if (sigs[i].off + sigs[i].len <= (128u << 10) &&
		    !memcmp(b + sigs[i].off, sigs[i].magic, sigs[i].len))
			found = sigs[i].name;
	/* an MBR boot signature with at least one partition entry */
	if (!found && b[510] == 0x55 && b[511] == 0xaa && (b[446 + 4] || b[462 + 4]))
		found = "MBR partition table";
	free(b);
	if (!found && m->size >= FMT_MIN_MEMBER) {
		struct fmt_sb sb;
		uint8_t *c = util_aligned_alloc(FMT_SB_SIZE);

		if (c && member_pread(m, c, FMT_SB_SIZE, fmt_sb_copy_offset(m->size)) == 0 &&
		    fmt_sb_decode(c, &sb) != -ENODATA)
			found = "dmafs (superblock copy)";
		free(c);
	}
	return found;
}

static int prepare_image(const char *path, uint64_t size)
{
	struct stat st;
	int fd;

	if (stat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size >= size)
			return 0;
	} else if (errno != ENOENT) {
		tool_err("%s: %s", path, strerror(errno));
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, size) < 0) {
		tool_err("%s: cannot create or extend to %llu bytes: %s", path,
			 (unsigned long long)size, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* What the options ask for. */
struct mkfs_opt {
	uint64_t su, size, log_half; /* log_half 0: fmt_log_half_for() */
	const char *label;
	int force, quiet;
	int mirror; /* --data mirror */
};

/* Open member @i (@path), checking its size and that it holds no other filesystem. */
static int open_member(const struct mkfs_opt *o, struct member *m, int i, const char *path)
{
	char err[512], s1[32];
	const char *sig;

	if (o->size && prepare_image(path, o->size))
		return -1;
	if (member_open(m, path, MEMBER_OFFLINE, err, sizeof(err))) {
		/* err is "PATH: reason" */
		const char *why = strncmp(err, path, strlen(path)) ? err : err + strlen(path);

		tool_err("member %d (%s)%s%s", i, path, why == err ? ": " : "", why);
		return -1;
	}
	if (m->size < FMT_MIN_MEMBER) {
		tool_err("member %d (%s): %s is too small; at least 64 MiB%s", i, path,
			 util_fmt_size(m->size, s1, sizeof(s1)),
			 m->is_blkdev ? "" : " (use --size to grow an image file)");
		return -1;
	}
	sig = find_signature(m);
	if (sig && !o->force) {
		tool_err("member %d (%s): contains a %s signature; use --force to overwrite it", i,
			 path, sig);
		return -1;
	}
	return 0;
}

/*
 * Fill in every member's superblock: one filesystem UUID, the members' UUIDs in each,
 * and the metadata log sized for the smaller of members 0 and 1 (which both hold it).
 */
static int lay_out(const struct mkfs_opt *o, struct member *ms, int n, uint8_t fsid[16],
		   uint64_t *half)
{
	uint64_t min_log = UINT64_MAX;

	for (int i = 0; i < n && i < 2; i++)
		min_log = MIN(min_log, ms[i].size);
	*half = fmt_log_half_for(min_log);
	if (o->log_half) {
		char s1[32], s2[32], s3[32];

		/* both halves in at most half of members 0 and 1: room for data stays */
		if (o->log_half > ALIGN_DOWN(min_log / 4, 1u << 20)) {
			tool_err("--log-size %s: members 0 and 1 hold two halves each; with %s the largest is %s (use larger members 0 and 1, or a smaller --log-size)",
				 util_fmt_size(o->log_half, s1, sizeof(s1)),
				 util_fmt_size(min_log, s2, sizeof(s2)),
				 util_fmt_size(ALIGN_DOWN(min_log / 4, 1u << 20), s3, sizeof(s3)));
			return -1;
		}
		*half = o->log_half;
	}
	if (util_uuid_gen(fsid))
		return -1;
	for (int i = 0; i < n; i++) {
		struct fmt_sb *sb = &ms[i].sb;

		memset(sb, 0, sizeof(*sb));
		sb->version = FMT_VERSION;
		memcpy(sb->fs_uuid, fsid, 16);
		sb->member_index = i;
		sb->member_count = n;
		sb->stripe_unit = o->su;
		sb->mkfs_time = time(NULL);
		snprintf(sb->label, sizeof(sb->label), "%s", o->label);
		if (fmt_sb_geometry(sb, ms[i].size, *half)) {
			tool_err("member %d (%s): too small for its metadata regions", i, ms[i].path);
			return -1;
		}
	}
	if (o->mirror) {
		/* the smallest data region bounds both halves on every member (fmt_mirror_of) */
		uint64_t least = UINT64_MAX, h;

		if (n < 2) {
			tool_err("--data mirror keeps the second copy of each member's data on the next member: give at least 2 members");
			return -1;
		}
		for (int i = 0; i < n; i++)
			least = MIN(least, ms[i].sb.data_end - ms[i].sb.data_offset);
		h = ALIGN_DOWN(least / 2, DMAFS_BLOCK);
		for (int i = 0; i < n; i++) {
			ms[i].sb.version = FMT_VERSION_MIRROR;
			ms[i].sb.flags |= FMT_SB_MIRROR;
			ms[i].sb.mirror_half = h;
		}
	}
	for (int i = 0; i < n; i++)
		if (util_uuid_gen(ms[0].sb.member_uuid[i]))
			return -1;
	for (int i = 1; i < n; i++)
		memcpy(ms[i].sb.member_uuid, ms[0].sb.member_uuid, sizeof(ms[0].sb.member_uuid));
	return 0;
}

/* The initial metadata: an empty root directory owned by the caller. */
static int root_snapshot(struct buf *snap)
{
	struct fmt_rec root;

	memset(&root, 0, sizeof(root));
	root.type = REC_INODE;
	root.ino = FMT_ROOT_INO;
	root.a.mode = S_IFDIR | 0755;
	root.a.uid = getuid();
	root.a.gid = getgid();
	root.a.nlink = 2;
	root.a.atime = root.a.mtime = root.a.ctime = dm_wall_ns();
	return fmt_rec_encode(snap, &root) ? -1 : 0;
}

/*
 * Clear the old superblocks, write the metadata log, then the superblocks: they go last,
 * so an interrupted mkfs leaves no member that looks formatted.
 */
static int write_fs(struct member *ms, int n, const struct buf *snap)
{
	uint8_t *z = util_aligned_alloc(FMT_SB_SIZE);
	int ret;

	if (!z)
		return -1;
	memset(z, 0, FMT_SB_SIZE);
	for (int i = 0; i < n; i++) {
		if (member_pwrite(&ms[i], z, FMT_SB_SIZE, 0) ||
		    member_pwrite(&ms[i], z, FMT_SB_SIZE, fmt_sb_copy_offset(ms[i].size))) {
			tool_err("member %d (%s): write failed: %s", i, ms[i].path, strerror(errno));
			free(z);
			return -1;
		}
	}
	free(z);
	ret = journal_format(ms, n, snap, FMT_ROOT_INO + 1);
	if (ret) {
		tool_err("writing the metadata log failed: %s", strerror(-ret));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		ret = member_write_sb(&ms[i]);
		if (ret) {
			tool_err("member %d (%s): writing the superblock failed: %s", i, ms[i].path,
				 strerror(-ret));
			return -1;
		}
	}
	return 0;
}

static void print_summary(const struct mkfs_opt *o, const struct member *ms, int n,
			  const uint8_t fsid[16], uint64_t half)
{
	char u[40], s1[32], s2[32];
	uint64_t cap = 0;

	util_uuid_str(fsid, u);
	printf("dmafs filesystem %s%s%s%s\n", u, *o->label ? " label \"" : "", o->label,
	       *o->label ? "\"" : "");
	printf("  stripe unit %s, %d member%s, block size %u, metadata log %s per half on member%s\n",
	       util_fmt_size(o->su, s1, sizeof(s1)), n, n > 1 ? "s" : "", DMAFS_BLOCK,
	       util_fmt_size(half, s2, sizeof(s2)), n > 1 ? "s 0 and 1" : " 0");
	/* as statfs estimates before the first snapshot: see --log-size */
	printf("  room for about %llu files of one extent in the log halves, more as the log grows into the data region\n",
	       (unsigned long long)((half - half / 16) / FMT_LOG_BYTES_PER_FILE));
	if (o->mirror)
		printf("  data profile mirror: two copies of every block, the second on the next member\n");
	for (int i = 0; i < n; i++) {
		uint64_t d = o->mirror ? ms[i].sb.mirror_half : ms[i].sb.data_end - ms[i].sb.data_offset;

		cap += d;
		printf("  member %d: %s  size %s", i, ms[i].path,
		       util_fmt_size(ms[i].size, s1, sizeof(s1)));
		printf("  data %s\n", util_fmt_size(d, s2, sizeof(s2)));
	}
	printf("  capacity %s\n", util_fmt_size(cap, s1, sizeof(s1)));
}

/*
 * A label that another dmafs filesystem on the block devices has (not counting the members
 * about to be formatted, whose old label goes): refused without --force, naming where.
 */
static int label_taken(const struct mkfs_opt *o, const struct member *ms, int n)
{
	dev_t skip[FMT_MAX_MEMBERS];
	char devs[1024];
	int ns = 0, users;

	if (!*o->label)
		return 0;
	for (int i = 0; i < n; i++) {
		struct stat st;

		if (ms[i].is_blkdev && !fstat(ms[i].fd, &st))
			skip[ns++] = st.st_rdev;
	}
	users = scan_label_users(o->label, NULL, skip, ns, devs, sizeof(devs));
	if (users < 0 && !o->force) {
		tool_err("cannot look for other filesystems labelled '%s' on the block devices: %s (--force skips the check)",
			 o->label, strerror(-users));
		return -1;
	}
	if (users <= 0)
		return 0;
	if (o->force) {
		if (!o->quiet)
			fprintf(stderr, "mkfs.dmafs: warning: label '%s' is also the label of %s dmafs filesystem on this machine (on %s): LABEL=%s names neither until one is relabelled (dmafs-label -L)\n",
				o->label, users == 1 ? "another" : "other", devs, o->label);
		return 0;
	}
	tool_err("label '%s' is already the label of %s dmafs filesystem on this machine (on %s): LABEL=%s would name two filesystems and mount neither; choose another label, or use --force",
		 o->label, users == 1 ? "another" : "other", devs, o->label);
	return -1;
}

/* Format the @n members named in @paths. */
static int mkfs(const struct mkfs_opt *o, char **paths, int n)
{
	struct member *ms = calloc(n, sizeof(*ms));
	struct buf snap = { 0 };
	uint8_t fsid[16];
	uint64_t half;

	if (!ms)
		return MKFS_EXIT_ERR;
	for (int i = 0; i < n; i++)
		if (open_member(o, &ms[i], i, paths[i]))
			return MKFS_EXIT_ERR;
	if (label_taken(o, ms, n))
		return MKFS_EXIT_ERR;
	if (lay_out(o, ms, n, fsid, &half) || root_snapshot(&snap) || write_fs(ms, n, &snap))
		return MKFS_EXIT_ERR;
	if (!o->quiet)
		print_summary(o, ms, n, fsid, half);
	for (int i = 0; i < n; i++)
		member_close(&ms[i]);
	free(ms);
	buf_free(&snap);
	return MKFS_EXIT_OK;
}

int main(int argc, char *argv[])
{
	static const struct option lopts[] = {
		{ "stripe-unit", required_argument, NULL, 's' },
		{ "label", required_argument, NULL, 'L' },
		{ "size", required_argument, NULL, 'S' },
		{ "log-size", required_argument, NULL, 'G' },
		{ "data", required_argument, NULL, 'D' },
		{ "force", no_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct mkfs_opt o = { .su = 1u << 20, .label = "" };
	char why[256];
	int c, n;

	tool_init("mkfs.dmafs");
	while ((c = getopt_long(argc, argv, "s:L:fqhV", lopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (util_parse_size(optarg, &o.su) || o.su < (64u << 10) || o.su > (64u << 20) ||
			    (o.su & (o.su - 1))) {
				tool_err("stripe unit '%s': want a power of two from 64K to 64M", optarg);
				return MKFS_EXIT_ERR;
			}
			break;
		case 'L':
			if (fmt_label_check(optarg, why, sizeof(why))) {
				tool_err("label '%s': %s", optarg, why);
				return MKFS_EXIT_ERR;
			}
			o.label = optarg;
			break;
		case 'S':
			if (util_parse_size(optarg, &o.size) || o.size < FMT_MIN_MEMBER) {
				tool_err("--size '%s': want a size of at least 64M (suffixes K, M, G, T)", optarg);
				return MKFS_EXIT_ERR;
			}
			break;
		case 'G':
			if (util_parse_size(optarg, &o.log_half) || o.log_half < (4u << 20)) {
				tool_err("--log-size '%s': want a size of at least 4M (suffixes K, M, G, T)", optarg);
				return MKFS_EXIT_ERR;
			}
			o.log_half = ALIGN_DOWN(o.log_half, 1u << 20);
			break;
		case 'D':
			if (strcmp(optarg, "single") && strcmp(optarg, "mirror")) {
				tool_err("--data '%s': want single or mirror", optarg);
				return MKFS_EXIT_ERR;
			}
			o.mirror = !strcmp(optarg, "mirror");
			break;
		case 'f': o.force = 1; break;
		case 'q': o.quiet = 1; break;
		case 'h': usage(stdout); return MKFS_EXIT_OK;
		case 'V': printf("mkfs.dmafs %s (on-disk format %d)\n", PACKAGE_VERSION, FMT_VERSION_MAX); return MKFS_EXIT_OK;
		default: usage(stderr); return MKFS_EXIT_ERR;
		}
	}
	n = argc - optind;
	if (n < 1 || n > FMT_MAX_MEMBERS) {
		if (n > FMT_MAX_MEMBERS)
			tool_err("%d members given; at most %d", n, FMT_MAX_MEMBERS);
		usage(stderr);
		return MKFS_EXIT_ERR;
	}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < i; k++)
			if (!strcmp(argv[optind + i], argv[optind + k])) {
				tool_err("member %s given twice", argv[optind + i]);
				return MKFS_EXIT_ERR;
			}
	return mkfs(&o, argv + optind, n);
}
