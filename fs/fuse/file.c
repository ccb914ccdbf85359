// SPDX-License-Identifier: MIT
/* file.c - FUSE handlers for open files: create, open, read, write, fsync, fallocate. */
#include "fuse/ops.h"

#include <errno.h>

#include "io/workpool.h"

/*
 * Write-only opens (cp, dd of=, rsync's temporary files, downloaders) skip the kernel's
 * page cache: their writes come straight from the writer's pages, one copy fewer than
 * through the cache, and write-behind buffers them anyway. Such a descriptor cannot be
 * mapped for reading, and the kernel drops cached pages of the range a direct write
 * covers, so readers through other descriptors stay coherent. Everything else keeps the
 * page cache (mmap, safetensors, numpy need it), and cached pages stay valid across opens
 * because every write passes through this daemon.
 */
static void open_flags(fuse_req_t req, struct fuse_file_info *fi)
{
	fi->fh = OPS_FH(fi->flags);
	fi->keep_cache = 1;
	/* a read-only descriptor's close has nothing to wait for (nor write errors to take
	 * from the writers): the kernel then sends no FLUSH, one round trip per file fewer */
	if ((fi->flags & O_ACCMODE) == O_RDONLY)
		fi->noflush = 1;
	if (ops_srv(req)->opts.wronly_direct && (fi->flags & O_ACCMODE) == O_WRONLY && ops_fs(req)->wb.enabled)
		fi->direct_io = 1;
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi)
{
	struct fuse_entry_param e = { 0 };
	struct fs_ctx c;
	int ret;

	ops_ctx(req, &c);
	ret = fs_mknod(ops_fs(req), &c, parent, name, S_IFREG | (mode & 07777), 0, NULL, &e.attr);
	if (!ret) {
		ret = fs_open(ops_fs(req), e.attr.st_ino, fi->flags);
		if (!ret && (ret = ops_durable(req, 0, 1)))
			fs_release(ops_fs(req), e.attr.st_ino);
		if (ret)
			fs_forget(ops_fs(req), e.attr.st_ino, 1);
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	e.ino = e.attr.st_ino;
	e.generation = fs_generation(ops_fs(req), e.ino);
	open_flags(req, fi);
	e.attr_timeout = ops_srv(req)->opts.attr_timeout;
	e.entry_timeout = ops_entry_timeout(req, 1); /* a new inode, one name */
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		fs_release(ops_fs(req), e.ino);
		fs_forget(ops_fs(req), e.ino, 1);
	}
}

/*
 * open_fill: a small file opened for reading gets its data into the kernel's page cache
 * before the open is answered (a store notification), so that the read that follows is
 * served from the cache: one round trip per small file fewer. Only when the kernel may
 * hold none of its pages (else a cached file would be read again for nothing) and nobody
 * else has it open; meanwhile other opens and size changes wait (fs_open_fill), so the
 * data sent is the file's and no kernel page of it is locked waiting for this daemon.
 * Not with writeback_cache (the kernel may hold data newer than ours), nor when the
 * atime is due (the next read must reach the daemon to update it).
 */
