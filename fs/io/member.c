// SPDX-License-Identifier: MIT
/* member.c - open members, read and check superblocks, verify the member set. */
#include "io/member.h"
#include "io/scan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/busy.h"

/* A daemon that was just unmounted may still be writing its last commit: wait a bit. */
static int open_waiting(struct member *m, const char *path, int flags, int offline, char *err,
			size_t errlen)
{
	int ret, e = 0;

	for (int tries = 0; tries < 50; tries++) {
		m->fd = open(path, flags);
		e = errno; /* what busy_mounted() and usleep() do to errno does not count */
		if (m->fd >= 0 || e != EBUSY)
			break;
		if (busy_mounted(path)) /* a mounted daemon does not let go */
			break;
		usleep(100000);
	}
	if (m->fd < 0) {
		errno = e;
		ret = -errno;
		if (errno == EBUSY)
			busy_explain(path, "device is busy (mounted or in use by another program)",
				     offline, err, errlen);
		else if (errno == EINVAL)
			snprintf(err, errlen, "%s: O_DIRECT not supported by the filesystem holding this image (tmpfs before Linux 6.6?); use a loop device", path);
		else
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	return 0;
}

/* images are locked with flock, block devices by O_EXCL */
static int lock_image(struct member *m, const char *path, int rdonly, int offline, char *err,
		      size_t errlen)
{
	int ret;

	for (int tries = 0; !m->is_blkdev; tries++) {
		if (flock(m->fd, (rdonly ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
			break;
		ret = -errno;
		/* (a daemon that was just unmounted lets go soon; a mounted one does not) */
		if (ret == -EWOULDBLOCK && tries < 50 && !busy_mounted(path)) {
			usleep(100000);
			continue;
		}
		if (ret != -EWOULDBLOCK)
			snprintf(err, errlen, "%s: cannot lock it: %s", path, strerror(-ret));
		else
			busy_explain(path,
				     offline ? "in use by a dmafs daemon, which holds its lock: unmount its filesystem first" :
					       "in use by another dmafs daemon, which holds its lock: a dmafs filesystem is served by one daemon (bind-mount its mount to show it at another place: mount --bind MOUNTPOINT DIR)",
				     offline, err, errlen);
		return ret;
	}
	return 0;
}

/* the member's size and logical block size (for an image file: its O_DIRECT alignment),
 * which must divide the filesystem's block */
static int read_geometry(struct member *m, const struct stat *st, const char *path, char *err,
			 size_t errlen)
{
	int ret;

	if (m->is_blkdev) {
		int lbs = 512;

		if (ioctl(m->fd, BLKGETSIZE64, &m->size) < 0) {
			ret = -errno;
			snprintf(err, errlen, "%s: cannot read device size: %s", path, strerror(errno));
			return ret;
		}
		ioctl(m->fd, BLKSSZGET, &lbs);
		m->lbs = lbs;
	} else {
		struct statx sx;
		unsigned a;

		m->size = st->st_size;
		/* O_DIRECT on an image file: the alignment the filesystem under it asks for
		 * (STATX_DIOALIGN), else a whole filesystem block */
		m->lbs = DMAFS_BLOCK;
		if (!statx(m->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) &&
		    (sx.stx_mask & STATX_DIOALIGN)) {
			a = sx.stx_dio_offset_align;
			if (a >= 512 && a <= DMAFS_BLOCK && !(a & (a - 1)) &&
			    sx.stx_dio_mem_align <= a)
				m->lbs = a;
		}
	}
	if (DMAFS_BLOCK % m->lbs) {
		snprintf(err, errlen, "%s: logical block size %u does not divide %u", path, m->lbs,
			 DMAFS_BLOCK);
		return -EINVAL;
	}
	return 0;
}

int member_adopt(struct member *m, int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int ret;

	memset(m, 0, sizeof(*m));
	m->fd = fd;
	m->hold_fd = -1;
	m->path = strdup(path);
	if (!m->path)
		return -ENOMEM;
	if (fstat(fd, &st)) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: neither a block device nor a regular file", path);
		return -EINVAL;
	}
	m->is_blkdev = S_ISBLK(st.st_mode);
	return read_geometry(m, &st, path, err, errlen);
}

int member_open(struct member *m, const char *path, int mflags, char *err, size_t errlen)
{
	struct stat st;
	int rdonly = mflags & MEMBER_RDONLY, offline = !!(mflags & MEMBER_OFFLINE);
	int flags = (rdonly ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC;
	int ret;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->hold_fd = -1;
	m->path = strdup(path);
	if (!m->path)
		return -ENOMEM;
	if (stat(path, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	if (S_ISBLK(st.st_mode)) {
		m->is_blkdev = 1;
		flags |= O_EXCL;
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a block device or regular file", path);
		return -EINVAL;
	}
	ret = open_waiting(m, path, flags, offline, err, errlen);
	if (ret)
		return ret;
	ret = lock_image(m, path, rdonly, offline, err, errlen);
	if (ret)
		return ret;
	return read_geometry(m, &st, path, err, errlen);
}

void member_close(struct member *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	if (m->hold_fd >= 0)
		close(m->hold_fd);
	m->hold_fd = -1;
	free(m->path);
	m->path = NULL;
}

int member_pread(struct member *m, void *buf, size_t len, uint64_t off)
{
	ssize_t r = pread(m->fd, buf, len, off);

	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EIO;
}

int member_pwrite(struct member *m, const void *buf, size_t len, uint64_t off)
{
	ssize_t r = pwrite(m->fd, buf, len, off);

	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EIO;
}

const char *member_sb_errstr(int e)
{
	switch (e) {
	case -ENODATA: return "no dmafs superblock (bad magic)";
	case -EBADMSG: return "superblock checksum mismatch";
	case -EPROTONOSUPPORT: return "unsupported format version";
	case -EUCLEAN: return "superblock fields inconsistent";
	default: return strerror(-e);
	}
}

int member_read_sb(struct member *m, char *err, size_t errlen)
{
	uint8_t *b = util_aligned_alloc(FMT_SB_SIZE);
	int r1, r2;

	if (!b)
		return -ENOMEM;
	r1 = member_pread(m, b, FMT_SB_SIZE, 0);
	if (!r1)
		r1 = fmt_sb_decode(b, &m->sb);
	if (r1 && m->size >= FMT_MIN_MEMBER) {
		struct fmt_sb copy;

		r2 = member_pread(m, b, FMT_SB_SIZE, fmt_sb_copy_offset(m->size));
		if (!r2)
			r2 = fmt_sb_decode(b, &copy);
		if (!r2 && copy.member_size == ALIGN_DOWN(m->size, DMAFS_BLOCK)) {
			m->sb = copy;
			m->sb_from_copy = 1;
			r1 = 0;
		} else if (r1 == -ENODATA && r2 != -ENODATA && r2) {
			r1 = r2;
		}
	}
	if (r1 == -EPROTONOSUPPORT && member_pread(m, b, FMT_SB_SIZE, 0) == 0 &&
	    !memcmp(b, FMT_SB_MAGIC, 8))
		snprintf(err, errlen,
			 "%s: dmafs on-disk format version %u; this dmafs reads versions %u to %u (%s): copy the files off with the dmafs that made it, then mkfs.dmafs again",
			 m->path, get_u32(b + 8), FMT_VERSION_MIN, FMT_VERSION_MAX,
			 get_u32(b + 8) == 1 ? "made before data checksums"
			 : get_u32(b + 8) < FMT_VERSION_MAX ? "made by an older dmafs" : "made by a newer dmafs");
	else if (r1)
		snprintf(err, errlen, "%s: %s in both copies", m->path, member_sb_errstr(r1));
	free(b);
	return r1;
}

int member_write_sb(struct member *m)
{
	uint8_t *b = util_aligned_alloc(FMT_SB_SIZE);
	int ret;

	if (!b)
		return -ENOMEM;
	fmt_sb_encode(&m->sb, b);
	ret = member_pwrite(m, b, FMT_SB_SIZE, 0);
	if (!ret)
		ret = member_pwrite(m, b, FMT_SB_SIZE, fmt_sb_copy_offset(m->sb.member_size));
	if (!ret && fdatasync(m->fd) < 0)
		ret = -errno;
	free(b);
	return ret;
}

int members_set_version(struct member *ms, unsigned n, uint32_t version, char *err, size_t errlen)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t was = ms[i].sb.version;
		int ret;

		if (was >= version)
			continue;
		ms[i].sb.version = version;
		ret = member_write_sb(&ms[i]);
		if (ret) {
			ms[i].sb.version = was;
			snprintf(err, errlen, "member %u (%s): cannot write its superblock (upgrade to on-disk format version %u): %s",
				 i, ms[i].path, version, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

void members_close(struct member *ms, int n)
{
	for (int i = 0; i < n; i++)
		member_close(&ms[i]);
	free(ms);
}

/*
 * Open members 0..n-1 and read their superblocks; *@opened counts those to close on failure.
 * Returns 0, or -errno with "member I (PATH): reason" in @err.
 */
static int open_each(struct member *ms, char *const paths[], int n, int rdonly, int *opened,
		     char *err, size_t errlen)
{
	char why[512];
	int ret;

	for (int i = 0; i < n; i++) {
		ret = member_open(&ms[i], paths[i], rdonly, why, sizeof(why));
		(*opened)++;
		if (!ret)
			ret = member_read_sb(&ms[i], why, sizeof(why));
		if (ret) {
			snprintf(err, errlen, "member %d (%s", i, why);
			/* "member 2 (/dev/x: reason" -> "member 2 (/dev/x): reason" */
			char *colon = strstr(err, ": ");
			if (colon) {
				memmove(colon + 1, colon, strlen(colon) + 1);
				colon[0] = ')';
			}
			return ret;
		}
	}
	return 0;
}

/* member @i's superblock against member 0's: same filesystem, its place, same geometry */
static int check_member(const struct member *ms, int i, char *err, size_t errlen)
{
	const struct fmt_sb *ref = &ms[0].sb, *sb = &ms[i].sb;
	char u1[40], u2[40];

	if (memcmp(sb->fs_uuid, ref->fs_uuid, 16)) {
		util_uuid_str(sb->fs_uuid, u1);
		util_uuid_str(ref->fs_uuid, u2);
		snprintf(err, errlen,
			 "member %d (%s): belongs to filesystem %s, not %s (the filesystem of member 0, %s)",
			 i, ms[i].path, u1, u2, ms[0].path);
		return -EXDEV;
	}
	if (sb->member_index != (unsigned)i) {
		snprintf(err, errlen,
			 "member %d (%s): is member %u of this filesystem; give the members in their order",
			 i, ms[i].path, sb->member_index);
		return -EINVAL;
	}
	/* the log copies on members 0 and 1 are read and written with member 0's geometry */
	if (memcmp(ref->member_uuid[i], sb->member_uuid[i], 16) ||
	    sb->member_count != ref->member_count || sb->stripe_unit != ref->stripe_unit ||
	    sb->log_half != ref->log_half ||
	    (fmt_has_log(i) && sb->log_offset != ref->log_offset)) {
		snprintf(err, errlen,
			 "member %d (%s): superblock disagrees with member 0 about the member set or the log geometry",
			 i, ms[i].path);
		return -EUCLEAN;
	}
	if (ALIGN_DOWN(ms[i].size, DMAFS_BLOCK) < sb->member_size) {
		snprintf(err, errlen, "member %d (%s): is %llu bytes, smaller than the %llu it was formatted with",
			 i, ms[i].path, (unsigned long long)ms[i].size,
			 (unsigned long long)sb->member_size);
		return -EUCLEAN;
	}
	return 0;
}

/* @n members were given: the filesystem has exactly that many */
static int check_count(const struct fmt_sb *ref, int n, char *err, size_t errlen)
{
	char u1[40], u2[40];

	if ((unsigned)n == ref->member_count)
		return 0;
	util_uuid_str(ref->fs_uuid, u1);
	if ((unsigned)n < ref->member_count) {
		util_uuid_str(ref->member_uuid[n], u2);
		snprintf(err, errlen,
			 "filesystem %s has %u members but %d were given; missing member %d (uuid %s)",
			 u1, ref->member_count, n, n, u2);
	} else {
		snprintf(err, errlen, "filesystem %s has %u members but %d were given",
			 u1, ref->member_count, n);
	}
	return -ENODEV;
}

/*
 * Members of the filesystem of @ms[0] that @ms[0..n) does not hold: "member 1 (uuid U)"
 * for each into @what; returns how many, each marked in @missing.
 */
static int missing_of(const struct member *ms, int n, int missing[FMT_MAX_MEMBERS], char *what,
		      size_t len)
{
	const struct fmt_sb *ref = &ms[0].sb;
	int k = 0;
	size_t at = 0;

	*what = '\0';
	for (unsigned i = 0; i < ref->member_count; i++) {
		char u[40];

		missing[i] = 1;
		for (int g = 0; g < n; g++)
			if (!memcmp(ms[g].sb.fs_uuid, ref->fs_uuid, 16) && ms[g].sb.member_index == i)
				missing[i] = 0;
		if (!missing[i])
			continue;
		util_uuid_str(ref->member_uuid[i], u);
		if (at < len)
			at += (size_t)snprintf(what + at, len - at, "%smember %u (uuid %s)", k ? ", " : "",
					       i, u);
		k++;
	}
	return k;
}

/*
 * Degraded: the members given, placed by their index, and those missing standing in with
 * no descriptor and the geometry their superblocks had (the mirror's copies are found by
 * member offsets alone). Refused unless the filesystem keeps two copies and no block
 * loses both. Returns the member count, or -errno with the reason in @err.
 */
static int place_degraded(struct member *ms, int n, char *err, size_t errlen)
{
	struct member given[FMT_MAX_MEMBERS];
	const struct fmt_sb ref = ms[0].sb;
	int missing[FMT_MAX_MEMBERS], k;
	char what[512];

	for (int i = 1; i < n; i++)
		if (memcmp(ms[i].sb.fs_uuid, ref.fs_uuid, 16)) {
			char u1[40], u2[40];

			util_uuid_str(ms[i].sb.fs_uuid, u1);
			util_uuid_str(ref.fs_uuid, u2);
			snprintf(err, errlen, "%s: belongs to filesystem %s, not %s (the filesystem of %s)",
				 ms[i].path, u1, u2, ms[0].path);
			return -EXDEV;
		}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (ms[i].sb.member_index == ms[j].sb.member_index) {
				snprintf(err, errlen, "%s and %s are both member %u of this filesystem",
					 ms[j].path, ms[i].path, ms[i].sb.member_index);
				return -EINVAL;
			}
	k = missing_of(ms, n, missing, what, sizeof(what));
	if (k && !fmt_is_mirror(&ref)) {
		snprintf(err, errlen, "%s missing, and this filesystem keeps one copy of its data (data profile single): it cannot be mounted without %s",
			 what, k > 1 ? "them" : "it");
		return -ENODEV;
	}
	for (unsigned i = 0; i < ref.member_count; i++)
		if (missing[i] && missing[(i + 1) % ref.member_count]) {
			snprintf(err, errlen, "members %u and %u are both missing: the second copies of member %u's data are on member %u, so those files have no copy left",
				 i, (i + 1) % ref.member_count, i, (i + 1) % ref.member_count);
			return -ENODEV;
		}
	memcpy(given, ms, (size_t)n * sizeof(*ms));
	memset(ms, 0, FMT_MAX_MEMBERS * sizeof(*ms));
	for (int g = 0; g < n; g++)
		ms[given[g].sb.member_index] = given[g];
	for (unsigned i = 0; i < ref.member_count; i++) {
		struct member *m = &ms[i];
		uint64_t half = ref.log_half;

		if (!missing[i])
			continue;
		m->path = strdup("(missing)");
		m->fd = m->hold_fd = -1;
		m->sb = ref;
		m->sb.member_index = i;
		m->sb.log_offset = fmt_has_log(i) ? FMT_LOG_OFFSET : 0;
		m->sb.data_offset = fmt_has_log(i) ? FMT_LOG_OFFSET + 2 * half : FMT_LOG_OFFSET;
		m->sb.data_end = m->sb.csum_offset = m->sb.data_offset + 2 * ref.mirror_half;
		m->sb.member_size = 0;
		if (!m->path)
			return -ENOMEM;
	}
	return (int)ref.member_count;
}

/*
 * Open and verify @paths[0..n) as members 0..n-1 (MEMBER_DEGRADED: as the members their
 * superblocks name, the missing ones standing in). Returns the member count, or -errno
 * with one line naming the offending member in @err.
 */
static int open_paths(char *const paths[], int n, int flags, struct member **out, char *err,
		      size_t errlen)
{
	struct member *ms = calloc(FMT_MAX_MEMBERS, sizeof(*ms));
	int opened = 0, ret = 0, rdonly = flags & ~MEMBER_DEGRADED;

	if (!ms)
		return -ENOMEM;
	if (n > FMT_MAX_MEMBERS) {
		snprintf(err, errlen, "more than %d members given", FMT_MAX_MEMBERS);
		ret = -E2BIG;
		goto fail;
	}
	if (flags & MEMBER_DEGRADED) {
		/* a device that cannot be opened or read is left out, as a missing member */
		int k = 0;

		for (int i = 0; i < n; i++) {
			char why[512];

			ret = member_open(&ms[k], paths[i], rdonly, why, sizeof(why));
			if (!ret)
				ret = member_read_sb(&ms[k], why, sizeof(why));
			if (ret) {
				log_warn("%s: left out: %s", paths[i], why);
				member_close(&ms[k]);
				continue;
			}
			opened = ++k;
		}
		n = k;
		ret = 0;
		if (!n) {
			snprintf(err, errlen, "none of the members given could be read");
			ret = -ENODEV;
			goto fail;
		}
	} else {
		ret = open_each(ms, paths, n, rdonly, &opened, err, errlen);
		if (ret)
			goto fail;
	}
	if (n == 0) {
		snprintf(err, errlen, "no members given");
		ret = -EINVAL;
		goto fail;
	}
	if (flags & MEMBER_DEGRADED) {
		ret = place_degraded(ms, n, err, errlen);
		if (ret < 0)
			goto fail;
		opened = n = ret;
	} else if ((unsigned)n < ms[0].sb.member_count) {
		int missing[FMT_MAX_MEMBERS], k;
		char what[512], u[40];

		k = missing_of(ms, n, missing, what, sizeof(what));
		if (k && fmt_is_mirror(&ms[0].sb)) {
			util_uuid_str(ms[0].sb.fs_uuid, u);
			snprintf(err, errlen, "filesystem %s: %s missing; it keeps two copies of its data (data profile mirror): mount it with -o degraded to read it (read-only), and replace the member with dmafs-replace(8)",
				 u, what);
			ret = -ENODEV;
			goto fail;
		}
	}
	for (int i = 0; i < n; i++) {
		if (member_missing(&ms[i]))
			continue;
		ret = check_member(ms, i, err, errlen);
		if (ret)
			goto fail;
	}
	ret = check_count(&ms[0].sb, n, err, errlen);
	if (ret)
		goto fail;
	*out = ms;
	return n;
fail:
	members_close(ms, opened);
	return ret;
}

int members_open(const char *list, int flags, struct member **out, char *err, size_t errlen)
{
	char *paths[FMT_MAX_MEMBERS + 1], **found = NULL, *dup = NULL, *save = NULL, *tok;
	const char *v;
	size_t vlen;
	int n = 0, ret;

	if (scan_source_kind(list, &v, &vlen) != SCAN_NOT_NAME) {
		/* LABEL=, UUID=: the members are wherever the block devices hold them */
		n = scan_members_some(list, !!(flags & MEMBER_DEGRADED), &found, err, errlen);
		if (n < 0)
			return n;
		ret = open_paths(found, n, flags, out, err, errlen);
		scan_paths_free(found);
		return ret;
	}
	dup = strdup(list);
	if (!dup)
		return -ENOMEM;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == FMT_MAX_MEMBERS + 1)
			break; /* open_paths says there are too many */
		paths[n++] = tok;
	}
	ret = open_paths(paths, n, flags, out, err, errlen);
	free(dup);
	return ret;
}
