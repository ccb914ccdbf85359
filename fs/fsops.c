// SPDX-License-Identifier: MIT
/* fsops.c - namespace operations of the engine: create, link, rename, attributes, xattrs. */
#include "fsops.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "acl.h"

#define REC_ROOM 1024 /* log bytes reserved for one namespace operation */
#define ACL_ROOM (ACL_MAX_BYTES + 128) /* log bytes for one ACL xattr record */
#define LAYOUT_XATTR "user.dmafs.layout"
#define CAPS_XATTR "security.capability"

int64_t fs_now(void) { return (int64_t)util_now_ns(); }

int fs_begin(struct fs *fs, size_t need, int grows)
{
	/*
	 * Operations that grow the metadata must leave a reserve in the log half: deletes
	 * can always be logged, and the snapshot of a full filesystem still fits a half, so
	 * a remount (which compacts) never fails for lack of log space.
	 */
	if (grows)
		need += MAX(64u << 10, fs->j.half / 16);
	if (fs->ro)
		return -EROFS;
	pthread_mutex_lock(&fs->meta.lock);
	if (fs->ro || fs->j.failed) { /* a remount read-only changes ro under meta.lock */
		int ret = fs->ro ? -EROFS : -EIO;

		pthread_mutex_unlock(&fs->meta.lock);
		return ret;
	}
	if (journal_room(&fs->j, need))
		return 0;
	pthread_mutex_unlock(&fs->meta.lock);
	journal_compact(&fs->j);
	pthread_mutex_lock(&fs->meta.lock);
	if (journal_room(&fs->j, need))
		return 0;
	pthread_mutex_unlock(&fs->meta.lock);
	return -ENOSPC;
}

void fs_end(struct fs *fs) { pthread_mutex_unlock(&fs->meta.lock); }

static void report(const char *msg) { log_warn("mount: %s", msg); }

static int mark_extents(struct inode *ino, void *arg)
{
	struct fs *fs = arg;

	for (size_t i = 0; i < ino->next; i++) {
		const struct extent *e = &ino->ext[i];

		if (alloc_mark_used(&fs->alloc, e->member, e->moff, e->len)) {
			log_err("inode %llu: extent at file offset %llu (member %u offset %llu, %u bytes) is outside the data region or overlaps another file; run dmafs-fsck",
				(unsigned long long)ino->ino, (unsigned long long)e->off, e->member,
				(unsigned long long)e->moff, e->len);
			return -EUCLEAN;
		}
	}
	return 0;
}

/*
 * A read-write mount of a version 2 filesystem makes it version 3 (format.h), whose INODE
 * records can carry generation numbers and flags. The superblocks change first, so that a
 * dmafs that reads only version 2 refuses the filesystem, naming its version, before it
 * could meet a record it does not know.
 */
static int upgrade(struct fs *fs, char *err, size_t errlen)
{
	unsigned from = fs->members[0].sb.version;
	int ret;

	if (from == FMT_VERSION)
		return 0;
	for (unsigned i = 0; i < fs->n; i++) {
		fs->members[i].sb.version = FMT_VERSION;
		ret = member_write_sb(&fs->members[i]);
		if (ret) {
			snprintf(err, errlen, "member %u (%s): cannot write its superblock (upgrade to on-disk format version %d): %s",
				 i, fs->members[i].path, FMT_VERSION, strerror(-ret));
			return ret;
		}
	}
	log_info("mount: on-disk format upgraded from version %u to %d (inode generation numbers and flags); a dmafs that reads only version %u refuses it now",
		 from, FMT_VERSION, from);
	return 0;
}

