// SPDX-License-Identifier: MIT
/*
 * fuzz_meta-run.c - one input of fuzz_meta: its image laid out on the member files, the
 * mount sequence of fs_mount run on them, and the invariants checked at each stage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/alloc.h"
#include "format/format.h"
#include "store/journal.h"
#include "io/member.h"
#include "store/meta.h"
#include "util/util.h"

#include "fuzz_meta.h"

/* ---------------------------------------------------------------- laying out the images */

int mfd[MAXM];
int use_members_open = 1;
uint8_t fs_uuid[16];
static int sabotaged;

/*
 * Lay out one log half into @hb (@half bytes) the way journal.c reads it, then compute every
 * checksum from the bytes as laid out: batch payloads last to first (a payload whose
 * payload_len runs past its records covers the next batch's header), then the snapshot, then
 * the half header. Returns the bytes used.
 */
static size_t lay_half(const struct half *h, uint8_t *hb, uint64_t half)
{
	size_t actual = rl_bytes(&h->snap), used = DMAFS_BLOCK, nb = 0;
	uint64_t snap_len = actual + (uint64_t)h->sdelta, pos[MAXBATCH];
	uint32_t plen[MAXBATCH];
	struct fmt_loghdr lh;

	if (!h->present)
		return 0;
	used = MAX(used, DMAFS_BLOCK + MIN(actual, half - DMAFS_BLOCK));
	rl_encode(&h->snap, hb + DMAFS_BLOCK, half - DMAFS_BLOCK);
	if (snap_len <= half - DMAFS_BLOCK) {
		uint64_t p = DMAFS_BLOCK + ALIGN_UP(snap_len, DMAFS_BLOCK);

		for (size_t i = 0; i < h->nb && p + DMAFS_BLOCK <= half; i++) {
			size_t a = rl_encode(&h->b[i].recs, hb + p + FMT_TX_HDR, half - p - FMT_TX_HDR);

			pos[nb] = p;
			plen[nb] = (uint32_t)(a + (uint64_t)h->b[i].pdelta);
			used = MAX(used, MIN(half, p + FMT_TX_HDR + a));
			p += fmt_tx_size(plen[nb]);
			nb++;
		}
	}
	for (size_t i = nb; i-- > 0;) {
		const struct batch *b = &h->b[i];
		struct fmt_txhdr t = { b->gen, b->seq, plen[i], 0 };

		if (pos[i] + FMT_TX_HDR + plen[i] <= half)
			t.payload_xxh3 = fmt_hash(hb + pos[i] + FMT_TX_HDR, plen[i]);
		if (b->bad == 1)
			t.payload_xxh3 ^= 1;
		fmt_txhdr_encode(&t, hb + pos[i]);
		if (b->bad == 2)
			hb[pos[i] + 40] ^= 1;
		sabotaged |= b->bad != 0;
		used = MAX(used, pos[i] + FMT_TX_HDR);
	}
	memset(&lh, 0, sizeof(lh));
	memcpy(lh.fs_uuid, fs_uuid, 16);
	lh.fs_uuid[0] ^= h->baduuid;
	lh.gen = h->gen;
	lh.first_seq = h->first_seq;
	lh.next_ino = h->next_ino;
	lh.snap_len = snap_len;
	if (snap_len <= half - DMAFS_BLOCK)
		lh.snap_xxh3 = fmt_hash(hb + DMAFS_BLOCK, snap_len);
	if (h->bad == 1)
		lh.snap_xxh3 ^= 1;
	fmt_loghdr_encode(&lh, hb);
	if (h->bad == 2)
		hb[4088] ^= 1;
	if (h->bad)
		sabotaged = 1;
	return used;
}

static void pwrite_clip(int fd, const void *p, size_t len, uint64_t off, uint64_t fsize)
{
	if (off >= fsize)
		return;
	len = MIN(len, fsize - off);
	if (pwrite(fd, p, len, off) != (ssize_t)len) {
		perror("fuzz_meta: pwrite to a member image");
		exit(2);
	}
}

