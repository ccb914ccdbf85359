/* SPDX-License-Identifier: MIT */
/*
 * remount.h - remounting a dmafs mount: read-only, read-write, and the options a remount
 * may change (nosuid, nodev, noexec, sync, dirsync, atime), without a second daemon.
 *
 * mount(8) runs the helper (mount.dmafs, also installed as mount.fuse.dmafs) with -o
 * remount,...; it runs `dmafs --remount -o OPTIONS MOUNTPOINT`, which changes the kernel
 * mount with mount(2) MS_REMOUNT and tells the daemon through DMAFS_IOC_MODE, an ioctl on
 * the mount's root that only a caller with uid 0 and CAP_SYS_ADMIN may make.
 */
#ifndef DMAFS_REMOUNT_H
#define DMAFS_REMOUNT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#include <fuse_lowlevel.h>

#include "dmafs-proto.h"

#define DMAFS_MODE_RO 1u	 /* read-only (else read-write) */
#define DMAFS_MODE_NODIRATIME 2u /* no atime updates for directories */
#define DMAFS_MODE_SYNC 4u	 /* every change committed before it returns */
#define DMAFS_MODE_DIRSYNC 8u	 /* every directory change is */

struct dmafs_ioc_mode {
	uint32_t flags;	 /* in: DMAFS_MODE_* */
	uint32_t atime;	 /* in: FS_ATIME_* */
	int32_t status;	 /* out: 0 or -errno */
	uint32_t reserved;
	char msg[256];	 /* out: why it failed */
};

#define DMAFS_IOC_MODE _IOWR(DMAFS_IOC_MAGIC, 16, struct dmafs_ioc_mode)

/* The device of the daemon's own mount (main.c), for the read-only check. */
extern unsigned remount_major, remount_minor;
extern int remount_dev_known;

/* The daemon's side of DMAFS_IOC_MODE (from op_ioctl). */
void remount_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned flags, const void *in_buf,
		   size_t in_bufsz, size_t out_bufsz);
/* `dmafs --remount [-v] -o OPTIONS [SOURCE] MOUNTPOINT`: argv[0] is "--remount". Returns
 * the exit status (0, 1: usage, 32: failed, as mount(8) helpers do). */
int remount_main(int argc, char **argv);
/* Make the kernel mount's atime flags show the daemon's atime mode (mount_setattr; root
 * only). Returns 0 or -errno. */
int remount_set_atime(const char *mnt, int atime, int nodiratime);

#endif
