// SPDX-License-Identifier: MIT
/*
 * ioctl.c - every ioctl the daemon answers, in one table: the placement channel, the
 * inode flags of chattr(1), and the daemon's half of a remount. Each command has one
 * decoder that returns 0 or -errno; ioc_reply() is the one place a reply is sent.
 *
 * REGISTER, PLACE (and PLACE2), BATCH and PREFETCH can take long (populating a large buffer, reading
 * gigabytes) and are run on the placement threads (placeq.h); the FUSE worker that received them is free at
 * once for other requests, and their reply is sent from the placement thread.
 */
#include "fuse/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "engine/acl.h"
#include "io/workpool.h"
#include "place/place.h"
#include "place/clientfd.h"
#include "place/placeq.h"
#include "util/mountrec.h"

_Static_assert(FS_ATIME_RELATIME == DMAFS_ATIME_RELATIME && FS_ATIME_STRICT == DMAFS_ATIME_STRICT &&
		       FS_ATIME_NEVER == DMAFS_ATIME_NEVER,
	       "the engine's atime modes are the protocol's");

/* A decoder's result when the reply will come from a placement thread. */
#define IOC_QUEUED 1

/* One ioctl request: what the decoder reads, and what ioc_reply() sends back. */
struct ioc {
	struct placeq_job q; /* queued commands: the placement threads' handle */
	fuse_req_t req;
	fuse_ino_t ino;
	unsigned cmd, flags;
	uint64_t fh;
	struct place_caller c;
	size_t out_len; /* bytes of u sent back on success */
	union {
		struct dmafs_ioc_info info;
		struct dmafs_ioc_register reg;
		struct dmafs_ioc_unregister unreg;
		struct dmafs_ioc_place place;
		struct dmafs_ioc_place2 place2;
		struct dmafs_ioc_prefetch prefetch;
		struct dmafs_ioc_handle handle;
		struct dmafs_ioc_batch batch;
		struct dmafs_ioc_mode mode;
		struct dmafs_ioc_rebuild rebuild;
		struct fsxattr fa;
		uint32_t iflags;
	} u;
};

/* The one reply point. */
static void ioc_reply(struct ioc *x, int ret)
{
	if (ret)
		fuse_reply_err(x->req, -ret);
	else
		fuse_reply_ioctl(x->req, 0, x->out_len ? &x->u : NULL, x->out_len);
}

static int ioc_info(struct ioc *x)
{
	x->out_len = sizeof(x->u.info);
	return place_info(ops_srv(x->req)->place, x->ino, &x->u.info);
}

static int ioc_unregister(struct ioc *x)
{
	return place_unregister(ops_srv(x->req)->place, &x->c, x->u.unreg.id);
}

/*
 * PLACE and PLACE2, by the same code: PLACE2 is PLACE with tier_bytes before the entries,
 * so its entries move down over tier_bytes for place_run() and back up for the reply.
 */
static int ioc_place(struct srv *s, struct ioc *x)
{
	const size_t from = offsetof(struct dmafs_ioc_place2, e), to = offsetof(struct dmafs_ioc_place, e);
	uint64_t tier = 0;
	int ret;

	if (x->cmd == DMAFS_IOC_PLACE) {
		x->out_len = sizeof(x->u.place);
		return place_run(s->place, &x->c, x->ino, &x->u.place, &tier);
	}
	memmove((char *)&x->u + to, (char *)&x->u + from, sizeof(x->u.place2.e));
	ret = place_run(s->place, &x->c, x->ino, &x->u.place, &tier);
	if (ret)
		return ret;
	memmove((char *)&x->u + from, (char *)&x->u + to, sizeof(x->u.place2.e));
	x->u.place2.tier_bytes = tier;
	x->out_len = sizeof(x->u.place2);
	return 0;
}