/* Write the members of @im into the memfds: everything zero but what the image holds. */
void write_images(const struct img *im)
{
	uint8_t *blk = xrealloc(NULL, FMT_SB_SIZE), *hb;

	sabotaged = 0;
	for (unsigned i = 0; i < MAXM; i++) {
		if (ftruncate(mfd[i], 0) || ftruncate(mfd[i], i < im->n ? im->fsize[i] : 0)) {
			perror("fuzz_meta: ftruncate of a member image");
			exit(2);
		}
	}
	hb = xrealloc(NULL, im->half);
	memset(hb, 0, im->half);
	for (unsigned c = 0; c < 2 && c < im->n; c++) {
		for (int h = 0; h < 2; h++) {
			size_t used = lay_half(&im->log[c][h], hb, im->half);

			pwrite_clip(mfd[c], hb, used, FMT_LOG_OFFSET + h * im->half, im->fsize[c]);
			memset(hb, 0, used);
		}
	}
	free(hb);
	for (unsigned i = 0; i < im->n; i++) {
		for (int k = 0; k < 2; k++) {
			if (im->sbstate[i][k] == SB_ABSENT)
				continue;
			fmt_sb_encode(&im->sb[i][k], blk);
			if (im->sbstate[i][k] == SB_BADSUM) {
				blk[100] ^= 1;
				sabotaged = 1;
			}
			if (k == 0)
				pwrite_clip(mfd[i], blk, FMT_SB_SIZE, 0, im->fsize[i]);
			else if (im->fsize[i] >= 2 * FMT_SB_SIZE)
				pwrite_clip(mfd[i], blk, FMT_SB_SIZE, fmt_sb_copy_offset(im->fsize[i]),
					    im->fsize[i]);
		}
	}
	free(blk);
}

/* ---------------------------------------------------------------- invariants */

static void check_sbs(const struct member *ms, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const struct fmt_sb *sb = &ms[i].sb;
		uint64_t end = sb->member_size, room;

		if (sb->member_size > ALIGN_DOWN(ms[i].size, DMAFS_BLOCK))
			bug("member %u accepted with member_size %llu over its %llu bytes", i,
			    (unsigned long long)sb->member_size, (unsigned long long)ms[i].size);
		if (sb->data_offset < FMT_SB_SIZE || sb->data_end > end - FMT_SB_SIZE ||
		    sb->data_offset >= sb->data_end)
			bug("member %u accepted with a data region [%llu, %llu) over a superblock", i,
			    (unsigned long long)sb->data_offset, (unsigned long long)sb->data_end);
		room = sb->csum_offset <= end - FMT_SB_SIZE ? end - FMT_SB_SIZE - sb->csum_offset : 0;
		if (sb->csum_offset < sb->data_end || sb->csum_offset > end - FMT_SB_SIZE ||
		    fmt_csum_bytes(sb->data_end - sb->data_offset) > room)
			bug("member %u accepted with a checksum region at %llu outside [data_end %llu, member_size %llu - 4096)",
			    i, (unsigned long long)sb->csum_offset, (unsigned long long)sb->data_end,
			    (unsigned long long)end);
		if (fmt_has_log(i) && (sb->log_offset < FMT_SB_SIZE || sb->data_offset < sb->log_offset ||
				       sb->log_half > (sb->data_offset - sb->log_offset) / 2))
			bug("member %u accepted with a log region (offset %llu, half %llu) over its data at %llu",
			    i, (unsigned long long)sb->log_offset, (unsigned long long)sb->log_half,
			    (unsigned long long)sb->data_offset);
		if (fmt_has_log(i) && (sb->log_offset != ms[0].sb.log_offset ||
				       sb->log_half != ms[0].sb.log_half))
			bug("log members 0 and %u accepted with different log geometry (half %llu, %llu)", i,
			    (unsigned long long)ms[0].sb.log_half, (unsigned long long)sb->log_half);
		if (sb->stripe_unit != ms[0].sb.stripe_unit || sb->member_count != n)
			bug("member %u accepted with stripe unit %u or member count %u", i,
			    sb->stripe_unit, sb->member_count);
	}
}

struct mctx {
	struct meta *m;
	const char *stage;
	uint64_t max_ino;
	int cleaned;
};

