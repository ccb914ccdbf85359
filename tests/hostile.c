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
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/falloc.h>
#include <linux/magic.h>

#include "dmafs-proto.h"
#include "t_unit.h"

#define PROMPT_MS 2000 /* the longest a refusal may take */
#define MIB (1ull << 20)

static int ioc; /* descriptor of IOCFILE */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* "0" or the errno's name ("EINVAL"); the number when glibc has no name for it. */
static const char *ename(int neg)
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
static int errno_of(const char *name)
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

static void die(const char *what)
{
	fprintf(stderr, "hostile: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int open_ioc(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die(path);
	return fd;
}

/* REGISTER a host buffer: 0 (and *id) or -errno. */
static int reg_host(int on, int fd, uint64_t offset, uint64_t size, uint64_t *id)
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

static int unreg(int on, uint64_t id)
{
	struct dmafs_ioc_unregister u = { id };

	return ioctl(on, DMAFS_IOC_UNREGISTER, &u) ? -errno : 0;
}

/* PLACE one extent: 0 (and *bytes) or -errno. The request is big; one per thread. */
static int place1(int on, uint64_t id, uint64_t foff, uint64_t len, uint64_t boff, uint64_t *bytes)
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
static void touch_fd(int fd, uint64_t size)
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
static int memfd_new(uint64_t size, int touch)
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
static void expect(const char *what, int got, int want, int want2, uint64_t ms)
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
static void try_reg(const char *what, int fd, uint64_t offset, uint64_t size, int want, int want2)
{
	uint64_t t0 = now_ms(), id = 0;
	int ret = reg_host(ioc, fd, offset, size, &id);

	expect(what, ret, want, want2, now_ms() - t0);
	if (ret == 0)
		unreg(ioc, id);
}

/* The bytes of IOCFILE [off, +len) through read(2), to compare placements with. */
static char *file_bytes(uint64_t off, uint64_t len)
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
static void control(const char *what, int fd, uint64_t size)
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
static int disk_file(char *where, size_t n)
{
	const char *dirs[] = { "/var/tmp", "/tmp", "." };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char tmpl[PATH_MAX];
		struct statfs sf;
		int fd;

		if (statfs(dirs[i], &sf) || sf.f_type == TMPFS_MAGIC || sf.f_type == FUSE_SUPER_MAGIC)
			continue;
		snprintf(tmpl, sizeof(tmpl), "%s/.dmafs-hostile-XXXXXX", dirs[i]);
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd < 0)
			continue;
		unlink(tmpl);
		touch_fd(fd, 65536);
		snprintf(where, n, "%s", dirs[i]);
		return fd;
	}
	return -1;
}

/*
 * refuse IOCFILE OWNFILE ROOTSHM MYSHM: registrations the daemon must refuse, each with
 * its errno, in the order dmafs-ioctl(7) checks (EBADF, EINVAL, EACCES, ERANGE, EFAULT),
 * and controls that must work. OWNFILE is a file of the caller's on this mount, ROOTSHM
 * root's mode 0666 file on tmpfs, MYSHM a path on tmpfs where the caller may create one.
 */