int fs_mount(struct fs *fs, struct member *ms, unsigned n, int ro, char *err, size_t errlen)
{
	uint64_t start[FMT_MAX_MEMBERS], end[FMT_MAX_MEMBERS];
	int ret;

	memset(fs, 0, sizeof(*fs));
	wback_start(fs, 0); /* off until the daemon starts it: writes are synchronous */
	fs->members = ms;
	fs->n = n;
	fs->su = ms[0].sb.stripe_unit;
	fs->ro = ro;
	fs->members_ro = ro;
	pthread_mutex_init(&fs->mode_lock, NULL);
	ret = meta_init(&fs->meta, fs->su, n);
	if (ret)
		return ret;
	ret = journal_open(&fs->j, ms, n, &fs->meta, ro, 0, err, errlen);
	if (ret)
		return ret;
	if (!meta_iget(&fs->meta, FMT_ROOT_INO)) {
		snprintf(err, errlen, "member 0 (%s): metadata has no root directory; run dmafs-fsck",
			 ms[0].path);
		return -EUCLEAN;
	}
	if (!ro) {
		ret = meta_cleanup(&fs->meta, report);
		if (ret > 0)
			log_warn("mount: %d inconsistencies repaired", ret);
	}
	for (unsigned i = 0; i < n; i++) {
		start[i] = ms[i].sb.data_offset;
		end[i] = ms[i].sb.data_end;
	}
	ret = alloc_init(&fs->alloc, n, start, end);
	if (ret)
		return ret;
	ret = meta_for_each(&fs->meta, mark_extents, fs);
	if (ret) {
		snprintf(err, errlen, "metadata extents overlap or lie outside the members (see log); run dmafs-fsck");
		return ret;
	}
	fs->meta.alloc = &fs->alloc;
	for (unsigned i = 0; i < n; i++) {
		pthread_mutex_init(&fs->cc[i].lock, NULL);
		fs->cc[i].blk = util_aligned_alloc(DMAFS_BLOCK);
		if (!fs->cc[i].blk)
			return -ENOMEM;
	}
	if (getrandom(&fs->next_gen, sizeof(fs->next_gen), GRND_NONBLOCK) != sizeof(fs->next_gen))
		fs->next_gen = (uint32_t)util_now_ns() ^ (uint32_t)getpid();
	if (!ro) {
		ret = upgrade(fs, err, errlen);
		if (ret)
			return ret;
		/* A fresh snapshot in the other half: unifies the mirrors, drops a torn tail. */
		ret = journal_compact(&fs->j);
		if (ret == -ENOSPC) {
			/* keep appending to the current half; deletes will make room */
			log_warn("mount: metadata log is full; only deletions will succeed until space is freed");
			ret = 0;
		}
		if (ret) {
			snprintf(err, errlen, "cannot write the metadata log on member 0 (%s): %s",
				 ms[0].path, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int fs_finish(struct fs *fs)
{
	int fds[FMT_MAX_MEMBERS], ret, cret, failed_before;

	if (fs->finished)
		return fs->finish_ret;
	fs->finished = 1;
	journal_stop(&fs->j);
	ret = wback_stop(fs);
	if (ret) {
		snprintf(fs->finish_err, sizeof(fs->finish_err),
			 "some buffered file data could not be written (%s); see the system log",
			 strerror(-ret));
		log_err("unmount: %s", fs->finish_err);
	}
	if (fs->ro)
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
		fds[i] = fs->members[i].fd;
	if (uring_fsync(fds, fs->n)) {
		for (unsigned i = 0; i < fs->n; i++) {
			if (fdatasync(fds[i]) == 0)
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

int fs_lookup(struct fs *fs, uint64_t parent, const char *name, struct stat *st)
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

/* Log a change of @ino's attributes. Caller holds meta.lock. */
static int log_attr(struct fs *fs, struct inode *ino)
{
	struct fmt_rec r;

	meta_inode_rec(ino, &r);
	return journal_log(&fs->j, &r);
}

static int log_touch(struct fs *fs, struct inode *ino, int64_t now)
{
	struct fmt_rec r;

	meta_inode_rec(ino, &r);
	r.a.mtime = r.a.ctime = now;
	return journal_log(&fs->j, &r);
}

static int log_link(struct fs *fs, uint64_t dir, uint64_t ino, const char *name)
{
	struct fmt_rec r = { .type = REC_LINK, .dir = dir, .ino = ino,
			     .name = (const uint8_t *)name, .name_len = strlen(name) };

	return journal_log(&fs->j, &r);
}

static int log_unlink(struct fs *fs, uint64_t dir, const char *name)
{
	struct fmt_rec r = { .type = REC_UNLINK, .dir = dir, .name = (const uint8_t *)name,
			     .name_len = strlen(name) };

	return journal_log(&fs->j, &r);
}

static struct xattr *xattr_get(const struct inode *ino, const char *name)
{
	struct xattr *x;

	for (x = ino->xattrs; x && strcmp(x->name, name); x = x->next)
		;
	return x;
}

static int log_xset(struct fs *fs, uint64_t ino, const char *name, const void *val, size_t len)
{
	struct fmt_rec r = { .type = REC_XSET, .ino = ino, .name = (const uint8_t *)name,
			     .name_len = strlen(name), .val = val, .val_len = len };

	return journal_log(&fs->j, &r);
}

static int log_xdel(struct fs *fs, uint64_t ino, const char *name)
{
	struct fmt_rec r = { .type = REC_XDEL, .ino = ino, .name = (const uint8_t *)name,
			     .name_len = strlen(name) };

	return journal_log(&fs->j, &r);
}

/* Free an inode nobody can reach or use any more. Caller holds meta.lock. */
static void maybe_drop(struct fs *fs, struct inode *ino)
{
	struct fmt_rec r = { .type = REC_IDEL };

	if (ino->a.nlink || ino->nlookup || ino->nopen || ino->ino == FMT_ROOT_INO || fs->ro)
		return;
	r.ino = ino->ino;
	journal_log(&fs->j, &r);
}

void fs_forget(struct fs *fs, uint64_t ino, uint64_t n)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i) {
		i->nlookup = n > i->nlookup ? 0 : i->nlookup - n;
		maybe_drop(fs, i);
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
	if (fs->acl && !S_ISLNK(mode)) {
		/*
		 * The directory's default ACL, if any, takes the umask's place: the new
		 * inode's access ACL is that ACL limited by the mode asked for, and a new
		 * directory inherits it as its own default ACL.
		 */
		dacl = xattr_get(dir, ACL_XATTR_DEFAULT);
		if (dacl && acl_check(dacl->val, dacl->len) < 0) {
			log_warn("directory inode %llu: its default ACL is malformed and is ignored (setfacl -k removes it)",
				 (unsigned long long)dir->ino);
			dacl = NULL;
		}
		if (dacl) {
			memcpy(acl, dacl->val, dacl->len);
			store_acl = acl_create(acl, dacl->len, &mode);
		} else {
			mode &= ~(mode_t)(c->umask & 0777);
		}
	}
	memset(&r, 0, sizeof(r));
	r.type = REC_INODE;
	r.ino = fs->meta.next_ino;
	r.a.mode = mode;
	r.a.uid = c->uid;
	r.a.gid = c->gid;
	if (dir->a.mode & S_ISGID) {
		/* BSD group semantics under a setgid directory; subdirectories inherit the bit */
		r.a.gid = dir->a.gid;
		if (S_ISDIR(mode))
			r.a.mode |= S_ISGID;
	}
	r.a.nlink = S_ISDIR(mode) ? 2 : 1;
	r.a.rdev = rdev;
	r.a.atime = r.a.mtime = r.a.ctime = now;
	r.a.start_member = r.ino % fs->n;
	r.a.generation = new_generation(fs);
	ret = journal_log(&fs->j, &r);
	if (ret)
		goto out;
	ni = meta_iget(&fs->meta, r.ino);
	if (store_acl)
		ret = log_xset(fs, r.ino, ACL_XATTR_ACCESS, acl, dacl->len);
	if (!ret && dacl && S_ISDIR(mode))
		ret = log_xset(fs, r.ino, ACL_XATTR_DEFAULT, dacl->val, dacl->len);
	if (ret)
		goto out;
	if (target) {
		struct fmt_rec s = { .type = REC_SYMLINK, .ino = r.ino,
				     .name = (const uint8_t *)target, .name_len = strlen(target) };

		ret = journal_log(&fs->j, &s);
		if (ret)
			goto out;
	}
	ret = log_link(fs, parent, r.ino, name);
	if (ret)
		goto out;
	if (S_ISDIR(mode))
		dir->a.nlink++;
	ret = log_touch(fs, dir, now);
	if (ret)
		goto out;
	ni->nlookup++;
	fs_stat(fs, ni, st);
out:
	fs_end(fs);
	return ret;
}

int fs_link(struct fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *st)
{
	struct inode *dir, *child, *src;
	struct dentry *de;
	int64_t now = fs_now();
	int ret = check_name(name);

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
	if (!ret)
		ret = log_link(fs, parent, ino, name);
	if (!ret) {
		src->a.nlink++;
		src->a.ctime = now;
		ret = log_attr(fs, src);
	}
	if (!ret)
		ret = log_touch(fs, dir, now);
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
	int ret = log_unlink(fs, dir->ino, name);

	if (ret)
		return ret;
	if (child->dir) {
		child->a.nlink = 0;
		dir->a.nlink--;
	} else {
		child->a.nlink--;
	}
	child->a.ctime = now;
	ret = log_attr(fs, child);
	if (!ret)
		ret = log_touch(fs, dir, now);
	if (!ret)
		maybe_drop(fs, child);
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
		ret = log_link(fs, dir->ino, r.ino, name);
	return ret;
}

int fs_rename(struct fs *fs, const struct fs_ctx *c, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned flags)
{
	struct inode *sdir, *src, *ddir, *dst;
	struct dentry *sde, *dde;
	int64_t now = fs_now();
	int ret;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
		return -EINVAL;
	/* as do_renameat2(): EXCHANGE goes with neither of the others */
	if ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT)))
		return -EINVAL;
	if ((flags & RENAME_WHITEOUT) && !c)
		return -EINVAL;
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
	/*
	 * may_delete() of the source, and of the target it replaces or exchanges: neither
	 * entry nor inode may be immutable or append-only; may_create() in the target
	 * directory: not immutable.
	 */
	if (fs_undeletable(sdir) || fs_undeletable(src) || fs_immutable(ddir) ||
	    (dst && (fs_undeletable(ddir) || fs_undeletable(dst)))) {
		ret = -EPERM;
		goto out;
	}
	/* a directory cannot move into itself or below itself */
	if ((src->dir && is_within(fs, newparent, src->ino)) ||
	    ((flags & RENAME_EXCHANGE) && dst->dir && is_within(fs, parent, dst->ino))) {
		ret = -EINVAL;
		goto out;
	}
	if (flags & RENAME_EXCHANGE) {
		uint64_t sino = src->ino, dino = dst->ino;

		ret = log_unlink(fs, sdir->ino, name);
		if (!ret)
			ret = log_unlink(fs, ddir->ino, newname);
		if (!ret)
			ret = log_link(fs, sdir->ino, dino, name);
		if (!ret)
			ret = log_link(fs, ddir->ino, sino, newname);
		if (!ret && sdir != ddir && (!!src->dir != !!dst->dir)) {
			/* a directory changed parent: move one link count with it */
			struct inode *gain = src->dir ? ddir : sdir, *lose = src->dir ? sdir : ddir;

			gain->a.nlink++;
			lose->a.nlink--;
		}
		src->a.ctime = dst->a.ctime = now;
		if (!ret)
			ret = log_attr(fs, src);
		if (!ret)
			ret = log_attr(fs, dst);
		goto touch;
	}
	if (dst) {
		if (dst == src)
			goto out; /* two links of one inode: POSIX says do nothing */
		if (src->dir && !dst->dir) {
			ret = -ENOTDIR;
			goto out;
		}
		if (!src->dir && dst->dir) {
			ret = -EISDIR;
			goto out;
		}
		if (dst->dir && dst->dir->count) {
			ret = -ENOTEMPTY;
			goto out;
		}
		ret = remove_entry(fs, ddir, newname, dst, now);
		if (ret)
			goto out;
	}
	ret = log_unlink(fs, sdir->ino, name);
	if (!ret)
		ret = log_link(fs, ddir->ino, src->ino, newname);
	if (!ret && src->dir && sdir != ddir) {
		sdir->a.nlink--;
		ddir->a.nlink++;
	}
	src->a.ctime = now;
	if (!ret)
		ret = log_attr(fs, src);
	/* in the same batch as the move: the old name is never seen empty after a crash */
	if (!ret && (flags & RENAME_WHITEOUT))
		ret = make_whiteout(fs, c, sdir, name, now);
touch:
	if (!ret)
		ret = log_touch(fs, sdir, now);
	if (!ret && ddir != sdir)
		ret = log_touch(fs, ddir, now);
out:
	fs_end(fs);
	return ret;
}

static struct inode *wait_written(struct fs *fs, uint64_t ino, int take_err, int *err);

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

int fs_setattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, const struct stat *in,
	       int valid, struct stat *out)
{
	struct inode *i;
	int64_t now = fs_now();
	uint32_t mode = 0, gid = 0, kill = 0;
	int ret;

	if (fs->ro)
		return -EROFS;
	/* buffered writes first: their mtime must not land after this */
	i = wait_written(fs, ino, 0, &ret);
	if (i) {
		pthread_mutex_lock(&fs->meta.lock);
		i = meta_iget(&fs->meta, ino);
		ret = i ? setattr_forbidden(i, valid) : 0;
		pthread_mutex_unlock(&fs->meta.lock);
		if (ret)
			return ret;
	}
	if (i && (valid & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		pthread_mutex_lock(&fs->meta.lock);
		i = meta_iget(&fs->meta, ino);
		if (i) {
			mode = i->a.mode;
			gid = i->a.gid;
		}
		pthread_mutex_unlock(&fs->meta.lock);
		/*
		 * What the change takes away (killpriv.c), decided before it (the rule looks
		 * at the old group) and without meta.lock (it may read /proc):
		 * chown_common() for a new owner or group, do_truncate()'s
		 * dentry_needs_remove_privs() for a size.
		 */
		if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
			kill = fs_killpriv_bits(c, mode, gid, 1);
		if (valid & FUSE_SET_ATTR_SIZE)
			kill |= fs_killpriv_bits(c, mode, gid, 0);
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		pthread_mutex_lock(&fs->meta.lock);
		i = meta_iget(&fs->meta, ino);
		pthread_mutex_unlock(&fs->meta.lock);
		if (!i)
			return -ENOENT;
		if (i->dir)
			return -EISDIR;
		if (!S_ISREG(i->a.mode))
			return -EINVAL;
		if (in->st_size < 0)
			return -EINVAL;
		ret = fs_truncate_locked_data(fs, i, in->st_size);
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
		struct xattr *x = fs->acl ? xattr_get(i, ACL_XATTR_ACCESS) : NULL;

		i->a.mode = (i->a.mode & S_IFMT) | (in->st_mode & 07777);
		/* the ACL's owner, group class and other entries follow the mode */
		if (x && acl_check(x->val, x->len) > 0) {
			char acl[ACL_MAX_BYTES];

			memcpy(acl, x->val, x->len);
			acl_chmod(acl, x->len, i->a.mode);
			ret = log_xset(fs, ino, ACL_XATTR_ACCESS, acl, x->len);
			if (ret)
				goto out;
		}
	}
	/* as the kernel does on truncate and chown: file capabilities go */
	if (valid & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) &&
	    xattr_get(i, CAPS_XATTR)) {
		ret = log_xdel(fs, ino, CAPS_XATTR);
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
	ret = log_attr(fs, i);
	if (!ret)
		fs_stat(fs, i, out);
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

int fs_open(struct fs *fs, uint64_t ino, int flags)
{
	struct inode *i;
	int ret = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
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
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

/* @ino (0 if gone), after waiting for what write-behind holds of it. */
static struct inode *wait_written(struct fs *fs, uint64_t ino, int take_err, int *err)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	pthread_mutex_unlock(&fs->meta.lock);
	*err = i ? wback_wait(fs, i, take_err) : 0;
	return i;
}

void fs_release(struct fs *fs, uint64_t ino)
{
	struct inode *i;
	int err;

	/* FLUSH reported any error; a file closed without it (mmap) still gets its data out */
	wait_written(fs, ino, 1, &err);
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i && i->nopen) {
		i->nopen--;
		if (!i->nopen)
			wback_forget(fs, i);
		maybe_drop(fs, i);
	}
	pthread_mutex_unlock(&fs->meta.lock);
}

int fs_flush(struct fs *fs, uint64_t ino)
{
	int err;

	wait_written(fs, ino, 1, &err);
	return err;
}

int fs_opendir(struct fs *fs, uint64_t ino, uint64_t *limit)
{
	struct inode *i;
	int ret = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i)
		ret = -ENOENT;
	else if (!i->dir)
		ret = -ENOTDIR;
	else {
		i->nopen++; /* readdir offsets do not need the slots to stay put (meta.h) */
		*limit = i->dir->next_cookie;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

void fs_releasedir(struct fs *fs, uint64_t ino)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i && i->dir && i->nopen) {
		i->nopen--;
		maybe_drop(fs, i);
	}
	pthread_mutex_unlock(&fs->meta.lock);
}

int fs_readdir(struct fs *fs, uint64_t ino, uint64_t off, uint64_t *limit,
	       int (*fill)(void *arg, const char *name, const struct stat *st, uint64_t next),
	       void *arg)
{
	struct inode *i;
	struct stat st;
	int ret = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i || !i->dir) {
		ret = i ? -ENOTDIR : -ENOENT;
		goto out;
	}
	/* offsets: "." -> 1, ".." -> 2, an entry -> its cookie + 3 (meta.h) */
	if (off == 0)
		*limit = i->dir->next_cookie;
	memset(&st, 0, sizeof(st));
	if (off < 1) {
		st.st_ino = ino;
		st.st_mode = S_IFDIR;
		if (fill(arg, ".", &st, 1))
			goto out;
		off = 1;
	}
	if (off < 2) {
		st.st_ino = i->dir->parent ? i->dir->parent : FMT_ROOT_INO;
		st.st_mode = S_IFDIR;
		if (fill(arg, "..", &st, 2))
			goto out;
		off = 2;
	}
	/* after the entry whose offset is off: the first cookie past off - 3 */
	for (size_t s = meta_dir_seek(i->dir, off - 2); s < i->dir->nslots; s++) {
		struct dentry *de = i->dir->slots[s];
		struct inode *c;

		if (i->dir->cookies[s] >= *limit)
			break;
		if (!de)
			continue;
		c = meta_iget(&fs->meta, de->ino);
		st.st_ino = de->ino;
		st.st_mode = c ? c->a.mode & S_IFMT : 0;
		if (fill(arg, de->name, &st, i->dir->cookies[s] + 3))
			break;
	}
out:
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

int fs_statfs(struct fs *fs, struct statvfs *sv)
{
	uint64_t total = 0, files;

	for (unsigned i = 0; i < fs->n; i++)
		total += fs->members[i].sb.data_end - fs->members[i].sb.data_offset;
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
	pthread_mutex_unlock(&fs->meta.lock);
	/* inodes are limited by log space, not a table: estimate ~256 log bytes per inode */
	sv->f_files = files + fs->j.half / 256;
	sv->f_ffree = sv->f_favail = fs->j.half / 256;
	sv->f_namemax = FMT_NAME_MAX;
	if (fs->ro)
		sv->f_flag |= ST_RDONLY;
	return 0;
}

int fs_fsync(struct fs *fs) { return journal_commit(&fs->j); }

int fs_fsync_file(struct fs *fs, uint64_t ino)
{
	int err, ret;

	wait_written(fs, ino, 1, &err);
	ret = journal_commit(&fs->j);
	return err ? err : ret;
}

/* ---- xattrs ---- */

/* The namespaces kept. */
enum { XNS_NONE, XNS_USER, XNS_TRUSTED, XNS_SECURITY, XNS_ACL_ACCESS, XNS_ACL_DEFAULT };

static int xattr_ns(const struct fs *fs, const char *name)
{
	if (!strncmp(name, "user.", 5) && name[5])
		return XNS_USER;
	if (!strncmp(name, "trusted.", 8) && name[8])
		return XNS_TRUSTED;
	if (!strncmp(name, "security.", 9) && name[9])
		return XNS_SECURITY;
	if (fs->acl && !strcmp(name, ACL_XATTR_ACCESS))
		return XNS_ACL_ACCESS;
	if (fs->acl && !strcmp(name, ACL_XATTR_DEFAULT))
		return XNS_ACL_DEFAULT;
	return XNS_NONE;
}

/*
 * The kernel caps an xattr value at 64 KiB, about 1600 extent lines: a larger layout is
 * served in pages. The first line then adds "first=K count=M" and, while more remain,
 * "next=user.dmafs.layout@J"; that xattr holds the page starting at extent J.
 */
#define LAYOUT_PAGE_BYTES 60000

char *fs_layout(struct fs *fs, uint64_t ino, size_t first, int *err)
{
	struct inode *i;
	struct buf b = { 0 };
	size_t k, n;
	int werr;

	wait_written(fs, ino, 0, &werr); /* the layout of what was written */
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i || !S_ISREG(i->a.mode) || (first && first >= i->next)) {
		pthread_mutex_unlock(&fs->meta.lock);
		*err = i ? -ENODATA : -ENOENT;
		return NULL;
	}
	/* extents fitting in one page: lines are at most 4 x 20 digits + 4 */
	n = MIN(i->next - first, (size_t)(LAYOUT_PAGE_BYTES - 256) / 84);
	if (buf_reserve(&b, 256 + n * 84)) {
		pthread_mutex_unlock(&fs->meta.lock);
		*err = -ENOMEM;
		return NULL;
	}
	b.len = sprintf((char *)b.p, "stripe_unit=%u members=%u start_member=%u size=%llu extents=%zu",
			fs->su, fs->n, i->a.start_member, (unsigned long long)i->a.size, i->next);
	if (first || n < i->next)
		b.len += sprintf((char *)b.p + b.len, " first=%zu count=%zu", first, n);
	if (first + n < i->next)
		b.len += sprintf((char *)b.p + b.len, " next=%s@%zu", LAYOUT_XATTR, first + n);
	b.p[b.len++] = '\n';
	for (k = first; k < first + n; k++) {
		const struct extent *e = &i->ext[k];

		b.len += sprintf((char *)b.p + b.len, "%llu %u %u %llu\n",
				 (unsigned long long)e->off, e->len, e->member,
				 (unsigned long long)e->moff);
	}
	b.p[b.len] = '\0';
	pthread_mutex_unlock(&fs->meta.lock);
	return (char *)b.p;
}

/* Is @name the layout xattr or one of its pages? Sets *first. */
static int layout_name(const char *name, size_t *first)
{
	size_t len = strlen(LAYOUT_XATTR);
	char *end;

	*first = 0;
	if (strncmp(name, LAYOUT_XATTR, len))
		return 0;
	if (name[len] == '\0')
		return 1;
	if (name[len] != '@' || name[len + 1] < '0' || name[len + 1] > '9')
		return 0;
	errno = 0;
	*first = strtoull(name + len + 1, &end, 10);
	return !*end && !errno;
}

int fs_getxattr(struct fs *fs, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct inode *i;
	int ret = -ENODATA;

	size_t first;

	if (layout_name(name, &first)) {
		char *t = fs_layout(fs, ino, first, &ret);
		size_t len;

		if (!t)
			return ret;
		len = strlen(t);
		if (size == 0)
			ret = len;
		else if (size < len)
			ret = -ERANGE;
		else {
			memcpy(buf, t, len);
			ret = len;
		}
		free(t);
		return ret;
	}
	if (xattr_ns(fs, name) == XNS_NONE)
		return strcmp(name, "user.") ? -EOPNOTSUPP : -ENODATA;
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i)
		ret = -ENOENT;
	for (struct xattr *x = i ? i->xattrs : NULL; x; x = x->next) {
		if (strcmp(x->name, name))
			continue;
		if (size == 0)
			ret = x->len;
		else if (size < x->len)
			ret = -ERANGE;
		else {
			memcpy(buf, x->val, x->len);
			ret = x->len;
		}
		break;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

#define XATTR_TOTAL_MAX (256u << 10) /* per inode: keeps snapshots bounded */

/*
 * Set the access ACL of @i to valid ACL @val: the mode takes the ACL's permission bits,
 * and an ACL the mode expresses entirely is not stored (an older one is removed). As
 * the kernel's own filesystems do, setgid goes unless the caller is in the file's group
 * or may keep it (CAP_FSETID); the kernel asks FUSE filesystems to do that with
 * FUSE_SETXATTR_ACL_KILL_SGID only where libfuse speaks FUSE_SETXATTR_EXT (3.16 and
 * later), so it is decided here. Locked.
 */
static int set_access_acl(struct fs *fs, const struct fs_ctx *c, struct inode *i,
			  const void *val, size_t size)
{
	uint32_t perm;
	int ret = 0;

	if (acl_mode(val, size, &perm)) {
		if (xattr_get(i, ACL_XATTR_ACCESS))
			ret = log_xdel(fs, i->ino, ACL_XATTR_ACCESS);
	} else {
		ret = log_xset(fs, i->ino, ACL_XATTR_ACCESS, val, size);
	}
	if (ret)
		return ret;
	i->a.mode = (i->a.mode & ~0777u) | perm;
	if ((i->a.mode & S_ISGID) && c && !acl_pid_in_group(c->pid, c->gid, i->a.gid) &&
	    !acl_pid_capable(c->pid, ACL_CAP_FSETID))
		i->a.mode &= ~S_ISGID;
	return 0;
}

int fs_setxattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, const char *name,
		const void *val, size_t size, int flags)
{
	struct inode *i;
	struct xattr *x = NULL;
	int ns = xattr_ns(fs, name), ret;
	size_t first;

	if (layout_name(name, &first))
		return -EPERM;
	if (ns == XNS_NONE)
		return -EOPNOTSUPP;
	if (strlen(name) > FMT_XATTR_NAME_MAX)
		return -ERANGE;
	if (size > FMT_XATTR_VALUE_MAX)
		return -E2BIG;
	if (ns == XNS_ACL_ACCESS || ns == XNS_ACL_DEFAULT) {
		/* what the kernel sends is valid; anything else is refused before it is kept */
		ret = acl_check(val, size);
		if (ret < 0)
			return ret;
	}
	ret = fs_begin(fs, REC_ROOM + size, 1);
	if (ret)
		return ret;
	i = meta_iget(&fs->meta, ino);
	if (!i) {
		ret = -ENOENT;
		goto out;
	}
	if (fs_undeletable(i))
		ret = -EPERM; /* xattr_permission() */
	else if (ns == XNS_USER && !S_ISREG(i->a.mode) && !S_ISDIR(i->a.mode))
		ret = -EPERM; /* like ext4: user xattrs only on regular files and directories */
	else if (ns == XNS_ACL_ACCESS && S_ISLNK(i->a.mode))
		ret = -EOPNOTSUPP; /* symlinks have no ACLs */
	else if (ns == XNS_ACL_DEFAULT && !S_ISDIR(i->a.mode))
		ret = -EACCES; /* as the kernel answers: only directories have default ACLs */
	if (ret)
		goto out;
	x = xattr_get(i, name);
	if ((flags & XATTR_CREATE) && x)
		ret = -EEXIST;
	else if ((flags & XATTR_REPLACE) && !x)
		ret = -ENODATA;
	else if (i->xattr_bytes + size + strlen(name) - (x ? x->len : 0) > XATTR_TOTAL_MAX)
		ret = -ENOSPC;
	if (ret)
		goto out;
	if (ns == XNS_ACL_ACCESS)
		ret = set_access_acl(fs, c, i, val, size);
	else
		ret = log_xset(fs, ino, name, val, size);
	if (!ret) {
		i->a.ctime = fs_now();
		ret = log_attr(fs, i);
	}
out:
	fs_end(fs);
	return ret;
}

int fs_listxattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, char *buf, size_t size)
{
	struct inode *i;
	size_t need = 0;
	int ret, trusted = 0, show_trusted = 1;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	for (struct xattr *x = i ? i->xattrs : NULL; x && !trusted; x = x->next)
		trusted = !strncmp(x->name, "trusted.", 8);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!i)
		return -ENOENT;
	/*
	 * The kernel checks CAP_SYS_ADMIN for reading trusted.* values, but passes the list
	 * on as it is: other filesystems leave those names out for anyone else, so do we.
	 * Asked only when there is such a name (it reads /proc).
	 */
	if (trusted && c)
		show_trusted = acl_pid_capable(c->pid, ACL_CAP_SYS_ADMIN);

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i) {
		pthread_mutex_unlock(&fs->meta.lock);
		return -ENOENT;
	}
