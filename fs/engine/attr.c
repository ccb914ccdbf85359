// SPDX-License-Identifier: MIT
/* attr.c - inode attributes: stat, getattr and setattr (chmod, chown, utimes, truncate). */
#include "engine/engine.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include "engine/acl.h"
#include "engine/internal.h"

void fs_stat(struct fs *fs, const struct inode *ino, struct stat *st)
{
	uint64_t bytes = 0;

	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < ino->next; i++)
		bytes += ino->ext[i].len;
	st->st_ino = ino->ino;
	st->st_mode = ino->a.mode;
	st->st_nlink = ino->a.nlink;
	st->st_uid = ino->a.uid;
	st->st_gid = ino->a.gid;
	st->st_rdev = ino->a.rdev;
	st->st_size = ino->symlink ? (off_t)strlen(ino->symlink) : (off_t)ino->a.size;
	st->st_blocks = bytes / 512;
	st->st_blksize = fs->su;
	st->st_atim.tv_sec = ino->a.atime / 1000000000;
	st->st_atim.tv_nsec = ino->a.atime % 1000000000;
	st->st_mtim.tv_sec = ino->a.mtime / 1000000000;
	st->st_mtim.tv_nsec = ino->a.mtime % 1000000000;
	st->st_ctim.tv_sec = ino->a.ctime / 1000000000;
	st->st_ctim.tv_nsec = ino->a.ctime % 1000000000;
	if (wback_size(ino)) { /* written, still in write-behind */
		int64_t t = wback_mtime(ino);

		st->st_size = MAX(st->st_size, (off_t)wback_size(ino));
		if (t > ino->a.mtime) {
			st->st_mtim.tv_sec = st->st_ctim.tv_sec = t / 1000000000;
			st->st_mtim.tv_nsec = st->st_ctim.tv_nsec = t % 1000000000;
		}
	}
}

int fs_getattr(struct fs *fs, uint64_t ino, struct stat *st)
{
	struct inode *i;

	/*
	 * stat(2) of a file with buffered writes waits for them, so st_blocks and the rest are
	 * exact (fs_stat's overlay of size and mtime covers lookups and readdirplus).
	 */
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i && wback_size(i)) {
		pthread_mutex_unlock(&fs->meta.lock);
		wback_wait(fs, i, 0);
		pthread_mutex_lock(&fs->meta.lock);
		i = meta_iget(&fs->meta, ino);
	}
	if (i)
		fs_stat(fs, i, st);
	pthread_mutex_unlock(&fs->meta.lock);
	return i ? 0 : -ENOENT;
}

/*
 * may_setattr() and do_truncate() for an immutable or append-only inode: mode, owner and
 * explicit times never change; the immutable one's times not even to now (ATTR_TOUCH);
 * the size of neither. (xfs lets ftruncate(2) through a descriptor opened before the file
 * became immutable change it; dmafs does not, as it refuses writes through one.) Locked.
 */
static int setattr_forbidden(const struct inode *i, int valid)
{
	int explicit_times = ((valid & FUSE_SET_ATTR_ATIME) && !(valid & FUSE_SET_ATTR_ATIME_NOW)) ||
			     ((valid & FUSE_SET_ATTR_MTIME) && !(valid & FUSE_SET_ATTR_MTIME_NOW));
	int times = valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME);

	if (!fs_immutable(i) && !fs_append(i))
		return 0;
	if ((valid & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) || explicit_times)
		return -EPERM;
	if (valid & FUSE_SET_ATTR_SIZE)
		return -EPERM;
	return fs_immutable(i) && times ? -EPERM : 0;
}

/*
 * The mode bits a size or owner change of @ino takes away (killpriv.c): decided before the
 * change, as the rule looks at the old group, and without meta.lock, as it may read /proc.
 */
static uint32_t setattr_kill_bits(struct fs *fs, const struct fs_ctx *c, uint64_t ino, int valid)
{
	struct inode *i;
	uint32_t mode = 0, gid = 0, kill = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i) {
		mode = i->a.mode;
		gid = i->a.gid;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	/*
	 * chown_common() for a new owner or group, do_truncate()'s
	 * dentry_needs_remove_privs() for a size.
	 */
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
		kill = fs_killpriv_bits(c, mode, gid, 1);
	if (valid & FUSE_SET_ATTR_SIZE)
		kill |= fs_killpriv_bits(c, mode, gid, 0);
	return kill;
}

