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
 * and verifies every placed byte. Prints a table of GB/s (10^9 bytes/s) and ratios, or
 * with --json the figures as one JSON object (what `dmafs-bench place` reads and prints in
 * the benchmark's table). --target host measures the host rows only.
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
#include "json.h"
#include "tool.h"

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
		tool_err("cannot drop the page cache (not root?): numbers for POSIX reads are warm");
	if (fd >= 0)
		close(fd);
}

/* A step failed: nothing to measure without it. @err is -errno (libdmafs) or errno. */
static void die(const char *what, int err)
{
	tool_err("%s: %s", what, err < 0 ? dmafs_strerror(err) : strerror(err));
	exit(BENCH_EXIT_ERR);
}

/* The better of two figures: each is the best of the repetitions. */
static double better(double a, double b) { return a > b ? a : b; }

/* GB/s (10^9 bytes per second). */
static double gbps(double bytes, double secs) { return secs > 0 ? bytes / secs / 1e9 : 0; }

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

/* The run: what is measured, and the figures (best of the repetitions, GB/s). */
struct bench {
	const char *file, *target;
	char **members;
	int nmembers, reps;
	int gpu_target, dev, have_gpu, host_only;
	size_t size;
	char *ref, *tmp;	/* the file's bytes (POSIX read), scratch of its size */
	struct dmafs_session *s;
	struct gpu *g;
	double raw, h2d, place, naive, hostp, posix, hash;
	const char *place_path;
	char why[256];	/* why there are no GPU rows */
};

/* The reference bytes, and the POSIX read figure (page cache dropped each time). Reads of
 * 64 MiB, as an application reading a large file would make. */
static void bench_posix(struct bench *b)
{
	int fd = open(b->file, O_RDONLY);

	if (fd < 0)
		die(b->file, errno);
	for (int r = 0; r < b->reps; r++) {
		double t0;

		drop_caches();
		t0 = now();
		for (size_t got = 0; got < b->size;) {
			size_t want = b->size - got > (64 << 20) ? (64 << 20) : b->size - got;
			ssize_t k = dm_pread_full(fd, b->ref + got, want, (off_t)got);

			if (k <= 0)
				die("pread", k ? (int)-k : EIO);
			got += (size_t)k;
		}
		b->posix = better(b->posix, gbps(b->size, now() - t0));
	}
	close(fd);
}

static void bench_host(struct bench *b)
{
	struct dmafs_result res;
	struct dmafs_buf *hb;
	int ret = dmafs_buf_alloc_host(b->s, b->size, &hb);

	if (ret)
		die("host buffer", ret);
	for (int r = 0; r < b->reps; r++) {
		memset(dmafs_buf_ptr(hb), 0, b->size);
		ret = dmafs_place_file(hb, b->file, 0, &res);
		if (ret)
			die("host placement", ret);
		if (memcmp(dmafs_buf_ptr(hb), b->ref, b->size))
			die("host placement: bytes differ from the file", EIO);
		b->hostp = better(b->hostp, gbps(res.bytes, res.elapsed_ns / 1e9));
	}
	dmafs_buf_unregister(hb);
}

/* Pinned host memory -> device @d: the copy engine's ceiling. */
static void bench_h2d(struct bench *b, void *d)
{
	void *pinned;

	if (posix_memalign(&pinned, 4096, b->size))
		die("memory", ENOMEM);
	memcpy(pinned, b->ref, b->size);
	if (gpu_host_register(b->g, b->dev, pinned, b->size))
		die("pinning", EIO);
	for (int r = 0; r < b->reps; r++) {
		double t0 = now();

		if (gpu_copy_htod(b->g, b->dev, d, pinned, b->size))
			die("h2d", EIO);
		b->h2d = better(b->h2d, gbps(b->size, now() - t0));
	}
	gpu_host_unregister(b->g, b->dev, pinned);
	free(pinned);
}

