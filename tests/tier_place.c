// SPDX-License-Identifier: MIT
/*
 * Description: helper of tier.sh: place one extent of a file on dmafs into shared host
 * memory and write the placed bytes to stdout, or print the warm tier's counters.
 * Usage: tier_place FILE OFFSET LENGTH [BUFFER_OFFSET]
 *        tier_place --stats PATH   (size held hits misses served filled evicted cap
 *                                   resident shrunk min_free, one line)
 * With $TIER_PLACE_GO set, the placement waits (buffer registered, file open) until that
 * path exists, having created $TIER_PLACE_READY: concurrent placements then start together.
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
	printf("%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)i.tier_size,
	       (unsigned long long)i.tier_held, (unsigned long long)i.tier_hits,
	       (unsigned long long)i.tier_misses, (unsigned long long)i.tier_served,
	       (unsigned long long)i.tier_filled, (unsigned long long)i.tier_evicted,
	       (unsigned long long)i.tier_cap, (unsigned long long)i.tier_resident,
	       (unsigned long long)i.tier_shrunk, (unsigned long long)i.tier_min_free);
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
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: tier_place FILE OFFSET LENGTH [BUFFER_OFFSET] | --stats PATH\n");
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
	e = (struct dmafs_extent){ .file_offset = off, .length = len, .buffer_offset = boff };
	ret = dmafs_place(b, fd, &e, 1, &res);
	if (ret) {
		fprintf(stderr, "tier_place: placing %s: %s\n", argv[1], dmafs_strerror(ret));
		return 1;
	}
	if (res.path != DMAFS_PATH_HOST) {
		fprintf(stderr, "tier_place: %s placed by path %s, not host\n", argv[1],
			dmafs_path_name(res.path));
		return 1;
	}
	if (fwrite((char *)dmafs_buf_ptr(b) + boff, 1, e.length, stdout) != e.length) {
		fprintf(stderr, "tier_place: writing the placed bytes: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	dmafs_session_close(s);
	return 0;
}
