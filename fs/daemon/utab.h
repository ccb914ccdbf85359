/* SPDX-License-Identifier: MIT */
/* utab.h - the helper=dmafs marker that makes umount(8) run umount.dmafs. */
#ifndef DMAFS_UTAB_H
#define DMAFS_UTAB_H

/*
 * Record the mount of @source on @target with helper=dmafs in libmount's utab, and
 * user=@user unless @user is NULL: the user=NAME that mount(8) passes for a mount made on
 * NAME's behalf, which umount(8) checks against the caller when /etc/fstab has the user
 * option. Only for root (does nothing otherwise). Returns 0, -EINVAL for an empty @user or
 * one with a comma, a blank or a control character in it, or a negative libmount error.
 */
int utab_add_user(const char *source, const char *target, const char *user);
/*
 * Drop every helper=dmafs entry whose mount point has nothing mounted on it: ours after
 * the unmount, and those that killed daemons left. Only for root. Best effort.
 */
void utab_prune(void);

#endif
