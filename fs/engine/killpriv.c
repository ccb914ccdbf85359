// SPDX-License-Identifier: MIT
/*
 * killpriv.c - what a write, truncate, fallocate or chown takes away from a file: its
 * set-user-ID and set-group-ID bits and its file capabilities, so that the result is that
 * of the kernel's own filesystems.
 *
 * The daemon leaves FUSE_CAP_HANDLE_KILLPRIV off (libfuse 3.14 never passes it on to the
 * kernel anyway; daemon/session.c), so the kernel does the killing by FUSE's rule: before a write
 * (file_remove_privs), and with a truncate or a chown(2), it sends a mode without
 * set-user-ID, and without set-group-ID where the file is group-executable, unless the
 * caller has CAP_FSETID (chown: whoever calls). Since Linux 6.2 the kernel's own
 * filesystems also drop set-group-ID when the caller is outside the file's group and lacks
 * CAP_FSETID (setattr_should_drop_sgid): a 6666 file written by another user becomes 666
 * on xfs and 2666 by FUSE's rule. The daemon adds what FUSE's rule lacks, with the
 * caller's credentials. For a write, truncate or fallocate it applies the whole rule
 * again, which is idempotent over the kernel's part. For a chown it adds only the missing
 * set-group-ID case: the rest would also strike overlayfs's copy-up, which sets owner and
 * mode of the copy with a bare notify_change(), where the kernel asks for no killing.
 *
 * Whether the caller has CAP_FSETID, and its groups, are read from /proc/PID/status
 * (acl.h), only for files that carry one of the bits, so ordinary writes pay nothing.
 * FUSE_HANDLE_KILLPRIV_V2, where the kernel says whether the caller has CAP_FSETID, is not
 * spoken by libfuse 3.14.
 */
#include "engine/engine.h"

#include <errno.h>
#include <string.h>

#include "engine/acl.h"

#define CAPS_XATTR "security.capability"

/* What is known of the caller's credentials. */
struct who {
	int other;   /* the kernel acted for the process with other credentials */
	int fsetid;  /* it has CAP_FSETID */
};

static struct who who(const struct fs_ctx *c)
{
	struct who w = { 0, 0 };
	int same = acl_pid_same_creds(c->pid, c->uid, c->gid);

	if (same == 0)
		w.other = 1;
	else if (same > 0)
		w.fsetid = acl_pid_capable(c->pid, ACL_CAP_FSETID);
	return w;
}

/* in_group_or_capable(); with credentials not known, the request's own group only. */
static int in_group_or_capable(const struct fs_ctx *c, const struct who *w, uint32_t gid)
{
	return w->fsetid || acl_pid_in_group(c->pid, c->gid, gid);
}

uint32_t fs_killpriv_bits(const struct fs_ctx *c, uint32_t mode, uint32_t gid, int chown)
{
	uint32_t kill = 0;
	struct who w;

	if (!c || !(mode & (S_ISUID | S_ISGID)))
		return 0;
	if (chown ? S_ISDIR(mode) : !S_ISREG(mode))
		return 0;
	if (chown && (!(mode & S_ISGID) || (mode & S_IXGRP)))
		return 0; /* the kernel's part */
	w = who(c);
	/*
	 * Another layer of the kernel acting with its own credentials (overlayfs, nfsd) has
	 * applied the rule at its level already, with the caller's.
	 */
	if (w.other)
		return 0;
	if (chown) /* setattr_should_drop_sgid(), judged against the old group */
		return in_group_or_capable(c, &w, gid) ? 0 : S_ISGID;
	/* setattr_should_drop_suidgid() */
	if (w.fsetid)
		return 0;
	if (mode & S_ISUID)
		kill |= S_ISUID;
	if ((mode & S_ISGID) && ((mode & S_IXGRP) || !in_group_or_capable(c, &w, gid)))
		kill |= S_ISGID;
	return kill;
}

int fs_killpriv_due(struct fs *fs, const struct fs_ctx *c, uint64_t ino_nr)
{
	struct inode *ino;
	uint32_t mode = 0, gid = 0;

	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	if (ino) {
		mode = ino->a.mode;
		gid = ino->a.gid;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ino && fs_killpriv_bits(c, mode, gid, 0) != 0;
}

int fs_killpriv(struct fs *fs, const struct fs_ctx *c, uint64_t ino_nr)
{
	struct inode *ino;
	uint32_t mode = 0, gid = 0, kill;
	int caps = 0, ret;

	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	if (ino) {
		mode = ino->a.mode;
		gid = ino->a.gid;
		for (struct xattr *x = ino->xattrs; x && !caps; x = x->next)
			caps = !strcmp(x->name, CAPS_XATTR);
	}
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino)
		return -ENOENT;
	if (!S_ISREG(mode) || (!caps && !(mode & (S_ISUID | S_ISGID))))
		return 0;
	kill = fs_killpriv_bits(c, mode, gid, 0); /* may read /proc: no lock held */
	/*
	 * File capabilities go with any change of the data, whoever makes it: the kernel
	 * removes them itself before writes through its page cache, not before direct ones.
	 */
	if (!kill && !caps)
		return 0;
	ret = fs_begin(fs, 1024, 0);
	if (ret)
		return ret;
	ino = meta_iget(&fs->meta, ino_nr);
	if (!ino) {
		ret = -ENOENT;
	} else {
		struct fmt_rec r = { .type = REC_XDEL, .ino = ino_nr,
				     .name = (const uint8_t *)CAPS_XATTR,
				     .name_len = strlen(CAPS_XATTR) };
		int has = 0;

		for (struct xattr *x = ino->xattrs; x && !has; x = x->next)
			has = !strcmp(x->name, CAPS_XATTR);
		if (has)
			ret = journal_log(&fs->j, &r);
		if (!ret) {
			/* as notify_change() for ATTR_KILL_*: the change time moves */
			meta_inode_rec(ino, &r);
			r.a.mode &= ~kill;
			r.a.ctime = fs_now();
			ret = journal_log(&fs->j, &r);
		}
	}
	fs_end(fs);
	if (!ret && fs->attr_changed)
		fs->attr_changed(fs->attr_arg, ino_nr);
	return ret;
}
