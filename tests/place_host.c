// SPDX-License-Identifier: MIT
/*
 * Description: placement channel, host target, through a real mount: byte-exact placement
 * across stripe boundaries, unaligned offsets and lengths, EOF, many entries, concurrent
 * clients, a client killed mid-placement, foreign and dead buffer ids, out-of-range and
 * malformed requests, foreign shared memory, and random request fuzzing.
 * Usage: place_host FILE_ON_DMAFS (the file holds random data; at least 8 MiB).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dmafs-proto.h"
#include "t_unit.h"

static const char *path;
static char *ref;
static uint64_t fsize;

struct hbuf {
	int mfd;
	char *p;
	size_t size;
	uint64_t id;
};

static int host_register(int fd, struct hbuf *b, size_t size)
{
	struct dmafs_ioc_register r;

	memset(&r, 0, sizeof(r));
	b->size = size;
	b->mfd = memfd_create("dmafs-test", MFD_CLOEXEC);
	if (b->mfd < 0 || ftruncate(b->mfd, size))
		return -errno;
	b->p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->mfd, 0);
	if (b->p == MAP_FAILED)
		return -errno;
	memset(b->p, 0, size); /* the daemon refuses holes: the memory must be ours already */
	r.target = DMAFS_TARGET_HOST;
	r.size = size;
	r.fd = b->mfd;
	if (ioctl(fd, DMAFS_IOC_REGISTER, &r))
		return -errno;
	b->id = r.id;
	return 0;
}

static struct dmafs_ioc_place req;

static int place(int fd, uint64_t id, uint32_t n)
{
	req.id = id;
	req.count = n;
	req.flags = 0;
	return ioctl(fd, DMAFS_IOC_PLACE, &req) ? -errno : 0;
}

static void test_exact(int fd)
{
	struct hbuf b;
	unsigned long long seed = 42;

	T_EQ(host_register(fd, &b, fsize + (1 << 20)), 0);
	/* the whole file in one entry, at an aligned and at an unaligned buffer offset */
	req.e[0] = (struct dmafs_place_entry){ 0, DMAFS_TO_EOF, 0 };
	T_EQ(place(fd, b.id, 1), 0);
	T_EQ(req.bytes, fsize);
	T_EQ(req.path, DMAFS_PATH_HOST);
	T_CHECK(!memcmp(b.p, ref, fsize), "whole file differs");
	memset(b.p, 0, b.size);
	req.e[0] = (struct dmafs_place_entry){ 0, DMAFS_TO_EOF, 1001 };
	T_EQ(place(fd, b.id, 1), 0);
	T_CHECK(!memcmp(b.p + 1001, ref, fsize), "whole file at odd offset differs");
	/* many random unaligned entries per call, across stripe boundaries, some past EOF */
	for (int round = 0; round < 20; round++) {
		uint32_t n = 1 + t_rand(&seed) % DMAFS_PLACE_MAX;
		uint64_t dst = 0;

		memset(b.p, 0xee, b.size);
		for (uint32_t i = 0; i < n; i++) {
			uint64_t off = t_rand(&seed) % (fsize + 5000);
			uint64_t len = 1 + t_rand(&seed) % 40000;

			if (dst + len > b.size)
				len = 1;
			req.e[i] = (struct dmafs_place_entry){ off, len, dst };
			dst += len;
		}
		struct dmafs_place_entry want[DMAFS_PLACE_MAX];
		memcpy(want, req.e, n * sizeof(want[0]));
		T_EQ(place(fd, b.id, n), 0);
		uint64_t total = 0;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t exp = want[i].file_offset >= fsize ? 0 :
				       (want[i].length < fsize - want[i].file_offset ? want[i].length
										   : fsize - want[i].file_offset);
			T_EQ(req.e[i].length, exp);
			T_CHECK(!memcmp(b.p + want[i].buffer_offset, ref + want[i].file_offset, exp),
				"round %d entry %u (file %llu len %llu) differs", round, i,
				(unsigned long long)want[i].file_offset, (unsigned long long)exp);
			/* bytes between placed and asked stay untouched */
			if (exp < want[i].length && want[i].buffer_offset + exp < b.size)
				T_CHECK((unsigned char)b.p[want[i].buffer_offset + exp] == 0xee ||
						(i + 1 < n && want[i + 1].buffer_offset == want[i].buffer_offset + exp),
					"byte past a short placement was written");
			total += exp;
		}
		T_EQ(req.bytes, total);
	}
	munmap(b.p, b.size);
	close(b.mfd);
}

