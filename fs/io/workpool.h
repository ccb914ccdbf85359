/* SPDX-License-Identifier: MIT */
/*
 * workpool.h - one pool of detached threads for CPU work handed off by I/O paths
 * (checksum verification of data that has just been read), shared by the read path and
 * the placement pipeline.
 */
#ifndef DMAFS_WORKPOOL_H
#define DMAFS_WORKPOOL_H

/* A unit of work: embed it in the caller's job; fn gets it back (container_of). */
struct work {
	void (*fn)(struct work *w);
	struct work *next;
};

struct workpool;

/* A pool without threads yet (NULL: no memory; workpool_start() then says 0). */
struct workpool *workpool_new(void);
/*
 * Start the pool on first use (min(16, online CPUs) threads); returns how many threads
 * it has: 0 when none could be started, and then the caller does the work itself.
 */
int workpool_start(struct workpool *wp);

/* Queue @w (after workpool_start() returned > 0); w->fn(w) runs on a pool thread. */
void workpool_queue(struct workpool *wp, struct work *w);

#endif
