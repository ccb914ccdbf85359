// SPDX-License-Identifier: MIT
/*
 * workpool.c - queues of struct work, one per owner (the user whose request queued it),
 * served in turn by detached threads started on first use. The threads never end, so a
 * pool is never freed: it lives as long as the process.
 */
#include "io/workpool.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/util.h"

#define WORKPOOL_MAX 16
/*
 * Owners with work queued at once, each in a lane of its own; more than that share lanes
 * (owner modulo WORKPOOL_LANES), FIFO among them. A lane is free again once empty.
 */
#define WORKPOOL_LANES 64

struct lane {
	struct work *head, *tail;
	unsigned owner; /* whose work the lane holds, while it holds any */
};

struct workpool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct lane lane[WORKPOOL_LANES]; /* protected by lock */
	unsigned next;			  /* the lane whose turn is next; protected by lock */
	size_t queued;			  /* protected by lock */
	int threads;			  /* -1: not started yet; protected by lock */
};

static __thread unsigned my_owner;

void workpool_owner(unsigned owner)
{
	my_owner = owner;
}

/* The next work in turn: the first non-empty lane from wp->next on. Caller holds lock. */
static struct work *take(struct workpool *wp)
{
	for (unsigned k = 0; k < WORKPOOL_LANES; k++) {
		unsigned i = (wp->next + k) % WORKPOOL_LANES;
		struct lane *l = &wp->lane[i];
		struct work *w = l->head;

		if (!w)
			continue;
		l->head = w->next;
		if (!l->head)
			l->tail = NULL;
		wp->next = (i + 1) % WORKPOOL_LANES;
		wp->queued--;
		return w;
	}
	return NULL;
}

/* The lane for @owner's work: its own, else a free one, else a shared one. Caller holds lock. */
static struct lane *lane_of(struct workpool *wp, unsigned owner)
{
	struct lane *free_lane = NULL;

	for (unsigned i = 0; i < WORKPOOL_LANES; i++) {
		struct lane *l = &wp->lane[i];

		if (!l->head) {
			if (!free_lane)
				free_lane = l;
		} else if (l->owner == owner) {
			return l;
		}
	}
	if (free_lane) {
		free_lane->owner = owner;
		return free_lane;
	}
	return &wp->lane[owner % WORKPOOL_LANES];
}

struct workpool *workpool_new(void)
{
	struct workpool *wp = calloc(1, sizeof(*wp));

	if (wp) {
		pthread_mutex_init(&wp->lock, NULL);
		pthread_cond_init(&wp->cond, NULL);
		wp->threads = -1;
	}
	return wp;
}

static void *wp_main(void *arg)
{
	struct workpool *wp = arg;
	sigset_t faults;

	/* whatever the starting thread blocked: a fault copying into a client's memory must
	 * reach its handler (place/usermem.c), or it would kill the daemon */
	sigemptyset(&faults);
	sigaddset(&faults, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &faults, NULL);

	for (;;) {
		struct work *w;

		pthread_mutex_lock(&wp->lock);
		while (!wp->queued)
			pthread_cond_wait(&wp->cond, &wp->lock);
		w = take(wp);
		pthread_mutex_unlock(&wp->lock);
		w->fn(w);
	}
	return NULL;
}

int workpool_start(struct workpool *wp)
{
	int n;

	if (!wp)
		return 0;
	pthread_mutex_lock(&wp->lock);
	if (wp->threads < 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		int want = (int)MIN(WORKPOOL_MAX, MAX(1, cpus));
		pthread_attr_t at;
		pthread_t t;

		wp->threads = 0;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		for (int i = 0; i < want; i++)
			if (pthread_create(&t, &at, wp_main, wp) == 0) {
				pthread_setname_np(t, "dmafs-work");
				wp->threads++;
			}
		pthread_attr_destroy(&at);
	}
	n = wp->threads;
	pthread_mutex_unlock(&wp->lock);
	return n;
}

void workpool_queue(struct workpool *wp, struct work *w)
{
	struct lane *l;

	w->next = NULL;
	w->owner = my_owner;
	pthread_mutex_lock(&wp->lock);
	l = lane_of(wp, w->owner);
	if (l->tail)
		l->tail->next = w;
	else
		l->head = w;
	l->tail = w;
	wp->queued++;
	pthread_cond_signal(&wp->cond);
	pthread_mutex_unlock(&wp->lock);
}
