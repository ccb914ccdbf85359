// SPDX-License-Identifier: MIT
/*
 * Description: sample batches (dmafs_place_batch) place exactly what pread(2) reads, and
 * nothing else. Files of many sizes (empty, sparse, a few MiB, with holes) get handles;
 * random samples (unaligned offsets and lengths, past and across the end of the file,
 * more than one request's worth) go into a host buffer filled with 0xEE, and every byte
 * of the buffer is compared: a sample's range holds the file's bytes (and 0xEE past
 * where it was clipped), the rest of the buffer is untouched. Then the failures: a
 * removed file's samples fail alone (-ENOENT), a forged or foreign handle's alone
 * (-EPERM), a handle of another process (-EPERM), a descriptor open write-only
 * (-EBADF), malformed requests (-ERANGE, -EINVAL) before any I/O.
 *
 * Usage: batch DIR [FILES [ROUNDS]]   (DIR on the mount under test, or elsewhere for the
 *        POSIX path; the expected path is printed)
 *        batch --forge DIR HANDLE_FILE   (another user: samples of the handle written by
 *        `batch DIR` into HANDLE_FILE must all fail with -EPERM)
 *        batch --loop FILE SECONDS [SAMPLES [BYTES]]   (batches of FILE back to back until
 *        it is removed: SAMPLES, default 16, of BYTES, default 1 MiB, spread over it)
 * Exit 0, or 1 naming the first difference.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dmafs.h"

#define FILL 0xEE

static const char *dir;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "batch: %s: %s\n", what, err ? dmafs_strerror(err) : "failed");
	exit(1);
}

struct file {
	char path[512];
	int fd;
	uint64_t size;
	char *data;
	struct dmafs_handle h;
};

static void make_file(struct file *f, int i)
{
	static const uint64_t sizes[] = { 0, 1, 511, 4096, 4097, 48 << 10, 100000, 1 << 20,
					  (3 << 20) + 12345 };
	uint64_t size = i < 9 ? sizes[i] : rnd() % (256 << 10);
	int fd;

	snprintf(f->path, sizeof(f->path), "%s/s%04d", dir, i);
	f->size = size;
	f->data = calloc(1, size + 1);
	for (uint64_t k = 0; k < size; k++)
		f->data[k] = (char)(rnd() >> 24);
	/* every fifth file sparse: a hole in its middle */
	if (i % 5 == 4 && size > 8192)
		memset(f->data + size / 4, 0, size / 2);
	fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(f->path, -errno);
	if (i % 5 == 4 && size > 8192) {
		if (pwrite(fd, f->data, size / 4, 0) != (ssize_t)(size / 4) ||
		    pwrite(fd, f->data + size / 4 * 3, size - size / 4 * 3, (off_t)(size / 4 * 3)) !=
			    (ssize_t)(size - size / 4 * 3))
			die(f->path, -errno);
	} else if (size && write(fd, f->data, size) != (ssize_t)size) {
		die(f->path, -errno);
	}
	if (close(fd))
		die(f->path, -errno);
}

/* Check @n samples placed into @buf (of @size bytes, filled with FILL before). */
static int check(const struct file *fs, const int *which, const struct dmafs_sample *s,
		 const uint32_t *asked, size_t n, const unsigned char *buf, size_t size)
{
	unsigned char *want = malloc(size);

	memset(want, FILL, size);
	for (size_t i = 0; i < n; i++) {
		const struct file *f = &fs[which[i]];
		uint64_t len = s[i].file_offset >= f->size ? 0 : f->size - s[i].file_offset;

		if (len > asked[i])
			len = asked[i];
		if (s[i].result) {
			fprintf(stderr, "batch: sample %zu (%s at %llu, %u bytes): %s\n", i, f->path,
				(unsigned long long)s[i].file_offset, asked[i], dmafs_strerror(s[i].result));
			return 1;
		}
		if (s[i].length != len) {
			fprintf(stderr, "batch: sample %zu (%s at %llu, %u bytes): %u bytes placed, expected %llu\n",
				i, f->path, (unsigned long long)s[i].file_offset, asked[i], s[i].length,
				(unsigned long long)len);
			return 1;
		}
		memcpy(want + s[i].buffer_offset, f->data + s[i].file_offset, len);
	}
	for (size_t k = 0; k < size; k++)
		if (want[k] != buf[k]) {
			fprintf(stderr, "batch: buffer byte %zu is 0x%02x, expected 0x%02x\n", k, buf[k], want[k]);
			free(want);
			return 1;
		}
	free(want);
	return 0;
}

