// SPDX-License-Identifier: MIT
/* placeq.c - per-user queues and the threads that serve them in turn (see placeq.h). */
#include "place/placeq.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "util/util.h"

/* One user's waiting requests. Users with requests form a Q->ring served in turn. */
struct uq {
	struct uq *next;	/* in the Q->ring */
	uid_t uid;
	unsigned n;
	struct placeq_job *head, *tail;
};

struct placeq {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct uq *ring;	/* protected by lock: the user served next */
	unsigned per_user_max;
	int stopping;		/* protected by lock */
	pthread_t *tids;
	unsigned nthreads;
};

static struct uq *find(struct placeq *Q, uid_t uid)
{
	struct uq *q = Q->ring;

	if (q)
		do {
			if (q->uid == uid)
				return q;
			q = q->next;
		} while (q != Q->ring);
	return NULL;
}

/* Take the next job, the users in turn. Caller holds lock; the Q->ring is not empty. */
static struct placeq_job *take(struct placeq *Q)
{
	struct uq *q = Q->ring, *prev;
	struct placeq_job *j = q->head;

	q->head = j->next;
	if (!q->head)
		q->tail = NULL;
	if (--q->n) {
		Q->ring = q->next;
		return j;
	}
	/* the user has nothing left: out of the Q->ring */
	for (prev = q; prev->next != q;)
		prev = prev->next;
	Q->ring = prev == q ? NULL : q->next;
	prev->next = q->next;
	free(q);
	return j;
}

static void *main_loop(void *arg)
{
	struct placeq *Q = arg;
	sigset_t faults;

	/* Started with every signal blocked, but a fault must reach its handler: a SIGBUS
	 * from a client's memory (usermem.h) that is blocked kills the whole daemon. */
	sigemptyset(&faults);
	sigaddset(&faults, SIGBUS);
	sigaddset(&faults, SIGSEGV);
	sigaddset(&faults, SIGFPE);
	sigaddset(&faults, SIGILL);
	pthread_sigmask(SIG_UNBLOCK, &faults, NULL);
	pthread_mutex_lock(&Q->lock);
	for (;;) {
		struct placeq_job *j;

		while (!Q->ring && !Q->stopping)
			pthread_cond_wait(&Q->more, &Q->lock);
		if (!Q->ring)
			break;
		j = take(Q);
		pthread_mutex_unlock(&Q->lock);
		j->run(j);
		pthread_mutex_lock(&Q->lock);
	}
	pthread_mutex_unlock(&Q->lock);
	return NULL;
}

int placeq_start(struct placeq **out, unsigned threads, unsigned per_user)
{
	struct placeq *Q = calloc(1, sizeof(*Q));
	sigset_t all, old;
	int ret = 0;

	*out = Q;
	if (!Q || !(Q->tids = calloc(threads, sizeof(*Q->tids))))
		return -ENOMEM;
	pthread_mutex_init(&Q->lock, NULL);
	pthread_cond_init(&Q->more, NULL);
	Q->per_user_max = per_user;
	/* signals are for libfuse's loop thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (Q->nthreads = 0; Q->nthreads < threads; Q->nthreads++) {
		ret = -pthread_create(&Q->tids[Q->nthreads], NULL, main_loop, Q);
		if (ret)
			break;
		pthread_setname_np(Q->tids[Q->nthreads], "dmafs-place"); /* for top -H */
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret; /* on failure, placeq_stop() stops those that started */
}

int placeq_submit(struct placeq *Q, struct placeq_job *j)
{
	struct uq *q;

	j->next = NULL;
	pthread_mutex_lock(&Q->lock);
	if (Q->stopping) {
		pthread_mutex_unlock(&Q->lock);
		return -ESHUTDOWN;
	}
	q = find(Q, j->uid);
	if (q && q->n >= Q->per_user_max) {
		pthread_mutex_unlock(&Q->lock);
		return -EAGAIN;
	}
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q) {
			pthread_mutex_unlock(&Q->lock);
			return -ENOMEM;
		}
		q->uid = j->uid;
		/* joins the Q->ring just before the user served next: served last */
		if (!Q->ring) {
			q->next = q;
			Q->ring = q;
		} else {
			struct uq *last = Q->ring;

			while (last->next != Q->ring)
				last = last->next;
			last->next = q;
			q->next = Q->ring;
		}
	}
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->n++;
	pthread_cond_signal(&Q->more);
	pthread_mutex_unlock(&Q->lock);
	return 0;
}

void placeq_stop(struct placeq *Q)
{
	if (!Q || !Q->tids)
		return;
	pthread_mutex_lock(&Q->lock);
	Q->stopping = 1;
	pthread_cond_broadcast(&Q->more);
	pthread_mutex_unlock(&Q->lock);
	for (unsigned i = 0; i < Q->nthreads; i++)
		pthread_join(Q->tids[i], NULL);
	free(Q->tids);
	Q->tids = NULL;
	Q->nthreads = 0;
	/* Q itself stays: a request still arriving is refused (stopping) rather than lost */
}
