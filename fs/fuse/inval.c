// SPDX-License-Identifier: MIT
/*
 * inval.c - names dropped from the kernel's dentry cache, by a thread of its own: the
 * kernel takes the directory's lock to drop a name, which a request handler may be
 * holding up (link(2) holds it while it waits for our reply), so handlers only queue.
 */
#include "fuse/ops.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/util.h"

/* At most this many names wait: a stream of link(2) calls cannot grow the queue */
#define INVAL_MAX 4096

struct inval_item {
	uint64_t dir;
	uint64_t due_ns; /* CLOCK_MONOTONIC */
	char name[FMT_NAME_MAX + 1];
};

struct inval {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	struct inval_item *v;
	size_t n, cap;
	int stop, full_said;
	pthread_t thread;
	struct srv *srv;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void drop(struct srv *s, const struct inval_item *it)
{
	int ret = fuse_lowlevel_notify_inval_entry(s->se, it->dir, it->name, strlen(it->name));

	/* ENOENT: the kernel does not hold that name (not cached, or the mount is going) */
	if (ret && ret != -ENOENT && ret != -ENOTCONN)
		log_debug("dropping name '%s' in directory %llu from the kernel's cache: %s",
			  it->name, (unsigned long long)it->dir, strerror(-ret));
}

static void *inval_thread(void *arg)
{
	struct inval *q = arg;
	struct inval_item *batch = malloc(INVAL_MAX * sizeof(*batch));

	pthread_mutex_lock(&q->lock);
	while (!q->stop) {
		uint64_t now = mono_ns(), next = UINT64_MAX;
		size_t i = 0, nb = 0;

		/* one pass: the due ones out (a name that is gone drops nothing), the rest kept */
		while (i < q->n) {
			if (q->v[i].due_ns <= now) {
				if (batch)
					batch[nb++] = q->v[i];
				q->v[i] = q->v[--q->n];
				continue;
			}
			next = q->v[i].due_ns < next ? q->v[i].due_ns : next;
			i++;
		}
		if (nb) {
			pthread_mutex_unlock(&q->lock);
			for (size_t k = 0; k < nb; k++)
				drop(q->srv, &batch[k]);
			pthread_mutex_lock(&q->lock);
			continue;
		}
		if (q->stop)
			break;
		if (next == UINT64_MAX) {
			pthread_cond_wait(&q->cond, &q->lock);
		} else {
			struct timespec ts = { .tv_sec = (time_t)(next / 1000000000u),
					       .tv_nsec = (long)(next % 1000000000u) };

			pthread_cond_timedwait(&q->cond, &q->lock, &ts);
		}
	}
	pthread_mutex_unlock(&q->lock);
	free(batch);
	return NULL;
}

int inval_start(struct srv *s)
{
	struct inval *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;
	int ret;

	if (!q)
		return -ENOMEM;
	q->srv = s;
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&q->thread, NULL, inval_thread, q);
	if (ret) {
		pthread_cond_destroy(&q->cond);
		pthread_mutex_destroy(&q->lock);
		free(q);
		return ret;
	}
	s->inval = q;
	return 0;
}

void inval_stop(struct srv *s)
{
	struct inval *q = s->inval;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q->v);
	free(q);
	s->inval = NULL;
}

static int push(struct inval *q, uint64_t dir, const char *name, uint64_t due)
{
	if (q->n == INVAL_MAX)
		return -ENOSPC;
	if (!q->v && !(q->v = malloc(INVAL_MAX * sizeof(*q->v))))
		return -ENOMEM;
	q->v[q->n].dir = dir;
	q->v[q->n].due_ns = due;
	snprintf(q->v[q->n].name, sizeof(q->v[q->n].name), "%s", name);
	q->n++;
	return 0;
}

void inval_name(struct srv *s, uint64_t dir, const char *name)
{
	struct inval *q = s->inval;
	uint64_t now = mono_ns();
	/* a LOOKUP answered before the link, its reply applied late, lives entry_timeout */
	uint64_t later = now + (uint64_t)(s->opts.entry_timeout * 1e9) + 100000000u;

	if (!q || s->opts.entry_timeout <= 0)
		return;
	pthread_mutex_lock(&q->lock);
	if ((push(q, dir, name, now) || push(q, dir, name, later)) && !q->full_said) {
		q->full_said = 1;
		log_warn("more names to drop from the kernel's cache than %d at once (a stream of link(2) calls): some stay cached up to entry_timeout, and link(2) from one of them may fail with ENOENT meanwhile if a stat races an unlink",
			 INVAL_MAX);
	}
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}
