// SPDX-License-Identifier: MIT
/*
 * bench-place.c - dmafs-bench-place: the placement benchmark's measuring half (the
 * set-up of members and mount is done by `dmafs-bench place`). In one process it times,
 * on one file of a dmafs mount:
 *   raw      O_DIRECT reads of the members themselves: exactly the member ranges that
 *            hold the file (from its layout), one thread and ring per member, QD 32 x 1 MiB
 *   h2d      pinned host memory -> device (the copy engine's ceiling)
 *   place    dmafs placement of the file into device memory (libdmafs)
 *   naive    pread from the mount (page cache dropped) + cudaMemcpy of each chunk
 *   host     dmafs placement into shared host memory vs POSIX pread (cache dropped)
 * and verifies every placed byte. Prints a table of GB/s (10^9 bytes/s) and ratios.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef DMAFS_XXH_DISPATCH
/* XXH3 entry points that pick SSE2, AVX2 or AVX-512 at run time (configure.ac) */
#include <xxh_x86dispatch.h>
#endif

#include "common.h"
#include "dmafs.h"
#include "gpu.h"

/* Seconds on the monotonic clock, for durations. */
static double now(void)
{
	return (double)dm_mono_ns() / 1e9;
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	sync();
	if (fd < 0 || write(fd, "3\n", 2) != 2)
		fprintf(stderr, "bench-place: cannot drop the page cache (not root?): numbers for POSIX reads are warm\n");
	if (fd >= 0)
		close(fd);
}

static void die(const char *what, int err)
{
	fprintf(stderr, "bench-place: %s: %s\n", what, err < 0 ? dmafs_strerror(err) : strerror(err));
	exit(1);
}

/* One member's share of the raw read: the runs the file occupies there. */
struct raw_job {
	const char *path;
	struct { uint64_t off, len; } *run;
	size_t nrun;
	uint64_t bytes;
	int err;
	pthread_t t;
	pthread_barrier_t *go;
};

/* Read this member's runs with O_DIRECT through its own ring, QD 32 x 1 MiB (as fio would
 * with one job per member). */
static void *raw_member(void *arg)
{
	enum { QD = 32, BS = 1 << 20 };
	struct raw_job *j = arg;
	struct io_uring ring;
	size_t r = 0;
	uint64_t pos = 0, done = 0;
	int fd, inflight = 0, slot = 0;
	char *buf;

	fd = open(j->path, O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&buf, 4096, (size_t)QD * BS) ||
	    io_uring_queue_init(QD, &ring, 0)) {
		j->err = errno ? errno : EIO;
		pthread_barrier_wait(j->go);
		return NULL;
	}
	memset(buf, 0, (size_t)QD * BS);
	pthread_barrier_wait(j->go); /* set-up is not timed */
	while (done < j->bytes) {
		struct io_uring_cqe *cqe;

		while (inflight < QD && r < j->nrun) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			uint64_t n = j->run[r].len - pos < BS ? j->run[r].len - pos : BS;

			if (!sqe)
				break;
			io_uring_prep_read(sqe, fd, buf + (size_t)(slot++ % QD) * BS, n, j->run[r].off + pos);
			inflight++;
			pos += n;
			if (pos == j->run[r].len) {
				r++;
				pos = 0;
			}
		}
		io_uring_submit_and_wait(&ring, 1);
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			if (cqe->res <= 0) {
				j->err = cqe->res ? -cqe->res : EIO;
				done = j->bytes;
			}
			done += cqe->res > 0 ? cqe->res : 0;
			inflight--;
			io_uring_cqe_seen(&ring, cqe);
		}
	}
	io_uring_queue_exit(&ring);
	close(fd);
	free(buf);
	return NULL;
}

/* Raw O_DIRECT read of exactly the member ranges holding @file, all members at once. */
static double raw_read(const char *file, char **members, int n)
{
	struct dmafs_layout *l;
	struct raw_job *jobs = calloc(n, sizeof(*jobs));
	uint64_t total = 0;
	double t0;
	int ret = dmafs_layout_get(file, &l);

	if (ret)
		die("layout", ret);
	for (int m = 0; m < n; m++) {
		jobs[m].path = members[m];
		jobs[m].run = calloc(l->count + 1, sizeof(*jobs[m].run));
	}
	for (size_t i = 0; i < l->count; i++) {
		struct dmafs_layout_extent *e = &l->extents[i];
		struct raw_job *j = &jobs[e->member];

		if (e->member >= (uint32_t)n)
			die("layout names more members than given", EINVAL);
		if (j->nrun && j->run[j->nrun - 1].off + j->run[j->nrun - 1].len == e->member_offset)
			j->run[j->nrun - 1].len += e->length;
		else {
			j->run[j->nrun].off = e->member_offset;
			j->run[j->nrun++].len = e->length;
		}
		j->bytes += e->length;
		total += e->length;
	}
	dmafs_layout_free(l);
	pthread_barrier_t go;

	pthread_barrier_init(&go, NULL, n + 1);
	for (int m = 0; m < n; m++) {
		jobs[m].go = &go;
		pthread_create(&jobs[m].t, NULL, raw_member, &jobs[m]);
	}
	pthread_barrier_wait(&go);
	t0 = now();
	for (int m = 0; m < n; m++) {
		pthread_join(jobs[m].t, NULL);
		if (jobs[m].err)
			die(members[m], jobs[m].err);
	}
	t0 = now() - t0;
	for (int m = 0; m < n; m++)
		free(jobs[m].run);
	free(jobs);
	return total / t0 / 1e9;
}

