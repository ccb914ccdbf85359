/* SPDX-License-Identifier: MIT */
/*
 * place.h - the placement service: buffers registered by client processes, and the
 * engine that places file extents into them (host: O_DIRECT into the client's shared
 * pages; staged: O_DIRECT into pinned staging, pipelined async copies into GPU memory).
 *
 * Every request is validated completely before any I/O. Registrations belong to the
 * registering process (its tgid) and are dropped when it exits.
 */
#ifndef DMAFS_PLACE_H
#define DMAFS_PLACE_H

#include <sys/types.h>

#include "dmafs-proto.h"
#include "engine/engine.h"
#include "place/pipeline.h"

struct place_caller {
	pid_t tgid;
	uid_t uid;
	/* the request is to stop: its client was killed (NULL: never) */
	struct pipe_stop stop;
};

/* Bounds on what clients may register (mount options reg_max, reg_max_user, reg_bytes,
 * reg_bytes_user; dmafs(8)). Bytes count host buffers only: a GPU registration maps the
 * client's device memory and costs the daemon no host memory. */
struct place_limits {
	unsigned regs, regs_user;
	uint64_t bytes, bytes_user;
};

/* The placement service of one mount (place.c). */
struct place;

/*
 * Start the service of @fs in *@out: the reaper of dead clients' registrations and, with
 * @prewarm, the setup of every GPU's staging (stage.h) in the background. staging: bytes
 * per device; copy_delay_us: pipeline.h; p2p_force: p2p_new(). Returns 0 or -errno; *@out is for place_shutdown() either way.
 */
int place_init(struct place **out, struct fs *fs, const struct place_limits *limits,
	       uint64_t staging_bytes, unsigned copy_delay_us, int prewarm, int p2p_force);
/* Drop every registration and stop (NULL: nothing to do). */
void place_shutdown(struct place *pl);
/* Thread id from a FUSE request -> process id, from /proc. Returns 0 or -ESRCH. */
int place_tgid(pid_t tid, pid_t *tgid);
/*
 * Is the thread @tid dying: SIGKILL pending (the kernel adds it for every fatal signal, so
 * a default SIGTERM or SIGINT counts too, a signal with a handler does not), or gone?
 * From /proc/@tid/status.
 */
int place_killed(pid_t tid);

int place_info(struct place *pl, uint64_t ino, struct dmafs_ioc_info *out);
/*
 * Register a buffer of the caller. Host: the caller's descriptor rq->fd of a shmem or
 * hugetlbfs file it owns, open read-write (clientfd.h), with no hole in the range.
 * Returns 0 (rq->id, rq->device set) or -errno: -EINVAL malformed request or not shared
 * memory, -EBADF descriptor not open read-write, -EACCES not the caller's, -ERANGE past
 * the object, -EFAULT a hole in the range, -EDQUOT a per-user limit, -ENOSPC a limit of
 * the mount, -ENXIO GPU runtime or device missing, -ESRCH the caller is gone, -EAGAIN
 * descriptors of the caller's still being closed, -EPERM descriptor not handed over.
 */
int place_register(struct place *pl, const struct place_caller *c, struct dmafs_ioc_register *r);
int place_unregister(struct place *pl, const struct place_caller *c, uint64_t id);
/*
 * Place extents of file @ino (opened for reading by the caller) into a buffer the caller
 * registered. Returns 0 (p's out fields set) or -errno: -EINVAL malformed request,
 * -ENOENT unknown id, -EPERM another process's buffer, -ERANGE past the buffer's end,
 * -EIO member read error, -ENODEV GPU copy failure, -EFAULT the client took its host
 * buffer's memory away (no member is blamed), -EINTR c->stop said stop (the client was
 * killed; no piece was read after that). *@tier_bytes: of p->bytes, those placed
 * from the warm tier (DMAFS_IOC_PLACE2 sends it; the p2p path never uses the tier).
 */
int place_run(struct place *pl, const struct place_caller *c, uint64_t ino,
	      struct dmafs_ioc_place *p, uint64_t *tier_bytes);
/*
 * Read file @ino's bytes [rq->offset, +rq->length), widened to whole chunks and clipped at
 * the end of the file and at the tier's size (more would evict its own first chunks),
 * into the mount's warm tier (pipeline_prefetch), a window of chunks at a time under the
 * file's iolock; holes are not read. The caller opened the file for reading. Returns 0
 * (rq's out fields set; what was clipped or a hole counts as skipped) or -errno: -EINVAL
 * flags set, or not a regular file, -ENOENT unknown inode, -EOPNOTSUPP the mount has no
 * tier, -EIO member read error or checksum mismatch (what was read before it stays in
 * the tier), -ENOMEM, -EINTR c->stop said stop.
 */
int place_prefetch(struct place *pl, const struct place_caller *c, uint64_t ino,
		   struct dmafs_ioc_prefetch *rq);
/*
 * A handle naming file @ino, opened for reading by the caller, in the caller's batches
 * (batch.c): h's out fields set. Returns 0 or -errno: -EINVAL flags set or not a regular
 * file, -ENOENT unknown inode, -ESRCH the caller is gone.
 */
int place_handle(struct place *pl, const struct place_caller *c, uint64_t ino,
		 struct dmafs_ioc_handle *h);
/*
 * Place the samples of @b (files named by the caller's handles) into a buffer the caller
 * registered. Returns 0 (b's out fields and every entry's length and result set: an entry
 * whose handle is not the caller's fails with -EPERM, whose file is gone with -ENOENT, a
 * member read error or bad checksum with -EIO, each alone) or -errno for the whole
 * request: -EINVAL malformed, -ERANGE an entry past the buffer or more bytes in all than
 * it holds, -ENOENT/-EPERM the buffer (as place_run), -ENODEV GPU copy failure, -EFAULT
 * the host buffer's memory taken away, -ENOMEM, -EINTR c->stop said stop.
 */
int place_batch(struct place *pl, const struct place_caller *c, struct dmafs_ioc_batch *b);
/* Check the request header and entries against a buffer of @bufsize and a file of
 * @fsize; sets each entry's effective length. Pure: the fuzz target. */
int place_validate(struct dmafs_ioc_place *p, uint64_t bufsize, uint64_t fsize);
/* The cuFile path (place-p2p.c): @map is the IPC mapping of the registration on device
 * @dev, @rel the registration's offset inside it; -EINTR when @killed said stop (checked
 * before each read of at most 64 MiB). */
struct gpu;
struct p2p;
int place_p2p(struct p2p *P, struct fs *fs, struct inode *ino, struct gpu *g, int dev, void *map,
	      uint64_t rel, const struct dmafs_ioc_place *p, const struct pipe_stop *killed);

#endif
