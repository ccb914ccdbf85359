// SPDX-License-Identifier: MIT
/*
 * Description: the attacker of hostile.sh: one subcommand per attack on the placement
 * channel (REGISTER, PLACE) of an allow_other mount, run by an unprivileged user; each
 * prints what the daemon answered and exits 0 when it answered as dmafs-ioctl(7) says,
 * 1 when not, 77 when the attack cannot be made here (the reason is printed). A few
 * subcommands are the root side of the test: sampling the daemon's descriptors and
 * memory, watching files with inotify, timing reads.
 *
 * Usage: hostile SUBCOMMAND ARGS... (see usage() below). IOCFILE is a file of the mount,
 * readable by the caller, that the ioctls are issued on.
 *
 * Every call is timed: an answer that takes longer than PROMPT_MS is a failure even when
 * it is the right one (the daemon must refuse at once, not after a slow open or a
 * population of pages it then throws away). A call that never returns is the shell's to
 * catch: only root can abort the FUSE connection that would free this process.
 *
 * This file holds the calls and checks every attack uses, and main(); the attacks are in
 * hostile-refuse.c (one buffer at a time), hostile-many.c (numbers and races) and
 * hostile-root.c (root's side). hostile.h declares what they share.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dmafs-proto.h"
#include "hostile.h"

int t_failures;
int ioc; /* descriptor of IOCFILE */

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* "0" or the errno's name ("EINVAL"); the number when glibc has no name for it. */
const char *ename(int neg)
{
	static __thread char buf[16];
	const char *n;

	if (neg == 0)
		return "0";
	n = strerrorname_np(-neg);
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "%d", -neg);
	return buf;
}

/* The errno named @name ("EINVAL"), or 0 for "0"; exits on an unknown name. */
int errno_of(const char *name)
{
	if (!strcmp(name, "0"))
		return 0;
	for (int e = 1; e < 200; e++) {
		const char *n = strerrorname_np(e);

		if (n && !strcmp(n, name))
			return e;
	}
	fprintf(stderr, "unknown errno name %s\n", name);
	exit(2);
}

void die(const char *what)
{
	fprintf(stderr, "hostile: %s: %s\n", what, strerror(errno));
	exit(2);
}

int open_ioc(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die(path);
	return fd;
}

/* REGISTER a host buffer: 0 (and *id) or -errno. */
int reg_host(int on, int fd, uint64_t offset, uint64_t size, uint64_t *id)
{
	struct dmafs_ioc_register r;

	memset(&r, 0, sizeof(r));
	r.target = DMAFS_TARGET_HOST;
	r.fd = fd;
	r.offset = offset;
	r.size = size;
	if (ioctl(on, DMAFS_IOC_REGISTER, &r))
		return -errno;
	if (id)
		*id = r.id;
	return 0;
}

int unreg(int on, uint64_t id)
{
	struct dmafs_ioc_unregister u = { id };

	return ioctl(on, DMAFS_IOC_UNREGISTER, &u) ? -errno : 0;
}

/* PLACE one extent: 0 (and *bytes) or -errno. The request is big; one per thread. */
int place1(int on, uint64_t id, uint64_t foff, uint64_t len, uint64_t boff, uint64_t *bytes)
{
	static __thread struct dmafs_ioc_place p;

	memset(&p, 0, offsetof(struct dmafs_ioc_place, e) + sizeof(p.e[0]));
	p.id = id;
	p.count = 1;
	p.e[0] = (struct dmafs_place_entry){ foff, len, boff };
	if (ioctl(on, DMAFS_IOC_PLACE, &p))
		return -errno;
	if (bytes)
		*bytes = p.bytes;
	return 0;
}

/* Write a pattern over [0, size) of @fd so that every page of it exists. */
void touch_fd(int fd, uint64_t size)
{
	static char chunk[1 << 20];

	memset(chunk, 0x5a, sizeof(chunk));
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < sizeof(chunk) ? (size_t)(size - off) : sizeof(chunk);
		ssize_t w = pwrite(fd, chunk, n, (off_t)off);

		if (w <= 0)
			die("pwrite into a memfd");
		off += (uint64_t)w;
	}
}

/* A memfd of @size bytes; every page written when @touch, else a hole. */
int memfd_new(uint64_t size, int touch)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, (off_t)size))
		die("memfd");
	if (touch)
		touch_fd(fd, size);
	return fd;
}

/*
 * One checked call: print what it answered and how long it took; a wrong answer or a
 * slow one is a failed check. @want2 is a second acceptable answer (-1: none).
 */
