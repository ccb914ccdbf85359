// SPDX-License-Identifier: MIT
/* xattr.c - FUSE handlers for extended attributes. */
#include "fuse/ops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SELINUX_XATTR "security.selinux"

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		 size_t size, int flags)
{
	struct fs_ctx c;

	ops_ctx(req, &c);
	fuse_reply_err(req, -ops_durable(req, fs_setxattr(ops_fs(req), &c, ino, name, value, size, flags), 0));
}

/* size 0 asks for the length; otherwise reply with at most @size bytes. */
static void reply_sized(fuse_req_t req, int ret, const char *buf, size_t size)
{
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, ret);
	else
		fuse_reply_buf(req, buf, ret);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	int ret;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ret = fs_getxattr(ops_fs(req), ino, name, buf, size);
	/*
	 * No SELinux label of a file's own is "not supported", as NFS without labels says,
	 * not "no such attribute": ls -l, cp and the like then stop asking for the labels of
	 * this filesystem's files after the first (one request per listed name fewer; the
	 * kernel does not cache these answers). A label stored anyway (rsync -X from a host
	 * with SELinux) is returned as before.
	 */
	if (ret == -ENODATA && !strcmp(name, SELINUX_XATTR))
		ret = -EOPNOTSUPP;
	reply_sized(req, ret, buf, size);
	free(buf);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs_ctx c;
	char *buf;
	int ret;

	/*
	 * -o nolistxattr: ENOSYS makes the kernel answer every later listxattr(2) of this
	 * mount with EOPNOTSUPP itself, so tools that list names before every file (ls -l of
	 * coreutils 9.4, looking for ACLs) cost no round trip. Names still work.
	 */
	if (ops_srv(req)->opts.nolistxattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ops_ctx(req, &c);
	ret = fs_listxattr(ops_fs(req), &c, ino, buf, size);
	reply_sized(req, ret, buf, size);
	free(buf);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, -ops_durable(req, fs_removexattr(ops_fs(req), ino, name), 0));
}