/* A handle for batches: only of a file the caller opened for reading. */
static int ioc_handle(struct ioc *x)
{
	if ((x->flags & FUSE_IOCTL_DIR) || !OPS_FH_READABLE(x->fh))
		return -EBADF;
	x->out_len = sizeof(x->u.handle);
	return place_handle(ops_srv(x->req)->place, &x->c, x->ino, &x->u.handle);
}

/* A batch read its files: those whose atime changed, the kernel is told (see job_run). */
static void batch_accessed(struct srv *s, const struct dmafs_ioc_batch *b)
{
	for (uint32_t i = 0; i < b->count; i++) {
		const struct dmafs_batch_entry *e = &b->e[i];
		int seen = 0;

		if (e->result || !e->length)
			continue;
		for (uint32_t j = 0; j < i && !seen; j++) /* once per file; at most 320 entries */
			seen = b->e[j].ino == e->ino && !b->e[j].result && b->e[j].length;
		if (!seen && fs_accessed(&s->fs, e->ino))
			fuse_lowlevel_notify_inval_inode(s->se, e->ino, -1, 0);
	}
}

/*
 * The client is being killed. The kernel sends INTERRUPT for any signal the waiting thread
 * gets; one it handles (SIGCHLD, a profiler's timer, Python's SIGINT) must not cut the
 * placement short (the library would only issue it again), so only a thread with SIGKILL
 * pending, or gone, stops it.
 */
static int ioc_killed(void *req)
{
	return fuse_req_interrupted(req) && place_killed(fuse_req_ctx(req)->pid);
}

static void job_run(struct placeq_job *qj)
{
	struct ioc *x = container_of(qj, struct ioc, q);
	struct srv *s = ops_srv(x->req);
	struct fs *fs = &s->fs;
	int ret;

	workpool_owner(x->c.uid); /* the pool takes turns between users */
	/* a client killed while it waits stops its request between pieces: its thread is
	 * free within a piece */
	x->c.stop = (struct pipe_stop){ .fn = ioc_killed, .arg = x->req };
	if (x->cmd == DMAFS_IOC_REGISTER) {
		x->out_len = sizeof(x->u.reg);
		ret = place_register(s->place, &x->c, &x->u.reg);
	} else if (x->cmd == DMAFS_IOC_BATCH) {
		x->out_len = sizeof(x->u.batch);
		ret = place_batch(s->place, &x->c, &x->u.batch);
		if (!ret)
			batch_accessed(s, &x->u.batch);
	} else {
		if (x->cmd == DMAFS_IOC_PREFETCH) {
			x->out_len = sizeof(x->u.prefetch);
			ret = place_prefetch(s->place, &x->c, x->ino, &x->u.prefetch);
		} else {
			ret = ioc_place(s, x);
		}
		/* it read the file; the kernel, which saw no READ, keeps the attributes it has
		 * until told (off -1: the attributes only, not the cached pages) */
		if (!ret && fs_accessed(fs, x->ino))
			fuse_lowlevel_notify_inval_inode(s->se, x->ino, -1, 0);
	}
	if (ret == -EINTR)
		log_debug("%s of inode %llu for pid %d (uid %u) stopped: the client was killed",
			  x->cmd == DMAFS_IOC_PREFETCH ? "prefetch" : "placement",
			  (unsigned long long)x->ino, (int)x->c.tgid, (unsigned)x->c.uid);
	ioc_reply(x, ret);
	free(x);
}

/* REGISTER, PLACE and PREFETCH: to the placement threads, which reply. */
static int ioc_queue(struct ioc *x)
{
	struct ioc *j;
	int ret;

	/* only a file the caller opened for reading */
	/* (a batch reads the files its handles name, whatever file it is issued on) */
	if (x->cmd != DMAFS_IOC_REGISTER && x->cmd != DMAFS_IOC_BATCH &&
	    ((x->flags & FUSE_IOCTL_DIR) || !OPS_FH_READABLE(x->fh)))
		return -EBADF;
	j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = *x;
	j->q = (struct placeq_job){ .uid = x->c.uid, .run = job_run };
	ret = placeq_submit(ops_srv(x->req)->placeq, &j->q);
	if (ret) {
		free(j);
		return ret;
	}
	return IOC_QUEUED;
}

