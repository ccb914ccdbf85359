// SPDX-License-Identifier: MIT
/*
 * inval.c - names dropped from the kernel's dentry cache, by a thread of its own: the
 * kernel takes the directory's lock to drop a name, which a request handler may be
 * holding up (link(2) holds it while it waits for our reply), so handlers only queue.
 */
#include "fuse/ops.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/util.h"

struct inval_item {
	uint64_t dir, ino;
	uint64_t due_ns; /* CLOCK_MONOTONIC */
};

struct inval {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	struct inval_item *v;
	size_t n, cap;
	int stop;
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
	char name[FMT_NAME_MAX + 1];
	int len = fs_name_in(&s->fs, it->dir, it->ino, name, sizeof(name));
	int ret;

	if (len < 0)
		return; /* renamed away or removed: the kernel saw that change itself */
	ret = fuse_lowlevel_notify_inval_entry(s->se, it->dir, name, (size_t)len);
	/* ENOENT: the kernel does not hold that name (not cached, or the mount is going) */
	if (ret && ret != -ENOENT && ret != -ENOTCONN)
		log_debug("dropping name '%s' of inode %llu from the kernel's cache: %s", name,
			  (unsigned long long)it->ino, strerror(-ret));
}

static void *inval_thread(void *arg)
{
	struct inval *q = arg;

	pthread_mutex_lock(&q->lock);
	while (!q->stop) {
		uint64_t now = mono_ns(), next = UINT64_MAX;
		size_t i = 0;

		while (i < q->n) {
			if (q->v[i].due_ns <= now) {
				struct inval_item it = q->v[i];

				q->v[i] = q->v[--q->n];
				pthread_mutex_unlock(&q->lock);
				drop(q->srv, &it);
				pthread_mutex_lock(&q->lock);
				now = mono_ns();
				i = 0; /* the queue may have changed meanwhile */
				next = UINT64_MAX;
				continue;
			}
			if (q->v[i].due_ns < next)
				next = q->v[i].due_ns;
			i++;
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

static int push(struct inval *q, uint64_t dir, uint64_t ino, uint64_t due)
{
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 16;
		struct inval_item *v = realloc(q->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		q->v = v;
		q->cap = cap;
	}
	q->v[q->n++] = (struct inval_item){ dir, ino, due };
	return 0;
}

void inval_name(struct srv *s, uint64_t dir, uint64_t ino)
{
	struct inval *q = s->inval;
	uint64_t now = mono_ns();
	/* a LOOKUP answered before the link, its reply applied late, lives entry_timeout */
	uint64_t later = now + (uint64_t)(s->opts.entry_timeout * 1e9) + 100000000u;

	if (!q || s->opts.entry_timeout <= 0)
		return;
	pthread_mutex_lock(&q->lock);
	if (push(q, dir, ino, now) || push(q, dir, ino, later))
		log_warn("no memory to queue a name of inode %llu for the kernel to drop; its link count may read low until entry_timeout passes",
			 (unsigned long long)ino);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}
