/* SPDX-License-Identifier: MIT */
/*
 * wback.h - write-behind: a FUSE write is copied into a per-file buffer and answered at
 * once; full buffers are written to the members by flusher threads while the writer goes
 * on filling the next one.
 *
 * Without it every write waited for its member I/O, and the kernel sends a writer's next
 * write only after that reply: one member busy at a time, and a long idle gap per request.
 * With it a sequential writer's data reaches the members in chunks of several stripes (all
 * members written at once, in long runs), and the writer only waits when two chunks of its
 * file are already in flight or the memory budget is spent.
 *
 * The guarantees do not change: fsync(2) and close(2) (FLUSH) wait for the file's buffered
 * data and report a failed background write; the periodic commit writes every buffer
 * first, so data reaches the members within one commit interval as before; reads,
 * placements, layout queries and size changes of a file wait for its buffers first, so
 * nothing reads around them. Space for buffered bytes is reserved when the write is
 * accepted, so ENOSPC is still returned by write(2) itself.
 *
 * Lock order: ino->iolock is never held while waiting for a flush; meta.lock, then
 * wback.lock; wbi.lock (per inode), then wback.lock.
 */
#ifndef DMAFS_WBACK_H
#define DMAFS_WBACK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fs;
struct inode;

/* Write-behind state of one file; allocated on its first buffered write. */
struct wbi {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a flush of this file finished */
	/* protected by lock: */
	char *fill;	/* being filled (NULL: none) */
	uint64_t fill_off;
	size_t fill_len;
	int64_t fill_mtime; /* when the last write into fill was accepted (its mtime) */
	char *fl; /* handed to a flusher (busy while non-NULL) */
	uint64_t fl_off;
	size_t fl_len;
	int64_t fl_mtime;
	int err;       /* a background write failed: reported once, by write, fsync or close */
	uint64_t size; /* end of the buffered bytes (0: nothing buffered) */
	struct wbi *qnext; /* protected by wback.lock */
	struct wbi *dnext, *dprev; /* list of files with buffered data; wback.lock */
	int listed;
	unsigned refs; /* waiters and wback_flush_all hold it; wback.lock */
	int orphan;    /* its inode let go of it: the last reference frees it; wback.lock */
	struct inode *ino;
};

struct wback {
	pthread_mutex_t lock;
	pthread_cond_t work; /* the queue has work, or stop */
	/* protected by lock: */
	struct wbi *qhead, *qtail;
	struct wbi dirty; /* list head of files with buffered data */
	char **freebufs;
	size_t nfree, nbufs, maxbufs;
	uint64_t reserved; /* bytes accepted, not yet written (space they will take) */
	int stop;
	/* statistics (logged at unmount): bytes and chunks written, ns spent writing them and
	 * ns writers waited for a flush to finish */
	uint64_t st_bytes, st_chunks, st_flush_ns, st_wait_ns, st_sync_writes;
	/* set at start: */
	size_t chunk; /* bytes per buffer: whole stripes */
	unsigned nthreads;
	pthread_t *threads;
	int enabled;
};

/*
 * Start write-behind with @mb MiB of buffers (0: off, every write is synchronous).
 * Returns 0 or -errno.
 */
int wback_start(struct fs *fs, unsigned mb);
/* Write every buffer, stop the flushers, free the buffers. Returns the first flush error. */
int wback_stop(struct fs *fs);
/*
 * Accept a write of @size bytes at @off, brought in by @copy(@arg, dst, size) (0 or
 * -errno; each call takes the next part of the data): buffered when write-behind can take
 * it, else written at once (after the file's buffers). Returns bytes accepted (short when
 * a copy failed part way) or -errno (a pending background error of this file is returned
 * here once).
 */
ssize_t wback_write(struct fs *fs, struct inode *ino, size_t size, uint64_t off,
		    int (*copy)(void *arg, char *dst, size_t size), void *arg);
/* Wait until nothing of @ino is buffered or being written. Returns the pending background
 * error of the file or 0; @take_err clears it (fsync and close report it once). Caller
 * holds no lock of @ino and not meta.lock. */
int wback_wait(struct fs *fs, struct inode *ino, int take_err);
/* Write every file's buffers and wait; returns the first error seen (kept per file too). */
int wback_flush_all(struct fs *fs);
/* journal.before_commit: the periodic commit takes what was written until now. */
void wback_before_commit(void *fs);
/* End of buffered bytes of @ino beyond its logged size, for stat (0: none). */
uint64_t wback_size(const struct inode *ino);
/* When the last buffered write of @ino was accepted (its mtime; 0: none). */
int64_t wback_mtime(const struct inode *ino);
/* journal.may_take: may the log take @bytes more of members 0 and 1 and still leave
 * the space reserved for accepted writes? Caller holds meta.lock. */
int wback_log_may_take(void *fs, uint64_t bytes);
/* Bytes accepted but not yet allocated (statfs subtracts them from the free space). */
uint64_t wback_reserved(struct fs *fs);
/* Let go of @ino's write-behind state (its file is closed everywhere and nothing is
 * buffered: after wback_wait). Caller holds meta.lock. */
void wback_forget(struct fs *fs, struct inode *ino);

#endif
