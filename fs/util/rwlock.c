// SPDX-License-Identifier: MIT
/* rwlock.c - the 8-byte writer-preferring reader-writer lock (rwlock.h). */
#include "util/rwlock.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex_wait(uint32_t *addr, uint32_t val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

/*
 * Waiters sleep on the writers word, whose high half counts wake-ups: a waiter reads it
 * before it reads the state, and every change that may let one in (a writer's unlock,
 * the last reader out while a writer waits) bumps it after changing the state. So a
 * waiter either sees the new state or sleeps on a word that has changed already and
 * returns at once; none can miss its wake-up.
 */
static void wake_all(struct dm_rwlock *l)
{
	__atomic_add_fetch(&l->writers, DM_RW_WAITING + 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &l->writers, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void dm_rwlock_rdlock(struct dm_rwlock *l)
{
	for (;;) {
		uint32_t w = __atomic_load_n(&l->writers, __ATOMIC_SEQ_CST);
		uint32_t s = __atomic_load_n(&l->state, __ATOMIC_SEQ_CST);

		if (!(s & DM_RW_WRITER) && !(w & DM_RW_WAITING)) {
			if (__atomic_compare_exchange_n(&l->state, &s, s + 1, 0, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				return;
			continue;
		}
		/* a writer holds it or waits: until it is woken (the last reader leaving,
		 * or the writer's unlock) */
		futex_wait(&l->writers, w);
	}
}

void dm_rwlock_wrlock(struct dm_rwlock *l)
{
	__atomic_add_fetch(&l->writers, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		uint32_t w = __atomic_load_n(&l->writers, __ATOMIC_SEQ_CST);
		uint32_t s = __atomic_load_n(&l->state, __ATOMIC_SEQ_CST);

		if (s == 0) {
			if (__atomic_compare_exchange_n(&l->state, &s, DM_RW_WRITER, 0, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				break;
			continue;
		}
		futex_wait(&l->writers, w);
	}
	__atomic_sub_fetch(&l->writers, 1, __ATOMIC_RELAXED);
}

void dm_rwlock_unlock(struct dm_rwlock *l)
{
	uint32_t s = __atomic_load_n(&l->state, __ATOMIC_RELAXED);

	if (s & DM_RW_WRITER) {
		__atomic_store_n(&l->state, 0, __ATOMIC_SEQ_CST);
		wake_all(l); /* readers and writers waiting: they race again */
		return;
	}
	/* the last reader out lets a waiting writer in (readers wait only behind one) */
	if (__atomic_sub_fetch(&l->state, 1, __ATOMIC_SEQ_CST) == 0 &&
	    (__atomic_load_n(&l->writers, __ATOMIC_SEQ_CST) & DM_RW_WAITING))
		wake_all(l);
}