/* Another user presents a handle it did not get: every sample fails with -EPERM. */
static int forge(const char *path)
{
	struct dmafs_session *s;
	struct dmafs_buf *b;
	struct dmafs_sample x[4];
	FILE *f = fopen(path, "r");
	int ret;

	memset(x, 0, sizeof(x));
	if (!f || fread(&x[0].file, sizeof(x[0].file), 1, f) != 1)
		die(path, -EIO);
	fclose(f);
	if ((ret = dmafs_session_open(dir, &s)) || (ret = dmafs_buf_alloc_host(s, 1 << 20, &b)))
		die("session", ret);
	for (int i = 0; i < 4; i++) {
		x[i].file = x[0].file;
		x[i].length = 4096;
		x[i].buffer_offset = (uint64_t)i << 12;
	}
	x[1].file.b ^= 1;	   /* a bit of the MAC */
	x[2].file.a += 1;	   /* another inode */
	x[3].file.b = rnd();	   /* a guess */
	ret = dmafs_place_batch(b, x, 4, NULL);
	for (int i = 0; i < 4; i++)
		if (x[i].result != -EPERM || x[i].length) {
			fprintf(stderr, "batch: forged handle %d: result %d, %u bytes, expected EPERM\n", i,
				x[i].result, x[i].length);
			return 1;
		}
	if (ret != -EPERM)
		die("forged handles: the call's result is not EPERM", ret);
	printf("forged and foreign handles: every sample EPERM\n");
	return 0;
}

/*
 * --loop FILE SECONDS: batches of all of FILE (1 MiB samples, 16 MiB buffer) back to back,
 * its descriptor closed once the handle is taken, until SECONDS pass or its samples fail
 * with ENOENT (removed meanwhile). Prints how many batches placed it.
 */
static int loop(const char *path, double secs, int n, uint32_t len)
{
	struct dmafs_sample x[320];
	struct dmafs_session *s;
	struct dmafs_handle h;
	struct dmafs_buf *b;
	struct timespec t0, t;
	long placed = 0;
	int fd = open(path, O_RDONLY), ret;
	struct stat st;

	if (fd < 0 || fstat(fd, &st))
		die(path, -errno);
	if (n < 1 || n > 320 || len < 1 || (uint64_t)n * len > (64u << 20))
		die("--loop: SAMPLES 1..320 of BYTES, 64 MiB in all at most", -EINVAL);
	char d[512];

	/* the session on the folder: nothing but the batches keeps the file */
	snprintf(d, sizeof(d), "%s", path);
	*(strrchr(d, '/') ? strrchr(d, '/') : d) = '\0';
	if ((ret = dmafs_session_open(d[0] ? d : "/", &s)) ||
	    (ret = dmafs_buf_alloc_host(s, (size_t)n * len, &b)) || (ret = dmafs_handle_get(s, fd, &h)))
		die(path, ret);
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		uint64_t stride = (uint64_t)st.st_size / (uint64_t)n / 4096 * 4096;

		for (int i = 0; i < n; i++)
			x[i] = (struct dmafs_sample){ .file = h, .file_offset = (uint64_t)i * stride,
						      .buffer_offset = (uint64_t)i * len, .length = len };
		ret = dmafs_place_batch(b, x, (unsigned)n, NULL);
		if (ret == -ENOENT)
			break;
		if (ret)
			die("a batch of the file", ret);
		placed++;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs)
			break;
	}
	printf("%ld batches placed it%s\n", placed, ret == -ENOENT ? ", then it was gone" : "");
	dmafs_buf_unregister(b);
	dmafs_session_close(s);
	return 0;
}

