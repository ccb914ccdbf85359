// SPDX-License-Identifier: MIT
/*
 * place_gpu-basic.c - the client of place_gpu's mode basic: the whole file and random
 * unaligned ranges into device memory, and a second registration, each copied back and
 * compared with the reference.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dmafs.h"
#include "gpu.h"
#include "place_gpu.h"

/* Whole file at an odd device offset, then random unaligned ranges; all checked by
 * copying the device memory back. Returns the number of failed checks. */
int run_client(struct gpu *g, unsigned long long seed)
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
	T_CHECK(path_ok(r.path), "path %s (the mount offers %s)", dmafs_path_name(r.path),
		dmafs_path_name(mount_path));
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