/*
 * The inode flags. The kernel's fileattr code sends these itself, with a 4-byte int for
 * the FLAGS pair (whatever the ioctl number says) and a struct fsxattr for the other;
 * fsxattr carries the same two flags as FS_XFLAG_IMMUTABLE and FS_XFLAG_APPEND.
 */
static int ioc_getflags(struct ioc *x)
{
	x->out_len = sizeof(x->u.iflags);
	return fs_getflags(ops_fs(x->req), x->ino, &x->u.iflags);
}

static int ioc_fsgetxattr(struct ioc *x)
{
	uint32_t f = 0;
	int ret = fs_getflags(ops_fs(x->req), x->ino, &f);

	memset(&x->u.fa, 0, sizeof(x->u.fa));
	x->u.fa.fsx_xflags = (f & FS_IMMUTABLE_FL ? FS_XFLAG_IMMUTABLE : 0) |
			     (f & FS_APPEND_FL ? FS_XFLAG_APPEND : 0);
	x->out_len = sizeof(x->u.fa);
	return ret;
}

static int setflags(struct ioc *x, uint32_t f)
{
	struct fs_ctx c;

	ops_ctx(x->req, &c);
	return ops_durable(x->req, fs_setflags(ops_fs(x->req), &c, x->ino, f), 0);
}

static int ioc_setflags(struct ioc *x)
{
	return setflags(x, x->u.iflags);
}

static int ioc_fssetxattr(struct ioc *x)
{
	const struct fsxattr *fa = &x->u.fa;

	if (fa->fsx_extsize || fa->fsx_projid || fa->fsx_cowextsize ||
	    (fa->fsx_xflags & ~(FS_XFLAG_IMMUTABLE | FS_XFLAG_APPEND)))
		return -EOPNOTSUPP;
	return setflags(x, (fa->fsx_xflags & FS_XFLAG_IMMUTABLE ? FS_IMMUTABLE_FL : 0) |
				   (fa->fsx_xflags & FS_XFLAG_APPEND ? FS_APPEND_FL : 0));
}

/*
 * A remount's new mode. Going read-only while the kernel mount is still read-write would
 * leave writers with EROFS from the daemon instead of the kernel: refused, in status.
 */
static int ioc_mode(struct ioc *x)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(x->req);
	struct dmafs_ioc_mode *m = &x->u.mode;
	struct srv *s = ops_srv(x->req);
	char err[256];

	if (x->ino != FUSE_ROOT_ID || !(x->flags & FUSE_IOCTL_DIR))
		return -ENOTTY; /* only on the mount's root directory */
	/* uid 0 with CAP_SYS_ADMIN, as mount(2) wants; pid 0: another pid namespace */
	if (ctx->uid != 0 || ctx->pid <= 0 || !acl_pid_capable(ctx->pid, ACL_CAP_SYS_ADMIN))
		return -EPERM;
	if (m->atime > DMAFS_ATIME_NEVER || (m->flags & ~(DMAFS_MODE_RO | DMAFS_MODE_NODIRATIME |
							   DMAFS_MODE_SYNC | DMAFS_MODE_DIRSYNC)))
		return -EINVAL;
	x->out_len = sizeof(*m);
	m->status = 0;
	m->msg[0] = '\0';
	if ((m->flags & DMAFS_MODE_RO) && !s->fs.ro && s->dev_known &&
	    mountrec_dev_ro(s->dev_major, s->dev_minor) == 0) {
		m->status = -EBUSY;
		snprintf(m->msg, sizeof(m->msg), "the kernel mount is still read-write: remount it read-only first (mount -o remount,ro)");
		return 0;
	}
	s->fs.set.atime = (int)m->atime;
	s->fs.set.nodiratime = !!(m->flags & DMAFS_MODE_NODIRATIME);
	s->fs.set.sync = !!(m->flags & DMAFS_MODE_SYNC);
	s->fs.set.dirsync = !!(m->flags & DMAFS_MODE_DIRSYNC);
	m->status = fs_set_ro(&s->fs, !!(m->flags & DMAFS_MODE_RO), err, sizeof(err));
	if (m->status)
		snprintf(m->msg, sizeof(m->msg), "%s", err);
	return 0;
}

