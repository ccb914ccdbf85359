// SPDX-License-Identifier: MIT
/*
 * dirwalk.c - walk a directory while it changes, for tests/readdir_churn.sh.
 * Description: helper: lists a directory many times with small getdents64 calls, through
 * one open handle or reopening it at the last offset for every call (as an NFS server
 * does), and reports entries seen twice and names that existed throughout but were missed.
 *
 *   dirwalk DIR PREFIX COUNT STOPFILE one|reopen
 *
 * Lists DIR again and again until STOPFILE exists (at least once). COUNT names starting
 * with PREFIX must exist throughout. Prints one line per listing with a problem, and a
 * summary. Exit status: 0 clean, 1 duplicates or misses, 2 a call failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct linux_dirent64 {
	unsigned long long d_ino;
	long long d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Names seen this round: a simple open-addressing set of strdup'ed names. */
struct set {
	char **slot;
	size_t cap, n;
};

static size_t hash(const char *s)
{
	size_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* Returns 1 when @name was there already. */
static int set_add(struct set *s, const char *name)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		struct set t = { calloc(s->cap ? 2 * s->cap : 1024, sizeof(char *)),
				 s->cap ? 2 * s->cap : 1024, 0 };

		for (size_t k = 0; k < s->cap; k++)
			if (s->slot[k])
				for (i = hash(s->slot[k]) % t.cap;; i = (i + 1) % t.cap)
					if (!t.slot[i]) {
						t.slot[i] = s->slot[k];
						t.n++;
						break;
					}
		free(s->slot);
		*s = t;
	}
	for (i = hash(name) % s->cap; s->slot[i]; i = (i + 1) % s->cap)
		if (!strcmp(s->slot[i], name))
			return 1;
	s->slot[i] = strdup(name);
	s->n++;
	return 0;
}

static void set_clear(struct set *s)
{
	for (size_t k = 0; k < s->cap; k++) {
		free(s->slot[k]);
		s->slot[k] = NULL;
	}
	s->n = 0;
}

int main(int argc, char **argv)
{
	const char *dir, *prefix, *stop;
	long count, rounds = 0, bad = 0, calls = 0;
	int reopen;
	size_t plen;
	char buf[1024]; /* small: many getdents64 calls, many FUSE READDIRs */
	struct set seen = { 0 };

	if (argc != 6) {
		fprintf(stderr, "usage: dirwalk DIR PREFIX COUNT STOPFILE one|reopen\n");
		return 2;
	}
	dir = argv[1];
	prefix = argv[2];
	plen = strlen(prefix);
	count = atol(argv[3]);
	stop = argv[4];
	reopen = !strcmp(argv[5], "reopen");
	for (long r = 0; r == 0 || access(stop, F_OK); r++) {
		long long pos = 0;
		long dups = 0, kept = 0, total = 0;
		int fd = -1, done = 0;
		char first_dup[256] = "";

		set_clear(&seen);
		while (!done) {
			long n;

			if (fd < 0) {
				fd = open(dir, O_RDONLY | O_DIRECTORY);
				if (fd < 0 || lseek(fd, pos, SEEK_SET) < 0) {
					perror(dir);
					return 2;
				}
			}
			n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
			calls++;
			if (n < 0) {
				perror("getdents64");
				return 2;
			}
			if (n == 0)
				done = 1;
			for (long off = 0; off < n;) {
				struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);

				off += d->d_reclen;
				pos = d->d_off;
				if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
					continue;
				total++;
				if (set_add(&seen, d->d_name)) {
					if (!dups++)
						snprintf(first_dup, sizeof(first_dup), "%s", d->d_name);
				} else if (!strncmp(d->d_name, prefix, plen)) {
					kept++;
				}
			}
			if (reopen || done) {
				close(fd);
				fd = -1;
			}
		}
		if (dups || kept != count) {
			printf("round %ld: %ld entries, %ld seen twice (first: %s), %ld of the %ld names that stayed\n",
			       r, total, dups, first_dup[0] ? first_dup : "-", kept, count);
			bad++;
		}
		rounds++;
	}
	printf("%ld listings (%s), %ld getdents64 calls, %ld with entries seen twice or missed\n",
	       rounds, reopen ? "reopened at the offset for every call" : "one open handle",
	       calls, bad);
	return bad ? 1 : 0;
}
