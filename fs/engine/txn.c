// SPDX-License-Identifier: MIT
/* txn.c - one metadata change at a time: taking meta.lock with log room, and the clock of timestamps. */
#include "engine/engine.h"

#include <errno.h>

int64_t fs_now(void) { return dm_wall_ns(); }

int fs_begin(struct fs *fs, size_t need, int grows)
{
	size_t reserve = 0;

	if (fs->ro)
		return -EROFS;
	pthread_mutex_lock(&fs->meta.lock);
	/*
	 * Operations that grow the metadata must leave a reserve in the log: deletes can
	 * always be logged, and the snapshot of a full filesystem still fits, so a remount
	 * (which compacts) never fails for lack of log space.
	 */
	if (grows)
		reserve = fs_log_reserve(fs);
	if (fs->ro || fs->j.failed) { /* a remount read-only changes ro under meta.lock */
		int ret = fs->ro ? -EROFS : -EIO;

		pthread_mutex_unlock(&fs->meta.lock);
		return ret;
	}
	if (journal_room(&fs->j, need + reserve))
		return 0;
	pthread_mutex_unlock(&fs->meta.lock);
	journal_make_room(&fs->j, need + reserve); /* compacts, which grows the log when it can */
	pthread_mutex_lock(&fs->meta.lock);
	if (grows)
		reserve = fs_log_reserve(fs);
	if (journal_room(&fs->j, need + reserve))
		return 0;
	if (grows && !fs->log_full_said) {
		/* said once per mount: df shows free space, so ENOSPC needs its reason */
		char h[32];

		fs->log_full_said = 1;
		log_warn("the metadata log is full: %llu inodes fill %s of log and it cannot grow (see above), so no file, name or extent can be added until some are removed (df -i shows it)",
			 (unsigned long long)fs->meta.inodes.n, util_fmt_size(journal_cap(&fs->j), h, sizeof(h)));
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return -ENOSPC;
}

size_t fs_log_reserve(const struct fs *fs) { return MAX(64u << 10, journal_cap(&fs->j) / 16); }

void fs_end(struct fs *fs) { pthread_mutex_unlock(&fs->meta.lock); }
