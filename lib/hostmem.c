// SPDX-License-Identifier: MIT
/*
 * hostmem.c - the shared memory behind host buffers: a memfd whose pages are all
 * allocated, zeroed and mapped before dmafs_buf_alloc_host() returns, made as cheaply as
 * the kernel allows.
 *
 * A 4 KiB page costs the kernel an allocation, a zeroing and a mapping, and nothing else
 * counts, so the path is the one that does those in parallel: fallocate() allocates
 * without zeroing (one thread: it holds the inode lock), then write faults from a few
 * threads, each in its own range, zero and map. mmap(MAP_POPULATE), the obvious way,
 * takes read faults that also scan for fault-around, in one thread: several times
 * slower. The measurements are in dmafs_buf_alloc_host(3), NOTES.
 *
 * Reserved 2 MiB hugetlb pages (vm.nr_hugepages) are used first when there are enough
 * of them: 512 times fewer pages to zero, map and free. Transparent huge pages are not
 * asked for: memfds follow /sys/kernel/mm/transparent_hugepage/shmem_enabled, "never"
 * by default, and under "always" or "within_size" fallocate() gets them anyway.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "libdmafs-int.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define HUGE_SIZE (2ULL << 20)
/* Below this the 4 KiB path is cheap enough: reserved huge pages go to larger buffers. */
#define HUGE_MIN (64ULL << 20)

/* The size is final: nothing can shrink the object under the daemon's mapping or ours
 * (the daemon survives that, but the placement would fail with EFAULT). */
static int seal(int fd)
{
	return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ? -errno : 0;
}

/* Map @fd's first @len bytes shared and populate them; *out is the address. */
static int map_populated(int fd, size_t len, void **out)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int ret;

	if (p == MAP_FAILED)
		return -errno;
	/* Pieces of whole huge pages: no two threads fault the same 2 MiB page. -EINVAL:
	 * MADV_POPULATE_WRITE is unknown (Linux < 5.14); -EFAULT: a fault would have raised
	 * SIGBUS (no memory left for the object). */
	ret = dm_populate(p, len, MADV_POPULATE_WRITE, HUGE_SIZE);
	if (ret == -EINVAL) {
		/* Before Linux 5.14: MAP_POPULATE, one thread, errors not reported. */
		void *q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
			       fd, 0);

		ret = q == MAP_FAILED ? -errno : 0;
	}
	if (ret) {
		munmap(p, len);
		return ret == -EFAULT ? -ENOMEM : ret;
	}
	*out = p;
	return 0;
}

/* Seal @fd, map and populate its @len bytes into @m; @fd is closed on failure. */
static int finish(int fd, size_t len, int huge, struct hostmem *m)
{
	int ret = seal(fd);

	if (!ret)
		ret = map_populated(fd, len, &m->ptr);
	if (ret) {
		close(fd);
		return ret;
	}
	m->fd = fd;
	m->len = len;
	m->huge = huge;
	return 0;
}

/*
 * Reserved 2 MiB pages. mmap() of a hugetlb memfd reserves the whole length from the
 * pool, so a pool that is too small fails here at once with -ENOMEM instead of half way
 * through the faults; the faults then zero the huge pages in parallel (fallocate would
 * do it in one thread, under the inode lock).
 */
static int alloc_huge(size_t size, struct hostmem *m)
{
	const char *env = getenv("DMAFS_HOST_HUGETLB");
	size_t len;
	int fd, ret;

	if ((env && !strcmp(env, "0")) || size < HUGE_MIN || size > SIZE_MAX - HUGE_SIZE)
		return -ENOTSUP;
	len = (size + HUGE_SIZE - 1) / HUGE_SIZE * HUGE_SIZE;
	fd = memfd_create("dmafs-host", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | MFD_HUGE_2MB);
	if (fd < 0)
		return -errno; /* EINVAL: no hugetlbfs or no 2 MiB pages in this kernel */
	if (ftruncate(fd, (off_t)len)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return finish(fd, len, 1, m);
}

static int alloc_small(size_t size, struct hostmem *m)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
	int fd, ret;

	if (size > SIZE_MAX - page)
		return -ENOMEM;
	/* Whole pages: the daemon maps the object in pages, and a page wholly past the end of
	 * a memfd would SIGBUS on either side. */
	len = (size + page - 1) / page * page;
	fd = memfd_create("dmafs-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len)) {
		ret = errno == EFBIG || errno == EINVAL ? -ENOMEM : -errno;
		close(fd);
		return ret;
	}
	/* Allocate without zeroing (see the top of the file). Out of memory is final; any
	 * other failure (EINTR from a signal, EOPNOTSUPP) leaves the faults to allocate. */
	if (fallocate(fd, 0, 0, (off_t)len) && (errno == ENOSPC || errno == ENOMEM)) {
		close(fd);
		return -ENOMEM;
	}
	return finish(fd, len, 0, m);
}

int hostmem_alloc(size_t size, struct hostmem *m)
{
	if (!alloc_huge(size, m))
		return 0;
	return alloc_small(size, m);
}
