// SPDX-License-Identifier: MIT
/*
 * aio_dio_stale - after an asynchronous O_DIRECT write has completed, a buffered read of
 * the same range returns the new bytes, while other threads keep reading the file through
 * the page cache (what xfstests generic/451 checks).
 *
 * usage: aio_dio_stale FILE SECONDS READERS
 * Writes 640 KiB of 0x55 or 0xaa in turn at offset 0 through io_uring with O_DIRECT;
 * after each completion a fresh buffered descriptor reads the range back. Exit 0: never
 * stale; 1: stale data seen (the first differing offset is printed); 2: setup failed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEN (640u << 10)

static const char *path;
static volatile int stop;

static void *reader(void *arg)
{
	char *buf = malloc(LEN);
	int fd = open(path, O_RDONLY);

	(void)arg;
	while (buf && fd >= 0 && !stop)
		if (pread(fd, buf, LEN, 0) < 0)
			break;
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	pthread_t tid[64];
	char *wbuf, *rbuf;
	double end;
	long rounds = 0;
	int fd, nr, ret = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: aio_dio_stale FILE SECONDS READERS\n");
		return 2;
	}
	path = argv[1];
	end = now() + atof(argv[2]);
	nr = atoi(argv[3]);
	if (nr < 0 || nr > 64)
		nr = 8;
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd < 0 || posix_memalign((void **)&wbuf, 4096, LEN) || !(rbuf = malloc(LEN)) ||
	    io_uring_queue_init(4, &ring, 0)) {
		fprintf(stderr, "aio_dio_stale: setup of %s failed: %s\n", path, strerror(errno));
		return 2;
	}
	memset(wbuf, 0x55, LEN);
	if (pwrite(fd, wbuf, LEN, 0) != LEN) {
		fprintf(stderr, "aio_dio_stale: first write failed: %s\n", strerror(errno));
		return 2;
	}
	for (int i = 0; i < nr; i++)
		if (pthread_create(&tid[i], NULL, reader, NULL))
			nr = i;
	while (!ret && now() < end) {
		int rfd;
		ssize_t got;

		memset(wbuf, rounds & 1 ? 0x55 : 0xaa, LEN);
		sqe = io_uring_get_sqe(&ring);
		io_uring_prep_write(sqe, fd, wbuf, LEN, 0);
		io_uring_submit(&ring);
		if (io_uring_wait_cqe(&ring, &cqe) || cqe->res != (int)LEN) {
			fprintf(stderr, "aio_dio_stale: O_DIRECT write: %s\n",
				cqe && cqe->res < 0 ? strerror(-cqe->res) : "short or failed");
			ret = 2;
			break;
		}
		io_uring_cqe_seen(&ring, cqe);
		rfd = open(path, O_RDONLY);
		got = rfd >= 0 ? pread(rfd, rbuf, LEN, 0) : -1;
		if (rfd >= 0)
			close(rfd);
		if (got != (ssize_t)LEN) {
			fprintf(stderr, "aio_dio_stale: buffered read back: %s\n", strerror(errno));
			ret = 2;
			break;
		}
		for (size_t i = 0; i < LEN; i++)
			if (rbuf[i] != wbuf[i]) {
				printf("stale data after an O_DIRECT write of round %ld: byte %zu reads 0x%02x, written 0x%02x\n",
				       rounds, i, (unsigned char)rbuf[i], (unsigned char)wbuf[i]);
				ret = 1;
				break;
			}
		rounds++;
	}
	stop = 1;
	for (int i = 0; i < nr; i++)
		pthread_join(tid[i], NULL);
	printf("%ld rounds of write and read-back with %d buffered readers\n", rounds, nr);
	return ret;
}
