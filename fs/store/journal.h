/* SPDX-License-Identifier: MIT */
/*
 * journal.h - the metadata log: replay at mount, group commit of appended records,
 * compaction into the other half. Layout in man/dmafs.5.
 *
 * Records are appended to an in-memory batch under meta.lock; journal_commit() writes the
 * batch after making all member data durable (ordered mode), so metadata never points at
 * data that a crash could lose. Space freed by a batch returns to the allocator only once
 * the batch is durable.
 */
#ifndef DMAFS_JOURNAL_H
#define DMAFS_JOURNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "io/member.h"
#include "store/meta.h"

struct journal {
	pthread_mutex_t commit_lock; /* serialises commits and compactions; taken before meta.lock */
	struct meta *meta;
	struct member *members;
	unsigned nmembers;
	struct member *copy[2]; /* log mirrors: members 0 and 1 */
	unsigned ncopies;
	uint64_t log_offset, half;
	/*
	 * Log areas in the data region (format version 4): with ext_len != 0 each generation's
	 * snapshot and batches are in area[its half][copy], pieces on that copy's member; the
	 * log halves hold only the headers. Chosen by compaction (commit_lock and meta.lock
	 * held) as the metadata grows and shrinks; read under either.
	 */
	uint64_t ext_len;
	struct fmt_area area[2][2];
	int grow_failed_said;
	uint8_t fs_uuid[16];
	int ro;
	int failed; /* a log write failed: the filesystem refuses further changes */
	/* protected by meta.lock: */
	int active;	   /* half in use: 0 (A) or 1 (B) */
	uint64_t gen;	   /* generation of the active half */
	uint64_t next_seq; /* sequence number of the next batch */
	uint64_t tail;	   /* offset inside the active half where the next batch goes */
	/* the last snapshot's bytes and inodes (the one replayed, then each compaction's) */
	uint64_t snap_len, snap_inodes;
	/*
	 * A compaction is due before any batch is appended (journal_compact_first): set by a
	 * read-write mount, cleared by the next commit or compaction. Atomic.
	 */
	int compact_due;
	/* the replayed log ended with journal_mark_clean's batch, in every copy alike */
	int clean;
	struct buf pending;
	/* members written since the last commit; bit i = member i */
	_Atomic uint64_t dirty;
	/*
	 * members that failed (a mirror's, mirror.c): never synced again, and a log copy on
	 * one is written no more (the other copy carries the log); bit i = member i
	 */
	_Atomic uint64_t dead;
	/*
	 * epoch counts the times a commit or compaction took the pending records; it changes
	 * under meta.lock with inplace held exclusively. A writer that rewrites blocks in place
	 * because no durable metadata refers to them yet (allocated in the current epoch) holds
	 * inplace shared across that I/O, so the commit that takes those blocks' records
	 * also makes the rewrite durable.
	 */
	pthread_rwlock_t inplace;
	_Atomic uint64_t epoch;
	/* what journal_open found in each copy (for dmafs-fsck) */
	int copy_ok[2], copy_differs[2], recovered_older;
	char copy_why[2][256];
	/* statistics, protected by commit_lock */
	uint64_t commits, compactions;
	/* the periodic commit thread */
	pthread_t thread;
	int thread_running, stop;
	pthread_cond_t cond;
	pthread_mutex_t thread_lock;
	unsigned interval;
	/* called by the periodic commit before it commits (write-behind writes its buffers) */
	void (*before_commit)(void *arg);
	void *before_arg;
	/* called by every commit under meta.lock before it takes the pending records, to
	 * append records of changes kept only in memory until then (access times) */
	void (*before_take)(void *arg);
	void *take_arg;
	/* may the log take @bytes more on each of members 0 and 1 without taking space that
	 * was promised to accepted writes (write-behind)? Called under meta.lock; NULL: yes */
	int (*may_take)(void *arg, uint64_t bytes);
	void *may_take_arg;
	/*
	 * A write or sync of member @m failed with @err: 1 when the filesystem goes on
	 * without it (a mirror: it marked the member dead, journal_member_dead), and the
	 * commit is tried again on what is left; 0 or NULL: the commit fails.
	 */
	int (*member_failed)(void *arg, unsigned m, int err);
	void *member_failed_arg;
};

/*
 * Read the log of the members (both mirrors), pick the best copy and replay it into @meta
 * (which must be empty). With @allow_older (dmafs-fsck --repair), when the current
 * generation is unusable in every copy, the previous one in the other half is replayed
 * instead (j->recovered_older is set); the daemon never does this silently. Returns 0, or -errno with a one-line reason in @err (-EUCLEAN:
 * corrupt or inconsistent metadata; -ENODATA: no valid log header in any copy).
 */
