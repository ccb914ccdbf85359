/* SPDX-License-Identifier: MIT */
/*
 * workpool.h - one pool of detached threads for CPU work handed off by I/O paths
 * (checksum verification of data that has just been read, copies into a client's
 * pages), shared by the read path and the placement pipeline. The pool takes turns
 * between the users whose requests queued the work: one user's long placement does not
 * hold another's checksum checks behind it.
 */
#ifndef DMAFS_WORKPOOL_H
#define DMAFS_WORKPOOL_H

/* A unit of work: embed it in the caller's job; fn gets it back (container_of). */
struct work {
	void (*fn)(struct work *w);
	struct work *next;
	unsigned owner; /* set by workpool_queue(): the queuing thread's owner */
};

struct workpool;

/* A pool without threads yet (NULL: no memory; workpool_start() then says 0). */
struct workpool *workpool_new(void);
/*
 * Start the pool on first use (min(16, online CPUs) threads); returns how many threads
 * it has: 0 when none could be started, and then the caller does the work itself.
 */
int workpool_start(struct workpool *wp);

/*
 * Queue @w (after workpool_start() returned > 0); w->fn(w) runs on a pool thread. Work
 * of one owner runs in the order queued; between owners the pool takes turns.
 */
void workpool_queue(struct workpool *wp, struct work *w);

/*
 * Whose work the calling thread queues from now on (a uid: the caller of the request it
 * serves); 0, the daemon's own, until set.
 */
void workpool_owner(unsigned owner);

#endif
