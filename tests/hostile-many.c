// SPDX-License-Identifier: MIT
/*
 * hostile-many.c - hostile's attacks by numbers and races: many processes registering
 * themselves (selfreg), floods and fills of registrations up to the limits (flood, fill,
 * refill), a deputy asked to open what the caller may not (deputy), races with close and
 * exit (race), one process's registrations coming and going at once (churn) and the
 * placement queue (queue).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile.h"

/* ---- many processes ---- */

struct tally {
	uint64_t calls, ok, want, other, max_ms, sum_ms;
	int other_err;
};

static void tally_add(struct tally *t, int ret, int want, uint64_t ms)
{
	t->calls++;
	t->sum_ms += ms;
	if (ms > t->max_ms)
		t->max_ms = ms;
	if (ret == 0)
		t->ok++;
	else if (ret == -want)
		t->want++;
	else {
		t->other++;
		t->other_err = ret;
	}
}

static void tally_sum(struct tally *sum, const struct tally *t)
{
	sum->calls += t->calls;
	sum->ok += t->ok;
	sum->want += t->want;
	sum->other += t->other;
	sum->sum_ms += t->sum_ms;
	if (t->max_ms > sum->max_ms)
		sum->max_ms = t->max_ms;
	if (t->other)
		sum->other_err = t->other_err;
}

/*
 * Fork @n children running @fn(i, arg), each then writing its struct tally to a pipe whose
 * read end this returns. With @hold_fd (the read end of a pipe whose write end @hold_wr
 * only the caller keeps), children then wait for its EOF before they exit.
 */
static int spawn(unsigned n, pid_t *pids, void (*fn)(unsigned, char **, struct tally *), char **arg,
		 int hold_fd, int hold_wr)
{
	int pfd[2];

	if (pipe(pfd))
		die("pipe");
	fflush(stdout);
	for (unsigned i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork");
		if (pids[i] == 0) {
			struct tally t = { 0 };
			char c;

			close(pfd[0]);
			if (hold_wr >= 0)
				close(hold_wr);
			fn(i, arg, &t);
			if (write(pfd[1], &t, sizeof(t)) != sizeof(t))
				_exit(2);
			close(pfd[1]); /* EOF for the parent if a sibling died without a word */
			if (hold_fd >= 0)
				while (read(hold_fd, &c, 1) > 0)
					;
			_exit(0);
		}
	}
	close(pfd[1]);
	return pfd[0];
}

static void collect(int rfd, unsigned n, struct tally *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned i = 0; i < n; i++) {
		struct tally t;

		if (read(rfd, &t, sizeof(t)) != sizeof(t)) {
			T_CHECK(0, "a child died before reporting (%u of %u reported)", i, n);
			return;
		}
		tally_sum(sum, &t);
	}
}

static void reap_all(const pid_t *pids, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int st;

		waitpid(pids[i], &st, 0);
	}
}

/* REGISTER a descriptor of a file on the mount itself, over and over, until the time is up. */
static void selfreg_child(unsigned i, char **av, struct tally *t)
{
	uint64_t end = now_ms() + strtoull(av[3], NULL, 0) * 1000;
	int own = open(av[1], O_RDWR | O_CLOEXEC);
	int on = i % 2 ? open_ioc(av[0]) : own; /* odd: another file; even: the same one */

	if (own < 0)
		die(av[1]);
	while (now_ms() < end) {
		uint64_t t0 = now_ms();
		int ret = reg_host(on, own, 0, 4096, NULL);

		tally_add(t, ret, EINVAL, now_ms() - t0);
	}
}

/*
 * selfreg IOCFILE OWNFILE NPROC SECONDS: NPROC processes REGISTER an O_RDWR descriptor of
 * OWNFILE (a file of this mount) for SECONDS seconds, half of them on that very
 * descriptor. Every answer must be EINVAL, each within PROMPT_MS: a daemon that opened the
 * descriptor's path would send itself FUSE requests its busy workers cannot serve.
 */
int cmd_selfreg(char **av)
{
	unsigned n = (unsigned)strtoul(av[2], NULL, 0);
	pid_t pids[256];
	struct tally s;
	int rfd;

	if (n > 256)
		n = 256;
	rfd = spawn(n, pids, selfreg_child, av, -1, -1);
	collect(rfd, n, &s);
	reap_all(pids, n);
	printf("  %u processes, %llu REGISTERs of a descriptor on this mount: %llu EINVAL, %llu "
	       "accepted, %llu other (last %s); slowest %llu ms, mean %.2f ms\n",
	       n, (unsigned long long)s.calls, (unsigned long long)s.want, (unsigned long long)s.ok,
	       (unsigned long long)s.other, ename(s.other_err), (unsigned long long)s.max_ms,
	       s.calls ? (double)s.sum_ms / (double)s.calls : 0.0);
	T_CHECK(s.calls > 0 && s.want == s.calls, "every REGISTER of a file of the mount must fail with EINVAL");
	T_CHECK(s.max_ms <= PROMPT_MS, "slowest answer %llu ms, want at most %d",
		(unsigned long long)s.max_ms, PROMPT_MS);
	return t_done("selfreg");
}

