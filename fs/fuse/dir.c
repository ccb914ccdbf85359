// SPDX-License-Identifier: MIT
/* dir.c - FUSE handlers for the namespace: create, link, unlink, rename, readdir. */
#include "fuse/ops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Reply to a change that made a name for an inode, committed first under dirsync. */
static void ops_entry_durable(fuse_req_t req, int ret, struct stat *st, int cache_name)
{
	int c;

	if (!ret && (c = ops_durable(req, 0, 1))) {
		fs_forget(ops_fs(req), st->st_ino, 1); /* the kernel gets no reference */
		ret = c;
	}
	ops_entry(req, ret, st, cache_name);
}

static void make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		 const char *target)
{
	struct fs_ctx c;
	struct stat st;
	int ret;

	ops_ctx(req, &c);
	ret = fs_mknod(ops_fs(req), &c, parent, name, mode, rdev, target, &st);
	ops_entry_durable(req, ret, &st, 1); /* a new inode: one name */
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	make(req, parent, name, mode, rdev, NULL);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make(req, parent, name, S_IFLNK | 0777, 0, link);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	struct stat st;
	char single_name[FMT_NAME_MAX + 1];
	uint64_t single_dir;
	int ret = fs_link(ops_fs(req), ino, parent, name, &st, &single_dir, single_name);

	/* its first name may be in the kernel's cache (ops_entry_timeout): it goes */
	if (!ret && single_dir)
		inval_name(ops_srv(req), single_dir, single_name);
	ops_entry_durable(req, ret, &st, 0);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -ops_durable(req, fs_unlink(ops_fs(req), parent, name, 0), 1));
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -ops_durable(req, fs_unlink(ops_fs(req), parent, name, 1), 1));
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	       const char *newname, unsigned int flags)
{
	struct fs_ctx c;

	ops_ctx(req, &c);
	fuse_reply_err(req, -ops_durable(req, fs_rename(ops_fs(req), &c, parent, name, newparent, newname,
						   flags), 1));
}

/* A directory handle: fi->fh points at what fs_readdir keeps for the open. */
void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	uint64_t *limit = malloc(sizeof(*limit));
	int ret = limit ? fs_opendir(ops_fs(req), ino, limit) : -ENOMEM;

	if (ret) {
		free(limit);
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = (uintptr_t)limit;
	if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted: no release will come */
		fs_releasedir(ops_fs(req), ino);
		free(limit);
	}
}

struct dirbuf {
	fuse_req_t req;
	char *p;
	size_t len, size;
	int plus;
	uint64_t *counted; /* readdirplus: the inodes given with a reference, forgotten on failure */
	size_t ncounted;
};

/* Whether readdirplus gave the kernel a reference on this entry (fs_readdir's rule). */
static int counted(const char *name, const struct stat *st)
{
	return st->st_mode && strcmp(name, ".") && strcmp(name, "..");
}

static int fill(void *arg, const char *name, const struct stat *st, uint64_t gen,
		int cache_name, uint64_t next)
{
	struct dirbuf *d = arg;
	size_t need;

	if (!d->plus) {
		need = fuse_add_direntry(d->req, NULL, 0, name, NULL, 0);
		if (d->len + need > d->size)
			return 1;
		fuse_add_direntry(d->req, d->p + d->len, d->size - d->len, name, st, next);
	} else {
		struct fuse_entry_param e = { .attr = *st };

		need = fuse_add_direntry_plus(d->req, NULL, 0, name, NULL, 0);
		if (d->len + need > d->size)
			return 1;
		if (counted(name, st)) {
			/* as a lookup's reply (ops_entry): the kernel caches the name and attributes */
			e.ino = st->st_ino;
			e.generation = gen;
			e.attr_timeout = ops_srv(d->req)->opts.attr_timeout;
			e.entry_timeout = ops_entry_timeout(d->req, cache_name);
			d->counted[d->ncounted++] = st->st_ino;
		} /* else e.ino 0: a name only, which the kernel does not link */
		fuse_add_direntry_plus(d->req, d->p + d->len, d->size - d->len, name, &e, next);
	}
	d->len += need;
	return 0;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, int plus)
{
	/* an entry takes at least a header and a name byte, rounded to 8: a bound on entries */
	struct dirbuf d = { req, malloc(size), 0, size, plus, NULL, 0 };
	int ret;

	if (plus)
		d.counted = malloc((size / 8 + 1) * sizeof(*d.counted));
	if (!d.p || (plus && !d.counted)) {
		free(d.p);
		free(d.counted);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ret = fs_readdir(ops_fs(req), ino, off, (uint64_t *)(uintptr_t)fi->fh, plus, fill, &d);
	if (!ret)
		fs_accessed(ops_fs(req), ino);
	if (ret) {
		fuse_reply_err(req, -ret);
	} else if (fuse_reply_buf(req, d.p, d.len) == -ENOENT) {
		/* interrupted: the kernel took none of the references counted */
		for (size_t i = 0; i < d.ncounted; i++)
			fs_forget(ops_fs(req), d.counted[i], 1);
	}
	free(d.p);
	free(d.counted);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, 0);
}

/*
 * readdirplus: each name with its attributes, so that ls -l, find and du need no lookup
 * per name (the kernel links the entries into its dentry cache as lookups would).
 */
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, 1);
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_releasedir(ops_fs(req), ino);
	free((void *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -fs_fsync(ops_fs(req)));
}
