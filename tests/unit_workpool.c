// SPDX-License-Identifier: MIT
/* Description: the work pool takes turns between owners: one owner's long queue does not hold another's work behind it, two owners' queues interleave, more owners than lanes all get their work done, and work keeps running after lanes empty and fill again. */
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

#include "io/workpool.h"
#include "t_unit.h"

#define MAXJOBS 4096

struct job {
	struct work w;
	unsigned owner;
};

static struct job jobs[MAXJOBS];
static unsigned order[MAXJOBS]; /* owner of the n-th job started */
static unsigned nstarted, ndone, njobs;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void run_job(struct work *w)
{
	struct job *j = (struct job *)((char *)w - offsetof(struct job, w));
	unsigned n = __atomic_fetch_add(&nstarted, 1, __ATOMIC_SEQ_CST);

	T_EQ(w->owner, j->owner); /* the pool says whose work it is */
	order[n] = j->owner;
	__atomic_add_fetch(&ndone, 1, __ATOMIC_SEQ_CST);
}

/* holds a pool thread until the gate opens */
static void blocker(struct work *w)
{
	(void)w;
	__atomic_add_fetch(&nstarted, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&gate_lock);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	__atomic_add_fetch(&ndone, 1, __ATOMIC_SEQ_CST);
}

static struct work blockers[64];

/* Every pool thread busy until open_gate(): what is queued meanwhile waits its turn. */
static void close_gate(struct workpool *wp, int threads)
{
	gate_open = 0;
	nstarted = ndone = njobs = 0;
	workpool_owner(0);
	for (int i = 0; i < threads; i++) {
		blockers[i].fn = blocker;
		workpool_queue(wp, &blockers[i]);
	}
	while (__atomic_load_n(&nstarted, __ATOMIC_SEQ_CST) < (unsigned)threads)
		usleep(1000);
}

static void open_gate(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

static void queue_jobs(struct workpool *wp, unsigned owner, unsigned n)
{
	workpool_owner(owner);
	for (unsigned i = 0; i < n && njobs < MAXJOBS; i++) {
		struct job *j = &jobs[njobs++];

		j->owner = owner;
		j->w.fn = run_job;
		workpool_queue(wp, &j->w);
	}
}

/* Wait until all @total (blockers included) have run; 0 if they did within 20 s. */
static int wait_all(unsigned total)
{
	for (int i = 0; i < 20000; i++) {
		if (__atomic_load_n(&ndone, __ATOMIC_SEQ_CST) == total)
			return 0;
		usleep(1000);
	}
	return -1;
}

/* Where owner @o's first job started, counting only jobs (not the blockers). */
static int first_of(int threads, unsigned total, unsigned o)
{
	for (unsigned i = threads; i < total; i++)
		if (order[i] == o)
			return (int)(i - threads);
	return -1;
}

int main(void)
{
	struct workpool *wp = workpool_new();
	int threads = workpool_start(wp);
	unsigned a = 0, b = 0;

	if (threads <= 0) {
		printf("SKIP: no pool thread could be started\n");
		return 77;
	}
	if (threads > 64)
		threads = 64;

	/* one owner's 1000 jobs queued first; another's one job comes next, not after them */
	close_gate(wp, threads);
	queue_jobs(wp, 1000, 1000);
	queue_jobs(wp, 1001, 1);
	open_gate();
	T_EQ(wait_all(threads + njobs), 0);
	T_CHECK(first_of(threads, threads + njobs, 1001) <= 1,
		"the second owner's job started %d jobs after the first owner's began (a FIFO: 1000)",
		first_of(threads, threads + njobs, 1001));

	/* two owners with 200 each: they take turns (each start in turn, give or take the
	 * threads that were already running) */
	close_gate(wp, threads);
	queue_jobs(wp, 2000, 200);
	queue_jobs(wp, 2001, 200);
	open_gate();
	T_EQ(wait_all(threads + njobs), 0);
	for (unsigned i = threads; i < (unsigned)threads + 40; i++) {
		a += order[i] == 2000;
		b += order[i] == 2001;
	}
	T_CHECK(a >= 18 && b >= 18, "of the first 40 jobs to start, %u were one owner's and %u the other's", a, b);

	/* more owners than lanes: lanes are shared, nothing is lost, everyone's work runs */
	close_gate(wp, threads);
	for (unsigned o = 0; o < 100; o++)
		queue_jobs(wp, 3000 + o, 5);
	open_gate();
	T_EQ(wait_all(threads + njobs), 0);
	T_EQ(njobs, 500);

	/* lanes empty and fill again while the threads run: all of it runs */
	nstarted = ndone = njobs = 0;
	queue_jobs(wp, 4000, 300);
	queue_jobs(wp, 4001, 300);
	T_EQ(wait_all(njobs), 0);
	return t_done("unit_workpool");
}