static void test_refusals(int fd)
{
	struct hbuf b;
	struct dmafs_ioc_unregister u;
	int wfd;

	T_EQ(host_register(fd, &b, 1 << 20), 0);
	req.e[0] = (struct dmafs_place_entry){ 0, (1 << 20) + 1, 0 };
	T_EQ(place(fd, b.id, 1), -ERANGE);
	req.e[0] = (struct dmafs_place_entry){ 0, 10, (1 << 20) - 5 };
	T_EQ(place(fd, b.id, 1), -ERANGE);
	req.e[0] = (struct dmafs_place_entry){ 0, 10, UINT64_MAX - 3 };
	T_EQ(place(fd, b.id, 1), -ERANGE);
	req.e[0] = (struct dmafs_place_entry){ UINT64_MAX - 3, 100, 0 }; /* past EOF: 0 bytes */
	T_EQ(place(fd, b.id, 1), 0);
	T_EQ(req.e[0].length, 0);
	T_EQ(place(fd, b.id, DMAFS_PLACE_MAX + 1), -EINVAL);
	/* all entries together place at most the buffer: each fits, the two do not */
	T_CHECK(fsize > (1 << 19), "test file of more than 512 KiB");
	req.e[0] = (struct dmafs_place_entry){ 0, (1 << 19) + 1, 0 };
	req.e[1] = (struct dmafs_place_entry){ 0, (1 << 19) + 1, (1 << 19) - 1 };
	T_EQ(place(fd, b.id, 2), -ERANGE);
	req.e[0] = (struct dmafs_place_entry){ 0, 1 << 19, 0 };
	req.e[1] = (struct dmafs_place_entry){ 0, 1 << 19, 1 << 19 };
	T_EQ(place(fd, b.id, 2), 0);
	T_EQ(req.bytes, 1 << 20);
	T_CHECK(!memcmp(b.p, ref, 1 << 19) && !memcmp(b.p + (1 << 19), ref, 1 << 19),
		"two entries filling the buffer exactly");
	req.e[0] = (struct dmafs_place_entry){ 0, 10, 0 };
	req.flags = 1;
	req.id = b.id;
	req.count = 1;
	T_CHECK(ioctl(fd, DMAFS_IOC_PLACE, &req) < 0 && errno == EINVAL, "flags accepted");
	T_EQ(place(fd, b.id ^ 0x5555, 1), -ENOENT);
	/* a write-only descriptor may not be placed from */
	wfd = open(path, O_WRONLY);
	T_CHECK(wfd >= 0, "open O_WRONLY");
	T_EQ(place(wfd, b.id, 1), -EBADF);
	close(wfd);
	/* an unknown command with another payload size */
	{
		char junk[100] = { 0 };

		T_CHECK(ioctl(fd, _IOWR(DMAFS_IOC_MAGIC, 4, char[100]), junk) < 0, "odd-size ioctl accepted");
		T_CHECK(ioctl(fd, _IOWR(DMAFS_IOC_MAGIC, 99, char[8]), junk) < 0 && errno == ENOTTY, "unknown ioctl");
	}
	/* a buffer that is not shared memory: a regular file on another filesystem */
	{
		char tmpl[] = "/tmp/dmafs-place-XXXXXX";
		int tf = mkstemp(tmpl);
		struct dmafs_ioc_register r = { .target = DMAFS_TARGET_HOST, .size = 4096, .fd = tf };

		unlink(tmpl);
		T_CHECK(ftruncate(tf, 4096) == 0, "ftruncate");
		T_CHECK(ioctl(fd, DMAFS_IOC_REGISTER, &r) < 0 && errno == EINVAL, "non-shm buffer accepted");
		close(tf);
		r.fd = 9999;
		T_CHECK(ioctl(fd, DMAFS_IOC_REGISTER, &r) < 0 && errno == EBADF, "bad fd accepted");
		r.fd = b.mfd;
		r.size = 2 << 20;
		T_CHECK(ioctl(fd, DMAFS_IOC_REGISTER, &r) < 0 && errno == ERANGE, "oversized buffer accepted");
		r.size = 0;
		T_CHECK(ioctl(fd, DMAFS_IOC_REGISTER, &r) < 0 && errno == EINVAL, "empty buffer accepted");
		r.size = 4096;
		r.target = 77;
		T_CHECK(ioctl(fd, DMAFS_IOC_REGISTER, &r) < 0 && errno == EINVAL, "bad target accepted");
	}
	u.id = b.id;
	T_CHECK(ioctl(fd, DMAFS_IOC_UNREGISTER, &u) == 0, "unregister");
	T_EQ(place(fd, b.id, 1), -ENOENT);
	T_CHECK(ioctl(fd, DMAFS_IOC_UNREGISTER, &u) < 0 && errno == ENOENT, "double unregister");
	munmap(b.p, b.size);
	close(b.mfd);
}

