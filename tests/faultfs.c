// SPDX-License-Identifier: MIT
/*
 * faultfs - a one-file FUSE filesystem that injects I/O errors, for the member-fault tests.
 *
 * Usage: faultfs IMAGE CONTROLFILE MOUNTPOINT [FUSE options, e.g. -f]
 *
 * The mount holds one regular file, "disk", whose bytes are those of IMAGE (pread/pwrite
 * pass-through; its size is IMAGE's size).  Opens set direct_io, so O_DIRECT opens of
 * disk work and every read and write reaches this process.  CONTROLFILE lists bad byte
 * ranges of disk, one "START LENGTH" pair (decimal or 0x hex) per line; '#' starts a
 * comment.  A read or write overlapping any listed range fails with EIO.  The control
 * file is re-read on every request, so a test changes the faults by rewriting it; a
 * missing or empty control file means no faults.  A line "fsync_delay_ms N" makes every
 * fsync of disk take N ms longer (a drive whose cache flush is slow); a line
 * "read_delay_ms N" every read (a slow drive: requests that take long).
 */
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 31
#endif
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *disk_name = "disk";
static char image_path[PATH_MAX];
static char control_path[PATH_MAX];
static int image_fd = -1;

/* True if [off, off + len) overlaps a range listed in the control file. */
static int is_bad(off_t off, size_t len)
{
	char line[256];
	FILE *f;
	int bad = 0;

	if (len == 0)
		return 0;
	f = fopen(control_path, "r");
	if (!f)
		return 0;
	while (!bad && fgets(line, sizeof(line), f)) {
		unsigned long long start, n;
		char *p = strchr(line, '#');

		if (p)
			*p = 0;
		if (sscanf(line, "%lli %lli", (long long *)&start, (long long *)&n) != 2 || n == 0)
			continue;
		if ((unsigned long long)off < start + n && start < (unsigned long long)off + len)
			bad = 1;
	}
	fclose(f);
	return bad;
}

static int is_disk(const char *path)
{
	return path[0] == '/' && !strcmp(path + 1, disk_name);
}

static int ff_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct stat ist;

	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (!is_disk(path))
		return -ENOENT;
	if (fstat(image_fd, &ist))
		return -errno;
	st->st_mode = S_IFREG | 0644;
	st->st_nlink = 1;
	st->st_size = ist.st_size;
	st->st_blocks = ist.st_blocks;
	st->st_blksize = 4096;
	st->st_mtim = ist.st_mtim;
	st->st_ctim = ist.st_ctim;
	st->st_atim = ist.st_atim;
	return 0;
}

static int ff_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	if (strcmp(path, "/"))
		return -ENOTDIR;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, disk_name, NULL, 0, 0);
	return 0;
}

static int ff_open(const char *path, struct fuse_file_info *fi)
{
	if (!is_disk(path))
		return -ENOENT;
	if (fi->flags & O_TRUNC)
		return -EPERM;
	fi->direct_io = 1; /* no page cache: O_DIRECT works, every I/O comes here */
	return 0;
}

/* The "@name N" line of the control file (fsync_delay_ms, read_delay_ms), 0 without one. */
static unsigned delay_ms(const char *name)
{
	char line[256], fmt[64];
	unsigned ms = 0;
	FILE *f = fopen(control_path, "r");

	if (!f)
		return 0;
	snprintf(fmt, sizeof(fmt), "%s %%u", name);
	while (fgets(line, sizeof(line), f))
		sscanf(line, fmt, &ms);
	fclose(f);
	return ms;
}

static int ff_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	size_t done = 0;
	unsigned ms = delay_ms("read_delay_ms");

	if (is_bad(off, size))
		return -EIO;
	if (ms)
		usleep(ms * 1000u);
	while (done < size) {
		ssize_t r = pread(image_fd, buf + done, size - done, off + done);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		done += r;
	}
	return done;
}

static int ff_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	size_t done = 0;

	if (is_bad(off, size))
		return -EIO;
	while (done < size) {
		ssize_t r = pwrite(image_fd, buf + done, size - done, off + done);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += r;
	}
	return done;
}

static int ff_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	unsigned ms = delay_ms("fsync_delay_ms");

	if (ms)
		usleep(ms * 1000u);
	return fdatasync(image_fd) ? -errno : 0;
}

static int ff_flush(const char *path, struct fuse_file_info *fi)
{
	return 0;
}

static const struct fuse_operations ff_ops = {
	.getattr = ff_getattr,
	.readdir = ff_readdir,
	.open = ff_open,
	.read = ff_read,
	.write = ff_write,
	.fsync = ff_fsync,
	.flush = ff_flush,
};

int main(int argc, char **argv)
{
	char *fargv[argc];
	int fargc = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: %s IMAGE CONTROLFILE MOUNTPOINT [FUSE options]\n", argv[0]);
		return 2;
	}
	/* Absolute paths: the daemon changes directory to / when it backgrounds. */
	if (!realpath(argv[1], image_path)) {
		fprintf(stderr, "faultfs: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (argv[2][0] == '/') {
		snprintf(control_path, sizeof(control_path), "%s", argv[2]);
	} else {
		char cwd[PATH_MAX];

		if (!getcwd(cwd, sizeof(cwd)) ||
		    snprintf(control_path, sizeof(control_path), "%s/%s", cwd, argv[2]) >=
			    (int)sizeof(control_path)) {
			fprintf(stderr, "faultfs: control path too long\n");
			return 1;
		}
	}
	image_fd = open(image_path, O_RDWR | O_CLOEXEC);
	if (image_fd < 0) {
		fprintf(stderr, "faultfs: open %s: %s\n", image_path, strerror(errno));
		return 1;
	}
	fargv[fargc++] = argv[0];
	for (int i = 3; i < argc; i++)
		fargv[fargc++] = argv[i];
	return fuse_main(fargc, fargv, &ff_ops, NULL);
}
