// SPDX-License-Identifier: MIT
/*
 * Description: placements and prefetches racing a writer return, for every byte they
 * report as placed, what the file held at some moment of the call: never bytes they did
 * not write. A writer process rewrites a file over and over (sometimes truncating it to 0
 * first, sometimes rewriting a random range, sometimes punching a hole), every 512-byte
 * sector stamped with (magic, version, its own file offset); placer processes place the
 * whole file to EOF (or its extents as the samples of one batch, dmafs_place_batch)
 * into host buffers filled with 0xEE before each call, and check every
 * sector of the bytes reported: a stamp of this sector whole, or zeros (cut off, or a
 * hole). A prefetcher fills the warm tier meanwhile when the mount has one.
 *
 * Usage: place_stress FILE SECONDS [PLACERS [MIB]]
 *   PLACERS placer processes (default 2), a file of MIB MiB (default 4).
 * Prints a summary line; exit 0, or 1 with the first bad sectors described.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dmafs.h"

#define SECT 512u
#define MAGIC 0x5354524553534d44ull /* "DMSSERTS" */
#define FILL 0xEE

struct stamp {
	uint64_t magic, version, off, check;
};

/* shared between the processes: the writer's latest version, counters */
struct shared {
	volatile uint64_t version;
	volatile int stop;
	uint64_t writes, truncates, punches;
	uint64_t placements[16], prefetches;
	uint64_t bad[16], zero_sect[16], placed_bytes[16];
	char why[16][256];
};

static struct shared *sh;
static uint64_t fsize;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void stamp_range(char *buf, uint64_t off, uint64_t len, uint64_t v)
{
	for (uint64_t s = 0; s < len; s += SECT) {
		struct stamp st = { MAGIC, v, off + s, ~(v ^ (off + s)) };

		for (unsigned k = 0; k < SECT; k += sizeof(st))
			memcpy(buf + s + k, &st, sizeof(st));
	}
}

/* A sector of a placement: 0 stamp of this offset whole, 1 zeros, -1 bad. */
static int sector_ok(const char *p, uint64_t off)
{
	struct stamp st;
	int zero = 1;

	for (unsigned k = 0; k < SECT && zero; k++)
		zero = p[k] == 0;
	if (zero)
		return 1;
	memcpy(&st, p, sizeof(st));
	if (st.magic != MAGIC || st.off != off || st.check != ~(st.version ^ off))
		return -1;
	for (unsigned k = sizeof(st); k < SECT; k += sizeof(st))
		if (memcmp(p, p + k, sizeof(st)))
			return -1;
	return 0;
}

static void writer(const char *path, uint64_t seed)
{
	char *mem = aligned_alloc(4096, fsize + 4096);
	int fd = open(path, O_RDWR);
	uint64_t v = 1;

	if (!mem || fd < 0) {
		perror("place_stress: writer");
		_exit(1);
	}
	srandom((unsigned)seed);
	while (!sh->stop) {
		long r = random() % 100;
		uint64_t off = 0, len = fsize, wsz;
		/* the source page-aligned or not (a bytes object: requests end inside blocks) */
		char *buf = mem + (random() % 2 ? 0 : 16 * (1 + random() % 200));

		v++;
		if (r < 10) { /* open(O_TRUNC), as a program saving a file anew does */
			int tfd = open(path, O_WRONLY | O_TRUNC);

			if (tfd < 0) {
				perror("place_stress: open(O_TRUNC)");
				_exit(1);
			}
			close(tfd);
			__atomic_add_fetch(&sh->truncates, 1, __ATOMIC_RELAXED);
		} else if (r < 25) {
			if (ftruncate(fd, 0)) {
				perror("place_stress: ftruncate");
				_exit(1);
			}
			__atomic_add_fetch(&sh->truncates, 1, __ATOMIC_RELAXED);
		} else if (r < 35) {
			off = (uint64_t)random() % (fsize / SECT) * SECT;
			len = ((uint64_t)random() % ((fsize - off) / SECT) + 1) * SECT;
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				      (off_t)len)) {
				perror("place_stress: fallocate(PUNCH_HOLE)");
				_exit(1);
			}
			__atomic_add_fetch(&sh->punches, 1, __ATOMIC_RELAXED);
			continue;
		} else if (r < 60) {
			off = (uint64_t)random() % (fsize / SECT) * SECT;
			len = ((uint64_t)random() % ((fsize - off) / SECT) + 1) * SECT;
		}
		stamp_range(buf, off, len, v);
		/* as cp (128 KiB) or a program writing whole buffers does: writes one after another */
		wsz = random() % 3 == 0 ? (128u << 10) : random() % 2 ? (1u << 20) : fsize;
		for (uint64_t done = 0; done < len;) {
			uint64_t n = len - done < wsz ? len - done : wsz;
			ssize_t w = pwrite(fd, buf + done, n, (off_t)(off + done));

			if (w <= 0) {
				perror("place_stress: pwrite");
				_exit(1);
			}
			done += (uint64_t)w;
		}
		__atomic_store_n(&sh->version, v, __ATOMIC_RELEASE);
		__atomic_add_fetch(&sh->writes, 1, __ATOMIC_RELAXED);
		if (random() % 8 == 0)
			fsync(fd);
		if (random() % 3 == 0) { /* closed and opened again, as a program saving it does */
			close(fd);
			fd = open(path, O_RDWR);
			if (fd < 0) {
				perror("place_stress: reopening");
				_exit(1);
			}
		}
	}
	close(fd);
	_exit(0);
}

