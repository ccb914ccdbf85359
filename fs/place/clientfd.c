// SPDX-License-Identifier: MIT
/* clientfd.c - vetting and taking a client's shared-memory descriptor (see clientfd.h). */
#include "place/clientfd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif

#define STUCK_MAX 2 /* a user's descriptors being closed on side threads */


/* The mnt_id and flags lines of /proc/@pid/fdinfo/@fd. Returns 0, -EBADF or -ESRCH. */
static int fdinfo(pid_t pid, int fd, int *mnt, unsigned *flags)
{
	char path[64], line[256];
	int got = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -EBADF : -ESRCH;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "flags: %o", flags) == 1)
			got |= 1;
		else if (sscanf(line, "mnt_id: %d", mnt) == 1)
			got |= 2;
	}
	fclose(f);
	return got == 3 ? 0 : -EBADF;
}

static void probe(struct clientfd_mounts *k, unsigned flags)
{
	unsigned fl;
	int fd, mnt;

	if (k->n == sizeof(k->mnt) / sizeof(k->mnt[0]))
		return;
	fd = memfd_create("dmafs-probe", MFD_CLOEXEC | flags);
	if (fd < 0)
		return;
	if (!fdinfo(getpid(), fd, &mnt, &fl))
		k->mnt[k->n++] = mnt;
	close(fd);
}

void clientfd_init(struct clientfd_mounts *k)
{
	DIR *d;
	struct dirent *e;

	k->n = 0;
	probe(k, 0);
	/* one hugetlbfs mount per huge page size the kernel offers */
	d = opendir("/sys/kernel/mm/hugepages");
	if (!d)
		return;
	while ((e = readdir(d))) {
		unsigned long kb;
		unsigned shift = 0;

		if (sscanf(e->d_name, "hugepages-%lukB", &kb) != 1 || !kb)
			continue;
		while ((1ul << shift) < kb * 1024)
			shift++;
		probe(k, MFD_HUGETLB | (shift << MFD_HUGE_SHIFT));
	}
	closedir(d);
}

/* The type of mount @mnt as process @pid sees its mounts, into @fstype; 0 or -ENOENT. */
static int mount_type(pid_t pid, int mnt, char fstype[32])
{
	char path[64], *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		char *sep;
		int id;

		if (sscanf(line, "%d", &id) != 1 || id != mnt)
			continue;
		sep = strstr(line, " - ");
		if (sep && sscanf(sep + 3, "%31s", fstype) == 1)
			ret = 0;
		break;
	}
	free(line);
	fclose(f);
	return ret;
}

/* Is mount @mnt, as process @pid sees its mounts, a tmpfs or hugetlbfs? */
static int shm_mount(const struct clientfd_mounts *k, pid_t pid, int mnt)
{
	char fstype[32];

	for (unsigned i = 0; i < k->n; i++)
		if (k->mnt[i] == mnt)
			return 1;
	return !mount_type(pid, mnt, fstype) &&
	       (!strcmp(fstype, "tmpfs") || !strcmp(fstype, "hugetlbfs"));
}

static int open_rw(unsigned flags)
{
	return !(flags & O_PATH) && (flags & O_ACCMODE) == O_RDWR;
}

struct closer {
	int fd;
	unsigned *stuck;
};

static void *close_main(void *arg)
{
	struct closer *c = arg;

	close(c->fd);
	__atomic_fetch_sub(c->stuck, 1, __ATOMIC_RELEASE);
	free(c);
	return NULL;
}

/* Close a descriptor of an unknown file where a close that never returns harms no one. */
static void close_aside(int fd, unsigned *stuck)
{
	struct closer *c = malloc(sizeof(*c));
	pthread_attr_t at;
	pthread_t t;

	__atomic_fetch_add(stuck, 1, __ATOMIC_ACQUIRE);
	if (c) {
		*c = (struct closer){ fd, stuck };
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 64 << 10);
		if (!pthread_create(&t, &at, close_main, c)) {
			pthread_attr_destroy(&at);
			return;
		}
		pthread_attr_destroy(&at);
		free(c);
	}
	close(fd); /* no thread to be had: close it here */
	__atomic_fetch_sub(stuck, 1, __ATOMIC_RELEASE);
}

int clientfd_take(const struct clientfd_mounts *k, pid_t tgid, int pidfd, int fd,
		  unsigned *stuck, int *out)
{
	unsigned flags;
	int mnt, ret, nfd;

	if (fd < 0)
		return -EBADF;
	if (__atomic_load_n(stuck, __ATOMIC_ACQUIRE) >= STUCK_MAX)
		return -EAGAIN;
	ret = fdinfo(tgid, fd, &mnt, &flags);
	if (ret)
		return ret;
	if (!open_rw(flags))
		return -EBADF;
	if (!shm_mount(k, tgid, mnt))
		return -EINVAL;
	nfd = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	if (nfd < 0) {
		ret = -errno;
		if (ret == -EPERM)
			log_warn("placement: the kernel refused to hand over a descriptor of process %d (pidfd_getfd: %s; is kernel.yama.ptrace_scope 3?); host buffers cannot be registered",
				 (int)tgid, strerror(-ret));
		return ret == -EBADF || ret == -EPERM ? ret : -ESRCH;
	}
	/* Checked again on what was taken: the client may have put another file under
	 * @fd since. F_GET_SEALS answers only for shmem and hugetlbfs files and asks no
	 * filesystem anything. */
	flags = (unsigned)fcntl(nfd, F_GETFL);
	if (!open_rw(flags) || fcntl(nfd, F_GET_SEALS) < 0) {
		close_aside(nfd, stuck);
		return (int)flags != -1 && !open_rw(flags) ? -EBADF : -EINVAL;
	}
	*out = nfd;
	return 0;
}

/* A device's descriptor: open read-write with O_DIRECT, on no FUSE mount (an fstat of a
 * file on one would ask a daemon, maybe this one, maybe one that never answers). */
static int dev_ok(pid_t pid, int fd, int mine)
{
	char fstype[32];
	unsigned flags;
	int mnt, ret = fdinfo(pid, fd, &mnt, &flags);

	if (ret)
		return ret;
	if (!open_rw(flags) || !(flags & O_DIRECT))
		return -EBADF;
	if (mount_type(pid, mnt, fstype))
		return mine ? -EINVAL : -ESRCH;
	return strncmp(fstype, "fuse", 4) ? 0 : -EINVAL;
}

int clientfd_take_dev(pid_t tgid, int pidfd, int fd, unsigned *stuck, int *out)
{
	struct stat st;
	int ret, nfd;

	if (fd < 0)
		return -EBADF;
	if (__atomic_load_n(stuck, __ATOMIC_ACQUIRE) >= STUCK_MAX)
		return -EAGAIN;
	ret = dev_ok(tgid, fd, 0);
	if (ret)
		return ret;
	nfd = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	if (nfd < 0)
		return errno == EBADF || errno == EPERM ? -errno : -ESRCH;
	/* again on what was taken (the caller may have put another file under @fd), from
	 * our own fdinfo: then an fstat asks no FUSE daemon */
	ret = dev_ok(getpid(), nfd, 1);
	if (!ret && (fstat(nfd, &st) || (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))))
		ret = -EINVAL;
	if (ret) {
		close_aside(nfd, stuck);
		return ret;
	}
	*out = nfd;
	return 0;
}
