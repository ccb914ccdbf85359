// SPDX-License-Identifier: MIT
/*
 * iflags.c - inode flags: immutable and append-only (chattr +i, +a), read and set through
 * FS_IOC_GETFLAGS and FS_IOC_SETFLAGS, which the kernel forwards to FUSE filesystems.
 *
 * The flags live in the inode's INODE records (format.h, FMT_IFL_*). Their enforcement is
 * spread over the operations they forbid (fs_immutable(), fs_append() in engine.h): the
 * kernel checks IS_IMMUTABLE and IS_APPEND, and a FUSE inode never has them.
 */
#include "engine/engine.h"

#include <errno.h>
#include <linux/fs.h>

#include "engine/acl.h"

int fs_getflags(struct fs *fs, uint64_t ino_nr, uint32_t *flags)
{
	struct inode *ino;

	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	if (ino)
		*flags = (fs_immutable(ino) ? FS_IMMUTABLE_FL : 0) | (fs_append(ino) ? FS_APPEND_FL : 0);
	pthread_mutex_unlock(&fs->meta.lock);
	return ino ? 0 : -ENOENT;
}

int fs_setflags(struct fs *fs, const struct fs_ctx *c, uint64_t ino_nr, uint32_t flags)
{
	struct inode *ino;
	uint32_t want = 0, owner, old;
	int ret, may_own, may_lock, changed = 0;

	if (flags & ~(FS_IMMUTABLE_FL | FS_APPEND_FL))
		return -EOPNOTSUPP;
	if (flags & FS_IMMUTABLE_FL)
		want |= FMT_IFL_IMMUTABLE;
	if (flags & FS_APPEND_FL)
		want |= FMT_IFL_APPEND;
	if (fs->ro)
		return -EROFS;
	if (fs->members[0].sb.version < 3) /* no record of version 2 holds flags */
		return -EOPNOTSUPP;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	owner = ino ? ino->a.uid : 0;
	old = ino ? ino->a.flags : 0;
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	/*
	 * The kernel checked both already (fileattr_set_prepare); the daemon asks again, from
	 * the caller's own credentials, and reads /proc without meta.lock.
	 */
	may_own = c->uid == owner || (c->pid > 0 && acl_pid_capable(c->pid, ACL_CAP_FOWNER));
	may_lock = (old & FMT_IFL_KNOWN) == want ||
		   (c->pid > 0 && acl_pid_capable(c->pid, ACL_CAP_LINUX_IMMUTABLE));
	if (!may_own || !may_lock)
		return -EPERM;
	ret = fs_begin(fs, 1024, 0);
	if (ret)
		return ret;
	ino = meta_iget(&fs->meta, ino_nr);
	if (!ino) {
		ret = -ENOENT;
	} else if ((ino->a.flags & FMT_IFL_KNOWN) != want) {
		struct fmt_rec r;

		meta_inode_rec(ino, &r);
		r.a.flags = (r.a.flags & ~FMT_IFL_KNOWN) | want;
		r.a.ctime = fs_now();
		ret = journal_log(&fs->j, &r);
		changed = !ret;
	}
	fs_end(fs);
	if (changed && fs->attr_changed) /* the kernel's copy has the old change time */
		fs->attr_changed(fs->attr_arg, ino_nr);
	return ret;
}
