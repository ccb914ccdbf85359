// SPDX-License-Identifier: MIT
/* wback.c - write-behind: FUSE writes buffered per file, written by flusher threads. */
#include "engine/wback.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/util.h"

/* Buffers of one file in flight at most: one filling, one being written. */

static char *buf_get(struct wback *wb)
{
	char *b = NULL;

	pthread_mutex_lock(&wb->lock);
	/* huge pages: the first writes after a mount fault the buffers in 2 MiB at a time
	 * instead of 4 KiB (on a VM a fault costs as much as zeroing the page) */
	if (wb->nfree)
		b = wb->freebufs[--wb->nfree];
	else if (wb->nbufs < wb->maxbufs && (b = util_huge_alloc(wb->chunk)))
		wb->nbufs++;
	pthread_mutex_unlock(&wb->lock);
	return b;
}

static void buf_put(struct wback *wb, char *b)
{
	pthread_mutex_lock(&wb->lock);
	wb->freebufs[wb->nfree++] = b;
	pthread_mutex_unlock(&wb->lock);
}

/*
 * Take @size bytes of the free space for buffered data. Files are striped, so the
 * emptiest member bounds what can be written: with n members, n times its free space,
 * less a chunk per member for allocations that do not spread evenly.
 */
static int reserve(struct fs *fs, size_t size)
{
	struct wback *wb = &fs->wb;
	uint64_t least = UINT64_MAX, room;
	int ok;

	for (unsigned i = 0; i < fs->n; i++) {
		uint64_t f = alloc_member_free(&fs->alloc, i);

		least = f < least ? f : least;
	}
	room = least * fs->n;
	pthread_mutex_lock(&wb->lock);
	ok = room > wb->reserved + size + (uint64_t)fs->n * wb->chunk;
	if (ok)
		wb->reserved += size;
	pthread_mutex_unlock(&wb->lock);
	return ok;
}

int wback_log_may_take(void *arg, uint64_t bytes)
{
	struct fs *fs = arg;
	struct wback *wb = &fs->wb;
	uint64_t least = UINT64_MAX;
	int ok;

	for (unsigned i = 0; i < fs->n; i++) {
		uint64_t f = alloc_member_free(&fs->alloc, i);

		if (i < fs->j.ncopies)
			f = f > bytes ? f - bytes : 0;
		least = f < least ? f : least;
	}
	pthread_mutex_lock(&wb->lock);
	ok = least * fs->n >= wb->reserved + (uint64_t)fs->n * wb->chunk;
	pthread_mutex_unlock(&wb->lock);
	return ok;
}

static void unreserve(struct wback *wb, size_t size)
{
	pthread_mutex_lock(&wb->lock);
	wb->reserved -= size;
	pthread_mutex_unlock(&wb->lock);
}

static void list_add(struct wback *wb, struct wbi *w)
{
	pthread_mutex_lock(&wb->lock);
	if (!w->listed) {
		w->dnext = wb->dirty.dnext;
		w->dprev = &wb->dirty;
		wb->dirty.dnext->dprev = w;
		wb->dirty.dnext = w;
		w->listed = 1;
	}
	pthread_mutex_unlock(&wb->lock);
}

/* Caller holds wb->lock. */
static void list_del(struct wbi *w)
{
	if (w->listed) {
		w->dprev->dnext = w->dnext;
		w->dnext->dprev = w->dprev;
		w->listed = 0;
	}
}

/*
 * Hand the filled buffer to a flusher. A partial last block stays behind, copied into a
 * fresh buffer, so that the flusher's range ends on a block boundary and the next one
 * starts on one: no read-modify-write of a block between two chunks. Caller holds w->lock;
 * nothing is being written (w->fl == NULL) and w->fill_len > 0.
 */
static void handoff(struct wback *wb, struct wbi *w)
{
	uint64_t end = w->fill_off + w->fill_len, cut = ALIGN_DOWN(end, DMAFS_BLOCK);
	char *nb = NULL;

	if (cut > w->fill_off && cut < end)
		nb = buf_get(wb);
	w->fl = w->fill;
	w->fl_off = w->fill_off;
	w->fl_mtime = w->fill_mtime;
	if (nb) {
		memcpy(nb, w->fill + (cut - w->fill_off), end - cut);
		w->fl_len = cut - w->fill_off;
		w->fill = nb;
		w->fill_off = cut;
		w->fill_len = end - cut;
	} else {
		w->fl_len = w->fill_len;
		w->fill = NULL;
		w->fill_len = 0;
	}
	pthread_mutex_lock(&wb->lock);
	w->qnext = NULL;
	if (wb->qtail)
		wb->qtail->qnext = w;
	else
		wb->qhead = w;
	wb->qtail = w;
	pthread_cond_signal(&wb->work);
	pthread_mutex_unlock(&wb->lock);
}

