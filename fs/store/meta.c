// SPDX-License-Identifier: MIT
/* meta.c - in-memory metadata and the single place where records change it. */
#include "store/meta.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

_Static_assert(sizeof(uint64_t) >= sizeof(void *), "FUSE inode numbers are our inode numbers");

int meta_init(struct meta *m, uint32_t stripe_unit, unsigned nmembers)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->stripe_unit = stripe_unit;
	m->nmembers = nmembers;
	m->next_ino = FMT_ROOT_INO + 1;
	return htab_init(&m->inodes, 1024);
}

struct inode *meta_iget(struct meta *m, uint64_t ino)
{
	return (struct inode *)htab_first(&m->inodes, ino);
}

void meta_iget_prefetch(const struct meta *m, uint64_t ino, int node)
{
	/* a record changes the attributes, the extents, or the names (dir, parent, name) */
	htab_prefetch(&m->inodes, ino, node ? offsetof(struct inode, nlookup) : 0);
}

void meta_reserve(struct meta *m, size_t n)
{
	htab_reserve(&m->inodes, n); /* without it the table grows as it fills */
}

static struct dir *dir_new(void)
{
	struct dir *d = calloc(1, sizeof(*d));

	if (!d || htab_init(&d->names, 16)) {
		free(d);
		return NULL;
	}
	return d;
}

static void dir_free(struct dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nslots; i++)
		free(d->slots[i]);
	free(d->slots);
	free(d->cookies);
	htab_destroy(&d->names);
	free(d);
}

static void xattrs_free(struct inode *ino)
{
	struct xattr *x, *next;

	for (x = ino->xattrs; x; x = next) {
		next = x->next;
		free(x->name);
		free(x->val);
		free(x);
	}
	ino->xattrs = NULL;
	ino->xattr_bytes = 0;
}

static void inode_free(struct inode *ino)
{
	dir_free(ino->dir);
	xattrs_free(ino);
	free(ino->symlink);
	free(ino->ext);
	free(ino);
}

static int free_all(struct inode *ino, void *arg)
{
	inode_free(ino);
	return 0;
}

void meta_destroy(struct meta *m)
{
	/* collect first: freeing while walking the table would break the walk */
	size_t n = m->inodes.n, k = 0;
	struct inode **all = calloc(n ? n : 1, sizeof(*all));

	for (size_t i = 0; all && i < m->inodes.nb; i++)
		for (struct hnode *h = m->inodes.b[i]; h; h = h->next)
			all[k++] = (struct inode *)h;
	for (size_t i = 0; i < k; i++)
		free_all(all[i], NULL);
	free(all);
	htab_destroy(&m->inodes);
	free(m->fix);
	pthread_mutex_destroy(&m->lock);
}

int meta_for_each(struct meta *m, int (*fn)(struct inode *, void *), void *arg)
{
	for (size_t i = 0; i < m->inodes.nb; i++) {
		struct hnode *h = m->inodes.b[i], *next;

		for (; h; h = next) {
			int ret;

			next = h->next;
			ret = fn((struct inode *)h, arg);
			if (ret)
				return ret;
		}
	}
	return 0;
}

struct dentry *meta_lookup(struct inode *dir, const char *name, size_t len)
{
	uint64_t key = fmt_hash(name, len);

	if (!dir->dir)
		return NULL;
	for (struct hnode *h = htab_first(&dir->dir->names, key); h; h = htab_next(h, key)) {
		struct dentry *de = (struct dentry *)h;

		if (de->namelen == len && !memcmp(de->name, name, len))
			return de;
	}
	return NULL;
}