static void placer(const char *mnt, const char *path, int k)
{
	struct dmafs_session *s;
	struct dmafs_buf *b;
	char *p;
	int fd, ret;

	ret = dmafs_session_open(mnt, &s);
	if (!ret)
		ret = dmafs_buf_alloc_host(s, fsize + 8192, &b);
	if (ret) {
		fprintf(stderr, "place_stress: placer %d: %s\n", k, dmafs_strerror(ret));
		_exit(1);
	}
	p = dmafs_buf_ptr(b);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror("place_stress: placer open");
		_exit(1);
	}
	struct dmafs_handle h;

	if ((ret = dmafs_handle_get(s, fd, &h))) {
		fprintf(stderr, "place_stress: placer %d: a batch handle: %s\n", k, dmafs_strerror(ret));
		_exit(1);
	}
	srandom((unsigned)getpid());
	while (!sh->stop) {
		/* at a buffer offset congruent with the file's (read straight into these pages)
		 * or not (through a bounce slot); the file whole to EOF, or in 1 to 4 extents */
		uint64_t boff = random() % 2 ? 4096 : 1 + (uint64_t)random() % 8000, eo = 0;
		struct dmafs_extent ev[4];
		struct dmafs_result res;
		uint64_t bad = 0, first = UINT64_MAX;
		int n = 1 + (int)(random() % 4);

		if (random() % 3 == 0) { /* one MiB-sized piece at a MiB boundary */
			n = 1;
			eo = (uint64_t)(random() % (long)(fsize >> 20)) << 20;
			ev[0] = (struct dmafs_extent){ .file_offset = eo, .length = 1u << 20,
						      .buffer_offset = boff + eo };
		} else {
			for (int i = 0; i < n; i++) {
				uint64_t l = i == n - 1 ? DMAFS_TO_EOF :
					     (uint64_t)(random() % ((fsize - eo) / SECT / 2 + 1)) * SECT;

				ev[i] = (struct dmafs_extent){ .file_offset = eo, .length = l,
							      .buffer_offset = boff + eo };
				eo += i == n - 1 ? 0 : l;
			}
		}
		memset(p, FILL, fsize + 8192);
		if (random() % 4 == 1) { /* the same extents as samples of one batch */
			struct dmafs_sample sm[4];
			uint64_t end = fsize;

			for (int i = 0; i < n; i++) {
				uint64_t l = ev[i].length == DMAFS_TO_EOF ? end - ev[i].file_offset : ev[i].length;

				sm[i] = (struct dmafs_sample){ .file = h, .file_offset = ev[i].file_offset,
							       .buffer_offset = ev[i].buffer_offset,
							       .length = (uint32_t)l };
			}
			ret = dmafs_place_batch(b, sm, (size_t)n, &res);
			for (int i = 0; i < n; i++)
				ev[i].length = sm[i].length;
		} else if (random() % 4 == 0) { /* the whole file by path: opened, sized and closed */
			n = 1;
			ret = dmafs_place_file(b, path, boff, &res);
			ev[0] = (struct dmafs_extent){ .file_offset = 0, .length = res.bytes,
						      .buffer_offset = boff };
		} else {
			if (random() % 3 == 0) { /* gathered: buffer offsets not the file's */
				uint64_t bo = 1 + (uint64_t)random() % 8000;

				for (int i = 0; i < n; i++) {
					ev[i].buffer_offset = bo;
					bo += ev[i].length == DMAFS_TO_EOF ? 0 : ev[i].length;
				}
			}
			ret = dmafs_place(b, fd, ev, (size_t)n, &res);
		}
		if (ret) {
			fprintf(stderr, "place_stress: placer %d: placing %s: %s\n", k, path,
				dmafs_strerror(ret));
			_exit(1);
		}
		if (res.bytes > fsize) {
			snprintf(sh->why[k], sizeof(sh->why[k]),
				 "a placement reported %llu bytes, more than the file's %llu",
				 (unsigned long long)res.bytes, (unsigned long long)fsize);
			sh->bad[k]++;
			continue;
		}
		/* every extent's bytes reported, where its buffer offset says */
		for (int i = 0; i < n; i++)
			for (uint64_t o = ev[i].file_offset; o + SECT <= ev[i].file_offset + ev[i].length;
			     o += SECT) {
				int ok = sector_ok(p + ev[i].buffer_offset + (o - ev[i].file_offset), o);

				if (ok < 0) {
					if (first == UINT64_MAX)
						first = o;
					bad++;
				} else if (ok == 1) {
					sh->zero_sect[k]++;
				}
			}
		if (bad) {
			unsigned char c = 0;

			for (int i = 0; i < n; i++)
				if (first >= ev[i].file_offset && first < ev[i].file_offset + ev[i].length)
					c = (unsigned char)p[ev[i].buffer_offset + (first - ev[i].file_offset)];

			sh->bad[k] += bad;
			if (!sh->why[k][0])
				snprintf(sh->why[k], sizeof(sh->why[k]),
					 "a placement of %llu bytes: %llu sectors not file bytes, the first at offset %llu (first byte 0x%02x%s)",
					 (unsigned long long)res.bytes, (unsigned long long)bad,
					 (unsigned long long)first, c,
					 c == FILL ? ": never written by the placement" : "");
		}
		sh->placements[k]++;
		sh->placed_bytes[k] += res.bytes;
	}
	_exit(0);
}

