// SPDX-License-Identifier: MIT
/*
 * prefetch.c - dmafs_prefetch: have the daemon read a file's chunks into its warm tier
 * (DMAFS_IOC_PREFETCH), so that later placements of them, by any process, copy from memory.
 *
 * There is no fallback off dmafs: what a prefetch fills exists only in a dmafs daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "common.h"
#include "libdmafs-int.h"

int dmafs_prefetch(int fd, uint64_t offset, uint64_t length, struct dmafs_result *res,
		   uint64_t *held)
{
	struct dmafs_ioc_prefetch rq = { .offset = offset, .length = length };
	uint64_t t0 = dm_mono_ns();
	struct mountinfo mi;
	struct statfs sfs;
	struct stat st;
	int flags, dmafs, r;

	if (res)
		memset(res, 0, sizeof(*res));
	if (held)
		*held = 0;
	flags = lib_read_fd(fd, &st);
	if (flags < 0)
		return flags;
	/* our ioctl number means nothing to other filesystems, FUSE ones included: do not
	 * send it there (the session's test, session.c) */
	if (fstatfs(fd, &sfs) || sfs.f_type != FUSE_SUPER_MAGIC)
		return -ENOTTY;
	r = mountinfo_find(st.st_dev, NULL, &mi);
	if (r)
		return r == -ENOENT ? -ENOTTY : r;
	dmafs = mi.fstype && !strcmp(mi.fstype, DMAFS_FSTYPE);
	mountinfo_free(&mi);
	if (!dmafs)
		return -ENOTTY;
	/* a prefetch only reads into the tier: restarting it after a signal is safe */
	do
		r = ioctl(fd, DMAFS_IOC_PREFETCH, &rq);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == ENOSYS ? -ENOTTY : -errno;
	if (res) {
		res->bytes = rq.bytes_read;
		res->path = DMAFS_PATH_HOST; /* O_DIRECT into host memory: the daemon's tier */
		res->elapsed_ns = dm_mono_ns() - t0;
	}
	if (held)
		*held = rq.bytes_held;
	return 0;
}
