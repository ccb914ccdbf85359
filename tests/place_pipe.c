// SPDX-License-Identifier: MIT
/*
 * Description: host placements through a mount with a small staging ring (staging_mb):
 * many concurrent placements into one buffer, into several buffers and from several
 * processes; single ranges 4x-16x the ring, misaligned; unaligned ranges around every
 * stripe-unit boundary and the file's tail, with the bytes around them untouched; clients
 * killed mid-placement, after which a placement needing the whole ring several times still
 * completes; and, under verify_place, a damaged block failing every placement that covers
 * it, through the ring, while placements around it stay exact. Every byte is compared
 * with the reference file; every wait is bounded, so a leaked ring fails instead of hanging.
 *
 * Usage: place_pipe concurrent|big|edges|kill FILE REF RING_MB
 *        place_pipe verify FILE REF RING_MB BAD   (BAD: file offset of a flipped byte)
 *        place_pipe where FILE                     (print "BLOCK MEMBER MEMBER_OFFSET" of a
 *                                                   block of FILE to damage)
 *        place_pipe flip IMAGE OFFSET              (XOR one byte of a member image)
 * FILE is on a dmafs mount mounted with -o staging_mb=RING_MB; REF is a copy outside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dmafs.h"
#include "t_place.h"
#include "t_unit.h"

/* Seconds any one placement (or set of concurrent ones) may take before it counts as hung:
 * generous for a loaded 2-core machine, where a 64 MiB placement takes well under 1 s. */
#ifndef HANG_S
#define HANG_S 120
#endif

static const char *path;  /* the file on dmafs */
static char *ref;	  /* its contents */
static uint64_t fsize, ring, su;
static unsigned members;

/* A session on the mount, checked to really be on dmafs (not the posix fallback); its
 * capabilities in *out when @out is not NULL. Exits on failure. */
static struct dmafs_session *open_session_caps(struct dmafs_caps *out)
{
	struct dmafs_session *s;
	struct dmafs_caps caps;
	int ret = dmafs_session_open(path, &s);

	if (ret) {
		fprintf(stderr, "dmafs_session_open %s: %s\n", path, dmafs_strerror(ret));
		exit(1);
	}
	ret = dmafs_session_caps(s, &caps);
	if (ret || !caps.on_dmafs || caps.host.path != DMAFS_PATH_HOST) {
		fprintf(stderr, "%s: not served by the dmafs daemon (%s): %s\n", path,
			ret ? dmafs_strerror(ret) : "posix fallback", caps.host.why);
		exit(1);
	}
	if (out)
		*out = caps;
	return s;
}

static struct dmafs_session *open_session(void) { return open_session_caps(NULL); }

/* A forked client: killed with its parent (a failing test must not leave one placing
 * forever), and bounded in time by itself. */
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
		alarm(2 * HANG_S);
		t_failures = 0; /* its own verdict, not its parent's */
	}
	return pid;
}

static struct dmafs_buf *alloc(struct dmafs_session *s, uint64_t size)
{
	struct dmafs_buf *b;
	int ret = dmafs_buf_alloc_host(s, size, &b);

