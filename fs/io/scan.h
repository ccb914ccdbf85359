/* SPDX-License-Identifier: MIT */
/*
 * scan.h - finding dmafs members among the machine's block devices, for sources that name
 * a filesystem (LABEL=models, UUID=3f2a..., or dmafs:LABEL=models, the form mount(8)
 * passes to mount.dmafs untouched) rather than list its members. Used by the daemon,
 * dmafs-fsck and dmafs-check --list.
 *
 * Every block device in /sys/class/block is a candidate except those that cannot hold a
 * member or whose reads may wait a long time: size 0 (an empty loop device or drive, an
 * unconnected NBD), smaller than a member's minimum, floppy and CD/DVD drives, hidden
 * devices (the paths under an NVMe multipath head), suspended device-mapper devices, and
 * devices claimed by another block device (holders/: a member under LVM, md or multipath is
 * found as the device on top). The node is /dev/DEVNAME (from uevent), checked to be that
 * very device. It is opened O_RDONLY|O_NONBLOCK (a removable drive is not asked for its
 * medium) and the superblock read with O_DIRECT where the device takes it (no stale page
 * cache from another node of the same device); nothing is written or locked.
 *
 * A device is a member when its first 4 KiB hold a dmafs superblock; with the magic there
 * but the rest damaged, the copy at the device's end is read. A member whose first block
 * was overwritten is not found (a stale copy at the end of a device that now holds another
 * filesystem must not be taken for a member): name the members by path, and the daemon
 * reads the copy. Image files are not scanned: attach them with losetup first.
 *
 * A device whose reads hang (an NBD or iSCSI device whose server is gone) holds the scan
 * until its I/O times out, as it holds blkid(8).
 */
#ifndef DMAFS_SCAN_H
#define DMAFS_SCAN_H

#include <stdint.h>
#include <sys/types.h>

#include "format/format.h"

/* One dmafs superblock found on a block device. */
struct scan_dev {
	char path[300];		/* /dev/DEVNAME */
	unsigned major, minor;
	uint64_t size;		/* bytes */
	int err;		/* 0, or why the superblock is unusable: -EBADMSG,
				 * -EUCLEAN, -EPROTONOSUPPORT (member_sb_errstr words) */
	uint32_t version;	/* with -EPROTONOSUPPORT: the format version found */
	int from_copy;		/* the primary was damaged; sb is the copy at the end */
	struct fmt_sb sb;	/* valid when err == 0 */
};

/* What a scan found: dmafs superblocks, sorted by filesystem UUID, member index, path. */
struct scan_result {
	struct scan_dev *dev;
	int n;
	int candidates;		/* block devices whose first block was read */
	int denied;		/* candidates this process may not open (EACCES, EPERM) */
	int failed;		/* candidates that could not be read for another reason */
	char denied_path[300];	/* the first of them ("" when none), for messages */
	char failed_path[300];
};

/*
 * Read the superblock of every candidate block device (see above). Returns 0 with @r
 * filled (free with scan_result_free), -ENOMEM, or -errno when /sys/class/block cannot be
 * read (sysfs not mounted). Devices that cannot be opened or read are counted, not errors.
 */
int scan_block_devices(struct scan_result *r);
void scan_result_free(struct scan_result *r);

/* One filesystem of a scan: its members by index, NULL where none was found. */
struct scan_fs {
	const struct fmt_sb *sb; /* the superblock of its lowest member found */
	const struct scan_dev *member[FMT_MAX_MEMBERS];
	int found;		/* members found */
	int dup;		/* an index found on two devices, or -1 */
	const struct scan_dev *dup_dev; /* the second device of index dup */
};

/*
 * Group the good superblocks of @r by filesystem, in UUID order. Returns the count and
 * *out (free() it; it points into @r), or -ENOMEM.
 */
int scan_filesystems(const struct scan_result *r, struct scan_fs **out);

enum { SCAN_NOT_NAME = 0, SCAN_BY_LABEL = 1, SCAN_BY_UUID = 2 };

/*
 * Does @source name a filesystem? LABEL=L, UUID=U, dmafs:LABEL=L and dmafs:UUID=U do (a
 * value in double quotes has them removed); anything else is a member list. Returns
 * SCAN_BY_LABEL or SCAN_BY_UUID with *value pointing into @source (and *len its length),
 * SCAN_NOT_NAME, or -EINVAL for dmafs: followed by neither LABEL= nor UUID=.
 */
int scan_source_kind(const char *source, const char **value, size_t *len);

/* Does filesystem @sb match @source (a name, scan_source_kind() != SCAN_NOT_NAME)? */
int scan_matches(const struct fmt_sb *sb, const char *source);

/*
 * The members of the filesystem @source names, found by scan_block_devices(): on success
 * returns the member count and *paths, a NULL-terminated array of paths in member order
 * (free with scan_paths_free). On failure returns -errno and writes one line to @err:
 *	-ENOENT		no filesystem with that label or UUID on any block device
 *	-ENOTUNIQ	the label names two filesystems, or a member is on two devices
 *	-ENODEV		a member is missing: "member 2 of 4 of dmafs filesystem 'models'
 *			(UUID ...) not found: ..."
 *	-EINVAL		@source names no filesystem; -ENOMEM; -errno of scan_block_devices()
 */
int scan_members(const char *source, char ***paths, char *err, size_t errlen);
/* As scan_members; with @missing_ok the members found when some are not (at least one),
 * in their order (a degraded mount: members_open's MEMBER_DEGRADED). */
int scan_members_some(const char *source, int missing_ok, char ***paths, char *err, size_t errlen);
void scan_paths_free(char **paths);

/*
 * Which other dmafs filesystems on the block devices are labelled @label (not ""): those
 * whose UUID is not @except (NULL: none excepted), counting only their members on devices
 * other than @skip[0..nskip) (device numbers: members about to be formatted, whose old
 * label goes with them). Writes those devices' paths, comma-separated, to @devs (cut
 * short with "..." when longer than @len) and returns how many filesystems have the
 * label, 0 for none, or -errno of scan_block_devices(). Image files are not scanned.
 */
int scan_label_users(const char *label, const uint8_t *except, const dev_t *skip, int nskip,
		     char *devs, size_t len);


#endif
