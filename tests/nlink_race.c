// SPDX-License-Identifier: MIT
/*
 * nlink_race.c - link(2) must not fail with ENOENT on a file that still has a name while
 * other processes stat it.
 *
 * Usage: nlink_race DIR SECONDS READERS unlink|rename
 *
 * Creates DIR/a and three more hard links DIR/n0..n2 to it. READERS processes stat DIR/a
 * in a loop; this process repeatedly removes the three extra names (unlink, or rename of
 * a fresh file over each name followed by unlink of that file) and links them again from
 * DIR/a. DIR/a is never removed, so every link(DIR/a, DIR/nK) must succeed.
 *
 * The kernel lowers its cached link count by itself after an unlink or a rename over a
 * name; a stat reply carrying the already lowered count that the kernel applies just
 * before that local decrement leaves the cached count at 0, and link(2) then fails with
 * ENOENT before reaching the filesystem.
 *
 * Exit 0: no failure; 1: link(2) failed (ENOENT counted and the first ones printed) or
 * another call failed; 2: usage or setup error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NLINKS 3

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int make_file(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	return close(fd);
}

int main(int argc, char **argv)
{
	char a[4096], t[4096], n[NLINKS][4096];
	double secs, end;
	int readers, use_rename;
	long cycles = 0, enoent = 0, other = 0;

	if (argc != 5 || (strcmp(argv[4], "unlink") && strcmp(argv[4], "rename"))) {
		fprintf(stderr, "usage: nlink_race DIR SECONDS READERS unlink|rename\n");
		return 2;
	}
	secs = atof(argv[2]);
	readers = atoi(argv[3]);
	use_rename = !strcmp(argv[4], "rename");
	snprintf(a, sizeof(a), "%s/a", argv[1]);
	snprintf(t, sizeof(t), "%s/t", argv[1]);
	unlink(a);
	unlink(t);
	if (make_file(a)) {
		perror(a);
		return 2;
	}
	for (int i = 0; i < NLINKS; i++) {
		snprintf(n[i], sizeof(n[i]), "%s/n%d", argv[1], i);
		unlink(n[i]);
		if (link(a, n[i])) {
			perror(n[i]);
			return 2;
		}
	}
	end = now() + secs;
	for (int r = 0; r < readers; r++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0) {
			struct stat st;

			while (now() < end)
				if (stat(a, &st))
					_exit(1);
			_exit(0);
		}
	}
	while (now() < end) {
		cycles++;
		for (int i = 0; i < NLINKS; i++) {
			if (use_rename) {
				/* drop a's link through rename over n[i], then remove the new file */
				if (make_file(t) || rename(t, n[i]) || unlink(n[i])) {
					fprintf(stderr, "nlink_race: rename/unlink %s: %s\n", n[i],
						strerror(errno));
					other++;
				}
			} else if (unlink(n[i])) {
				fprintf(stderr, "nlink_race: unlink %s: %s\n", n[i], strerror(errno));
				other++;
			}
		}
		for (int i = 0; i < NLINKS; i++) {
			struct stat st;
			int r;

			if (!link(a, n[i]))
				continue;
			if (errno != ENOENT) {
				fprintf(stderr, "nlink_race: link %s %s: %s\n", a, n[i], strerror(errno));
				other++;
				continue;
			}
			r = stat(a, &st);
			if (++enoent <= 3)
				fprintf(stderr,
					"nlink_race: cycle %ld: link(%s, %s) failed with ENOENT; stat(%s) = %d, st_nlink %lu\n",
					cycles, a, n[i], a, r, r ? 0UL : (unsigned long)st.st_nlink);
			if (link(a, n[i])) { /* keep the set of names for the next cycle */
				fprintf(stderr, "nlink_race: link %s %s again: %s\n", a, n[i],
					strerror(errno));
				other++;
			}
		}
	}
	for (int r = 0; r < readers; r++) {
		int status;

		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "nlink_race: a reader failed to stat %s\n", a);
			other++;
		}
	}
	printf("nlink_race %s: %ld cycles, %d readers, link ENOENT %ld, other errors %ld\n",
	       argv[4], cycles, readers, enoent, other);
	return enoent || other ? 1 : 0;
}