size_t meta_ext_find(const struct inode *ino, uint64_t off)
{
	size_t lo = 0, hi = ino->next;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ino->ext[mid].off + ino->ext[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void meta_inode_rec(const struct inode *ino, struct fmt_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = REC_INODE;
	r->ino = ino->ino;
	r->a = ino->a;
}

static void free_range(struct meta *m, uint32_t member, uint64_t off, uint64_t len)
{
	if (m->alloc)
		alloc_defer(m->alloc, member, off, len);
}

static int apply_inode(struct meta *m, const struct fmt_rec *r)
{
	struct inode *ino = meta_iget(m, r->ino);

	switch (r->a.mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR: case S_IFBLK: case S_IFIFO:
	case S_IFSOCK:
		break;
	default:
		return -EUCLEAN;
	}
	/* UINT64_MAX would wrap next_ino to 0, and new inodes would collide with old ones */
	if (r->ino == 0 || r->ino == UINT64_MAX || r->a.start_member >= m->nmembers ||
	    (r->a.mode & ~(S_IFMT | 07777)))
		return -EUCLEAN;
	if (ino) {
		if ((ino->a.mode & S_IFMT) != (r->a.mode & S_IFMT))
			return -EUCLEAN;
		/* the extents' members follow start_member: it can only change when empty */
		if (ino->next && ino->a.start_member != r->a.start_member)
			return -EUCLEAN;
		ino->a = r->a;
		if (r->a.nlink > 1 && !S_ISDIR(r->a.mode))
			ino->several_names = 1;
		return 0;
	}
	ino = calloc(1, sizeof(*ino));
	if (!ino)
		return -ENOMEM;
	ino->ino = ino->h.key = r->ino;
	ino->a = r->a;
	ino->several_names = r->a.nlink > 1 && !S_ISDIR(r->a.mode);
	if (S_ISDIR(r->a.mode)) {
		ino->dir = dir_new();
		if (!ino->dir) {
			free(ino);
			return -ENOMEM;
		}
		ino->dir->parent = r->ino == FMT_ROOT_INO ? FMT_ROOT_INO : 0;
	}
	htab_insert(&m->inodes, &ino->h);
	if (r->ino >= m->next_ino)
		m->next_ino = r->ino + 1;
	return 0;
}

static int apply_extent(struct meta *m, const struct fmt_rec *r)
{
	struct inode *ino = meta_iget(m, r->ino);
	uint64_t su = m->stripe_unit;
	size_t i;

	if (!ino || !S_ISREG(ino->a.mode) || r->member >= m->nmembers)
		return -EUCLEAN;
	/* the extent must stay inside one stripe unit, on that unit's member */
	if (r->off / su != (r->off + r->len - 1) / su ||
	    meta_slot_member(m, ino, r->off / su) != r->member)
		return -EUCLEAN;
	i = meta_ext_find(ino, r->off);
	if (i < ino->next && ino->ext[i].off < r->off + r->len)
		return -EUCLEAN; /* overlaps an existing extent */
	if (i > 0) {
		struct extent *p = &ino->ext[i - 1];

		if (p->off + p->len == r->off && p->moff + p->len == r->moff &&
		    p->member == r->member && p->off / su == r->off / su) {
			p->len += r->len;
			return 0;
		}
	}
	/* most files have one extent per member or fewer: no room kept ahead at first */
	size_t cap = ino->capext;

	if (ino->next == UINT32_MAX || dm_grow(&ino->ext, &cap, ino->next + 1, sizeof(*ino->ext), 1))
		return -ENOMEM;
	ino->capext = (uint32_t)cap;
	memmove(&ino->ext[i + 1], &ino->ext[i], (ino->next - i) * sizeof(ino->ext[0]));
	ino->ext[i] = (struct extent){ r->off, r->len, r->member, r->moff };
	ino->next++;
	return 0;
}

static int apply_trunc(struct meta *m, struct inode *ino, uint64_t size)
{
	uint64_t keep = ALIGN_UP(size, DMAFS_BLOCK);
	size_t i = meta_ext_find(ino, keep), j;

	if (i < ino->next && ino->ext[i].off < keep) {
		/* extent straddles the new end: keep its head */
		struct extent *e = &ino->ext[i];
		uint64_t head = keep - e->off;

		free_range(m, e->member, e->moff + head, e->len - head);
		e->len = head;
		i++;
	}
	for (j = i; j < ino->next; j++)
		free_range(m, ino->ext[j].member, ino->ext[j].moff, ino->ext[j].len);
	ino->next = i;
	ino->a.size = size;
	return 0;
}

/* Unmap blocks [off, off+len) of a file (copy-on-write replaces them; holes stay holes). */
static int apply_punch(struct meta *m, struct inode *ino, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	size_t i = meta_ext_find(ino, off), j;

	if (i < ino->next && ino->ext[i].off < off) {
		struct extent *e = &ino->ext[i];
		uint64_t eend = e->off + e->len;

		if (eend > end) {
			/* the punch lies inside this extent: split it in two */
			if (ino->next == ino->capext) {
				size_t cap = ino->capext * 2;
				struct extent *ne = realloc(ino->ext, cap * sizeof(*ne));

				if (!ne)
					return -ENOMEM;
				ino->ext = ne;
				ino->capext = cap;
				e = &ino->ext[i];
			}
			memmove(&ino->ext[i + 2], &ino->ext[i + 1],
				(ino->next - i - 1) * sizeof(ino->ext[0]));
			ino->ext[i + 1] = (struct extent){ end, eend - end, e->member,
							   e->moff + (end - e->off) };
			ino->next++;
			free_range(m, e->member, e->moff + (off - e->off), len);
			e->len = off - e->off;
			return 0;
		}
		free_range(m, e->member, e->moff + (off - e->off), eend - off);
		e->len = off - e->off;
		i++;
	}
	for (j = i; j < ino->next && ino->ext[j].off + ino->ext[j].len <= end; j++)
		free_range(m, ino->ext[j].member, ino->ext[j].moff, ino->ext[j].len);
	if (j < ino->next && ino->ext[j].off < end) {
		/* straddles the end: keep its tail */
		struct extent *e = &ino->ext[j];
		uint64_t cut = end - e->off;

		free_range(m, e->member, e->moff, cut);
		e->off = end;
		e->moff += cut;
		e->len -= cut;
	}
	if (j > i) { /* ext is NULL for a file that never had extents */
		memmove(&ino->ext[i], &ino->ext[j], (ino->next - j) * sizeof(ino->ext[0]));
		ino->next -= j - i;
	}
	return 0;
}

static int slot_add(struct dir *d, struct dentry *de)
{
	if (d->nslots >= UINT32_MAX) /* the slot index in a dentry */
		return -ENOSPC;
	if (d->nslots == d->capslots) {
		/* two arrays of one capacity: it grows once both have */
		size_t cs = d->capslots, cc = d->capslots;

		if (dm_grow(&d->slots, &cs, d->nslots + 1, sizeof(*d->slots), 16) ||
		    dm_grow(&d->cookies, &cc, d->nslots + 1, sizeof(*d->cookies), 16))
			return -ENOMEM;
		d->capslots = cc;
	}
	de->slot = (uint32_t)d->nslots;
	d->cookies[d->nslots] = d->next_cookie++;
	d->slots[d->nslots++] = de;
	return 0;
}

static void meta_dir_compact(struct dir *d)
{
	size_t k = 0;

	if (d->nopen || d->holes < 64 || d->holes < d->nslots / 2)
		return;
	for (size_t i = 0; i < d->nslots; i++) {
		if (d->slots[i]) {
			d->slots[k] = d->slots[i];
			d->cookies[k] = d->cookies[i]; /* cookies move with their entries */
			d->slots[k]->slot = (uint32_t)k;
			k++;
		}
	}
	d->nslots = k;
	d->holes = 0;
}

size_t meta_dir_seek(const struct dir *d, uint64_t cookie)
{
	size_t lo = 0, hi = d->nslots;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->cookies[mid] < cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct meta_name_fix {
	uint64_t slot; /* the inode's bucket when deferred (an order, not a place); util_sort32's key */
	uint64_t ino, dir;
	struct dentry *de;
};

/* Inode @ino's (latest) name is @de in directory @dir. */
static void name_child(struct meta *m, uint64_t ino, uint64_t dir, struct dentry *de)
{
	struct inode *child = meta_iget(m, ino);

	if (child && child->dir) {
		child->dir->parent = dir;
	} else if (child) {
		child->parent = dir;
		child->name = de;
	}
}

static int apply_link(struct meta *m, const struct fmt_rec *r)
{
	struct inode *dir = meta_iget(m, r->dir);
	struct dentry *de;

	if (!dir || !dir->dir || r->ino == 0 || r->ino == FMT_ROOT_INO)
		return -EUCLEAN;
	if (meta_lookup(dir, (const char *)r->name, r->name_len))
		return -EUCLEAN;
	de = malloc(sizeof(*de) + r->name_len + 1);
	if (!de)
		return -ENOMEM;
	de->ino = r->ino;
	de->namelen = r->name_len;
	memcpy(de->name, r->name, r->name_len);
	de->name[r->name_len] = '\0';
	de->h.key = fmt_hash(de->name, de->namelen);
	if (slot_add(dir->dir, de)) {
		free(de);
		return -ENOMEM;
	}
	htab_insert(&dir->dir->names, &de->h);
	dir->dir->count++;
	if (m->defer_names && !dm_grow(&m->fix, &m->capfix, m->nfix + 1, sizeof(*m->fix), 4096)) {
		m->fix[m->nfix++] = (struct meta_name_fix){ htab_slot(&m->inodes, r->ino), r->ino,
							    r->dir, de };
		return 0;
	}
	name_child(m, r->ino, r->dir, de);
	return 0;
}

/* The names deferred so far, given in bucket order (a stable sort: the last name given
 * an inode stays its name, as without deferring). */
static void names_flush(struct meta *m)
{
	struct meta_name_fix *tmp = m->nfix > 1 ? malloc(m->nfix * sizeof(*tmp)) : NULL;

	if (tmp)
		util_sort32(m->fix, m->nfix, tmp);
	free(tmp); /* without it, in record order: the same names, only slower */
	for (size_t i = 0; i < m->nfix; i++) {
		if (i + 8 < m->nfix)
			htab_prefetch(&m->inodes, m->fix[i + 8].ino, offsetof(struct inode, nlookup));
		name_child(m, m->fix[i].ino, m->fix[i].dir, m->fix[i].de);
	}
	m->nfix = 0;
}

void meta_defer_names(struct meta *m) { m->defer_names = 1; }

void meta_names_done(struct meta *m)
{
	names_flush(m);
	m->defer_names = 0;
	free(m->fix);
	m->fix = NULL;
	m->capfix = 0;
}

static int apply_unlink(struct meta *m, const struct fmt_rec *r)
{
	struct inode *dir = meta_iget(m, r->dir), *child;
	struct dentry *de;

	if (!dir || !dir->dir)
		return -EUCLEAN;
	de = meta_lookup(dir, (const char *)r->name, r->name_len);
	if (!de)
		return -EUCLEAN;
	child = meta_iget(m, de->ino);
	if (child && child->name == de)
		child->name = NULL;
	htab_remove(&dir->dir->names, &de->h);
	dir->dir->slots[de->slot] = NULL;
	dir->dir->holes++;
	dir->dir->count--;
	free(de);
	meta_dir_compact(dir->dir);
	return 0;
}

static struct xattr *xattr_find(struct inode *ino, const uint8_t *name, size_t len,
				struct xattr ***prev)
{
	struct xattr **pp = &ino->xattrs;

	for (; *pp; pp = &(*pp)->next) {
		if (strlen((*pp)->name) == len && !memcmp((*pp)->name, name, len)) {
			if (prev)
				*prev = pp;
			return *pp;
		}
	}
	return NULL;
}

static int apply_xset(struct inode *ino, const struct fmt_rec *r)
{
	struct xattr *x = xattr_find(ino, r->name, r->name_len, NULL);
	void *val = malloc(r->val_len ? r->val_len : 1);

	if (!val)
		return -ENOMEM;
	memcpy(val, r->val, r->val_len);
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x || !(x->name = strndup((const char *)r->name, r->name_len))) {
			free(x);
			free(val);
			return -ENOMEM;
		}
		x->next = ino->xattrs;
		ino->xattrs = x;
		ino->xattr_bytes += r->name_len;
	} else {
		ino->xattr_bytes -= x->len;
		free(x->val);
	}
	x->val = val;
	x->len = r->val_len;
	ino->xattr_bytes += r->val_len;
	return 0;
}

static int apply_xdel(struct inode *ino, const struct fmt_rec *r)
{
	struct xattr **pp, *x = xattr_find(ino, r->name, r->name_len, &pp);

	if (!x)
		return -EUCLEAN;
	*pp = x->next;
	ino->xattr_bytes -= x->len + strlen(x->name);
	free(x->name);
	free(x->val);
	free(x);
	return 0;
}

static int apply_idel(struct meta *m, struct inode *ino)
{
	if (ino->ino == FMT_ROOT_INO || (ino->dir && ino->dir->count))
		return -EUCLEAN;
	apply_trunc(m, ino, 0);
	htab_remove(&m->inodes, &ino->h);
	inode_free(ino);
	return 0;
}

int meta_apply(struct meta *m, const struct fmt_rec *r)
{
	struct inode *ino;

	if (m->nfix && r->type != REC_LINK)
		names_flush(m); /* an unlink, say, may free a deferred name's entry */

	switch (r->type) {
	case REC_INODE:
		return apply_inode(m, r);
	case REC_EXTENT:
		return apply_extent(m, r);
	case REC_LINK:
		return apply_link(m, r);
	case REC_UNLINK:
		return apply_unlink(m, r);
	}
	ino = meta_iget(m, r->ino);
	if (!ino)
		return -EUCLEAN;
	switch (r->type) {
	case REC_SYMLINK: {
		char *t = strndup((const char *)r->name, r->name_len);

		if (!S_ISLNK(ino->a.mode))
			return free(t), -EUCLEAN;
		if (!t)
			return -ENOMEM;
		free(ino->symlink);
		ino->symlink = t;
		return 0;
	}
	case REC_TRUNC:
		if (!S_ISREG(ino->a.mode))
			return -EUCLEAN;
		return apply_trunc(m, ino, r->off);
	case REC_PUNCH:
		if (!S_ISREG(ino->a.mode))
			return -EUCLEAN;
		return apply_punch(m, ino, r->off, r->plen);
	case REC_IDEL:
		return apply_idel(m, ino);
	case REC_XSET:
		return apply_xset(ino, r);
	case REC_XDEL:
		return apply_xdel(ino, r);
	}
	return -EUCLEAN;
}

struct snap_ctx {
	struct buf *b;
	int links; /* second pass: directory entries */
};

static int snap_inode(struct inode *ino, void *arg)
{
	struct snap_ctx *c = arg;
	struct fmt_rec r;
	int ret;

	if (c->links) {
		if (!ino->dir)
			return 0;
		for (size_t i = 0; i < ino->dir->nslots; i++) {
			struct dentry *de = ino->dir->slots[i];

			if (!de)
				continue;
			memset(&r, 0, sizeof(r));
			r.type = REC_LINK;
			r.dir = ino->ino;
			r.ino = de->ino;
			r.name = (const uint8_t *)de->name;
			r.name_len = de->namelen;
			ret = fmt_rec_encode(c->b, &r);
			if (ret)
				return ret;
		}
		return 0;
	}
	meta_inode_rec(ino, &r);
	ret = fmt_rec_encode(c->b, &r);
	if (!ret && ino->symlink) {
		memset(&r, 0, sizeof(r));
		r.type = REC_SYMLINK;
		r.ino = ino->ino;
		r.name = (const uint8_t *)ino->symlink;
		r.name_len = strlen(ino->symlink);
		ret = fmt_rec_encode(c->b, &r);
	}
	for (size_t i = 0; !ret && i < ino->next; i++) {
		memset(&r, 0, sizeof(r));
		r.type = REC_EXTENT;
		r.ino = ino->ino;
		r.off = ino->ext[i].off;
		r.len = ino->ext[i].len;
		r.member = ino->ext[i].member;
		r.moff = ino->ext[i].moff;
		ret = fmt_rec_encode(c->b, &r);
	}
	for (struct xattr *x = ino->xattrs; !ret && x; x = x->next) {
		memset(&r, 0, sizeof(r));
		r.type = REC_XSET;
		r.ino = ino->ino;
		r.name = (const uint8_t *)x->name;
		r.name_len = strlen(x->name);
		r.val = x->val;
		r.val_len = x->len;
		ret = fmt_rec_encode(c->b, &r);
	}
	return ret;
}

int meta_snapshot(struct meta *m, struct buf *b)
{
	struct snap_ctx c = { b, 0 };
	int ret = meta_for_each(m, snap_inode, &c);

	if (ret)
		return ret;
	c.links = 1;
	return meta_for_each(m, snap_inode, &c);
}

struct cleanup_ctx {
	struct meta *m;
	void (*report)(const char *);
	int fixes;
	struct inode **orphans;
	size_t norphans, cap;
	int orphans_gone; /* second walk: only entries */
};

static int check_entries(struct inode *ino, void *arg)
{
	struct cleanup_ctx *c = arg;
	char msg[512];

	if (ino->dir) {
		ino->dir->nopen++; /* no slot compaction while we walk the slots */
		for (size_t i = 0; i < ino->dir->nslots; i++) {
			struct dentry *de = ino->dir->slots[i];
			struct fmt_rec r;

			if (!de || meta_iget(c->m, de->ino))
				continue;
			snprintf(msg, sizeof(msg),
				 "entry '%s' in directory %llu points to missing inode %llu; removed",
				 de->name, (unsigned long long)ino->ino, (unsigned long long)de->ino);
			c->report(msg);
			memset(&r, 0, sizeof(r));
			r.type = REC_UNLINK;
			r.dir = ino->ino;
			r.name = (const uint8_t *)de->name;
			r.name_len = de->namelen;
			meta_apply(c->m, &r);
			c->fixes++;
		}
		ino->dir->nopen--;
	}
	if (ino->a.nlink == 0 && ino->ino != FMT_ROOT_INO && !c->orphans_gone) {
		if (dm_grow(&c->orphans, &c->cap, c->norphans + 1, sizeof(*c->orphans), 16))
			return -ENOMEM;
		c->orphans[c->norphans++] = ino;
	}
	return 0;
}

int meta_cleanup(struct meta *m, void (*report)(const char *msg))
{
	struct cleanup_ctx c = { .m = m, .report = report };
	int ret = meta_for_each(m, check_entries, &c);
	size_t deleted = 0;

	/* Orphans: unlinked while open when the daemon stopped; their space is reclaimed. */
	for (size_t i = 0; !ret && i < c.norphans; i++) {
		struct inode *ino = c.orphans[i];

		if (ino->dir && ino->dir->count)
			continue;
		apply_idel(m, ino);
		deleted++;
	}
	free(c.orphans);
	/* damaged metadata can still name an inode whose nlink is 0: drop those entries too */
	c.orphans_gone = 1;
	if (!ret && deleted)
		ret = meta_for_each(m, check_entries, &c);
	return ret ? ret : c.fixes;
}
