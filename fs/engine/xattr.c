// SPDX-License-Identifier: MIT
/* xattr.c - extended attributes: user, trusted, security, POSIX ACLs, and the virtual layout xattr. */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "engine/acl.h"
#include "engine/internal.h"

/* ---- xattrs ---- */

/* The namespaces kept. */
enum { XNS_NONE, XNS_USER, XNS_TRUSTED, XNS_SECURITY, XNS_ACL_ACCESS, XNS_ACL_DEFAULT };

static int xattr_ns(const struct fs *fs, const char *name)
{
	if (!strncmp(name, "user.", 5) && name[5])
		return XNS_USER;
	if (!strncmp(name, "trusted.", 8) && name[8])
		return XNS_TRUSTED;
	if (!strncmp(name, "security.", 9) && name[9])
		return XNS_SECURITY;
	if (fs->acl && !strcmp(name, ACL_XATTR_ACCESS))
		return XNS_ACL_ACCESS;
	if (fs->acl && !strcmp(name, ACL_XATTR_DEFAULT))
		return XNS_ACL_DEFAULT;
	return XNS_NONE;
}

/*
 * The kernel caps an xattr value at 64 KiB, about 1600 extent lines: a larger layout is
 * served in pages. The first line then adds "first=K count=M" and, while more remain,
 * "next=user.dmafs.layout@J"; that xattr holds the page starting at extent J.
 */
#define LAYOUT_PAGE_BYTES 60000

char *fs_layout(struct fs *fs, uint64_t ino, size_t first, int *err)
{
	struct inode *i;
	struct buf b = { 0 };
	size_t k, n;
	int werr;

	fs_wait_written(fs, ino, 0, &werr); /* the layout of what was written */
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i || !S_ISREG(i->a.mode) || (first && first >= i->next)) {
		pthread_mutex_unlock(&fs->meta.lock);
		*err = i ? -ENODATA : -ENOENT;
		return NULL;
	}
	/* extents fitting in one page: lines are at most 4 x 20 digits + 4 */
	n = MIN(i->next - first, (size_t)(LAYOUT_PAGE_BYTES - 256) / 84);
	if (buf_reserve(&b, 256 + n * 84)) {
		pthread_mutex_unlock(&fs->meta.lock);
		*err = -ENOMEM;
		return NULL;
	}
	b.len = sprintf((char *)b.p, "stripe_unit=%u members=%u start_member=%u size=%llu extents=%u",
			fs->su, fs->n, i->a.start_member, (unsigned long long)i->a.size, i->next);
	if (first || n < i->next)
		b.len += sprintf((char *)b.p + b.len, " first=%zu count=%zu", first, n);
	if (first + n < i->next)
		b.len += sprintf((char *)b.p + b.len, " next=%s@%zu", LAYOUT_XATTR, first + n);
	b.p[b.len++] = '\n';
	for (k = first; k < first + n; k++) {
		const struct extent *e = &i->ext[k];

		b.len += sprintf((char *)b.p + b.len, "%llu %u %u %llu\n",
				 (unsigned long long)e->off, e->len, e->member,
				 (unsigned long long)e->moff);
	}
	b.p[b.len] = '\0';
	pthread_mutex_unlock(&fs->meta.lock);
	return (char *)b.p;
}

/*
 * The value of user.dmafs.tier: the bytes of regular file @ino that the warm tier holds,
 * in decimal. -ENODATA when the mount has no tier or @ino is not a regular file.
 */
static int tier_xattr(struct fs *fs, uint64_t ino, void *buf, size_t size)
{
	struct inode *i;
	char v[24];
	int len, werr;

	fs_wait_written(fs, ino, 0, &werr); /* a write lets go of its chunks when it lands */
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i || !fs->tier || !S_ISREG(i->a.mode)) {
		pthread_mutex_unlock(&fs->meta.lock);
		return i ? -ENODATA : -ENOENT;
	}
	len = snprintf(v, sizeof(v), "%llu", (unsigned long long)tier_file_bytes(fs->tier, i));
	pthread_mutex_unlock(&fs->meta.lock);
	if (size == 0)
		return len;
	if (size < (size_t)len)
		return -ERANGE;
	memcpy(buf, v, (size_t)len);
	return len;
}

/* @len bytes of @v into @buf of @size (0: the length only), as getxattr answers. */
static int give(const char *v, size_t len, void *buf, size_t size)
{
	if (size == 0)
		return (int)len;
	if (size < len)
		return -ERANGE;
	memcpy(buf, v, len);
	return (int)len;
}

