// SPDX-License-Identifier: MIT
/* ops-ioctl.c - the placement channel's FUSE ioctl handler: decode, call place.c, reply. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "place.h"
#include "remount.h"

void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
	      struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
	      size_t out_bufsz)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct place_caller c = { .uid = ctx->uid };
	int ret;

	if (flags & FUSE_IOCTL_COMPAT) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (cmd == DMAFS_IOC_MODE) {
		remount_ioctl(req, ino, flags, in_buf, in_bufsz, out_bufsz);
		return;
	}
	if (place_tgid(ctx->pid, &c.tgid)) {
		fuse_reply_err(req, ESRCH);
		return;
	}
	switch (cmd) {
	case DMAFS_IOC_INFO: {
		struct dmafs_ioc_info info;

		if (out_bufsz < sizeof(info)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		ret = place_info(ops_fs, ino, &info);
		if (ret)
			fuse_reply_err(req, -ret);
		else
			fuse_reply_ioctl(req, 0, &info, sizeof(info));
		return;
	}
	case DMAFS_IOC_REGISTER: {
		struct dmafs_ioc_register r;

		if (in_bufsz != sizeof(r) || out_bufsz < sizeof(r)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memcpy(&r, in_buf, sizeof(r));
		ret = place_register(ops_fs, &c, &r);
		if (ret)
			fuse_reply_err(req, -ret);
		else
			fuse_reply_ioctl(req, 0, &r, sizeof(r));
		return;
	}
	case DMAFS_IOC_UNREGISTER: {
		struct dmafs_ioc_unregister u;

		if (in_bufsz != sizeof(u)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memcpy(&u, in_buf, sizeof(u));
		ret = place_unregister(&c, u.id);
		if (ret)
			fuse_reply_err(req, -ret);
		else
			fuse_reply_ioctl(req, 0, NULL, 0);
		return;
	}
	case DMAFS_IOC_PLACE: {
		static __thread struct dmafs_ioc_place p;

		if (in_bufsz != sizeof(p) || out_bufsz < sizeof(p)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		/* only a file the caller opened for reading */
		if ((flags & FUSE_IOCTL_DIR) || !OPS_FH_READABLE(fi->fh)) {
			fuse_reply_err(req, EBADF);
			return;
		}
		memcpy(&p, in_buf, sizeof(p));
		ret = place_run(ops_fs, &c, ino, &p);
		if (!ret)
			fs_accessed(ops_fs, ino); /* a placement reads the file */
		if (ret)
			fuse_reply_err(req, -ret);
		else
			fuse_reply_ioctl(req, 0, &p, sizeof(p));
		return;
	}
	}
	fuse_reply_err(req, ENOTTY);
}
