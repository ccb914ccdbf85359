// SPDX-License-Identifier: MIT
/* mount.c - the engine's life: mount, the end of service, statfs and the commit of fsync. */
#include "engine/engine.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "engine/internal.h"

static void report(const char *msg) { log_warn("mount: %s", msg); }

/* An extent in use, with its owner for the message when the metadata is damaged. */
struct used_ext {
	struct alloc_range r;
	uint64_t ino, foff;
};

struct used_set {
	struct used_ext *v[FMT_MAX_MEMBERS];
	size_t n[FMT_MAX_MEMBERS], cap[FMT_MAX_MEMBERS];
	unsigned nmembers;
};

static int collect_extents(struct inode *ino, void *arg)
{
	struct used_set *u = arg;

	for (size_t i = 0; i < ino->next; i++) {
		const struct extent *e = &ino->ext[i];
		unsigned m = e->member;

		if (m >= u->nmembers) {
			log_err("inode %llu: extent at file offset %llu names member %u of %u; run dmafs-fsck",
				(unsigned long long)ino->ino, (unsigned long long)e->off, m, u->nmembers);
			return -EUCLEAN;
		}
		if (dm_grow(&u->v[m], &u->cap[m], u->n[m] + 1, sizeof(*u->v[m]), 1024))
			return -ENOMEM;
		u->v[m][u->n[m]++] = (struct used_ext){ { e->moff, e->len }, ino->ino, e->off };
	}
	return 0;
}

static int collect_area(void *arg, unsigned m, uint64_t off, uint64_t len)
{
	struct used_set *u = arg;

	if (dm_grow(&u->v[m], &u->cap[m], u->n[m] + 1, sizeof(*u->v[m]), 1024))
		return -ENOMEM;
	u->v[m][u->n[m]++] = (struct used_ext){ { off, len }, 0, 0 };
	return 0;
}

/* Sort @v[0, n) by offset (the first 8 of its 32 bytes), using @tmp (room for n): in time
 * that grows with the count (qsort took 0.25 s of a million files' mount). */
static void sort_used(struct used_ext *v, size_t n, struct used_ext *tmp)
{
	_Static_assert(sizeof(*v) == 32 && offsetof(struct used_ext, r.off) == 0, "util_sort32's element");
	util_sort32(v, n, tmp);
}

/*
 * The allocator's free space: every member's data region less the extents of all files,
 * sorted per member and laid down in one pass (marking them one by one in inode order
 * split free ranges in arrays that grew with the file count: 2.3 s for a million files).
 */
static int map_space(struct fs *fs)
{
	struct used_set u = { .nmembers = fs->n };
	struct alloc_range *r = NULL;
	struct used_ext *tmp = NULL;
	size_t rcap = 0, tcap = 0;
	int ret = meta_for_each(&fs->meta, collect_extents, &u);

	if (!ret) /* the metadata log's areas (inode 0 in a message) */
		ret = journal_areas(&fs->j, collect_area, &u);

	for (unsigned m = 0; m < fs->n && !ret; m++) {
		size_t bad = 0;

		if (dm_grow(&tmp, &tcap, u.n[m] + 1, sizeof(*tmp), 1024)) {
			ret = -ENOMEM;
			break;
		}
		sort_used(u.v[m], u.n[m], tmp);
		if (dm_grow(&r, &rcap, u.n[m] + 1, sizeof(*r), 1024)) {
			ret = -ENOMEM;
			break;
		}
		for (size_t i = 0; i < u.n[m]; i++)
			r[i] = u.v[m][i].r;
		ret = alloc_set_used(&fs->alloc, m, r, u.n[m], &bad);
		if (ret == -EUCLEAN) {
			const struct used_ext *e = &u.v[m][bad];

			if (e->ino)
				log_err("inode %llu: extent at file offset %llu (member %u offset %llu, %llu bytes) is outside the data region or overlaps another file's or the metadata log's; run dmafs-fsck",
					(unsigned long long)e->ino, (unsigned long long)e->foff, m,
					(unsigned long long)e->r.off, (unsigned long long)e->r.len);
			else
				log_err("a piece of the metadata log's areas at member %u offset %llu (%llu bytes) overlaps a file's extent; run dmafs-fsck",
					m, (unsigned long long)e->r.off, (unsigned long long)e->r.len);
		}
	}
	for (unsigned m = 0; m < fs->n; m++)
		free(u.v[m]);
	free(r);
	free(tmp);
	return ret;
}