int main(int argc, char **argv)
{
	int nfiles = 200, rounds = 20, ret;
	struct dmafs_session *s;
	struct dmafs_caps caps;
	struct dmafs_buf *b;
	struct dmafs_result res;
	struct file *fs;
	size_t bufsize = 16 << 20;

	if (argc >= 4 && !strcmp(argv[1], "--loop"))
		return loop(argv[2], atof(argv[3]), argc > 4 ? atoi(argv[4]) : 16,
			    argc > 5 ? (uint32_t)atoi(argv[5]) : 1u << 20);
	if (argc >= 4 && !strcmp(argv[1], "--forge")) {
		dir = argv[2];
		return forge(argv[3]);
	}
	if (argc < 2) {
		fprintf(stderr, "usage: batch DIR [FILES [ROUNDS]] | batch --forge DIR HANDLE_FILE |\n"
				"       batch --loop FILE SECONDS [SAMPLES [BYTES]]\n");
		return 2;
	}
	dir = argv[1];
	if (argc > 2)
		nfiles = atoi(argv[2]);
	if (argc > 3)
		rounds = atoi(argv[3]);
	if (nfiles < 10)
		nfiles = 10;
	fs = calloc((size_t)nfiles, sizeof(*fs));
	for (int i = 0; i < nfiles; i++)
		make_file(&fs[i], i);
	if ((ret = dmafs_session_open(dir, &s)))
		die("session", ret);
	dmafs_session_caps(s, &caps);
	if ((ret = dmafs_buf_alloc_host(s, bufsize, &b)))
		die("buffer", ret);
	/* handles taken once; the descriptors stay open (the POSIX path needs them) */
	for (int i = 0; i < nfiles; i++) {
		fs[i].fd = open(fs[i].path, O_RDONLY);
		if (fs[i].fd < 0)
			die(fs[i].path, -errno);
		if ((ret = dmafs_handle_get(s, fs[i].fd, &fs[i].h)))
			die(fs[i].path, ret);
	}
	for (int r = 0; r < rounds; r++) {
		size_t n = r == 0 ? 1000 : 1 + rnd() % 400, at = 0;
		struct dmafs_sample *x = calloc(n, sizeof(*x));
		uint32_t *asked = calloc(n, sizeof(*asked));
		int *which = calloc(n, sizeof(*which));
		unsigned char *p = dmafs_buf_ptr(b);

		memset(p, FILL, bufsize);
		for (size_t i = 0; i < n; i++) {
			const struct file *f = &fs[which[i] = (int)(rnd() % (uint64_t)nfiles)];
			uint64_t off = f->size ? rnd() % (f->size + 4096) : rnd() % 100;
			uint32_t len = (uint32_t)(1 + rnd() % (r % 3 == 0 ? 8192 : 96 << 10));

			if (at + len + 64 > bufsize) {
				n = i;
				break;
			}
			at += rnd() % 64; /* unaligned, with gaps that must stay untouched */
			x[i] = (struct dmafs_sample){ .file = f->h, .file_offset = off,
						      .buffer_offset = at, .length = len };
			asked[i] = len;
			at += len;
		}
		ret = dmafs_place_batch(b, x, n, &res);
		if (ret)
			die("dmafs_place_batch", ret);
		if (check(fs, which, x, asked, n, p, bufsize))
			return 1;
		if (r == 0)
			printf("%zu samples in one call: %llu bytes, path %s, %.2f ms\n", n,
			       (unsigned long long)res.bytes, dmafs_path_name(res.path),
			       res.elapsed_ns / 1e6);
	}
	printf("%d rounds of random samples of %d files: every byte as pread reads it\n", rounds, nfiles);

	/* a removed file: its samples fail alone, the others are placed */
	{
		struct dmafs_sample x[3] = {
			{ .file = fs[7].h, .length = 4096 },
			{ .file = fs[8].h, .length = 4096, .buffer_offset = 8192 },
			{ .file = fs[7].h, .file_offset = 100, .length = 10, .buffer_offset = 20000 },
		};

		if (unlink(fs[8].path))
			die(fs[8].path, -errno);
		if (caps.on_dmafs) {
			close(fs[8].fd); /* a handle does not keep a removed file */
			fs[8].fd = -1;
		}
		ret = dmafs_place_batch(b, x, 3, NULL);
		if (caps.on_dmafs && (ret != -ENOENT || x[1].result != -ENOENT || x[1].length)) {
			fprintf(stderr, "batch: removed file: call %d, sample result %d\n", ret, x[1].result);
			return 1;
		}
		if (x[0].result || x[0].length != 4096 || x[2].result || x[2].length != 10 ||
		    memcmp((char *)dmafs_buf_ptr(b) + 20000, fs[7].data + 100, 10)) {
			fprintf(stderr, "batch: the samples beside a removed file's were not placed\n");
			return 1;
		}
		printf("removed file: its samples %s, the others placed\n",
		       caps.on_dmafs ? "ENOENT" : "read through the open descriptor");
	}
	/* malformed requests fail whole, before any I/O */
	{
		struct dmafs_sample x[2] = { { .file = fs[7].h, .length = 16, .buffer_offset = bufsize - 8 },
					     { .file = fs[7].h, .length = 16 } };
		struct dmafs_sample y[2] = { { .file = fs[7].h, .length = (uint32_t)(bufsize / 2 + 1) },
					     { .file = fs[7].h, .length = (uint32_t)(bufsize / 2 + 1),
					       .buffer_offset = bufsize / 2 - 1 } };
		struct dmafs_sample z = { .file = fs[7].h, .length = 16 };

		if ((ret = dmafs_place_batch(b, x, 2, NULL)) != -ERANGE)
			die("a sample past the buffer's end is not ERANGE", ret);
		if ((ret = dmafs_place_batch(b, y, 2, NULL)) != -ERANGE)
			die("samples of more bytes than the buffer are not ERANGE", ret);
		z.file.d = 5;
		if ((ret = dmafs_place_batch(b, &z, 1, NULL)) != -EINVAL)
			die("a handle with flags is not EINVAL", ret);
		printf("malformed requests: ERANGE, EINVAL\n");
	}
	if (!caps.on_dmafs) {
		printf("POSIX path (not on dmafs): passed\n");
		return 0;
	}
	/* a write-only descriptor gets no handle */
	{
		struct dmafs_handle h;
		int fd = open(fs[9].path, O_WRONLY);

		if ((ret = dmafs_handle_get(s, fd, &h)) != -EBADF)
			die("a handle of a write-only descriptor is not EBADF", ret);
		close(fd);
	}
	/* another process's handle fails there, forged ones fail here */
	{
		int pfd[2];
		struct dmafs_handle h;
		pid_t pid;
		int st;

		if (pipe(pfd))
			die("pipe", -errno);
		pid = fork();
		if (pid == 0) {
			struct dmafs_handle c;
			int fd = open(fs[9].path, O_RDONLY);

			if (fd < 0 || dmafs_handle_get(s, fd, &c))
				_exit(3);
			_exit(write(pfd[1], &c, sizeof(c)) == sizeof(c) ? 0 : 3);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) ||
		    read(pfd[0], &h, sizeof(h)) != sizeof(h))
			die("a child's handle", -EIO);
		{
			struct dmafs_sample x[2] = { { .file = h, .length = 4096 },
						     { .file = fs[9].h, .length = 4096, .buffer_offset = 4096 } };

			ret = dmafs_place_batch(b, x, 2, NULL);
			if (ret != -EPERM || x[0].result != -EPERM || x[1].result || x[1].length != 4096) {
				fprintf(stderr, "batch: a child's handle: call %d, results %d %d\n", ret,
					x[0].result, x[1].result);
				return 1;
			}
		}
		/* leave a handle of ours for --forge, run by another user */
		if (argc > 4) {
			FILE *f = fopen(argv[4], "w");

			if (!f || fwrite(&fs[9].h, sizeof(fs[9].h), 1, f) != 1 || fclose(f))
				die(argv[4], -errno);
		}
		printf("another process's handle: EPERM; a write-only descriptor: EBADF\n");
	}
	return 0;
}