/* Change the size of @ino, a regular file, to @size; done before the logged attributes. */
static int setattr_size(struct fs *fs, uint64_t ino, off_t size)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!i)
		return -ENOENT;
	if (i->dir)
		return -EISDIR;
	if (!S_ISREG(i->a.mode))
		return -EINVAL;
	if (size < 0)
		return -EINVAL;
	wback_wait(fs, i, 0); /* buffered writes land before the size changes */
	return fs_truncate_locked_data(fs, i, size);
}

/* chmod of @i (inode @ino): its permission bits, and its access ACL's. Locked (fs_begin). */
static int setattr_mode(struct fs *fs, uint64_t ino, struct inode *i, mode_t mode)
{
	struct xattr *x = fs->acl ? rec_xattr(i, ACL_XATTR_ACCESS) : NULL;

	i->a.mode = (i->a.mode & S_IFMT) | (mode & 07777);
	/* the ACL's owner, group class and other entries follow the mode */
	if (x && acl_check(x->val, x->len) > 0) {
		char acl[ACL_MAX_BYTES];

		memcpy(acl, x->val, x->len);
		acl_chmod(acl, x->len, i->a.mode);
		return rec_xset(fs, ino, ACL_XATTR_ACCESS, acl, x->len);
	}
	return 0;
}

/* atime and mtime (given or now) and ctime (given, else now) from @in. Locked (fs_begin). */
static void setattr_times(struct inode *i, const struct stat *in, int valid, int64_t now)
{
	if (valid & FUSE_SET_ATTR_ATIME_NOW)
		i->a.atime = now;
	else if (valid & FUSE_SET_ATTR_ATIME)
		i->a.atime = (int64_t)in->st_atim.tv_sec * 1000000000 + in->st_atim.tv_nsec;
	if (valid & FUSE_SET_ATTR_MTIME_NOW)
		i->a.mtime = now;
	else if (valid & FUSE_SET_ATTR_MTIME)
		i->a.mtime = (int64_t)in->st_mtim.tv_sec * 1000000000 + in->st_mtim.tv_nsec;
	if (valid & FUSE_SET_ATTR_CTIME)
		i->a.ctime = (int64_t)in->st_ctim.tv_sec * 1000000000 + in->st_ctim.tv_nsec;
	else
		i->a.ctime = now;
}

int fs_setattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, const struct stat *in,
	       int valid, struct stat *out)
{
	struct inode *i;
	int64_t now = fs_now();
	uint32_t kill = 0;
	int ret;

	if (fs->ro)
		return -EROFS;
	/* buffered writes first: their mtime must not land after this */
	i = fs_wait_written(fs, ino, 0, &ret);
	if (i) {
		pthread_mutex_lock(&fs->meta.lock);
		i = meta_iget(&fs->meta, ino);
		ret = i ? setattr_forbidden(i, valid) : 0;
		pthread_mutex_unlock(&fs->meta.lock);
		if (ret)
			return ret;
	}
	if (i && (valid & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		kill = setattr_kill_bits(fs, c, ino, valid);
	if (valid & FUSE_SET_ATTR_SIZE) {
		fs_fill_wait(fs, ino); /* the data being sent to the kernel is of this size */
		ret = setattr_size(fs, ino, in->st_size);
		if (ret)
			return ret;
	}
	ret = fs_begin(fs, REC_ROOM + (valid & FUSE_SET_ATTR_MODE ? ACL_ROOM : 0), 0);
	if (ret)
		return ret;
	i = meta_iget(&fs->meta, ino);
	if (!i) {
		ret = -ENOENT;
		goto out;
	}
	if (valid & FUSE_SET_ATTR_MODE) {
		ret = setattr_mode(fs, ino, i, in->st_mode);
		if (ret)
			goto out;
	}
	/* as the kernel does on truncate and chown: file capabilities go */
	if (valid & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) &&
	    rec_xattr(i, CAPS_XATTR)) {
		ret = rec_xdel(fs, ino, CAPS_XATTR);
		if (ret)
			goto out;
	}
	/*
	 * Also over a mode that came with the size or owner: that is the kernel's own,
	 * partial answer (see killpriv.c), never a chmod, which comes alone.
	 */
	i->a.mode &= ~kill;
	if (valid & FUSE_SET_ATTR_UID)
		i->a.uid = in->st_uid;
	if (valid & FUSE_SET_ATTR_GID)
		i->a.gid = in->st_gid;
	setattr_times(i, in, valid, now);
	ret = rec_attr(fs, i);
	if (!ret)
		fs_stat(fs, i, out);
out:
	fs_end(fs);
	return ret;
}