/* dmafs placement into device memory @d, then every byte checked. */
static void bench_place_gpu(struct bench *b, void *d)
{
	struct dmafs_result res;
	struct dmafs_buf *gb;
	int ret;

	ret = b->gpu_target == DMAFS_TARGET_CUDA
		      ? dmafs_buf_register_cuda(b->s, d, b->size, b->dev, &gb)
		      : dmafs_buf_register_hip(b->s, d, b->size, b->dev, &gb);
	if (ret)
		die("registering device memory", ret);
	for (int r = 0; r < b->reps; r++) {
		ret = dmafs_place_file(gb, b->file, 0, &res);
		if (ret)
			die("device placement", ret);
		b->place_path = dmafs_path_name(res.path);
		b->place = better(b->place, gbps(res.bytes, res.elapsed_ns / 1e9));
	}
	memset(b->tmp, 0, b->size);
	if (gpu_copy_dtoh(b->g, b->dev, b->tmp, d, b->size) || memcmp(b->tmp, b->ref, b->size))
		die("device placement: bytes differ from the file", EIO);
	dmafs_buf_unregister(gb);
}

/* naive: POSIX read from the mount + a copy of each 64 MiB chunk to @d. */
static void bench_naive(struct bench *b, void *d)
{
	size_t chunk = 64 << 20;

	for (int r = 0; r < b->reps; r++) {
		int fd = open(b->file, O_RDONLY);
		double t0;

		if (fd < 0)
			die(b->file, errno);
		drop_caches();
		t0 = now();
		for (size_t off = 0; off < b->size; off += chunk) {
			size_t n = b->size - off < chunk ? b->size - off : chunk;

			if (dm_pread_full(fd, b->tmp, n, (off_t)off) != (ssize_t)n)
				die("pread", errno ? errno : EIO);
			if (gpu_copy_htod(b->g, b->dev, (char *)d + off, b->tmp, n))
				die("naive copy", EIO);
		}
		b->naive = better(b->naive, gbps(b->size, now() - t0));
		close(fd);
	}
}

static void bench_gpu(struct bench *b, int quiet)
{
	void *d;
	int ret;

	if (b->host_only) {
		snprintf(b->why, sizeof(b->why), "--target host");
		return;
	}
	b->have_gpu = gpu_load(b->gpu_target, &b->g, b->why, sizeof(b->why)) == 0;
	if (!b->have_gpu) {
		if (!quiet)
			tool_err("no %s target: %s", b->target, b->why);
		return;
	}
	ret = gpu_mem_alloc(b->g, b->dev, b->size, &d);
	if (ret)
		die("device memory", ret);
	bench_h2d(b, d);
	bench_place_gpu(b, d);
	bench_naive(b, d);
	gpu_mem_free(b->g, b->dev, d);
}

/* What checking checksums costs: XXH3 of every 4096-byte block, on one core (measured
 * last, so that it cannot disturb the placement figures). */
static void bench_hash(struct bench *b)
{
	uint64_t sink = 0;

	for (int r = 0; r < b->reps; r++) {
		double t0 = now();

		for (size_t o = 0; o + 4096 <= b->size; o += 4096)
			sink += XXH3_64bits_withSeed(b->ref + o, 4096, o);
		b->hash = better(b->hash, gbps(b->size, now() - t0));
	}
	b->hash += (sink == 42) * 1e-12; /* keep the loop */
}

static void print_table(const struct bench *b)
{
	printf("file %.2f GB over %d members, best of %d, GB/s = 10^9 B/s\n", b->size / 1e9,
	       b->nmembers, b->reps);
	printf("%-44s %8s\n", "measurement", "GB/s");
	printf("%-44s %8.2f\n", "raw O_DIRECT read of the members", b->raw);
	printf("%-44s %8.2f\n", "XXH3 of 4096-byte blocks, one core", b->hash);
	if (b->have_gpu) {
		double ceil = b->raw < b->h2d ? b->raw : b->h2d;

		printf("%-44s %8.2f\n", "pinned host->device copy", b->h2d);
		printf("%-44s %8.2f  (path %s)\n", "dmafs placement into GPU memory", b->place,
		       b->place_path);
		printf("%-44s %8.2f\n", "naive pread from the mount + cudaMemcpy", b->naive);
		printf("%-44s %8.2f\n", "dmafs placement into shared host memory", b->hostp);
		printf("%-44s %8.2f\n", "POSIX pread from the mount (cold)", b->posix);
		printf("\n%-44s %8s %8s\n", "ratio", "value", "goal");
		printf("%-44s %8.2f %8s\n", "GPU placement / min(raw, h2d)", b->place / ceil, ">=0.92");
		printf("%-44s %8.2f %8s\n", "GPU placement / host placement", b->place / b->hostp, ">=0.95");
		printf("%-44s %8.2f\n", "GPU placement / naive", b->place / b->naive);
		printf("%-44s %8.2f\n", "host placement / POSIX read", b->hostp / b->posix);
	} else {
		printf("%-44s %8.2f\n", "dmafs placement into shared host memory", b->hostp);
		printf("%-44s %8.2f\n", "POSIX pread from the mount (cold)", b->posix);
		printf("\n%-44s %8.2f\n", "host placement / raw", b->hostp / b->raw);
		printf("%-44s %8.2f\n", "host placement / POSIX read", b->hostp / b->posix);
	}
}

