// SPDX-License-Identifier: MIT
/*
 * workpool.c - a FIFO of struct work served by detached threads, started on first use.
 * The threads never end, so a pool is never freed: it lives as long as the process.
 */
#include "io/workpool.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/util.h"

#define WORKPOOL_MAX 16

struct workpool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct work *head, *tail; /* protected by lock */
	int threads;		  /* -1: not started yet; protected by lock */
};

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
		while (!wp->head)
			pthread_cond_wait(&wp->cond, &wp->lock);
		w = wp->head;
		wp->head = w->next;
		if (!wp->head)
			wp->tail = NULL;
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
	w->next = NULL;
	pthread_mutex_lock(&wp->lock);
	if (wp->tail)
		wp->tail->next = w;
	else
		wp->head = w;
	wp->tail = w;
	pthread_cond_signal(&wp->cond);
	pthread_mutex_unlock(&wp->lock);
}
