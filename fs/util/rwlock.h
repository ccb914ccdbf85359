/* SPDX-License-Identifier: MIT */
/*
 * rwlock.h - an 8-byte reader-writer lock that prefers writers, for one per inode
 * (pthread_rwlock_t takes 56 bytes, a tenth of a small file's share of the daemon's
 * memory). Readers do not get in while a writer waits, so a stream of readers (the
 * placements of a file) cannot hold writers off for good; a thread must not take it
 * shared twice (a writer waiting between would deadlock it). Futex-based; the acquire
 * and release orderings of its atomics give what it protects the usual happens-before.
 */
#ifndef DMAFS_RWLOCK_H
#define DMAFS_RWLOCK_H

#include <stdint.h>

struct dm_rwlock {
	uint32_t state;	  /* readers holding it, or DM_RW_WRITER */
	/* low 16 bits: writers waiting for it; high 16: a count of the wake-ups, the word
	 * waiters sleep on (a state that went back to the value a waiter saw, 0 after a
	 * writer came and went, would not wake it) */
	uint32_t writers;
};

#define DM_RW_WRITER 0x80000000u
#define DM_RW_WAITING 0xffffu /* writers & DM_RW_WAITING: writers waiting */
#define DM_RWLOCK_INIT { 0, 0 }

void dm_rwlock_rdlock(struct dm_rwlock *l);
void dm_rwlock_wrlock(struct dm_rwlock *l);
/* Release what the caller holds: the writer's hold or one reader's. */
void dm_rwlock_unlock(struct dm_rwlock *l);

#endif
