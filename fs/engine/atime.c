// SPDX-License-Identifier: MIT
/*
 * atime.c - access times.
 *
 * The kernel never updates the atime of a FUSE inode itself (it marks them S_NOATIME) and
 * sends nothing for a read served from its page cache, so the daemon updates atime when a
 * read reaches it: READ, READDIR and placements. The rule is the mount's (fs.set.atime):
 * relatime (default: only when the atime is not later than mtime or ctime, or is at least
 * a day old), strictatime (every read), noatime (never); nodiratime leaves directories
 * alone. An open whose first read would change the atime drops the file's cached pages
 * (fuse/file.c), so that read reaches the daemon.
 *
 * An update only changes the inode in memory and puts its number on a list; the next
 * commit (periodic, fsync, unmount, remount read-only) logs one record per listed inode.
 * A read never waits for a write, and a crash loses at most the atime changes of one
 * commit interval.
 */
#include "engine/engine.h"

#include <stdlib.h>

#define DAY_NS (24LL * 3600 * 1000000000)

/* Caller holds meta.lock. */
static int due(const struct fs *fs, const struct inode *i, int64_t now)
{
	int64_t mtime;

	if (fs->ro || fs->set.atime == FS_ATIME_NEVER || (S_ISDIR(i->a.mode) && fs->set.nodiratime))
		return 0;
	if (fs->set.atime == FS_ATIME_STRICT)
		return 1;
	/* written data still in write-behind has its mtime there */
	mtime = MAX(i->a.mtime, wback_mtime(i));
	return i->a.atime <= mtime || i->a.atime <= i->a.ctime || now - i->a.atime >= DAY_NS;
}

int fs_atime_due(struct fs *fs, uint64_t ino)
{
	struct inode *i;
	int ret;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	ret = i && due(fs, i, fs_now());
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

int fs_accessed(struct fs *fs, uint64_t ino)
{
	int64_t now = fs_now();
	struct inode *i;
	int ret = 0;

	if (fs->ro || fs->set.atime == FS_ATIME_NEVER)
		return 0;
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i && due(fs, i, now)) {
		i->a.atime = now;
		ret = 1;
		if (!i->atime_dirty) {
			if (fs->natime_dirty == fs->catime_dirty) {
				size_t cap = fs->catime_dirty ? 2 * fs->catime_dirty : 256;
				uint64_t *v = realloc(fs->atime_dirty, cap * sizeof(*v));

				if (v) {
					fs->atime_dirty = v;
					fs->catime_dirty = cap;
				}
			}
			/* without room the change still reaches the next snapshot of the log */
			if (fs->natime_dirty < fs->catime_dirty) {
				fs->atime_dirty[fs->natime_dirty++] = ino;
				i->atime_dirty = 1;
			}
		}
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

void fs_atime_log(void *arg)
{
	struct fs *fs = arg;
	/* the same reserve as operations that grow the metadata (fs_begin) */
	size_t reserve = fs_log_reserve(fs);

	for (size_t k = 0; k < fs->natime_dirty; k++) {
		struct inode *i = meta_iget(&fs->meta, fs->atime_dirty[k]);
		struct fmt_rec r;

		if (!i || !i->atime_dirty)
			continue;
		i->atime_dirty = 0;
		/* a full log keeps the change in memory: the next compaction's snapshot has it */
		if (!journal_room(&fs->j, 1024 + reserve))
			continue;
		meta_inode_rec(i, &r);
		journal_log(&fs->j, &r);
	}
	fs->natime_dirty = 0;
	if (fs->catime_dirty > 4096) {
		free(fs->atime_dirty);
		fs->atime_dirty = NULL;
		fs->catime_dirty = 0;
	}
}
