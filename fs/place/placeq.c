// SPDX-License-Identifier: MIT
/* placeq.c - per-user queues and the threads that serve them in turn (see placeq.h). */
#include "place/placeq.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "util/util.h"

/*
 * One user's requests: those waiting, and how many run. Users with requests waiting form
 * the Q->ring, served in turn; a user with requests running but none waiting is on
 * Q->idle only. A user's entry goes when nothing of theirs waits or runs.
 */
struct uq {
	struct uq *next;	/* in the Q->ring, or on Q->idle */
	uid_t uid;
	unsigned n;		/* waiting */
	unsigned running;	/* taken by a thread, not yet done */
	struct placeq_job *head, *tail;
};

struct placeq {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct uq *ring;	/* protected by lock: the user served next */
	struct uq *idle;	/* protected by lock: users with requests running, none waiting */
	unsigned per_user_max;
	unsigned per_user_threads; /* threads one user's requests may hold at once */
	int stopping;		/* protected by lock */
	pthread_t *tids;
	unsigned nthreads;
};

/* The user's entry in the Q->ring (*@idle 0) or on Q->idle (*@idle 1), or NULL. */
static struct uq *find(struct placeq *Q, uid_t uid, int *idle)
{
	struct uq *q = Q->ring;

	*idle = 0;
	if (q)
		do {
			if (q->uid == uid)
				return q;
			q = q->next;
		} while (q != Q->ring);
	*idle = 1;
	for (q = Q->idle; q; q = q->next)
		if (q->uid == uid)
			return q;
	return NULL;
}

/* Put @q at the end of the Q->ring (served after everyone waiting now). Locked. */
static void ring_add(struct placeq *Q, struct uq *q)
{
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

/*
 * Take the next job: the users in turn, skipping those whose requests hold their share
 * of the threads already. Returns NULL when every waiting user is at their share. Caller
 * holds lock.
 */
static struct placeq_job *take(struct placeq *Q)
{
	struct uq *q = Q->ring, *prev;
	struct placeq_job *j;

	if (!q)
		return NULL;
	for (prev = q; prev->next != q;) /* the one before Q->ring */
		prev = prev->next;
	while (q->running >= Q->per_user_threads) {
		prev = q;
		q = q->next;
		if (q == Q->ring)
			return NULL;
	}
	j = q->head;
	q->head = j->next;
	if (!q->head)
		q->tail = NULL;
	q->running++;
	if (--q->n) {
		Q->ring = q->next;
		return j;
	}
	/* nothing of the user's waits: out of the Q->ring, onto Q->idle while it runs */
	Q->ring = prev == q ? NULL : q->next;
	prev->next = q->next;
	q->next = Q->idle;
	Q->idle = q;
	return j;
}

/* A job of @uid is done: its thread is free for others. Caller holds lock. */
static void done(struct placeq *Q, uid_t uid)
{
	int idle;
	struct uq *q = find(Q, uid, &idle), **pp;

	if (!q)
		return;
	q->running--;
	if (!idle || q->running)
		return;
	for (pp = &Q->idle; *pp != q;)
		pp = &(*pp)->next;
	*pp = q->next;
	free(q);
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
		uid_t uid;

		while (!(j = take(Q)) && !(Q->stopping && !Q->ring))
			pthread_cond_wait(&Q->more, &Q->lock);
		if (!j)
			break;
		uid = j->uid;
		pthread_mutex_unlock(&Q->lock);
		j->run(j); /* j is the job's own now: gone */
		pthread_mutex_lock(&Q->lock);
		done(Q, uid);
		/* a thread of this user is free: another thread may take one of theirs */
		pthread_cond_broadcast(&Q->more);
	}
	pthread_mutex_unlock(&Q->lock);
	return NULL;
}

int placeq_start(struct placeq **out, unsigned threads, unsigned per_user,
		 unsigned user_threads)
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
	Q->per_user_threads = user_threads ? user_threads : PLACEQ_USER_THREADS(threads);
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
	int idle;

	j->next = NULL;
	pthread_mutex_lock(&Q->lock);
	if (Q->stopping) {
		pthread_mutex_unlock(&Q->lock);
		return -ESHUTDOWN;
	}
	q = find(Q, j->uid, &idle);
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
		ring_add(Q, q); /* just before the user served next: served last */
	} else if (idle) { /* requests running, none waiting: back into the ring, last */
		struct uq **pp;

		for (pp = &Q->idle; *pp != q;)
			pp = &(*pp)->next;
		*pp = q->next;
		ring_add(Q, q);
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