	if (ret) {
		fprintf(stderr, "dmafs_buf_alloc_host(%llu): %s\n", (unsigned long long)size, dmafs_strerror(ret));
		exit(1);
	}
	return b;
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

/*
 * Fill the first @size bytes of @b with the canary, place @n extents in one call, and
 * check the call, the lengths it reports and every one of those bytes. Safe from several
 * threads (each with its own buffer). Returns dmafs_place()'s result.
 */
static int place_verify(struct dmafs_buf *b, int fd, const struct dmafs_extent *want, size_t n,
			uint64_t size, const char *what)
{
	struct dmafs_extent *e = malloc(n * sizeof(*e));
	char *exp = malloc(size);
	struct dmafs_result r;
	uint64_t total = 0;
	int ret;

	if (!e || !exp)
		exit(1);
	memcpy(e, want, n * sizeof(*e));
	memset(dmafs_buf_ptr(b), T_CANARY, size);
	ret = dmafs_place(b, fd, e, n, &r);
	T_CHECK(ret == 0, "%s: %s", what, dmafs_strerror(ret));
	if (!ret) {
		for (size_t i = 0; i < n; i++)
			total += t_ext_len(&want[i], fsize);
		T_CHECK(r.path == DMAFS_PATH_HOST, "%s: path %s, want host", what, dmafs_path_name(r.path));
		T_CHECK(r.bytes == total, "%s: %llu bytes placed, want %llu", what,
			(unsigned long long)r.bytes, (unsigned long long)total);
		t_check_lengths(e, want, n, fsize, what);
		t_expect(exp, size, ref, fsize, want, n);
		t_compare(dmafs_buf_ptr(b), exp, size, fsize, want, n, what);
	}
	free(exp);
	free(e);
	return ret;
}

/* place_verify() over the first @size bytes of @b (0: all of it), from the main thread,
 * failing the test after HANG_S seconds. */
static int place_check(struct dmafs_buf *b, int fd, const struct dmafs_extent *want, size_t n,
		       uint64_t size, const char *what)
{
	int ret;

	t_guard(HANG_S, what);
	ret = place_verify(b, fd, want, n, size ? size : dmafs_buf_size(b), what);
	t_guard(0, NULL);
	return ret;
}

/* ---- 1. concurrency ---- */

/* @t threads place disjoint parts of the whole file into one buffer, mixed aligned and
 * misaligned, @rounds times (new cuts each round); the buffer is checked after each. */
static void one_buffer(struct dmafs_session *s, unsigned t, int rounds, unsigned long long seed,
		       const char *who)
{
	struct dmafs_extent e[6 * 64], want[6 * 64];
	size_t first[65];
	uint64_t size = t_split(fsize, t, &seed, e, first);
	struct dmafs_buf *b = alloc(s, size);
	char *exp = malloc(size), what[160];

	for (int round = 0; round < rounds; round++) {
		size = t_split(fsize, t, &seed, e, first);
		memcpy(want, e, first[t] * sizeof(e[0]));
		snprintf(what, sizeof(what), "%s: %u threads into one buffer, round %d (%zu extents)", who, t,
			 round, first[t]);
		memset(dmafs_buf_ptr(b), T_CANARY, size);
		t_guard(HANG_S, what);
		t_place_threads(b, path, e, first, t, seed + 1000 * round, DMAFS_PATH_HOST);
		t_guard(0, NULL);
		t_check_lengths(e, want, first[t], fsize, what);
		t_expect(exp, size, ref, fsize, want, first[t]);
		t_compare(dmafs_buf_ptr(b), exp, size, fsize, want, first[t], what);
	}
	free(exp);
	t_ok(dmafs_buf_unregister(b), "dmafs_buf_unregister");
}

struct own {
	struct dmafs_session *s;
	unsigned long long seed;
	int k;
	pthread_t t;
};

/* One thread with a buffer of its own: a few random ranges of up to 3 rings, each placed
 * alone and checked with the bytes around it. */
static void *own_main(void *arg)
{
	struct own *o = arg;
	uint64_t size = 3 * ring + 2 * T_BLOCK;
	struct dmafs_buf *b = alloc(o->s, size);
	int fd = open_file();
	char what[160];

	for (int i = 0; i < 4; i++) {
		uint64_t len = 1 + t_rand(&o->seed) % (3 * ring), end;
		struct dmafs_extent e = t_range(fsize, len, t_mis(o->k + i, &o->seed), t_rand(&o->seed) % 4096,
						&o->seed, &end);

		snprintf(what, sizeof(what), "thread %d with its own buffer: file [%llu, +%llu) at buffer %llu",
			 o->k, (unsigned long long)e.file_offset, (unsigned long long)e.length,
			 (unsigned long long)e.buffer_offset);
		place_verify(b, fd, &e, 1, size, what);
	}
	close(fd);
	t_ok(dmafs_buf_unregister(b), "dmafs_buf_unregister");
	return NULL;
}

static void own_buffers(struct dmafs_session *s, unsigned t, unsigned long long seed)
{
	struct own o[16];

	for (unsigned i = 0; i < t; i++) {
		o[i] = (struct own){ s, seed + i, (int)i, 0 };
		if (pthread_create(&o[i].t, NULL, own_main, &o[i]))
			exit(1);
	}
	for (unsigned i = 0; i < t; i++)
		pthread_join(o[i].t, NULL);
}

static void test_concurrent(void)
{
	struct dmafs_session *s = open_session();
	pid_t pids[3];
	int bad = 0;

	printf("concurrent: 8 threads into one buffer\n");
	one_buffer(s, 8, 3, 11, "process 0");
	printf("concurrent: 8 threads, each its own buffer\n");
	t_guard(HANG_S, "8 threads with their own buffers");
	own_buffers(s, 8, 21);
	t_guard(0, NULL);
	printf("concurrent: 3 more processes at once (4 threads into one buffer each) while this one "
	       "places from 6 threads into their own buffers\n");
	fflush(stdout);
	for (int k = 0; k < 3; k++) {
		pids[k] = fork_client();
		if (pids[k] == 0) {
			char who[32];
			struct dmafs_session *cs;

			snprintf(who, sizeof(who), "process %d", k + 1);
			cs = open_session(); /* a child may not use its parent's session */
			one_buffer(cs, 4, 2, 100 + k, who);
			dmafs_session_close(cs);
			_exit(t_failures ? 1 : 0);
		}
	}
	t_guard(HANG_S, "6 threads with their own buffers, beside 3 processes");
	own_buffers(s, 6, 31);
	t_guard(0, NULL);
	for (int k = 0; k < 3; k++)
		bad += t_wait(pids[k], HANG_S, 0, "concurrent client process") != 0;
	T_EQ(bad, 0);
	dmafs_session_close(s);
}

/* ---- 2. larger than the ring ---- */

static void test_big(void)
{
	struct dmafs_session *s = open_session();
	struct dmafs_buf *b = alloc(s, fsize + 2 * T_MIB);
	const uint64_t lens[] = { 4 * ring, 8 * ring + 4097, 12 * ring - 1, 16 * ring };
	const unsigned mis[] = { 1, T_BLOCK - 1, 2048, 0 };
	unsigned long long seed = 5;
	int fd = open_file();
	char what[200];

	for (size_t i = 0; i < 4; i++) {
		for (int m = 0; m < 2; m++) {
			unsigned mi = m ? 1 + (unsigned)(t_rand(&seed) % (T_BLOCK - 1)) : mis[i];
			uint64_t end;
			struct dmafs_extent e = t_range(fsize, lens[i], mi, t_rand(&seed) % (2 * T_MIB - 8192),
							&seed, &end);

			if (end > dmafs_buf_size(b))
				e.buffer_offset = t_dst(0, e.file_offset, mi);
			snprintf(what, sizeof(what), "one range of %.1f rings (%llu bytes) from file offset %llu, "
				 "misaligned by %u", (double)e.length / ring, (unsigned long long)e.length,
				 (unsigned long long)e.file_offset, mi);
			printf("big: %s\n", what);
			place_check(b, fd, &e, 1, 0, what);
		}
	}
	{
		struct dmafs_extent e = { 0, DMAFS_TO_EOF, 777 };

		snprintf(what, sizeof(what), "the whole file (%.1f rings) to EOF at buffer offset 777",
			 (double)fsize / ring);
		printf("big: %s\n", what);
		place_check(b, fd, &e, 1, 0, what);
	}
	{
		/* four 3-ring ranges in one call, each misaligned differently */
		struct dmafs_extent e[4];
		uint64_t cursor = 0;

		for (int k = 0; k < 4; k++) {
			uint64_t off = t_rand(&seed) % (fsize - 3 * ring);

			e[k] = (struct dmafs_extent){ off, 3 * ring, t_dst(cursor + 100, off, k ? 1000u * k + 1 : 0) };
			cursor = e[k].buffer_offset + e[k].length;
		}
		printf("big: four 3-ring ranges in one call\n");
		place_check(b, fd, e, 4, 0, "four 3-ring ranges in one call");
	}
	close(fd);
	t_ok(dmafs_buf_unregister(b), "dmafs_buf_unregister");
	dmafs_session_close(s);
}

/* ---- 3. stripe-unit boundaries and the tail ---- */

static void test_edges(void)
{
	struct dmafs_session *s = open_session();
	unsigned long long seed = 77;
	struct dmafs_extent e[64];
	uint64_t bnd[64], size, nb = 0;
	/* room for 49 ranges of at most 2 su + 4097 bytes, each after a gap of < 4096 + 64 */
	struct dmafs_buf *b = alloc(s, 49 * (2 * su + 3 * T_BLOCK));
	int fd = open_file();
	char what[160];
	size_t n;

	/* every boundary over two rounds of the members (each member to the next, and the last
	 * back to the first), a few random ones, and the last two before EOF */
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
		T_CHECK(size <= dmafs_buf_size(b), "edge buffer too small");
		snprintf(what, sizeof(what), "%zu ranges around the boundary at %llu, in one call", n,
			 (unsigned long long)bnd[k]);
		place_check(b, fd, e, n, size, what);
		/* and one call per range, for a few of them */
		if (k % 4 == 0) {
			for (size_t i = 0; i < n; i += 5) {
				snprintf(what, sizeof(what), "range %zu around the boundary at %llu, alone", i,
					 (unsigned long long)bnd[k]);
				place_check(b, fd, &e[i], 1, size, what);
			}
		}
	}
	n = t_tail_extents(su, fsize, &seed, e, &size);
	T_CHECK(size <= dmafs_buf_size(b), "tail buffer too small");
	printf("edges: %zu ranges of the tail, to EOF and past it\n", n);
	place_check(b, fd, e, n, size, "ranges of the file's tail, in one call");
	for (size_t i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "tail range %zu (file offset %llu, %s), alone", i,
			 (unsigned long long)e[i].file_offset, e[i].length == DMAFS_TO_EOF ? "to EOF" : "past EOF");
		place_check(b, fd, &e[i], 1, size, what);
	}
	/* libdmafs refuses, as the daemon does, extents that together place more than the
	 * buffer holds, each of them fitting */
	T_CHECK(fsize > 8192, "test file of more than 8 KiB");
	{
		struct dmafs_buf *small = alloc(s, 8192);
		struct dmafs_extent two[2] = { { 0, 4097, 0 }, { 0, 4097, 4095 } };
		struct dmafs_result r;

		T_EQ(dmafs_place(small, fd, two, 2, &r), -ERANGE);
		two[0] = (struct dmafs_extent){ 0, 4096, 0 };
		two[1] = (struct dmafs_extent){ 4096, 4096, 4096 };
		place_check(small, fd, two, 2, 8192, "two extents filling the buffer exactly");
		t_ok(dmafs_buf_unregister(small), "dmafs_buf_unregister");
	}
	close(fd);
	t_ok(dmafs_buf_unregister(b), "dmafs_buf_unregister");
	dmafs_session_close(s);
}

