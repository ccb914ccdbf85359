/* SPDX-License-Identifier: MIT */
/* populate.c - fault a mapping in from a few threads at once (common.h). */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>

#include "common.h"

/* Each thread gets at least this much (starting one costs more than faulting less), and
 * past 4 threads page faults on one mapping contend and it gets slower
 * (dmafs_buf_alloc_host(3), NOTES). */
#define PIECE_MIN (64ull << 20)
#define THREADS_MAX 4

struct piece {
	char *p;
	size_t len;
	int advice, err;
};

static void *populate_piece(void *arg)
{
	struct piece *c = arg;

	c->err = madvise(c->p, c->len, c->advice) ? -errno : 0;
	return NULL;
}

static size_t cpus(void)
{
	cpu_set_t set;
	long n;

	if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
		return (size_t)CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (size_t)n : 1;
}

int dm_populate(void *p, size_t len, int advice, size_t unit)
{
	struct piece c[THREADS_MAX];
	pthread_t tid[THREADS_MAX];
	int started[THREADS_MAX] = { 0 };
	size_t n = cpus(), step, off = 0;
	sigset_t all, old;
	int ret = 0;

	if (n > THREADS_MAX)
		n = THREADS_MAX;
	if (n > len / PIECE_MIN)
		n = len / PIECE_MIN;
	if (n < 1)
		n = 1;
	if (unit < 1)
		unit = 1;
	step = ((len + n - 1) / n + unit - 1) / unit * unit;
	for (n = 0; off < len; n++, off += step)
		c[n] = (struct piece){ (char *)p + off, len - off < step ? len - off : step, advice, 0 };
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (size_t i = 1; i < n; i++)
		started[i] = !pthread_create(&tid[i], NULL, populate_piece, &c[i]);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (n)
		populate_piece(&c[0]);
	for (size_t i = 1; i < n; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			populate_piece(&c[i]); /* no thread to be had: do it here */
	}
	for (size_t i = 0; i < n && !ret; i++)
		ret = c[i].err;
	return ret;
}