static int cmd_refuse(char **av)
{
	char path[64], where[PATH_MAX];
	int mfd, fd, sv[2], pfd[2];
	uint64_t t0;

	ioc = open_ioc(av[0]);
	printf("descriptors that are not open, or not open for reading and writing: EBADF\n");
	try_reg("fd -1", -1, 0, 4096, EBADF, -1);
	try_reg("fd 1000000 (beyond any table)", 1000000, 0, 4096, EBADF, -1);
	/* numbers the caller has closed but the daemon most likely has open (its /dev/fuse,
	 * members, log): the daemon must look in the caller's table, not its own */
	for (int n = 3; n < 24; n++) {
		char what[64];

		if (n == ioc || fcntl(n, F_GETFD) >= 0)
			continue;
		snprintf(what, sizeof(what), "fd %d: closed in the caller", n);
		try_reg(what, n, 0, 4096, EBADF, -1);
	}
	mfd = memfd_new(MIB, 1);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	fd = open(path, O_PATH | O_CLOEXEC);
	try_reg("O_PATH descriptor of a written memfd", fd, 0, 4096, EBADF, -1);
	close(fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	try_reg("O_RDONLY descriptor of a written memfd", fd, 0, 4096, EBADF, -1);
	close(fd);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	try_reg("O_WRONLY descriptor of a written memfd", fd, 0, 4096, EBADF, -1);
	close(fd);

	printf("descriptors open O_RDWR of things that are not shared memory: EINVAL\n");
	fd = disk_file(where, sizeof(where));
	if (fd >= 0) {
		char what[PATH_MAX + 64];

		snprintf(what, sizeof(what), "regular file on disk (%s)", where);
		try_reg(what, fd, 0, 4096, EINVAL, -1);
		close(fd);
	} else {
		printf("  (no disk filesystem writable here: regular file on disk not tried)\n");
	}
	fd = open(av[1], O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(av[1]);
	try_reg("a file of this dmafs mount, O_RDWR", fd, 0, 4096, EINVAL, -1);
	try_reg("the very file the ioctl is issued on, O_RDWR", fd, 0, 4096, EINVAL, -1);
	{
		/* the ioctl on the same descriptor that it names */
		uint64_t id;
		int ret;

		t0 = now_ms();
		ret = reg_host(fd, fd, 0, 4096, &id);
		expect("REGISTER on fd N naming fd N (this mount)", ret, EINVAL, -1, now_ms() - t0);
	}
	close(fd);
	if (pipe2(pfd, O_CLOEXEC))
		die("pipe");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd[0]);
	fd = open(path, O_RDWR | O_CLOEXEC); /* a pipe reopened read-write */
	try_reg("pipe, reopened O_RDWR", fd, 0, 4096, EINVAL, -1);
	close(fd);
	/* a read end is O_RDONLY: the descriptor check (EBADF) comes first */
	try_reg("pipe read end (O_RDONLY)", pfd[0], 0, 4096, EBADF, EINVAL);
	close(pfd[0]);
	close(pfd[1]);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		die("socketpair");
	try_reg("unix socket", sv[0], 0, 4096, EINVAL, -1);
	close(sv[0]);
	close(sv[1]);
	fd = eventfd(0, EFD_CLOEXEC);
	try_reg("eventfd", fd, 0, 4096, EINVAL, -1);
	close(fd);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	try_reg("/dev/null", fd, 0, 4096, EINVAL, -1);
	close(fd);
	fd = open("/dev/zero", O_RDWR | O_CLOEXEC);
	try_reg("/dev/zero", fd, 0, 4096, EINVAL, -1);
	close(fd);
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		try_reg("/dev/fuse (a fresh FUSE device)", fd, 0, 4096, EINVAL, -1);
		close(fd);
	}
	/* a directory cannot be opened O_RDWR: by the order of the checks this is EBADF,
	 * though the list of non-shared-memory files names directories under EINVAL */
	fd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	try_reg("directory on tmpfs (O_RDONLY, the only way)", fd, 0, 4096, EBADF, EINVAL);
	close(fd);

	printf("shared memory of another user: EACCES\n");
	fd = open(av[2], O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(av[2]);
	try_reg("root's mode 0666 tmpfs file, opened O_RDWR", fd, 0, 4096, EACCES, -1);
	try_reg("  the same, a range past its end (ownership first)", fd, 0, 64 * MIB, EACCES, -1);
	close(fd);

	printf("ranges past the end of the memory object: ERANGE\n");
	try_reg("1 MiB memfd, size 1 MiB + 1", mfd, 0, MIB + 1, ERANGE, -1);
	try_reg("1 MiB memfd, offset 1 MiB, size 4096", mfd, MIB, 4096, ERANGE, -1);
	try_reg("1 MiB memfd, offset 2^63, size 4096", mfd, 1ull << 63, 4096, ERANGE, -1);
	/* dmafs-ioctl(7) has EINVAL for an offset + size that overflows */
	try_reg("1 MiB memfd, offset 2^64 - 4096, size 8192 (overflows)", mfd, -4096ull, 8192, EINVAL, ERANGE);
	try_reg("1 MiB memfd, offset 4096, size 1 MiB", mfd, 4096, MIB, ERANGE, -1);
	fd = memfd_new(MIB, 0);
	try_reg("sparse 1 MiB memfd, size 2 MiB (range before holes)", fd, 0, 2 * MIB, ERANGE, -1);
	close(fd);

	printf("holes in the registered range: EFAULT\n");
	fd = memfd_new(8 * MIB, 1);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4 * MIB, 4096))
		die("fallocate PUNCH_HOLE");
	try_reg("8 MiB memfd, one page punched at 4 MiB", fd, 0, 8 * MIB, EFAULT, -1);
	try_reg("  the same, offset 4 MiB + 4096 (after the hole)", fd, 4 * MIB + 4096, 4 * MIB - 4096, 0,
		-1);
	try_reg("  the same, offset 4 MiB - 1, size 2 (over it)", fd, 4 * MIB - 1, 2, EFAULT, -1);
	close(fd);
	fd = memfd_new(8 * MIB, 0);
	touch_fd(fd, 4 * MIB);
	try_reg("8 MiB memfd, written up to 4 MiB: the whole", fd, 0, 8 * MIB, EFAULT, -1);
	try_reg("  the written half only", fd, 0, 4 * MIB, 0, -1);
	close(fd);

	printf("controls: shared memory of the caller's own\n");
	control("written 1 MiB memfd", mfd, MIB);
	close(mfd);
	fd = open(av[3], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		die(av[3]);
	unlink(av[3]);
	touch_fd(fd, 2 * MIB);
	control("the caller's own written tmpfs file (/dev/shm)", fd, 2 * MIB);
	close(fd);
	return t_done("refuse");
}

