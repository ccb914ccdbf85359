// SPDX-License-Identifier: MIT
/*
 * Description: dmafs_buf_alloc_host() gives a buffer of several hundred MiB that is
 * zero filled, wholly resident, mapped by the daemon at its full length, usable for a
 * placement and released by the daemon on unregistration; in 2 MiB hugetlb pages when
 * the pool has enough free pages (and DMAFS_HOST_HUGETLB is not 0), else in 4 KiB pages
 * (the fallback). With 4 free huge pages or more, also raw hugetlbfs registrations of an
 * odd length at offsets 0 and 4096, which the daemon must map and unmap in whole huge
 * pages.
 * Usage: host_buffer FILE_ON_DMAFS DAEMON_PID (FILE: random data, 8 MiB to 256 MiB).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dmafs-proto.h"
#include "dmafs.h"
#include "t_unit.h"

#define MIB (1ULL << 20)
#define HUGE (2 * MIB)
#define SIZE (384 * MIB + 123)

static const char *path;
static int dpid;

/* HugePages_Free of the default (2 MiB) pool, from /proc/meminfo; 0 when absent. */
static long huge_free(void)
{
	char line[128];
	long n = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Free: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* KernelPageSize in KiB of the mapping of this process that starts at @p; 0 if none. */
static long page_kib(const void *p)
{
	char line[256], want[32];
	long kib = 0;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return 0;
	snprintf(want, sizeof(want), "%lx-", (unsigned long)p);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want)))
			in = 1;
		else if (in && sscanf(line, "KernelPageSize: %ld kB", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

/* Total length of the daemon's mappings whose name contains @name. */
static unsigned long daemon_mapped(const char *name)
{
	char file[64], line[512];
	unsigned long a, b, total = 0;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/maps", dpid);
	f = fopen(file, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, name) && sscanf(line, "%lx-%lx", &a, &b) == 2)
			total += b - a;
	fclose(f);
	return total;
}

static int all_zero(const char *p, size_t n)
{
	static const char zero[1 << 16];

	for (size_t off = 0; off < n; off += sizeof(zero)) {
		size_t k = n - off < sizeof(zero) ? n - off : sizeof(zero);

		if (memcmp(p + off, zero, k))
			return 0;
	}
	return 1;
}

static int all_resident(void *p, size_t len)
{
	size_t pages = (len + 4095) / 4096;
	unsigned char *v = malloc(pages);
	int ok = v && !mincore(p, len, v);

	for (size_t i = 0; ok && i < pages; i++)
		ok = v[i] & 1;
	free(v);
	return ok;
}

static char *read_file(size_t *n)
{
	struct stat st;
	char *d;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st))
		return NULL;
	d = malloc((size_t)st.st_size);
	if (d && read(fd, d, (size_t)st.st_size) != st.st_size) {
		free(d);
		d = NULL;
	}
	close(fd);
	*n = (size_t)st.st_size;
	return d;
}

static void test_alloc(int want_huge, const char *ref, size_t fsize)
{
	struct dmafs_session *s;
	struct dmafs_buf *b;
	struct dmafs_result res;
	size_t len = want_huge ? (SIZE + HUGE - 1) / HUGE * HUGE : (SIZE + 4095) / 4096 * 4096;
	long free0 = huge_free();
	char *p;
	int ret;

	T_EQ(dmafs_session_open(path, &s), 0);
	if (t_failures)
		return;
	ret = dmafs_buf_alloc_host(s, SIZE, &b);
	T_EQ(ret, 0);
	if (ret) {
		dmafs_session_close(s);
		return;
	}
	p = dmafs_buf_ptr(b);
	T_EQ(dmafs_buf_size(b), SIZE);
	T_EQ(dmafs_buf_target(b), DMAFS_TARGET_HOST);
	T_EQ(page_kib(p), want_huge ? 2048 : 4);
	T_CHECK(all_resident(p, len), "not every page of the buffer is resident");
	T_CHECK(all_zero(p, len), "the buffer is not zero filled");
	/* registered: the daemon maps all of it (whole huge pages in the huge case) */
	T_EQ(daemon_mapped("dmafs-host"), len);
	if (want_huge)
		T_EQ(free0 - huge_free(), len / HUGE);
	/* usable: a placement at a page offset lands, the rest stays zero */
	T_EQ(dmafs_place_file(b, path, 4096, &res), 0);
	T_EQ(res.bytes, fsize);
	T_EQ(res.path, DMAFS_PATH_HOST);
	T_CHECK(!memcmp(p + 4096, ref, fsize), "placed bytes differ from a POSIX read");
	T_CHECK(all_zero(p, 4096) && all_zero(p + 4096 + fsize, SIZE - 4096 - fsize),
		"a placement wrote outside its range");
	memset(p, 0xa5, SIZE); /* writable everywhere */
	T_EQ(dmafs_buf_unregister(b), 0);
	T_EQ(daemon_mapped("dmafs-host"), 0);
	if (want_huge)
		T_EQ(huge_free(), free0);
	dmafs_session_close(s);
}

