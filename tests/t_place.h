/* SPDX-License-Identifier: MIT */
/*
 * t_place.h - helpers shared by the placement tests (place_pipe, place_gpu): the reference
 * file, extent sets (around stripe-unit boundaries, to the end of the file, split over
 * threads, single ranges several times the staging ring), the expected image of a whole
 * buffer and a comparison that names the extent a wrong byte belongs to, and timeouts
 * that turn a hung placement into a failure instead of a hung test.
 *
 * Everything here goes through libdmafs (dmafs.h) only, so the tests hold for any
 * placement engine behind the ioctls. Buffer offsets are chosen "aligned" (buffer offset
 * and file offset agree modulo 4096: the daemon may read straight into a host buffer) or
 * "misaligned" by 1..4095 bytes (it must go through staging and copy).
 */
#ifndef T_PLACE_H
#define T_PLACE_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dmafs.h"
#include "t_unit.h"

#define T_BLOCK 4096u	  /* the daemon's block: alignment and checksum unit */
#define T_CANARY 0xa5	  /* what buffer bytes outside every extent must keep */
#define T_MIB (1ull << 20)

static uint64_t t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- timeouts ---- */

/*
 * A placement that never returns (staging slots leaked by a killed client, a lost
 * completion) must fail the test, not hang it. Neither a signal handler nor a kill helps
 * a process whose request the daemon has taken: the kernel waits for the answer
 * uninterruptibly, even after SIGKILL. So a guard thread watches a deadline and, when it
 * passes, says what hung, aborts the mount's FUSE connection (umount2 MNT_FORCE: the
 * kernel then fails every pending request) and ends the process with exit status 1. The
 * mount is dead afterwards; the test is failing anyway, and the script's cleanup
 * unmounts it and kills the daemon.
 */
static pid_t t_guard_pid;	  /* process whose guard thread runs */
static uint64_t t_guard_deadline; /* CLOCK_MONOTONIC ms; 0: off. Atomic. */
static const char *t_guard_what;  /* atomic */
static char t_guard_mnt[1024];	  /* mount point to abort on a timeout */

static void *t_guard_main(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t d = __atomic_load_n(&t_guard_deadline, __ATOMIC_ACQUIRE);

		if (d && t_now_ms() > d) {
			fprintf(stderr, "FAIL: timeout: %s did not finish in time (a hung placement: staging "
				"never released, or a completion lost?)\n",
				__atomic_load_n(&t_guard_what, __ATOMIC_ACQUIRE));
			if (t_guard_mnt[0]) {
				int ret = umount2(t_guard_mnt, MNT_FORCE);

				fprintf(stderr, "aborting the FUSE connection of %s so that this process can exit: %s\n",
					t_guard_mnt, ret == 0 || errno == EBUSY ? "done" : strerror(errno));
			}
			fflush(stderr);
			_exit(1);
		}
		usleep(100000);
	}
	return NULL;
}

/*
 * Remember the mount point holding @file (from /proc/self/mountinfo, by device number)
 * for t_guard_main to abort. Without it (not found, or not root) a hung process stays,
 * and the script's own time limit has to catch it.
 */
static void t_guard_mount(const char *file)
{
	char line[4096], dev[32], mnt[1024];
	struct stat st;
	FILE *f;

	if (stat(file, &st) || !(f = fopen("/proc/self/mountinfo", "re")))
		return;
	snprintf(dev, sizeof(dev), "%u:%u", major(st.st_dev), minor(st.st_dev));
	while (fgets(line, sizeof(line), f)) {
		char d[32];

		/* ID PARENT MAJOR:MINOR ROOT MOUNTPOINT ... (spaces in names as \040) */
		if (sscanf(line, "%*s %*s %31s %*s %1023s", d, mnt) == 2 && !strcmp(d, dev)) {
			size_t o = 0;

			for (size_t i = 0; mnt[i] && o + 1 < sizeof(t_guard_mnt); i++) {
				if (mnt[i] == '\\' && mnt[i + 1] && mnt[i + 2] && mnt[i + 3]) {
					t_guard_mnt[o++] = (char)((mnt[i + 1] - '0') * 64 + (mnt[i + 2] - '0') * 8 +
								  (mnt[i + 3] - '0'));
					i += 3;
				} else {
					t_guard_mnt[o++] = mnt[i];
				}
			}
			t_guard_mnt[o] = '\0';
		}
	}
	fclose(f);
}