static void prefetcher(const char *path)
{
	int fd = open(path, O_RDONLY);

	while (fd >= 0 && !sh->stop) {
		struct dmafs_result res;
		int ret = dmafs_prefetch(fd, 0, DMAFS_TO_EOF, &res, NULL);

		if (ret == -EOPNOTSUPP)
			break; /* no tier on this mount */
		if (ret) {
			fprintf(stderr, "place_stress: prefetching %s: %s\n", path, dmafs_strerror(ret));
			_exit(1);
		}
		__atomic_add_fetch(&sh->prefetches, 1, __ATOMIC_RELAXED);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	const char *path;
	char mnt[4096], *slash;
	pid_t pids[20];
	int np = 0, nplacers = 2, fail = 0;
	double secs, t0;
	char *buf;
	int fd;

	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: place_stress FILE SECONDS [PLACERS [MIB]]\n");
		return 1;
	}
	path = argv[1];
	secs = atof(argv[2]);
	if (argc >= 4)
		nplacers = atoi(argv[3]);
	fsize = (argc == 5 ? strtoull(argv[4], NULL, 0) : 4) << 20;
	if (nplacers < 1 || nplacers > 16 || !fsize) {
		fprintf(stderr, "place_stress: 1 to 16 placers, a file of at least 1 MiB\n");
		return 1;
	}
	snprintf(mnt, sizeof(mnt), "%s", path);
	slash = strrchr(mnt, '/');
	if (slash)
		*slash = 0;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	buf = aligned_alloc(4096, fsize);
	if (sh == MAP_FAILED || !buf) {
		perror("place_stress");
		return 1;
	}
	memset(sh, 0, sizeof(*sh));
	stamp_range(buf, 0, fsize, 1);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || pwrite(fd, buf, fsize, 0) != (ssize_t)fsize || fsync(fd) || close(fd)) {
		fprintf(stderr, "place_stress: writing %s: %s\n", path, strerror(errno));
		return 1;
	}
	sh->version = 1;
	t0 = now_s();
	for (int k = 0; k < nplacers + 2; k++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("place_stress: fork");
			sh->stop = 1;
			break;
		}
		if (pid == 0) {
			if (k == 0)
				writer(path, (uint64_t)getpid());
			else if (k == 1)
				prefetcher(path);
			else
				placer(mnt, path, k - 2);
		}
		pids[np++] = pid;
	}
	while (now_s() - t0 < secs && !sh->stop)
		usleep(20000);
	sh->stop = 1;
	for (int i = 0; i < np; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "place_stress: %s (process %d) failed\n",
				i == 0 ? "the writer" : i == 1 ? "the prefetcher" : "a placer", i);
			fail = 1;
		}
	}
	{
		uint64_t pl = 0, bad = 0, zs = 0, by = 0;

		for (int k = 0; k < nplacers; k++) {
			pl += sh->placements[k];
			bad += sh->bad[k];
			zs += sh->zero_sect[k];
			by += sh->placed_bytes[k];
			if (sh->why[k][0])
				fprintf(stderr, "place_stress: placer %d: %s\n", k, sh->why[k]);
		}
		printf("%llu placements (%.1f MiB), %llu prefetches against %llu writes, %llu truncates, %llu holes punched; %llu zero sectors, %llu sectors not file bytes\n",
		       (unsigned long long)pl, by / 1048576.0, (unsigned long long)sh->prefetches,
		       (unsigned long long)sh->writes, (unsigned long long)sh->truncates,
		       (unsigned long long)sh->punches, (unsigned long long)zs,
		       (unsigned long long)bad);
		if (bad)
			fail = 1;
		if (pl < 10 || sh->writes < 10) {
			fprintf(stderr, "place_stress: too little raced (%llu placements, %llu writes)\n",
				(unsigned long long)pl, (unsigned long long)sh->writes);
			fail = 1;
		}
	}
	return fail;
}