int journal_open(struct journal *j, struct member *ms, unsigned n, struct meta *meta, int ro,
		 int allow_older, char *err, size_t errlen);
/* Append a record to the pending batch and apply it. Caller holds meta.lock. */
int journal_log(struct journal *j, const struct fmt_rec *r);
/* Bytes a generation may take (snapshot and batches): a log half, or a log area. */
uint64_t journal_cap(const struct journal *j);
/*
 * The pieces of the log areas in use, whose space is not free: calls @fn(@arg, member,
 * offset, length) for each; stops at and returns the first non-zero result.
 */
int journal_areas(const struct journal *j, int (*fn)(void *arg, unsigned member, uint64_t off,
						     uint64_t len), void *arg);
/* Is there room for @need more bytes of records? Caller holds meta.lock. */
int journal_room(struct journal *j, size_t need);
/* Make everything appended so far durable. Returns 0 or -errno (-EIO, -ENOSPC, -EROFS). */
int journal_commit(struct journal *j);
/*
 * Write a fresh snapshot into the other half of every copy and switch to it. When the
 * snapshot would take more than three quarters of what a generation may hold, the log
 * moves to two log areas of twice the snapshot's size taken from the data region of
 * members 0 and 1, in up to FMT_LOG_PIECES pieces each (meta->alloc; the filesystem
 * becomes format version 4 then); when it
 * shrinks to an eighth, to smaller areas or back into the log halves. Without an
 * allocator (dmafs-fsck) the place stays as it is.
 */
int journal_compact(struct journal *j);
/*
 * Compact unless there is room for @need more bytes of records by the time this thread's
 * turn comes (the threads that found the log full at once compact it once, not once each).
 */
int journal_make_room(struct journal *j, size_t need);
/*
 * The next commit compacts instead of appending, and the commit thread does it as soon as
 * it starts. A read-write mount asks for this rather than compacting before it serves
 * (time that grows with the file count): while no batch follows the replayed log, a torn
 * tail of it can never be taken for a batch, and copies that differ are both rewritten
 * before either is appended to.
 */
void journal_compact_first(struct journal *j);
/*
 * At a clean unmount, after the last commit: append a batch with no records, which tells
 * the next mount that no torn batch can lie past the end of this log (the batches after
 * it are the next mount's, and a crash of that one leaves its last batch not empty).
 */
int journal_mark_clean(struct journal *j);
/*
 * The replayed log ended with that mark in every copy and holds few batches (at most a
 * quarter of its snapshot, or 1 MiB): a mount need not compact it before appending.
 */
int journal_clean(const struct journal *j);
/* Start/stop the thread that commits every @interval seconds. */
int journal_start(struct journal *j, unsigned interval);
void journal_stop(struct journal *j);
/* Note that data was written to member @i (it is fdatasync'd before the next commit). */
static inline void journal_dirty(struct journal *j, unsigned i)
{
	atomic_fetch_or(&j->dirty, 1ull << i);
}
/* Member @m's write or sync failed with @err: 1 when it is dropped (journal.member_failed). */
static inline int journal_drop_member(struct journal *j, unsigned m, int err)
{
	return j->member_failed && j->member_failed(j->member_failed_arg, m, err) &&
	       (atomic_load(&j->dead) & (1ull << m));
}
/* Member @i failed: see journal.dead. */
static inline void journal_member_dead(struct journal *j, unsigned i)
{
	atomic_fetch_or(&j->dead, 1ull << i);
}
/* Write the initial log (a snapshot of @snap records, gen 1) on a fresh filesystem (mkfs). */
int journal_format(struct member *ms, unsigned n, const struct buf *snap, uint64_t next_ino);
/*
 * A new filesystem UUID for the log (dmafs-label, on an unmounted filesystem): write
 * @uuid into the headers of both halves on each of the @n members that carries a log
 * copy, where they hold @old (a header that already holds @uuid, from an earlier run that
 * was interrupted, is left as it is; so is any other, which no replay takes for this
 * filesystem's). The superblocks still hold @old and are the caller's to change after
 * this. Returns 0, or -errno of the reads, writes or fdatasync.
 */
int journal_set_uuid(struct member *ms, unsigned n, const uint8_t old[16], const uint8_t uuid[16]);

#endif