/*
 * From now on this process fails (message, exit 1) unless t_guard() is called again
 * within @seconds; 0 turns the guard off. Each process (forked children too) gets its own
 * guard thread on first use. Not for use by several threads of one process at once.
 */
static void t_guard(unsigned seconds, const char *what)
{
	if (t_guard_pid != getpid()) {
		pthread_t t;

		t_guard_pid = getpid();
		if (pthread_create(&t, NULL, t_guard_main, NULL)) {
			fprintf(stderr, "cannot start the guard thread\n");
			exit(1);
		}
		pthread_detach(t);
	}
	__atomic_store_n(&t_guard_what, what, __ATOMIC_RELEASE);
	__atomic_store_n(&t_guard_deadline, seconds ? t_now_ms() + seconds * 1000ull : 0,
			 __ATOMIC_RELEASE);
}

/* Reap child @pid within @ms milliseconds: 1 and *st when it ended, 0 if not, -1 on error. */
static int t_reap(pid_t pid, uint64_t ms, int *st)
{
	uint64_t end = t_now_ms() + ms;

	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);

		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (t_now_ms() > end)
			return 0;
		usleep(10000);
	}
}

/*
 * Wait for child @pid at most @seconds, then SIGKILL it (but never wait for a child that
 * cannot die: one blocked in a request the daemon does not answer). Returns its exit
 * status, 0 when it died of signal @sig_ok (0: none is), or -1 (with a message naming
 * @what) when it timed out or died of another signal.
 */
static int t_wait(pid_t pid, unsigned seconds, int sig_ok, const char *what)
{
	int st, r = t_reap(pid, seconds * 1000ull, &st);

	if (r < 0) {
		fprintf(stderr, "FAIL: waitpid %d (%s): %s\n", (int)pid, what, strerror(errno));
		return -1;
	}
	if (r == 0) {
		kill(pid, SIGKILL);
		r = t_reap(pid, 5000, &st);
		fprintf(stderr, "FAIL: timeout: %s (process %d) still running after %u s; %s\n", what,
			(int)pid, seconds,
			r == 1 ? "killed" : "and it does not die of SIGKILL: it waits for a request the daemon never answers");
		return -1;
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (sig_ok && WTERMSIG(st) == sig_ok)
		return 0;
	fprintf(stderr, "FAIL: %s (process %d) died of signal %d%s\n", what, (int)pid, WTERMSIG(st),
		WTERMSIG(st) == SIGALRM ? " (its own timeout: a placement hung)" : "");
	return -1;
}

/* ---- reference data ---- */

/* The whole of @path (a copy of the test file outside dmafs) in memory; exits on error. */
static char *t_ref_load(const char *path, uint64_t *size)
{
	struct stat st;
	char *p;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st)) {
		perror(path);
		exit(1);
	}
	p = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!p || pread(fd, p, (size_t)st.st_size, 0) != st.st_size) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	close(fd);
	*size = (uint64_t)st.st_size;
	return p;
}

/* ---- extents ---- */

/* Bytes a placement of @e gives: its length clipped at the end of a file of @fsize. */
static uint64_t t_ext_len(const struct dmafs_extent *e, uint64_t fsize)
{
	if (e->file_offset >= fsize)
		return 0;
	return e->length < fsize - e->file_offset ? e->length : fsize - e->file_offset;
}

/* The smallest buffer offset >= @min that is @mis bytes past agreeing with @foff modulo
 * 4096 (@mis 0: aligned). */
static uint64_t t_dst(uint64_t min, uint64_t foff, unsigned mis)
{
	uint64_t want = (foff + mis) % T_BLOCK, d = min - min % T_BLOCK + want;

	return d < min ? d + T_BLOCK : d;
}

