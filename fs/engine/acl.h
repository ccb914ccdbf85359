/* SPDX-License-Identifier: MIT */
/*
 * acl.h - POSIX ACLs in the form the kernel exchanges them as the xattrs
 * system.posix_acl_access and system.posix_acl_default: a little-endian u32 version (2)
 * followed by 8-byte entries (u16 tag, u16 perm, u32 id). The kernel enforces ACLs
 * (FUSE_POSIX_ACL); the filesystem keeps them and the mode in agreement, and gives new
 * inodes the ACLs their directory's default ACL asks for.
 *
 * Also here: what the filesystem may learn about a requesting process from /proc, for
 * the decisions the kernel leaves to it (listing trusted.* names, keeping setgid).
 */
#ifndef DMAFS_ACL_H
#define DMAFS_ACL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ACL_XATTR_ACCESS "system.posix_acl_access"
#define ACL_XATTR_DEFAULT "system.posix_acl_default"
#define ACL_XATTR_VERSION 2
#define ACL_HDR_BYTES 4
#define ACL_ENTRY_BYTES 8
/* The kernel sends at most a page; a bound here keeps log reservations small. */
#define ACL_MAX_ENTRIES 1024
#define ACL_MAX_BYTES (ACL_HDR_BYTES + ACL_ENTRY_BYTES * ACL_MAX_ENTRIES)

/* Entry tags, as in <linux/posix_acl.h> */
#define ACL_TAG_USER_OBJ 0x01
#define ACL_TAG_USER 0x02
#define ACL_TAG_GROUP_OBJ 0x04
#define ACL_TAG_GROUP 0x08
#define ACL_TAG_MASK 0x10
#define ACL_TAG_OTHER 0x20

/*
 * Check an ACL xattr value of @len bytes, which may come from anyone: a header of
 * version 2, 1 to ACL_MAX_ENTRIES whole entries, permissions within rwx, exactly one
 * owner, owning group and other entry, named users then named groups in increasing id
 * order without duplicates, in the canonical order, and a mask entry wherever named
 * entries are present. Returns the number of entries, -EINVAL, or -E2BIG (too many).
 */
int acl_check(const void *val, size_t len);
/*
 * The permission bits (0777) that valid ACL @val implies: owner, mask (or owning group
 * when there is no mask) and other. Returns 1 when the ACL says no more than those bits
 * (it then need not be stored), else 0.
 */
int acl_mode(const void *val, size_t len, uint32_t *perm);
/*
 * A new inode's access ACL from its directory's default ACL (valid, copied into @val):
 * the owner, other and mask (or owning group) entries are limited by the permission bits
 * of *@mode, which then take the ACL's values. Returns 1 when the result must be stored,
 * 0 when the mode says it all.
 */
int acl_create(void *val, size_t len, uint32_t *mode);
/* chmod: set the owner, mask (or owning group) and other entries of valid ACL @val to the
 * permission bits of @mode. */
void acl_chmod(void *val, size_t len, uint32_t mode);

/* Capability numbers used here, as in <linux/capability.h> */
#define ACL_CAP_FOWNER 3
#define ACL_CAP_FSETID 4
#define ACL_CAP_LINUX_IMMUTABLE 9
#define ACL_CAP_SYS_ADMIN 21
/*
 * Does process (thread) @pid have capability @cap in its effective set, in the daemon's
 * own user namespace? From /proc/PID/status; 0 when it cannot be told (pid 0: a request
 * from outside the daemon's pid namespace, or the process has gone). These are the
 * process's own credentials: a kernel service acting for it with other ones (overlayfs
 * with its mounter's) is not seen.
 */
int acl_pid_capable(pid_t pid, int cap);
/* Is @gid the filesystem group @fsgid or one of process @pid's supplementary groups? */
int acl_pid_in_group(pid_t pid, uint32_t fsgid, uint32_t gid);
/*
 * Are @fsuid and @fsgid, the credentials a request came with, process @pid's own
 * filesystem uid and gid? 1 yes, 0 no: the kernel acted for it with other credentials
 * (overlayfs with its mounter's, nfsd with a client's), -1 when it cannot be told
 * (pid 0, another user namespace, the process has gone).
 */
int acl_pid_same_creds(pid_t pid, uint32_t fsuid, uint32_t fsgid);

#endif