/* The figures as one JSON object; 0 for those not measured. */
static void print_json(const struct bench *b)
{
	printf("{\"bytes\": %zu, \"members\": %d, \"reps\": %d, \"target\": ", b->size,
	       b->nmembers, b->reps);
	json_str(b->target);
	printf(", \"gpu\": %s, \"why\": ", b->have_gpu ? "true" : "false");
	json_str(b->have_gpu ? "" : b->why);
	printf(", \"raw\": %.4f, \"hash\": %.4f, \"h2d\": %.4f, \"place\": %.4f, \"path\": ",
	       b->raw, b->hash, b->h2d, b->place);
	json_str(b->place_path);
	printf(", \"naive\": %.4f, \"host\": %.4f, \"posix\": %.4f}\n", b->naive, b->hostp,
	       b->posix);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "members", required_argument, NULL, 'm' },
		{ "target", required_argument, NULL, 't' },
		{ "reps", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char usage[] =
		"usage: dmafs-bench-place --file FILE --members A,B,... [--target cuda:N|hip:N|host]\n"
		"                         [--reps N] [--json]\n"
		"Times, on FILE of a dmafs mount whose members are A,B,...: raw O_DIRECT reads of the\n"
		"members' ranges that hold it, pinned host-to-device copies, placement into the GPU,\n"
		"pread + copy through the mount, and host placement against pread (best of N, default\n"
		"3; --target host: the host rows only); checks every placed byte; prints a table, or\n"
		"with --json the figures. `dmafs-bench place` sets up members, file and mount and runs\n"
		"it (dmafs-bench(1)).\n";
	struct bench b = { .target = "cuda:0", .reps = 3, .gpu_target = DMAFS_TARGET_CUDA,
			   .place_path = "-" };
	char *members[64], *list = NULL;
	struct stat st;
	int c, ret, json = 0;

	tool_init("dmafs-bench-place");
	while ((c = getopt_long(argc, argv, "f:m:t:r:h", lo, NULL)) != -1) {
		switch (c) {
		case 'f': b.file = optarg; break;
		case 'm': list = strdup(optarg); break;
		case 't': b.target = optarg; break;
		case 'r': b.reps = atoi(optarg); break;
		case 'j': json = 1; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return BENCH_EXIT_ERR;
		}
	}
	if (!b.file || !list) {
		fputs(usage, stderr);
		return BENCH_EXIT_ERR;
	}
	for (char *tok = strtok(list, ","); tok && b.nmembers < 64; tok = strtok(NULL, ","))
		members[b.nmembers++] = tok;
	b.members = members;
	if (!strcmp(b.target, "host"))
		b.host_only = 1;
	else if (!strncmp(b.target, "hip:", 4))
		b.gpu_target = DMAFS_TARGET_HIP;
	b.dev = atoi(strchr(b.target, ':') ? strchr(b.target, ':') + 1 : "0");
	if (stat(b.file, &st))
		die(b.file, errno);
	b.size = (size_t)st.st_size;
	b.ref = malloc(b.size);
	b.tmp = malloc(b.size);
	if (!b.ref || !b.tmp)
		die("memory", ENOMEM);
	ret = dmafs_session_open(b.file, &b.s);
	if (ret)
		die("session", ret);
	bench_posix(&b);
	for (int r = 0; r < b.reps; r++)
		b.raw = better(b.raw, raw_read(b.file, b.members, b.nmembers));
	bench_host(&b);
	bench_gpu(&b, json);
	bench_hash(&b);
	dmafs_session_close(b.s);
	if (json)
		print_json(&b);
	else
		print_table(&b);
	return BENCH_EXIT_OK;
}
