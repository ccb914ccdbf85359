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

static void futex_wake_all(uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void dm_rwlock_rdlock(struct dm_rwlock *l)
{
	for (;;) {
		uint32_t s = __atomic_load_n(&l->state, __ATOMIC_RELAXED);

		if (!(s & DM_RW_WRITER) && !__atomic_load_n(&l->writers, __ATOMIC_RELAXED)) {
			if (__atomic_compare_exchange_n(&l->state, &s, s + 1, 0, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				return;
			continue;
		}
		/* a writer holds it or waits: until the state changes (the last reader
		 * leaving, or the writer's unlock, wakes us) */
		futex_wait(&l->state, s);
	}
}

void dm_rwlock_wrlock(struct dm_rwlock *l)
{
	__atomic_add_fetch(&l->writers, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		uint32_t s = __atomic_load_n(&l->state, __ATOMIC_SEQ_CST);

		if (s == 0) {
			if (__atomic_compare_exchange_n(&l->state, &s, DM_RW_WRITER, 0, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				break;
			continue;
		}
		futex_wait(&l->state, s);
	}
	__atomic_sub_fetch(&l->writers, 1, __ATOMIC_RELAXED);
}

void dm_rwlock_unlock(struct dm_rwlock *l)
{
	uint32_t s = __atomic_load_n(&l->state, __ATOMIC_RELAXED);

	if (s & DM_RW_WRITER) {
		__atomic_store_n(&l->state, 0, __ATOMIC_RELEASE);
		futex_wake_all(&l->state); /* readers and writers waiting: they race again */
		return;
	}
	/* the last reader out lets a waiting writer in (readers wait only behind one) */
	if (__atomic_sub_fetch(&l->state, 1, __ATOMIC_SEQ_CST) == 0 &&
	    __atomic_load_n(&l->writers, __ATOMIC_SEQ_CST))
		futex_wake_all(&l->state);
}