/* ---- 4. clients killed mid-placement ---- */

/* A client that registers a buffer and places big misaligned ranges until it is killed.
 * @busy (shared) is 1 while a placement is running. */
static void victim(int ready, volatile int *busy, unsigned long long seed)
{
	struct dmafs_session *s = open_session();
	struct dmafs_buf *b = alloc(s, fsize + 2 * T_BLOCK);
	int fd = open_file();
	char c = 1;

	if (write(ready, &c, 1) != 1)
		_exit(1);
	for (;;) {
		uint64_t len = 2 * ring + t_rand(&seed) % (fsize - 2 * ring), end;
		struct dmafs_extent e = t_range(fsize, len, 1 + (unsigned)(t_rand(&seed) % (T_BLOCK - 1)), 0,
						&seed, &end);

		*busy = 1;
		dmafs_place(b, fd, &e, 1, NULL);
		*busy = 0;
	}
}

static void test_kill(void)
{
	struct dmafs_session *s = open_session();
	struct dmafs_buf *b = alloc(s, 6 * ring + 2 * T_BLOCK);
	volatile int *busy = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned long long seed = (unsigned long long)time(NULL) ^ getpid();
	char *back = malloc(T_MIB), what[160];
	int fd = open_file(), mid = 0, rounds = 6;

	if (busy == MAP_FAILED || !back)
		exit(1);
	printf("kill: seed %llu\n", seed);
	for (int round = 0; round < rounds; round++) {
		pid_t v[2];
		int pfd[2];
		char c;

		if (pipe(pfd))
			exit(1);
		for (int k = 0; k < 2; k++) {
			v[k] = fork_client();
			if (v[k] == 0) {
				close(pfd[0]);
				victim(pfd[1], busy + 16 * k, seed + 7919 * round + k);
			}
		}
		close(pfd[1]);
		t_guard(HANG_S, "the victims' registrations");
		for (int k = 0; k < 2; k++)
			T_CHECK(read(pfd[0], &c, 1) == 1, "round %d: victim %d did not start", round, k);
		close(pfd[0]);
		t_guard(0, NULL);
		usleep(20000 + t_rand(&seed) % 280000);
		for (int k = 0; k < 2; k++) {
			mid += busy[16 * k];
			kill(v[k], SIGKILL);
		}
		/* a killed client lives on until the daemon answers its running placement */
		for (int k = 0; k < 2; k++) {
			int rc = t_wait(v[k], 30, SIGKILL, "a client killed mid-placement");
			int killed_client_ended = rc >= 0, lived_until_killed = rc <= 0;

			T_CHECK(killed_client_ended, "round %d: the daemon never finished the placement of a "
				"killed client", round);
			T_CHECK(lived_until_killed, "round %d: a client ended by itself (status %d)", round, rc);
			if (rc)
				return;
		}
		/* right away, while the daemon may still be serving the dead clients' placements */
		{
			unsigned mis = 1 + (unsigned)(t_rand(&seed) % (T_BLOCK - 1));
			uint64_t end;
			struct dmafs_extent e = t_range(fsize, 6 * ring, mis, 0, &seed, &end);

			snprintf(what, sizeof(what), "round %d: a 6-ring placement after killing two clients "
				 "(file offset %llu, misaligned by %u)", round, (unsigned long long)e.file_offset, mis);
			place_check(b, fd, &e, 1, 0, what);
		}
		/* and plain reads still work (page cache dropped, so the daemon serves them) */
		{
			uint64_t off = t_rand(&seed) % (fsize - T_MIB);
			int rfd = open_file();

			posix_fadvise(rfd, 0, 0, POSIX_FADV_DONTNEED);
			t_guard(HANG_S, "a POSIX read after killing clients");
			T_CHECK(pread(rfd, back, T_MIB, off) == (ssize_t)T_MIB && !memcmp(back, ref + off, T_MIB),
				"round %d: POSIX read of 1 MiB at %llu after killing clients", round,
				(unsigned long long)off);
			t_guard(0, NULL);
			close(rfd);
		}
	}
	printf("kill: %d of %d kills landed while a placement was running\n", mid, 2 * rounds);
	/* the dead clients' registrations are gone by now (reaped within a second or two); the
	 * ring must serve a placement far larger than itself */
	sleep(2);
	{
		struct dmafs_buf *big = alloc(s, fsize + 2 * T_BLOCK);
		struct dmafs_extent e = { 0, DMAFS_TO_EOF, 4095 };

		place_check(big, fd, &e, 1, 0, "the whole file, misaligned, after all kills");
		t_ok(dmafs_buf_unregister(big), "dmafs_buf_unregister");
	}
	close(fd);
	t_ok(dmafs_buf_unregister(b), "dmafs_buf_unregister");
	dmafs_session_close(s);
}