/* Register @per fresh written 4 KiB memfds, closing each after the call. */
static void flood_child(unsigned i, char **av, struct tally *t)
{
	unsigned per = (unsigned)strtoul(av[2], NULL, 0);
	int on = open_ioc(av[0]);

	for (unsigned k = 0; k < per; k++) {
		int fd = memfd_new(4096, 1);
		uint64_t t0 = now_ms();
		int ret = reg_host(on, fd, 0, 4096, NULL);

		tally_add(t, ret, EDQUOT, now_ms() - t0);
		close(fd);
	}
}

static void create_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		die(path);
	close(fd);
}

/* Wait until @path is gone (the shell's "release"), at most @secs seconds. */
static void hold_until_removed(const char *path, unsigned secs)
{
	create_file(path);
	for (uint64_t end = now_ms() + secs * 1000ull; now_ms() < end && access(path, F_OK) == 0;)
		usleep(20000);
}

/*
 * flood IOCFILE NPROC PER LIMIT HOLDFILE: NPROC processes each register PER written
 * 4 KiB memfds at once. LIMIT of them must succeed (the per-user limit; 0: all must),
 * every other attempt must fail with EDQUOT. The registrations are held until HOLDFILE,
 * which this creates when all are made, is removed (at most 60 s).
 */
int cmd_flood(char **av)
{
	unsigned n = (unsigned)strtoul(av[1], NULL, 0), per = (unsigned)strtoul(av[2], NULL, 0);
	uint64_t limit = strtoull(av[3], NULL, 0), total = (uint64_t)n * per, t0 = now_ms();
	pid_t pids[256];
	struct tally s;
	int hold[2], rfd;

	if (n > 256)
		n = 256;
	if (pipe(hold))
		die("pipe");
	rfd = spawn(n, pids, flood_child, av, hold[0], hold[1]);
	close(hold[0]);
	collect(rfd, n, &s);
	printf("  %u processes x %u = %llu REGISTERs in %.1f s: %llu registered, %llu EDQUOT, "
	       "%llu other (last %s); slowest %llu ms\n",
	       n, per, (unsigned long long)s.calls, (double)(now_ms() - t0) / 1000.0,
	       (unsigned long long)s.ok, (unsigned long long)s.want, (unsigned long long)s.other,
	       ename(s.other_err), (unsigned long long)s.max_ms);
	fflush(stdout);
	if (limit && limit < total)
		T_CHECK(s.ok == limit && s.want == total - limit,
			"want exactly %llu registered (the per-user limit) and %llu EDQUOT",
			(unsigned long long)limit, (unsigned long long)(total - limit));
	else
		T_CHECK(s.ok == total, "want all %llu registered", (unsigned long long)total);
	hold_until_removed(av[4], 60);
	close(hold[1]);
	reap_all(pids, n);
	return t_done("flood");
}

/*
 * fill IOCFILE SIZE COUNT WANTOK ERRNO HOLDFILE: register COUNT written memfds of SIZE
 * bytes one after the other; the first WANTOK must succeed, the rest fail with ERRNO
 * (a name: EDQUOT, ENOSPC). Held until HOLDFILE (created when done) is removed.
 * refill: the same, all COUNT registrations of one memfd (byte limits without the memory).
 */
static int fill(char **av, int reuse)
{
	uint64_t size = strtoull(av[1], NULL, 0);
	unsigned count = (unsigned)strtoul(av[2], NULL, 0), wantok = (unsigned)strtoul(av[3], NULL, 0);
	int want = errno_of(av[4]), first_bad = -1, fd = -1;
	unsigned ok = 0, bad = 0;

	ioc = open_ioc(av[0]);
	for (unsigned k = 0; k < count; k++) {
		int ret;

		if (fd < 0)
			fd = memfd_new(size, 1);
		ret = reg_host(ioc, fd, 0, size, NULL);
		if (k < wantok ? ret != 0 : ret != -want) {
			if (!bad++)
				first_bad = (int)k;
			if (bad <= 3)
				printf("  registration %u of %llu bytes: %s, want %s\n", k + 1,
				       (unsigned long long)size, ename(ret), k < wantok ? "0" : ename(-want));
		}
		ok += ret == 0;
		if (!reuse) {
			close(fd);
			fd = -1;
		}
	}
	printf("  %u registrations of %llu bytes%s tried: %u made; want the first %u made, the rest %s: %s\n",
	       count, (unsigned long long)size, reuse ? " (one memfd)" : "", ok, wantok, ename(-want),
	       bad ? "NO" : "yes");
	T_CHECK(bad == 0, "%u registrations answered otherwise (first: number %d)", bad, first_bad + 1);
	fflush(stdout);
	hold_until_removed(av[5], 60);
	return t_done("fill");
}