/*
 * user.dmafs.tier_min_free of the root: the available memory the warm tier leaves the
 * machine (tier-press.h), in bytes; -ENODATA elsewhere or without a tier.
 */
static int min_free_get(struct fs *fs, uint64_t ino, void *buf, size_t size)
{
	char v[24];

	if (ino != FMT_ROOT_INO || !fs->tier)
		return -ENODATA;
	return give(v, (size_t)snprintf(v, sizeof(v), "%llu",
					(unsigned long long)tier_min_free(fs->tier)), buf, size);
}

/*
 * Set it: only uid 0, only on the root of a mount with a tier (-EPERM), a size or N% of
 * the RAM as tier_min_free= takes (-EINVAL). It lasts until unmount; the watcher acts on
 * it within its period. An administrator's lever, and how the tests make memory short.
 */
static int min_free_set(struct fs *fs, const struct fs_ctx *c, uint64_t ino, const void *val,
			size_t size)
{
	uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE), v;
	char s[32];

	if (ino != FMT_ROOT_INO || !fs->tier || !c || c->uid != 0)
		return -EPERM;
	if (size == 0 || size >= sizeof(s))
		return -EINVAL;
	memcpy(s, val, size);
	s[size] = '\0';
	if (util_parse_size_pct(s, ram, &v))
		return -EINVAL;
	tier_set_min_free(fs->tier, v);
	log_info("warm tier: tier_min_free is now %llu MiB (set through %s)",
		 (unsigned long long)(v >> 20), TIER_MIN_FREE_XATTR);
	return 0;
}

/*
 * The value of user.dmafs.members, on every inode: the filesystem's UUID and label (a
 * backslash and control characters as \xNN, so that it stays one line), then a line per
 * member with its UUID, its size, the bytes of its data region and the bytes free there
 * (the allocator's view: space a write-behind holds counts as free until it lands), and
 * where the metadata log is: in its halves or in areas of the data region, the bytes a
 * generation may take there, the last snapshot's bytes and inodes.
 * dmafs-check shows them; the label cannot change while mounted.
 */
static int members_xattr(struct fs *fs, void *buf, size_t size)
{
	const struct fmt_sb *sb = &fs->members[0].sb;
	struct buf b = { 0 };
	char u[40];
	int ret;

	if (buf_reserve(&b, 256 + 4 * sizeof(sb->label) + fs->n * 240))
		return -ENOMEM;
	util_uuid_str(sb->fs_uuid, u);
	b.len = (size_t)sprintf((char *)b.p, "uuid=%s\nlabel=", u);
	for (const unsigned char *c = (const unsigned char *)sb->label; *c; c++)
		b.len += (size_t)sprintf((char *)b.p + b.len, *c < 0x20 || *c == 0x7f || *c == '\\' ? "\\x%02x" : "%c", *c);
	b.len += (size_t)sprintf((char *)b.p + b.len, "\nmembers=%u stripe_unit=%u\nprofile=%s\n", fs->n,
				 fs->su, fs->mirror ? "mirror" : "single");
	for (unsigned m = 0; m < fs->n; m++) {
		static const char *const state[] = { "ok", "failed", "missing" };
		const struct fmt_sb *ms = &fs->members[m].sb;

		util_uuid_str(ms->member_uuid[m], u);
		/* data: what files are allocated from (a mirror's second copies lie past it);
		 * bad: blocks of this member's copies that a read found bad, healed: rewritten */
		b.len += (size_t)sprintf((char *)b.p + b.len, "member=%u uuid=%s size=%llu data=%llu free=%llu state=%s bad=%llu healed=%llu\n",
					 m, u, (unsigned long long)ms->member_size,
					 (unsigned long long)(fmt_alloc_end(ms) - ms->data_offset),
					 (unsigned long long)alloc_member_free(&fs->alloc, m),
					 state[atomic_load(&fs->mstate[m])],
					 (unsigned long long)atomic_load(&fs->mst[m].bad),
					 (unsigned long long)atomic_load(&fs->mst[m].healed));
	}
	pthread_mutex_lock(&fs->meta.lock);
	b.len += (size_t)sprintf((char *)b.p + b.len, "log=%s size=%llu snapshot=%llu inodes=%llu\n",
				 fs->j.ext_len ? "areas" : "halves",
				 (unsigned long long)journal_cap(&fs->j),
				 (unsigned long long)fs->j.snap_len, (unsigned long long)fs->j.snap_inodes);
	pthread_mutex_unlock(&fs->meta.lock);
	ret = give((const char *)b.p, b.len, buf, size);
	buf_free(&b);
	return ret;
}

