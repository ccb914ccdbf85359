/* SPDX-License-Identifier: MIT */
/*
 * rebuild.h - rebuilding a lost member of a mirror onto a new device (rebuild.c), for
 * dmafs-replace(8) with the filesystem unmounted and for the daemon while it is mounted
 * (read-only, so that nothing changes under the copy).
 */
#ifndef DMAFS_REBUILD_H
#define DMAFS_REBUILD_H

#include <stdint.h>

#include "io/member.h"
#include "store/journal.h"
#include "store/meta.h"

/* Copy @len bytes from member @sm at @soff to the new member at @doff. */
struct job {
	uint64_t soff, doff, ino, foff;
	uint32_t len;
	unsigned sm;
	int data; /* file data: checked, and its checksums made; else the metadata log */
};

struct rebuild {
	/* set by the caller */
	struct member *ms;	/* the members; sources are read through ms[i].fd */
	unsigned n, k;		/* members, the one rebuilt */
	struct member *dst;	/* the new device, its superblock geometry set (rebuild_new_sb) */
	void (*note)(void *arg, const char *msg); /* a run of blocks with no good copy */
	void (*progress)(void *arg, uint64_t done, uint64_t total, double seconds, int final);
	void *arg;
	/* the plan and the copy */
	struct job *job;
	size_t njob, cap;
	uint64_t total, damaged;
	uint64_t done;		/* atomic: bytes copied so far */
	int stop;		/* atomic: set to stop the copy (at the next batch) */
	char *cwin;		/* the new member's checksum bytes [cw_a, cw_a + CWIN) */
	uint64_t cw_a, cw_end;	/* cw_end: how far it was written into */
	char err[512];		/* what failed, when rebuild_copy fails */
};

/*
 * The superblock of a new device @nm (path, fd and size set) taking member @k's place
 * among @ms (@n members, k's stand-in included): the geometry of its size, which must
 * hold member k's data region at its offset. 0, or -ENOSPC with the reason in @err.
 */
int rebuild_new_sb(const struct member *ms, unsigned n, unsigned k, struct member *nm, char *err,
		   size_t errlen);
/* What to copy, from the replayed @meta and the log @j: 0 or -ENOMEM. The metadata must
 * not change until the copy is done (the caller holds it still or the mount read-only). */
int rebuild_plan(struct rebuild *R, struct meta *meta, const struct journal *j);
/* Copy it all and flush the new device (not its superblocks): 0, or -errno with R->err. */
int rebuild_copy(struct rebuild *R);
void rebuild_free(struct rebuild *R);

#endif
