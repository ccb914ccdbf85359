// SPDX-License-Identifier: MIT
/*
 * session-ops.c - what the rest of libdmafs asks of a session (libdmafs-int.h): ioctls on
 * its descriptor, its list of buffers, and the path it reports for a target. Below
 * session.c (which opens and closes sessions) and buf.c (which registers buffers), which
 * both use it.
 */
#include <errno.h>
#include <sys/ioctl.h>

#include "libdmafs-int.h"

int session_ioctl(struct dmafs_session *s, unsigned long cmd, void *arg)
{
	int r;

	do
		r = ioctl(s->fd, cmd, arg);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

void session_link(struct dmafs_session *s, struct dmafs_buf *b)
{
	pthread_mutex_lock(&s->lock);
	b->prev = NULL;
	b->next = s->bufs;
	if (s->bufs)
		s->bufs->prev = b;
	s->bufs = b;
	pthread_mutex_unlock(&s->lock);
}

void session_unlink(struct dmafs_session *s, struct dmafs_buf *b)
{
	pthread_mutex_lock(&s->lock);
	if (b->prev)
		b->prev->next = b->next;
	else
		s->bufs = b->next;
	if (b->next)
		b->next->prev = b->prev;
	b->prev = b->next = NULL;
	pthread_mutex_unlock(&s->lock);
}

int session_target_path(struct dmafs_session *s, int target)
{
	if (!s->on_dmafs)
		return DMAFS_PATH_POSIX;
	for (int i = 0; i < DMAFS_TARGET_MAX; i++)
		if ((int)s->info.t[i].target == target)
			return (int)s->info.t[i].path;
	return DMAFS_PATH_NONE;
}
