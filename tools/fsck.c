// SPDX-License-Identifier: MIT
/*
 * fsck.c - dmafs-fsck: offline check and repair of a dmafs filesystem (not mounted).
 * Checks the superblocks and their copies, the member set, both copies of the metadata
 * log, extents (outside the data region, overlapping, doubly owned), directory entries,
 * link counts and unreachable inodes; --repair fixes what it can and writes the repaired
 * metadata as a fresh snapshot to both log copies; --scrub reads every data block and
 * checks it against its checksum, and that blocks past the end of file hold zeros.
 * Exit status as e2fsck: 0 clean, 1 errors corrected, 4 errors left, 8 operational.
 *
 * Run as fsck.dmafs (a link), it takes fsck(8)'s options instead (fsck_main): -a and -p
 * repair only what loses nothing (FIX_SAFE) and write nothing at all when anything else
 * is wrong, -y repairs everything, -n checks; bad usage exits 16.
 */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/alloc.h"
#include "common.h"
#include "store/journal.h"
#include "io/member.h"
#include "store/meta.h"
#include "tool.h"
#include "fsck.h"
#include "io/uring.h"

static int max_ino(struct inode *i, void *arg)
{
	if (i->ino > maxino)
		maxino = i->ino;
	return 0;
}

static int collect(struct inode *d, void *arg)
{
	if (!d->dir)
		return 0;
	for (size_t s = 0; s < d->dir->nslots; s++) {
		struct dentry *de = d->dir->slots[s];
		struct inode *c;
		struct parent *p;

		if (!de)
			continue;
		c = meta_iget(&meta, de->ino);
		p = par(de->ino);
		if (!c || !p)
			continue;
		p->refs++;
		if (!p->name) {
			p->dir = d->ino;
			p->name = de->name;
		}
		if (c->dir)
			par(d->ino)->subdirs++;
	}
	return 0;
}

/* ---- checks ---- */

static int check_entries(struct inode *d, void *arg)
{
	char pb[4096];

	if (!d->dir)
		return 0;
	d->dir->nopen++; /* no slot compaction while walking */
	for (size_t s = 0; s < d->dir->nslots; s++) {
		struct dentry *de = d->dir->slots[s];

		if (!de || meta_iget(&meta, de->ino))
			continue;
		problem(FIX_SAFE, "; entry removed", "%s/%s: entry points to missing inode %llu",
			path_of(d->ino, pb, sizeof(pb)), de->name, (unsigned long long)de->ino);
		if (fixes(FIX_SAFE)) {
			struct fmt_rec r = { .type = REC_UNLINK, .dir = d->ino,
					     .name = (const uint8_t *)de->name, .name_len = de->namelen };

			meta_apply(&meta, &r);
		}
	}
	d->dir->nopen--;
	return 0;
}

static struct inode **orphans;
static size_t norphans, corphans;

static int check_links(struct inode *i, void *arg)
{
	struct parent *p = par(i->ino);
	char pb[4096];
	uint32_t want;

	if (i->ino == FMT_ROOT_INO) {
		want = 2 + p->subdirs;
	} else if (p->refs == 0) {
		/* nlink 0: unlinked while open at a crash, deleted at the next mount */
		if (i->a.nlink == 0) {
			if (!quiet)
				printf("note: inode %llu is an orphan (unlinked while open); it is deleted at mount%s\n",
				       (unsigned long long)i->ino, repair == REPAIR_ALL ? " and now" : "");
		} else {
			problem(FIX_SAFE, "; moved to /lost+found", "inode %llu (%s, %u links) is not in any directory",
				(unsigned long long)i->ino, i->dir ? "directory" : "file", i->a.nlink);
		}
		if (dm_grow(&orphans, &corphans, norphans + 1, sizeof(*orphans), 64))
			return -ENOMEM;
		orphans[norphans++] = i;
		return 0;
	} else if (i->dir) {
		if (p->refs > 1)
			problem(FIX_NONE, "", "%s: directory has %u entries pointing to it", path_of(i->ino, pb, sizeof(pb)), p->refs);
		want = 2 + p->subdirs;
	} else {
		want = p->refs;
	}
	if (i->a.nlink != want) {
		problem(FIX_SAFE, "", "%s: link count %u, should be %u", path_of(i->ino, pb, sizeof(pb)), i->a.nlink, want);
		if (fixes(FIX_SAFE))
			i->a.nlink = want;
	}
	return 0;
}

static struct alloc alloc;

/* Extents past the end of file are space reserved by fallocate(2) with FALLOC_FL_KEEP_SIZE
 * (their blocks hold zeros; --scrub checks that). */
