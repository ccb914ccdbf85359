// SPDX-License-Identifier: MIT
/* fillq.c - fills of the warm tier left for when placements are idle (see fillq.h). */
#include "place/fillq.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "engine/engine.h"
#include "engine/tier.h"
#include "io/workpool.h"
#include "place/pipeline.h"
#include "util/util.h"

#define FILLQ_WINDOW (64ull * TIER_CHUNK) /* filled between two looks at the placements */
#define FILLQ_MAX 4096			  /* ranges waiting at most */

struct range {
	struct range *next;
	uint64_t ino;	/* the file: inode number and generation (fs_hold) */
	uint32_t gen;
	uint64_t from, to;
	unsigned uid;
};

struct fillq {
	struct fs *fs;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC: work queued, placements idle, or stop */
	struct range *head, *tail; /* lock */
	unsigned n;		   /* lock */
	uint64_t bytes, cap;	   /* bytes the ranges waiting span, at most cap (the
				    * tier's size); lock */
	unsigned busy;		   /* placements running; lock */
	uint64_t last_ns;	   /* when the last one ended; lock */
	int stop;		   /* lock */
	uint64_t filled, dropped;  /* lock */
};

static void timed_wait(struct fillq *q, uint64_t until_ns)
{
	struct timespec ts = { (time_t)(until_ns / 1000000000u), (long)(until_ns % 1000000000u) };

	pthread_cond_timedwait(&q->cond, &q->lock, &ts);
}

/*
 * Under lock: wait until a range waits and no placement has run for FILLQ_IDLE_MS, then
 * take the next window of the first range into *@r, [*@from, *@to); the range leaves the
 * queue with its last window (*@last set: the caller lets it go). Returns 0, or -1 to stop.
 */
static int next_window(struct fillq *q, struct range **r, uint64_t *from, uint64_t *to, int *last)
{
	for (;;) {
		uint64_t now = dm_mono_ns(), idle_at = q->last_ns + FILLQ_IDLE_MS * 1000000ull;

		if (q->stop)
			return -1;
		if (!q->head || q->busy)
			pthread_cond_wait(&q->cond, &q->lock);
		else if (now < idle_at)
			timed_wait(q, idle_at);
		else
			break;
	}
	*r = q->head;
	*from = (*r)->from;
	*to = MIN((*r)->to, *from + FILLQ_WINDOW);
	(*r)->from = *to;
	q->bytes -= *to - *from;
	*last = (*r)->from >= (*r)->to;
	if (*last) {
		q->head = (*r)->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
	}
	return 0;
}

/*
 * Read the chunks of @r's file in [@from, @to) into the tier, as a prefetch does, holding
 * the file meanwhile. Returns 0, -ENOENT (the file is gone or removed: nothing read) or
 * -errno.
 */
static int fill_window(struct fillq *q, const struct range *r, uint64_t from, uint64_t to,
		       uint64_t *read)
{
	struct inode *ino = fs_hold(q->fs, r->ino, r->gen);
	struct pipe_fill f = { 0 };
	int ret;

	*read = 0;
	if (!ino)
		return -ENOENT;
	ret = pipeline_prefetch_window(q->fs, ino, &from, to, to - from, &f, NULL);
	fs_unhold(q->fs, r->ino);
	*read = f.read;
	return ret < 0 ? ret : 0;
}

static void *filler(void *arg)
{
	struct fillq *q = arg;

	pthread_setname_np(pthread_self(), "dmafs-fillq");
	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct range *r;
		uint64_t from, to, read = 0;
		int last, ret;

		if (next_window(q, &r, &from, &to, &last))
			break;
		pthread_mutex_unlock(&q->lock);
		workpool_owner(r->uid); /* its checksum checks take that user's turns */
		ret = fill_window(q, r, from, to, &read);
		if (ret && ret != -ENOENT)
			log_debug("tier_fill=idle: inode %llu, bytes %llu to %llu: %s; the rest of it is not filled",
				  (unsigned long long)r->ino, (unsigned long long)from,
				  (unsigned long long)to, strerror(-ret));
		pthread_mutex_lock(&q->lock);
		q->filled += read;
		if (ret && !last) { /* gone, damaged or unreadable: give it up */
			q->bytes -= r->to - r->from;
			r->to = r->from; /* its next window ends it, reading nothing */
		}
		if (last)
			free(r);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int fillq_start(struct fillq **out, struct fs *fs)
{
	struct fillq *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;
	struct tier_stats ts;
	int ret;

	*out = NULL;
	if (!q)
		return -ENOMEM;
	q->fs = fs;
	tier_stats(fs->tier, &ts);
	q->cap = ts.size;
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = pthread_create(&q->thread, NULL, filler, q);
	if (ret) {
		pthread_cond_destroy(&q->cond);
		pthread_mutex_destroy(&q->lock);
		free(q);
		return -ret;
	}
	*out = q;
	return 0;
}

void fillq_stop(struct fillq *q)
{
	struct range *r;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	while ((r = q->head)) {
		q->head = r->next;
		free(r);
	}
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

void fillq_busy(struct fillq *q, int delta)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->busy += (unsigned)delta;
	if (delta < 0) {
		q->last_ns = dm_mono_ns();
		if (!q->busy)
			pthread_cond_signal(&q->cond);
	}
	pthread_mutex_unlock(&q->lock);
}

void fillq_add(struct fillq *q, const struct inode *ino, uint64_t from, uint64_t to,
	       unsigned uid)
{
	struct range *r;
	uint64_t room;

	if (!q || from >= to)
		return;
	pthread_mutex_lock(&q->lock);
	/*
	 * What waits never spans more than the tier holds: of a file larger than the tier
	 * the fill would read the rest only to evict it again (each load of it would read
	 * it twice); the range's start is kept and the rest given up.
	 */
	room = q->cap > q->bytes ? (q->cap - q->bytes) / TIER_CHUNK * TIER_CHUNK : 0;
	if (to - from > room) {
		q->dropped++;
		to = from + room;
		if (from >= to) {
			pthread_mutex_unlock(&q->lock);
			return;
		}
	}
	r = q->tail;
	if (!q->stop && r && r->ino == ino->ino && r->gen == ino->a.generation && from <= r->to &&
	    to >= r->from) {
		/* the union grows by no more than [from, to) */
		q->bytes += (MAX(r->to, to) - MIN(r->from, from)) - (r->to - r->from);
		r->from = MIN(r->from, from);
		r->to = MAX(r->to, to);
		pthread_mutex_unlock(&q->lock);
		return;
	}
	pthread_mutex_unlock(&q->lock);
	r = malloc(sizeof(*r));
	if (!r) {
		pthread_mutex_lock(&q->lock);
		q->dropped++;
		pthread_mutex_unlock(&q->lock);
		return;
	}
	*r = (struct range){ .ino = ino->ino, .gen = ino->a.generation, .from = from, .to = to,
			     .uid = uid };
	pthread_mutex_lock(&q->lock);
	if (q->stop || q->n >= FILLQ_MAX || q->cap - q->bytes < to - from) {
		q->dropped++; /* or the room went to another range while this one was made */
		pthread_mutex_unlock(&q->lock);
		free(r);
		return;
	}
	q->bytes += to - from;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	q->n++;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void fillq_stats(struct fillq *q, unsigned *waiting, uint64_t *filled, uint64_t *dropped)
{
	*waiting = 0;
	*filled = *dropped = 0;
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	*waiting = q->n;
	*filled = q->filled;
	*dropped = q->dropped;
	pthread_mutex_unlock(&q->lock);
}