static int check_inode(struct inode *ino, void *arg)
{
	struct mctx *c = arg;
	uint64_t su = c->m->stripe_unit;
	size_t xb = 0;

	if (ino->ino == 0 || ino->h.key != ino->ino || ino->a.start_member >= c->m->nmembers)
		bug("%s: inode %llu with key %llu, start member %u", c->stage,
		    (unsigned long long)ino->ino, (unsigned long long)ino->h.key, ino->a.start_member);
	c->max_ino = MAX(c->max_ino, ino->ino);
	if (ino->next && !S_ISREG(ino->a.mode))
		bug("%s: inode %llu of mode %o has extents", c->stage, (unsigned long long)ino->ino,
		    ino->a.mode);
	if (ino->symlink && !S_ISLNK(ino->a.mode))
		bug("%s: inode %llu of mode %o has a symlink target", c->stage,
		    (unsigned long long)ino->ino, ino->a.mode);
	for (size_t k = 0; k < ino->next; k++) {
		const struct extent *e = &ino->ext[k];

		if (!e->len || e->len % DMAFS_BLOCK || e->off % DMAFS_BLOCK || e->moff % DMAFS_BLOCK ||
		    e->off + e->len < e->off || e->member >= c->m->nmembers ||
		    e->off / su != (e->off + e->len - 1) / su ||
		    e->member != meta_slot_member(c->m, ino, e->off / su) ||
		    (k + 1 < ino->next && e->off + e->len > ino->ext[k + 1].off))
			bug("%s: inode %llu extent %zu (off %llu len %u member %u moff %llu) misplaced, misaligned, wrapping or overlapping",
			    c->stage, (unsigned long long)ino->ino, k, (unsigned long long)e->off,
			    e->len, e->member, (unsigned long long)e->moff);
	}
	for (struct xattr *x = ino->xattrs; x; x = x->next) {
		xb += strlen(x->name) + x->len;
		for (struct xattr *y = x->next; y; y = y->next)
			if (!strcmp(x->name, y->name))
				bug("%s: inode %llu has xattr %s twice", c->stage,
				    (unsigned long long)ino->ino, x->name);
	}
	if (xb != ino->xattr_bytes)
		bug("%s: inode %llu xattr_bytes %zu, its xattrs hold %zu", c->stage,
		    (unsigned long long)ino->ino, ino->xattr_bytes, xb);
	if (ino->dir) {
		size_t live = 0, holes = 0;

		if (!S_ISDIR(ino->a.mode))
			bug("%s: inode %llu of mode %o has directory entries", c->stage,
			    (unsigned long long)ino->ino, ino->a.mode);
		for (size_t k = 0; k < ino->dir->nslots; k++) {
			struct dentry *de = ino->dir->slots[k];

			if (!de) {
				holes++;
				continue;
			}
			live++;
			if (de->slot != k || !de->namelen || de->namelen > FMT_NAME_MAX ||
			    strlen(de->name) != de->namelen || strchr(de->name, '/') ||
			    meta_lookup(ino, de->name, de->namelen) != de)
				bug("%s: directory %llu slot %zu ('%s') out of step with its names",
				    c->stage, (unsigned long long)ino->ino, k, de->name);
			if (c->cleaned && !meta_iget(c->m, de->ino))
				bug("%s: entry '%s' of directory %llu names missing inode %llu", c->stage,
				    de->name, (unsigned long long)ino->ino, (unsigned long long)de->ino);
		}
		if (live != ino->dir->count || holes != ino->dir->holes || live != ino->dir->names.n)
			bug("%s: directory %llu counts %zu entries, %zu holes, %zu names; slots hold %zu and %zu",
			    c->stage, (unsigned long long)ino->ino, ino->dir->count, ino->dir->holes,
			    ino->dir->names.n, live, holes);
	} else if (S_ISDIR(ino->a.mode)) {
		bug("%s: directory %llu without entry table", c->stage, (unsigned long long)ino->ino);
	}
	if (c->cleaned && ino->a.nlink == 0 && ino->ino != FMT_ROOT_INO &&
	    !(ino->dir && ino->dir->count))
		bug("%s: orphan inode %llu (nlink 0) left by meta_cleanup", c->stage,
		    (unsigned long long)ino->ino);
	return 0;
}

static void check_meta(struct meta *m, const char *stage, int cleaned)
{
	struct mctx c = { m, stage, 0, cleaned };

	meta_for_each(m, check_inode, &c);
	if (m->inodes.n && m->next_ino <= c.max_ino)
		bug("%s: next_ino %llu does not exceed inode %llu", stage,
		    (unsigned long long)m->next_ino, (unsigned long long)c.max_ino);
}

/* The extents of @ino from index *k as one run: contiguous pieces that replay would merge. */
static int next_run(const struct inode *ino, size_t *k, uint64_t su, struct extent *run)
{
	if (*k >= ino->next)
		return 0;
	*run = ino->ext[(*k)++];
	while (*k < ino->next) {
		const struct extent *e = &ino->ext[*k];

		if (e->off != run->off + run->len || e->moff != run->moff + run->len ||
		    e->member != run->member || e->off / su != run->off / su)
			break;
		run->len += e->len;
		(*k)++;
	}
	return 1;
}