/* Wait, holding w->lock, until nothing of the file is buffered or in flight. */
static void drain_locked(struct wback *wb, struct wbi *w)
{
	while (w->fl || w->fill_len) {
		if (!w->fl)
			handoff(wb, w);
		else
			pthread_cond_wait(&w->cond, &w->lock);
	}
	if (w->fill) { /* an empty buffer left over */
		buf_put(wb, w->fill);
		w->fill = NULL;
	}
}

static void *flusher(void *arg)
{
	struct fs *fs = arg;
	struct wback *wb = &fs->wb;

	pthread_mutex_lock(&wb->lock);
	for (;;) {
		struct wbi *w = wb->qhead;
		uint64_t off;
		size_t done = 0, len;
		ssize_t n = 0;

		if (!w) {
			if (wb->stop)
				break;
			pthread_cond_wait(&wb->work, &wb->lock);
			continue;
		}
		wb->qhead = w->qnext;
		if (!wb->qhead)
			wb->qtail = NULL;
		pthread_mutex_unlock(&wb->lock);

		/* w->fl, fl_off and fl_len stay put while it is in flight */
		off = w->fl_off;
		len = w->fl_len;
		uint64_t t0 = dm_mono_ns();
		while (done < len) {
			n = fs_write_inode(fs, w->ino, w->fl + done, len - done, off + done,
					   w->fl_mtime);
			if (n <= 0)
				break;
			done += n;
		}
		if (done < len)
			log_err("inode %llu: writing %zu buffered bytes at offset %llu failed: %s (reported to the writer by fsync or close)",
				(unsigned long long)w->ino->ino, len - done,
				(unsigned long long)(off + done), strerror(n < 0 ? (int)-n : ENOSPC));
		pthread_mutex_lock(&wb->lock);
		wb->reserved -= len;
		wb->st_bytes += done;
		wb->st_chunks++;
		wb->st_flush_ns += dm_mono_ns() - t0;
		pthread_mutex_unlock(&wb->lock);

		pthread_mutex_lock(&w->lock);
		if (done < len && !w->err)
			w->err = n < 0 ? (int)n : -ENOSPC;
		buf_put(wb, w->fl);
		w->fl = NULL;
		if (!w->fill_len) {
			w->size = 0;
			pthread_mutex_lock(&wb->lock);
			list_del(w);
			pthread_mutex_unlock(&wb->lock);
		}
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_mutex_lock(&wb->lock);
	}
	pthread_mutex_unlock(&wb->lock);
	return NULL;
}

int wback_start(struct fs *fs, unsigned mb)
{
	struct wback *wb = &fs->wb;
	size_t stripe = (size_t)fs->n * fs->su;

	memset(wb, 0, sizeof(*wb));
	pthread_mutex_init(&wb->lock, NULL);
	pthread_cond_init(&wb->work, NULL);
	wb->dirty.dnext = wb->dirty.dprev = &wb->dirty;
	if (!mb || fs->ro)
		return 0;
	/* four stripes: every member gets a run of four stripe units per chunk */
	wb->chunk = stripe * 4;
	while (wb->chunk > (16u << 20) * 4 && wb->chunk > stripe)
		wb->chunk -= stripe;
	if (wb->chunk < (1u << 20))
		wb->chunk = 1u << 20;
	wb->maxbufs = ((uint64_t)mb << 20) / wb->chunk;
	if (wb->maxbufs < 2) {
		log_warn("writebehind_mb=%u is less than two chunks of %zu KiB: writes are synchronous",
			 mb, wb->chunk >> 10);
		return 0;
	}
	wb->freebufs = calloc(wb->maxbufs, sizeof(*wb->freebufs));
	wb->nthreads = fs->n < 4 ? 4 : fs->n > 16 ? 16 : fs->n;
	wb->threads = calloc(wb->nthreads, sizeof(*wb->threads));
	if (!wb->freebufs || !wb->threads)
		return -ENOMEM;
	for (unsigned i = 0; i < wb->nthreads; i++) {
		int ret = pthread_create(&wb->threads[i], NULL, flusher, fs);

		if (ret) {
			wb->nthreads = i;
			wback_stop(fs);
			return -ret;
		}
	}
	wb->enabled = 1;
	return 0;
}

