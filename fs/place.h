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
#include "fsops.h"

struct place_caller {
	pid_t tgid;
	uid_t uid;
};

/*
 * Start the service: the reaper of dead clients' registrations and, with @prewarm, the
 * setup of every GPU's staging (stage.h) in the background. staging: bytes per device.
 */
int place_init(struct fs *fs, uint64_t staging_bytes, int prewarm);
void place_shutdown(void);
/* Thread id from a FUSE request -> process id, from /proc. Returns 0 or -ESRCH. */
int place_tgid(pid_t tid, pid_t *tgid);

int place_info(struct fs *fs, uint64_t ino, struct dmafs_ioc_info *out);
int place_register(struct fs *fs, const struct place_caller *c, struct dmafs_ioc_register *r);
int place_unregister(const struct place_caller *c, uint64_t id);
/*
 * Place extents of file @ino (opened for reading by the caller) into a buffer the caller
 * registered. Returns 0 (p's out fields set) or -errno: -EINVAL malformed request,
 * -ENOENT unknown id, -EPERM another process's buffer, -ERANGE past the buffer's end,
 * -EIO member read error, -ENODEV GPU copy failure.
 */
int place_run(struct fs *fs, const struct place_caller *c, uint64_t ino,
	      struct dmafs_ioc_place *p);
/* Check the request header and entries against a buffer of @bufsize and a file of
 * @fsize; sets each entry's effective length. Pure: the fuzz target. */
int place_validate(struct dmafs_ioc_place *p, uint64_t bufsize, uint64_t fsize);
/* The cuFile path (place-p2p.c): @map is the IPC mapping of the registration on device
 * @dev, @rel the registration's offset inside it. */
struct gpu;
int place_p2p(struct fs *fs, struct inode *ino, struct gpu *g, int dev, void *map, uint64_t rel,
	      const struct dmafs_ioc_place *p);
/* Registrations currently held (for tests and dmafs-check). */
unsigned place_count(void);

#endif