/*
 * A rebuild while mounted (dmafs-replace MOUNTPOINT NEW): the new device is taken from the
 * caller as the descriptor it opened (clientfd_take_dev: nothing opened by name), and the
 * engine copies on a thread of its own (rebuild-live.c); STATUS says how far it is. Only on
 * the mount's root, only by uid 0 with CAP_SYS_ADMIN: it writes a whole device.
 */
static int ioc_rebuild(struct ioc *x)
{
	static unsigned stuck; /* descriptors being closed aside (clientfd.h) */
	const struct fuse_ctx *ctx = fuse_req_ctx(x->req);
	struct dmafs_ioc_rebuild *r = &x->u.rebuild;
	struct fs *fs = ops_fs(x->req);
	struct fs_rebuild_status st;
	int status = 0;

	if (x->ino != FUSE_ROOT_ID || !(x->flags & FUSE_IOCTL_DIR))
		return -ENOTTY;
	if (ctx->uid != 0 || ctx->pid <= 0 || !acl_pid_capable(ctx->pid, ACL_CAP_SYS_ADMIN))
		return -EPERM;
	if ((r->op != DMAFS_REBUILD_START && r->op != DMAFS_REBUILD_STATUS) || r->reserved)
		return -EINVAL;
	x->out_len = sizeof(*r);
	r->msg[0] = '\0';
	if (r->op == DMAFS_REBUILD_START) {
		int pidfd = (int)syscall(SYS_pidfd_open, x->c.tgid, 0), fd = -1;
		unsigned k = 0;

		if (pidfd < 0)
			return -ESRCH;
		status = clientfd_take_dev(x->c.tgid, pidfd, r->fd, &stuck, &fd);
		close(pidfd);
		if (status)
			snprintf(r->msg, sizeof(r->msg), "descriptor %d: %s", r->fd,
				 status == -EBADF ? "not open read-write with O_DIRECT"
				 : status == -EINVAL ? "not a block device or an image file on a local filesystem"
				 : strerror(-status));
		else if (!(status = fs_rebuild_start(fs, fd, r->member, &k, r->msg, sizeof(r->msg))))
			r->member = (int32_t)k;
	}
	fs_rebuild_status(fs, &st);
	r->status = status;
	r->state = st.state == FS_REBUILD_RUNNING ? DMAFS_REBUILD_RUNNING
		   : st.state == FS_REBUILD_DONE ? DMAFS_REBUILD_DONE
		   : st.state == FS_REBUILD_FAILED ? DMAFS_REBUILD_FAILED : DMAFS_REBUILD_NONE;
	if (r->op == DMAFS_REBUILD_STATUS || !status) {
		r->member = (int32_t)st.member;
		if (st.msg[0]) { /* cut to the reply's room */
			memcpy(r->msg, st.msg, sizeof(r->msg) - 1);
			r->msg[sizeof(r->msg) - 1] = '\0';
		}
	}
	r->done = st.done;
	r->total = st.total;
	r->damaged = st.damaged;
	return 0;
}

