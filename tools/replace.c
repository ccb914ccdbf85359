// SPDX-License-Identifier: MIT
/*
 * replace.c - dmafs-replace: a new member takes a lost one's place in an unmounted mirror
 * filesystem and is rebuilt from the other copies. Every block the lost member held is
 * written to the new one: the first copies of its files' blocks from their second copies
 * on the next member, the second copies it kept for the member before it from their
 * first copies, and (members 0 and 1) the metadata log from the other log copy. The
 * blocks read are checked against their checksums on the way: a block with no good copy
 * is written with a checksum that does not match, so reads of it keep failing with EIO
 * rather than passing on damaged bytes as good. The new member's superblocks are written
 * last, after everything else is on it: an interrupted rebuild leaves a device that is
 * no member, and running the command again starts over.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "dmafs-proto.h"
#include "io/member.h"
#include "io/uring.h"
#include "store/journal.h"
#include "engine/rebuild.h"
#include "store/meta.h"
#include "tool.h"

static int tty, quiet;

static void note(void *arg, const char *msg)
{
	(void)arg;
	if (tty && !quiet)
		fprintf(stderr, "\r\033[K");
	printf("dmafs-replace: %s\n", msg);
}

static void progress(void *arg, uint64_t done, uint64_t total, double seconds, int final)
{
	static double drawn = -1;

	(void)arg;
	if (!tty || quiet || (!final && drawn >= 0 && seconds - drawn < 0.2))
		return; /* a few times a second */
	drawn = seconds;
	tool_progress("rebuild", done, total, seconds, final);
}

/* Does @m hold anything in its first 64 KiB (a filesystem, a partition table)? */
static int not_empty(struct member *m)
{
	char *b = util_aligned_alloc(64 << 10);
	int ret = 1;

	if (b && !member_pread(m, b, 64 << 10, 0))
		ret = !(b[0] == 0 && !memcmp(b, b + 1, (64 << 10) - 1));
	free(b);
	return ret;
}

/* The new member: emptied of any superblock, geometry fitting the lost one's place. */
static int prepare_new(struct rebuild *R, struct member *nm, const char *path, int force)
{
	char err[512];
	uint8_t *z;

	if (member_open(nm, path, MEMBER_OFFLINE, err, sizeof(err))) {
		tool_err("%s", err);
		return -1;
	}
	for (unsigned m = 0; m < R->n; m++)
		if (!member_missing(&R->ms[m]) && !strcmp(R->ms[m].path, nm->path)) {
			tool_err("%s is member %u of this filesystem already", path, m);
			return -1;
		}
	if (!force && not_empty(nm)) {
		tool_err("%s is not empty (its first 64 KiB hold data: a filesystem or a partition table?); use --force to overwrite it",
			 path);
		return -1;
	}
	if (rebuild_new_sb(R->ms, R->n, R->k, nm, err, sizeof(err))) {
		tool_err("%s", err);
		return -1;
	}
	/* no superblock until the rebuild is done: a crash leaves no member */
	z = util_aligned_alloc(FMT_SB_SIZE);
	if (!z)
		return -1;
	memset(z, 0, FMT_SB_SIZE);
	if (member_pwrite(nm, z, FMT_SB_SIZE, 0) ||
	    member_pwrite(nm, z, FMT_SB_SIZE, fmt_sb_copy_offset(nm->size))) {
		tool_err("%s: write failed: %s", path, strerror(errno));
		free(z);
		return -1;
	}
	free(z);
	return 0;
}

/*
 * The filesystem is mounted (@mnt, degraded or with a failed member): the daemon copies,
 * while reads go on from the other copies. It gets the new device as this process's open
 * descriptor (DMAFS_IOC_REBUILD takes it over, with the device's exclusive claim or lock),
 * and this process shows how far it is until it is done.
 */
