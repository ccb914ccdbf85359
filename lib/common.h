/* SPDX-License-Identifier: MIT */
/*
 * common.h - the one copy of the small helpers that the daemon, libdmafs and the tools
 * all need: a clock for durations, array growth, a whole pread, and the populate fan-out.
 * Internal: not installed.
 */
#ifndef DMAFS_COMMON_H
#define DMAFS_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Monotonic nanoseconds: for durations and deadlines, never for timestamps. */
static inline uint64_t dm_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall-clock nanoseconds since the epoch: for timestamps (mtime, ctime), not durations. */
static inline int64_t dm_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/*
 * Make room in array *@pp (elements of @elsize bytes, *@cap of them) for @need elements:
 * doubling, from @first at least. Returns 0, or -ENOMEM with the array unchanged.
 */
static inline int dm_grow(void *pp, size_t *cap, size_t need, size_t elsize, size_t first)
{
	size_t n = *cap ? *cap : first;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2 / elsize)
			return -ENOMEM;
		n *= 2;
	}
	if (n > SIZE_MAX / elsize)
		return -ENOMEM;
	p = realloc(*(void **)pp, n * elsize);
	if (!p)
		return -ENOMEM;
	*(void **)pp = p;
	*cap = n;
	return 0;
}

/*
 * pread(2) until @len bytes are read, the file ends or an error stops it, retrying EINTR.
 * Returns the count read: @len, or less at end of file or when an error came after some
 * bytes (the next call, at the offset reached, then returns that error: a caller learns
 * exactly where a read failed); or -errno when nothing could be read.
 */
static inline ssize_t dm_pread_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return done ? (ssize_t)done : -errno;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/*
 * Fault in [@p, @p + @len) with madvise(@advice) (MADV_POPULATE_READ or _WRITE) in up to
 * 4 threads of at least 64 MiB each, pieces aligned to @unit; the helper threads block all
 * signals. Returns 0 or the first piece's -errno (lib/populate.c).
 */
int dm_populate(void *p, size_t len, int advice, size_t unit);

#endif