/*
 * A raw client's hugetlbfs memfd registered at offset @off with length 2 MiB + 5: the
 * daemon must map the two huge pages that holds (an unaligned offset fails mmap) and
 * unmap them again (an unaligned length fails munmap, and the mapping would stay).
 */
static void test_raw_huge(uint64_t off, const char *ref)
{
	struct dmafs_ioc_register r;
	struct dmafs_ioc_unregister u;
	struct dmafs_ioc_place pl;
	size_t len = 4 * HUGE, size = HUGE + 5;
	long free0 = huge_free();
	int fd, mfd;
	char *p;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	mfd = memfd_create("dmafs-test-huge", MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB);
	T_CHECK(fd >= 0 && mfd >= 0, "open/memfd_create: %s", strerror(errno));
	T_EQ(ftruncate(mfd, (off_t)len), 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, mfd, 0);
	T_CHECK(p != MAP_FAILED, "mmap of a hugetlb memfd: %s", strerror(errno));
	if (t_failures)
		return;
	memset(&r, 0, sizeof(r));
	r.target = DMAFS_TARGET_HOST;
	r.offset = off;
	r.size = size;
	r.fd = mfd;
	r.device = -1;
	T_EQ(ioctl(fd, DMAFS_IOC_REGISTER, &r), 0);
	T_EQ(daemon_mapped("dmafs-test-huge"), 2 * HUGE);
	memset(&pl, 0, sizeof(pl));
	pl.id = r.id;
	pl.count = 1;
	pl.e[0] = (struct dmafs_place_entry){ 0, size, 0 };
	T_EQ(ioctl(fd, DMAFS_IOC_PLACE, &pl), 0);
	T_EQ(pl.bytes, size);
	T_CHECK(!memcmp(p + off, ref, size), "raw huge placement at offset %llu differs",
		(unsigned long long)off);
	u.id = r.id;
	T_EQ(ioctl(fd, DMAFS_IOC_UNREGISTER, &u), 0);
	T_EQ(daemon_mapped("dmafs-test-huge"), 0);
	munmap(p, len);
	close(mfd);
	close(fd);
	T_EQ(huge_free(), free0); /* our side closed too: the pages are back in the pool */
}

int main(int argc, char **argv)
{
	const char *env = getenv("DMAFS_HOST_HUGETLB");
	int huge_ok = !(env && !strcmp(env, "0"));
	long free_pages = huge_free();
	size_t fsize;
	char *ref;

	if (argc != 3) {
		fprintf(stderr, "usage: host_buffer FILE_ON_DMAFS DAEMON_PID\n");
		return 1;
	}
	path = argv[1];
	dpid = atoi(argv[2]);
	ref = read_file(&fsize);
	if (!ref || fsize < 8 * MIB || fsize > 256 * MIB) {
		fprintf(stderr, "host_buffer: %s: unreadable, or not 8 to 256 MiB\n", path);
		return 1;
	}
	/* Another user of the pool could change it between this look and the allocation;
	 * the test machines have none. */
	huge_ok = huge_ok && free_pages >= (long)((SIZE + HUGE - 1) / HUGE);
	printf("host_buffer: %ld free 2 MiB pages%s: expecting %s pages\n", free_pages,
	       env ? " and DMAFS_HOST_HUGETLB set" : "", huge_ok ? "2 MiB hugetlb" : "4 KiB");
	test_alloc(huge_ok, ref, fsize);
	if (free_pages >= 4) {
		test_raw_huge(0, ref);
		test_raw_huge(4096, ref);
	} else {
		printf("host_buffer: raw hugetlbfs registrations not checked: fewer than 4 free 2 MiB pages\n");
	}
	free(ref);
	return t_done("host_buffer");
}
