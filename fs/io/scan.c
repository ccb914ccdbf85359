// SPDX-License-Identifier: MIT
/* scan.c - find dmafs members on the machine's block devices by filesystem label or UUID. */
#include "io/scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/major.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define SYS_BLOCK "/sys/class/block"

/* The first line of /sys/class/block/@name/@file, without its newline; 0 or -errno. */
static int sys_read(const char *name, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), SYS_BLOCK "/%s/%s", name, file);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		ret = -EIO;
	else
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return ret;
}

/* Is the number in /sys/class/block/@name/@file 1? (absent: no) */
static int sys_flag(const char *name, const char *file)
{
	char v[32];

	return sys_read(name, file, v, sizeof(v)) == 0 && atoi(v) == 1;
}

/* Does a stacking driver (dm, md, bcache) hold @name? */
static int has_holders(const char *name)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int any = 0;

	snprintf(path, sizeof(path), SYS_BLOCK "/%s/holders", name);
	d = opendir(path);
	if (!d)
		return 0;
	while (!any && (e = readdir(d)))
		any = e->d_name[0] != '.';
	closedir(d);
	return any;
}

/* /dev/DEVNAME of @name from its uevent (DEVNAME may hold a directory: cciss/c0d0). */
static void dev_node(const char *name, char *out, size_t len)
{
	char path[PATH_MAX], line[512];
	FILE *f;

	snprintf(path, sizeof(path), SYS_BLOCK "/%s/uevent", name);
	f = fopen(path, "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			if (strncmp(line, "DEVNAME=", 8))
				continue;
			line[strcspn(line, "\n")] = '\0';
			if (strlen(line + 8) + 6 > len)
				break; /* no node has such a name */
			snprintf(out, len, "/dev/%.*s", (int)(len - 6), line + 8);
			fclose(f);
			return;
		}
		fclose(f);
	}
	/* sysfs spells a '/' in a device name as '!' */
	snprintf(out, len, "/dev/%s", name);
	for (char *p = out + 5; *p; p++)
		if (*p == '!')
			*p = '/';
}

/*
 * Read 4096 bytes at @off. O_DIRECT first (the device's own view, not a page cache that
 * another node of it may have left stale); buffered where the device refuses it (EINVAL:
 * a logical block size above 4096, which no member has, but the read is still wanted).
 */
static int read_block(int *fd, const char *path, void *buf, uint64_t off)
{
	ssize_t r = pread(*fd, buf, FMT_SB_SIZE, (off_t)off);

	if (r < 0 && errno == EINVAL && (fcntl(*fd, F_GETFL) & O_DIRECT)) {
		int fd2 = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

		if (fd2 < 0)
			return -errno;
		close(*fd);
		*fd = fd2;
		r = pread(*fd, buf, FMT_SB_SIZE, (off_t)off);
	}
	if (r < 0)
		return -errno;
	return r == FMT_SB_SIZE ? 0 : -EIO;
}

