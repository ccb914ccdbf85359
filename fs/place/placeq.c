// SPDX-License-Identifier: MIT
/* placeq.c - per-user queues and the threads that serve them in turn (see placeq.h). */
#include "place/placeq.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "util/util.h"

/* One user's waiting requests. Users with requests form a ring served in turn. */
struct uq {
	struct uq *next;	/* in the ring */
	uid_t uid;
	unsigned n;
	struct placeq_job *head, *tail;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static struct uq *ring;		/* protected by lock: the user served next */
static unsigned per_user_max;
static int stopping;		/* protected by lock */
static pthread_t *tids;
static unsigned nthreads;

static struct uq *find(uid_t uid)
{
	struct uq *q = ring;

	if (q)
		do {
			if (q->uid == uid)
				return q;
			q = q->next;
		} while (q != ring);
	return NULL;
}

/* Take the next job, the users in turn. Caller holds lock; the ring is not empty. */
static struct placeq_job *take(void)
{
	struct uq *q = ring, *prev;
	struct placeq_job *j = q->head;

	q->head = j->next;
	if (!q->head)
		q->tail = NULL;
	if (--q->n) {
		ring = q->next;
		return j;
	}
	/* the user has nothing left: out of the ring */
	for (prev = q; prev->next != q;)
		prev = prev->next;
	ring = prev == q ? NULL : q->next;
	prev->next = q->next;
	free(q);
	return j;
}

static void *main_loop(void *arg)
{
	sigset_t faults;

	(void)arg;
	/* Started with every signal blocked, but a fault must reach its handler: a SIGBUS
	 * from a client's memory (usermem.h) that is blocked kills the whole daemon. */
	sigemptyset(&faults);
	sigaddset(&faults, SIGBUS);
	sigaddset(&faults, SIGSEGV);
	sigaddset(&faults, SIGFPE);
	sigaddset(&faults, SIGILL);
	pthread_sigmask(SIG_UNBLOCK, &faults, NULL);
	pthread_mutex_lock(&lock);
	for (;;) {
		struct placeq_job *j;

		while (!ring && !stopping)
			pthread_cond_wait(&more, &lock);
		if (!ring)
			break;
		j = take();
		pthread_mutex_unlock(&lock);
		j->run(j);
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

int placeq_start(unsigned threads, unsigned per_user)
{
	sigset_t all, old;
	int ret = 0;

	per_user_max = per_user;
	tids = calloc(threads, sizeof(*tids));
	if (!tids)
		return -ENOMEM;
	/* signals are for libfuse's loop thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (nthreads = 0; nthreads < threads; nthreads++) {
		ret = -pthread_create(&tids[nthreads], NULL, main_loop, NULL);
		if (ret)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		placeq_stop();
	return ret;
}

int placeq_submit(struct placeq_job *j)
{
	struct uq *q;

	j->next = NULL;
	pthread_mutex_lock(&lock);
	q = find(j->uid);
	if (q && q->n >= per_user_max) {
		pthread_mutex_unlock(&lock);
		return -EAGAIN;
	}
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q) {
			pthread_mutex_unlock(&lock);
			return -ENOMEM;
		}
		q->uid = j->uid;
		/* joins the ring just before the user served next: served last */
		if (!ring) {
			q->next = q;
			ring = q;
		} else {
			struct uq *last = ring;

			while (last->next != ring)
				last = last->next;
			last->next = q;
			q->next = ring;
		}
	}
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->n++;
	pthread_cond_signal(&more);
	pthread_mutex_unlock(&lock);
	return 0;
}

void placeq_stop(void)
{
	pthread_mutex_lock(&lock);
	stopping = 1;
	pthread_cond_broadcast(&more);
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	tids = NULL;
	nthreads = 0;
}