struct eqctx {
	struct meta *b;
	const char *why;
	uint64_t ino;
};

static int same_inode(struct inode *x, void *arg)
{
	struct eqctx *c = arg;
	struct inode *y = meta_iget(c->b, x->ino);
	size_t kx = 0, ky = 0, nx = 0, ny = 0;
	struct extent ex, ey;
	int gx, gy;

	c->ino = x->ino;
	if (!y)
		return c->why = "inode missing", 1;
	if (x->a.mode != y->a.mode || x->a.uid != y->a.uid || x->a.gid != y->a.gid ||
	    x->a.nlink != y->a.nlink || x->a.rdev != y->a.rdev || x->a.size != y->a.size ||
	    x->a.atime != y->a.atime || x->a.mtime != y->a.mtime || x->a.ctime != y->a.ctime ||
	    x->a.start_member != y->a.start_member)
		return c->why = "attributes differ", 1;
	if (!x->symlink != !y->symlink || (x->symlink && strcmp(x->symlink, y->symlink)))
		return c->why = "symlink target differs", 1;
	for (;;) {
		gx = next_run(x, &kx, c->b->stripe_unit, &ex);
		gy = next_run(y, &ky, c->b->stripe_unit, &ey);
		if (gx != gy)
			return c->why = "extent count differs", 1;
		if (!gx)
			break;
		if (ex.off != ey.off || ex.len != ey.len || ex.member != ey.member || ex.moff != ey.moff)
			return c->why = "extent differs", 1;
	}
	for (struct xattr *a = x->xattrs; a; a = a->next, nx++) {
		struct xattr *b = y->xattrs;

		while (b && strcmp(a->name, b->name))
			b = b->next;
		if (!b || a->len != b->len || memcmp(a->val, b->val, a->len))
			return c->why = "xattr differs", 1;
	}
	for (struct xattr *b = y->xattrs; b; b = b->next)
		ny++;
	if (nx != ny)
		return c->why = "xattr count differs", 1;
	if (!x->dir != !y->dir)
		return c->why = "directory table differs", 1;
	if (x->dir) {
		size_t i = 0, j = 0;

		for (;;) {
			while (i < x->dir->nslots && !x->dir->slots[i])
				i++;
			while (j < y->dir->nslots && !y->dir->slots[j])
				j++;
			if ((i < x->dir->nslots) != (j < y->dir->nslots))
				return c->why = "entry count differs", 1;
			if (i == x->dir->nslots)
				break;
			if (x->dir->slots[i]->ino != y->dir->slots[j]->ino ||
			    strcmp(x->dir->slots[i]->name, y->dir->slots[j]->name))
				return c->why = "entry differs", 1;
			i++;
			j++;
		}
	}
	return 0;
}

/* NULL when @a and @b hold the same metadata, else what differs (and *ino where). */
static const char *state_diff(struct meta *a, struct meta *b, uint64_t *ino)
{
	struct eqctx c = { b, NULL, 0 };

	*ino = 0;
	if (meta_for_each(a, same_inode, &c)) {
		*ino = c.ino;
		return c.why;
	}
	c.b = a; /* every inode of a is in b: is there one more in b? */
	if (a->inodes.n != b->inodes.n && meta_for_each(b, same_inode, &c)) {
		*ino = c.ino;
		return "inode missing from the replayed state";
	}
	return a->inodes.n != b->inodes.n ? "inode count differs" : NULL;
}

/* ---------------------------------------------------------------- one input */

static int mark_extents(struct inode *ino, void *arg)
{
	for (size_t i = 0; i < ino->next; i++)
		if (alloc_mark_used(arg, ino->ext[i].member, ino->ext[i].moff, ino->ext[i].len))
			return -EUCLEAN;
	return 0;
}

static void quiet(const char *msg) { (void)msg; }

static int open_manual(unsigned n, int ro, struct member **out, char *err, size_t errlen)
{
	struct member *ms = calloc(MAXM, sizeof(*ms));
	char path[64];
	struct stat stb;
	unsigned i;
	int ret = 0;

	if (!ms)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd[i]);
		ms[i].path = strdup(path);
		ms[i].hold_fd = -1;
		ms[i].fd = open(path, ro ? O_RDONLY : O_RDWR);
		if (ms[i].fd < 0 || fstat(ms[i].fd, &stb))
			ret = -errno;
		ms[i].size = stb.st_size;
		ms[i].lbs = 512;
		if (!ret)
			ret = member_read_sb(&ms[i], err, errlen);
	}
	if (ret) {
		members_close(ms, i);
		return ret;
	}
	*out = ms;
	return n;
}