/* 0 (aligned) for every third extent @k, else a misalignment of 1..4095: 1, 4095 and
 * random ones, so that both edges of the block show up. */
static unsigned t_mis(size_t k, unsigned long long *seed)
{
	switch (k % 6) {
	case 0:
	case 3:
		return 0;
	case 1:
		return 1;
	case 4:
		return T_BLOCK - 1;
	default:
		return 1 + (unsigned)(t_rand(seed) % (T_BLOCK - 1));
	}
}

/* Append extent [foff, +len) at the next free buffer offset (after a canary gap of at
 * least 64 bytes) with misalignment @mis; it takes @room bytes of the buffer. */
static void t_push(struct dmafs_extent *e, size_t *n, uint64_t *cursor, uint64_t foff,
		   uint64_t len, uint64_t room, unsigned mis)
{
	uint64_t dst = t_dst(*cursor + 64, foff, mis);

	e[(*n)++] = (struct dmafs_extent){ foff, len, dst };
	*cursor = dst + room;
}

/*
 * Extents around the stripe-unit boundary @bnd: starting 4097, 4095, 3 and 1 byte before
 * it, at it, and 1 and 5 bytes after it, of lengths 1, 4095, 4096, 4097, su - 1, su + 1
 * and 2 su + 4097 (the last over three or four members), each at its own buffer offset
 * with canary between, mixed aligned and misaligned (t_mis). Extents running past EOF keep
 * their explicit length (placed short). @e needs room for 49. Returns the count; *bufsize
 * gets the buffer bytes they need.
 */
static size_t t_edge_extents(uint64_t bnd, uint64_t su, uint64_t fsize, unsigned long long *seed,
			     struct dmafs_extent *e, uint64_t *bufsize)
{
	static const int64_t start[] = { -4097, -4095, -3, -1, 0, 1, 5 };
	const uint64_t len[] = { 1, 4095, 4096, 4097, su - 1, su + 1, 2 * su + 4097 };
	uint64_t cursor = 0;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(start) / sizeof(start[0]); i++) {
		if ((int64_t)bnd + start[i] < 0 || bnd + start[i] >= fsize)
			continue;
		for (size_t j = 0; j < sizeof(len) / sizeof(len[0]); j++)
			t_push(e, &n, &cursor, bnd + start[i], len[j], len[j], t_mis(n, seed));
	}
	*bufsize = cursor + 64;
	return n;
}

/*
 * Extents of the file's tail: starting 1, 2, 4095, 4096, 4097, su - 1, su, su + 1 and
 * 3 su + 5 bytes before EOF and at the last stripe-unit boundary and one byte after it,
 * each once with DMAFS_TO_EOF and once with an explicit length 5000 bytes past EOF (placed
 * short). @e needs room for 24. Returns the count; *bufsize the buffer bytes they need.
 */
static size_t t_tail_extents(uint64_t su, uint64_t fsize, unsigned long long *seed,
			     struct dmafs_extent *e, uint64_t *bufsize)
{
	uint64_t last = (fsize - 1) / su * su;
	const uint64_t back[] = { 1, 2, 4095, 4096, 4097, su - 1, su, su + 1, 3 * su + 5,
				  fsize - last, fsize - last - 1 };
	uint64_t cursor = 0;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(back) / sizeof(back[0]); i++) {
		if (back[i] == 0 || back[i] > fsize)
			continue;
		t_push(e, &n, &cursor, fsize - back[i], DMAFS_TO_EOF, back[i], t_mis(n, seed));
		t_push(e, &n, &cursor, fsize - back[i], back[i] + 5000, back[i] + 5000, t_mis(n, seed));
	}
	*bufsize = cursor + 64;
	return n;
}

/*
 * Split the whole file over @t threads: thread i gets file bytes [c_i, c_i+1) (cut at
 * unaligned offsets), as 1..6 extents, all at buffer offset c_i + 8192 i + m_i: aligned
 * for even i, misaligned by m_i (random 1..4095) for odd i. Destinations are disjoint
 * with canary between. @first gets t + 1 indices: thread i's extents are
 * e[first[i]..first[i+1]). @e needs room for 6 t. Returns the buffer bytes needed.
 */
