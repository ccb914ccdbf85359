// SPDX-License-Identifier: MIT
/* txn.c - one metadata change at a time: taking meta.lock with log room, and the clock of timestamps. */
#include "engine/engine.h"

#include <errno.h>

int64_t fs_now(void) { return dm_wall_ns(); }

int fs_begin(struct fs *fs, size_t need, int grows)
{
	/*
	 * Operations that grow the metadata must leave a reserve in the log half: deletes
	 * can always be logged, and the snapshot of a full filesystem still fits a half, so
	 * a remount (which compacts) never fails for lack of log space.
	 */
	if (grows)
		need += MAX(64u << 10, fs->j.half / 16);
	if (fs->ro)
		return -EROFS;
	pthread_mutex_lock(&fs->meta.lock);
	if (fs->ro || fs->j.failed) { /* a remount read-only changes ro under meta.lock */
		int ret = fs->ro ? -EROFS : -EIO;

		pthread_mutex_unlock(&fs->meta.lock);
		return ret;
	}
	if (journal_room(&fs->j, need))
		return 0;
	pthread_mutex_unlock(&fs->meta.lock);
	journal_compact(&fs->j);
	pthread_mutex_lock(&fs->meta.lock);
	if (journal_room(&fs->j, need))
		return 0;
	if (grows && !fs->log_full_said) {
		/* said once per mount: df shows free space, so ENOSPC needs its reason */
		char h[32];

		fs->log_full_said = 1;
		log_warn("the metadata log is full: %llu inodes fill a log half of %s, so no file, name or extent can be added until some are removed, although data space may be free (df -i shows it); a filesystem for more files is made with mkfs.dmafs --log-size",
			 (unsigned long long)fs->meta.inodes.n, util_fmt_size(fs->j.half, h, sizeof(h)));
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return -ENOSPC;
}

void fs_end(struct fs *fs) { pthread_mutex_unlock(&fs->meta.lock); }
