// SPDX-License-Identifier: MIT
/*
 * ops-ioctl.c - FUSE ioctl handler: the placement channel (decode, call place.c, reply),
 * and the inode flags of chattr(1) (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS and their fsxattr
 * forms, which the kernel sends for chattr, lsattr and xfs_io; engine in iflags.c).
 *
 * REGISTER and PLACE can take long (populating a large buffer, reading gigabytes) and are
 * run on the placement threads (placeq.h); the FUSE worker that received them is free at
 * once for other requests, and the reply is sent from the placement thread.
 */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"
#include "placeq.h"
#include "remount.h"

/* A request waiting for, or running on, a placement thread. */
struct job {
	struct placeq_job q;
	fuse_req_t req;
	fuse_ino_t ino;
	struct place_caller c;
	unsigned cmd;
	union {
		struct dmafs_ioc_register reg;
		struct dmafs_ioc_place place;
	} u;
};

static void reply(fuse_req_t req, int ret, const void *out, size_t len)
{
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_ioctl(req, 0, out, len);
}

static void job_run(struct placeq_job *qj)
{
	struct job *j = container_of(qj, struct job, q);
	int ret;

	if (j->cmd == DMAFS_IOC_REGISTER) {
		ret = place_register(ops_fs, &j->c, &j->u.reg);
		reply(j->req, ret, &j->u.reg, sizeof(j->u.reg));
	} else {
		ret = place_run(ops_fs, &j->c, j->ino, &j->u.place);
		if (!ret)
			fs_accessed(ops_fs, j->ino); /* a placement reads the file */
		reply(j->req, ret, &j->u.place, sizeof(j->u.place));
	}
	free(j);
}

/* Hand @cmd to the placement threads; the reply comes from there. */
static int queue(fuse_req_t req, fuse_ino_t ino, const struct place_caller *c, unsigned cmd,
		 const void *in, size_t len)
{
	struct job *j = malloc(sizeof(*j));
	int ret;

	if (!j)
		return -ENOMEM;
	*j = (struct job){ .q = { .uid = c->uid, .run = job_run }, .req = req, .ino = ino,
			   .c = *c, .cmd = cmd };
	memcpy(&j->u, in, len);
	ret = placeq_submit(&j->q);
	if (ret)
		free(j);
	return ret;
}

/*
 * The inode flags. The kernel's fileattr code sends these itself, with a 4-byte int for
 * the FLAGS pair (whatever the ioctl number says) and a struct fsxattr for the other;
 * fsxattr carries the same two flags as FS_XFLAG_IMMUTABLE and FS_XFLAG_APPEND.
 */
static void iflags_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, const void *in_buf,
			 size_t in_bufsz, size_t out_bufsz)
{
	struct fs_ctx c;
	struct fsxattr fa;
	uint32_t f = 0;
	int ret;

	switch (cmd) {
	case FS_IOC_GETFLAGS:
		ret = out_bufsz < sizeof(f) ? -EINVAL : fs_getflags(ops_fs, ino, &f);
		reply(req, ret, &f, sizeof(f));
		return;
	case FS_IOC_FSGETXATTR:
		ret = out_bufsz < sizeof(fa) ? -EINVAL : fs_getflags(ops_fs, ino, &f);
		memset(&fa, 0, sizeof(fa));
		fa.fsx_xflags = (f & FS_IMMUTABLE_FL ? FS_XFLAG_IMMUTABLE : 0) |
				(f & FS_APPEND_FL ? FS_XFLAG_APPEND : 0);
		reply(req, ret, &fa, sizeof(fa));
		return;
	case FS_IOC_SETFLAGS:
		if (in_bufsz < sizeof(f)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memcpy(&f, in_buf, sizeof(f));
		break;
	case FS_IOC_FSSETXATTR:
		if (in_bufsz < sizeof(fa)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memcpy(&fa, in_buf, sizeof(fa));
		if (fa.fsx_extsize || fa.fsx_projid || fa.fsx_cowextsize ||
		    (fa.fsx_xflags & ~(FS_XFLAG_IMMUTABLE | FS_XFLAG_APPEND))) {
			fuse_reply_err(req, EOPNOTSUPP);
			return;
		}
		f = (fa.fsx_xflags & FS_XFLAG_IMMUTABLE ? FS_IMMUTABLE_FL : 0) |
		    (fa.fsx_xflags & FS_XFLAG_APPEND ? FS_APPEND_FL : 0);
		break;
	}
	ops_ctx(req, &c);
	ret = ops_durable(fs_setflags(ops_fs, &c, ino, f), 0);
	reply(req, ret, NULL, 0);
}

void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
	      struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
	      size_t out_bufsz)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct place_caller c = { .uid = ctx->uid };
	struct dmafs_ioc_info info;
	struct dmafs_ioc_unregister u;
	size_t in = 0, out = 0;
	int ret;

	if (flags & FUSE_IOCTL_COMPAT) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (cmd == DMAFS_IOC_MODE) {
		remount_ioctl(req, ino, flags, in_buf, in_bufsz, out_bufsz);
		return;
	}
	if (cmd == FS_IOC_GETFLAGS || cmd == FS_IOC_SETFLAGS || cmd == FS_IOC_FSGETXATTR ||
	    cmd == FS_IOC_FSSETXATTR) {
		iflags_ioctl(req, ino, cmd, in_buf, in_bufsz, out_bufsz);
		return;
	}
	switch (cmd) {
	case DMAFS_IOC_INFO: out = sizeof(info); break;
	case DMAFS_IOC_REGISTER: in = out = sizeof(struct dmafs_ioc_register); break;
	case DMAFS_IOC_UNREGISTER: in = sizeof(u); break;
	case DMAFS_IOC_PLACE: in = out = sizeof(struct dmafs_ioc_place); break;
	default:
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (in_bufsz != in || out_bufsz < out) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* only a file the caller opened for reading */
	if (cmd == DMAFS_IOC_PLACE && ((flags & FUSE_IOCTL_DIR) || !OPS_FH_READABLE(fi->fh))) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (place_tgid(ctx->pid, &c.tgid)) {
		fuse_reply_err(req, ESRCH);
		return;
	}
	switch (cmd) {
	case DMAFS_IOC_INFO:
		ret = place_info(ops_fs, ino, &info);
		reply(req, ret, &info, sizeof(info));
		return;
	case DMAFS_IOC_UNREGISTER:
		memcpy(&u, in_buf, sizeof(u));
		ret = place_unregister(&c, u.id);
		reply(req, ret, NULL, 0);
		return;
	}
	ret = queue(req, ino, &c, cmd, in_buf, in);
	if (ret)
		fuse_reply_err(req, -ret);
}
