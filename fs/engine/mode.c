// SPDX-License-Identifier: MIT
/*
 * mode.c - switching a mounted filesystem between read-only and read-write (remount).
 *
 * The kernel's FUSE superblock takes MS_RDONLY on a remount but does not tell the daemon;
 * the remount helper (remount.c) tells it through an ioctl on the mount's root, after the
 * kernel mount has become read-only (so no writer is left: the kernel refuses the
 * remount with EBUSY while a file is open for writing) or before it becomes read-write.
 */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Is @fd the same file or device as @m's descriptor? */
static int same_member(int fd, const struct member *m)
{
	struct stat a, b;

	if (fstat(fd, &a) || fstat(m->fd, &b))
		return 0;
	if (S_ISBLK(a.st_mode))
		return S_ISBLK(b.st_mode) && a.st_rdev == b.st_rdev;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Reopen every member for writing (mounted with -o ro). The read-only descriptor stays
 * open: it holds the exclusive claim of a block device (O_EXCL) or the lock of an image
 * file, which is taken exclusively first, so no other dmafs can be using the member.
 */
static int reopen_members_rw(struct fs *fs, char *err, size_t errlen)
{
	int fds[FMT_MAX_MEMBERS];
	unsigned i;
	int ret = 0;

	for (i = 0; i < fs->n; i++) {
		struct member *m = &fs->members[i];
		char path[64];

		fds[i] = -1;
		if (!m->is_blkdev && flock(m->fd, LOCK_EX | LOCK_NB)) {
			ret = -errno;
			snprintf(err, errlen, "member %u (%s): in use by another process (flock: %s)", i,
				 m->path, strerror(errno));
			break;
		}
		/* through /proc: the very file the daemon has open, whatever its path now */
		snprintf(path, sizeof(path), "/proc/self/fd/%d", m->fd);
		fds[i] = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
		if (fds[i] < 0) {
			ret = -errno;
			snprintf(err, errlen, "member %u (%s): cannot open it for writing: %s", i,
				 m->path, strerror(errno));
			break;
		}
		if (!same_member(fds[i], m)) {
			ret = -ESTALE;
			snprintf(err, errlen, "member %u (%s): reopening it gave another file", i,
				 m->path);
			close(fds[i]);
			fds[i] = -1;
			break;
		}
	}
	if (ret) {
		/* members 0..i: back to what they were */
		for (unsigned k = 0; k <= i && k < fs->n; k++) {
			if (fds[k] >= 0)
				close(fds[k]);
			if (!fs->members[k].is_blkdev)
				flock(fs->members[k].fd, LOCK_SH | LOCK_NB);
		}
		return ret;
	}
	for (i = 0; i < fs->n; i++) {
		fs->members[i].hold_fd = fs->members[i].fd;
		fs->members[i].fd = fds[i];
	}
	return 0;
}

/* A filesystem mounted read-only becomes writable as a read-write mount starts. */
static int start_writing(struct fs *fs, char *err, size_t errlen)
{
	int ret = reopen_members_rw(fs, err, errlen);

	if (ret)
		return ret;
	fs->members_ro = 0;
	fs->j.ro = 0;
	/* as at a read-write mount: a fresh snapshot unifies the mirrors, drops a torn tail */
	ret = journal_compact(&fs->j);
	if (ret == -ENOSPC) {
		log_warn("remount: metadata log is full; only deletions will succeed until space is freed");
		ret = 0;
	}
	if (ret) {
		snprintf(err, errlen, "cannot write the metadata log on member 0 (%s): %s",
			 fs->members[0].path, strerror(-ret));
		fs->j.ro = 1;
		return ret;
	}
	pthread_mutex_lock(&fs->meta.lock);
	fs->ro = 0;
	pthread_mutex_unlock(&fs->meta.lock);
	ret = wback_start(fs, fs->set.writebehind_mb);
	if (ret)
		log_warn("remount: cannot start write-behind (%s); writes go to the members at once",
			 strerror(-ret));
	ret = journal_start(&fs->j, fs->set.commit_interval);
	if (ret) {
		snprintf(err, errlen, "cannot start the commit thread: %s", strerror(-ret));
		pthread_mutex_lock(&fs->meta.lock);
		fs->ro = 1;
		pthread_mutex_unlock(&fs->meta.lock);
		return ret;
	}
	return 0;
}

int fs_set_ro(struct fs *fs, int ro, char *err, size_t errlen)
{
	int ret = 0, cret;

	*err = '\0';
	pthread_mutex_lock(&fs->mode_lock);
	if (ro && !fs->ro) {
		/* buffered data first: its flushers log extents, which read-only refuses */
		ret = wback_flush_all(fs);
		if (ret)
			snprintf(err, errlen, "some buffered file data could not be written (%s); see the system log",
				 strerror(-ret));
		pthread_mutex_lock(&fs->meta.lock);
		fs->ro = 1;
		pthread_mutex_unlock(&fs->meta.lock);
		cret = journal_commit(&fs->j);
		if (cret && !ret) {
			ret = cret;
			snprintf(err, errlen, "the metadata commit failed (%s); changes since the last commit are lost",
				 strerror(-cret));
		}
		if (ret)
			log_err("remount read-only: %s", err);
		else
			log_info("remounted read-only: everything written is on the members");
	} else if (!ro && fs->ro) {
		unsigned bad = fs->n;

		for (unsigned i = 0; i < fs->n && bad == fs->n; i++)
			if (!fs_member_ok(fs, i))
				bad = i;
		if (bad < fs->n) {
			ret = -EROFS;
			snprintf(err, errlen, "member %u is %s: the filesystem stays read-only until it is replaced (dmafs-replace(8))",
				 bad, atomic_load(&fs->mstate[bad]) == FS_MEMBER_MISSING ? "missing" : "failed");
		} else if (fs->rebuilt) {
			ret = -EROFS;
			snprintf(err, errlen, "a member was rebuilt while mounted: unmount and mount again to write");
		} else if (fs->members_ro)
			ret = start_writing(fs, err, errlen);
		else if (fs->j.failed) {
			ret = -EIO;
			snprintf(err, errlen, "the metadata log failed earlier; unmount, run dmafs-fsck and mount again");
		} else {
			pthread_mutex_lock(&fs->meta.lock);
			fs->ro = 0;
			pthread_mutex_unlock(&fs->meta.lock);
		}
		if (ret)
			log_err("remount read-write: %s", err);
		else
			log_info("remounted read-write");
	}
	pthread_mutex_unlock(&fs->mode_lock);
	return ret;
}
