/* SPDX-License-Identifier: MIT */
/* busy.h - which dmafs mount serves a member that another daemon cannot open. */
#ifndef DMAFS_BUSY_H
#define DMAFS_BUSY_H

#include <stddef.h>

/*
 * A member that cannot be opened because it is in use (the lock of an image file, the
 * exclusive open of a block device): write to @err a message that says what to do. When
 * a dmafs mount in /proc/self/mountinfo lists @path (by its real path) among its members,
 * the message names that mount and, for a mount (@offline 0), the bind mount that shows
 * the filesystem at another place too (a dmafs filesystem is served by one daemon), or,
 * for a tool that needs the filesystem unmounted (@offline 1: mkfs, fsck), says to
 * unmount it first. Otherwise it says @otherwise.
 */
void busy_explain(const char *path, const char *otherwise, int offline, char *err, size_t errlen);
/* Does a dmafs mount list @path among its members? (Then its lock is not about to go.) */
int busy_mounted(const char *path);

#endif
