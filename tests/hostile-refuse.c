// SPDX-License-Identifier: MIT
/*
 * hostile-refuse.c - hostile's attacks with one buffer at a time: descriptors and ranges
 * the daemon must refuse (refuse), a sparse memfd (sparse), and registered buffers whose
 * pages go away under the daemon: truncated, punched, a drained hugetlb pool (shrink).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/falloc.h>
#include <linux/magic.h>

#include "dmafs-proto.h"
#include "hostile.h"

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
int cmd_refuse(char **av)
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
int cmd_sparse(char **av)
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

/* After an attack: a fresh buffer of this client is placed into as ever. */
static void still_places(void)
{
	int fd;

	printf("the daemon still places for this client:\n");
	fd = memfd_new(2 * MIB, 1);
	control("a fresh written 2 MiB memfd", fd, 2 * MIB);
	close(fd);
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
int cmd_shrink(char **av)
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
	still_places();
	return t_done("shrink");
}

static int race_fd = -1;
static uint64_t race_to;

static void *truncate_soon(void *arg)
{
	(void)arg;
	usleep(1000);
	if (ftruncate(race_fd, (off_t)race_to))
		die("ftruncate");
	return NULL;
}

/*
 * shrinkrace IOCFILE DATA_MIB HOLE_MIB: IOCFILE holds DATA_MIB of data, then a hole of
 * HOLE_MIB (the daemon zeroes the client's pages for it itself, where file and buffer
 * offsets agree). Register a written memfd of the file's size, place the whole file into
 * it, and 1 ms into the placement truncate the memfd to DATA_MIB: the data lands in pages
 * that stay, the hole's zeroes would go to pages that are gone. The placement must fail
 * with EFAULT, and the daemon live on and place for this client (a plain store there
 * would kill it with SIGBUS, and every user's mount with it). Three times; then three
 * times as a batch of 4 MiB samples, the memfd truncated to 0 (the samples' whole blocks
 * are read straight into the pages: the reads meet pages gone, and must not blame the
 * members).
 */
int cmd_shrinkrace(char **av)
{
	uint64_t data = strtoull(av[1], NULL, 10) * MIB, size = data + strtoull(av[2], NULL, 10) * MIB;
	uint64_t id = 0, bytes;
	int ret, fd;

	ioc = open_ioc(av[0]);
	for (int k = 0; k < 6; k++) {
		pthread_t t;
		uint64_t t0;

		fd = memfd_new(size, 1);
		ret = reg_host(ioc, fd, 0, size, &id);
		expect("register a written memfd of the file's size", ret, 0, -1, 0);
		if (ret)
			return t_done("shrinkrace");
		race_fd = fd;
		race_to = k < 3 ? data : 0;
		if (pthread_create(&t, NULL, truncate_soon, NULL))
			die("pthread_create");
		t0 = now_ms();
		if (k < 3) {
			ret = place1(ioc, id, 0, size, 0, &bytes);
		} else { /* the same as samples of a batch (whole blocks read straight in) */
			static struct dmafs_ioc_batch b;
			struct dmafs_ioc_handle h = { 0 };

			ret = ioctl(ioc, DMAFS_IOC_HANDLE, &h) ? -errno : 0;
			memset(&b, 0, offsetof(struct dmafs_ioc_batch, e));
			b.id = id;
			for (uint64_t o = 0; !ret && o < size; o += 4 * MIB)
				b.e[b.count++] = (struct dmafs_batch_entry){
					.ino = h.ino, .mac = h.mac, .gen = h.gen, .file_offset = o,
					.buffer_offset = o, .length = (uint32_t)(4 * MIB) };
			if (!ret && ioctl(ioc, DMAFS_IOC_BATCH, &b))
				ret = -errno;
		}
		pthread_join(t, NULL);
		expect(k < 3 ? "place data then a hole, the hole's pages gone meanwhile" :
		       "a batch of it in 4 MiB samples, every page gone meanwhile", ret, EFAULT, -1,
		       now_ms() - t0);
		unreg(ioc, id);
		close(fd);
	}
	still_places();
	return t_done("shrinkrace");
}