/*
 * sparse IOCFILE MIB: a sparse memfd of MIB MiB (ftruncate only) must be refused with
 * EFAULT at once, without the daemon faulting its pages in (the shell watches the
 * daemon's memory; this prints how much of the memfd exists afterwards).
 */
static int cmd_sparse(char **av)
{
	uint64_t size = strtoull(av[1], NULL, 0) * MIB;
	struct stat st;
	int fd;

	ioc = open_ioc(av[0]);
	fd = memfd_new(size, 0);
	try_reg("sparse memfd (ftruncate only), whole", fd, 0, size, EFAULT, -1);
	try_reg("sparse memfd, its last page only", fd, size - 4096, 4096, EFAULT, -1);
	if (fstat(fd, &st))
		die("fstat");
	printf("  memfd pages that exist after the attempts: %llu KiB of %llu KiB\n",
	       (unsigned long long)st.st_blocks / 2, (unsigned long long)size / 1024);
	T_CHECK((uint64_t)st.st_blocks * 512 < 64 * MIB,
		"%llu KiB of the sparse memfd were allocated during the refused registration",
		(unsigned long long)st.st_blocks / 2);
	close(fd);
	return t_done("sparse");
}

/* A hugetlb memfd of @size bytes, every page written; -errno when none can be had. */
static int huge_new(uint64_t size, int *fdp)
{
	int fd = memfd_create("hostile-huge", MFD_CLOEXEC | MFD_HUGETLB), err;
	char *map;

	if (fd < 0)
		return -errno;
	/* mmap reserves the pages of a shared hugetlb mapping: ENOMEM when the pool is short */
	if (ftruncate(fd, (off_t)size) ||
	    (map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)) == MAP_FAILED) {
		err = errno;
		close(fd);
		return -err;
	}
	memset(map, 0x5a, size);
	munmap(map, size);
	*fdp = fd;
	return 0;
}

static long huge_free(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "HugePages_Free: %ld", &n);
	if (f)
		fclose(f);
	return n;
}

/* Place into a buffer whose pages are gone, aligned and not: EFAULT both, at once. */
static void place_gone(uint64_t id, const char *why)
{
	char what[160];
	uint64_t t0 = now_ms(), bytes;
	int ret = place1(ioc, id, 0, MIB, 0, &bytes);

	snprintf(what, sizeof(what), "place 1 MiB, file 0 -> buffer 0 (aligned)%s", why);
	expect(what, ret, EFAULT, -1, now_ms() - t0);
	t0 = now_ms();
	ret = place1(ioc, id, 1, 100000, 0, &bytes);
	snprintf(what, sizeof(what), "place 100000 B, file 1 -> buffer 0 (unaligned)%s", why);
	expect(what, ret, EFAULT, -1, now_ms() - t0);
}

/* Bytes of memory behind @fd's pages. */
static uint64_t fd_bytes(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		die("fstat");
	return (uint64_t)st.st_blocks * 512;
}

/* Register a written memfd (@huge: hugetlb; -errno when none can be had), then punch its
 * first @hole bytes out. */
static int punched(int huge, uint64_t size, uint64_t hole, int *fdp, uint64_t *id)
{
	int ret, fd;

	if (huge) {
		ret = huge_new(size, &fd);
		if (ret)
			return ret;
	} else {
		fd = memfd_new(size, 1);
	}
	ret = reg_host(ioc, fd, 0, size, id);
	expect(huge ? "register a written 4 MiB hugetlb memfd" : "register a written 8 MiB memfd", ret, 0, -1, 0);
	if (ret) {
		close(fd);
		return 0;
	}
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)hole))
		die("fallocate PUNCH_HOLE");
	printf("  punched the first %llu KiB out of the registered memfd\n", (unsigned long long)hole >> 10);
	*fdp = fd;
	return 0;
}