static uint64_t t_split(uint64_t fsize, unsigned t, unsigned long long *seed,
			struct dmafs_extent *e, size_t *first)
{
	uint64_t c[65];
	size_t n = 0;

	if (t > 64)
		t = 64;
	c[0] = 0;
	c[t] = fsize;
	for (unsigned i = 1; i < t; i++)
		c[i] = fsize / t * i + t_rand(seed) % 8192 - 4096;
	for (unsigned i = 0; i < t; i++) {
		uint64_t base = c[i] + 8192ull * i + (i % 2 ? 1 + t_rand(seed) % (T_BLOCK - 1) : 0);
		uint64_t cut[7];
		unsigned k = 1 + (unsigned)(t_rand(seed) % 6);

		first[i] = n;
		cut[0] = c[i];
		cut[k] = c[i + 1];
		for (unsigned j = 1; j < k; j++) /* sorted random cuts */
			cut[j] = cut[j - 1] + t_rand(seed) % ((c[i + 1] - cut[j - 1]) / (k - j + 1) + 1);
		for (unsigned j = 0; j < k; j++)
			if (cut[j + 1] > cut[j])
				e[n++] = (struct dmafs_extent){ cut[j], cut[j + 1] - cut[j], base + (cut[j] - c[i]) };
	}
	first[t] = n;
	return fsize + 8192ull * t + 8192;
}

/*
 * A single range of @len bytes (clipped to the file) at a random file offset, at buffer
 * offset @min or just after it, misaligned by @mis. Returns it; *end gets the buffer bytes
 * it needs.
 */
static struct dmafs_extent t_range(uint64_t fsize, uint64_t len, unsigned mis, uint64_t min,
				   unsigned long long *seed, uint64_t *end)
{
	uint64_t off;

	if (len > fsize)
		len = fsize;
	off = t_rand(seed) % (fsize - len + 1);
	*end = t_dst(min, off, mis) + len;
	return (struct dmafs_extent){ off, len, t_dst(min, off, mis) };
}

/* ---- checking ---- */

/* What a buffer of @size must hold after placing @want: file bytes where the extents are
 * (clipped at EOF), T_CANARY everywhere else. */
static void t_expect(char *exp, uint64_t size, const char *ref, uint64_t fsize,
		     const struct dmafs_extent *want, size_t n)
{
	memset(exp, T_CANARY, size);
	for (size_t i = 0; i < n; i++)
		memcpy(exp + want[i].buffer_offset, ref + want[i].file_offset, t_ext_len(&want[i], fsize));
}

/*
 * Compare buffer contents @got with @exp (both @size bytes; @want placed from a file of
 * @fsize bytes). On a difference, one failed
 * check naming the first wrong byte, how many differ, and the extent it belongs to (or
 * that the canary outside every extent was overwritten). Returns 0 when equal.
 */
static int t_compare(const char *got, const char *exp, uint64_t size, uint64_t fsize,
		     const struct dmafs_extent *want, size_t n, const char *what)
{
	uint64_t first = UINT64_MAX, bad = 0;
	char where[200] = "outside every extent: the canary was overwritten";

	if (!memcmp(got, exp, size))
		return 0;
	for (uint64_t i = 0; i < size; i++) {
		if (got[i] != exp[i]) {
			bad++;
			if (first == UINT64_MAX)
				first = i;
		}
	}
	for (size_t k = 0; k < n; k++) {
		if (first >= want[k].buffer_offset &&
		    first - want[k].buffer_offset < t_ext_len(&want[k], fsize)) {
			snprintf(where, sizeof(where),
				 "in extent %zu of %zu (file offset %llu, length %llu, buffer offset %llu, "
				 "misaligned by %llu): file byte %llu",
				 k, n, (unsigned long long)want[k].file_offset,
				 (unsigned long long)t_ext_len(&want[k], fsize),
				 (unsigned long long)want[k].buffer_offset,
				 (unsigned long long)((want[k].buffer_offset - want[k].file_offset) % T_BLOCK),
				 (unsigned long long)(want[k].file_offset + first - want[k].buffer_offset));
			break;
		}
	}
	int buffer_as_expected = 0;

	T_CHECK(buffer_as_expected, "%s: buffer byte %llu is 0x%02x, want 0x%02x (%llu bytes differ) %s", what,
		(unsigned long long)first, (unsigned char)got[first], (unsigned char)exp[first],
		(unsigned long long)bad, where);
	return 1;
}

