// SPDX-License-Identifier: MIT
/*
 * Description: helper of tier.sh and tier_prefetch.sh: place one extent of a file on dmafs
 * into shared host memory and write the placed bytes to stdout, print the warm tier's
 * counters, or prefetch a range of a file into the tier.
 * Usage: tier_place FILE OFFSET LENGTH [BUFFER_OFFSET]
 *        tier_place --stats PATH   (size held hits misses served filled evicted cap
 *                                   resident shrunk min_free pinned, one line)
 *        tier_place --prefetch FILE OFFSET LENGTH   (dmafs_prefetch: "read held", one line)
 *        tier_place --prefetch-ioctl r|w|rw FILE OFFSET LENGTH
 *                  (DMAFS_IOC_PREFETCH itself on FILE opened read-only, write-only or
 *                  read-write: "read held skipped", or the errno's name on stderr)
 * LENGTH "eof" is DMAFS_TO_EOF.
 * With $TIER_PLACE_GO set, the placement waits (buffer registered, file open) until that
 * path exists, having created $TIER_PLACE_READY: concurrent placements then start together.
 * With $TIER_PLACE_TIER_BYTES set, a placement writes dmafs_buf_tier_bytes() (the bytes
 * placed from the warm tier) to that file, one line.
 * With $TIER_PLACE_WHILE set, the placement is made again and again, back to back, while
 * that path exists (the last one's bytes are written).
 * Exit 0, or 1 with the reason on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "dmafs-proto.h"
#include "dmafs.h"

static int stats(const char *path)
{
	struct dmafs_ioc_info i;
	int fd = open(path, O_RDONLY);

	memset(&i, 0, sizeof(i));
	if (fd < 0 || ioctl(fd, DMAFS_IOC_INFO, &i)) {
		fprintf(stderr, "tier_place: DMAFS_IOC_INFO on %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	printf("%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)i.tier_size,
	       (unsigned long long)i.tier_held, (unsigned long long)i.tier_hits,
	       (unsigned long long)i.tier_misses, (unsigned long long)i.tier_served,
	       (unsigned long long)i.tier_filled, (unsigned long long)i.tier_evicted,
	       (unsigned long long)i.tier_cap, (unsigned long long)i.tier_resident,
	       (unsigned long long)i.tier_shrunk, (unsigned long long)i.tier_min_free,
	       (unsigned long long)i.tier_pinned);
	return 0;
}

static uint64_t length_arg(const char *s)
{
	return strcmp(s, "eof") ? strtoull(s, NULL, 0) : DMAFS_TO_EOF;
}

/* dmafs_prefetch() on FILE opened read-only */
static int prefetch(const char *path, uint64_t off, uint64_t len)
{
	struct dmafs_result res;
	uint64_t held;
	int fd = open(path, O_RDONLY), ret;

	if (fd < 0) {
		fprintf(stderr, "tier_place: %s: %s\n", path, strerror(errno));
		return 1;
	}
	ret = dmafs_prefetch(fd, off, len, &res, &held);
	close(fd);
	if (ret) {
		fprintf(stderr, "tier_place: prefetching %s: %s (%s)\n", path, dmafs_strerror(ret),
			strerrorname_np(-ret));
		return 1;
	}
	if (res.path != DMAFS_PATH_HOST) {
		fprintf(stderr, "tier_place: prefetch of %s reports path %s, not host\n", path,
			dmafs_path_name(res.path));
		return 1;
	}
	printf("%llu %llu\n", (unsigned long long)res.bytes, (unsigned long long)held);
	return 0;
}

/* DMAFS_IOC_PREFETCH on FILE opened @mode, past the library's own checks */
static int prefetch_ioctl(const char *mode, const char *path, uint64_t off, uint64_t len)
{
	struct dmafs_ioc_prefetch rq = { .offset = off, .length = len };
	int flags = !strcmp(mode, "w") ? O_WRONLY : !strcmp(mode, "rw") ? O_RDWR : O_RDONLY;
	int fd = open(path, flags);

	if (fd < 0) {
		fprintf(stderr, "tier_place: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (ioctl(fd, DMAFS_IOC_PREFETCH, &rq)) {
		fprintf(stderr, "tier_place: DMAFS_IOC_PREFETCH on %s: %s\n", path, strerrorname_np(errno));
		return 1;
	}
	close(fd);
	printf("%llu %llu %llu\n", (unsigned long long)rq.bytes_read,
	       (unsigned long long)rq.bytes_held, (unsigned long long)rq.bytes_skipped);
	return 0;
}

int main(int argc, char **argv)
{
	struct dmafs_session *s;
	struct dmafs_buf *b;
	struct dmafs_extent e;
	struct dmafs_result res;
	uint64_t off, len, boff;
	int fd, ret;

	if (argc == 3 && !strcmp(argv[1], "--stats"))
		return stats(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "--prefetch"))
		return prefetch(argv[2], strtoull(argv[3], NULL, 0), length_arg(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "--prefetch-ioctl"))
		return prefetch_ioctl(argv[2], argv[3], strtoull(argv[4], NULL, 0), length_arg(argv[5]));
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: tier_place FILE OFFSET LENGTH [BUFFER_OFFSET] | --stats PATH |\n"
				"       --prefetch FILE OFFSET LENGTH | --prefetch-ioctl r|w|rw FILE OFFSET LENGTH\n");
		return 1;
	}
	off = strtoull(argv[2], NULL, 0);
	len = strtoull(argv[3], NULL, 0);
	boff = argc == 5 ? strtoull(argv[4], NULL, 0) : 0;
	ret = dmafs_session_open(argv[1], &s);
	if (!ret)
		ret = dmafs_buf_alloc_host(s, boff + len ? boff + len : 1, &b);
	if (ret) {
		fprintf(stderr, "tier_place: %s: %s\n", argv[1], dmafs_strerror(ret));
		return 1;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "tier_place: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (getenv("TIER_PLACE_GO")) {
		const char *ready = getenv("TIER_PLACE_READY");

		if (ready)
			close(open(ready, O_WRONLY | O_CREAT, 0600));
		while (access(getenv("TIER_PLACE_GO"), F_OK))
			usleep(200);
	}
	do {
		e = (struct dmafs_extent){ .file_offset = off, .length = len, .buffer_offset = boff };
		ret = dmafs_place(b, fd, &e, 1, &res);
	} while (!ret && getenv("TIER_PLACE_WHILE") && !access(getenv("TIER_PLACE_WHILE"), F_OK));
	if (ret) {
		fprintf(stderr, "tier_place: placing %s: %s\n", argv[1], dmafs_strerror(ret));
		return 1;
	}
	if (res.path != DMAFS_PATH_HOST) {
		fprintf(stderr, "tier_place: %s placed by path %s, not host\n", argv[1],
			dmafs_path_name(res.path));
		return 1;
	}
	if (getenv("TIER_PLACE_TIER_BYTES")) {
		FILE *tf = fopen(getenv("TIER_PLACE_TIER_BYTES"), "w");

		if (!tf || fprintf(tf, "%llu\n", (unsigned long long)dmafs_buf_tier_bytes(b)) < 0 ||
		    fclose(tf)) {
			fprintf(stderr, "tier_place: writing $TIER_PLACE_TIER_BYTES: %s\n", strerror(errno));
			return 1;
		}
	}
	if (fwrite((char *)dmafs_buf_ptr(b) + boff, 1, e.length, stdout) != e.length) {
		fprintf(stderr, "tier_place: writing the placed bytes: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	dmafs_session_close(s);
	return 0;
}
