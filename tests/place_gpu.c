// SPDX-License-Identifier: MIT
/*
 * Description: placement into GPU memory (CUDA, or HIP with DMAFS_TEST_TARGET=hip) through
 * libdmafs. Mode basic: byte-exact whole-file and random unaligned ranges across stripe
 * boundaries, several buffers registered by one client, concurrent client processes.
 * Mode pipe (a mount with a small staging ring, p2p off): concurrent placements into one
 * device buffer, into several, and from several processes; misaligned single ranges 4x-16x
 * the ring; unaligned ranges around stripe-unit boundaries and to EOF with the device
 * bytes around them untouched; clients killed mid-placement, each followed by a working
 * placement. Every mode starts with the cold start: the very first registration and
 * placement after a fresh mount, with no wait, must be byte-exact (mode cold: the first
 * placements come from 4 threads at once). Device memory is copied back with the runtime
 * and compared with the reference file. Exits 77 with the reason when no GPU runtime or
 * device is present.
 * Usage: place_gpu basic|pipe|cold FILE_ON_DMAFS REF [RING_MB]   (REF: FILE's contents,
 * outside dmafs; RING_MB: the mount's staging_mb, for pipe); place_gpu probe: exit 0 when
 * a GPU is usable, 77 with the reason when not.
 *
 * Mode basic's client is in place_gpu-basic.c; place_gpu.h declares what the two share.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dmafs.h"
#include "gpu.h"
#define T_UNIT_SHARED /* t_failures: one count for both files (place_gpu.h) */
#include "t_place.h"
#include "t_unit.h"
#include "place_gpu.h"

/* Seconds one placement (or one set of concurrent ones) may take before it counts as hung. */
#ifndef HANG_S
#define HANG_S 120
#endif

int t_failures;
const char *path;
char *ref;
uint64_t fsize;
static uint64_t ring, su;
static unsigned members;
int target = DMAFS_TARGET_CUDA;
static int want_staged; /* the mount has p2p=off: every placement must take the staged path */
/* The direct path the mount offers (dmafs_session_caps): P2P, P2P_COMPAT (cuFile forced
 * without nvidia-fs) or STAGED; a placement reports it or STAGED, never p2p in compat mode */
int mount_path = DMAFS_PATH_STAGED;

int path_ok(int p)
{
	return p == DMAFS_PATH_STAGED || p == mount_path;
}

int reg(struct dmafs_session *s, struct gpu *g, void *d, size_t size, struct dmafs_buf **b)
{
	(void)g;
	return target == DMAFS_TARGET_CUDA ? dmafs_buf_register_cuda(s, d, size, 0, b)
					   : dmafs_buf_register_hip(s, d, size, 0, b);
}

/* ---- device buffers checked whole ---- */

struct dbuf {
	struct dmafs_buf *b;
	void *d;	/* device pointer of the allocation */
	uint64_t size;
};

static struct dmafs_session *open_session(void)
{
	struct dmafs_session *s;
	struct dmafs_caps caps;
	int ret = dmafs_session_open(path, &s);

	if (ret || (ret = dmafs_session_caps(s, &caps)) || !caps.on_dmafs) {
		fprintf(stderr, "%s: no session with the dmafs daemon: %s\n", path,
			ret ? dmafs_strerror(ret) : "posix fallback");
		exit(1);
	}
	return s;
}

/* Allocate @size bytes of device memory; exits on failure. */
static void dbuf_alloc(struct gpu *g, uint64_t size, struct dbuf *db)
{
	int ret = gpu_mem_alloc(g, 0, size, &db->d);

	if (ret) {
		fprintf(stderr, "device allocation of %llu bytes: %s\n", (unsigned long long)size, strerror(-ret));
		exit(1);
	}
	db->size = size;
}

/* Register the allocation with the daemon; exits on failure. */
static void dbuf_register(struct gpu *g, struct dmafs_session *s, struct dbuf *db)
{
	int ret = reg(s, g, db->d, db->size, &db->b);

	if (ret) {
		fprintf(stderr, "registering %llu bytes of device memory: %s\n", (unsigned long long)db->size,
			dmafs_strerror(ret));
		exit(1);
	}
}

static void dbuf_new(struct gpu *g, struct dmafs_session *s, uint64_t size, struct dbuf *db)
{
	dbuf_alloc(g, size, db);
	dbuf_register(g, s, db);
}