/*
 * A read-write mount of a version 2 filesystem makes it version 3 (format.h), whose INODE
 * records can carry generation numbers and flags. The superblocks change first, so that a
 * dmafs that reads only version 2 refuses the filesystem, naming its version, before it
 * could meet a record it does not know. Version 4 comes only when the log first grows
 * (journal.c); a member left behind by a crash during an upgrade is brought up to member
 * 0's version here.
 */
static int upgrade(struct fs *fs, char *err, size_t errlen)
{
	unsigned from = fs->members[0].sb.version, to = MAX(from, FMT_VERSION_GEN);
	int ret = members_set_version(fs->members, fs->n, to, err, errlen);

	if (!ret && from < to)
		log_info("mount: on-disk format upgraded from version %u to %u (inode generation numbers and flags); a dmafs that reads only version %u refuses it now",
			 from, to, from);
	return ret;
}

/*
 * A mount that does not compact (the log ended with a clean unmount) first commits a batch
 * of one record that changes nothing (the root's attributes as they are): should a later
 * batch of this mount be torn by a crash, the replay then ends on a batch that is not
 * the clean mark, and the next mount compacts before it appends.
 */
static int mark_dirty(struct fs *fs)
{
	struct fmt_rec r;
	int ret;

	pthread_mutex_lock(&fs->meta.lock);
	meta_inode_rec(meta_iget(&fs->meta, FMT_ROOT_INO), &r);
	ret = journal_log(&fs->j, &r);
	pthread_mutex_unlock(&fs->meta.lock);
	return ret ? ret : journal_commit(&fs->j);
}