/* ---- 5. verify_place: a damaged block through the ring ---- */

struct vworker {
	int bad;	/* places over the damaged block (must fail) or around it (must not) */
	uint64_t blk;
	unsigned long long seed;
	pthread_t t;
};

static void *vworker_main(void *arg)
{
	struct vworker *w = arg;
	struct dmafs_session *s = open_session();
	struct dmafs_buf *b = alloc(s, 4 * ring + 2 * T_BLOCK);
	char *exp = malloc(dmafs_buf_size(b));
	int fd = open_file();

	for (int i = 0; i < 6; i++) {
		uint64_t len = 2 * ring + t_rand(&w->seed) % (2 * ring), off;
		unsigned mis = i % 2 ? 0 : 1 + (unsigned)(t_rand(&w->seed) % (T_BLOCK - 1));
		struct dmafs_extent e, want;
		int ret;

		if (w->bad) /* covering the block, anywhere in the range (blk > len: checked) */
			off = w->blk + T_BLOCK - len + t_rand(&w->seed) % (len - T_BLOCK);
		else if (i % 2) /* wholly before it */
			off = t_rand(&w->seed) % (w->blk - len);
		else /* wholly after it */
			off = w->blk + T_BLOCK + t_rand(&w->seed) % (fsize - w->blk - T_BLOCK - len);
		want = e = (struct dmafs_extent){ off, len, t_dst(0, off, mis) };
		memset(dmafs_buf_ptr(b), T_CANARY, dmafs_buf_size(b));
		ret = dmafs_place(b, fd, &e, 1, NULL);
		if (w->bad) {
			T_CHECK(ret == -EIO, "concurrent placement over the damaged block [%llu, +%llu): %s, want EIO",
				(unsigned long long)off, (unsigned long long)len, dmafs_strerror(ret));
		} else {
			T_CHECK(ret == 0, "concurrent placement of intact [%llu, +%llu) beside failing ones: %s",
				(unsigned long long)off, (unsigned long long)len, dmafs_strerror(ret));
			t_expect(exp, dmafs_buf_size(b), ref, fsize, &want, 1);
			if (!ret)
				t_compare(dmafs_buf_ptr(b), exp, dmafs_buf_size(b), fsize, &want, 1,
					  "intact range placed beside failing ones");
		}
	}
	close(fd);
	free(exp);
	dmafs_session_close(s);
	return NULL;
}