int wback_stop(struct fs *fs)
{
	struct wback *wb = &fs->wb;
	int ret = wback_flush_all(fs);

	pthread_mutex_lock(&wb->lock);
	if (wb->st_chunks)
		log_info("write-behind: %.2f GiB in %llu chunks of up to %zu MiB, %.3f s writing them (summed over %u flushers); writers waited %.3f s for flushes; %llu writes taken synchronously",
			 wb->st_bytes / 1073741824.0, (unsigned long long)wb->st_chunks,
			 wb->chunk >> 20, wb->st_flush_ns / 1e9, wb->nthreads, wb->st_wait_ns / 1e9,
			 (unsigned long long)wb->st_sync_writes);
	wb->stop = 1;
	wb->enabled = 0;
	pthread_cond_broadcast(&wb->work);
	pthread_mutex_unlock(&wb->lock);
	for (unsigned i = 0; i < wb->nthreads; i++)
		pthread_join(wb->threads[i], NULL);
	wb->nthreads = 0;
	for (size_t i = 0; i < wb->nfree; i++)
		free(wb->freebufs[i]);
	free(wb->freebufs);
	free(wb->threads);
	wb->freebufs = NULL;
	wb->threads = NULL;
	wb->nfree = 0;
	return ret;
}

/* @ino's state, created on first use. */
static struct wbi *wbi_get(struct fs *fs, struct inode *ino)
{
	struct wbi *w;

	pthread_mutex_lock(&fs->meta.lock);
	w = ino->wb;
	if (!w && (w = calloc(1, sizeof(*w)))) {
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->cond, NULL);
		w->ino = ino;
		ino->wb = w;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return w;
}

/* A synchronous write: the data into this thread's buffer, then to the members. */
static ssize_t write_now(struct fs *fs, struct inode *ino, size_t size, uint64_t off,
			 int (*copy)(void *arg, char *dst, size_t size), void *arg)
{
	static __thread char *tb;
	static __thread size_t tbl;
	int ret;

	if (tbl < size) {
		free(tb);
		tb = util_aligned_alloc(size);
		tbl = tb ? size : 0;
		if (!tb)
			return -ENOMEM;
	}
	ret = copy(arg, tb, size);
	if (ret)
		return ret;
	return fs_write_inode(fs, ino, tb, size, off, 0);
}

/*
 * The kernel cuts a write(2) into requests of at most 1 MiB, and where the writer's buffer
 * is not page-aligned (a Python bytes object, say) their ends fall inside blocks. Each
 * request is taken in parts: what fits fills the buffer to the chunk's end, the buffer goes
 * to a flusher with its partial last block kept back, and the rest follows that block in
 * the next buffer. So a flush begins and ends on block boundaries, and no block of one
 * write(2) reaches the members half new and half old between two flushes (nor is read
 * back to be merged).
 */
ssize_t wback_write(struct fs *fs, struct inode *ino, size_t size, uint64_t off,
		    int (*copy)(void *arg, char *dst, size_t size), void *arg)
{
	struct wback *wb = &fs->wb;
	struct wbi *w;
	size_t taken = 0;
	int ret = 0, reserved;

	if (!wb->enabled)
		return write_now(fs, ino, size, off, copy, arg);
	w = wbi_get(fs, ino);
	if (!w)
		return write_now(fs, ino, size, off, copy, arg);
	pthread_mutex_lock(&w->lock);
	if (w->err) {
		ret = w->err;
		w->err = 0;
		pthread_mutex_unlock(&w->lock);
		return ret;
	}
	reserved = size <= wb->chunk && reserve(fs, size);
	if (!reserved) { /* synchronous, after what is buffered */
		pthread_mutex_lock(&wb->lock);
		wb->st_sync_writes++;
		pthread_mutex_unlock(&wb->lock);
		drain_locked(wb, w);
		pthread_mutex_unlock(&w->lock);
		return write_now(fs, ino, size, off, copy, arg);
	}
	while (taken < size) {
		uint64_t at = off + taken;
		size_t part;

		if (w->fill_len && (at != w->fill_off + w->fill_len || w->fill_len == wb->chunk)) {
			/* not contiguous, or full: that buffer goes first */
			if (w->fl) {
				uint64_t t0 = dm_mono_ns();

				pthread_cond_wait(&w->cond, &w->lock);
				pthread_mutex_lock(&wb->lock);
				wb->st_wait_ns += dm_mono_ns() - t0;
				pthread_mutex_unlock(&wb->lock);
			} else
				handoff(wb, w);
			continue;
		}
		if (!w->fill && !(w->fill = buf_get(wb)))
			break; /* no buffer: the rest is written at once, below */
		if (!w->fill_len)
			w->fill_off = at;
		part = MIN(size - taken, wb->chunk - w->fill_len);
		ret = copy(arg, w->fill + w->fill_len, part);
		if (ret)
			break;
		w->fill_len += part;
		taken += part;
		__atomic_store_n(&w->fill_mtime, fs_now(), __ATOMIC_RELAXED);
		if (at + part > w->size)
			__atomic_store_n(&w->size, at + part, __ATOMIC_RELAXED);
		list_add(wb, w);
		if (w->fill_len == wb->chunk && !w->fl)
			handoff(wb, w);
	}
	if (w->fill && !w->fill_len) { /* an empty buffer goes back */
		buf_put(wb, w->fill);
		w->fill = NULL;
	}
	if (taken < size)
		unreserve(wb, size - taken);
	if (taken < size && !ret) {
		/* no buffer free: what is buffered goes first, then the rest at once */
		ssize_t n;

		pthread_mutex_lock(&wb->lock);
		wb->st_sync_writes++;
		pthread_mutex_unlock(&wb->lock);
		drain_locked(wb, w);
		pthread_mutex_unlock(&w->lock);
		n = write_now(fs, ino, size - taken, off + taken, copy, arg);
		return n < 0 ? (taken ? (ssize_t)taken : n) : (ssize_t)(taken + n);
	}
	pthread_mutex_unlock(&w->lock);
	/* a copy that failed part way: the bytes before it are taken (a short write) */
	return taken ? (ssize_t)taken : ret;
}