static int open_members(const struct img *im, int ro, struct member **ms, char *err, size_t len)
{
	char list[MAXM * 32] = "";

	if (!use_members_open)
		return open_manual(im->n, ro, ms, err, len);
	for (unsigned i = 0; i < im->n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s/proc/self/fd/%d",
			 i ? "," : "", mfd[i]);
	return members_open(list, ro, ms, err, len);
}

static void count_open_err(int ret, const char *err)
{
	static const int codes[] = { -ENODATA, -EBADMSG, -EPROTONOSUPPORT };

	if (ret == -EUCLEAN)
		st.open_err[strstr(err, "superblock fields") ? 3 : 4]++;
	else if (ret == -EXDEV)
		st.open_err[5]++;
	else if (ret == -EINVAL)
		st.open_err[6]++;
	else if (ret == -ENODEV)
		st.open_err[4]++;
	else
		st.open_err[err_ix(ret, 3, codes) == 3 ? 7 : err_ix(ret, 3, codes)]++;
}

static void count_jopen_err(int ret, const char *err)
{
	static const char *const keys[] = { "no valid log header", "snapshot length",
					    "snapshot checksum", "snapshot is inconsistent",
					    "batch", "no older generation", "read error" };
	unsigned k;

	if (ret == -ENOMEM) {
		st.jopen_err[7]++;
		return;
	}
	for (k = 0; k < 7; k++)
		if (strstr(err, keys[k]))
			break;
	st.jopen_err[k == 7 ? 8 : k]++;
	if (ret != -EUCLEAN && ret != -ENODATA && ret != -EIO)
		bug("journal_open returned %d (%s)", ret, err);
}

int verbose;

/* -v: what an input holds and what its mount did, to look at a finding. */
static void describe(const struct img *im)
{
	printf("image: %u members, log half %llu\n", im->n, (unsigned long long)im->half);
	for (unsigned i = 0; i < im->n; i++)
		for (int k = 0; k < 2; k++) {
			const struct fmt_sb *sb = &im->sb[i][k];

			printf("  member %u %s (%s): index %u count %u su %u size %llu (file %llu) log %llu+2*%llu data [%llu, %llu) csum %llu\n",
			       i, k ? "copy" : "primary",
			       im->sbstate[i][k] == SB_OK ? "ok" : im->sbstate[i][k] == SB_ABSENT ? "absent" : "bad checksum",
			       sb->member_index, sb->member_count, sb->stripe_unit,
			       (unsigned long long)sb->member_size, (unsigned long long)im->fsize[i],
			       (unsigned long long)sb->log_offset, (unsigned long long)sb->log_half,
			       (unsigned long long)sb->data_offset, (unsigned long long)sb->data_end,
			       (unsigned long long)sb->csum_offset);
		}
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++) {
			const struct half *hf = &im->log[c][h];

			if (!hf->present)
				continue;
			printf("  copy %d half %c: gen %llu first_seq %llu next_ino %llu snapshot %zu records (snap_len %+lld) bad %d uuid %d\n",
			       c, 'A' + h, (unsigned long long)hf->gen, (unsigned long long)hf->first_seq,
			       (unsigned long long)hf->next_ino, hf->snap.n, (long long)hf->sdelta, hf->bad,
			       hf->baduuid);
			for (size_t b = 0; b < hf->nb; b++)
				printf("    batch gen %llu seq %llu: %zu records (payload_len %+lld) bad %d\n",
				       (unsigned long long)hf->b[b].gen, (unsigned long long)hf->b[b].seq,
				       hf->b[b].recs.n, (long long)hf->b[b].pdelta, hf->b[b].bad);
		}
}

/* The mount sequence of fs_mount on the member images, with the invariants. Returns the
 * AT_* stage that stopped it. */