/* Place @e alone and expect -EIO. */
static void want_eio(struct dmafs_buf *b, int fd, struct dmafs_extent e, const char *what)
{
	struct dmafs_result r;
	int ret;

	t_guard(HANG_S, what);
	ret = dmafs_place(b, fd, &e, 1, &r);
	t_guard(0, NULL);
	T_CHECK(ret == -EIO, "%s: %s, want EIO (%s)", what, ret ? dmafs_strerror(ret) : "placed",
		"verify_place must refuse data that fails its checksum");
	T_CHECK(ret == 0 || r.path == DMAFS_PATH_NONE, "%s: failed placement reports path %s", what,
		dmafs_path_name(r.path));
}

static void test_verify(uint64_t badbyte)
{
	struct dmafs_session *s = open_session();
	uint64_t blk = badbyte / T_BLOCK * T_BLOCK, big = 4 * ring;
	struct dmafs_buf *b = alloc(s, fsize + 2 * T_MIB);
	struct vworker w[4];
	int fd = open_file(), ret;
	char what[200];

	T_CHECK(blk > big + T_MIB && blk + T_BLOCK + big + T_MIB < fsize, "damaged block %llu too near an end",
		(unsigned long long)blk);
	printf("verify: damaged block at file offset %llu (flipped byte at %llu)\n", (unsigned long long)blk,
	       (unsigned long long)badbyte);
	/* covering the block: misaligned and aligned, bigger than the ring and small */
	want_eio(b, fd, (struct dmafs_extent){ blk - 2 * ring + 123, big, t_dst(0, blk - 2 * ring + 123, 1) },
		 "a 4-ring misaligned placement covering the damaged block");
	want_eio(b, fd, (struct dmafs_extent){ blk - 2 * ring, big, t_dst(0, blk - 2 * ring, 0) },
		 "a 4-ring aligned placement covering the damaged block");
	want_eio(b, fd, (struct dmafs_extent){ blk - 2 * ring + 5, big, t_dst(0, blk - 2 * ring + 5, 0) },
		 "a 4-ring placement covering the damaged block, aligned but starting mid-block");
	want_eio(b, fd, (struct dmafs_extent){ badbyte - 100, 200, t_dst(0, badbyte - 100, 1) },
		 "200 bytes around the flipped byte, misaligned");
	want_eio(b, fd, (struct dmafs_extent){ blk, T_BLOCK, t_dst(0, blk, 0) },
		 "exactly the damaged block, aligned");
	want_eio(b, fd, (struct dmafs_extent){ blk + 3000, 10, t_dst(0, blk + 3000, 7) },
		 "10 bytes of the damaged block not covering the flipped byte (the block fails its checksum)");
	want_eio(b, fd, (struct dmafs_extent){ blk - big + 1, big, t_dst(0, blk - big + 1, 1) },
		 "a 4-ring range whose last byte is the damaged block's first");
	want_eio(b, fd, (struct dmafs_extent){ blk + T_BLOCK - 1, big, t_dst(0, blk + T_BLOCK - 1, 2) },
		 "a 4-ring range whose first byte is the damaged block's last");
	want_eio(b, fd, (struct dmafs_extent){ 0, DMAFS_TO_EOF, 4095 }, "the whole file to EOF, misaligned");
	want_eio(b, fd, (struct dmafs_extent){ 0, DMAFS_TO_EOF, 0 }, "the whole file to EOF, aligned");
	t_guard(HANG_S, "dmafs_place_file");
	ret = dmafs_place_file(b, path, 1, NULL);
	t_guard(0, NULL);
	T_CHECK(ret == -EIO, "dmafs_place_file over the damaged block: %s, want EIO", dmafs_strerror(ret));

	/* not covering it: right up to it and right after it, bigger than the ring */
	for (unsigned mis = 0; mis < 2; mis++) {
		struct dmafs_extent e[2] = {
			{ blk - big, big, t_dst(0, blk - big, mis * 1234) },
			{ blk + T_BLOCK, big, 0 },
		};

		e[1].buffer_offset = t_dst(e[0].buffer_offset + big + 100, blk + T_BLOCK, mis * 99);
		snprintf(what, sizeof(what), "4 rings ending at the damaged block, %s", mis ? "misaligned" : "aligned");
		place_check(b, fd, &e[0], 1, 0, what);
		snprintf(what, sizeof(what), "4 rings starting after the damaged block, %s", mis ? "misaligned" : "aligned");
		place_check(b, fd, &e[1], 1, 0, what);
		snprintf(what, sizeof(what), "both in one call, %s", mis ? "misaligned" : "aligned");
		place_check(b, fd, e, 2, 0, what);
	}
	/* failing and intact placements at once, sharing the ring */
	printf("verify: 2 threads placing over the damaged block beside 2 placing around it\n");
	t_guard(HANG_S, "failing and intact placements at once");
	for (int k = 0; k < 4; k++) {
		w[k] = (struct vworker){ k < 2, blk, 500 + k, 0 };
		if (pthread_create(&w[k].t, NULL, vworker_main, &w[k]))
			exit(1);
	}
	for (int k = 0; k < 4; k++)
		pthread_join(w[k].t, NULL);
	t_guard(0, NULL);
	/* after all those errors, everything but the damaged block, misaligned, in one call */
	{
		struct dmafs_extent e[2] = { { 0, blk, 3 }, { blk + T_BLOCK, DMAFS_TO_EOF, 0 } };

		e[1].buffer_offset = t_dst(blk + 200, blk + T_BLOCK, 3);
		place_check(b, fd, e, 2, 0, "the whole file but the damaged block, misaligned, after the errors");
	}
	close(fd);
	t_ok(dmafs_buf_unregister(b), "dmafs_buf_unregister");
	dmafs_session_close(s);
}

