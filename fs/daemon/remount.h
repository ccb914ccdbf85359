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

#include "dmafs-proto.h"

/* `dmafs --remount [-v] -o OPTIONS [SOURCE] MOUNTPOINT`: argv[0] is "--remount". Returns
 * the exit status (0, 1: usage, 32: failed, as mount(8) helpers do). */
int remount_main(int argc, char **argv);
/* Make the kernel mount's atime flags show the daemon's atime mode (mount_setattr; root
 * only). Returns 0 or -errno. */
int remount_set_atime(const char *mnt, int atime, int nodiratime);

#endif