static void dbuf_free(struct gpu *g, struct dbuf *db)
{
	int ret;

	t_ok(dmafs_buf_unregister(db->b), "dmafs_buf_unregister");
	ret = gpu_mem_free(g, 0, db->d);
	T_CHECK(ret == 0, "freeing device memory: %s", strerror(-ret));
}

/* Fill the first @size bytes with the canary, and return only once it is in device memory. */
static void dbuf_canary(struct gpu *g, struct dbuf *db, uint64_t size)
{
	char *c = malloc(size);
	int ret;

	if (!c)
		exit(1);
	memset(c, T_CANARY, size);
	ret = gpu_copy_htod(g, 0, db->d, c, size);
	/* A synchronous copy from pageable memory may return before its DMA reaches device
	 * memory; the daemon's copies must land after it: wait for the default stream. */
	if (!ret)
		ret = gpu_stream_sync(g, 0, NULL);
	T_CHECK(ret == 0, "filling device memory with the canary: %s", strerror(-ret));
	free(c);
}

/* Copy the first @size bytes back and compare them with the reference placed by @want. */
static int dbuf_check(struct gpu *g, struct dbuf *db, uint64_t size, const struct dmafs_extent *want,
		      size_t n, const char *what)
{
	char *back = malloc(size), *exp = malloc(size);
	int ret;

	if (!back || !exp)
		exit(1);
	ret = gpu_copy_dtoh(g, 0, back, db->d, size);
	T_CHECK(ret == 0, "%s: copying device memory back: %s", what, strerror(-ret));
	t_expect(exp, size, ref, fsize, want, n);
	ret = ret ? 1 : t_compare(back, exp, size, fsize, want, n, what);
	free(back);
	free(exp);
	return ret;
}

#define PD_GUARD 1  /* bound the placement with t_guard (one thread of a process at a time) */
#define PD_FILLED 2 /* the canary is in place already: place at once */

/*
 * Fill the first @size bytes of @db (0: all) with the canary, place @n extents in one
 * call, and check the result, the lengths and every one of those bytes. @flags: PD_*.
 */
static int place_dev(struct gpu *g, struct dbuf *db, int fd, const struct dmafs_extent *want, size_t n,
		     uint64_t size, int flags, const char *what)
{
	struct dmafs_extent *e = malloc(n * sizeof(*e));
	struct dmafs_result r;
	uint64_t total = 0;
	int ret;

	if (!e)
		exit(1);
	if (!size)
		size = db->size;
	memcpy(e, want, n * sizeof(*e));
	if (!(flags & PD_FILLED))
		dbuf_canary(g, db, size);
	if (flags & PD_GUARD)
		t_guard(HANG_S, what);
	ret = dmafs_place(db->b, fd, e, n, &r);
	if (flags & PD_GUARD)
		t_guard(0, NULL);
	T_CHECK(ret == 0, "%s: %s", what, dmafs_strerror(ret));
	if (!ret) {
		for (size_t i = 0; i < n; i++)
			total += t_ext_len(&want[i], fsize);
		T_CHECK(!want_staged || r.path == DMAFS_PATH_STAGED, "%s: path %s, want staged (p2p=off)", what,
			dmafs_path_name(r.path));
		T_CHECK(path_ok(r.path), "%s: path %s (the mount offers %s)", what, dmafs_path_name(r.path),
			dmafs_path_name(mount_path));
		T_CHECK(r.bytes == total, "%s: %llu bytes placed, want %llu", what, (unsigned long long)r.bytes,
			(unsigned long long)total);
		t_check_lengths(e, want, n, fsize, what);
		dbuf_check(g, db, size, want, n, what);
	}
	free(e);
	return ret;
}

static int open_file(void)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	return fd;
}

/* ---- processes ---- */

/*
 * Fork a client process. CUDA does not survive fork(): in pipe and cold modes this process
 * never loads the runtime, and every client loads it for itself. A client dies with this
 * process (a failing test must not leave one placing forever).
 */
static pid_t fork_client(void)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		t_failures = 0; /* its own verdict, not its parent's */
	}
	return pid;
}

/* The GPU runtime, in a client process; without one the client exits with @fail_status
 * (77: skip, with the reason printed). */
