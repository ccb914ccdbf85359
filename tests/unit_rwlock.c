// SPDX-License-Identifier: MIT
/* Description: the inode I/O lock (fs/util/rwlock.c): writers exclude everyone (a pair of counters written under the write lock is never seen torn by readers, no update is lost), readers share it (several hold it at once), and a waiting writer gets in while readers keep coming, then the readers go on. */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "util/rwlock.h"
#include "t_unit.h"

static struct dm_rwlock lock = DM_RWLOCK_INIT;
static volatile unsigned long a, b; /* written together under the write lock */
static int stop;
static unsigned long reads, torn;
static int readers_in, max_readers_in;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void *reader(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int in;

		dm_rwlock_rdlock(&lock);
		in = __atomic_add_fetch(&readers_in, 1, __ATOMIC_RELAXED);
		if (in > __atomic_load_n(&max_readers_in, __ATOMIC_RELAXED))
			__atomic_store_n(&max_readers_in, in, __ATOMIC_RELAXED);
		if (a != b)
			__atomic_add_fetch(&torn, 1, __ATOMIC_RELAXED);
		for (volatile int k = 0; k < 200; k++) /* hold it a little: readers overlap */
			;
		__atomic_sub_fetch(&readers_in, 1, __ATOMIC_RELAXED);
		dm_rwlock_unlock(&lock);
		__atomic_add_fetch(&reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *writer(void *arg)
{
	unsigned long n = (unsigned long)(uintptr_t)arg;

	for (unsigned long i = 0; i < n; i++) {
		dm_rwlock_wrlock(&lock);
		T_EQ(__atomic_load_n(&readers_in, __ATOMIC_RELAXED), 0);
		a = a + 1;
		for (volatile int k = 0; k < 50; k++)
			;
		b = b + 1;
		dm_rwlock_unlock(&lock);
	}
	return NULL;
}

int main(void)
{
	pthread_t r[6], w[3];
	unsigned long r0;
	double t0, waited;

	alarm(120); /* a lock that deadlocks fails the test instead of hanging it */
	/* readers and writers at once: mutual exclusion, no torn pair, no lost update */
	for (int i = 0; i < 6; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	for (int i = 0; i < 3; i++)
		pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)20000);
	for (int i = 0; i < 3; i++)
		pthread_join(w[i], NULL);
	T_EQ(a, 60000);
	T_EQ(b, 60000);

	/* readers never stop coming: a writer still gets in, and soon */
	usleep(20000);
	t0 = now();
	dm_rwlock_wrlock(&lock);
	waited = now() - t0;
	a = b = 0;
	dm_rwlock_unlock(&lock);
	T_CHECK(waited < 1.0, "a writer waited %.3f s behind readers that kept coming", waited);
	/* and the readers go on after it */
	r0 = __atomic_load_n(&reads, __ATOMIC_RELAXED);
	usleep(50000);
	T_CHECK(__atomic_load_n(&reads, __ATOMIC_RELAXED) > r0, "no reader got in after the writer");
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 6; i++)
		pthread_join(r[i], NULL);
	T_EQ(torn, 0);
	T_CHECK(max_readers_in >= 2, "readers never held the lock together (at most %d at once)",
		max_readers_in);
	T_CHECK(reads > 1000, "only %lu reads", reads);
	return t_done("unit_rwlock");
}
