// SPDX-License-Identifier: MIT
/*
 * hostile-root.c - hostile's subcommands for root's side of hostile.sh: a warm-up
 * registration (warm), the daemon's descriptors and memory (sample, status), files
 * watched with inotify (watch) and timed reads (probe).
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile.h"

/* ---- root's side ---- */

/*
 * warm IOCFILE: one registration and two placements (aligned, unaligned) of root's, before
 * the baseline figures are taken: what the daemon sets up once for any placement (staging,
 * bounce buffers, threads) is not the attacker's doing.
 */
int cmd_warm(char **av)
{
	int fd;

	ioc = open_ioc(av[0]);
	fd = memfd_new(2 * MIB, 1);
	control("root's own written 2 MiB memfd", fd, 2 * MIB);
	close(fd);
	return t_done("warm");
}

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static void catch_stop(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

/*
 * Descriptors in @dir (/proc/PID/fd), or -1 when the process is gone; *pidfds gets those
 * that are pidfds, *shm those of shared memory (memfds, files on /dev/shm or hugetlbfs
 * other than @keep, the members' directory).
 */
static long count_fds(const char *dir, const char *keep, long *pidfds, long *shm)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	long n = 0;

	*pidfds = *shm = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char link[PATH_MAX];
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		n++;
		len = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (!strcmp(link, "anon_inode:[pidfd]"))
			++*pidfds;
		else if (!strncmp(link, "/memfd:", 7) || (!strncmp(link, "/dev/shm/", 9) &&
							   strncmp(link, keep, strlen(keep))))
			++*shm;
	}
	closedir(d);
	return n;
}

/* RssAnon and RssShmem of @path (/proc/PID/status) in KiB; 0 when gone. */
static int rss(const char *path, long *anon, long *shm)
{
	char line[256];
	FILE *f = fopen(path, "re");

	*anon = *shm = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "RssAnon: %ld", anon);
		sscanf(line, "RssShmem: %ld", shm);
	}
	fclose(f);
	return 0;
}

/*
 * sample PID KEEP OUTFILE: every 10 ms, PID's descriptors (pidfds, shared memory: see
 * count_fds), RssAnon and RssShmem; on SIGTERM writes "fds_max pidfds_max shmfds_max
 * anon_max shm_max sum_max samples" (KiB) to OUTFILE. Root only (another user's
 * /proc/PID/fd is closed to us).
 */
int cmd_sample(char **av)
{
	char fddir[64], status[64];
	long fds, pfds, sfds, anon, shm, fdsmax = 0, pfdsmax = 0, sfdsmax = 0, anonmax = 0, shmmax = 0,
						  summax = 0, samples = 0;
	FILE *out;

	snprintf(fddir, sizeof(fddir), "/proc/%s/fd", av[0]);
	snprintf(status, sizeof(status), "/proc/%s/status", av[0]);
	catch_stop();
	while (!stop) {
		fds = count_fds(fddir, av[1], &pfds, &sfds);
		if (fds < 0 || rss(status, &anon, &shm))
			break;
#define MAXOF(m, v) m = (v) > (m) ? (v) : (m)
		MAXOF(fdsmax, fds);
		MAXOF(pfdsmax, pfds);
		MAXOF(sfdsmax, sfds);
		MAXOF(anonmax, anon);
		MAXOF(shmmax, shm);
		MAXOF(summax, anon + shm);
		samples++;
		usleep(10000);
	}
	out = fopen(av[2], "we");
	if (!out)
		die(av[2]);
	fprintf(out, "%ld %ld %ld %ld %ld %ld %ld\n", fdsmax, pfdsmax, sfdsmax, anonmax, shmmax, summax, samples);
	fclose(out);
	return 0;
}

/* status PID KEEP: "fds pidfds shmfds anon_kib shm_kib" now (see count_fds). */
int cmd_status(char **av)
{
	char fddir[64], status[64];
	long anon, shm, fds, pfds, sfds;

	snprintf(fddir, sizeof(fddir), "/proc/%s/fd", av[0]);
	snprintf(status, sizeof(status), "/proc/%s/status", av[0]);
	fds = count_fds(fddir, av[1], &pfds, &sfds);
	if (fds < 0 || rss(status, &anon, &shm))
		return 1;
	printf("%ld %ld %ld %ld %ld\n", fds, pfds, sfds, anon, shm);
	return 0;
}

/*
 * watch PATH...: print "ready" once inotify watches PATH..., then one line per open,
 * access or modification of any of them, until SIGTERM. The fallback for hosts without
 * inotifywait (Debian package inotify-tools).
 */
int cmd_watch(int ac, char **av)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	int wd[16];

	if (in < 0)
		die("inotify_init1");
	if (ac > 16)
		ac = 16;
	for (int i = 0; i < ac; i++) {
		wd[i] = inotify_add_watch(in, av[i], IN_OPEN | IN_ACCESS | IN_MODIFY);
		if (wd[i] < 0)
			die(av[i]);
	}
	catch_stop();
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		struct pollfd p = { in, POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(in, buf, sizeof(buf));
		for (char *c = buf; n > 0 && c < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)c;

			for (int i = 0; i < ac; i++)
				if (wd[i] == e->wd)
					printf("%s %s%s%s\n", av[i], e->mask & IN_OPEN ? "OPEN " : "",
					       e->mask & IN_ACCESS ? "ACCESS " : "", e->mask & IN_MODIFY ? "MODIFY" : "");
			c += sizeof(*e) + e->len;
		}
		fflush(stdout);
	}
	return 0;
}

/* probe FILE SECONDS STOPFILE: read 4 KiB of FILE, page cache dropped first, over and over
 * until STOPFILE exists or SECONDS pass; print how many and the slowest, in ms. */
int cmd_probe(char **av)
{
	uint64_t end = now_ms() + strtoull(av[1], NULL, 0) * 1000, maxms = 0, n = 0;
	char buf[4096];
	int fd = open(av[0], O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die(av[0]);
	while (now_ms() < end && access(av[2], F_OK)) {
		uint64_t t0 = now_ms();

		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (pread(fd, buf, sizeof(buf), (off_t)(n % 64) * 4096) != (ssize_t)sizeof(buf))
			die("probe read");
		if (now_ms() - t0 > maxms)
			maxms = now_ms() - t0;
		n++;
		usleep(20000);
	}
	printf("%llu %llu\n", (unsigned long long)n, (unsigned long long)maxms);
	return 0;
}