int cmd_fill(char **av)
{
	return fill(av, 0);
}

int cmd_refill(char **av)
{
	return fill(av, 1);
}

/*
 * deputy IOCFILE opath|rdwr PATH ERRNO: REGISTER a descriptor of PATH opened O_PATH (a file
 * the caller may not open: the daemon must not open it for the caller) or O_RDWR (a file
 * of another FUSE mount); want ERRNO, promptly.
 */
int cmd_deputy(char **av)
{
	int opath = !strcmp(av[1], "opath");
	char what[PATH_MAX + 32];
	int fd;

	ioc = open_ioc(av[0]);
	fd = open(av[2], (opath ? O_PATH : O_RDWR) | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		die(av[2]);
	snprintf(what, sizeof(what), "%s %s", opath ? "O_PATH" : "O_RDWR", av[2]);
	try_reg(what, fd, 0, 4096, errno_of(av[3]), -1);
	close(fd);
	return t_done("deputy");
}

/* One process of the race: register a big written memfd while another thread closes the
 * descriptor or ends the process; the parent kills the third kind. */
static int race_fd;

static void *race_thread(void *arg)
{
	long how = (long)arg;

	usleep((useconds_t)(rand() % 3000));
	if (how == 0)
		close(race_fd);
	else
		_exit(0);
	return NULL;
}

static void race_child(const char *iocfile, uint64_t size, long how)
{
	pthread_t t;

	ioc = open_ioc(iocfile);
	race_fd = memfd_new(size, 0);
	if (fallocate(race_fd, 0, 0, (off_t)size)) /* every page there, quickly */
		touch_fd(race_fd, size);
	srand((unsigned)getpid());
	if (how < 2)
		pthread_create(&t, NULL, race_thread, (void *)how);
	for (int k = 0; k < 50; k++) /* until closed, ended or killed */
		reg_host(ioc, race_fd, 0, size, NULL);
	_exit(0);
}

/*
 * race IOCFILE ROUNDS NPROC MIB: ROUNDS times, NPROC processes register a written MIB MiB
 * memfd while the descriptor is closed by another thread, the process ends itself, or
 * the parent kills it (in turns). Any answer will do; the shell checks that the daemon
 * lives and lets go of everything within 2 s.
 */
int cmd_race(char **av)
{
	unsigned rounds = (unsigned)strtoul(av[1], NULL, 0), n = (unsigned)strtoul(av[2], NULL, 0);
	uint64_t size = strtoull(av[3], NULL, 0) * MIB;
	unsigned killed = 0, exited = 0;
	pid_t pids[64];

	if (n > 64)
		n = 64;
	for (unsigned r = 0; r < rounds; r++) {
		for (unsigned i = 0; i < n; i++) {
			pids[i] = fork();
			if (pids[i] < 0)
				die("fork");
			if (pids[i] == 0)
				race_child(av[0], size, (long)((i + r) % 3));
		}
		usleep(30000 + (useconds_t)(r % 4) * 10000);
		for (unsigned i = 0; i < n; i++)
			if ((i + r) % 3 == 2 && kill(pids[i], SIGKILL) == 0)
				killed++;
		for (unsigned i = 0; i < n; i++) {
			int st;

			/* a child whose REGISTER is in the daemon cannot die before the answer */
			if (waitpid(pids[i], &st, 0) == pids[i])
				exited++;
		}
	}
	printf("  %u rounds x %u processes with %llu MiB memfds: %u ended (%u killed with SIGKILL)\n",
	       rounds, n, (unsigned long long)(size / MIB), exited, killed);
	return t_done("race");
}

/* ---- registrations of one process coming and going at once ---- */

struct churn {
	pthread_t t;
	int on, fd;
	uint64_t until_ms, ok, refused;
	int bad; /* an answer other than 0 or EAGAIN */
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;

	while (now_ms() < c->until_ms && !c->bad) {
		uint64_t id;
		int ret = reg_host(c->on, c->fd, 0, 4096, &id);

		if (ret == -EAGAIN) {
			c->refused++;
			continue;
		}
		if (ret || unreg(c->on, id)) {
			c->bad = ret ? ret : -errno;
			break;
		}
		c->ok++;
	}
	return NULL;
}

/*
 * churn IOCFILE SECONDS NTHREADS: NTHREADS threads of one process register and unregister
 * a 4 KiB memfd each, over and over: the process's last registration keeps going away
 * while another is being made (the daemon then holds no pidfd of it). Every answer must
 * be 0 or EAGAIN, and the shell checks that the daemon lives.
 */
int cmd_churn(char **av)
{
	unsigned secs = (unsigned)strtoul(av[1], NULL, 0), n = (unsigned)strtoul(av[2], NULL, 0);
	struct churn c[16];
	uint64_t ok = 0, refused = 0;
	int on = open_ioc(av[0]);

	if (n > 16)
		n = 16;
	for (unsigned i = 0; i < n; i++) {
		c[i] = (struct churn){ .on = on, .fd = memfd_new(4096, 1),
				       .until_ms = now_ms() + secs * 1000ull };
		if (pthread_create(&c[i].t, NULL, churn_main, &c[i]))
			die("pthread_create");
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(c[i].t, NULL);
		ok += c[i].ok;
		refused += c[i].refused;
		T_CHECK(!c[i].bad, "churn thread %u: the daemon answered %s, want 0 or EAGAIN", i,
			ename(c[i].bad));
	}
	printf("  %u threads, %u s: %llu registrations made and dropped, %llu refused with EAGAIN\n",
	       n, secs, (unsigned long long)ok, (unsigned long long)refused);
	T_CHECK(ok > 0, "churn: no registration went through");
	return t_done("churn");
}

/* ---- the placement queue ---- */

struct qthread {
	pthread_t t;
	int fd;
	uint64_t id, size;
	int ret;
	uint64_t ms;
};

static pthread_barrier_t qbar;

static void *queue_main(void *arg)
{
	struct qthread *q = arg;
	uint64_t t0, bytes;

	pthread_barrier_wait(&qbar);
	t0 = now_ms();
	q->ret = place1(q->fd, q->id, 0, q->size, 0, &bytes);
	q->ms = now_ms() - t0;
	return NULL;
}

/*
 * queue IOCFILE NTHREADS MIB STARTFILE: NTHREADS threads of one process place the same
 * MIB MiB of IOCFILE into one buffer at once, far more than the daemon's placement threads
 * run: beyond place_queue waiting requests of one user the daemon must answer EAGAIN. Every
 * answer must be 0 or EAGAIN, and the buffer must hold the file's bytes. STARTFILE is
 * created when the threads are let go (the shell times root's reads meanwhile).
 */
int cmd_queue(char **av)
{
	unsigned n = (unsigned)strtoul(av[1], NULL, 0), ok = 0, again = 0, other = 0, other_err = 0;
	uint64_t size = strtoull(av[2], NULL, 0) * MIB, maxms = 0, id = 0, t0;
	struct qthread *q = calloc(n, sizeof(*q));
	char *map, *want;
	int fd, ret;

	ioc = open_ioc(av[0]);
	fd = memfd_new(size, 1);
	ret = reg_host(ioc, fd, 0, size, &id);
	expect("register the shared buffer", ret, 0, -1, 0);
	if (ret)
		return t_done("queue");
	pthread_barrier_init(&qbar, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		q[i] = (struct qthread){ .fd = open_ioc(av[0]), .id = id, .size = size };
		if (pthread_create(&q[i].t, NULL, queue_main, &q[i]))
			die("pthread_create");
	}
	create_file(av[3]);
	t0 = now_ms();
	pthread_barrier_wait(&qbar);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(q[i].t, NULL);
		if (q[i].ret == 0)
			ok++;
		else if (q[i].ret == -EAGAIN)
			again++;
		else {
			other++;
			other_err = (unsigned)-q[i].ret;
		}
		if (q[i].ms > maxms)
			maxms = q[i].ms;
		close(q[i].fd);
	}
	printf("  %u placements of %llu MiB at once: %u done, %u EAGAIN, %u other (last %s) in %.1f s; "
	       "slowest %llu ms\n",
	       n, (unsigned long long)(size / MIB), ok, again, other, ename(-(int)other_err),
	       (double)(now_ms() - t0) / 1000.0, (unsigned long long)maxms);
	T_CHECK(other == 0, "answers other than 0 and EAGAIN");
	T_CHECK(ok > 0, "no placement was done at all");
	T_CHECK(again > 0, "%u placements of one user waiting at once, none refused with EAGAIN", n);
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	want = file_bytes(0, size);
	T_CHECK(map != MAP_FAILED && !memcmp(map, want, size), "the buffer does not hold the file's bytes");
	printf("  buffer bytes after the placements: %s\n",
	       map != MAP_FAILED && !memcmp(map, want, size) ? "exact" : "WRONG");
	return t_done("queue");
}