int main(int argc, char **argv)
{
	const char *file = NULL, *target = "cuda:0";
	char *members[64], *list = NULL;
	int nmembers = 0, dev = 0, reps = 3, gpu_target = DMAFS_TARGET_CUDA;
	static const struct option lo[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "members", required_argument, NULL, 'm' },
		{ "target", required_argument, NULL, 't' },
		{ "reps", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct dmafs_session *s;
	struct dmafs_result res;
	struct stat st;
	struct gpu *g = NULL;
	char why[256];
	int c, ret, have_gpu;
	double raw, h2d = 0, place = 0, naive = 0, hostp = 0, posix = 0, hash = 0;
	const char *place_path = "-";

	while ((c = getopt_long(argc, argv, "f:m:t:r:", lo, NULL)) != -1) {
		switch (c) {
		case 'f': file = optarg; break;
		case 'm': list = strdup(optarg); break;
		case 't': target = optarg; break;
		case 'r': reps = atoi(optarg); break;
		default: return 1;
		}
	}
	if (!file || !list) {
		fprintf(stderr, "usage: dmafs-bench-place --file FILE --members A,B,... [--target cuda:N|hip:N] [--reps N]\n");
		return 1;
	}
	for (char *tok = strtok(list, ","); tok && nmembers < 64; tok = strtok(NULL, ","))
		members[nmembers++] = tok;
	if (!strncmp(target, "hip:", 4))
		gpu_target = DMAFS_TARGET_HIP;
	dev = atoi(strchr(target, ':') ? strchr(target, ':') + 1 : "0");
	if (stat(file, &st))
		die(file, errno);
	size_t size = st.st_size;
	char *ref = malloc(size), *tmp = malloc(size);
	if (!ref || !tmp)
		die("memory", ENOMEM);

	ret = dmafs_session_open(file, &s);
	if (ret)
		die("session", ret);
	/* reference bytes, and the POSIX read figure (cold) */
	{
		int fd = open(file, O_RDONLY);
		double best = 0;

		for (int r = 0; r < reps; r++) {
			drop_caches();
			double t0 = now();
			size_t got = 0;
			while (got < size) {
				ssize_t k = pread(fd, ref + got, size - got > (64 << 20) ? (64 << 20) : size - got, got);
				if (k <= 0)
					die("pread", errno);
				got += k;
			}
			t0 = now() - t0;
			if (size / t0 / 1e9 > best)
				best = size / t0 / 1e9;
		}
		posix = best;
		close(fd);
	}
	{
		double best = 0;

		for (int r = 0; r < reps; r++) {
			double v = raw_read(file, members, nmembers);

			best = v > best ? v : best;
		}
		raw = best;
	}

	/* host target */
	{
		struct dmafs_buf *hb;
		double best = 0;

		ret = dmafs_buf_alloc_host(s, size, &hb);
		if (ret)
			die("host buffer", ret);
		for (int r = 0; r < reps; r++) {
			memset(dmafs_buf_ptr(hb), 0, size);
			ret = dmafs_place_file(hb, file, 0, &res);
			if (ret)
				die("host placement", ret);
			if (memcmp(dmafs_buf_ptr(hb), ref, size))
				die("host placement: bytes differ from the file", EIO);
			if (res.bytes / (res.elapsed_ns / 1e9) / 1e9 > best)
				best = res.bytes / (res.elapsed_ns / 1e9) / 1e9;
		}
		hostp = best;
		dmafs_buf_unregister(hb);
	}

	have_gpu = gpu_load(gpu_target, &g, why, sizeof(why)) == 0;
	if (have_gpu) {
		void *d, *pinned;
		struct dmafs_buf *gb;
		size_t chunk = 64 << 20;
		double best;

		ret = gpu_mem_alloc(g, dev, size, &d);
		if (ret)
			die("device memory", ret);
		/* pinned host -> device ceiling */
		if (posix_memalign(&pinned, 4096, size))
			die("memory", ENOMEM);
		memcpy(pinned, ref, size);
		if (gpu_host_register(g, dev, pinned, size))
			die("pinning", EIO);
		best = 0;
		for (int r = 0; r < reps; r++) {
			double t0 = now();
			if (gpu_copy_htod(g, dev, d, pinned, size))
				die("h2d", EIO);
			t0 = now() - t0;
			if (size / t0 / 1e9 > best)
				best = size / t0 / 1e9;
		}
		h2d = best;
		gpu_host_unregister(g, dev, pinned);
		free(pinned);

		/* dmafs placement */
		ret = gpu_target == DMAFS_TARGET_CUDA ? dmafs_buf_register_cuda(s, d, size, dev, &gb)
						      : dmafs_buf_register_hip(s, d, size, dev, &gb);
		if (ret)
			die("registering device memory", ret);
		best = 0;
		for (int r = 0; r < reps; r++) {
			ret = dmafs_place_file(gb, file, 0, &res);
			if (ret)
				die("device placement", ret);
			place_path = dmafs_path_name(res.path);
			if (res.bytes / (res.elapsed_ns / 1e9) / 1e9 > best)
				best = res.bytes / (res.elapsed_ns / 1e9) / 1e9;
		}
		place = best;
		memset(tmp, 0, size);
		if (gpu_copy_dtoh(g, dev, tmp, d, size) || memcmp(tmp, ref, size))
			die("device placement: bytes differ from the file", EIO);
		dmafs_buf_unregister(gb);

		/* naive: POSIX read from the mount + copy of each chunk */
		best = 0;
		for (int r = 0; r < reps; r++) {
			int fd = open(file, O_RDONLY);
			drop_caches();
			double t0 = now();
			for (size_t off = 0; off < size; off += chunk) {
				size_t n = size - off < chunk ? size - off : chunk;
				if (pread(fd, tmp, n, off) != (ssize_t)n)
					die("pread", errno);
				if (gpu_copy_htod(g, dev, (char *)d + off, tmp, n))
					die("naive copy", EIO);
			}
			t0 = now() - t0;
			close(fd);
			if (size / t0 / 1e9 > best)
				best = size / t0 / 1e9;
		}
		naive = best;
		gpu_mem_free(g, dev, d);
	} else {
		fprintf(stderr, "bench-place: no %s target: %s\n", target, why);
	}
	/* What checking checksums costs: XXH3 of every 4096-byte block, on one core (measured
	 * last, so that it cannot disturb the placement figures). */
	{
		double best = 0;
		uint64_t sink = 0;

		for (int r = 0; r < reps; r++) {
			double t0 = now();

			for (size_t o = 0; o + 4096 <= size; o += 4096)
				sink += XXH3_64bits_withSeed(ref + o, 4096, o);
			t0 = now() - t0;
			if (size / t0 / 1e9 > best)
				best = size / t0 / 1e9;
		}
		hash = best + (sink == 42) * 1e-12; /* keep the loop */
	}

	dmafs_session_close(s);

	printf("file %.2f GB over %d members, best of %d, GB/s = 10^9 B/s\n", size / 1e9, nmembers, reps);
	printf("%-44s %8s\n", "measurement", "GB/s");
	printf("%-44s %8.2f\n", "raw O_DIRECT read of the members", raw);
	printf("%-44s %8.2f\n", "XXH3 of 4096-byte blocks, one core", hash);
	if (have_gpu) {
		double ceil = raw < h2d ? raw : h2d;

		printf("%-44s %8.2f\n", "pinned host->device copy", h2d);
		printf("%-44s %8.2f  (path %s)\n", "dmafs placement into GPU memory", place, place_path);
		printf("%-44s %8.2f\n", "naive pread from the mount + cudaMemcpy", naive);
		printf("%-44s %8.2f\n", "dmafs placement into shared host memory", hostp);
		printf("%-44s %8.2f\n", "POSIX pread from the mount (cold)", posix);
		printf("\n%-44s %8s %8s\n", "ratio", "value", "goal");
		printf("%-44s %8.2f %8s\n", "GPU placement / min(raw, h2d)", place / ceil, ">=0.92");
		printf("%-44s %8.2f %8s\n", "GPU placement / host placement", place / hostp, ">=0.95");
		printf("%-44s %8.2f\n", "GPU placement / naive", place / naive);
		printf("%-44s %8.2f\n", "host placement / POSIX read", hostp / posix);
	} else {
		printf("%-44s %8.2f\n", "dmafs placement into shared host memory", hostp);
		printf("%-44s %8.2f\n", "POSIX pread from the mount (cold)", posix);
		printf("\n%-44s %8.2f\n", "host placement / raw", hostp / raw);
		printf("%-44s %8.2f\n", "host placement / POSIX read", hostp / posix);
	}
	return 0;
}
