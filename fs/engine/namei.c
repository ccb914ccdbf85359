// SPDX-License-Identifier: MIT
/* namei.c - names: lookup, create, link, unlink, rename and readlink. */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/acl.h"
#include "engine/internal.h"

static int check_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return -EINVAL;
	if (len > FMT_NAME_MAX)
		return -ENAMETOOLONG;
	if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

/* Look up @name in directory @parent; caller holds meta.lock. */
static int lookup_locked(struct fs *fs, uint64_t parent, const char *name, struct inode **dir,
			 struct inode **child, struct dentry **de)
{
	*dir = meta_iget(&fs->meta, parent);
	if (!*dir)
		return -ENOENT;
	if (!(*dir)->dir)
		return -ENOTDIR;
	*de = meta_lookup(*dir, name, strlen(name));
	*child = *de ? meta_iget(&fs->meta, (*de)->ino) : NULL;
	return 0;
}

int fs_lookup(struct fs *fs, uint64_t parent, const char *name, struct stat *st,
	      int *cache_name)
{
	struct inode *dir, *child = NULL;
	struct dentry *de;
	int ret;

	if (strlen(name) > FMT_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&fs->meta.lock);
	if (!strcmp(name, ".")) { /* fuse_get_dentry(): any inode that still lives */
		child = meta_iget(&fs->meta, parent);
		ret = child ? 0 : -ENOENT;
	} else {
		ret = lookup_locked(fs, parent, name, &dir, &child, &de);
	}
	if (!ret && !strcmp(name, "..")) /* fuse_get_parent(): directories only */
		child = meta_iget(&fs->meta, dir->dir->parent ? dir->dir->parent : FMT_ROOT_INO);
	if (!ret && !child)
		ret = -ENOENT;
	if (!ret) {
		child->nlookup++;
		fs_stat(fs, child, st);
		*cache_name = fs_name_cacheable(child);
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

uint64_t fs_generation(struct fs *fs, uint64_t ino)
{
	struct inode *i;
	uint64_t gen = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i)
		gen = i->a.generation;
	pthread_mutex_unlock(&fs->meta.lock);
	return gen;
}

void fs_forget(struct fs *fs, uint64_t ino, uint64_t n)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i) {
		i->nlookup = n > i->nlookup ? 0 : i->nlookup - n;
		if (!i->nlookup) /* the kernel let go of the inode, and so of its pages */
			__atomic_store_n(&i->kpages, 0, __ATOMIC_RELAXED);
		rec_maybe_drop(fs, i);
	}
	pthread_mutex_unlock(&fs->meta.lock);
}

/* The generation number of a new inode (none on a version 2 filesystem). Locked. */
static uint32_t new_generation(struct fs *fs)
{
	if (fs->members[0].sb.version < 3) /* read-only: nothing is made */
		return 0;
	if (!fs->next_gen) /* 0: none, the version 2 form */
		fs->next_gen++;
	return fs->next_gen++;
}

/*
 * The directory's default ACL, if any, takes the umask's place: the new inode's access ACL
 * (built in @acl; *@store_acl set when it must be stored) is that ACL limited by the *@mode
 * asked for, and a new directory inherits it as its own default ACL. Returns that default
 * ACL, or NULL (a malformed one is ignored). Locked.
 */
static struct xattr *inherit_acl(const struct fs_ctx *c, const struct inode *dir, mode_t *mode,
				 char *acl, int *store_acl)
{
	struct xattr *dacl = rec_xattr(dir, ACL_XATTR_DEFAULT);

	if (dacl && acl_check(dacl->val, dacl->len) < 0) {
		log_warn("directory inode %llu: its default ACL is malformed and is ignored (setfacl -k removes it)",
			 (unsigned long long)dir->ino);
		dacl = NULL;
	}
	if (dacl) {
		memcpy(acl, dacl->val, dacl->len);
		*store_acl = acl_create(acl, dacl->len, mode);
	} else {
		*mode &= ~(mode_t)(c->umask & 0777);
	}
	return dacl;
}

/* The record of a new inode of @c in @dir, numbered meta.next_ino. Locked. */
static void new_inode_rec(struct fs *fs, const struct fs_ctx *c, const struct inode *dir,
			  mode_t mode, dev_t rdev, int64_t now, struct fmt_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = REC_INODE;
	r->ino = fs->meta.next_ino;
	r->a.mode = mode;
	r->a.uid = c->uid;
	r->a.gid = c->gid;
	if (dir->a.mode & S_ISGID) {
		/* BSD group semantics under a setgid directory; subdirectories inherit the bit */
		r->a.gid = dir->a.gid;
		if (S_ISDIR(mode))
			r->a.mode |= S_ISGID;
	}
	r->a.nlink = S_ISDIR(mode) ? 2 : 1;
	r->a.rdev = rdev;
	r->a.atime = r->a.mtime = r->a.ctime = now;
	r->a.start_member = r->ino % fs->n;
	r->a.generation = new_generation(fs);
}

