// SPDX-License-Identifier: MIT
/*
 * layout.c - dmafs_layout_get: read and check the user.dmafs.layout xattr.
 *
 * The text (written by fs_layout() in the daemon) is
 *
 *     stripe_unit=N members=N start_member=N size=N extents=N
 *     <file_offset> <length> <member_index> <member_offset>     (one line per extent)
 *
 * Nothing in it is trusted: numbers must be plain decimals that fit their fields, the
 * extent count must match the lines, extents must be sorted, non-overlapping, non-empty,
 * on existing members and free of overflow. Anything else is -EBADMSG.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/xattr.h>

#include "libdmafs-int.h"

#define LAYOUT_XATTR "user.dmafs.layout"
/* A file of 2^40 bytes in 1 MiB stripe units has 2^20 extents of < 64 bytes each:
 * anything above this is not a layout we wrote. */
#define LAYOUT_MAX_BYTES (256U << 20)

/* Parse a decimal at *p (digits only, no sign or spaces) up to @max; advance *p. */
static int num(const char **p, uint64_t max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (d > max || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return 0;
}

/* Expect the literal @lit at *p. */
static int lit(const char **p, const char *lit)
{
	size_t n = strlen(lit);

	if (strncmp(*p, lit, n))
		return -1;
	*p += n;
	return 0;
}

/*
 * Parse one page of the layout text into @l (allocating extents on the first page) and
 * set @next to the name of the following page, or "" on the last.
 */
static int parse(const char *t, struct dmafs_layout *l, int firstpage, char *next, size_t nextlen)
{
	uint64_t su, members, start, size, count, first = 0, lines, prev_end;
	const char *p = t;

	next[0] = '\0';
	if (lit(&p, "stripe_unit=") || num(&p, UINT32_MAX, &su) ||
	    lit(&p, " members=") || num(&p, UINT32_MAX, &members) ||
	    lit(&p, " start_member=") || num(&p, UINT32_MAX, &start) ||
	    lit(&p, " size=") || num(&p, UINT64_MAX, &size) ||
	    lit(&p, " extents=") || num(&p, UINT64_MAX, &count))
		return -EBADMSG;
	lines = count;
	/* optional paging fields of a large layout: first=K count=M next=NAME */
	while (*p == ' ') {
		if (!lit(&p, " first=")) {
			if (num(&p, UINT64_MAX, &first))
				return -EBADMSG;
		} else if (!lit(&p, " count=")) {
			if (num(&p, UINT64_MAX, &lines))
				return -EBADMSG;
		} else if (!lit(&p, " next=")) {
			size_t k = strcspn(p, " \n");

			if (k == 0 || k >= nextlen)
				return -EBADMSG;
			memcpy(next, p, k);
			next[k] = '\0';
			p += k;
		} else {
			p += strcspn(p + 1, " \n") + 1; /* a field of a later version: skip */
		}
	}
	if (lit(&p, "\n") || su == 0 || members == 0 || start >= members)
		return -EBADMSG;
	if (firstpage) {
		/* Each extent line takes at least 8 bytes: bounds the allocation by the text. */
		if (count > (uint64_t)LAYOUT_MAX_BYTES / 8 || first != 0)
			return -EBADMSG;
		l->stripe_unit = (uint32_t)su;
		l->members = (uint32_t)members;
		l->start_member = (uint32_t)start;
		l->size = size;
		l->count = 0;
		l->extents = count ? calloc(count, sizeof(*l->extents)) : NULL;
		if (count && !l->extents)
			return -ENOMEM;
	} else if (first != l->count || su != l->stripe_unit || members != l->members) {
		return -EAGAIN; /* the file changed between pages */
	}
	if (lines > count - l->count || lines > strlen(p) / 8)
		return -EBADMSG;
	prev_end = l->count ? l->extents[l->count - 1].file_offset + l->extents[l->count - 1].length : 0;
	for (uint64_t i = 0; i < lines; i++) {
		struct dmafs_layout_extent *e = &l->extents[l->count];
		uint64_t off, len, member, moff;

		if (num(&p, UINT64_MAX, &off) || lit(&p, " ") || num(&p, UINT64_MAX, &len) ||
		    lit(&p, " ") || num(&p, members - 1, &member) || lit(&p, " ") ||
		    num(&p, UINT64_MAX, &moff) || lit(&p, "\n"))
			return -EBADMSG;
		if (len == 0 || len > UINT64_MAX - off || len > UINT64_MAX - moff)
			return -EBADMSG;
		if (l->count && off < prev_end)
			return -EBADMSG; /* unsorted or overlapping */
		prev_end = off + len;
		e->file_offset = off;
		e->length = len;
		e->member = (uint32_t)member;
		e->member_offset = moff;
		l->count++;
	}
	if (*p)
		return -EBADMSG;
	if (!next[0] && l->count != count)
		return -EBADMSG;
	return 0;
}

/* Read xattr @name of @path into a fresh NUL-terminated buffer. */
static int get_text(const char *path, const char *name, char **out)
{
	char *t = NULL;
	ssize_t n = 0;

	/* The layout grows while the file is written: retry if it outgrew our buffer. */
	for (int tries = 0; tries < 8; tries++) {
		n = getxattr(path, name, NULL, 0);
		if (n < 0)
			break;
		if ((size_t)n > LAYOUT_MAX_BYTES) {
			errno = EBADMSG;
			n = -1;
			break;
		}
		free(t);
		t = malloc((size_t)n + 1);
		if (!t)
			return -ENOMEM;
		n = getxattr(path, name, t, (size_t)n);
		if (n >= 0 || errno != ERANGE)
			break;
	}
	if (n < 0) {
		int e = errno;

		free(t);
		if (e == ENOTSUP)
			return -ENODATA; /* a FUSE filesystem without xattrs: not dmafs */
		return e == ERANGE ? -EAGAIN : -e; /* ERANGE: still growing after 8 tries */
	}
	t[n] = '\0';
	if (strlen(t) != (size_t)n) {
		free(t);
		return -EBADMSG; /* embedded NUL */
	}
	*out = t;
	return 0;
}

int dmafs_layout_get(const char *path, struct dmafs_layout **out)
{
	struct dmafs_layout *l;
	struct statfs sfs;
	char name[128] = LAYOUT_XATTR, next[128];
	int ret = 0;

	if (!path || !out)
		return -EINVAL;
	if (statfs(path, &sfs))
		return -errno;
	if (sfs.f_type != FUSE_SUPER_MAGIC)
		return -ENODATA;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	/* a large layout comes in pages (the kernel caps an xattr at 64 KiB) */
	for (int page = 0; !ret; page++) {
		char *t = NULL;

		ret = get_text(path, name, &t);
		if (ret)
			break;
		ret = parse(t, l, page == 0, next, sizeof(next));
		free(t);
		if (ret || !next[0])
			break;
		if (strncmp(next, LAYOUT_XATTR "@", strlen(LAYOUT_XATTR) + 1)) {
			ret = -EBADMSG;
			break;
		}
		snprintf(name, sizeof(name), "%s", next);
	}
	if (ret) {
		dmafs_layout_free(l);
		return ret;
	}
	*out = l;
	return 0;
}

void dmafs_layout_free(struct dmafs_layout *l)
{
	if (!l)
		return;
	free(l->extents);
	free(l);
}