/* Is @name a virtual xattr: the layout or one of its pages (*first set), the tier's, the members'? */
static int virtual_name(const char *name, size_t *first)
{
	size_t len = strlen(LAYOUT_XATTR);
	char *end;

	*first = 0;
	if (!strcmp(name, TIER_XATTR) || !strcmp(name, TIER_MIN_FREE_XATTR) || !strcmp(name, MEMBERS_XATTR))
		return 1;
	if (strncmp(name, LAYOUT_XATTR, len))
		return 0;
	if (name[len] == '\0')
		return 1;
	if (name[len] != '@' || name[len + 1] < '0' || name[len + 1] > '9')
		return 0;
	errno = 0;
	*first = strtoull(name + len + 1, &end, 10);
	return !*end && !errno;
}

int fs_getxattr(struct fs *fs, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct inode *i;
	int ret = -ENODATA;

	size_t first;

	if (!strcmp(name, TIER_XATTR))
		return tier_xattr(fs, ino, buf, size);
	if (!strcmp(name, TIER_MIN_FREE_XATTR))
		return min_free_get(fs, ino, buf, size);
	if (!strcmp(name, MEMBERS_XATTR))
		return members_xattr(fs, buf, size);
	if (virtual_name(name, &first)) {
		char *t = fs_layout(fs, ino, first, &ret);
		size_t len;

		if (!t)
			return ret;
		len = strlen(t);
		if (size == 0)
			ret = len;
		else if (size < len)
			ret = -ERANGE;
		else {
			memcpy(buf, t, len);
			ret = len;
		}
		free(t);
		return ret;
	}
	if (xattr_ns(fs, name) == XNS_NONE)
		return strcmp(name, "user.") ? -EOPNOTSUPP : -ENODATA;
	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i)
		ret = -ENOENT;
	for (struct xattr *x = i ? i->xattrs : NULL; x; x = x->next) {
		if (strcmp(x->name, name))
			continue;
		if (size == 0)
			ret = x->len;
		else if (size < x->len)
			ret = -ERANGE;
		else {
			memcpy(buf, x->val, x->len);
			ret = x->len;
		}
		break;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

#define XATTR_TOTAL_MAX (256u << 10) /* per inode: keeps snapshots bounded */

/*
 * Set the access ACL of @i to valid ACL @val: the mode takes the ACL's permission bits,
 * and an ACL the mode expresses entirely is not stored (an older one is removed). As
 * the kernel's own filesystems do, setgid goes unless the caller is in the file's group
 * or may keep it (CAP_FSETID); the kernel asks FUSE filesystems to do that with
 * FUSE_SETXATTR_ACL_KILL_SGID only where libfuse speaks FUSE_SETXATTR_EXT (3.16 and
 * later), so it is decided here. Locked.
 */
static int set_access_acl(struct fs *fs, const struct fs_ctx *c, struct inode *i,
			  const void *val, size_t size)
{
	uint32_t perm;
	int ret = 0;

	if (acl_mode(val, size, &perm)) {
		if (rec_xattr(i, ACL_XATTR_ACCESS))
			ret = rec_xdel(fs, i->ino, ACL_XATTR_ACCESS);
	} else {
		ret = rec_xset(fs, i->ino, ACL_XATTR_ACCESS, val, size);
	}
	if (ret)
		return ret;
	i->a.mode = (i->a.mode & ~0777u) | perm;
	if ((i->a.mode & S_ISGID) && c && !acl_pid_in_group(c->pid, c->gid, i->a.gid) &&
	    !acl_pid_capable(c->pid, ACL_CAP_FSETID))
		i->a.mode &= ~S_ISGID;
	return 0;
}

int fs_setxattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, const char *name,
		const void *val, size_t size, int flags)
{
	struct inode *i;
	struct xattr *x = NULL;
	int ns = xattr_ns(fs, name), ret;
	size_t first;

	if (!strcmp(name, TIER_MIN_FREE_XATTR))
		return min_free_set(fs, c, ino, val, size);
	if (virtual_name(name, &first))
		return -EPERM;
	if (ns == XNS_NONE)
		return -EOPNOTSUPP;
	if (strlen(name) > FMT_XATTR_NAME_MAX)
		return -ERANGE;
	if (size > FMT_XATTR_VALUE_MAX)
		return -E2BIG;
	if (ns == XNS_ACL_ACCESS || ns == XNS_ACL_DEFAULT) {
		/* what the kernel sends is valid; anything else is refused before it is kept */
		ret = acl_check(val, size);
		if (ret < 0)
			return ret;
	}
	ret = fs_begin(fs, REC_ROOM + size, 1);
	if (ret)
		return ret;
	i = meta_iget(&fs->meta, ino);
	if (!i) {
		ret = -ENOENT;
		goto out;
	}
	if (fs_undeletable(i))
		ret = -EPERM; /* xattr_permission() */
	else if (ns == XNS_USER && !S_ISREG(i->a.mode) && !S_ISDIR(i->a.mode))
		ret = -EPERM; /* like ext4: user xattrs only on regular files and directories */
	else if (ns == XNS_ACL_ACCESS && S_ISLNK(i->a.mode))
		ret = -EOPNOTSUPP; /* symlinks have no ACLs */
	else if (ns == XNS_ACL_DEFAULT && !S_ISDIR(i->a.mode))
		ret = -EACCES; /* as the kernel answers: only directories have default ACLs */
	if (ret)
		goto out;
	x = rec_xattr(i, name);
	if ((flags & XATTR_CREATE) && x)
		ret = -EEXIST;
	else if ((flags & XATTR_REPLACE) && !x)
		ret = -ENODATA;
	else if (i->xattr_bytes + size + strlen(name) - (x ? x->len : 0) > XATTR_TOTAL_MAX)
		ret = -ENOSPC;
	if (ret)
		goto out;
	if (ns == XNS_ACL_ACCESS)
		ret = set_access_acl(fs, c, i, val, size);
	else
		ret = rec_xset(fs, ino, name, val, size);
	if (!ret) {
		i->a.ctime = fs_now();
		ret = rec_attr(fs, i);
	}
out:
	fs_end(fs);
	return ret;
}