int fs_mknod(struct fs *fs, const struct fs_ctx *c, uint64_t parent, const char *name,
	     mode_t mode, dev_t rdev, const char *target, struct stat *st)
{
	struct inode *dir, *child, *ni;
	struct dentry *de;
	struct fmt_rec r;
	struct xattr *dacl = NULL;
	char acl[ACL_MAX_BYTES];
	int64_t now = fs_now();
	int ret, store_acl = 0;

	ret = check_name(name);
	if (ret)
		return ret;
	if (target && (strlen(target) == 0 || strlen(target) > FMT_SYMLINK_MAX))
		return strlen(target) ? -ENAMETOOLONG : -ENOENT;
	ret = fs_begin(fs, REC_ROOM + (target ? strlen(target) : 0) + (fs->acl ? 2 * ACL_ROOM : 0),
		       1);
	if (ret)
		return ret;
	ret = lookup_locked(fs, parent, name, &dir, &child, &de);
	if (!ret && de)
		ret = -EEXIST;
	if (!ret && dir->a.nlink == 0)
		ret = -ENOENT; /* directory removed while open */
	if (!ret && fs_immutable(dir))
		ret = -EPERM;
	if (!ret && S_ISDIR(mode) && dir->a.nlink >= UINT32_MAX - 1)
		ret = -EMLINK;
	if (ret)
		goto out;
	if (fs->acl && !S_ISLNK(mode))
		dacl = inherit_acl(c, dir, &mode, acl, &store_acl);
	new_inode_rec(fs, c, dir, mode, rdev, now, &r);
	ret = journal_log(&fs->j, &r);
	if (ret)
		goto out;
	ni = meta_iget(&fs->meta, r.ino);
	if (store_acl)
		ret = rec_xset(fs, r.ino, ACL_XATTR_ACCESS, acl, dacl->len);
	if (!ret && dacl && S_ISDIR(mode))
		ret = rec_xset(fs, r.ino, ACL_XATTR_DEFAULT, dacl->val, dacl->len);
	if (ret)
		goto out;
	if (target) {
		struct fmt_rec s = { .type = REC_SYMLINK, .ino = r.ino,
				     .name = (const uint8_t *)target, .name_len = strlen(target) };

		ret = journal_log(&fs->j, &s);
		if (ret)
			goto out;
	}
	ret = rec_link(fs, parent, r.ino, name);
	if (ret)
		goto out;
	if (S_ISDIR(mode))
		dir->a.nlink++;
	ret = rec_touch(fs, dir, now);
	if (ret)
		goto out;
	ni->nlookup++;
	fs_stat(fs, ni, st);
out:
	fs_end(fs);
	return ret;
}

int fs_link(struct fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *st,
	    uint64_t *single_dir, char *single_name)
{
	struct inode *dir, *child, *src;
	struct dentry *de;
	int64_t now = fs_now();
	int ret = check_name(name);

	*single_dir = 0;
	if (ret)
		return ret;
	ret = fs_begin(fs, REC_ROOM, 1);
	if (ret)
		return ret;
	src = meta_iget(&fs->meta, ino);
	ret = lookup_locked(fs, parent, name, &dir, &child, &de);
	if (!ret && !src)
		ret = -ENOENT;
	if (!ret && de)
		ret = -EEXIST;
	if (!ret && src->dir)
		ret = -EPERM;
	if (!ret && src->a.nlink == 0)
		ret = -ENOENT;
	if (!ret && src->a.nlink >= 65000)
		ret = -EMLINK;
	if (!ret && (fs_undeletable(src) || fs_immutable(dir)))
		ret = -EPERM; /* vfs_link(), may_create() */
	if (!ret) {
		uint64_t was = src->a.nlink == 1 && src->name ? src->parent : 0;

		if (was) /* copied now: the next record may free that dentry */
			memcpy(single_name, src->name->name, (size_t)src->name->namelen + 1);
		ret = rec_link(fs, parent, ino, name);
		if (!ret)
			*single_dir = was;
	}
	if (!ret) {
		src->a.nlink++;
		src->a.ctime = now;
		ret = rec_attr(fs, src);
	}
	if (!ret)
		ret = rec_touch(fs, dir, now);
	if (!ret) {
		src->nlookup++;
		fs_stat(fs, src, st);
	}
	fs_end(fs);
	return ret;
}

