// SPDX-License-Identifier: MIT
/*
 * session.c - dmafs_session_*: find out whether a path is on dmafs, keep one descriptor
 * on the mount for the control ioctls, and report capabilities.
 *
 * A path is on dmafs when three things agree: statfs says FUSE, /proc/self/mountinfo
 * says "fuse.dmafs" for the mount's device, and the daemon answers DMAFS_IOC_INFO with
 * our protocol version. Anything else gives a posix-fallback session whose why-text says
 * which test failed, so that "posix" is never silent.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "libdmafs-int.h"

/*
 * Open something on the mount holding @path that the ioctls can be issued on: the path
 * itself when it is a regular file or a directory, else its directory (a FIFO or device
 * node would block or reach a driver instead of the daemon).
 */
static int open_on_mount(const char *path)
{
	struct stat st;
	char *copy;
	int fd;

	if (stat(path, &st))
		return -errno;
	if (S_ISDIR(st.st_mode))
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (S_ISREG(st.st_mode))
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	else {
		copy = strdup(path);
		if (!copy)
			return -ENOMEM;
		fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		free(copy);
	}
	return fd < 0 ? -errno : fd;
}

static int query_info(struct dmafs_session *s, struct dmafs_ioc_info *info)
{
	int ret;

	memset(info, 0, sizeof(*info));
	ret = session_ioctl(s, DMAFS_IOC_INFO, info);
	if (ret)
		return ret;
	info->t[0].why[sizeof(info->t[0].why) - 1] = '\0';
	info->t[1].why[sizeof(info->t[1].why) - 1] = '\0';
	info->t[2].why[sizeof(info->t[2].why) - 1] = '\0';
	return 0;
}

/* Decide dmafs or posix mode; fills s->on_dmafs, s->info or s->why_posix. */
static void probe(struct dmafs_session *s, const char *path)
{
	struct statfs sfs;
	struct stat st;
	struct mountinfo mi;
	int ret;

	if (fstat(s->fd, &st) == 0)
		s->dev = st.st_dev;
	if (mountinfo_find(s->dev, path, &mi) == 0) {
		s->mnt = mi.mnt;
		s->fstype = mi.fstype;
		free(mi.source);
	}
	if (fstatfs(s->fd, &sfs) || sfs.f_type != FUSE_SUPER_MAGIC) {
		snprintf(s->why_posix, sizeof(s->why_posix),
			 "%s is not on a dmafs mount (%s%s%s): placements use pread + copy in the calling process",
			 path, s->fstype ? s->fstype : "not FUSE", s->mnt ? " at " : "",
			 s->mnt ? s->mnt : "");
		return;
	}
	if (!s->fstype || strcmp(s->fstype, DMAFS_FSTYPE)) {
		snprintf(s->why_posix, sizeof(s->why_posix),
			 "%s is on a FUSE mount of type %s, not %s: placements use pread + copy in the calling process",
			 path, s->fstype ? s->fstype : "(unknown)", DMAFS_FSTYPE);
		return;
	}
	ret = query_info(s, &s->info);
	if (ret) {
		snprintf(s->why_posix, sizeof(s->why_posix),
			 "the dmafs daemon of %s did not answer DMAFS_IOC_INFO (%s): placements use pread + copy in the calling process",
			 s->mnt ? s->mnt : path, strerror(-ret));
		return;
	}
	if (s->info.version != DMAFS_PROTO_VERSION) {
		snprintf(s->why_posix, sizeof(s->why_posix),
			 "the dmafs daemon of %s speaks placement protocol %u, this libdmafs %d: placements use pread + copy (install matching versions)",
			 s->mnt ? s->mnt : path, s->info.version, DMAFS_PROTO_VERSION);
		return;
	}
	s->on_dmafs = 1;
}

int dmafs_session_open(const char *path, struct dmafs_session **out)
{
	struct dmafs_session *s;
	int fd;

	if (!path || !out)
		return -EINVAL;
	fd = open_on_mount(path);
	if (fd < 0)
		return fd;
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->fd = fd;
	pthread_mutex_init(&s->lock, NULL);
	probe(s, path);
	*out = s;
	return 0;
}

void dmafs_session_close(struct dmafs_session *s)
{
	if (!s)
		return;
	while (s->bufs)
		buf_release(s->bufs, 1);
	close(s->fd);
	pthread_mutex_destroy(&s->lock);
	free(s->mnt);
	free(s->fstype);
	free(s);
}

/* Fallback capabilities: what this process can do by itself. */
static void posix_target(struct dmafs_session *s, int target, struct dmafs_target_caps *t)
{
	char why[200] = "";
	struct gpu *g;

	if (target == DMAFS_TARGET_HOST) {
		t->path = DMAFS_PATH_POSIX;
		t->devices = 0;
		snprintf(t->why, sizeof(t->why), "%s", s->why_posix);
		return;
	}
	if (gpu_load(target, &g, why, sizeof(why))) {
		t->path = DMAFS_PATH_NONE;
		t->devices = -1;
		snprintf(t->why, sizeof(t->why), "%s", why);
		return;
	}
	t->path = DMAFS_PATH_POSIX;
	t->devices = gpu_count(g);
	snprintf(t->why, sizeof(t->why), "%s", s->why_posix);
}

int dmafs_session_caps(struct dmafs_session *s, struct dmafs_caps *caps)
{
	struct dmafs_ioc_info info;
	struct dmafs_target_caps *t[DMAFS_TARGET_MAX + 1];
	int ret;

	if (!s || !caps)
		return -EINVAL;
	memset(caps, 0, sizeof(*caps));
	t[DMAFS_TARGET_HOST] = &caps->host;
	t[DMAFS_TARGET_CUDA] = &caps->cuda;
	t[DMAFS_TARGET_HIP] = &caps->hip;
	if (!s->on_dmafs) {
		caps->on_dmafs = 0;
		for (int k = 1; k <= DMAFS_TARGET_MAX; k++)
			posix_target(s, k, t[k]);
		return 0;
	}
	/* Ask again: the daemon's answer can change (a GPU reset, staging memory). */
	ret = query_info(s, &info);
	if (ret)
		return ret == -ENOTCONN ? ret : -EIO;
	s->info = info;
	caps->on_dmafs = 1;
	caps->proto_version = (int)info.version;
	caps->members = info.members;
	caps->stripe_unit = info.stripe_unit;
	caps->staging_bytes = info.staging_bytes;
	for (int k = 1; k <= DMAFS_TARGET_MAX; k++) {
		t[k]->path = DMAFS_PATH_NONE;
		t[k]->devices = -1;
		snprintf(t[k]->why, sizeof(t[k]->why), "the daemon did not report this target");
	}
	for (int i = 0; i < DMAFS_TARGET_MAX; i++) {
		const struct dmafs_ioc_target_info *ti = &info.t[i];

		if (ti->target < 1 || ti->target > DMAFS_TARGET_MAX)
			continue;
		t[ti->target]->path = ti->path <= DMAFS_PATH_P2P_COMPAT ? (int)ti->path : DMAFS_PATH_NONE;
		t[ti->target]->devices = ti->devices;
		snprintf(t[ti->target]->why, sizeof(t[ti->target]->why), "%s", ti->why);
	}
	return 0;
}