/*
 * shrink IOCFILE shm|huge|punch: register a written buffer, then take its pages away and
 * place into it, with file and buffer offsets agreeing modulo 4096 (the daemon may read
 * straight into the pages) and not (it copies). Each must fail with EFAULT, at once; a
 * fresh buffer then works.
 * shm: a memfd truncated to 0: the daemon's access to it raises SIGBUS.
 * huge: a 4 MiB MFD_HUGETLB memfd whose first 2 MiB page is punched out, the pool drained
 * (this process takes every free page): the daemon's fault finds no page, SIGBUS again.
 * punch: a hole punched in a registered memfd, and in a hugetlb one with pages free:
 * nothing stops the daemon's fault there, which would put pages the client did not make
 * into its memory, charged to the daemon (the hole a registration is refused for); the
 * memfd must not grow back.
 */
static int cmd_shrink(char **av)
{
	uint64_t id = 0;
	int fd = -1, ret;

	ioc = open_ioc(av[0]);
	if (!strcmp(av[1], "shm")) {
		fd = memfd_new(8 * MIB, 1);
		ret = reg_host(ioc, fd, 0, 8 * MIB, &id);
		expect("register a written 8 MiB memfd", ret, 0, -1, 0);
		if (ret)
			return t_done("shrink");
		if (ftruncate(fd, 0))
			die("ftruncate 0");
		printf("  truncated the registered memfd to 0 bytes\n");
		place_gone(id, "");
	} else if (!strcmp(av[1], "huge")) {
		int fill[64], nfill = 0;

		ret = punched(1, 4 * MIB, 2 * MIB, &fd, &id);
		if (ret) {
			printf("SKIP: a 4 MiB hugetlb memfd: %s\n", strerror(-ret));
			return 77;
		}
		if (fd < 0)
			return t_done("shrink");
		while (nfill < 64 && huge_new(2 * MIB, &fill[nfill]) == 0)
			nfill++;
		printf("  took the %d free 2 MiB pages, %ld left\n", nfill, huge_free());
		if (huge_free() != 0) {
			printf("SKIP: the pool of 2 MiB pages could not be drained\n");
			return 77;
		}
		place_gone(id, ", no page free");
		while (nfill > 0)
			close(fill[--nfill]);
	} else {
		uint64_t before;
		long free0;

		ret = punched(0, 8 * MIB, MIB, &fd, &id);
		if (fd < 0)
			return t_done("shrink");
		before = fd_bytes(fd);
		place_gone(id, ", shm hole");
		printf("  memory behind the memfd: %llu KiB before the placements, %llu KiB after\n",
		       (unsigned long long)before >> 10, (unsigned long long)fd_bytes(fd) >> 10);
		T_CHECK(fd_bytes(fd) == before, "the placements filled the hole of the memfd");
		unreg(ioc, id);
		close(fd);
		fd = -1;
		ret = punched(1, 4 * MIB, 2 * MIB, &fd, &id);
		if (ret) {
			printf("  (no 4 MiB hugetlb memfd: %s; its hole is not tried)\n", strerror(-ret));
		} else if (fd >= 0) {
			free0 = huge_free();
			place_gone(id, ", hugetlb hole");
			printf("  free 2 MiB pages: %ld before the placements, %ld after\n", free0, huge_free());
			T_CHECK(huge_free() == free0, "the placements filled the hole of the hugetlb memfd");
		}
	}
	if (fd >= 0) {
		unreg(ioc, id);
		close(fd);
	}
	printf("the daemon still places for this client:\n");
	fd = memfd_new(2 * MIB, 1);
	control("a fresh written 2 MiB memfd", fd, 2 * MIB);
	close(fd);
	return t_done("shrink");
}

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
static int cmd_selfreg(char **av)
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
static int cmd_flood(char **av)
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

static int cmd_fill(char **av)
{
	return fill(av, 0);
}

static int cmd_refill(char **av)
{
	return fill(av, 1);
}

/*
 * deputy IOCFILE opath|rdwr PATH ERRNO: REGISTER a descriptor of PATH opened O_PATH (a file
 * the caller may not open: the daemon must not open it for the caller) or O_RDWR (a file
 * of another FUSE mount); want ERRNO, promptly.
 */
static int cmd_deputy(char **av)
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
static int cmd_race(char **av)
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
static int cmd_churn(char **av)
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
static int cmd_queue(char **av)
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

/* ---- root's side ---- */

/*
 * warm IOCFILE: one registration and two placements (aligned, unaligned) of root's, before
 * the baseline figures are taken: what the daemon sets up once for any placement (staging,
 * bounce buffers, threads) is not the attacker's doing.
 */
static int cmd_warm(char **av)
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
static int cmd_sample(char **av)
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
static int cmd_status(char **av)
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
static int cmd_watch(int ac, char **av)
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
static int cmd_probe(char **av)
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
		{ "refuse", 4, cmd_refuse }, { "sparse", 2, cmd_sparse }, { "shrink", 2, cmd_shrink },
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