/* Remove entry @name (whose inode is @child) from @dir and drop the link. Locked. */
static int remove_entry(struct fs *fs, struct inode *dir, const char *name, struct inode *child,
			int64_t now)
{
	int ret = rec_unlink(fs, dir->ino, name);

	if (ret)
		return ret;
	if (child->dir) {
		child->a.nlink = 0;
		dir->a.nlink--;
	} else {
		child->a.nlink--;
	}
	child->a.ctime = now;
	ret = rec_attr(fs, child);
	if (!ret)
		ret = rec_touch(fs, dir, now);
	if (!ret)
		rec_maybe_drop(fs, child);
	return ret;
}

int fs_unlink(struct fs *fs, uint64_t parent, const char *name, int rmdir)
{
	struct inode *dir, *child;
	struct dentry *de;
	int ret;

	ret = fs_begin(fs, REC_ROOM, 0);
	if (ret)
		return ret;
	ret = lookup_locked(fs, parent, name, &dir, &child, &de);
	if (!ret && (!strcmp(name, ".") || !strcmp(name, "..")))
		ret = rmdir ? (strcmp(name, ".") ? -ENOTEMPTY : -EINVAL) : -EISDIR;
	if (!ret && !child)
		ret = -ENOENT;
	if (!ret && (fs_undeletable(dir) || fs_undeletable(child)))
		ret = -EPERM; /* may_delete() */
	if (!ret && rmdir && !child->dir)
		ret = -ENOTDIR;
	if (!ret && !rmdir && child->dir)
		ret = -EISDIR;
	if (!ret && rmdir && child->dir->count)
		ret = -ENOTEMPTY;
	if (!ret)
		ret = remove_entry(fs, dir, name, child, fs_now());
	fs_end(fs);
	return ret;
}

/* Is @ino equal to @anc or inside it? Follows directory parents. Locked. */
static int is_within(struct fs *fs, uint64_t ino, uint64_t anc)
{
	for (int depth = 0; depth < 100000; depth++) {
		struct inode *i;

		if (ino == anc)
			return 1;
		if (ino == FMT_ROOT_INO)
			return 0;
		i = meta_iget(&fs->meta, ino);
		if (!i || !i->dir)
			return 0;
		ino = i->dir->parent;
	}
	return 1;
}

/*
 * Put a whiteout at @name of @dir (which has no entry there now): what vfs_whiteout()
 * makes, a character device 0:0 with no permission bits, owned as a new file of @c is
 * (the group of a set-group-ID directory). Locked.
 */
static int make_whiteout(struct fs *fs, const struct fs_ctx *c, struct inode *dir,
			 const char *name, int64_t now)
{
	struct fmt_rec r;
	int ret;

	memset(&r, 0, sizeof(r));
	r.type = REC_INODE;
	r.ino = fs->meta.next_ino;
	r.a.mode = S_IFCHR;
	r.a.uid = c->uid;
	r.a.gid = (dir->a.mode & S_ISGID) ? dir->a.gid : c->gid;
	r.a.nlink = 1;
	r.a.rdev = 0;
	r.a.atime = r.a.mtime = r.a.ctime = now;
	r.a.start_member = r.ino % fs->n;
	r.a.generation = new_generation(fs);
	ret = journal_log(&fs->j, &r);
	if (!ret)
		ret = rec_link(fs, dir->ino, r.ino, name);
	return ret;
}

/* renameat2(2)'s flags, in the combinations do_renameat2() allows. */
static int check_rename_flags(const struct fs_ctx *c, unsigned flags)
{
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
		return -EINVAL;
	/* as do_renameat2(): EXCHANGE goes with neither of the others */
	if ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT)))
		return -EINVAL;
	if ((flags & RENAME_WHITEOUT) && !c)
		return -EINVAL;
	return 0;
}

/*
 * may_delete() of the source @src in @sdir (inode @parent), and of the target @dst (or NULL)
 * in @ddir (@newparent) it replaces or exchanges: neither entry nor inode may be immutable
 * or append-only; may_create() in the target directory: not immutable. Locked.
 */
static int may_rename(struct fs *fs, unsigned flags, uint64_t parent, const struct inode *sdir,
		      const struct inode *src, uint64_t newparent, const struct inode *ddir,
		      const struct inode *dst)
{
	if (fs_undeletable(sdir) || fs_undeletable(src) || fs_immutable(ddir) ||
	    (dst && (fs_undeletable(ddir) || fs_undeletable(dst))))
		return -EPERM;
	/* a directory cannot move into itself or below itself */
	if ((src->dir && is_within(fs, newparent, src->ino)) ||
	    ((flags & RENAME_EXCHANGE) && dst->dir && is_within(fs, parent, dst->ino)))
		return -EINVAL;
	return 0;
}

