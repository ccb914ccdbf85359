// SPDX-License-Identifier: MIT
/* file.c - open files and their data: open, read, write, flush, release, fsync, above write-behind. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "engine/internal.h"
#include "engine/wback.h"

/* @ino once no fill of it runs (fs_open_fill), or NULL. Caller holds meta.lock. */
static struct inode *iget_filled(struct fs *fs, uint64_t ino)
{
	struct inode *i;

	while ((i = meta_iget(&fs->meta, ino)) && i->filling)
		pthread_cond_wait(&fs->fill_cond, &fs->meta.lock);
	return i;
}

/* The checks of an open and its count, with meta.lock held: waits while the inode fills. */
static int open_locked(struct fs *fs, uint64_t ino, int flags, struct inode **ip)
{
	struct inode *i = iget_filled(fs, ino);
	int ret = 0;

	if (!i)
		ret = -ENOENT;
	else if (i->dir && (flags & O_ACCMODE) != O_RDONLY)
		ret = -EISDIR;
	else if (fs->ro && (flags & O_ACCMODE) != O_RDONLY)
		ret = -EROFS;
	/* may_open(): no writing an immutable file, and only appending to an append-only one */
	else if (fs_immutable(i) && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)))
		ret = -EPERM;
	else if (fs_append(i) && (((flags & O_ACCMODE) != O_RDONLY && !(flags & O_APPEND)) ||
				  (flags & O_TRUNC)))
		ret = -EPERM;
	else
		i->nopen++;
	*ip = i;
	return ret;
}

int fs_open(struct fs *fs, uint64_t ino, int flags)
{
	struct inode *i;
	int ret;

	pthread_mutex_lock(&fs->meta.lock);
	ret = open_locked(fs, ino, flags, &i);
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

int fs_open_fill(struct fs *fs, uint64_t ino, int flags, uint64_t max, uint64_t *fill)
{
	struct inode *i;
	int ret;

	*fill = 0;
	pthread_mutex_lock(&fs->meta.lock);
	ret = open_locked(fs, ino, flags, &i);
	if (!ret && max && (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_DIRECT | O_TRUNC)) &&
	    i->nopen == 1 && !__atomic_load_n(&i->kpages, __ATOMIC_RELAXED) && !i->wb &&
	    S_ISREG(i->a.mode) && i->a.size && i->a.size <= max) {
		i->filling = 1;
		*fill = i->a.size;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

void fs_fill_done(struct fs *fs, uint64_t ino, int sent)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i) {
		i->filling = 0;
		if (sent)
			__atomic_store_n(&i->kpages, 1, __ATOMIC_RELAXED);
	}
	pthread_cond_broadcast(&fs->fill_cond);
	pthread_mutex_unlock(&fs->meta.lock);
}

void fs_fill_wait(struct fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->meta.lock);
	iget_filled(fs, ino);
	pthread_mutex_unlock(&fs->meta.lock);
}

/* fs_hold() with meta.lock held. */
static struct inode *hold_locked(struct fs *fs, uint64_t ino, uint32_t gen)
{
	struct inode *i = meta_iget(&fs->meta, ino);

	if (i && (i->a.generation != gen || !i->a.nlink || !S_ISREG(i->a.mode)))
		i = NULL;
	if (i)
		i->nopen++;
	return i;
}

struct inode *fs_hold(struct fs *fs, uint64_t ino, uint32_t gen)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = hold_locked(fs, ino, gen);
	pthread_mutex_unlock(&fs->meta.lock);
	return i;
}

void fs_hold_many(struct fs *fs, struct fs_held *h, size_t n)
{
	pthread_mutex_lock(&fs->meta.lock);
	for (size_t k = 0; k < n; k++) {
		h[k].ip = hold_locked(fs, h[k].ino, h[k].gen);
		h[k].buffered = h[k].ip && h[k].ip->wb;
	}
	pthread_mutex_unlock(&fs->meta.lock);
}

static void release(struct fs *fs, uint64_t ino, int take_err);

/* One open of @i less (its write-behind state let go with the last, the inode dropped
 * when nothing keeps it). Caller holds meta.lock and has waited for its buffered data. */
static void drop_open(struct fs *fs, struct inode *i)
{
	if (!i->nopen)
		return;
	if (!--i->nopen)
		wback_forget(fs, i);
	rec_maybe_drop(fs, i);
}

