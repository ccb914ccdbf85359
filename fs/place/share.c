// SPDX-License-Identifier: MIT
/* share.c - requests running per user, for the queue depth each may take (see share.h). */
#include "place/share.h"

#include <stdlib.h>

void share_init(struct share *s)
{
	pthread_mutex_init(&s->lock, NULL);
	s->u = NULL;
	s->nusers = s->cap = 0;
}

void share_free(struct share *s)
{
	free(s->u);
	s->u = NULL;
	pthread_mutex_destroy(&s->lock);
}

static struct share_user *find(struct share *s, uid_t uid)
{
	for (unsigned i = 0; i < s->nusers; i++)
		if (s->u[i].uid == uid)
			return &s->u[i];
	return NULL;
}

void share_enter(struct share *s, uid_t uid)
{
	struct share_user *u;

	pthread_mutex_lock(&s->lock);
	u = find(s, uid);
	if (!u && s->nusers == s->cap) {
		unsigned cap = s->cap ? 2 * s->cap : 16;
		struct share_user *nu = realloc(s->u, cap * sizeof(*nu));

		if (nu) {
			s->u = nu;
			s->cap = cap;
		}
	}
	if (!u && s->nusers < s->cap) {
		u = &s->u[s->nusers++];
		*u = (struct share_user){ .uid = uid };
	}
	if (u)
		u->n++;
	pthread_mutex_unlock(&s->lock);
}

void share_leave(struct share *s, uid_t uid)
{
	struct share_user *u;

	pthread_mutex_lock(&s->lock);
	u = find(s, uid);
	if (u && --u->n == 0)
		*u = s->u[--s->nusers];
	pthread_mutex_unlock(&s->lock);
}

unsigned share_parts(struct share *s, uid_t uid)
{
	struct share_user *u;
	unsigned parts;

	pthread_mutex_lock(&s->lock);
	u = find(s, uid);
	parts = (s->nusers ? s->nusers : 1) * (u && u->n ? u->n : 1);
	pthread_mutex_unlock(&s->lock);
	return parts;
}

unsigned share_qd(struct share *s, uid_t uid, unsigned alone)
{
	unsigned q = s ? alone / share_parts(s, uid) : alone;

	return q > QD_SHARE_MIN ? q : QD_SHARE_MIN;
}