/* Swap the inodes of entry @name of @sdir (@src) and @newname of @ddir (@dst). Locked. */
static int exchange_entries(struct fs *fs, struct inode *sdir, const char *name, struct inode *src,
			    struct inode *ddir, const char *newname, struct inode *dst, int64_t now)
{
	uint64_t sino = src->ino, dino = dst->ino;
	int ret;

	ret = rec_unlink(fs, sdir->ino, name);
	if (!ret)
		ret = rec_unlink(fs, ddir->ino, newname);
	if (!ret)
		ret = rec_link(fs, sdir->ino, dino, name);
	if (!ret)
		ret = rec_link(fs, ddir->ino, sino, newname);
	if (!ret && sdir != ddir && (!!src->dir != !!dst->dir)) {
		/* a directory changed parent: move one link count with it */
		struct inode *gain = src->dir ? ddir : sdir, *lose = src->dir ? sdir : ddir;

		gain->a.nlink++;
		lose->a.nlink--;
	}
	src->a.ctime = dst->a.ctime = now;
	if (!ret)
		ret = rec_attr(fs, src);
	if (!ret)
		ret = rec_attr(fs, dst);
	return ret;
}

/* May @src replace @dst, another inode? Only by one of its kind, and an empty directory. */
static int may_replace(const struct inode *src, const struct inode *dst)
{
	if (src->dir && !dst->dir)
		return -ENOTDIR;
	if (!src->dir && dst->dir)
		return -EISDIR;
	if (dst->dir && dst->dir->count)
		return -ENOTEMPTY;
	return 0;
}

/* Move entry @name of @sdir (inode @src) to @newname of @ddir, where none is now. Locked. */
static int move_entry(struct fs *fs, struct inode *sdir, const char *name, struct inode *src,
		      struct inode *ddir, const char *newname, int64_t now)
{
	int ret = rec_unlink(fs, sdir->ino, name);

	if (!ret)
		ret = rec_link(fs, ddir->ino, src->ino, newname);
	if (!ret && src->dir && sdir != ddir) {
		sdir->a.nlink--;
		ddir->a.nlink++;
	}
	src->a.ctime = now;
	if (!ret)
		ret = rec_attr(fs, src);
	return ret;
}

int fs_rename(struct fs *fs, const struct fs_ctx *c, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned flags)
{
	struct inode *sdir, *src, *ddir, *dst;
	struct dentry *sde, *dde;
	int64_t now = fs_now();
	int ret;

	ret = check_rename_flags(c, flags);
	if (!ret)
		ret = check_name(newname);
	if (!ret)
		ret = check_name(name);
	if (ret)
		return ret;
	ret = fs_begin(fs, 3 * REC_ROOM, !!(flags & RENAME_WHITEOUT));
	if (ret)
		return ret;
	ret = lookup_locked(fs, parent, name, &sdir, &src, &sde);
	if (!ret)
		ret = lookup_locked(fs, newparent, newname, &ddir, &dst, &dde);
	if (ret)
		goto out;
	if (!src || ((flags & RENAME_EXCHANGE) && !dst)) {
		ret = -ENOENT;
		goto out;
	}
	if (sdir == ddir && !strcmp(name, newname))
		goto out; /* same entry */
	if (dst && (flags & RENAME_NOREPLACE)) {
		ret = -EEXIST;
		goto out;
	}
	if (ddir->a.nlink == 0) {
		ret = -ENOENT;
		goto out;
	}
	ret = may_rename(fs, flags, parent, sdir, src, newparent, ddir, dst);
	if (ret)
		goto out;
	if (flags & RENAME_EXCHANGE) {
		ret = exchange_entries(fs, sdir, name, src, ddir, newname, dst, now);
		goto touch;
	}
	if (dst) {
		if (dst == src)
			goto out; /* two links of one inode: POSIX says do nothing */
		ret = may_replace(src, dst);
		if (!ret)
			ret = remove_entry(fs, ddir, newname, dst, now);
		if (ret)
			goto out;
	}
	ret = move_entry(fs, sdir, name, src, ddir, newname, now);
	/* in the same batch as the move: the old name is never seen empty after a crash */
	if (!ret && (flags & RENAME_WHITEOUT))
		ret = make_whiteout(fs, c, sdir, name, now);
touch:
	if (!ret)
		ret = rec_touch(fs, sdir, now);
	if (!ret && ddir != sdir)
		ret = rec_touch(fs, ddir, now);
out:
	fs_end(fs);
	return ret;
}

int fs_readlink(struct fs *fs, uint64_t ino, char *buf, size_t len)
{
	struct inode *i;
	int ret = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i)
		ret = -ENOENT;
	else if (!i->symlink)
		ret = -EINVAL;
	else
		snprintf(buf, len, "%s", i->symlink);
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}
