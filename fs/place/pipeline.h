/* SPDX-License-Identifier: MIT */
/*
 * pipeline.h - the placement pipeline: a continuous stream of O_DIRECT member reads,
 * each delivered the moment it completes.
 *
 * A placement is cut into pieces at 1 MiB file windows (so a piece is one member read
 * when the stripe unit is 1 MiB or more). Up to a queue depth per member of pieces are in
 * flight at once; each piece is read either straight into the client's pages (host
 * target, offsets congruent modulo 4096: zero copy) or into a staging slot (stage.h) and
 * then delivered: copied into the client's pages, or queued as an asynchronous
 * host-to-device copy whose event releases the slot. There is no barrier at which members
 * wait for each other, and any number of placements to one device share its slots.
 * With verify, each piece's checksum blocks are read with it and checked (by a pool of
 * threads) before the piece is delivered.
 *
 * With the mount's warm tier (engine/tier.h), a piece whose 1 MiB chunk the tier holds is
 * delivered from there with no member read, and a whole chunk it does not hold is read
 * into a chunk reserved for it, checked (whatever verify says) and published before it
 * is delivered. A GPU target copies from the tier's memory, which stage.c pins: that
 * side has not yet run on a GPU. A prefetch (pipeline_prefetch) runs the same pipeline
 * with no target: its pieces are whole chunks the tier lacks, read and checked into
 * reserved chunks, and delivering one only publishes it; it takes as many chunks at once
 * as the tier lets it, so its memory is the tier's own.
 *
 * A staged piece's device copy is queued once the piece has been ready for the copy delay
 * (-o copy_delay_us, PIPELINE_COPY_DELAY_US by default), or at once when no reads are left
 * in flight: a slot just written by a CPU copy (a loop device's read) is slower for the
 * GPU to read at once, and the delay costs only the staging the waiting pieces hold.
 * dmafs(8), copy_delay_us, gives the measurements.
 */
#ifndef DMAFS_PIPELINE_H
#define DMAFS_PIPELINE_H

#include "dmafs-proto.h"
#include "engine/engine.h"
#include "place/share.h"
#include "place/stage.h"

/*
 * Whether the request a pipeline runs for is to stop (its client was interrupted or
 * killed): asked between pieces; fn NULL, or the pointer NULL, never stops.
 */
struct pipe_stop {
	int (*fn)(void *arg); /* nonzero: stop */
	void *arg;
};

struct pipe_target {
	int gpu;	  /* 0: host pages at @base; 1: device memory at @base via @stage */
	char *base;	  /* where buffer offset 0 is (host address or device pointer) */
	struct stage *stage; /* GPU: the device's pool; host: the host bounce pool, or NULL
			      * to have it set up on first need */
	struct stages *stages; /* the mount's pools (host bounce pool on first need) */
	uint64_t copy_delay_ns;	/* wait before copying a ready piece (0: copy at once) */
	const struct pipe_stop *stop; /* the request's stop, or NULL */
	struct share *share;	/* with @uid: the reads in flight are this user's part of the
				 * queue depth (share.h); NULL: all of it */
	uid_t uid;
};

#define PIPELINE_COPY_DELAY_US 300

/* What a placement did with the warm tier (pipeline_run adds to it). */
struct pipe_out {
	uint64_t tier_bytes;	     /* placed from the tier (pieces it held: no member read) */
	uint64_t miss_from, miss_to; /* with tier_fill=idle: the chunks it would have filled,
				      * [from, to) in bytes of the file (to 0: none) */
};

/*
 * Place the validated entries of @p (lengths already clipped to the file) from @ino into
 * @t. Caller holds ino->iolock shared. Returns 0 once every byte has landed (device
 * copies finished), or -EIO (member read error or checksum mismatch, logged), -ENODEV
 * (GPU call failed or staging unavailable), -ENOMEM, -EINTR (t->stop said stop: no new
 * piece was read after it; what was in flight finished first). On failure nothing is left in
 * flight and every slot taken has been given back. On success, @out is added to (see
 * struct pipe_out).
 */
int pipeline_run(struct fs *fs, struct inode *ino, const struct pipe_target *t,
		 const struct dmafs_ioc_place *p, int verify, struct pipe_out *out);

/* What a prefetch did, in bytes of the file (pipeline_prefetch adds to each). */
struct pipe_fill {
	uint64_t read;	  /* read from the members and published into the tier */
	uint64_t held;	  /* in the tier already (or filled by another placement meanwhile) */
	uint64_t skipped; /* not kept: no chunk free and none of ours to wait for, the file
			   * changed while they were read, holes (nothing to read: a
			   * placement zeroes them), or past what the tier can keep */
};

/*
 * Read the chunks of @ino's bytes [from, to) that the warm tier lacks into it: @from a
 * multiple of TIER_CHUNK, @to one or the end of the file (clipped there). Every chunk is
 * read whole, its checksums checked, and published; a chunk with no byte mapped (a hole)
 * is not read. Caller holds ino->iolock shared. Returns 0 (@out added to), -EOPNOTSUPP
 * (the mount has no tier), -EIO (member read error or checksum mismatch, logged; that
 * chunk is not kept), -ENOMEM, -EINTR (@req->stop said stop). @req (may be NULL) gives
 * only the request's stop and share; its target fields are not used.
 */
int pipeline_prefetch(struct fs *fs, struct inode *ino, uint64_t from, uint64_t to,
		      struct pipe_fill *out, const struct pipe_target *req);
/*
 * One window of a prefetch of @ino's bytes [*@off, @end): the chunks from *@off (rounded
 * down to a chunk) up to @window bytes on, clipped to the file's size now, read into the
 * tier once write-behind's data is on the members, under the file's iolock shared. A
 * window starts at the first chunk from *@off that has a byte mapped: holes cost nothing
 * (counted skipped). *@off moves to where the next window starts. Returns 1 when nothing
 * is left (the range is empty, or past the end of the file, or only holes), 0 after a
 * window, or -errno as pipeline_prefetch; @f is added to. The caller keeps @ino (an
 * open, or fs_hold).
 */
int pipeline_prefetch_window(struct fs *fs, struct inode *ino, uint64_t *off, uint64_t end,
			     uint64_t window, struct pipe_fill *f, const struct pipe_target *req);

#endif