static int check_extents(struct inode *i, void *arg)
{
	char pb[4096];

	for (size_t k = 0; k < i->next;) {
		struct extent *e = &i->ext[k];

		if (alloc_mark_used(&alloc, e->member, e->moff, e->len)) {
			problem(FIX_ANY, "; dropped (reads as zeros)", "%s: extent at file offset %llu (member %u offset %llu, %u bytes) is outside the data region or also owned by another extent",
				path_of(i->ino, pb, sizeof(pb)), (unsigned long long)e->off, e->member,
				(unsigned long long)e->moff, e->len);
			if (fixes(FIX_ANY)) {
				memmove(e, e + 1, (i->next - k - 1) * sizeof(*e));
				i->next--;
				continue;
			}
		}
		k++;
	}
	return 0;
}

/* Put unreachable inodes in /lost+found as #<inode>; delete nlink-0 orphans. */
static void fix_orphans(void)
{
	struct inode *root = meta_iget(&meta, FMT_ROOT_INO), *lf;
	struct dentry *de = meta_lookup(root, "lost+found", 10);
	uint64_t lfino;

	for (size_t k = 0; k < norphans; k++) {
		struct inode *i = orphans[k];
		char name[32];

		if (i->a.nlink == 0 && !(i->dir && i->dir->count)) {
			struct fmt_rec r = { .type = REC_IDEL, .ino = i->ino };

			meta_apply(&meta, &r);
			continue;
		}
		if (!de) {
			struct fmt_rec r = { .type = REC_INODE, .ino = meta.next_ino };

			r.a.mode = S_IFDIR | 0700;
			r.a.nlink = 2;
			r.a.atime = r.a.mtime = r.a.ctime = dm_wall_ns();
			meta_apply(&meta, &r);
			lfino = r.ino;
			struct fmt_rec l = { .type = REC_LINK, .dir = FMT_ROOT_INO, .ino = lfino,
					     .name = (const uint8_t *)"lost+found", .name_len = 10 };
			meta_apply(&meta, &l);
			root->a.nlink++;
			de = meta_lookup(root, "lost+found", 10);
		}
		lfino = de->ino;
		lf = meta_iget(&meta, lfino);
		snprintf(name, sizeof(name), "#%llu", (unsigned long long)i->ino);
		struct fmt_rec l = { .type = REC_LINK, .dir = lfino, .ino = i->ino,
				     .name = (const uint8_t *)name, .name_len = strlen(name) };
		if (meta_apply(&meta, &l) == 0) {
			if (i->dir)
				lf->a.nlink++;
			else
				i->a.nlink = 1;
		}
	}
}

/* ---- superblocks ---- */

/* Members whose superblocks are to be rewritten from the good copy (REPAIR_SAFE: at the end). */
static int sb_bad[FMT_MAX_MEMBERS];

static void write_superblocks(int n)
{
	for (int i = 0; i < n; i++)
		if (sb_bad[i] && member_write_sb(&ms[i]))
			printf("member %d (%s): rewriting the superblock failed\n", i, ms[i].path);
}

static void check_superblocks(int n)
{
	uint8_t *b = util_aligned_alloc(FMT_SB_SIZE);
	struct fmt_sb sb;

	for (int i = 0; i < n; i++) {
		uint64_t offs[2] = { 0, fmt_sb_copy_offset(ms[i].sb.member_size) };
		int bad = 0;

		for (int c = 0; c < 2; c++) {
			int ret = member_pread(&ms[i], b, FMT_SB_SIZE, offs[c]);

			if (!ret)
				ret = fmt_sb_decode(b, &sb);
			if (ret) {
				bad = 1;
				problem(FIX_SAFE, "; rewritten from the good copy", "member %d (%s): %s superblock is damaged (%s)",
					i, ms[i].path, c ? "the copy of the" : "the primary", member_sb_errstr(ret));
			}
		}
		sb_bad[i] = bad && fixes(FIX_SAFE);
	}
	free(b);
	if (repair == REPAIR_ALL)
		write_superblocks(n);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: dmafs-fsck [-n] [-y|--repair] [--scrub] [-q] MEMBER[,MEMBER...] [MEMBER...]\n"
		   "Check (and with --repair fix) an unmounted dmafs filesystem. See dmafs-fsck(8).\n"
		   "Exit status: 0 clean, 1 errors corrected, 4 errors left uncorrected, 8 operational error.\n");
}

/*
 * Replay the metadata log into `meta` and report the state of its copies. Returns 0, or
 * FSCK_EXIT_UNFIXED when no generation replays or the root directory is gone.
 */