void expect(const char *what, int got, int want, int want2, uint64_t ms)
{
	int ok = got == -want || (want2 >= 0 && got == -want2);

	printf("  %-58s %-8s (want %s%s%s) %4llu ms%s\n", what, ename(got), ename(-want),
	       want2 >= 0 ? " or " : "", want2 >= 0 ? ename(-want2) : "", (unsigned long long)ms,
	       ok && ms <= PROMPT_MS ? "" : "  <-- WRONG");
	fflush(stdout);
	T_CHECK(ok, "%s: the daemon answered %s, want %s", what, ename(got), ename(-want));
	T_CHECK(ms <= PROMPT_MS, "%s: answered after %llu ms, want at most %d", what,
		(unsigned long long)ms, PROMPT_MS);
}

/* REGISTER @fd [offset, +size) and expect @want (an errno, 0: success, then unregistered). */
void try_reg(const char *what, int fd, uint64_t offset, uint64_t size, int want, int want2)
{
	uint64_t t0 = now_ms(), id = 0;
	int ret = reg_host(ioc, fd, offset, size, &id);

	expect(what, ret, want, want2, now_ms() - t0);
	if (ret == 0)
		unreg(ioc, id);
}

/* The bytes of IOCFILE [off, +len) through read(2), to compare placements with. */
char *file_bytes(uint64_t off, uint64_t len)
{
	char *p = malloc(len);

	if (!p || pread(ioc, p, len, (off_t)off) != (ssize_t)len)
		die("pread IOCFILE");
	return p;
}

/*
 * A registration that must work, and placements into it (offsets agreeing modulo 4096 and
 * not) that must give the file's bytes: without it a daemon that refused everything would
 * pass every attack. @size is at least 256 KiB.
 */
void control(const char *what, int fd, uint64_t size)
{
	const struct dmafs_place_entry e[2] = { { 4096, size - 8192, 4096 }, { 1, 100000, 0 } };
	uint64_t id = 0, bytes = 0;
	char *map;
	int ret;

	ret = reg_host(ioc, fd, 0, size, &id);
	expect(what, ret, 0, -1, 0);
	if (ret)
		return;
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap the control buffer");
	for (int i = 0; i < 2; i++) {
		char *want = file_bytes(e[i].file_offset, e[i].length);
		int same;

		ret = place1(ioc, id, e[i].file_offset, e[i].length, e[i].buffer_offset, &bytes);
		same = ret == 0 && bytes == e[i].length && !memcmp(map + e[i].buffer_offset, want, e[i].length);
		printf("    placement into it, %s: %s, bytes %s\n", i ? "unaligned" : "aligned", ename(ret),
		       same ? "exact" : "WRONG");
		T_CHECK(same, "%s: %s placement into it: %s, or its bytes differ from read(2)'s", what,
			i ? "unaligned" : "aligned", ename(ret));
		free(want);
	}
	munmap(map, size);
	unreg(ioc, id);
}

/* A file on a disk filesystem (not tmpfs, not FUSE) for the "not shared memory" case. */
static int usage(void)
{
	fprintf(stderr,
		"usage: hostile refuse IOCFILE OWNFILE ROOTSHM MYSHM\n"
		"       hostile sparse IOCFILE MIB\n"
		"       hostile shrink IOCFILE shm|huge|punch\n"
		"       hostile selfreg IOCFILE OWNFILE NPROC SECONDS\n"
		"       hostile flood IOCFILE NPROC PER LIMIT HOLDFILE\n"
		"       hostile fill|refill IOCFILE SIZE COUNT WANTOK ERRNO HOLDFILE\n"
		"       hostile deputy IOCFILE opath|rdwr PATH ERRNO\n"
		"       hostile race IOCFILE ROUNDS NPROC MIB\n"
		"       hostile churn IOCFILE SECONDS NTHREADS\n"
		"       hostile queue IOCFILE NTHREADS MIB STARTFILE\n"
		"       hostile warm IOCFILE | sample PID KEEP OUTFILE | status PID KEEP | watch PATH... | probe FILE SECONDS STOPFILE\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int args;
		int (*fn)(char **);
	} cmds[] = {
		{ "refuse", 4, cmd_refuse }, { "sparse", 2, cmd_sparse }, { "shrink", 2, cmd_shrink }, { "shrinkrace", 3, cmd_shrinkrace },
		{ "selfreg", 4, cmd_selfreg }, { "flood", 5, cmd_flood }, { "fill", 6, cmd_fill }, { "refill", 6, cmd_refill },
		{ "deputy", 4, cmd_deputy }, { "race", 4, cmd_race }, { "churn", 3, cmd_churn }, { "queue", 4, cmd_queue },
		{ "warm", 1, cmd_warm }, { "sample", 3, cmd_sample }, { "status", 2, cmd_status }, { "probe", 3, cmd_probe },
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && !strcmp(argv[1], "watch"))
		return cmd_watch(argc - 2, argv + 2);
	for (size_t i = 0; argc >= 2 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return argc == cmds[i].args + 2 ? cmds[i].fn(argv + 2) : usage();
	return usage();
}
