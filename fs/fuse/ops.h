/* SPDX-License-Identifier: MIT */
/* ops.h - FUSE lowlevel handlers; each decodes, calls one engine function, replies once. */
#ifndef DMAFS_OPS_H
#define DMAFS_OPS_H

#include <fuse_lowlevel.h>

#include <fcntl.h>

#include "engine/engine.h"
#include "place/place.h"
#include "place/placeq.h"

struct dmafs_opts {
	double attr_timeout, entry_timeout;
	int wronly_direct; /* write-only opens bypass the kernel's page cache (file.c) */
	int writeback_cache; /* the kernel agreed to FUSE_CAP_WRITEBACK_CACHE */
	uint64_t open_fill;  /* bytes: smaller files' opens send their data (file.c) */
	int nolistxattr;     /* listxattr answered ENOSYS: the kernel stops asking (xattr.c) */
};

/*
 * What every request reaches: the filesystem and the mount's settings. It is the part of
 * the daemon object (daemon/daemon.h) that libfuse gets as userdata; a handler finds it
 * with ops_srv(req).
 */
struct srv {
	struct fs fs;
	struct dmafs_opts opts;
	struct place *place;   /* the placement service (place/place.h) */
	struct placeq *placeq; /* its queues and threads (place/placeq.h) */
	/* the kernel mount's device, once known: DMAFS_IOC_MODE checks it is read-only */
	unsigned dev_major, dev_minor;
	int dev_known;
	struct fuse_session *se; /* for notifications to the kernel (inval.c) */
	struct inval *inval;	 /* names to drop from the kernel's cache (inval.c) */
};

static inline struct srv *ops_srv(fuse_req_t req) { return fuse_req_userdata(req); }
static inline struct fs *ops_fs(fuse_req_t req) { return &ops_srv(req)->fs; }

/*
 * File handles carry the open mode: requests like ioctl arrive without the open flags,
 * and placement must only read files the caller opened for reading.
 */
#define OPS_FH(flags) ((uint64_t)((flags) & O_ACCMODE) + 1)
#define OPS_FH_READABLE(fh) ((fh) == O_RDONLY + 1 || (fh) == O_RDWR + 1)

void ops_entry(fuse_req_t req, int ret, const struct stat *st, int cache_name);
/*
 * Entry timeout for a name: entry_timeout where the engine says the kernel may keep it
 * (fs_name_cacheable: a directory, or a file that has had one name only since the mount),
 * else 0, a LOOKUP at every path walk. The kernel keeps its own copy of the link count
 * and, on unlink or rename over a name, decrements it without asking us; a GETATTR or
 * LOOKUP reply computed after our unlink but applied by the kernel before that decrement
 * leaves the count one too low, 0 for a file that still has a name, and link(2) from a
 * cached name of it then fails with ENOENT (vfs_link refuses inodes with i_nlink 0)
 * without reaching us. A LOOKUP sent after the decrement carries the true count, so
 * revalidating the names of a file that has had several before each use repairs the
 * count before link(2) looks at it. When link(2) gives a file its second name, its first
 * leaves the kernel's cache (op_link, inval.c).
 */
static inline double ops_entry_timeout(fuse_req_t req, int cache_name)
{
	return cache_name ? ops_srv(req)->opts.entry_timeout : 0;
}
void ops_ctx(fuse_req_t req, struct fs_ctx *c);
/*
 * Mount options sync and dirsync: after a successful change (@ret 0 or a count), commit
 * when every change (sync) or, for a directory change (@dirop), dirsync asks for it.
 * Returns @ret, or the commit's error.
 */
int ops_durable(fuse_req_t req, int ret, int dirop);

/* inval.c: names dropped from the kernel's cache by a thread of their own */
int inval_start(struct srv *s);
void inval_stop(struct srv *s);
/* @name in @dir goes from the kernel's cache now and once more after entry_timeout (a
 * LOOKUP answered before the change may be applied after it). At most INVAL_MAX wait. */
void inval_name(struct srv *s, uint64_t dir, const char *name);

/* The engine's attr_changed hook: the kernel drops its cached attributes of @ino. */
void ops_attr_changed(void *srv, uint64_t ino);

/* inode.c */
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi);
void op_readlink(fuse_req_t req, fuse_ino_t ino);
void op_statfs(fuse_req_t req, fuse_ino_t ino);
/* dir.c */
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	       const char *newname, unsigned int flags);
void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
/* file.c */
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi);
void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
		  struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		  struct fuse_file_info *fi);
/* ioctl.c */
void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
	      struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
	      size_t out_bufsz);
/* xattr.c */
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		 size_t size, int flags);
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
