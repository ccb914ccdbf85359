/* SPDX-License-Identifier: MIT */
/*
 * clientfd.h - taking a client's shared-memory descriptor without opening anything.
 *
 * The daemon runs as root. A path a client names (/proc/PID/fd/N included) would be
 * opened with root's rights, and an open or an fstatfs of a file on a FUSE mount (this
 * one too) sends requests to another daemon, or to this one, and can wait forever. So a
 * host buffer's descriptor is vetted from /proc/PID/fdinfo and the client's mountinfo
 * first, which ask no filesystem anything, and only a shmem (memfd, tmpfs) or hugetlbfs
 * file open read-write is then taken with pidfd_getfd(2): the same open file, nothing
 * reopened.
 */
#ifndef DMAFS_CLIENTFD_H
#define DMAFS_CLIENTFD_H

#include <sys/types.h>

/* Mount ids of the kernel's internal shmem mount and of its hugetlbfs mounts (one per
 * page size): memfds live there, in no mount table. */
struct clientfd_mounts {
	int mnt[8];
	unsigned n;
};

/* Learn them (once, at start). */
void clientfd_init(struct clientfd_mounts *k);

/*
 * Take descriptor @fd of process @tgid (@pidfd its pidfd). On success *out is a
 * descriptor of the same open file in the daemon (close it when done) and 0 is returned.
 * Errors: -EBADF @fd is not open, is O_PATH or not open read-write; -EINVAL it is not a
 * shmem or hugetlbfs file; -ESRCH the process is gone; -EPERM the kernel refused to hand
 * the descriptor over (ptrace policy: Yama ptrace_scope 3); -EAGAIN @stuck (the caller's
 * count of descriptors still being closed) is at its cap.
 *
 * A client can swap another file in under @fd between the check and the take. Closing
 * that file may send a FLUSH to a FUSE daemon that never answers, so it is closed on a
 * thread of its own and counted in @stuck (atomic) until the close returns.
 */
int clientfd_take(const struct clientfd_mounts *k, pid_t tgid, int pidfd, int fd,
		  unsigned *stuck, int *out);

/*
 * Take descriptor @fd of process @tgid (@pidfd its pidfd) that names a device, for a
 * rebuild (DMAFS_IOC_REBUILD): a block device or a regular file, open read-write with
 * O_DIRECT, on no FUSE mount (checked from /proc/PID/fdinfo and mountinfo before and,
 * on what was taken, after). 0 with *out, or -EBADF (not open so), -EINVAL (another kind
 * of file, or on a FUSE mount), -ESRCH, -EPERM (pidfd_getfd refused), -EAGAIN (@stuck).
 */
int clientfd_take_dev(pid_t tgid, int pidfd, int fd, unsigned *stuck, int *out);

#endif