void fs_unhold_many(struct fs *fs, struct fs_held *h, size_t n)
{
	pthread_mutex_lock(&fs->meta.lock);
	for (size_t k = 0; k < n; k++) {
		struct inode *i = h[k].ip;

		/* a file without write-behind state has nothing to wait for: let go here;
		 * the others take the whole release (which waits first), below */
		if (i && !i->wb) {
			drop_open(fs, i);
			h[k].ip = NULL;
		}
	}
	pthread_mutex_unlock(&fs->meta.lock);
	for (size_t k = 0; k < n; k++)
		if (h[k].ip) {
			release(fs, h[k].ino, 0);
			h[k].ip = NULL;
		}
}

/* Let go of one open of @ino; with @take_err, a write error still pending is taken. */
static void release(struct fs *fs, uint64_t ino, int take_err)
{
	struct inode *i;
	int err;

	fs_wait_written(fs, ino, take_err, &err);
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i)
		drop_open(fs, i);
	pthread_mutex_unlock(&fs->meta.lock);
}

void fs_release(struct fs *fs, uint64_t ino)
{
	/* FLUSH reported any error; a file closed without it (mmap) still gets its data out */
	release(fs, ino, 1);
}

void fs_unhold(struct fs *fs, uint64_t ino)
{
	release(fs, ino, 0); /* a write error stays for the writer's own flush or fsync */
}

int fs_flush(struct fs *fs, uint64_t ino)
{
	int err;

	fs_wait_written(fs, ino, 1, &err);
	return err;
}

int fs_fsync_file(struct fs *fs, uint64_t ino)
{
	int err, ret;

	fs_wait_written(fs, ino, 1, &err);
	ret = journal_commit(&fs->j);
	return err ? err : ret;
}

ssize_t fs_read(struct fs *fs, uint64_t ino_nr, uint64_t off, size_t size, const char **data)
{
	struct inode *ino;
	uint64_t a, b, end;
	char *buf;
	int ret;

	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	if (!S_ISREG(ino->a.mode))
		return -EINVAL;
	wback_wait(fs, ino, 0); /* reads see what was written */
	dm_rwlock_rdlock(&ino->iolock);
	end = MIN(off + size, ino->a.size);
	if (off >= end) {
		dm_rwlock_unlock(&ino->iolock);
		return 0;
	}
	a = ALIGN_DOWN(off, DMAFS_BLOCK);
	b = ALIGN_UP(end, DMAFS_BLOCK);
	buf = fs_thread_buf(0, b - a);
	if (!buf) {
		dm_rwlock_unlock(&ino->iolock);
		return -ENOMEM;
	}
	ret = fs_read_blocks(fs, ino, buf, a, b, 1);
	dm_rwlock_unlock(&ino->iolock);
	if (ret)
		return ret;
	__atomic_store_n(&ino->kpages, 1, __ATOMIC_RELAXED);
	*data = buf + (off - a);
	return end - off;
}

/* The next @size bytes of the data (*arg, which moves on: write-behind takes a request in parts). */
static int copy_mem(void *arg, char *dst, size_t size)
{
	const char **from = arg;

	memcpy(dst, *from, size);
	*from += size;
	return 0;
}

ssize_t fs_write(struct fs *fs, uint64_t ino_nr, const char *data, size_t size, uint64_t off)
{
	return fs_write_from(fs, NULL, ino_nr, size, off, copy_mem, &data);
}

ssize_t fs_write_from(struct fs *fs, const struct fs_ctx *c, uint64_t ino_nr, size_t size,
		      uint64_t off, int (*copy)(void *arg, char *dst, size_t size), void *arg)
{
	struct inode *ino;
	int priv = 0;

	if (fs->ro)
		return -EROFS;
	if (size == 0)
		return 0;
	if (off + size < off || off + size > (1ull << 60))
		return -EFBIG;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	if (ino) { /* something fs_killpriv may take away: a bit, or an xattr */
		priv = (ino->a.mode & (S_ISUID | S_ISGID)) || ino->xattrs;
		/*
		 * An immutable file takes no data at all, also through a descriptor opened
		 * before it became immutable: xfs lets write(2) through one, but refuses
		 * copy_file_range(2) into it, and the kernel sends both to us as writes. An
		 * append-only file takes data only at its end: the kernel sends O_APPEND
		 * writes there; a descriptor whose O_APPEND was cleared (F_SETFL, which the
		 * kernel cannot refuse: it does not see the flag) or a mapping would not.
		 */
		if (fs_immutable(ino) ||
		    (fs_append(ino) && off != MAX(ino->a.size, wback_size(ino))))
			priv = -EPERM;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	if (priv < 0)
		return priv;
	if (!S_ISREG(ino->a.mode))
		return -EINVAL;
	/* as file_remove_privs() before the kernel's own filesystems write */
	if (c && priv) {
		int ret = fs_killpriv(fs, c, ino_nr);

		if (ret)
			return ret;
	}
	return wback_write(fs, ino, size, off, copy, arg);
}