/* Another process may not use, or unregister, our buffer; shared memory of another uid is refused. */
static void test_foreign(int fd)
{
	struct hbuf b;
	int st;
	pid_t pid;

	T_EQ(host_register(fd, &b, 1 << 20), 0);
	pid = fork();
	if (pid == 0) {
		struct dmafs_ioc_unregister u = { b.id };
		int ok = 1;

		req.e[0] = (struct dmafs_place_entry){ 0, 10, 0 };
		ok &= place(fd, b.id, 1) == -EPERM;
		ok &= ioctl(fd, DMAFS_IOC_UNREGISTER, &u) < 0 && errno == EPERM;
		/* root's memfd registered by an unprivileged process */
		if (geteuid() == 0 && setgid(65534) == 0 && setuid(65534) == 0) {
			struct dmafs_ioc_register r = { .target = DMAFS_TARGET_HOST, .size = 4096, .fd = b.mfd };
			int fd2 = open(path, O_RDONLY);

			if (fd2 >= 0)
				ok &= ioctl(fd2, DMAFS_IOC_REGISTER, &r) < 0 && errno == EACCES;
		}
		_exit(ok ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "foreign process could use our buffer");
	req.e[0] = (struct dmafs_place_entry){ 0, 10, 0 };
	T_EQ(place(fd, b.id, 1), 0); /* still ours */
	munmap(b.p, b.size);
	close(b.mfd);
}

/* Registrations die with their process, also when it is killed during a placement. */
static void test_lifetime(int fd)
{
	int pfd[2], st;
	uint64_t id = 0;
	pid_t pid;

	T_CHECK(pipe(pfd) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		struct hbuf b;

		if (host_register(fd, &b, fsize))
			_exit(1);
		if (write(pfd[1], &b.id, sizeof(b.id)) != sizeof(b.id))
			_exit(1);
		for (;;) { /* place until killed */
			req.e[0] = (struct dmafs_place_entry){ 0, DMAFS_TO_EOF, 0 };
			place(fd, b.id, 1);
		}
	}
	T_CHECK(read(pfd[0], &id, sizeof(id)) == sizeof(id), "child id");
	req.e[0] = (struct dmafs_place_entry){ 0, 10, 0 };
	T_EQ(place(fd, id, 1), -EPERM); /* alive and not ours */
	usleep(300000);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	/* the daemon reaps dead clients' registrations within a second: poll, 10 s at most */
	{
		struct timespec t0, t;
		int ret;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			ret = place(fd, id, 1);
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (ret != -EPERM || t.tv_sec - t0.tv_sec >= 10)
				break;
			usleep(20000);
		}
		T_EQ(ret, -ENOENT);
		if (ret == -ENOENT)
			fprintf(stderr, "place_host: registration of the killed client gone after %.2f s\n",
				(double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
	}
	close(pfd[0]);
	close(pfd[1]);
}

/* Several processes place concurrently into their own buffers. */
static void test_concurrent(int fd)
{
	pid_t pids[6];
	int bad = 0;

	for (int k = 0; k < 6; k++) {
		pids[k] = fork();
		if (pids[k] == 0) {
			struct hbuf b;
			unsigned long long seed = 1000 + k;
			int f = open(path, O_RDONLY);

			if (f < 0 || host_register(f, &b, fsize))
				_exit(1);
			for (int round = 0; round < 10; round++) {
				uint64_t off = t_rand(&seed) % fsize, len = fsize - off;

				req.e[0] = (struct dmafs_place_entry){ off, len, 0 };
				if (place(f, b.id, 1) || memcmp(b.p, ref + off, len))
					_exit(2);
			}
			_exit(0);
		}
	}
	for (int k = 0; k < 6; k++) {
		int st;

		waitpid(pids[k], &st, 0);
		bad += !WIFEXITED(st) || WEXITSTATUS(st);
	}
	T_EQ(bad, 0);
}

/* Random requests: any answer but a crash or a hang is fine; the daemon must still work. */
static void test_fuzz(int fd)
{
	unsigned long long seed = 7;
	struct hbuf b;

	T_EQ(host_register(fd, &b, 1 << 20), 0);
	for (int i = 0; i < 3000; i++) {
		unsigned char *raw = (unsigned char *)&req;
		size_t n = 64 + t_rand(&seed) % 512;

		for (size_t k = 0; k < n; k++)
			raw[k] = t_rand(&seed);
		if (i % 2)
			req.id = b.id;
		if (i % 3)
			req.count = t_rand(&seed) % (DMAFS_PLACE_MAX + 3);
		ioctl(fd, DMAFS_IOC_PLACE, &req);
		if (i % 5 == 0) {
			struct dmafs_ioc_register r;

			for (size_t k = 0; k < sizeof(r); k++)
				((unsigned char *)&r)[k] = t_rand(&seed);
			if (ioctl(fd, DMAFS_IOC_REGISTER, &r) == 0) {
				struct dmafs_ioc_unregister u = { r.id };

				ioctl(fd, DMAFS_IOC_UNREGISTER, &u);
			}
		}
	}
	req.e[0] = (struct dmafs_place_entry){ 0, 4096, 0 };
	T_EQ(place(fd, b.id, 1), 0);
	T_CHECK(!memcmp(b.p, ref, 4096), "placement after fuzzing");
}

int main(int argc, char **argv)
{
	struct stat st;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: place_host FILE\n");
		return 1;
	}
	path = argv[1];
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		perror(path);
		return 1;
	}
	fsize = st.st_size;
	ref = malloc(fsize);
	if (pread(fd, ref, fsize, 0) != (ssize_t)fsize) {
		perror("pread");
		return 1;
	}
	test_exact(fd);
	test_refusals(fd);
	test_foreign(fd);
	test_concurrent(fd);
	test_lifetime(fd);
	test_fuzz(fd);
	return t_done("place_host");
}