/* Check that a dmafs call succeeded (unlike T_EQ, evaluates the call once). */
static void t_ok(int ret, const char *what)
{
	T_CHECK(ret == 0, "%s: %s", what, dmafs_strerror(ret));
}

/* The lengths a placement reports in @got match what @want asked, clipped at EOF. */
static void t_check_lengths(const struct dmafs_extent *got, const struct dmafs_extent *want, size_t n,
			    uint64_t fsize, const char *what)
{
	for (size_t i = 0; i < n; i++)
		T_CHECK(got[i].length == t_ext_len(&want[i], fsize),
			"%s: extent %zu (file offset %llu, asked %lld (-1: to EOF)) reports %llu bytes placed, "
			"want %llu", what, i, (unsigned long long)want[i].file_offset, (long long)want[i].length,
			(unsigned long long)got[i].length, (unsigned long long)t_ext_len(&want[i], fsize));
}

/* ---- many threads, one buffer ---- */

struct t_worker {
	struct dmafs_buf *b;
	const char *path;		/* file on dmafs; each worker opens its own descriptor */
	struct dmafs_extent *e;		/* its extents (placed in place: lengths are updated) */
	size_t n;
	unsigned long long seed;
	int want_path;			/* DMAFS_PATH_* every placement must report */
	pthread_t t;
};

/* Place the worker's extents in a random order, 1..3 per dmafs_place() call. */
static void *t_worker_main(void *arg)
{
	struct t_worker *w = arg;
	int fd = open(w->path, O_RDONLY | O_CLOEXEC);
	size_t order[64];

	T_CHECK(fd >= 0, "open %s: %s", w->path, strerror(errno));
	if (fd < 0 || w->n > 64)
		return NULL;
	for (size_t i = 0; i < w->n; i++)
		order[i] = i;
	for (size_t i = w->n; i > 1; i--) {
		size_t j = t_rand(&w->seed) % i, x = order[i - 1];

		order[i - 1] = order[j];
		order[j] = x;
	}
	for (size_t i = 0; i < w->n;) {
		struct dmafs_extent batch[3];
		struct dmafs_result r;
		size_t k = 1 + t_rand(&w->seed) % 3;
		int ret;

		if (k > w->n - i)
			k = w->n - i;
		for (size_t j = 0; j < k; j++)
			batch[j] = w->e[order[i + j]];
		ret = dmafs_place(w->b, fd, batch, k, &r);
		T_CHECK(ret == 0, "concurrent dmafs_place of %zu extent(s) from file offset %llu: %s", k,
			(unsigned long long)batch[0].file_offset, dmafs_strerror(ret));
		T_CHECK(ret || r.path == w->want_path, "concurrent placement took path %s, want %s",
			dmafs_path_name(r.path), dmafs_path_name(w->want_path));
		for (size_t j = 0; j < k; j++)
			w->e[order[i + j]].length = batch[j].length;
		i += k;
	}
	close(fd);
	return NULL;
}

/*
 * Place e[first[i]..first[i+1]) from thread i, @t threads at once, into @b; returns when
 * all are done. Lengths in @e are updated.
 */
static void t_place_threads(struct dmafs_buf *b, const char *path, struct dmafs_extent *e,
			    const size_t *first, unsigned t, unsigned long long seed, int want_path)
{
	struct t_worker w[64];

	for (unsigned i = 0; i < t; i++) {
		w[i] = (struct t_worker){ b, path, e + first[i], first[i + 1] - first[i], seed + i, want_path, 0 };
		if (pthread_create(&w[i].t, NULL, t_worker_main, &w[i])) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	}
	for (unsigned i = 0; i < t; i++)
		pthread_join(w[i].t, NULL);
}

#endif
