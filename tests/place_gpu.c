// SPDX-License-Identifier: MIT
/*
 * Description: placement into GPU memory (CUDA, or HIP with DMAFS_TEST_TARGET=hip) through
 * libdmafs: byte-exact whole-file and random unaligned ranges across stripe boundaries,
 * several buffers registered by one client, concurrent client processes. Exits 77 with
 * the reason when no GPU runtime or device is present.
 * Usage: place_gpu FILE_ON_DMAFS
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dmafs.h"
#include "gpu.h"
#include "t_unit.h"

static const char *path;
static char *ref;
static uint64_t fsize;
static int target = DMAFS_TARGET_CUDA;

static int reg(struct dmafs_session *s, struct gpu *g, void *d, size_t size, struct dmafs_buf **b)
{
	(void)g;
	return target == DMAFS_TARGET_CUDA ? dmafs_buf_register_cuda(s, d, size, 0, b)
					   : dmafs_buf_register_hip(s, d, size, 0, b);
}

/* Whole file at an odd device offset, then random unaligned ranges; all checked by
 * copying the device memory back. Returns the number of failed checks. */
static int run_client(struct gpu *g, unsigned long long seed)
{
	struct dmafs_session *s;
	struct dmafs_buf *b, *b2;
	struct dmafs_result r;
	size_t size = fsize + (1 << 20);
	char *back = malloc(size);
	void *d, *d2;
	int fd;

	T_EQ(dmafs_session_open(path, &s), 0);
	T_EQ(gpu_mem_alloc(g, 0, size, &d), 0);
	T_EQ(gpu_mem_alloc(g, 0, 1 << 20, &d2), 0);
	T_EQ(reg(s, g, d, size, &b), 0);
	/* a second registration: a sub-range of another allocation */
	T_EQ(reg(s, g, (char *)d2 + 4096, (1 << 20) - 4096, &b2), 0);
	T_EQ(dmafs_place_file(b, path, 777, &r), 0);
	T_EQ(r.bytes, fsize);
	T_CHECK(r.path == DMAFS_PATH_STAGED || r.path == DMAFS_PATH_P2P, "path %s", dmafs_path_name(r.path));
	T_EQ(gpu_copy_dtoh(g, 0, back, (char *)d + 777, fsize), 0);
	T_CHECK(!memcmp(back, ref, fsize), "whole-file placement differs");
	fd = open(path, O_RDONLY);
	for (int round = 0; round < 10; round++) {
		struct dmafs_extent e[300];
		size_t n = 1 + t_rand(&seed) % 300;
		uint64_t dst = 0;

		for (size_t i = 0; i < n; i++) {
			uint64_t off = t_rand(&seed) % fsize, len = 1 + t_rand(&seed) % 300000;

			if (len > fsize - off)
				len = fsize - off;
			if (dst + len > size)
				len = 0;
			e[i] = (struct dmafs_extent){ off, len, dst };
			dst += len;
		}
		struct dmafs_extent want[300];
		memcpy(want, e, n * sizeof(e[0]));
		T_EQ(dmafs_place(b, fd, e, n, &r), 0);
		T_EQ(gpu_copy_dtoh(g, 0, back, d, dst ? dst : 1), 0);
		for (size_t i = 0; i < n; i++)
			T_CHECK(!memcmp(back + want[i].buffer_offset, ref + want[i].file_offset, want[i].length),
				"round %d extent %zu (file %llu, %llu bytes) differs", round, i,
				(unsigned long long)want[i].file_offset, (unsigned long long)want[i].length);
	}
	/* the second buffer: the file's tail across the last stripe boundary */
	{
		struct dmafs_extent e = { fsize > 100000 ? fsize - 100000 : 0, DMAFS_TO_EOF, 123 };
		uint64_t len = fsize - e.file_offset;

		T_EQ(dmafs_place(b2, fd, &e, 1, &r), 0);
		T_EQ(e.length, len);
		T_EQ(gpu_copy_dtoh(g, 0, back, (char *)d2 + 4096 + 123, len), 0);
		T_CHECK(!memcmp(back, ref + e.file_offset, len), "second registration differs");
		e.buffer_offset = (1 << 20) - 4096 - 10; /* past its end */
		T_EQ(dmafs_place(b2, fd, &e, 1, &r), -ERANGE);
	}
	close(fd);
	T_EQ(dmafs_buf_unregister(b2), 0);
	T_EQ(dmafs_buf_unregister(b), 0);
	gpu_mem_free(g, 0, d);
	gpu_mem_free(g, 0, d2);
	dmafs_session_close(s);
	free(back);
	return t_failures;
}

int main(int argc, char **argv)
{
	struct gpu *g;
	struct stat st;
	char why[256];
	pid_t pids[3], probe;
	int fd, bad = 0, stt;

	if (argc != 2) {
		fprintf(stderr, "usage: place_gpu FILE\n");
		return 1;
	}
	if (getenv("DMAFS_TEST_TARGET") && !strcmp(getenv("DMAFS_TEST_TARGET"), "hip"))
		target = DMAFS_TARGET_HIP;
	/* CUDA cannot be used in a child forked after the parent initialised it: probe in a
	 * child, fork the clients, and only then initialise here. */
	probe = fork();
	if (probe == 0) {
		if (gpu_load(target, &g, why, sizeof(why))) {
			printf("SKIP: no %s GPU: %s\n", target == DMAFS_TARGET_HIP ? "HIP" : "CUDA", why);
			fflush(stdout);
			_exit(77);
		}
		_exit(0);
	}
	waitpid(probe, &stt, 0);
	if (!WIFEXITED(stt) || WEXITSTATUS(stt))
		return WIFEXITED(stt) && WEXITSTATUS(stt) == 77 ? 77 : 1;
	path = argv[1];
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		return perror(path), 1;
	fsize = st.st_size;
	ref = malloc(fsize);
	if (pread(fd, ref, fsize, 0) != (ssize_t)fsize)
		return perror("pread"), 1;
	close(fd);
	/* four concurrent clients: three children and this process, each with its buffers */
	for (int k = 0; k < 3; k++) {
		pids[k] = fork();
		if (pids[k] == 0) {
			if (gpu_load(target, &g, why, sizeof(why)))
				_exit(3);
			_exit(run_client(g, 100 + k) ? 1 : 0);
		}
	}
	if (gpu_load(target, &g, why, sizeof(why))) {
		fprintf(stderr, "GPU vanished: %s\n", why);
		return 1;
	}
	run_client(g, 1);
	for (int k = 0; k < 3; k++) {
		waitpid(pids[k], &stt, 0);
		bad += !WIFEXITED(stt) || WEXITSTATUS(stt);
	}
	T_EQ(bad, 0);
	return t_done("place_gpu");
}