/* ---- helpers for the script ---- */

/* A block of @file on member 1, past the middle of the file and 2 blocks into an extent. */
static int where(const char *file)
{
	struct dmafs_layout *l;
	int ret = dmafs_layout_get(file, &l);

	if (ret) {
		fprintf(stderr, "dmafs_layout_get %s: %s\n", file, dmafs_strerror(ret));
		return 1;
	}
	for (size_t i = 0; i < l->count; i++) {
		const struct dmafs_layout_extent *x = &l->extents[i];

		if (x->member == 1 && x->file_offset >= l->size / 2 && x->length >= 4 * T_BLOCK) {
			printf("%llu %u %llu\n", (unsigned long long)(x->file_offset + 2 * T_BLOCK), x->member,
			       (unsigned long long)(x->member_offset + 2 * T_BLOCK));
			dmafs_layout_free(l);
			return 0;
		}
	}
	fprintf(stderr, "%s: no extent on member 1 in the second half\n", file);
	dmafs_layout_free(l);
	return 1;
}

static int flip(const char *img, uint64_t off)
{
	unsigned char c;
	int fd = open(img, O_RDWR);

	if (fd < 0 || pread(fd, &c, 1, (off_t)off) != 1) {
		perror(img);
		return 1;
	}
	c ^= 0x5a;
	if (pwrite(fd, &c, 1, (off_t)off) != 1 || fsync(fd)) {
		perror(img);
		return 1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "where") && argc == 3)
		return where(argv[2]);
	if (!strcmp(mode, "flip") && argc == 4)
		return flip(argv[2], strtoull(argv[3], NULL, 0));
	if (argc < 5 || (!strcmp(mode, "verify") && argc != 6)) {
		fprintf(stderr, "usage: place_pipe concurrent|big|edges|kill FILE REF RING_MB\n"
				"       place_pipe verify FILE REF RING_MB BAD\n"
				"       place_pipe where FILE | flip IMAGE OFFSET\n");
		return 1;
	}
	path = argv[2];
	ref = t_ref_load(argv[3], &fsize);
	ring = strtoull(argv[4], NULL, 0) << 20;
	if (fsize <= 16 * ring) {
		fprintf(stderr, "the file (%llu bytes) must hold 16 rings of %llu bytes and more\n",
			(unsigned long long)fsize, (unsigned long long)ring);
		return 1;
	}
	{
		struct dmafs_caps caps;

		dmafs_session_close(open_session_caps(&caps));
		t_guard_mount(path);
		su = caps.stripe_unit;
		members = caps.members;
	}
	if (!strcmp(mode, "concurrent"))
		test_concurrent();
	else if (!strcmp(mode, "big"))
		test_big();
	else if (!strcmp(mode, "edges"))
		test_edges();
	else if (!strcmp(mode, "kill"))
		test_kill();
	else if (!strcmp(mode, "verify"))
		test_verify(strtoull(argv[5], NULL, 0));
	else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 1;
	}
	return t_done(mode);
}