static struct gpu *load_gpu_or(int fail_status)
{
	struct gpu *g;
	char why[256];

	if (gpu_load(target, &g, why, sizeof(why))) {
		if (fail_status == 77)
			printf("SKIP: no %s GPU: %s\n", target == DMAFS_TARGET_HIP ? "HIP" : "CUDA", why);
		else
			fprintf(stderr, "GPU runtime in a client process: %s\n", why);
		fflush(stdout);
		_exit(fail_status);
	}
	return g;
}

static struct gpu *load_gpu(void) { return load_gpu_or(1); }

/* Run @fn(@g, @arg) in a new client process with the runtime loaded there (exit status
 * @nogpu without one); wait for it at most @secs. Returns its exit status (-1: timed out
 * or killed). */
static int in_client_rc(const char *what, unsigned secs, int nogpu, void (*fn)(struct gpu *, void *),
			void *arg)
{
	pid_t pid = fork_client();

	if (pid == 0) {
		fn(load_gpu_or(nogpu), arg);
		fflush(stdout);
		_exit(__atomic_load_n(&t_failures, __ATOMIC_RELAXED) ? 1 : 0);
	}
	return t_wait(pid, secs, 0, what);
}

/* in_client_rc(), where a failure there is one here. */
static void in_client(const char *what, unsigned secs, void (*fn)(struct gpu *, void *), void *arg)
{
	int ret = in_client_rc(what, secs, 1, fn, arg);

	T_CHECK(ret == 0, "client process: %s failed (see above)", what);
}

/*
 * The cold start, in the first process of this test to load the GPU runtime (the script
 * probed before mounting, so that nothing delays the first placement after the mount
 * but the client's own start). Returns 77 when there is no GPU after all, else 0.
 */
static int cold_client(const char *what, void (*fn)(struct gpu *, void *), void *arg)
{
	int ret = in_client_rc(what, 3 * HANG_S, 77, fn, arg);

	if (ret == 77)
		return 77;
	T_CHECK(ret == 0, "client process: %s failed (see above)", what);
	return 0;
}

/* ---- cold start ---- */

struct cold_arg {
	unsigned threads;
};

/*
 * The very first registration and placement after a fresh mount, with no wait between
 * them (the canary is filled before registering): the whole file into one device buffer,
 * misaligned (1 thread), or split over several threads placing at the same moment.
 */
static void cold_main(struct gpu *g, void *arg)
{
	struct cold_arg *a = arg;
	struct dmafs_session *s = open_session();
	struct dbuf db;
	char what[120];

	if (a->threads <= 1) {
		struct dmafs_extent e = { 0, DMAFS_TO_EOF, 4097 };
		int fd = open_file();

		dbuf_alloc(g, fsize + 2 * T_BLOCK, &db);
		dbuf_canary(g, &db, db.size);
		dbuf_register(g, s, &db);
		snprintf(what, sizeof(what), "cold start: first placement (whole file, misaligned) after the mount");
		place_dev(g, &db, fd, &e, 1, 0, PD_GUARD | PD_FILLED, what);
		close(fd);
	} else {
		struct dmafs_extent e[6 * 64], want[6 * 64];
		unsigned long long seed = 3;
		size_t first[65];
		uint64_t size = t_split(fsize, a->threads, &seed, e, first);

		memcpy(want, e, first[a->threads] * sizeof(e[0]));
		dbuf_alloc(g, size, &db);
		dbuf_canary(g, &db, size);
		dbuf_register(g, s, &db);
		snprintf(what, sizeof(what), "cold start: %u threads placing at once, first after the mount",
			 a->threads);
		t_guard(HANG_S, what);
		t_place_threads(db.b, path, e, first, a->threads, 9, DMAFS_PATH_STAGED);
		t_guard(0, NULL);
		t_check_lengths(e, want, first[a->threads], fsize, what);
		dbuf_check(g, &db, size, want, first[a->threads], what);
	}
	dbuf_free(g, &db);
	dmafs_session_close(s);
}

/* ---- pipe: concurrency ---- */

struct conc_arg {
	unsigned threads;
	int rounds;
	unsigned long long seed;
	const char *who;
};

/* @threads threads place disjoint parts of the whole file into one device buffer, mixed
 * aligned and misaligned, @rounds times; the whole buffer is checked after each round. */
