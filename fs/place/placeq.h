/* SPDX-License-Identifier: MIT */
/*
 * placeq.h - the placement channel's own threads: registrations and placements run here,
 * never on FUSE worker threads, so no amount of placing keeps POSIX reads and writes of
 * other users waiting. Waiting requests sit in one queue per user, and free threads take
 * from the users in turn: a user with many requests waits behind their own, not others,
 * and one user's requests never hold every thread (PLACEQ_USER_THREADS).
 */
#ifndef DMAFS_PLACEQ_H
#define DMAFS_PLACEQ_H

#include <sys/types.h>

/* A request to run; embed it in the caller's job. run() owns the job from then on. */
struct placeq_job {
	struct placeq_job *next;
	uid_t uid;
	void (*run)(struct placeq_job *j);
};

/* Requests of one user that may wait at a time by default (-EAGAIN beyond; mount option
 * place_queue): a queued placement holds its request (up to 16 KiB) in the daemon. */
#define PLACEQ_PER_USER 256

/*
 * Threads one user's requests may hold at once by default (mount option
 * place_threads_user): all but one of @threads, so that however long one user's requests
 * run, one thread is always there for everyone else's.
 */
#define PLACEQ_USER_THREADS(threads) ((threads) > 1 ? (threads) - 1 : 1)

/* The queues and their threads (placeq.c). */
struct placeq;

/* Start @threads threads in *@out; at most @per_user requests of one user wait at a time,
 * and at most @user_threads of them run at once (0: PLACEQ_USER_THREADS). Returns 0 or
 * -errno; *@out is for placeq_stop() either way. */
int placeq_start(struct placeq **out, unsigned threads, unsigned per_user,
		 unsigned user_threads);
/* Queue @j for its user. Returns 0, or -EAGAIN when that user already has @per_user
 * requests waiting (the job is then still the caller's). */
int placeq_submit(struct placeq *q, struct placeq_job *j);
/* Run what is queued, then stop the threads (unmount; NULL: nothing to do). */
void placeq_stop(struct placeq *q);

#endif
