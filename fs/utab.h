/* SPDX-License-Identifier: MIT */
/* utab.h - the helper=dmafs marker that makes umount(8) run umount.dmafs. */
#ifndef DMAFS_UTAB_H
#define DMAFS_UTAB_H

/*
 * Record the mount of @source on @target with helper=dmafs in libmount's utab. Only for
 * root (does nothing otherwise). Returns 0 or a negative libmount error.
 */
int utab_add(const char *source, const char *target);
/*
 * Drop every helper=dmafs entry whose mount point has nothing mounted on it: ours after
 * the unmount, and those that killed daemons left. Only for root. Best effort.
 */
void utab_prune(void);

#endif