static void wbi_free(struct wbi *w)
{
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Drop a reference taken under wb->lock; frees a state its inode let go of meanwhile. */
static void wbi_put(struct wback *wb, struct wbi *w)
{
	int gone;

	pthread_mutex_lock(&wb->lock);
	gone = --w->refs == 0 && w->orphan;
	pthread_mutex_unlock(&wb->lock);
	if (gone)
		wbi_free(w);
}

/*
 * A waiter holds a reference: the file may be closed by its last writer meanwhile (stat,
 * truncate and layout queries come without an open file), and its state is then only
 * orphaned, freed by the last reference.
 */
int wback_wait(struct fs *fs, struct inode *ino, int take_err)
{
	struct wbi *w;
	int ret;

	pthread_mutex_lock(&fs->meta.lock);
	w = ino->wb;
	if (w) {
		pthread_mutex_lock(&fs->wb.lock);
		w->refs++;
		pthread_mutex_unlock(&fs->wb.lock);
	}
	pthread_mutex_unlock(&fs->meta.lock);
	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	drain_locked(&fs->wb, w);
	ret = w->err;
	if (take_err)
		w->err = 0;
	pthread_mutex_unlock(&w->lock);
	wbi_put(&fs->wb, w);
	return ret;
}

int wback_flush_all(struct fs *fs)
{
	struct wback *wb = &fs->wb;
	struct wbi **v = NULL, *w;
	size_t n = 0, cap = 0;
	int first = 0;

	/* the files with buffered data now: later writes wait for the next call */
	pthread_mutex_lock(&wb->lock);
	for (w = wb->dirty.dnext; w != &wb->dirty; w = w->dnext) {
		if (dm_grow(&v, &cap, n + 1, sizeof(*v), 64))
			break; /* the rest waits for the next call */
		w->refs++;
		v[n++] = w;
	}
	pthread_mutex_unlock(&wb->lock);
	for (size_t i = 0; i < n; i++) {
		w = v[i];
		pthread_mutex_lock(&w->lock);
		drain_locked(wb, w);
		if (w->err && !first) /* kept for the writer to see too */
			first = w->err;
		pthread_mutex_unlock(&w->lock);
		wbi_put(wb, w);
	}
	free(v);
	return first;
}

void wback_before_commit(void *fs)
{
	wback_flush_all(fs);
}

uint64_t wback_size(const struct inode *ino)
{
	return ino->wb ? __atomic_load_n(&ino->wb->size, __ATOMIC_RELAXED) : 0;
}

int64_t wback_mtime(const struct inode *ino)
{
	return ino->wb ? __atomic_load_n(&ino->wb->fill_mtime, __ATOMIC_RELAXED) : 0;
}

uint64_t wback_reserved(struct fs *fs)
{
	uint64_t r;

	pthread_mutex_lock(&fs->wb.lock);
	r = fs->wb.reserved;
	pthread_mutex_unlock(&fs->wb.lock);
	return r;
}

void wback_forget(struct fs *fs, struct inode *ino)
{
	struct wbi *w = ino->wb;
	int busy;

	if (!w)
		return;
	ino->wb = NULL;
	pthread_mutex_lock(&fs->wb.lock);
	list_del(w);
	busy = w->refs > 0;
	w->orphan = busy; /* the last wbi_put frees it */
	pthread_mutex_unlock(&fs->wb.lock);
	if (!busy)
		wbi_free(w);
}