/* What a command takes in and gives back, and how it is served. */
static const struct ioc_cmd {
	unsigned cmd;
	size_t in, out; /* bytes; the kernel's fileattr calls send at least, not exactly, @in */
	int exact;	/* the sizes must match exactly (the dmafs commands) */
	int caller;	/* the caller's process is needed (placement's owner) */
	int (*run)(struct ioc *x);
} cmds[] = {
	{ DMAFS_IOC_INFO, 0, sizeof(struct dmafs_ioc_info), 1, 1, ioc_info },
	{ DMAFS_IOC_REGISTER, sizeof(struct dmafs_ioc_register), sizeof(struct dmafs_ioc_register), 1, 1, ioc_queue },
	{ DMAFS_IOC_UNREGISTER, sizeof(struct dmafs_ioc_unregister), 0, 1, 1, ioc_unregister },
	{ DMAFS_IOC_PLACE, sizeof(struct dmafs_ioc_place), sizeof(struct dmafs_ioc_place), 1, 1, ioc_queue },
	{ DMAFS_IOC_PLACE2, sizeof(struct dmafs_ioc_place2), sizeof(struct dmafs_ioc_place2), 1, 1, ioc_queue },
	/* no caller: a prefetch uses no registration, only the descriptor's read access */
	{ DMAFS_IOC_PREFETCH, sizeof(struct dmafs_ioc_prefetch), sizeof(struct dmafs_ioc_prefetch), 1, 0, ioc_queue },
	{ DMAFS_IOC_HANDLE, sizeof(struct dmafs_ioc_handle), sizeof(struct dmafs_ioc_handle), 1, 1, ioc_handle },
	{ DMAFS_IOC_BATCH, sizeof(struct dmafs_ioc_batch), sizeof(struct dmafs_ioc_batch), 1, 1, ioc_queue },
	{ DMAFS_IOC_MODE, sizeof(struct dmafs_ioc_mode), sizeof(struct dmafs_ioc_mode), 1, 0, ioc_mode },
	{ DMAFS_IOC_REBUILD, sizeof(struct dmafs_ioc_rebuild), sizeof(struct dmafs_ioc_rebuild), 1, 1, ioc_rebuild },
	{ FS_IOC_GETFLAGS, 0, sizeof(uint32_t), 0, 0, ioc_getflags },
	{ FS_IOC_SETFLAGS, sizeof(uint32_t), 0, 0, 0, ioc_setflags },
	{ FS_IOC_FSGETXATTR, 0, sizeof(struct fsxattr), 0, 0, ioc_fsgetxattr },
	{ FS_IOC_FSSETXATTR, sizeof(struct fsxattr), 0, 0, 0, ioc_fssetxattr },
};

static const struct ioc_cmd *find_cmd(unsigned cmd)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (cmds[i].cmd == cmd)
			return &cmds[i];
	return NULL;
}

/* Sizes and caller of @x checked against @e; the input copied in. */
static int ioc_decode(struct ioc *x, const struct ioc_cmd *e, const void *in_buf,
		      size_t in_bufsz, size_t out_bufsz)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(x->req);

	if (x->flags & FUSE_IOCTL_COMPAT)
		return -ENOSYS;
	if (e->exact ? in_bufsz != e->in || out_bufsz < e->out
		     : in_bufsz < e->in || out_bufsz < e->out)
		return -EINVAL;
	memcpy(&x->u, in_buf, e->in);
	if (e->caller && place_tgid(ctx->pid, &x->c.tgid))
		return -ESRCH;
	return 0;
}

void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
	      struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
	      size_t out_bufsz)
{
	const struct ioc_cmd *e = find_cmd(cmd);
	struct ioc x = { .req = req, .ino = ino, .cmd = cmd, .flags = flags,
			 .fh = fi ? fi->fh : 0, .c = { .uid = fuse_req_ctx(req)->uid } };
	int ret = e ? ioc_decode(&x, e, in_buf, in_bufsz, out_bufsz) : -ENOTTY;

	if (!ret)
		ret = e->run(&x);
	if (ret != IOC_QUEUED)
		ioc_reply(&x, ret);
}