static int replace_mounted(const char *mnt, const char *path, int want, int force)
{
	struct dmafs_ioc_rebuild r = { .op = DMAFS_REBUILD_START, .member = want };
	struct member nm = { .fd = -1, .hold_fd = -1 };
	uint64_t t0 = dm_mono_ns();
	char err[512], s1[32];
	int dfd, ret;

	dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		tool_err("%s: %s", mnt, strerror(errno));
		return REPLACE_EXIT_ERR;
	}
	if (member_open(&nm, path, 0, err, sizeof(err))) {
		tool_err("%s", err);
		return REPLACE_EXIT_ERR;
	}
	if (!force && not_empty(&nm)) {
		tool_err("%s is not empty (its first 64 KiB hold data: a filesystem or a partition table?); use --force to overwrite it",
			 path);
		return REPLACE_EXIT_ERR;
	}
	r.fd = nm.fd;
	ret = ioctl(dfd, DMAFS_IOC_REBUILD, &r) ? -errno : 0;
	member_close(&nm); /* the daemon has its own descriptor of it now */
	if (ret) {
		tool_err("%s: %s", mnt, ret == -ENOTTY ? "not the root of a dmafs mount that rebuilds while mounted"
				      : ret == -EPERM ? "a rebuild needs root (CAP_SYS_ADMIN)" : strerror(-ret));
		return REPLACE_EXIT_ERR;
	}
	if (r.status) {
		tool_err("%s", r.msg);
		return REPLACE_EXIT_ERR;
	}
	if (!quiet)
		printf("dmafs-replace: rebuilding member %d of %s on %s while mounted: %s to copy; reads go on from the other copies\n",
		       r.member, mnt, path, util_fmt_size(r.total, s1, sizeof(s1)));
	while (r.state == DMAFS_REBUILD_RUNNING) {
		struct timespec ts = { 0, 50000000 }; /* the bar's redraws are rate-limited */

		nanosleep(&ts, NULL);
		r = (struct dmafs_ioc_rebuild){ .op = DMAFS_REBUILD_STATUS };
		if (ioctl(dfd, DMAFS_IOC_REBUILD, &r)) {
			tool_err("%s: asking how the rebuild goes: %s", mnt, strerror(errno));
			return REPLACE_EXIT_ERR;
		}
		progress(NULL, r.done, r.total, (dm_mono_ns() - t0) / 1e9, r.state != DMAFS_REBUILD_RUNNING);
	}
	close(dfd);
	if (r.state != DMAFS_REBUILD_DONE) {
		tool_err("member %d: the rebuild failed: %s", r.member, r.msg);
		return REPLACE_EXIT_ERR;
	}
	if (!quiet)
		printf("dmafs-replace: %s\n", r.msg);
	return r.damaged ? REPLACE_EXIT_DAMAGED : REPLACE_EXIT_OK;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dmafs-replace [--member N] [-f] [-q] MEMBER[,MEMBER...] NEW\n"
		"       dmafs-replace [--member N] [-f] [-q] MOUNTPOINT NEW\n"
		"Rebuild a lost member of a mirror filesystem (mkfs.dmafs --data mirror) onto NEW,\n"
		"from the other copies: unmounted (MEMBER...: the filesystem's other members, in any\n"
		"order, as mount -o degraded takes them), or mounted (degraded, or with a failed\n"
		"member), reads going on meanwhile.\n"
		"  --member N     the member to replace, when its old device is still given (it\n"
		"                 failed while mounted): it is not read\n"
		"  -f, --force    overwrite NEW even if it holds data\n"
		"  -q, --quiet    print only errors\n"
		"Exit status: 0 rebuilt, 1 error (nothing usable written), 2 rebuilt, but some blocks\n"
		"had no good copy (listed). See dmafs-replace(8).\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "member", required_argument, NULL, 'm' }, { "force", no_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },	     { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rebuild R = { .k = UINT32_MAX, .note = note, .progress = progress };
	char list[8192] = "", err[1024] = "", s1[32];
	struct member nm = { .fd = -1, .hold_fd = -1 };
	struct journal j;
	struct meta meta;
	int c, n, force = 0, want = -1, nmissing = 0;
	uint64_t t0;

	tool_init("dmafs-replace");
	while ((c = getopt_long(argc, argv, "fqh", lo, NULL)) != -1) {
		switch (c) {
		case 'm': want = atoi(optarg); break;
		case 'f': force = 1; break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); return REPLACE_EXIT_OK;
		default: usage(stderr); return REPLACE_EXIT_ERR;
		}
	}
	if (argc - optind < 2) {
		usage(stderr);
		return REPLACE_EXIT_ERR;
	}
	if (argc - optind == 2) {
		struct stat st;

		tty = isatty(2);
		if (!stat(argv[optind], &st) && S_ISDIR(st.st_mode))
			return replace_mounted(argv[optind], argv[optind + 1], want, force);
	}
	for (int i = optind; i < argc - 1; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i > optind ? "," : "", argv[i]);
	n = members_open(list, MEMBER_RDONLY | MEMBER_OFFLINE | MEMBER_DEGRADED, &R.ms, err, sizeof(err));
	if (n < 0) {
		tool_err("%s", err);
		return REPLACE_EXIT_ERR;
	}
	R.n = (unsigned)n;
	if (!fmt_is_mirror(&R.ms[0].sb)) {
		tool_err("this filesystem keeps one copy of its data (data profile single): a member's data exists nowhere else");
		return REPLACE_EXIT_ERR;
	}
	if (want >= 0) {
		if ((unsigned)want >= R.n) {
			tool_err("--member %d: the filesystem has members 0 to %u", want, R.n - 1);
			return REPLACE_EXIT_ERR;
		}
		member_close(&R.ms[want]); /* not read: it failed */
		R.ms[want].path = strdup("(replaced)");
		R.ms[want].hold_fd = -1;
	}
	for (unsigned m = 0; m < R.n; m++)
		if (member_missing(&R.ms[m])) {
			nmissing++;
			R.k = m;
		}
	if (nmissing != 1) {
		tool_err(nmissing ? "%d members are missing: replace one at a time (mount -o degraded works meanwhile)"
				  : "no member is missing: name the one to replace with --member N", nmissing);
		return REPLACE_EXIT_ERR;
	}
	if (member_missing(&R.ms[(R.k + 1) % R.n]) || member_missing(&R.ms[(R.k + R.n - 1) % R.n])) {
		tool_err("member %u's neighbours must both be there: its blocks are copies of theirs", R.k);
		return REPLACE_EXIT_ERR;
	}
	if (meta_init(&meta, R.ms[0].sb.stripe_unit, R.n) ||
	    journal_open(&j, R.ms, R.n, &meta, 1, 0, err, sizeof(err))) {
		tool_err("%s", err[0] ? err : "out of memory");
		return REPLACE_EXIT_ERR;
	}
	if (prepare_new(&R, &nm, argv[argc - 1], force))
		return REPLACE_EXIT_ERR;
	if (rebuild_plan(&R, &meta, &j)) {
		tool_err("out of memory");
		return REPLACE_EXIT_ERR;
	}
	R.dst = &nm;
	tty = isatty(2);
	if (!quiet)
		printf("dmafs-replace: rebuilding member %u on %s: %s to copy from members %u and %u\n",
		       R.k, nm.path, util_fmt_size(R.total, s1, sizeof(s1)), (R.k + R.n - 1) % R.n,
		       (R.k + 1) % R.n);
	t0 = dm_mono_ns();
	if (rebuild_copy(&R) || member_write_sb(&nm)) {
		tool_err("member %u (%s): the rebuild failed (%s); it is no member yet: run dmafs-replace again",
			 R.k, nm.path, R.err[0] ? R.err : "writing its superblocks");
		return REPLACE_EXIT_ERR;
	}
	if (!quiet) {
		double s = (dm_mono_ns() - t0) / 1e9;

		printf("dmafs-replace: member %u rebuilt on %s: %s in %.1f s (%.2f GB/s)%s; mount the filesystem as before\n",
		       R.k, nm.path, util_fmt_size(R.total, s1, sizeof(s1)), s,
		       s > 0 ? R.total / s / 1e9 : 0.0,
		       R.damaged ? ", some blocks without a good copy (listed above)" : "");
	}
	member_close(&nm);
	members_close(R.ms, (int)R.n);
	rebuild_free(&R);
	return R.damaged ? REPLACE_EXIT_DAMAGED : REPLACE_EXIT_OK;
}