int fs_mount(struct fs *fs, struct member *ms, unsigned n, int ro, char *err, size_t errlen)
{
	uint64_t start[FMT_MAX_MEMBERS], end[FMT_MAX_MEMBERS];
	uint64_t t0 = dm_mono_ns(), t1, t2, t3;
	int ret, changed = 0;

	memset(fs, 0, sizeof(*fs));
	fs->pool = workpool_new();
	wback_start(fs, 0); /* off until the daemon starts it: writes are synchronous */
	fs->members = ms;
	fs->n = n;
	fs->su = ms[0].sb.stripe_unit;
	fs_mirror_setup(fs);
	for (unsigned i = 0; i < n; i++)
		if (atomic_load(&fs->mstate[i]) == FS_MEMBER_MISSING) {
			/* read-only: every block written now would have one copy (mirror.c) */
			log_warn("mount: member %u is missing (degraded): read-only, its files read from their other copies; replace it with dmafs-replace(8)",
				 i);
			ro = 1;
		}
	fs->ro = ro;
	fs->members_ro = ro;
	pthread_mutex_init(&fs->mode_lock, NULL);
	pthread_cond_init(&fs->fill_cond, NULL);
	ret = meta_init(&fs->meta, fs->su, n);
	if (ret)
		return ret;
	ret = journal_open(&fs->j, ms, n, &fs->meta, ro, 0, err, errlen);
	if (ret)
		return ret;
	fs_mirror_journal(fs);
	if (!meta_iget(&fs->meta, FMT_ROOT_INO)) {
		snprintf(err, errlen, "member 0 (%s): metadata has no root directory; run dmafs-fsck",
			 ms[0].path);
		return -EUCLEAN;
	}
	t1 = dm_mono_ns();
	if (!ro) {
		size_t n0 = fs->meta.inodes.n;

		ret = meta_cleanup(&fs->meta, report);
		if (ret > 0)
			log_warn("mount: %d inconsistencies repaired", ret);
		/* repairs and orphans removed live in memory only until a compaction */
		changed = ret > 0 || fs->meta.inodes.n != n0;
	}
	for (unsigned i = 0; i < n; i++) {
		start[i] = ms[i].sb.data_offset;
		end[i] = fmt_alloc_end(&ms[i].sb); /* a mirror's second copies lie past it */
	}
	ret = alloc_init(&fs->alloc, n, start, end);
	if (ret)
		return ret;
	ret = map_space(fs);
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		snprintf(err, errlen, "metadata extents overlap or lie outside the members (see log); run dmafs-fsck");
		return ret;
	}
	fs->meta.alloc = &fs->alloc;
	t2 = dm_mono_ns();
	for (unsigned i = 0; i < n; i++) {
		pthread_mutex_init(&fs->cc[i].lock, NULL);
		fs->cc[i].blk = util_aligned_alloc(DMAFS_BLOCK);
		if (!fs->cc[i].blk)
			return -ENOMEM;
	}
	if (getrandom(&fs->next_gen, sizeof(fs->next_gen), GRND_NONBLOCK) != sizeof(fs->next_gen))
		fs->next_gen = (uint32_t)dm_wall_ns() ^ (uint32_t)getpid();
	if (!ro) {
		ret = upgrade(fs, err, errlen);
		if (ret)
			return ret;
		/*
		 * A fresh snapshot in the other half unifies the mirrors and drops a torn
		 * tail: the first commit makes it (at once, in the commit thread), before any
		 * batch is appended, so that the mount does not wait for it. A log that a
		 * clean unmount ended, alike in both copies, has neither.
		 */
		if (fs->j.gen == UINT64_MAX) {
			snprintf(err, errlen, "member 0 (%s): the metadata log's generation is at its limit (2^64 - 1) and cannot be compacted; mount read-only (-o ro) and copy the files off",
				 ms[0].path);
			return -EOVERFLOW;
		}
		if (changed || !journal_clean(&fs->j))
			journal_compact_first(&fs->j);
		else if ((ret = mark_dirty(fs))) {
			snprintf(err, errlen, "cannot write the metadata log on member 0 (%s): %s",
				 ms[0].path, strerror(-ret));
			return ret;
		}
	}
	/* the replay's buffers (its names, deferred and sorted: 64 bytes per file) are free
	 * again, but the heap would keep their pages: they go back to the system */
	malloc_trim(0);
	t3 = dm_mono_ns();
	log_debug("mount: %zu inodes; log read and replayed in %.3f s, checked and space mapped in %.3f s, the rest in %.3f s",
		  fs->meta.inodes.n, (t1 - t0) / 1e9, (t2 - t1) / 1e9, (t3 - t2) / 1e9);
	return 0;
}

int fs_finish(struct fs *fs)
{
	int fds[FMT_MAX_MEMBERS], ret, cret, failed_before;
	unsigned nfd = 0;

	if (fs->finished)
		return fs->finish_ret;
	fs->finished = 1;
	fs_rebuild_stop(fs); /* one still running stops: the new device is then no member */
	journal_stop(&fs->j);
	ret = wback_stop(fs);
	if (ret) {
		snprintf(fs->finish_err, sizeof(fs->finish_err),
			 "some buffered file data could not be written (%s); see the system log",
			 strerror(-ret));
		log_err("unmount: %s", fs->finish_err);
	}
	/* read-only since a mirror's member failed: what was logged before still commits */
	if (fs->ro && !__atomic_load_n(&fs->failed_ro, __ATOMIC_SEQ_CST))
		return fs->finish_ret = ret;
	failed_before = fs->j.failed;
	cret = journal_commit(&fs->j);
	if (cret) {
		char why[256];

		snprintf(why, sizeof(why), failed_before
			 ? "the metadata log failed while mounted (%s); changes since its last good commit are lost"
			 : "final metadata commit failed (%s); changes since the last commit are lost",
			 strerror(-cret));
		log_err("unmount: %s", why);
		if (!ret) {
			ret = cret;
			snprintf(fs->finish_err, sizeof(fs->finish_err), "%s", why);
		}
	}
	/* The commit flushed only members written since the one before; flush them all. */
	for (unsigned i = 0; i < fs->n; i++)
		if (fs_member_ok(fs, i)) /* a failed member is not synced (mirror.c) */
			fds[nfd++] = fs->members[i].fd;
	if (uring_fsync(fds, nfd)) {
		for (unsigned i = 0; i < fs->n; i++) {
			if (!fs_member_ok(fs, i) || fdatasync(fs->members[i].fd) == 0)
				continue;
			if (!ret) {
				ret = -errno;
				snprintf(fs->finish_err, sizeof(fs->finish_err),
					 "flushing member %u (%s) failed: %s", i, fs->members[i].path,
					 strerror(errno));
			}
			log_err("unmount: flushing member %u (%s) failed: %s", i, fs->members[i].path,
				strerror(errno));
		}
	}
	/* everything is durable: the next mount need not compact (journal_mark_clean) */
	if (!ret && !fs->ro && journal_mark_clean(&fs->j))
		log_warn("unmount: the metadata log's clean mark could not be written; the next mount compacts the log");
	fs->finish_ret = ret;
	return ret;
}

