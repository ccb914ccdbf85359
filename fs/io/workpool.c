// SPDX-License-Identifier: MIT
/*
 * workpool.c - a FIFO of struct work served by detached threads, started on first use and
 * kept for the life of the process.
 */
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

#include "util/util.h"
#include "io/workpool.h"

#define WORKPOOL_MAX 16

static pthread_mutex_t wp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wp_cond = PTHREAD_COND_INITIALIZER;
static struct work *wp_head, *wp_tail;
static int wp_threads = -1; /* -1: not started yet */

static void *wp_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct work *w;

		pthread_mutex_lock(&wp_lock);
		while (!wp_head)
			pthread_cond_wait(&wp_cond, &wp_lock);
		w = wp_head;
		wp_head = w->next;
		if (!wp_head)
			wp_tail = NULL;
		pthread_mutex_unlock(&wp_lock);
		w->fn(w);
	}
	return NULL;
}

int workpool_start(void)
{
	pthread_mutex_lock(&wp_lock);
	if (wp_threads < 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		int want = (int)MIN(WORKPOOL_MAX, MAX(1, cpus));
		pthread_attr_t at;
		pthread_t t;

		wp_threads = 0;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		for (int i = 0; i < want; i++)
			if (pthread_create(&t, &at, wp_main, NULL) == 0)
				wp_threads++;
		pthread_attr_destroy(&at);
	}
	pthread_mutex_unlock(&wp_lock);
	return wp_threads;
}

void workpool_queue(struct work *w)
{
	w->next = NULL;
	pthread_mutex_lock(&wp_lock);
	if (wp_tail)
		wp_tail->next = w;
	else
		wp_head = w;
	wp_tail = w;
	pthread_cond_signal(&wp_cond);
	pthread_mutex_unlock(&wp_lock);
}