int run_one(const struct img *im, int ro, int older)
{
	struct member *ms = NULL;
	struct meta m, m2;
	struct journal j;
	struct alloc a;
	struct buf snap = { 0 };
	uint64_t start[MAXM], end[MAXM], ino;
	char err[1024] = "";
	const char *why;
	int n, ret, mountable, at = AT_JOURNAL;

	st.inputs++;
	write_images(im);
	st.sabotaged += sabotaged;
	counting = 1;
	replay_seen = 0;
	n = open_members(im, ro, &ms, err, sizeof(err));
	if (verbose) {
		describe(im);
		printf("members_open: %d %s\n", n, n < 0 ? err : "");
	}
	if (n < 0) {
		counting = 0;
		count_open_err(n, err);
		return AT_MEMBERS;
	}
	st.open_ok++;
	check_sbs(ms, n);
	if (meta_init(&m, ms[0].sb.stripe_unit, n))
		exit(2);
	ret = journal_open(&j, ms, n, &m, ro, older, err, sizeof(err));
	counting = 0;
	st.gate += replay_seen;
	if (ret) {
		count_jopen_err(ret, err);
		goto out_meta;
	}
	st.jopen_ok++;
	at = AT_MOUNT_CHECKS;
	if (verbose)
		printf("journal_open: copy %d half %c gen %llu next_seq %llu tail %llu, %zu inodes\n",
		       j.copy_ok[0] && !j.copy_differs[0] ? 0 : 1, 'A' + j.active,
		       (unsigned long long)j.gen, (unsigned long long)j.next_seq,
		       (unsigned long long)j.tail, m.inodes.n);
	st.copy_damaged += (j.ncopies > 1 && (!j.copy_ok[0] || !j.copy_ok[1]));
	st.older += j.recovered_older;
	if (j.tail > j.half || j.tail % DMAFS_BLOCK)
		bug("journal_open left the log tail at %llu in a half of %llu",
		    (unsigned long long)j.tail, (unsigned long long)j.half);
	check_meta(&m, "replay", 0);
	if (!meta_iget(&m, FMT_ROOT_INO)) {
		st.no_root++;
		goto out_meta;
	}
	if (!ro) {
		ret = meta_cleanup(&m, quiet);
		if (ret < 0 && ret != -ENOMEM)
			bug("meta_cleanup returned %d", ret);
		st.cleaned += ret > 0;
		check_meta(&m, "cleanup", 1);
	}
	for (int i = 0; i < n; i++) {
		start[i] = ms[i].sb.data_offset;
		end[i] = ms[i].sb.data_end;
	}
	if (alloc_init(&a, n, start, end))
		exit(2);
	mountable = meta_for_each(&m, mark_extents, &a) == 0;
	st.bad_extent += !mountable;
	st.mountable += mountable;
	if (mountable)
		at = AT_MOUNTED;

	/* What compaction writes (a snapshot of this state) must replay to this state. */
	if (meta_snapshot(&m, &snap) == 0 && meta_init(&m2, m.stripe_unit, n) == 0) {
		size_t pos = 0;
		struct fmt_rec r;

		while ((ret = fmt_rec_decode(snap.p, snap.len, &pos, &r)) > 0)
			if ((ret = meta_apply(&m2, &r)))
				break;
		if (ret)
			bug("the snapshot of a replayed state does not replay: %s at byte %zu",
			    strerror(-ret), pos);
		else if ((why = state_diff(&m, &m2, &ino)))
			bug("the snapshot of a replayed state replays to another state: inode %llu: %s",
			    (unsigned long long)ino, why);
		meta_destroy(&m2);
	}
	buf_free(&snap);

	if (!ro && mountable) {
		struct journal j2;

		m.alloc = &a;
		ret = journal_compact(&j);
		m.alloc = NULL;
		if (ret == -ENOSPC) {
			st.compact_nospc++;
		} else if (ret == -EOVERFLOW) {
			st.compact_gen++; /* fs_mount fails here */
			at = AT_COMPACTION;
		} else if (ret) {
			bug("journal_compact of a mountable state failed: %s", strerror(-ret));
		} else {
			st.compacted++;
			if (meta_init(&m2, m.stripe_unit, n))
				exit(2);
			ret = journal_open(&j2, ms, n, &m2, 1, 0, err, sizeof(err));
			if (ret)
				bug("the log written by compaction does not replay: %s", err);
			else if ((why = state_diff(&m, &m2, &ino)))
				bug("the log written by compaction replays to another state: inode %llu: %s",
				    (unsigned long long)ino, why);
			else if (m2.next_ino != m.next_ino)
				bug("compaction kept next_ino %llu, replay of it gives %llu",
				    (unsigned long long)m.next_ino, (unsigned long long)m2.next_ino);
			else
				st.reopened++;
			meta_destroy(&m2);
			buf_free(&j2.pending);
		}
	}
	alloc_destroy(&a);
out_meta:
	buf_free(&j.pending);
	meta_destroy(&m);
	members_close(ms, n);
	return at;
}