static void open_fill(struct srv *s, fuse_ino_t ino, uint64_t size)
{
	const char *data = NULL;
	ssize_t n = fs_read(&s->fs, ino, 0, size, &data);
	int sent = 0;

	if (n > 0) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT((size_t)n);

		bv.buf[0].mem = (void *)data;
		sent = !fuse_lowlevel_notify_store(s->se, ino, 0, &bv, 0);
	}
	fs_fill_done(&s->fs, ino, sent);
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct srv *s = ops_srv(req);
	/*
	 * The kernel serves cached pages without asking the daemon, so a read would not
	 * update the atime: when the next read must (relatime: the first read after a
	 * change; strictatime: every open), the open drops the file's cached pages.
	 */
	int due = (fi->flags & O_ACCMODE) != O_WRONLY && fs_atime_due(&s->fs, ino);
	uint64_t fill = 0;
	int ret = fs_open_fill(&s->fs, ino, fi->flags,
			       s->opts.writeback_cache || due ? 0 : s->opts.open_fill, &fill);

	/* FUSE_CAP_ATOMIC_O_TRUNC (libfuse's default): O_TRUNC arrives here, not as setattr */
	if (!ret && (fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		struct stat in = { .st_size = 0 }, out;
		struct fs_ctx c;

		ops_ctx(req, &c);
		ret = ops_durable(req, fs_setattr(&s->fs, &c, ino, &in, FUSE_SET_ATTR_SIZE, &out), 0);
		if (ret)
			fs_release(&s->fs, ino);
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	open_flags(req, fi);
	/*
	 * With writeback_cache, written data reaches us later without its writer, and the
	 * kernel's own rule for write(2) keeps set-group-ID where the writer is outside the
	 * file's group (killpriv.c): such a writer's writes come to us directly instead.
	 */
	if (s->opts.writeback_cache && (fi->flags & O_ACCMODE) != O_RDONLY) {
		struct fs_ctx c;

		ops_ctx(req, &c);
		if (fs_killpriv_due(&s->fs, &c, ino))
			fi->direct_io = 1;
	}
	if (due)
		fi->keep_cache = 0;
	if (fill)
		open_fill(s, ino, fill);
	if (fuse_reply_open(req, fi) == -ENOENT)
		fs_release(&s->fs, ino);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	const char *data = NULL;
	ssize_t n;

	workpool_owner(fuse_req_ctx(req)->uid); /* its checks take turns with other users' */
	n = off < 0 ? -EINVAL : fs_read(ops_fs(req), ino, off, size, &data);

	if (n >= 0)
		fs_accessed(ops_fs(req), ino);
	if (n < 0)
		fuse_reply_err(req, -n);
	else
		fuse_reply_buf(req, data, n);
}

/* Copies the request's next @size bytes (from memory, or the pipe they were spliced into) to
 * @dst: fuse_buf_copy() moves the source bufvec on, so write-behind may take them in parts. */
static int copy_bufvec(void *arg, char *dst, size_t size)
{
	struct fuse_bufvec *src = arg;
	struct fuse_bufvec to = FUSE_BUFVEC_INIT(size);
	ssize_t n;

	to.buf[0].mem = dst;
	n = fuse_buf_copy(&to, src, 0);
	if (n < 0)
		return (int)n;
	return (size_t)n == size ? 0 : -EIO;
}

void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
		  struct fuse_file_info *fi)
{
	size_t size = fuse_buf_size(bufv);
	struct fs_ctx c;
	ssize_t n;

	ops_ctx(req, &c);
	/*
	 * A write-back from the page cache (a mapping, or writeback_cache) has no writer to
	 * judge: the kernel ran its rule when write(2) dirtied the pages, and the kernel's own
	 * filesystems drop nothing for stores through a mapping.
	 */
	n = off < 0 ? -EINVAL
		    : fs_write_from(ops_fs(req), fi->writepage ? NULL : &c, ino, size, off, copy_bufvec,
				    bufv);

	/* mount option sync: the data and the metadata that finds it are durable first */
	if (n >= 0 && ops_fs(req)->set.sync) {
		int err = fs_fsync_file(ops_fs(req), ino);

		if (err)
			n = err;
	}
	if (n < 0)
		fuse_reply_err(req, -n);
	else
		fuse_reply_write(req, n);
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_release(ops_fs(req), ino);
	fuse_reply_err(req, 0);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -fs_fsync_file(ops_fs(req), ino));
}

void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -fs_flush(ops_fs(req), ino));
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		  struct fuse_file_info *fi)
{
	struct fs_ctx c;
	int ret;

	ops_ctx(req, &c);
	/* the kernel checks all of this first (vfs_fallocate); the daemon does not rely on it */
	if (offset < 0 || length <= 0)
		ret = -EINVAL;
	else if (fi->fh == O_RDONLY + 1)
		ret = -EBADF;
	else
		ret = ops_durable(req, fs_fallocate(ops_fs(req), &c, ino, mode, offset, length), 0);
	fuse_reply_err(req, -ret);
}
