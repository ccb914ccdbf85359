// SPDX-License-Identifier: MIT
/* inode.c - FUSE handlers for lookup, attributes, links and statfs. */
#include "fuse/ops.h"

#include <errno.h>
#include <limits.h>
#include <string.h>


void ops_ctx(fuse_req_t req, struct fs_ctx *c)
{
	const struct fuse_ctx *fc = fuse_req_ctx(req);

	c->uid = fc->uid;
	c->gid = fc->gid;
	c->umask = fc->umask;
	c->pid = fc->pid;
}

int ops_durable(fuse_req_t req, int ret, int dirop)
{
	int c;

	if (ret < 0 || !(ops_fs(req)->set.sync || (dirop && ops_fs(req)->set.dirsync)))
		return ret;
	c = fs_fsync(ops_fs(req));
	return c ? c : ret;
}

void ops_entry(fuse_req_t req, int ret, const struct stat *st, int cache_name)
{
	struct fuse_entry_param e;

	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = st->st_ino;
	e.generation = fs_generation(ops_fs(req), st->st_ino); /* held by the lookup just counted */
	e.attr = *st;
	e.attr_timeout = ops_srv(req)->opts.attr_timeout;
	e.entry_timeout = ops_entry_timeout(req, cache_name);
	if (fuse_reply_entry(req, &e) == -ENOENT) /* interrupted: the kernel holds no reference */
		fs_forget(ops_fs(req), st->st_ino, 1);
}

void ops_attr_changed(void *srv, uint64_t ino)
{
	struct srv *s = srv;

	/* offset -1: the attributes only; the kernel takes no inode lock for it, so a
	 * request handler (a write that dropped set-user-ID) may send it before it replies */
	if (s->se)
		fuse_lowlevel_notify_inval_inode(s->se, ino, -1, 0);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stat st;
	int cache_name = 0;
	int ret = fs_lookup(ops_fs(req), parent, name, &st, &cache_name);

	if (ret == -ENOENT) {
		/* negative entry: cached for entry_timeout */
		struct fuse_entry_param e = { .ino = 0, .entry_timeout = ops_srv(req)->opts.entry_timeout };

		fuse_reply_entry(req, &e);
		return;
	}
	ops_entry(req, ret, &st, cache_name);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_forget(ops_fs(req), ino, nlookup);
	fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_forget(ops_fs(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret = fs_getattr(ops_fs(req), ino, &st);

	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, ops_srv(req)->opts.attr_timeout);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi)
{
	struct fs_ctx c;
	struct stat st;
	int ret;

	ops_ctx(req, &c);
	ret = ops_durable(req, fs_setattr(ops_fs(req), &c, ino, attr, to_set, &st), 0);

	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, ops_srv(req)->opts.attr_timeout);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[FMT_SYMLINK_MAX + 1];
	int ret = fs_readlink(ops_fs(req), ino, buf, sizeof(buf));

	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_readlink(req, buf);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int ret = fs_statfs(ops_fs(req), &sv);

	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_statfs(req, &sv);
}