static void one_buffer_main(struct gpu *g, void *arg)
{
	struct conc_arg *a = arg;
	struct dmafs_session *s = open_session();
	struct dmafs_extent e[6 * 64], want[6 * 64];
	unsigned long long seed = a->seed;
	size_t first[65];
	uint64_t size = t_split(fsize, a->threads, &seed, e, first);
	struct dbuf db;
	char what[160];

	dbuf_new(g, s, size, &db);
	for (int round = 0; round < a->rounds; round++) {
		t_split(fsize, a->threads, &seed, e, first);
		memcpy(want, e, first[a->threads] * sizeof(e[0]));
		snprintf(what, sizeof(what), "%s: %u threads into one device buffer, round %d (%zu extents)", a->who,
			 a->threads, round, first[a->threads]);
		dbuf_canary(g, &db, size);
		t_guard(HANG_S, what);
		t_place_threads(db.b, path, e, first, a->threads, seed + 1000 * round, DMAFS_PATH_STAGED);
		t_guard(0, NULL);
		t_check_lengths(e, want, first[a->threads], fsize, what);
		dbuf_check(g, &db, size, want, first[a->threads], what);
	}
	dbuf_free(g, &db);
	dmafs_session_close(s);
}

struct own {
	struct gpu *g;
	struct dmafs_session *s;
	unsigned long long seed;
	int k;
	pthread_t t;
};

/* A thread with a device buffer of its own: random ranges of up to 3 rings, each placed
 * alone and checked with the bytes around it. */
static void *own_main(void *arg)
{
	struct own *o = arg;
	int fd = open_file();
	struct dbuf db;
	char what[160];

	dbuf_new(o->g, o->s, 3 * ring + 2 * T_BLOCK, &db);
	for (int i = 0; i < 4; i++) {
		uint64_t len = 1 + t_rand(&o->seed) % (3 * ring), end;
		struct dmafs_extent e = t_range(fsize, len, t_mis(o->k + i, &o->seed), t_rand(&o->seed) % 4096,
						&o->seed, &end);

		snprintf(what, sizeof(what), "thread %d with its own device buffer: file [%llu, +%llu) at %llu",
			 o->k, (unsigned long long)e.file_offset, (unsigned long long)e.length,
			 (unsigned long long)e.buffer_offset);
		place_dev(o->g, &db, fd, &e, 1, 0, 0, what);
	}
	close(fd);
	dbuf_free(o->g, &db);
	return NULL;
}

static void own_buffers_main(struct gpu *g, void *arg)
{
	struct conc_arg *a = arg;
	struct dmafs_session *s = open_session();
	struct own o[16];

	t_guard(HANG_S, "threads with device buffers of their own");
	for (unsigned i = 0; i < a->threads; i++) {
		o[i] = (struct own){ g, s, a->seed + i, (int)i, 0 };
		if (pthread_create(&o[i].t, NULL, own_main, &o[i]))
			exit(1);
	}
	for (unsigned i = 0; i < a->threads; i++)
		pthread_join(o[i].t, NULL);
	t_guard(0, NULL);
	dmafs_session_close(s);
}

static void test_concurrent(void)
{
	struct conc_arg one = { 8, 3, 11, "client 0" }, own = { 8, 0, 21, "client 0" };
	struct conc_arg many[4] = { { 4, 2, 100, "client 1" }, { 4, 2, 101, "client 2" },
				    { 4, 2, 102, "client 3" }, { 6, 0, 31, "client 4" } };
	pid_t pids[4];
	int bad = 0;

	printf("concurrent: 8 threads into one device buffer\n");
	in_client("8 threads into one device buffer", 3 * HANG_S, one_buffer_main, &one);
	printf("concurrent: 8 threads, each its own device buffer\n");
	in_client("8 threads with their own device buffers", 3 * HANG_S, own_buffers_main, &own);
	printf("concurrent: 4 client processes at once (3 with 4 threads into one buffer, 1 with 6 "
	       "threads into their own)\n");
	for (int k = 0; k < 4; k++) {
		pids[k] = fork_client();
		if (pids[k] == 0) {
			(k < 3 ? one_buffer_main : own_buffers_main)(load_gpu(), &many[k]);
			fflush(stdout);
			_exit(__atomic_load_n(&t_failures, __ATOMIC_RELAXED) ? 1 : 0);
		}
	}
	for (int k = 0; k < 4; k++)
		bad += t_wait(pids[k], 3 * HANG_S, 0, "concurrent client process") != 0;
	T_EQ(bad, 0);
}