int fs_unmount(struct fs *fs)
{
	int ret = fs_finish(fs);

	meta_destroy(&fs->meta);
	alloc_destroy(&fs->alloc);
	for (unsigned i = 0; i < fs->n; i++)
		free(fs->cc[i].blk);
	free(fs->atime_dirty);
	buf_free(&fs->j.pending);
	return ret;
}

int fs_statfs(struct fs *fs, struct statvfs *sv)
{
	uint64_t total = 0, files, per, room, cap, free01;

	for (unsigned i = 0; i < fs->n; i++)
		total += fmt_alloc_end(&fs->members[i].sb) - fs->members[i].sb.data_offset;
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = DMAFS_BLOCK;
	sv->f_frsize = DMAFS_BLOCK;
	sv->f_blocks = total / DMAFS_BLOCK;
	sv->f_bfree = alloc_free_bytes(&fs->alloc) / DMAFS_BLOCK;
	/*
	 * A file's stripe units rotate over all members, so a large file can grow only while
	 * every member has room: report as available what the fullest member allows.
	 */
	uint64_t minfree = UINT64_MAX;
	for (unsigned i = 0; i < fs->n; i++)
		minfree = MIN(minfree, alloc_member_free(&fs->alloc, i));
	sv->f_bavail = minfree * fs->n / DMAFS_BLOCK;
	/* bytes written but still in write-behind take their space already */
	uint64_t held = wback_reserved(fs) / DMAFS_BLOCK;
	sv->f_bfree -= MIN(sv->f_bfree, held);
	sv->f_bavail -= MIN(sv->f_bavail, held);
	pthread_mutex_lock(&fs->meta.lock);
	files = fs->meta.inodes.n;
	per = fs->j.snap_inodes >= 1000 ? MAX(64, fs->j.snap_len / fs->j.snap_inodes)
					 : FMT_LOG_BYTES_PER_FILE;
	cap = journal_cap(&fs->j);
	pthread_mutex_unlock(&fs->meta.lock);
	/*
	 * Inodes are limited by the space their metadata takes: the room left in the log
	 * (less the reserve fs_begin keeps) at the last snapshot's bytes per inode, and then
	 * the log grows into the data region of members 0 and 1, where each more inode takes
	 * about 4 times its bytes there (two areas, each twice the snapshot, on each of the
	 * two) in the space the fuller of the two has free.
	 */
	room = cap - MAX(64u << 10, cap / 16) - 2 * DMAFS_BLOCK;
	sv->f_ffree = room > per * files ? (room - per * files) / per : 0;
	free01 = alloc_member_free(&fs->alloc, 0);
	if (fs->j.ncopies > 1)
		free01 = MIN(free01, alloc_member_free(&fs->alloc, 1));
	sv->f_ffree += free01 / (4 * per);
	sv->f_favail = sv->f_ffree;
	sv->f_files = files + sv->f_ffree;
	sv->f_namemax = FMT_NAME_MAX;
	if (fs->ro)
		sv->f_flag |= ST_RDONLY;
	return 0;
}

int fs_fsync(struct fs *fs) { return journal_commit(&fs->j); }
