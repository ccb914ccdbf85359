// SPDX-License-Identifier: MIT
/*
 * batch.c - dmafs_handle_get and dmafs_place_batch: samples of many files in one request
 * (DMAFS_IOC_BATCH, DMAFS_BATCH_MAX at a time), or pread per sample off dmafs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "common.h"
#include "libdmafs-int.h"

/* A posix-fallback session's handle: the descriptor itself (in a), marked in d. The
 * daemon's handles have d 0 (its flags). */
#define HANDLE_POSIX 0x80000000u

_Static_assert(sizeof(struct dmafs_sample) == sizeof(struct dmafs_batch_entry),
	       "a sample is a request entry");
_Static_assert(offsetof(struct dmafs_sample, file_offset) ==
			       offsetof(struct dmafs_batch_entry, file_offset) &&
		       offsetof(struct dmafs_sample, length) == offsetof(struct dmafs_batch_entry, length) &&
		       offsetof(struct dmafs_sample, result) == offsetof(struct dmafs_batch_entry, result),
	       "a sample is a request entry");

int dmafs_handle_get(struct dmafs_session *s, int fd, struct dmafs_handle *h)
{
	struct dmafs_ioc_handle rq = { 0 };
	struct stat st;
	int flags, r;

	if (!s || !h)
		return -EINVAL;
	flags = lib_read_fd(fd, &st);
	if (flags < 0)
		return flags;
	memset(h, 0, sizeof(*h));
	if (!s->on_dmafs) {
		h->a = (uint64_t)fd;
		h->d = HANDLE_POSIX;
		return 0;
	}
	if (st.st_dev != s->dev)
		return -EXDEV;
	do
		r = ioctl(fd, DMAFS_IOC_HANDLE, &rq);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	h->a = rq.ino;
	h->b = rq.mac;
	h->c = rq.gen;
	return 0;
}

/* The request's shape, before any I/O: ranges, total, handle kinds. */
static int check_samples(const struct dmafs_buf *b, const struct dmafs_sample *s, size_t n)
{
	uint64_t total = 0;

	for (size_t i = 0; i < n; i++) {
		const struct dmafs_sample *x = &s[i];

		if (x->file.d & ~HANDLE_POSIX)
			return -EINVAL;
		if (!!(x->file.d & HANDLE_POSIX) == !!b->registered)
			return -EXDEV;
		if (x->buffer_offset > b->size || x->length > b->size - x->buffer_offset ||
		    x->length > b->size - total)
			return -ERANGE;
		total += x->length;
	}
	return 0;
}

static void cancel(struct dmafs_sample *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		s[i].length = 0;
		s[i].result = -ECANCELED;
	}
}

static int batch_daemon(struct dmafs_buf *b, struct dmafs_sample *s, size_t n, uint64_t *bytes,
			int *path)
{
	/* calloc: the kernel copies the whole struct, unused entries included */
	struct dmafs_ioc_batch *q = calloc(1, sizeof(*q));
	int ret = 0, r;

	if (!q)
		return -ENOMEM;
	for (size_t i = 0; i < n; i += DMAFS_BATCH_MAX) {
		uint32_t cnt = n - i < DMAFS_BATCH_MAX ? (uint32_t)(n - i) : DMAFS_BATCH_MAX;

		memset(q, 0, offsetof(struct dmafs_ioc_batch, e));
		q->id = b->id;
		q->count = cnt;
		memcpy(q->e, &s[i], cnt * sizeof(q->e[0]));
		/* a batch writes the same bytes again when repeated: safe to restart */
		do
			r = ioctl(b->s->fd, DMAFS_IOC_BATCH, q);
		while (r < 0 && errno == EINTR);
		if (r < 0) {
			ret = errno == ENOENT ? -EIDRM : -errno; /* the buffer id, as dmafs_place */
			cancel(&s[i], n - i);
			break;
		}
		for (uint32_t k = 0; k < cnt; k++) {
			s[i + k].length = q->e[k].length;
			s[i + k].result = q->e[k].result;
		}
		*bytes += q->bytes;
		if (q->bytes)
			*path = (int)q->path;
	}
	free(q);
	return ret;
}

static void batch_posix(struct dmafs_buf *b, struct dmafs_sample *s, size_t n, uint64_t *bytes)
{
	for (size_t i = 0; i < n; i++) {
		struct dmafs_extent e = { .file_offset = s[i].file_offset, .length = s[i].length,
					  .buffer_offset = s[i].buffer_offset };
		struct stat st;
		int fd = (int)s[i].file.a, flags = lib_read_fd(fd, &st), ret;
		uint64_t len = 0;

		if (flags >= 0 && (uint64_t)st.st_size > s[i].file_offset)
			len = (uint64_t)st.st_size - s[i].file_offset < s[i].length ? (uint64_t)st.st_size - s[i].file_offset : s[i].length;
		/* O_DIRECT descriptors are not the fallback's: offsets need not be aligned */
		ret = flags < 0 ? flags : (flags & O_DIRECT) ? -EINVAL : lib_posix_extent(b, fd, &e, len);
		s[i].length = ret ? 0 : (uint32_t)e.length;
		s[i].result = ret;
		*bytes += s[i].length;
	}
}

int dmafs_place_batch(struct dmafs_buf *b, struct dmafs_sample *s, size_t n,
		      struct dmafs_result *res)
{
	uint64_t t0 = dm_mono_ns(), bytes = 0;
	int path = DMAFS_PATH_NONE, ret;

	if (res)
		memset(res, 0, sizeof(*res));
	if (!b || (n && !s))
		return -EINVAL;
	ret = check_samples(b, s, n);
	if (!ret)
		ret = buf_enter(b);
	if (ret)
		return ret;
	if (b->registered) {
		ret = batch_daemon(b, s, n, &bytes, &path);
	} else {
		batch_posix(b, s, n, &bytes);
		path = DMAFS_PATH_POSIX;
	}
	buf_leave(b, bytes);
	for (size_t i = 0; i < n && !ret; i++)
		ret = s[i].result;
	if (res) {
		res->bytes = bytes;
		res->path = path == DMAFS_PATH_NONE ? b->path_hint : path;
		res->elapsed_ns = dm_mono_ns() - t0;
	}
	return ret;
}