/* ---- pipe: larger than the ring ---- */

static void big_main(struct gpu *g, void *arg)
{
	struct dmafs_session *s = open_session();
	const uint64_t lens[] = { 4 * ring, 8 * ring + 4097, 12 * ring - 1, 16 * ring };
	const unsigned mis[] = { 1, T_BLOCK - 1, 2048, 0 };
	unsigned long long seed = 5;
	int fd = open_file();
	struct dbuf db;
	char what[200];

	(void)arg;
	dbuf_new(g, s, fsize + 2 * T_MIB, &db);
	for (size_t i = 0; i < 4; i++) {
		for (int m = 0; m < 2; m++) {
			unsigned mi = m ? 1 + (unsigned)(t_rand(&seed) % (T_BLOCK - 1)) : mis[i];
			uint64_t end;
			struct dmafs_extent e = t_range(fsize, lens[i], mi, t_rand(&seed) % (2 * T_MIB - 8192),
							&seed, &end);

			snprintf(what, sizeof(what), "one range of %.1f rings (%llu bytes) from file offset %llu "
				 "into device memory, misaligned by %u", (double)e.length / ring,
				 (unsigned long long)e.length, (unsigned long long)e.file_offset, mi);
			printf("big: %s\n", what);
			place_dev(g, &db, fd, &e, 1, 0, PD_GUARD, what);
		}
	}
	{
		struct dmafs_extent e = { 0, DMAFS_TO_EOF, 777 };

		place_dev(g, &db, fd, &e, 1, 0, PD_GUARD, "the whole file to EOF at device offset 777");
	}
	close(fd);
	dbuf_free(g, &db);
	dmafs_session_close(s);
}

/* ---- pipe: stripe-unit boundaries and the tail ---- */

static void edges_main(struct gpu *g, void *arg)
{
	struct dmafs_session *s = open_session();
	unsigned long long seed = 77;
	struct dmafs_extent e[64];
	uint64_t bnd[64], size, nb = 0;
	int fd = open_file();
	struct dbuf db;
	char what[160];
	size_t n;

	(void)arg;
	dbuf_new(g, s, 49 * (2 * su + 3 * T_BLOCK), &db);
	for (uint64_t k = 1; k <= 2 * members && k * su < fsize; k++)
		bnd[nb++] = k * su;
	for (int k = 0; k < 4; k++)
		bnd[nb++] = (1 + t_rand(&seed) % (fsize / su - 1)) * su;
	bnd[nb++] = ((fsize - 1) / su - 1) * su;
	bnd[nb++] = (fsize - 1) / su * su;
	printf("edges: %llu stripe-unit boundaries (stripe unit %llu, %u members), 49 ranges each\n",
	       (unsigned long long)nb, (unsigned long long)su, members);
	for (uint64_t k = 0; k < nb; k++) {
		n = t_edge_extents(bnd[k], su, fsize, &seed, e, &size);
		T_CHECK(size <= db.size, "edge buffer too small");
		snprintf(what, sizeof(what), "%zu ranges around the boundary at %llu into device memory, in one call",
			 n, (unsigned long long)bnd[k]);
		place_dev(g, &db, fd, e, n, size, PD_GUARD, what);
		if (k % 4 == 0) {
			for (size_t i = 0; i < n; i += 5) {
				snprintf(what, sizeof(what), "range %zu around the boundary at %llu, alone", i,
					 (unsigned long long)bnd[k]);
				place_dev(g, &db, fd, &e[i], 1, size, PD_GUARD, what);
			}
		}
	}
	n = t_tail_extents(su, fsize, &seed, e, &size);
	T_CHECK(size <= db.size, "tail buffer too small");
	printf("edges: %zu ranges of the tail, to EOF and past it\n", n);
	place_dev(g, &db, fd, e, n, size, PD_GUARD, "ranges of the file's tail into device memory, in one call");
	for (size_t i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "tail range %zu (file offset %llu, %s), alone", i,
			 (unsigned long long)e[i].file_offset, e[i].length == DMAFS_TO_EOF ? "to EOF" : "past EOF");
		place_dev(g, &db, fd, &e[i], 1, size, PD_GUARD, what);
	}
	close(fd);
	dbuf_free(g, &db);
	dmafs_session_close(s);
}