int fs_listxattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, char *buf, size_t size)
{
	struct inode *i;
	size_t need = 0;
	int ret, trusted = 0, show_trusted = 1;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	for (struct xattr *x = i ? i->xattrs : NULL; x && !trusted; x = x->next)
		trusted = !strncmp(x->name, "trusted.", 8);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!i)
		return -ENOENT;
	/*
	 * The kernel checks CAP_SYS_ADMIN for reading trusted.* values, but passes the list
	 * on as it is: other filesystems leave those names out for anyone else, so do we.
	 * Asked only when there is such a name (it reads /proc).
	 */
	if (trusted && c)
		show_trusted = acl_pid_capable(c->pid, ACL_CAP_SYS_ADMIN);

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i) {
		pthread_mutex_unlock(&fs->meta.lock);
		return -ENOENT;
	}
#define LISTED(x) (show_trusted || strncmp((x)->name, "trusted.", 8))
	for (struct xattr *x = i->xattrs; x; x = x->next)
		if (LISTED(x))
			need += strlen(x->name) + 1;
	if (size == 0) {
		ret = need;
	} else if (size < need) {
		ret = -ERANGE;
	} else {
		char *p = buf;

		for (struct xattr *x = i->xattrs; x; x = x->next) {
			if (!LISTED(x))
				continue;
			strcpy(p, x->name);
			p += strlen(x->name) + 1;
		}
		ret = need;
	}
#undef LISTED
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

int fs_removexattr(struct fs *fs, uint64_t ino, const char *name)
{
	struct inode *i;
	struct xattr *x = NULL;
	int ret;
	size_t first;

	if (virtual_name(name, &first))
		return -EPERM;
	if (xattr_ns(fs, name) == XNS_NONE)
		return -EOPNOTSUPP;
	if (strlen(name) > FMT_XATTR_NAME_MAX)
		return -ERANGE;
	ret = fs_begin(fs, REC_ROOM, 0);
	if (ret)
		return ret;
	i = meta_iget(&fs->meta, ino);
	if (i)
		x = rec_xattr(i, name);
	if (!i)
		ret = -ENOENT;
	else if (fs_undeletable(i))
		ret = -EPERM; /* xattr_permission() */
	else if (!x)
		ret = -ENODATA;
	if (!ret)
		ret = rec_xdel(fs, ino, name); /* the mode stays as it is, as on ext4 */
	if (!ret) {
		i->a.ctime = fs_now();
		ret = rec_attr(fs, i);
	}
	fs_end(fs);
	return ret;
}