static int load_metadata(struct journal *j, int n)
{
	char err[1024] = "";
	int ret = meta_init(&meta, ms[0].sb.stripe_unit, n);

	if (!ret)
		ret = journal_open(j, ms, n, &meta, !repair, repair == REPAIR_ALL, err, sizeof(err));
	if (ret) {
		flush_problems(0);
		printf("ERROR: %s\n", err[0] ? err : strerror(-ret));
		printf("dmafs-fsck: the metadata cannot be replayed%s\n",
		       repair == REPAIR_ALL ? ", and no older generation could be either"
					    : "; --repair (fsck -y) tries the previous generation");
		if (repair == REPAIR_SAFE)
			printf("dmafs-fsck: UNEXPECTED INCONSISTENCY: nothing was written: run dmafs-fsck --repair (fsck -y) by hand\n");
		return FSCK_EXIT_UNFIXED;
	}
	if (j->recovered_older)
		problem(FIX_ANY, "", "the current metadata generation is damaged in every log copy; recovered the previous generation (changes committed after it are lost)");
	for (unsigned i = 0; i < j->ncopies; i++) {
		if (!j->copy_ok[i])
			problem(FIX_SAFE, "; rewritten from the good copy", "metadata log copy on member %u (%s) is damaged: %s",
				i, ms[i].path, j->copy_why[i]);
		else if (j->copy_differs[i])
			problem(FIX_SAFE, "; rewritten", "metadata log copy on member %u (%s) is behind the other copy", i,
				ms[i].path);
	}
	if (!meta_iget(&meta, FMT_ROOT_INO) || !meta_iget(&meta, FMT_ROOT_INO)->dir) {
		flush_problems(0);
		printf("ERROR: the root directory is missing\n");
		return FSCK_EXIT_UNFIXED;
	}
	return 0;
}

/* Directory entries, link counts and unreachable inodes. 0, or -ENOMEM. */
static int check_tree(void)
{
	meta_for_each(&meta, max_ino, NULL);
	parents = calloc(maxino + 1, sizeof(*parents));
	if (!parents)
		return -ENOMEM;
	meta_for_each(&meta, check_entries, NULL);
	meta_for_each(&meta, collect, NULL);
	return meta_for_each(&meta, check_links, NULL);
}

static int mark_area(void *arg, unsigned m, uint64_t off, uint64_t len)
{
	(void)arg;
	if (alloc_mark_used(&alloc, m, off, len))
		problem(FIX_NONE, "", "a piece of the metadata log's areas (member %u offset %llu, %llu bytes) is outside the data region or overlaps another",
			m, (unsigned long long)off, (unsigned long long)len);
	return 0;
}

/*
 * Every extent inside the data regions and owned once (the metadata log's areas count as
 * owned): rebuild the allocator from them.
 */
static void check_space(const struct journal *j, int n)
{
	uint64_t start[FMT_MAX_MEMBERS], end[FMT_MAX_MEMBERS], cap = 0, used;

	for (int i = 0; i < n; i++) {
		start[i] = ms[i].sb.data_offset;
		end[i] = fmt_alloc_end(&ms[i].sb); /* a mirror's second copies lie past it */
		cap += end[i] - start[i];
	}
	alloc_init(&alloc, n, start, end);
	journal_areas(j, mark_area, NULL);
	meta_for_each(&meta, check_extents, NULL);
	used = cap - alloc_free_bytes(&alloc);
	if (!quiet)
		printf("dmafs-fsck: %zu inodes, %.1f of %.1f MiB used (free space is rebuilt from the extents at every mount, so none can leak)\n",
		       meta.inodes.n, used / 1048576.0, cap / 1048576.0);
}

/* Check the @n members open in `ms`; the exit status. */
static int fsck(int n, int scrub)
{
	struct journal j;
	int ret;

	if (!quiet)
		printf("dmafs-fsck: %d member%s, %s\n", n, n > 1 ? "s" : "",
		       repair == REPAIR_ALL ? "repairing" : repair ? "repairing what loses nothing" : "checking only");
	check_superblocks(n);
	ret = load_metadata(&j, n);
	if (ret)
		return ret;
	if (check_tree())
		return FSCK_EXIT_ERR;
	check_space(&j, n);
	if (repair)
		fix_orphans();
	if (scrub && scrub_all())
		return FSCK_EXIT_ERR;
	if (repair == REPAIR_SAFE) {
		/* all or nothing: a repair that loses data is for a person to decide */
		int all = errors == fixed;

		flush_problems(all);
		if (!all) {
			printf("dmafs-fsck: UNEXPECTED INCONSISTENCY: %u problem%s need a repair that may lose data or none exists; nothing was written: run dmafs-fsck --repair (fsck -y) by hand\n",
			       errors - fixed, errors - fixed == 1 ? "" : "s");
			fixed = 0;
		} else {
			write_superblocks(n);
		}
	}
	if ((repair == REPAIR_ALL && (fixed || errors)) || (repair == REPAIR_SAFE && fixed)) {
		ret = journal_compact(&j);
		if (ret) {
			printf("dmafs-fsck: writing the repaired metadata failed: %s\n", strerror(-ret));
			return FSCK_EXIT_ERR;
		}
	}
	members_close(ms, n);
	if (!quiet || errors)
		printf("dmafs-fsck: %u problem%s found, %u fixed\n", errors, errors == 1 ? "" : "s", fixed);
	if (errors > fixed)
		return FSCK_EXIT_UNFIXED;
	return fixed ? FSCK_EXIT_FIXED : FSCK_EXIT_OK;
}

