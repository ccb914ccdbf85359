/* SPDX-License-Identifier: MIT */
/*
 * stage.h - staging memory for placements: one pool of 1 MiB slots per target device,
 * shared by every placement to that device.
 *
 * A GPU pool is page-locked (pinned) host memory registered with the device's runtime,
 * with a few copy streams and one event per slot: a slot is filled by O_DIRECT reads, its
 * bytes are copied to the device asynchronously, and the slot is taken again only after
 * the event recorded behind that copy has fired. The host pool (target host, device 0)
 * is plain memory, the bounce for host placements whose buffer and file offsets disagree
 * modulo 4096 and for partial blocks at the edges of a range.
 *
 * GPU pools are set up ahead of the first placement: place_init() starts a thread that
 * prepares every device it finds (runtime, primary context, pinned slots, streams,
 * events) while the mount is already serving; a placement that arrives earlier waits for
 * that device's setup to finish instead of starting a second one.
 */
#ifndef DMAFS_STAGE_H
#define DMAFS_STAGE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define STAGE_SLOT (1u << 20)
#define STAGE_STREAMS 4
#define STAGE_MIN_SHARE 4 /* slots a placement may hold however many share the pool */

struct gpu;
struct tier;

/* The pools of one mount, one per target device (stage.c). */
struct stages;

struct stage {
	pthread_mutex_t lock;	/* innermost lock: nothing else is taken while holding it */
	pthread_cond_t cond;	/* a slot came back, a placement left, or setup ended */
	int state;		/* STAGE_* or -errno of the last failed setup; protected by lock */
	int target, dev;
	struct gpu *gpu;	/* GPU pools */
	char *mem;		/* nslots * STAGE_SLOT bytes */
	size_t bytes;
	unsigned nslots;
	unsigned nfree;		/* protected by lock */
	uint32_t *free;		/* stack of free slot numbers; protected by lock */
	unsigned users;		/* placements using the pool now; protected by lock */
	void *stream[STAGE_STREAMS];
	void **event;		/* GPU pools: one per slot */
	unsigned next_stream;	/* atomic; placements take streams round robin */
	uint64_t setup_ns;	/* how long the setup took */
};

enum { STAGE_NONE, STAGE_SETUP, STAGE_READY };

/*
 * Remember the pool size (@bytes per device, rounded up to whole slots, at least 4) and,
 * with @prewarm, start the thread that sets up every GPU's pool now. @tier: the warm tier
 * (NULL: none); when a GPU runtime's first pool is set up, the runtime becomes a pinner
 * of the tier (tier_add_pinner): its segments are pinned as they take memory, so that
 * device copies out of the tier run at the link's speed. Returns 0 or -errno.
 */
int stage_init(struct stages **out, uint64_t bytes, int prewarm, struct tier *tier);
/* Wait for the setup thread, free every pool and unpin the tier (no placement may run). */
void stage_shutdown(struct stages *S);
/* Pool bytes per device. */
uint64_t stage_bytes(const struct stages *S);
/*
 * The pool of @target (DMAFS_TARGET_*) device @dev, set up now if nobody has yet (or
 * waiting for a setup in progress). @g: the runtime for GPU targets, NULL for host.
 * Returns 0 and *out, or -ENOMEM/-ENODEV (logged) when it cannot be set up; a later call
 * tries again.
 */
int stage_get(struct stages *S, int target, struct gpu *g, int dev, struct stage **out);
/* What the pool of a device costs and whether it is ready, for INFO/dmafs-check. */
int stage_describe(struct stages *S, int target, int dev, char *buf, size_t len);

/* A placement starts / stops using @s (the fair share of slots depends on how many do). */
void stage_enter(struct stage *s);
void stage_leave(struct stage *s);
/*
 * Take a free slot for a placement that holds @held already. Returns the slot number, or
 * -1 when none is free or the caller holds its share: nslots / @parts (the placement's
 * user's part, share.h: users times that user's requests running), or nslots / users of
 * @s when @parts is 0; at least STAGE_MIN_SHARE.
 */
int stage_take(struct stage *s, unsigned held, unsigned parts);
/* Give a slot back (its data delivered: copied out, or its device copy finished). */
void stage_put(struct stage *s, unsigned slot);
/* Block until a slot comes back or @timeout_us passes: for a placement holding none. */
void stage_wait(struct stage *s, unsigned timeout_us);

static inline char *stage_mem(const struct stage *s, unsigned slot)
{
	return s->mem + (size_t)slot * STAGE_SLOT;
}

#endif