static int add_dev(struct scan_result *r, const struct scan_dev *d)
{
	struct scan_dev *v = realloc(r->dev, (r->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	r->dev = v;
	r->dev[r->n++] = *d;
	return 0;
}

/* Look at block device @name; adds it to @r when it holds a dmafs superblock. */
static int probe(const char *name, struct scan_result *r, uint8_t *buf)
{
	struct scan_dev d;
	unsigned long long sectors;
	char v[64];
	struct stat st;
	int fd, ret;

	memset(&d, 0, sizeof(d));
	if (sys_read(name, "dev", v, sizeof(v)) || sscanf(v, "%u:%u", &d.major, &d.minor) != 2)
		return 0;
	/* opening a floppy or an optical drive may wait for the drive; neither holds a member */
	if (d.major == FLOPPY_MAJOR || d.major == SCSI_CDROM_MAJOR)
		return 0;
	if (sys_read(name, "size", v, sizeof(v)) || sscanf(v, "%llu", &sectors) != 1)
		return 0;
	d.size = (uint64_t)sectors * 512;
	if (d.size < FMT_MIN_MEMBER)
		return 0;
	/* hidden: NVMe multipath paths, reached through their head; a suspended dm device
	 * blocks every read until resumed; a held device is read through its holder */
	if (sys_flag(name, "hidden") || sys_flag(name, "dm/suspended") || has_holders(name))
		return 0;
	dev_node(name, d.path, sizeof(d.path));
	if (stat(d.path, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != makedev(d.major, d.minor))
		return 0; /* no node, or a stale one naming another device */
	r->candidates++;
	fd = open(d.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		fd = open(d.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM) {
			if (!r->denied++)
				snprintf(r->denied_path, sizeof(r->denied_path), "%s", d.path);
		} else if (errno == ENOMEDIUM || errno == ENXIO || errno == ENODEV) {
			r->candidates--; /* nothing there after all */
		} else if (!r->failed++) {
			snprintf(r->failed_path, sizeof(r->failed_path), "%s", d.path);
		}
		return 0;
	}
	ret = read_block(&fd, d.path, buf, 0);
	if (!ret)
		ret = fmt_sb_decode(buf, &d.sb);
	if (ret == -EPROTONOSUPPORT)
		d.version = get_u32(buf + 8);
	if (ret == -EBADMSG || ret == -EUCLEAN) {
		/* the magic is there: this was a member; its copy may be whole */
		struct fmt_sb copy;

		if (read_block(&fd, d.path, buf, fmt_sb_copy_offset(d.size)) == 0 &&
		    fmt_sb_decode(buf, &copy) == 0 && copy.member_size == ALIGN_DOWN(d.size, DMAFS_BLOCK)) {
			d.sb = copy;
			d.from_copy = 1;
			ret = 0;
		}
	}
	close(fd);
	if (ret == -ENODATA)
		return 0; /* not dmafs */
	if (ret == -EIO || (ret < 0 && ret != -EBADMSG && ret != -EUCLEAN && ret != -EPROTONOSUPPORT)) {
		if (!r->failed++)
			snprintf(r->failed_path, sizeof(r->failed_path), "%s", d.path);
		return 0;
	}
	d.err = ret;
	return add_dev(r, &d);
}

static int dev_cmp(const void *a, const void *b)
{
	const struct scan_dev *x = a, *y = b;
	int c;

	if (!x->err != !y->err)
		return x->err ? 1 : -1; /* the unusable ones last */
	if (!x->err) {
		c = memcmp(x->sb.fs_uuid, y->sb.fs_uuid, 16);
		if (c)
			return c;
		if (x->sb.member_index != y->sb.member_index)
			return x->sb.member_index < y->sb.member_index ? -1 : 1;
	}
	return strcmp(x->path, y->path);
}

int scan_block_devices(struct scan_result *r)
{
	uint8_t *buf = util_aligned_alloc(FMT_SB_SIZE);
	struct dirent *e;
	DIR *d;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	if (!buf)
		return -ENOMEM;
	d = opendir(SYS_BLOCK);
	if (!d) {
		ret = -errno;
		free(buf);
		return ret;
	}
	while (!ret && (e = readdir(d)))
		if (e->d_name[0] != '.')
			ret = probe(e->d_name, r, buf);
	closedir(d);
	free(buf);
	if (ret) {
		scan_result_free(r);
		return ret;
	}
	if (r->n)
		qsort(r->dev, r->n, sizeof(*r->dev), dev_cmp);
	return 0;
}

void scan_result_free(struct scan_result *r)
{
	free(r->dev);
	memset(r, 0, sizeof(*r));
}

int scan_filesystems(const struct scan_result *r, struct scan_fs **out)
{
	struct scan_fs *v = NULL;
	int n = 0;

	for (int i = 0; i < r->n; i++) {
		const struct scan_dev *d = &r->dev[i];
		struct scan_fs *fs;

		if (d->err)
			break; /* sorted last */
		fs = n ? &v[n - 1] : NULL;
		if (!fs || memcmp(fs->sb->fs_uuid, d->sb.fs_uuid, 16)) {
			struct scan_fs *nv = realloc(v, (n + 1) * sizeof(*v));

			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
			fs = &v[n++];
			memset(fs, 0, sizeof(*fs));
			fs->sb = &d->sb; /* sorted by index: the lowest found */
			fs->dup = -1;
		}
		if (fs->member[d->sb.member_index]) {
			if (fs->dup < 0) {
				fs->dup = (int)d->sb.member_index;
				fs->dup_dev = d;
			}
			continue;
		}
		fs->member[d->sb.member_index] = d;
		fs->found++;
	}
	*out = v;
	return n;
}

int scan_source_kind(const char *source, const char **value, size_t *len)
{
	const char *s = source, *v;
	int kind, prefixed = !strncmp(s, "dmafs:", 6);
	size_t n;

	if (prefixed)
		s += 6;
	if (!strncmp(s, "LABEL=", 6))
		kind = SCAN_BY_LABEL;
	else if (!strncmp(s, "UUID=", 5))
		kind = SCAN_BY_UUID;
	else
		return prefixed ? -EINVAL : SCAN_NOT_NAME;
	v = strchr(s, '=') + 1;
	n = strlen(v);
	if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
		v++;
		n -= 2;
	}
	*value = v;
	*len = n;
	return kind;
}

int scan_matches(const struct fmt_sb *sb, const char *source)
{
	const char *v;
	uint8_t u[16];
	size_t n;

	switch (scan_source_kind(source, &v, &n)) {
	case SCAN_BY_LABEL:
		return n && strlen(sb->label) == n && !memcmp(sb->label, v, n);
	case SCAN_BY_UUID:
		return util_uuid_parse(v, n, u) == 0 && !memcmp(u, sb->fs_uuid, 16);
	}
	return 0;
}

static const char *scan_fs_name(const struct fmt_sb *sb, char *buf, size_t len)
{
	char u[40], label[4 * sizeof(sb->label)], *p = label;

	/* a label is any 64 bytes: control characters are shown escaped */
	for (const unsigned char *c = (const unsigned char *)sb->label; *c; c++)
		p += (*c < 0x20 || *c == 0x7f) ? sprintf(p, "\\x%02x", *c) : sprintf(p, "%c", *c);
	util_uuid_str(sb->fs_uuid, u);
	if (*sb->label)
		snprintf(buf, len, "dmafs filesystem '%s' (UUID %s)", label, u);
	else
		snprintf(buf, len, "dmafs filesystem (UUID %s)", u);
	return buf;
}

/* "12 block devices read, 3 could not be opened: ...": what a not-found message adds. */
static const char *scan_note(const struct scan_result *r, char *buf, size_t len)
{
	int k = snprintf(buf, len, "%d block device%s read", r->candidates - r->denied - r->failed,
			 r->candidates - r->denied - r->failed == 1 ? "" : "s");

	if (r->denied)
		k += snprintf(buf + k, len - MIN((size_t)k, len), ", %d could not be opened (%s%s): permission denied%s",
			      r->denied, r->denied_path, r->denied > 1 ? " and others" : "",
			      geteuid() ? " (run as root)" : "");
	if (r->failed)
		snprintf(buf + k, len - MIN((size_t)k, len), ", %d failed to read (%s%s)", r->failed,
			 r->failed_path, r->failed > 1 ? " and others" : "");
	return buf;
}

void scan_paths_free(char **paths)
{
	if (!paths)
		return;
	for (char **p = paths; *p; p++)
		free(*p);
	free(paths);
}

/* @source is LABEL=NAME or UUID=UUID (kind @kind, value @v): a name, or a well-formed UUID */
static int check_source(const char *source, int kind, const char *v, size_t vlen, char *err,
			size_t errlen)
{
	uint8_t uuid[16];

	if (kind <= 0) {
		snprintf(err, errlen, "%s: not a filesystem name: LABEL=NAME, UUID=UUID, dmafs:LABEL=NAME or dmafs:UUID=UUID",
			 source);
		return -EINVAL;
	}
	if (!vlen || (kind == SCAN_BY_UUID && util_uuid_parse(v, vlen, uuid))) {
		snprintf(err, errlen, "%s: %s", source,
			 kind == SCAN_BY_UUID ? "not a UUID (32 hex digits, dashes allowed)" : "no label given");
		return -EINVAL;
	}
	return 0;
}

/* "LABEL=x names 2 dmafs filesystems (UUID a, UUID b): name one by UUID=" */
static void say_ambiguous(const struct scan_fs *fs, int nfs, const char *source, const char *v,
			  size_t vlen, int hits, char *err, size_t errlen)
{
	char u[40];
	int k = snprintf(err, errlen, "LABEL=%.*s names %d dmafs filesystems (", (int)vlen, v, hits);

	for (int i = 0, j = 0; i < nfs; i++) {
		if (!scan_matches(fs[i].sb, source))
			continue;
		util_uuid_str(fs[i].sb->fs_uuid, u);
		k += snprintf(err + MIN((size_t)k, errlen), errlen - MIN((size_t)k, errlen), "%sUUID %s",
			      j++ ? ", " : "", u);
	}
	snprintf(err + MIN((size_t)k, errlen), errlen - MIN((size_t)k, errlen), "): name one by UUID=");
}

/* which members of @hit (named @name) no block device holds, and what to do */
static void say_missing(const struct scan_fs *hit, const char *name, const char *note, char *err,
			size_t errlen)
{
	unsigned missing = hit->sb->member_count - (unsigned)hit->found, first = 0;
	char u[40];
	int k;

	while (hit->member[first])
		first++;
	if (missing == 1) {
		util_uuid_str(hit->sb->member_uuid[first], u);
		snprintf(err, errlen,
			 "member %u of %u of %s not found: no block device holds it (member UUID %s; %s); attach a member image with losetup, or plug in its disk",
			 first, hit->sb->member_count, name, u, note);
		return;
	}
	k = snprintf(err, errlen, "members ");
	for (unsigned i = first, j = 0; i < hit->sb->member_count; i++)
		if (!hit->member[i])
			k += snprintf(err + MIN((size_t)k, errlen), errlen - MIN((size_t)k, errlen),
				      "%s%u", j++ ? ", " : "", i);
	snprintf(err + MIN((size_t)k, errlen), errlen - MIN((size_t)k, errlen),
		 " of %u of %s not found: no block device holds them (%s); attach member images with losetup, or plug in their disks",
		 hit->sb->member_count, name, note);
}

/* each member of @hit was found, on one device: 0, or -ENOTUNIQ / -ENODEV saying which not */
static int check_found(const struct scan_fs *hit, const char *note, char *err, size_t errlen)
{
	char name[400];

	scan_fs_name(hit->sb, name, sizeof(name));
	if (hit->dup >= 0) {
		snprintf(err, errlen,
			 "member %d of %u of %s is on two devices, %s and %s (a copy of the member, or one disk seen twice?): name the members by path",
			 hit->dup, hit->sb->member_count, name, hit->member[hit->dup]->path, hit->dup_dev->path);
		return -ENOTUNIQ;
	}
	if ((unsigned)hit->found < hit->sb->member_count) {
		say_missing(hit, name, note, err, errlen);
		if (fmt_is_mirror(hit->sb)) {
			size_t k = strlen(err);

			snprintf(err + k, errlen - k, "; it keeps two copies of its data (data profile mirror): -o degraded mounts it read-only without %s",
				 hit->sb->member_count - (unsigned)hit->found > 1 ? "them" : "it");
		}
		return -ENODEV;
	}
	return 0;
}

/* the member paths of @hit in order (those found), NULL-ended: their count or -ENOMEM */
static int copy_paths(const struct scan_fs *hit, char ***paths)
{
	int ret = 0;

	*paths = calloc(hit->sb->member_count + 1, sizeof(char *));
	if (!*paths)
		return -ENOMEM;
	for (unsigned i = 0; i < hit->sb->member_count; i++) {
		if (!hit->member[i])
			continue;
		(*paths)[ret] = strdup(hit->member[i]->path);
		if (!(*paths)[ret++]) {
			scan_paths_free(*paths);
			*paths = NULL;
			return -ENOMEM;
		}
	}
	return ret;
}

int scan_members(const char *source, char ***paths, char *err, size_t errlen)
{
	return scan_members_some(source, 0, paths, err, errlen);
}

int scan_members_some(const char *source, int missing_ok, char ***paths, char *err, size_t errlen)
{
	struct scan_result r;
	struct scan_fs *fs = NULL, *hit = NULL;
	char note[800];
	const char *v;
	size_t vlen;
	int kind = scan_source_kind(source, &v, &vlen), nfs, hits = 0, ret;

	*paths = NULL;
	ret = check_source(source, kind, v, vlen, err, errlen);
	if (ret)
		return ret;
	ret = scan_block_devices(&r);
	if (ret) {
		snprintf(err, errlen, "%s: cannot list the block devices in " SYS_BLOCK ": %s (is sysfs mounted?)",
			 source, strerror(-ret));
		return ret;
	}
	nfs = scan_filesystems(&r, &fs);
	if (nfs < 0) {
		scan_result_free(&r);
		return nfs;
	}
	scan_note(&r, note, sizeof(note));
	for (int i = 0; i < nfs; i++) {
		if (!scan_matches(fs[i].sb, source))
			continue;
		if (!hits++)
			hit = &fs[i];
	}
	if (!hits) {
		snprintf(err, errlen,
			 "no dmafs filesystem with %.*s=%.*s on this machine's block devices (%s); image files are not scanned: attach them with losetup -f --show IMAGE",
			 kind == SCAN_BY_LABEL ? 5 : 4, kind == SCAN_BY_LABEL ? "LABEL" : "UUID", (int)vlen, v, note);
		ret = -ENOENT;
	} else if (hits > 1) {
		say_ambiguous(fs, nfs, source, v, vlen, hits, err, errlen);
		ret = -ENOTUNIQ;
	} else {
		ret = check_found(hit, note, err, errlen);
		if (ret == -ENODEV && missing_ok && hit->found) /* a degraded mount's: the rest */
			ret = 0;
		if (!ret)
			ret = copy_paths(hit, paths);
	}
	free(fs);
	scan_result_free(&r);
	return ret;
}

/* Append @path to the comma-separated list @devs (of @len bytes), "..." once it is full. */
static void list_add(char *devs, size_t len, const char *path)
{
	size_t k = strlen(devs), need = strlen(path) + (k ? 2 : 0);

	if (len < 4 || (k >= 3 && !strcmp(devs + k - 3, "...")))
		return;
	if (k + need + 4 >= len) {
		snprintf(devs + k, len - k, "%s...", k ? ", " : "");
		return;
	}
	snprintf(devs + k, len - k, "%s%s", k ? ", " : "", path);
}

int scan_label_users(const char *label, const uint8_t *except, const dev_t *skip, int nskip,
		     char *devs, size_t len)
{
	struct scan_result r;
	struct scan_fs *fs = NULL;
	int nfs, ret, users = 0;

	if (len)
		devs[0] = '\0';
	if (!*label)
		return 0;
	ret = scan_block_devices(&r);
	if (ret)
		return ret;
	nfs = scan_filesystems(&r, &fs);
	if (nfs < 0) {
		scan_result_free(&r);
		return nfs;
	}
	for (int i = 0; i < nfs; i++) {
		int outside = 0;

		if (strcmp(fs[i].sb->label, label) || (except && !memcmp(fs[i].sb->fs_uuid, except, 16)))
			continue;
		for (unsigned m = 0; m < fs[i].sb->member_count; m++) {
			const struct scan_dev *d = fs[i].member[m];
			int skipped = 0;

			for (int k = 0; d && k < nskip; k++)
				skipped |= skip[k] == makedev(d->major, d->minor);
			if (!d || skipped)
				continue;
			outside = 1;
			list_add(devs, len, d->path);
		}
		users += outside;
	}
	free(fs);
	scan_result_free(&r);
	return users;
}
