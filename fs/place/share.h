/* SPDX-License-Identifier: MIT */
/*
 * share.h - the members' queue depth and a GPU's staging slots shared between users: the
 * placements and prefetches running now are counted per user, and each user's requests
 * together keep an equal part of the reads in flight that one request may have alone
 * (QD_PER_MEMBER below) and of the device's staging slots (stage_take). A
 * user placing without pause then slows another user's placement to about its fair share
 * (twice its time alone with two users), not to the share of its many requests.
 */
#ifndef DMAFS_SHARE_H
#define DMAFS_SHARE_H

#include <pthread.h>
#include <sys/types.h>

struct share_user {
	uid_t uid;
	unsigned n; /* requests of this user running */
};

struct share {
	pthread_mutex_t lock;
	/* protected by lock: the users with requests running, u[0 .. nusers) */
	struct share_user *u;
	unsigned nusers, cap;
};

void share_init(struct share *s);
void share_free(struct share *s);
/* A request of @uid starts, or ends. (Out of memory for a new user's entry, the request
 * is not counted: the others' parts are then larger, nothing fails.) */
void share_enter(struct share *s, uid_t uid);
void share_leave(struct share *s, uid_t uid);
/* Into how many equal parts the queue depth is cut for a request of @uid now: the users
 * running requests, times this user's requests running (at least 1). */
unsigned share_parts(struct share *s, uid_t uid);

#define QD_PER_MEMBER 32 /* member reads in flight per member and request alone */
#define QD_MIN 64	 /* ... and at least this many */
#define QD_SHARE_MIN 8	 /* a request's part never goes below this */
/* The member reads one request of @uid may have in flight now: its part of @alone, what
 * it may have alone, as share_parts() cuts it (@s NULL: all of it). */
unsigned share_qd(struct share *s, uid_t uid, unsigned alone);

#endif