/* The members named by @argv[0..argc), joined with commas into @list; -1 when none. */
static int join_members(int argc, char **argv, char *list, size_t len)
{
	if (argc < 1)
		return -1;
	for (int i = 0; i < argc; i++)
		snprintf(list + strlen(list), len - strlen(list), "%s%s", i ? "," : "", argv[i]);
	return 0;
}

/* Open the members of @list (read-only unless repairing) and check them: the exit status. */
static int run(const char *list, int scrub)
{
	char err[1024] = "";
	int n;

	tty = isatty(2);
	n = members_open(list, (repair ? 0 : MEMBER_RDONLY) | MEMBER_OFFLINE, &ms, err, sizeof(err));
	if (n < 0) {
		tool_err("%s", err);
		return FSCK_EXIT_ERR;
	}
	return fsck(n, scrub);
}

static void fsck_usage(FILE *f)
{
	fprintf(f, "usage: fsck.dmafs [-a|-p|-n|-y] [-f] [-v] MEMBER[,MEMBER...]|LABEL=LABEL|UUID=UUID\n"
		   "fsck(8)'s checker for dmafs: -a or -p repairs what loses nothing (and writes nothing\n"
		   "if anything else is wrong), -y repairs everything, -n (the default) only checks.\n"
		   "Exit status as fsck(8): 0 clean, 1 corrected, 4 left uncorrected, 8 operational\n"
		   "error, 16 usage. See dmafs-fsck(8).\n");
}

/*
 * Run as fsck.dmafs, by fsck(8) (fsck -t dmafs, or fsck -A for an fstab line with a pass
 * number): its options, as e2fsck(8) takes them. -f (check even if clean: dmafs always
 * checks), -v, -C FD (progress: not drawn) and -r (interactive: there are no questions;
 * checks only) are accepted.
 */
static int fsck_main(int argc, char **argv)
{
	char list[8192] = "";
	int c, mode = -1;

	quiet = 1;
	while ((c = getopt(argc, argv, "apnyrfvC::dh")) != -1) {
		int want = -1;

		switch (c) {
		case 'a': case 'p': want = REPAIR_SAFE; break;
		case 'y': want = REPAIR_ALL; break;
		case 'n': case 'r': want = REPAIR_NONE; break;
		case 'v': quiet = 0; break;
		case 'f': case 'C': case 'd': break;
		case 'h': fsck_usage(stdout); return FSCK_EXIT_OK;
		default: fsck_usage(stderr); return FSCK_EXIT_USAGE;
		}
		if (want >= 0 && mode >= 0 && want != mode) {
			tool_err("only one of -a/-p, -n and -y may be given");
			return FSCK_EXIT_USAGE;
		}
		if (want >= 0)
			mode = want;
	}
	repair = mode < 0 ? REPAIR_NONE : mode;
	if (join_members(argc - optind, argv + optind, list, sizeof(list))) {
		fsck_usage(stderr);
		return FSCK_EXIT_USAGE;
	}
	return run(list, 0);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "repair", no_argument, NULL, 'y' }, { "scrub", no_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },  { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	char list[8192] = "";
	int c, scrub = 0;

	if (!strcmp(base, "fsck.dmafs")) {
		tool_init(argv[0]);
		return fsck_main(argc, argv);
	}
	tool_init("dmafs-fsck");
	while ((c = getopt_long(argc, argv, "nysqh", lo, NULL)) != -1) {
		switch (c) {
		case 'n': repair = REPAIR_NONE; break;
		case 'y': repair = REPAIR_ALL; break;
		case 's': scrub = 1; break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); return FSCK_EXIT_OK;
		default: usage(stderr); return FSCK_EXIT_ERR;
		}
	}
	if (join_members(argc - optind, argv + optind, list, sizeof(list))) {
		usage(stderr);
		return FSCK_EXIT_ERR;
	}
	return run(list, scrub);
}