#define LISTED(x) (show_trusted || strncmp((x)->name, "trusted.", 8))
	for (struct xattr *x = i->xattrs; x; x = x->next)
		if (LISTED(x))
			need += strlen(x->name) + 1;
	if (size == 0) {
		ret = need;
	} else if (size < need) {
		ret = -ERANGE;
	} else {
		char *p = buf;

		for (struct xattr *x = i->xattrs; x; x = x->next) {
			if (!LISTED(x))
				continue;
			strcpy(p, x->name);
			p += strlen(x->name) + 1;
		}
		ret = need;
	}
#undef LISTED
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

int fs_removexattr(struct fs *fs, uint64_t ino, const char *name)
{
	struct inode *i;
	struct xattr *x = NULL;
	int ret;
	size_t first;

	if (layout_name(name, &first))
		return -EPERM;
	if (xattr_ns(fs, name) == XNS_NONE)
		return -EOPNOTSUPP;
	if (strlen(name) > FMT_XATTR_NAME_MAX)
		return -ERANGE;
	ret = fs_begin(fs, REC_ROOM, 0);
	if (ret)
		return ret;
	i = meta_iget(&fs->meta, ino);
	if (i)
		x = xattr_get(i, name);
	if (!i)
		ret = -ENOENT;
	else if (fs_undeletable(i))
		ret = -EPERM; /* xattr_permission() */
	else if (!x)
		ret = -ENODATA;
	if (!ret)
		ret = log_xdel(fs, ino, name); /* the mode stays as it is, as on ext4 */
	if (!ret) {
		i->a.ctime = fs_now();
		ret = log_attr(fs, i);
	}
	fs_end(fs);
	return ret;
}

