/* SPDX-License-Identifier: MIT */
/*
 * member.h - the drives (block devices or image files) that make up a filesystem: opening
 * them O_DIRECT and exclusively, reading their superblocks and checking that a given list
 * is exactly the filesystem's member set in order.
 */
#ifndef DMAFS_MEMBER_H
#define DMAFS_MEMBER_H

#include <stdint.h>

#include "format/format.h"

struct member {
	char *path;
	int fd;		/* O_DIRECT */
	int hold_fd;	/* after a switch to read-write (mode.c): the read-only descriptor,
			 * kept open for its exclusive claim or lock; -1 otherwise */
	int is_blkdev;
	uint64_t size;	/* bytes */
	unsigned lbs;	/* logical block size */
	struct fmt_sb sb;
	int sb_from_copy; /* primary superblock was bad; the copy was used */
};

/* Flags of member_open() and members_open(). */
#define MEMBER_RDONLY 1	 /* open read-only (an image file's lock shared) */
#define MEMBER_OFFLINE 2 /* for a tool that works on an unmounted filesystem (mkfs, fsck):
			  * a member in use by a mount is reported with "unmount it first",
			  * not with how to show the mount elsewhere */
#define MEMBER_DEGRADED 4 /* members_open(): the members given in any order, and a mirror's
			   * missing members allowed, standing in with fd -1 and path
			   * "(missing)" (no two neighbours missing: each block keeps a copy) */
static inline int member_missing(const struct member *m) { return m->fd < 0 && m->hold_fd < 0; }

/*
 * Open @path read-write (or read-only with MEMBER_RDONLY in @flags) with O_DIRECT,
 * exclusively (O_EXCL for block devices, which fails if mounted or in use; an flock for
 * image files). Fills path, fd, is_blkdev, size, lbs. On failure returns -errno and writes
 * a one-line reason to @err.
 */
int member_open(struct member *m, const char *path, int flags, char *err, size_t errlen);
void member_close(struct member *m);
/*
 * Make @m the member behind @fd, a block device or image file already open read-write
 * with O_DIRECT (its exclusive claim or lock held by that open file): path (@path, for
 * messages), is_blkdev, size, lbs; fd is @fd, closed by member_close. 0, or -errno with
 * a one-line reason in @err.
 */
int member_adopt(struct member *m, int fd, const char *path, char *err, size_t errlen);
/* Aligned pread/pwrite helpers for small metadata I/O. Return 0 or -errno (-EIO if short). */
int member_pread(struct member *m, void *buf, size_t len, uint64_t off);
int member_pwrite(struct member *m, const void *buf, size_t len, uint64_t off);
/*
 * Read the superblock, falling back to the copy at the end. Returns 0 (m->sb filled,
 * m->sb_from_copy set if the primary was bad), or the primary's decode error when neither
 * copy is good; @err gets a one-line description.
 */
int member_read_sb(struct member *m, char *err, size_t errlen);
/* Words for a fmt_sb_decode() error: "no dmafs superblock (bad magic)", ... */
const char *member_sb_errstr(int err);
/* Write the superblock and its copy, then fdatasync. Returns 0 or -errno. */
int member_write_sb(struct member *m);
/*
 * Raise the on-disk format version of members 0..@n-1 that are below @version to it
 * (superblocks written in member order and made durable: member 0, whose version every
 * reader takes, goes first). Returns 0, or -errno with "member I (PATH): reason" in @err.
 */
int members_set_version(struct member *ms, unsigned n, uint32_t version, char *err, size_t errlen);
/*
 * Open (member_open's @flags) and verify a comma-separated member list, or the members of the filesystem that
 * @list names (LABEL=, UUID=, dmafs:LABEL=, dmafs:UUID=), found on the block devices by
 * scan_members() (scan.h). On success returns the count and *out (array, owned by the
 * caller, free with members_close). On failure returns -errno and writes one line naming
 * the offending member, or the missing one, to @err.
 */
int members_open(const char *list, int flags, struct member **out, char *err, size_t errlen);
void members_close(struct member *ms, int n);

#endif