/* ---- pipe: clients killed mid-placement ---- */

/* A client that registers device memory and places big misaligned ranges until it is
 * killed; it writes one byte to @ready before its first placement. */
static void victim(int ready, unsigned long long seed)
{
	struct gpu *g = load_gpu();
	struct dmafs_session *s = open_session();
	int fd = open_file();
	struct dbuf db;
	char c = 1;

	dbuf_new(g, s, fsize + 2 * T_BLOCK, &db);
	if (write(ready, &c, 1) != 1)
		_exit(1);
	for (;;) {
		uint64_t len = 2 * ring + t_rand(&seed) % (fsize - 2 * ring), end;
		struct dmafs_extent e = t_range(fsize, len, 1 + (unsigned)(t_rand(&seed) % (T_BLOCK - 1)), 0,
						&seed, &end);

		dmafs_place(db.b, fd, &e, 1, NULL);
	}
}

struct after_arg {
	int round;
	unsigned long long seed;
};

/* Right after a kill: a 6-ring misaligned placement (the whole file after the last round). */
static void after_kill_main(struct gpu *g, void *arg)
{
	struct after_arg *a = arg;
	struct dmafs_session *s = open_session();
	int fd = open_file();
	struct dbuf db;
	char what[160];

	if (a->round >= 0) {
		unsigned mis = 1 + (unsigned)(t_rand(&a->seed) % (T_BLOCK - 1));
		uint64_t end;
		struct dmafs_extent e = t_range(fsize, 6 * ring, mis, 0, &a->seed, &end);

		dbuf_new(g, s, 6 * ring + 2 * T_BLOCK, &db);
		snprintf(what, sizeof(what), "round %d: a 6-ring placement into device memory after killing two "
			 "clients (file offset %llu, misaligned by %u)", a->round, (unsigned long long)e.file_offset, mis);
		place_dev(g, &db, fd, &e, 1, 0, PD_GUARD, what);
	} else {
		struct dmafs_extent e = { 0, DMAFS_TO_EOF, 4095 };

		dbuf_new(g, s, fsize + 2 * T_BLOCK, &db);
		place_dev(g, &db, fd, &e, 1, 0, PD_GUARD, "the whole file into device memory, misaligned, after all kills");
	}
	close(fd);
	dbuf_free(g, &db);
	dmafs_session_close(s);
}

static void test_kill(void)
{
	unsigned long long seed = (unsigned long long)time(NULL) ^ getpid();
	int rounds = 4;

	printf("kill: seed %llu\n", seed);
	for (int round = 0; round < rounds; round++) {
		struct after_arg a = { round, seed + round };
		pid_t v[2];
		int pfd[2];
		char c;

		if (pipe(pfd))
			exit(1);
		for (int k = 0; k < 2; k++) {
			v[k] = fork_client();
			if (v[k] == 0) {
				close(pfd[0]);
				victim(pfd[1], seed + 7919 * round + k);
			}
		}
		close(pfd[1]);
		t_guard(HANG_S, "GPU clients registering device memory");
		for (int k = 0; k < 2; k++)
			T_CHECK(read(pfd[0], &c, 1) == 1, "round %d: a GPU client did not get to place", round);
		t_guard(0, NULL);
		close(pfd[0]);
		usleep(20000 + t_rand(&seed) % 280000);
		for (int k = 0; k < 2; k++)
			kill(v[k], SIGKILL);
		/* a killed client lives on until the daemon answers its running placement */
		for (int k = 0; k < 2; k++) {
			int rc = t_wait(v[k], 60, SIGKILL, "a GPU client killed mid-placement");
			int killed_client_ended = rc >= 0, lived_until_killed = rc <= 0;

			T_CHECK(killed_client_ended, "round %d: the daemon never finished the placement of a "
				"killed GPU client", round);
			T_CHECK(lived_until_killed, "round %d: a GPU client ended by itself (status %d)", round, rc);
			if (rc)
				return;
		}
		in_client("a placement after killing GPU clients", 3 * HANG_S, after_kill_main, &a);
	}
	{
		struct after_arg a = { -1, seed };

		sleep(2); /* the dead clients' registrations are released by now */
		in_client("a whole-file placement after all kills", 3 * HANG_S, after_kill_main, &a);
	}
}

int main(int argc, char **argv)
{
	struct cold_arg cold = { 1 };
	const char *mode = argc > 1 ? argv[1] : "";
	struct gpu *g;
	char why[256];
	pid_t pids[3], probe;
	int bad = 0, stt;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(mode, "probe") &&
	    (argc < 4 || (strcmp(mode, "basic") && strcmp(mode, "pipe") && strcmp(mode, "cold")) ||
	     (!strcmp(mode, "pipe") && argc != 5))) {
		fprintf(stderr, "usage: place_gpu basic|cold FILE REF\n"
				"       place_gpu pipe FILE REF RING_MB\n"
				"       place_gpu probe   (exit 0 when a GPU is usable here, 77 with the reason if not)\n");
		return 1;
	}
	if (getenv("DMAFS_TEST_TARGET") && !strcmp(getenv("DMAFS_TEST_TARGET"), "hip"))
		target = DMAFS_TARGET_HIP;
	/* CUDA cannot be used in a child forked after the parent initialised it: the runtime
	 * is loaded in client processes only (in basic mode, here too once they are forked). */
	if (!strcmp(mode, "probe")) {
		probe = fork();
		if (probe == 0)
			_exit(load_gpu_or(77) ? 0 : 1);
		waitpid(probe, &stt, 0);
		return WIFEXITED(stt) ? WEXITSTATUS(stt) : 1;
	}
	path = argv[2];
	ref = t_ref_load(argv[3], &fsize);
	t_guard_mount(path);
	{
		struct dmafs_session *s = open_session();
		struct dmafs_caps caps;

		t_ok(dmafs_session_caps(s, &caps), "dmafs_session_caps");
		su = caps.stripe_unit;
		members = caps.members;
		mount_path = target == DMAFS_TARGET_HIP ? caps.hip.path : caps.cuda.path;
		if (mount_path != DMAFS_PATH_P2P && mount_path != DMAFS_PATH_P2P_COMPAT)
			mount_path = DMAFS_PATH_STAGED;
		dmafs_session_close(s);
	}

	/* the cold start comes first: nothing has been registered or placed on this mount */
	if (!strcmp(mode, "cold")) {
		want_staged = 1;
		cold.threads = 4;
		printf("cold: 4 threads place into one device buffer at once, first after the mount\n");
		if (cold_client("cold start, 4 threads", cold_main, &cold) == 77)
			return 77;
		return t_done("place_gpu cold");
	}
	if (!strcmp(mode, "pipe")) {
		want_staged = 1;
		ring = strtoull(argv[4], NULL, 0) << 20;
		if (fsize <= 16 * ring) {
			fprintf(stderr, "the file (%llu bytes) must hold 16 rings of %llu bytes and more\n",
				(unsigned long long)fsize, (unsigned long long)ring);
			return 1;
		}
	}
	printf("%s: cold start: the first registration and placement after the mount\n", mode);
	if (cold_client("cold start", cold_main, &cold) == 77)
		return 77;
	if (!strcmp(mode, "pipe")) {
		/* in order, stopping at the first that fails (a hang leaves the mount aborted) */
		if (!t_failures)
			test_concurrent();
		if (!t_failures) {
			printf("big: single misaligned ranges of 4 to 16 rings\n");
			in_client("ranges larger than the ring", 3 * HANG_S, big_main, NULL);
		}
		if (!t_failures)
			in_client("ranges at stripe-unit boundaries", 3 * HANG_S, edges_main, NULL);
		if (!t_failures)
			test_kill();
		return t_done("place_gpu pipe");
	}

	/* basic: four concurrent clients, three children and this process, each with its buffers */
	for (int k = 0; k < 3; k++) {
		pids[k] = fork_client();
		if (pids[k] == 0)
			_exit(run_client(load_gpu(), 100 + k) ? 1 : 0);
	}
	if (gpu_load(target, &g, why, sizeof(why))) {
		fprintf(stderr, "GPU vanished: %s\n", why);
		return 1;
	}
	run_client(g, 1);
	for (int k = 0; k < 3; k++)
		bad += t_wait(pids[k], 3 * HANG_S, 0, "basic client process") != 0;
	T_EQ(bad, 0);
	return t_done("place_gpu basic");
}
