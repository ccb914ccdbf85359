// SPDX-License-Identifier: MIT
/*
 * Description: structure-aware fuzz run of the metadata a mount reads, built with
 * AddressSanitizer and UndefinedBehaviorSanitizer: superblocks (primary and copy), both
 * halves of both log copies, their snapshots, batches and records. Each input is one of the
 * built-in filesystem images (made with the fmt_*_encode functions and meta_snapshot) whose
 * fields are set to boundary values and to values of other fields (counts, lengths, offsets,
 * inode numbers, extents, names, sequence numbers, record types, geometry), whose records
 * are spliced, duplicated and reordered, and whose checksums are then all computed again
 * with the format's own encoders, so that the input gets past the checksums to the checks
 * behind them. Every input goes through the mount sequence of fs_mount: members_open,
 * journal_open (replay through fmt_rec_decode and meta_apply), the root check, meta_cleanup,
 * the extent check (alloc_mark_used), a compaction and journal_open again. A crash, a
 * sanitizer report or a broken invariant fails the run:
 *   - an accepted superblock keeps its regions inside the member and apart from each
 *     other, and accepted log members agree on the log geometry;
 *   - a replayed state is well formed (extents sorted, block aligned, not wrapping, on their
 *     stripe unit's member; directory slots and names in step; xattr byte counts; next_ino
 *     beyond every inode number);
 *   - after meta_cleanup no directory entry names a missing inode;
 *   - meta_snapshot of the state replays to the same state, in memory and through a
 *     compaction written to the log and replayed by journal_open.
 * Before the mutated inputs come the built-in images as they are (each must mount) and the
 * regression inputs: inputs that once broke an invariant, each of which must now stop at a
 * given check. It ends with counters of how far the inputs got and which check stopped them.
 *
 * Usage: fuzz_meta [-kv] [-n N] [-s SEED] [-i INDEX [-d DIR]]
 *   -n N      number of inputs (default 3000)
 *   -s SEED   seed of the run; input INDEX is the same in every run with the same seed
 *   -i INDEX  run input INDEX only, to look at a finding again
 *   -d DIR    with -i: also write the member images as DIR/member-K.img (dmafs-fsck reads them)
 *   -k        report broken invariants and go on; exit 1 at the end
 *   -v        describe each input and what journal_open made of it
 * The member images are memfds, opened by members_open through /proc/self/fd (O_DIRECT on
 * tmpfs needs Linux 6.6; before it the superblocks are read with member_read_sb instead and
 * the member set checks are not run, which the run says). tests/fuzz_meta.sh runs it.
 *
 * The counters of the calls that replay makes come from wrappers that the link puts around
 * fmt_sb_decode, fmt_loghdr_decode, fmt_txhdr_decode, fmt_rec_decode and meta_apply
 * (ld --wrap, tests/robust.am), so they count what the real code reached, with no hook in fs/.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/alloc.h"
#include "format/format.h"
#include "store/journal.h"
#include "io/member.h"
#include "store/meta.h"
#include "util/util.h"

#define MAXM 4		  /* members given to a fuzzed mount */
#define MAXREC 1024	  /* records in one list (snapshot or batch payload) */
#define MAXBATCH 96	  /* batches in one half */
#define NTYPES 12	  /* record types 0..10, and 11 for any other */

/* ---------------------------------------------------------------- the image model */

/* One record as the log holds it: type, body, and how far body_len lies about the body. */
struct frec {
	uint16_t type;
	int64_t ldelta;
	size_t blen;
	uint8_t *body;
};

struct rlist {
	struct frec *r;
	size_t n, cap;
};

struct batch {
	uint64_t gen, seq;
	int64_t pdelta; /* payload_len minus the real payload length */
	int bad;	/* 1: payload checksum broken on purpose, 2: header checksum */
	struct rlist recs;
};

struct half {
	int present;
	int bad;     /* 1: snapshot checksum broken on purpose, 2: header checksum */
	int baduuid; /* header names another filesystem */
	uint64_t gen, first_seq, next_ino;
	int64_t sdelta; /* snap_len minus the real snapshot length */
	struct rlist snap;
	struct batch *b;
	size_t nb;
};

enum { SB_OK, SB_ABSENT, SB_BADSUM };

struct img {
	unsigned n;    /* members given to members_open */
	uint64_t half; /* log half the logs are laid out with */
	uint64_t fsize[MAXM];
	struct fmt_sb sb[MAXM][2]; /* primary, copy */
	int sbstate[MAXM][2];
	struct half log[2][2]; /* copy (member 0, member 1), half (A, B) */
};

static void rl_free(struct rlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->r[i].body);
	free(l->r);
	memset(l, 0, sizeof(*l));
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "fuzz_meta: out of memory\n");
		exit(2);
	}
	return p;
}

/* Insert a copy of @r (which may be in @l) at @at (clamped). Lists stop at MAXREC. */
static void rl_insert(struct rlist *l, size_t at, const struct frec *r)
{
	struct frec c = *r;

	if (l->n >= MAXREC)
		return;
	c.body = xrealloc(NULL, c.blen);
	memcpy(c.body, r->body, c.blen);
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->r = xrealloc(l->r, l->cap * sizeof(*l->r));
	}
	at = MIN(at, l->n);
	memmove(&l->r[at + 1], &l->r[at], (l->n - at) * sizeof(*l->r));
	l->r[at] = c;
	l->n++;
}

static void rl_remove(struct rlist *l, size_t at)
{
	free(l->r[at].body);
	memmove(&l->r[at], &l->r[at + 1], (l->n - at - 1) * sizeof(*l->r));
	l->n--;
}

static void rl_clone(struct rlist *d, const struct rlist *s)
{
	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < s->n; i++)
		rl_insert(d, d->n, &s->r[i]);
}

/* Split encoded records (as fmt_rec_encode wrote them) into a list. */
static void rl_from(struct rlist *l, const uint8_t *p, size_t len)
{
	size_t pos = 0;

	while (pos + 6 <= len) {
		struct frec r = { get_u16(p + pos), 0, get_u32(p + pos + 2), (uint8_t *)p + pos + 6 };

		rl_insert(l, l->n, &r);
		pos += 6 + r.blen;
	}
}

static size_t rl_bytes(const struct rlist *l)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += 6 + l->r[i].blen;
	return n;
}

/* Encode the list at @dst, writing no more than @room bytes; returns the full length. */
static size_t rl_encode(const struct rlist *l, uint8_t *dst, size_t room)
{
	size_t pos = 0;

	for (size_t i = 0; i < l->n; i++) {
		const struct frec *r = &l->r[i];
		uint8_t h[6];

		put_u16(h, r->type);
		put_u32(h + 2, (uint32_t)(r->blen + (uint64_t)r->ldelta));
		for (size_t k = 0; k < 6; k++, pos++)
			if (pos < room)
				dst[pos] = h[k];
		if (pos < room)
			memcpy(dst + pos, r->body, MIN(r->blen, room - pos));
		pos += r->blen;
	}
	return pos;
}

static void half_free(struct half *h)
{
	rl_free(&h->snap);
	for (size_t i = 0; i < h->nb; i++)
		rl_free(&h->b[i].recs);
	free(h->b);
	memset(h, 0, sizeof(*h));
}

static void half_clone(struct half *d, const struct half *s)
{
	*d = *s;
	rl_clone(&d->snap, &s->snap);
	d->b = xrealloc(NULL, MAXBATCH * sizeof(*d->b));
	for (size_t i = 0; i < s->nb; i++) {
		d->b[i] = s->b[i];
		rl_clone(&d->b[i].recs, &s->b[i].recs);
	}
}

static void img_free(struct img *im)
{
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++)
			half_free(&im->log[c][h]);
}

static void img_clone(struct img *d, const struct img *s)
{
	*d = *s;
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++)
			half_clone(&d->log[c][h], &s->log[c][h]);
}

/* ---------------------------------------------------------------- counters and findings */

static int keep_going;
static unsigned long findings;
static unsigned long long cur_seed, cur_index;
static const char *cur_what; /* a seed or regression input rather than a mutated one */

static void bug(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_meta: broken invariant: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cur_what)
		fprintf(stderr, "\nfuzz_meta: %s\n", cur_what);
	else
		fprintf(stderr, "\nfuzz_meta: input %llu of seed %llu; again with: fuzz_meta -s %llu -i %llu\n",
			cur_index, cur_seed, cur_seed, cur_index);
	if (!keep_going)
		abort();
	findings++;
}

static struct {
	unsigned long inputs, sabotaged, open_ok, sb_gate, gate, jopen_ok, copy_damaged, older;
	unsigned long no_root, bad_extent, mountable, cleaned, compacted, compact_nospc, reopened;
	unsigned long compact_gen;
	unsigned long open_err[8], jopen_err[9];
	unsigned long sb[5], lh[3], tx[3], buffers;
	unsigned long dec_ok[NTYPES], dec_bad[NTYPES], app_ok[NTYPES], app_bad[NTYPES];
} st;

/* Which members_open rejection, by the check that made it. */
static const char *const open_why[8] = {
	"no superblock (magic)", "superblock checksum", "format version", "superblock fields",
	"member set (uuid, index, count, geometry, size)", "another filesystem", "member order",
	"read error (member shorter than its superblock) or other"
};
static const char *const jopen_why[9] = {
	"no valid log header", "snapshot length", "snapshot checksum", "snapshot record",
	"batch record", "no older generation", "read error", "out of memory", "other"
};
static const char *const tname[NTYPES] = {
	"type 0", "INODE", "SYMLINK", "EXTENT", "TRUNC", "IDEL", "LINK", "UNLINK", "XSET", "XDEL",
	"PUNCH", "unknown"
};

/* Counting is on only while members_open and the first journal_open of an input run. */
static int counting, replay_seen;

static unsigned tix(unsigned t) { return t < NTYPES - 1 ? t : NTYPES - 1; }

static int err_ix(int ret, int n, const int *codes)
{
	for (int i = 0; i < n; i++)
		if (ret == codes[i])
			return i;
	return n;
}

int __real_fmt_sb_decode(const uint8_t buf[FMT_SB_SIZE], struct fmt_sb *sb);
int __wrap_fmt_sb_decode(const uint8_t buf[FMT_SB_SIZE], struct fmt_sb *sb);
int __wrap_fmt_sb_decode(const uint8_t buf[FMT_SB_SIZE], struct fmt_sb *sb)
{
	static const int codes[] = { 0, -ENODATA, -EBADMSG, -EPROTONOSUPPORT };
	int ret = __real_fmt_sb_decode(buf, sb);

	if (counting)
		st.sb[err_ix(ret, 4, codes)]++;
	if (ret && ret != -ENODATA && ret != -EBADMSG && ret != -EPROTONOSUPPORT && ret != -EUCLEAN)
		bug("fmt_sb_decode returned %d", ret);
	return ret;
}

int __real_fmt_loghdr_decode(const uint8_t buf[DMAFS_BLOCK], struct fmt_loghdr *h);
int __wrap_fmt_loghdr_decode(const uint8_t buf[DMAFS_BLOCK], struct fmt_loghdr *h);
int __wrap_fmt_loghdr_decode(const uint8_t buf[DMAFS_BLOCK], struct fmt_loghdr *h)
{
	static const int codes[] = { 0, -ENODATA };
	int ret = __real_fmt_loghdr_decode(buf, h);

	if (counting)
		st.lh[err_ix(ret, 2, codes)]++;
	if (ret && ret != -ENODATA && ret != -EBADMSG)
		bug("fmt_loghdr_decode returned %d", ret);
	return ret;
}

int __real_fmt_txhdr_decode(const uint8_t buf[FMT_TX_HDR], struct fmt_txhdr *h);
int __wrap_fmt_txhdr_decode(const uint8_t buf[FMT_TX_HDR], struct fmt_txhdr *h);
int __wrap_fmt_txhdr_decode(const uint8_t buf[FMT_TX_HDR], struct fmt_txhdr *h)
{
	static const int codes[] = { 0, -ENODATA };
	int ret = __real_fmt_txhdr_decode(buf, h);

	if (counting)
		st.tx[err_ix(ret, 2, codes)]++;
	if (ret && ret != -ENODATA && ret != -EBADMSG)
		bug("fmt_txhdr_decode returned %d", ret);
	return ret;
}

int __real_fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r);
int __wrap_fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r);
int __wrap_fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r)
{
	size_t at = *pos;
	unsigned t = at + 2 <= len ? tix(get_u16(buf + at)) : NTYPES - 1;
	int ret = __real_fmt_rec_decode(buf, len, pos, r);

	if (ret > 0 && (*pos <= at || *pos > len || (r->name_len && (r->name < buf ||
	    r->name + r->name_len > buf + len)) || (r->val_len && (r->val < buf ||
	    r->val + r->val_len > buf + len))))
		bug("fmt_rec_decode of type %u at %zu: position %zu or name/value outside the buffer of %zu",
		    t, at, *pos, len);
	if (ret < 0 && ret != -EBADMSG)
		bug("fmt_rec_decode returned %d", ret);
	if (ret > 0 && *pos - at - 6 > UINT32_MAX)
		bug("fmt_rec_decode consumed more than a body can hold");
	if (!counting)
		return ret;
	replay_seen = 1;
	if (at == 0)
		st.buffers++;
	if (ret > 0)
		st.dec_ok[t]++;
	else if (ret < 0)
		st.dec_bad[t]++;
	return ret;
}

int __real_meta_apply(struct meta *m, const struct fmt_rec *r);
int __wrap_meta_apply(struct meta *m, const struct fmt_rec *r);
int __wrap_meta_apply(struct meta *m, const struct fmt_rec *r)
{
	int ret = __real_meta_apply(m, r);

	if (ret && ret != -EUCLEAN && ret != -ENOMEM)
		bug("meta_apply of type %u returned %d", r->type, ret);
	if (counting)
		(ret ? st.app_bad : st.app_ok)[tix(r->type)]++;
	return ret;
}

/* ---------------------------------------------------------------- random values */

static uint64_t rs;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) | 1;
}

/* Values of the input's own fields, so that a mutation can make two fields agree. */
static uint64_t pool[512];
static size_t npool;

static void pool_add(uint64_t v)
{
	if (npool < sizeof(pool) / sizeof(pool[0]))
		pool[npool++] = v;
}

static const uint64_t edges[] = {
	2, 3, 4, 7, 8, 63, 64, 65, 255, 256, 4095, 4096, 4097, 8192, 65535, 65536, 65537,
	1 << 20, (1 << 20) + 4096, (1 << 20) - 4096, 64ull << 20, (64ull << 20) - 4096,
	64ull << 10, 32ull << 10, 128ull << 10, 0x7fffffff, 0x80000000, 0xfffff000, 1ull << 32,
	(1ull << 32) - 4096, 1ull << 62, 1ull << 63, (1ull << 63) - 4096, UINT64_MAX - 4095,
	INT64_MAX, (uint64_t)INT64_MIN,
};

/* An interesting value for a field of @bytes bytes that holds @cur. */
static uint64_t pick(uint64_t cur, unsigned bytes)
{
	uint64_t max = bytes >= 8 ? UINT64_MAX : (1ull << (8 * bytes)) - 1, v;
	static const int64_t small[] = { 0, 0, 0, 1, -1, 4096, -4096 };

	switch (rnd() % 17) {
	case 16: /* minus another field: their sum wraps to exactly 0 */
		v = 0 - (npool ? pool[rnd() % npool] : cur);
		break;
	case 0: v = 0; break;
	case 1: v = 1; break;
	case 2: v = max; break;
	case 3: v = max - 1; break;
	case 4: v = cur + 1; break;
	case 5: v = cur - 1; break;
	case 6: v = cur + DMAFS_BLOCK; break;
	case 7: v = cur - DMAFS_BLOCK; break;
	case 8: v = rnd() % 2 ? cur * 2 : cur / 2; break;
	case 9: case 10: v = edges[rnd() % (sizeof(edges) / sizeof(edges[0]))]; break;
	case 11: case 12: case 13: case 14:
		v = npool ? pool[rnd() % npool] : cur;
		v += (uint64_t)small[rnd() % (sizeof(small) / sizeof(small[0]))];
		break;
	default: v = rnd(); break;
	}
	return v & max;
}

static void put_n(uint8_t *p, unsigned bytes, uint64_t v)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_n(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = bytes; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* ---------------------------------------------------------------- record knowledge */

/* Fixed body bytes of each type (format.c's table; names and values follow). */
static size_t fixed_of(uint16_t t)
{
	static const size_t f[NTYPES] = { 0, 68, 8, 32, 16, 8, 16, 8, 10, 8, 24, 0 };

	return f[tix(t)];
}

static int has_name(uint16_t t)
{
	return t == REC_LINK || t == REC_UNLINK || t == REC_SYMLINK || t == REC_XSET ||
	       t == REC_XDEL;
}

struct field {
	uint8_t off, bytes;
};

/* The numeric fields of a record body, by type; fields[t][0] is the inode number. */
static const struct field fields[NTYPES][12] = {
	[REC_INODE] = { { 0, 8 }, { 8, 4 }, { 12, 4 }, { 16, 4 }, { 20, 4 }, { 24, 8 }, { 32, 8 },
			{ 40, 8 }, { 48, 8 }, { 56, 8 }, { 64, 4 } },
	[REC_SYMLINK] = { { 0, 8 } },
	[REC_EXTENT] = { { 0, 8 }, { 8, 8 }, { 16, 4 }, { 20, 4 }, { 24, 8 } },
	[REC_TRUNC] = { { 0, 8 }, { 8, 8 } },
	[REC_IDEL] = { { 0, 8 } },
	[REC_LINK] = { { 0, 8 }, { 8, 8 } },
	[REC_UNLINK] = { { 0, 8 } },
	[REC_XSET] = { { 0, 8 }, { 8, 2 } },
	[REC_XDEL] = { { 0, 8 } },
	[REC_PUNCH] = { { 0, 8 }, { 8, 8 }, { 16, 8 } },
};

static size_t nfields(uint16_t t)
{
	size_t n = 0;

	while (n < 12 && fields[tix(t)][n].bytes)
		n++;
	return n;
}

static void pool_rec(const struct frec *r)
{
	size_t nf = nfields(r->type);

	for (size_t i = 0; i < nf; i++)
		if (fields[tix(r->type)][i].off + fields[tix(r->type)][i].bytes <= r->blen)
			pool_add(get_n(r->body + fields[tix(r->type)][i].off,
				       fields[tix(r->type)][i].bytes));
}

static void pool_img(const struct img *im)
{
	npool = 0;
	pool_add(im->n);
	pool_add(im->n + 1);
	pool_add(im->sb[0][0].stripe_unit);
	for (unsigned i = 0; i < im->n; i++) {
		const struct fmt_sb *sb = &im->sb[i][0];

		pool_add(sb->member_size);
		pool_add(sb->data_offset);
		pool_add(sb->data_end);
		pool_add(sb->csum_offset);
		pool_add(sb->log_half);
		pool_add(im->fsize[i]);
	}
	for (int h = 0; h < 2; h++) {
		const struct half *hf = &im->log[0][h];

		pool_add(hf->gen);
		pool_add(hf->first_seq);
		pool_add(hf->next_ino);
		for (size_t i = 0; i < hf->snap.n && npool < 400; i += 1 + rnd() % 3)
			pool_rec(&hf->snap.r[i]);
		for (size_t b = 0; b < hf->nb; b++)
			for (size_t i = 0; i < hf->b[b].recs.n && npool < 500; i++)
				pool_rec(&hf->b[b].recs.r[i]);
	}
}

/* ---------------------------------------------------------------- mutations */

/* Every record list of one log copy, to pick from. */
static size_t lists_of(struct img *im, int c, struct rlist **out)
{
	size_t n = 0;

	for (int h = 0; h < 2; h++) {
		struct half *hf = &im->log[c][h];

		if (!hf->present)
			continue;
		out[n++] = &hf->snap;
		for (size_t b = 0; b < hf->nb; b++)
			out[n++] = &hf->b[b].recs;
	}
	return n;
}

/* A record of copy @c, or NULL; *lp gets its list. */
static struct frec *pick_rec(struct img *im, int c, struct rlist **lp)
{
	struct rlist *ls[2 + 2 * MAXBATCH];
	size_t n = lists_of(im, c, ls), tot = 0, k;

	for (size_t i = 0; i < n; i++)
		tot += ls[i]->n;
	if (!tot)
		return NULL;
	k = rnd() % tot;
	for (size_t i = 0; i < n; i++) {
		if (k < ls[i]->n) {
			*lp = ls[i];
			return &ls[i]->r[k];
		}
		k -= ls[i]->n;
	}
	return NULL;
}

static const uint32_t modes[] = {
	S_IFREG | 0644, S_IFDIR | 0755, S_IFLNK | 0777, S_IFCHR | 0600, S_IFBLK | 0600,
	S_IFIFO | 0600, S_IFSOCK | 0755, 0, 0170000, S_IFREG | 07777, S_IFDIR | 010000, 0xffffffff,
	S_IFREG, 0644
};

static void mut_field(struct frec *r)
{
	size_t nf = nfields(r->type), i;
	struct field f;
	uint64_t cur;

	if (!nf)
		return;
	/* the inode number is one field among many; pick it less often than the rest */
	i = nf > 1 && rnd() % 4 ? 1 + rnd() % (nf - 1) : 0;
	f = fields[tix(r->type)][i];
	if (f.off + f.bytes > r->blen)
		return;
	cur = get_n(r->body + f.off, f.bytes);
	if (r->type == REC_INODE && f.off == 8 && rnd() % 2)
		cur = modes[rnd() % (sizeof(modes) / sizeof(modes[0]))];
	else if ((r->type == REC_INODE && f.off == 64) || (r->type == REC_EXTENT && f.off == 20))
		cur = rnd() % 2 ? rnd() % (MAXM + 2) : pick(cur, f.bytes); /* members */
	else
		cur = pick(cur, f.bytes);
	put_n(r->body + f.off, f.bytes, cur);
}

/* Resize a body to @len, filling new bytes with name-like bytes. */
static void body_resize(struct frec *r, size_t at, size_t oldn, size_t newn)
{
	size_t len = r->blen - oldn + newn;
	uint8_t *b = xrealloc(NULL, len);

	memcpy(b, r->body, at);
	for (size_t i = 0; i < newn; i++)
		b[at + i] = i < oldn ? r->body[at + i] : (uint8_t)('a' + (at + i) % 26);
	memcpy(b + at + newn, r->body + at + oldn, r->blen - at - oldn);
	free(r->body);
	r->body = b;
	r->blen = len;
}

static void mut_name(struct img *im, int c, struct frec *r)
{
	static const size_t lens[] = { 0, 1, 2, 254, 255, 256, 4094, 4095, 4096, 65535, 65536,
				       65537 };
	size_t fl = fixed_of(r->type), at = fl, nl;
	struct rlist *ol;
	struct frec *o;

	if (!has_name(r->type) || r->blen < fl)
		return;
	nl = r->blen - fl;
	if (r->type == REC_XSET)
		nl = MIN(get_u16(r->body + 8), r->blen - fl);
	switch (rnd() % 6) {
	case 0: { /* length to a boundary */
		size_t want = rnd() % 3 ? lens[rnd() % 9] : nl + (rnd() % 3) - 1;

		body_resize(r, at, nl, MIN(want, 65535));
		if (r->type == REC_XSET && rnd() % 4)
			put_u16(r->body + 8, MIN(want, 65535));
		break;
	}
	case 1: /* XSET value length to a boundary */
		if (r->type == REC_XSET)
			body_resize(r, at + nl, r->blen - at - nl, lens[rnd() % 12]);
		break;
	case 2: /* a byte a name may not hold */
		if (nl)
			r->body[at + rnd() % nl] = "/\0\377."[rnd() % 4];
		break;
	case 3: { /* "." or ".." */
		size_t dots = 1 + rnd() % 2;

		body_resize(r, at, nl, dots);
		memset(r->body + at, '.', dots);
		if (r->type == REC_XSET)
			put_u16(r->body + 8, dots);
		break;
	}
	default: /* the name of another record: two entries or xattrs with one name */
		o = pick_rec(im, c, &ol);
		if (o && o != r && has_name(o->type) && o->blen > fixed_of(o->type)) {
			size_t ofl = fixed_of(o->type), onl = o->blen - ofl;
			uint8_t *name;

			if (o->type == REC_XSET)
				onl = MIN(get_u16(o->body + 8), onl);
			name = xrealloc(NULL, onl);
			memcpy(name, o->body + ofl, onl);
			body_resize(r, at, nl, onl);
			memcpy(r->body + at, name, onl);
			if (r->type == REC_XSET)
				put_u16(r->body + 8, onl);
			free(name);
		}
		break;
	}
}

static void mut_header(struct frec *r)
{
	size_t fl = fixed_of(r->type);

	switch (rnd() % 4) {
	case 0: /* type confusion: another type over the same body */
		r->type = rnd() % 8 ? 1 + rnd() % 10 : (uint16_t)pick(r->type, 2);
		break;
	case 1:
		r->ldelta = (int64_t[]){ -1, 1, 6, -6 }[rnd() % 4];
		break;
	case 2: /* body_len just under the fixed part, or zero */
		r->ldelta = rnd() % 2 ? (int64_t)fl - (int64_t)r->blen - 1 : -(int64_t)r->blen;
		break;
	default:
		r->ldelta = (int64_t)(pick(r->blen, 4) - r->blen);
		break;
	}
}

/* A new record of any type, its fields taken from the pool. */
static void new_rec(struct frec *r, uint8_t *store)
{
	r->type = 1 + rnd() % 10;
	r->ldelta = 0;
	r->blen = fixed_of(r->type) + (has_name(r->type) ? 1 + rnd() % 12 : 0);
	r->body = store;
	memset(store, 0, r->blen);
	for (size_t i = 0; i < nfields(r->type); i++) {
		struct field f = fields[r->type][i];

		put_n(store + f.off, f.bytes, pick(0, f.bytes));
	}
	if (r->type == REC_INODE)
		put_u32(store + 8, modes[rnd() % 7]);
	if (has_name(r->type)) {
		for (size_t i = fixed_of(r->type); i < r->blen; i++)
			store[i] = 'a' + rnd() % 4;
		if (r->type == REC_XSET)
			put_u16(store + 8, 1 + rnd() % (r->blen - fixed_of(r->type)));
	}
}

static const struct img *donors;
static size_t ndonors;

static void mut_list(struct img *im, int c)
{
	struct rlist *ls[2 + 2 * MAXBATCH], *l, *l2;
	size_t n = lists_of(im, c, ls), i, j;
	struct frec *r, nr;
	uint8_t store[128];

	if (!n)
		return;
	l = ls[rnd() % n];
	l2 = ls[rnd() % n];
	switch (rnd() % 7) {
	case 0: /* duplicate a record, next to it or anywhere */
		if (l->n) {
			i = rnd() % l->n;
			rl_insert(l, rnd() % 2 ? i + 1 : rnd() % (l->n + 1), &l->r[i]);
		}
		break;
	case 1:
		if (l->n)
			rl_remove(l, rnd() % l->n);
		break;
	case 2: /* reorder */
		if (l->n > 1) {
			struct frec t;

			i = rnd() % l->n;
			j = rnd() % 2 && i + 1 < l->n ? i + 1 : rnd() % l->n;
			t = l->r[i];
			l->r[i] = l->r[j];
			l->r[j] = t;
		}
		break;
	case 3: /* move a record into another list (snapshot <-> batch, batch -> batch) */
		if (l->n) {
			i = rnd() % l->n;
			rl_insert(l2, rnd() % (l2->n + 1), &l->r[i]);
			if (l2 != l)
				rl_remove(l, i);
		}
		break;
	case 4: { /* splice a record from another image */
		const struct img *d = &donors[rnd() % ndonors];
		struct img *dd = (struct img *)d; /* pick_rec does not change the image */
		struct rlist *dl;

		r = pick_rec(dd, 0, &dl);
		if (r)
			rl_insert(l, rnd() % (l->n + 1), r);
		break;
	}
	case 5: /* a run of records copied from the other list */
		if (l2->n && l2 != l) {
			i = rnd() % l2->n;
			for (j = i; j < l2->n && j < i + 1 + rnd() % 8; j++)
				rl_insert(l, l->n, &l2->r[j]);
		}
		break;
	default:
		new_rec(&nr, store);
		rl_insert(l, rnd() % (l->n + 1), &nr);
		break;
	}
}

static struct half *pick_half(struct img *im, int c)
{
	struct half *a = &im->log[c][0], *b = &im->log[c][1];

	if (a->present && b->present)
		return rnd() % 2 ? a : b;
	return b->present ? b : a;
}

static void renumber(struct half *h)
{
	for (size_t i = 0; i < h->nb; i++) {
		h->b[i].seq = h->first_seq + i;
		h->b[i].gen = h->gen;
	}
}

static void mut_batch(struct img *im, int c)
{
	struct half *h = pick_half(im, c);
	struct batch *b;
	size_t i;

	if (!h->nb) {
		h->b[0] = (struct batch){ h->gen, h->first_seq, 0, 0, { 0 } };
		h->nb = 1;
		return;
	}
	i = rnd() % h->nb;
	b = &h->b[i];
	switch (rnd() % 10) {
	case 0: b->gen = rnd() % 2 ? pick(b->gen, 8) : h->gen + (rnd() % 3) - 1; break;
	case 1: b->seq = rnd() % 2 ? pick(b->seq, 8) : b->seq + (rnd() % 3) - 1; break;
	case 2: b->pdelta = rnd() % 2 ? (int64_t[]){ -1, 1, 4096, -6 }[rnd() % 4]
				      : (int64_t)(pick(rl_bytes(&b->recs), 4) - rl_bytes(&b->recs));
		break;
	case 3: b->bad = rnd() % 4 == 0 ? 1 + rnd() % 2 : 0; break;
	case 4: /* drop a batch; half the time the chain is renumbered to stay whole */
		rl_free(&b->recs);
		memmove(b, b + 1, (h->nb - i - 1) * sizeof(*b));
		h->nb--;
		if (rnd() % 2)
			renumber(h);
		break;
	case 5: /* duplicate or split a batch */
		if (h->nb < MAXBATCH) {
			memmove(b + 1, b, (h->nb - i) * sizeof(*b));
			h->nb++;
			rl_clone(&b[1].recs, &b[0].recs);
			if (rnd() % 2) { /* split: the first keeps the head, the second the tail */
				size_t cut = b->recs.n ? rnd() % (b->recs.n + 1) : 0;

				while (b[0].recs.n > cut)
					rl_remove(&b[0].recs, b[0].recs.n - 1);
				for (size_t k = 0; k < cut && b[1].recs.n; k++)
					rl_remove(&b[1].recs, 0);
			}
			if (rnd() % 3)
				renumber(h);
		}
		break;
	case 6: /* merge with the next */
		if (i + 1 < h->nb) {
			for (size_t k = 0; k < b[1].recs.n; k++)
				rl_insert(&b->recs, b->recs.n, &b[1].recs.r[k]);
			rl_free(&b[1].recs);
			memmove(b + 1, b + 2, (h->nb - i - 2) * sizeof(*b));
			h->nb--;
			if (rnd() % 2)
				renumber(h);
		}
		break;
	case 7: /* swap with the next: out of order */
		if (i + 1 < h->nb) {
			struct batch t = b[0];

			b[0] = b[1];
			b[1] = t;
			if (rnd() % 2)
				renumber(h);
		}
		break;
	case 8: /* an empty batch */
		if (h->nb < MAXBATCH) {
			memmove(b + 1, b, (h->nb - i) * sizeof(*b));
			h->nb++;
			memset(&b->recs, 0, sizeof(b->recs));
			renumber(h);
		}
		break;
	default: /* many batches: the walk to the end of the half */
		for (size_t k = 0, want = 1 + rnd() % 40; k < want && h->nb < MAXBATCH; k++) {
			struct rlist from = h->b[rnd() % h->nb].recs;

			h->b[h->nb] = h->b[0];
			rl_clone(&h->b[h->nb].recs, &from);
			h->nb++;
		}
		renumber(h);
		break;
	}
}

static void mut_half(struct img *im, int c)
{
	struct half *h = pick_half(im, c), *o = h == &im->log[c][0] ? &im->log[c][1] : &im->log[c][0];

	switch (rnd() % 10) {
	case 0: h->gen = rnd() % 2 ? pick(h->gen, 8) : o->gen + (rnd() % 3) - 1; break;
	case 1: h->first_seq = pick(h->first_seq, 8); if (rnd() % 2) renumber(h); break;
	case 2: h->next_ino = pick(h->next_ino, 8); break;
	case 3: h->sdelta = rnd() % 2 ? (int64_t[]){ -1, 1, -6, 4096, -4096 }[rnd() % 5]
				      : (int64_t)(pick(rl_bytes(&h->snap), 8) - rl_bytes(&h->snap));
		break;
	case 4: h->present = !h->present; break;
	case 5: h->bad = rnd() % 4 == 0 ? 1 + rnd() % 2 : 0; break;
	case 6: h->baduuid = rnd() % 4 == 0; break;
	case 7: { /* swap the halves */
		struct half t = *h;

		*h = *o;
		*o = t;
		break;
	}
	default: /* the other half becomes a copy of this one, a generation apart */
		half_free(o);
		half_clone(o, h);
		o->gen = h->gen + (rnd() % 3) - 1;
		if (rnd() % 2)
			renumber(o);
		break;
	}
}

/* The u64 geometry fields of a superblock, 0..5. */
static uint64_t *sb_field(struct fmt_sb *sb, unsigned k)
{
	uint64_t *f[] = { &sb->member_size, &sb->log_offset, &sb->log_half, &sb->data_offset,
			  &sb->data_end, &sb->csum_offset };

	return f[k];
}

static void mut_sb(struct img *im)
{
	unsigned i = rnd() % 3 ? rnd() % MIN(im->n, 2) : rnd() % im->n, which = rnd() % 4, k;
	struct fmt_sb sb = im->sb[i][which == 1], *s = &sb;
	uint32_t *f32[] = { &s->version, &s->flags, &s->member_index, &s->member_count,
			    &s->stripe_unit, &s->block_size };

	k = rnd() % 14;
	if (k < 6) { /* the u64 geometry, often set to another field's value */
		uint64_t *f = sb_field(s, k);
		uint64_t other[] = { s->member_size, s->log_offset + 2 * s->log_half, s->data_offset,
				     s->data_end, s->csum_offset, s->member_size - FMT_SB_SIZE,
				     im->fsize[i], 0, FMT_SB_SIZE };

		*f = rnd() % 3 ? pick(*f, 8) : other[rnd() % 9] + (uint64_t)((int)(rnd() % 3) - 1) * 4096;
	} else if (k < 12) {
		uint32_t *f = f32[k - 6];

		if (k == 10 && rnd() % 2) /* stripe unit: powers of two around the limits */
			*f = (1u << (15 + rnd() % 13)) + (rnd() % 4 == 0);
		else if (k == 8 || k == 9)
			*f = rnd() % 2 ? rnd() % (MAXM + 2) : (uint32_t)pick(*f, 4);
		else
			*f = (uint32_t)pick(*f, 4);
	} else if (k == 12) { /* uuids: another filesystem, another member */
		if (rnd() % 2)
			s->fs_uuid[rnd() % 16] ^= 1;
		else
			s->member_uuid[rnd() % MAXM][rnd() % 16] ^= 1;
	} else { /* a whole valid geometry for another size or log half */
		uint64_t size = rnd() % 2 ? s->member_size : pick(s->member_size, 8);
		uint64_t half = rnd() % 2 ? s->log_half : (1ull << 20) * (1 + rnd() % 8);

		if (fmt_sb_geometry(s, size, half))
			return;
	}
	if (which != 1)
		im->sb[i][0] = sb;
	if (which != 0)
		im->sb[i][1] = sb;
	if (which == 3 && rnd() % 8 == 0)
		im->sbstate[i][rnd() % 2] = rnd() % 3;
}

static void mut_members(struct img *im)
{
	unsigned i = rnd() % im->n, j = rnd() % im->n;

	switch (rnd() % 4) {
	case 0: /* fewer or more members given than the set has */
		if (rnd() % 2 && im->n > 1)
			im->n--;
		else if (im->n < MAXM) {
			im->fsize[im->n] = im->fsize[im->n - 1];
			im->sb[im->n][0] = im->sb[im->n][1] = im->sb[im->n - 1][0];
			im->sbstate[im->n][0] = im->sbstate[im->n][1] = SB_OK;
			im->n++;
		}
		break;
	case 1: /* the file size of a member around its member_size */
		im->fsize[i] = rnd() % 2 ? im->sb[i][0].member_size - (rnd() % 2) * 4096 - rnd() % 2
				    : pick(im->fsize[i], 8);
		im->fsize[i] %= 256ull << 20; /* sparse, but a file size all the same */
		break;
	case 2: /* two members given in the wrong order, or one twice */
		if (i != j) {
			struct fmt_sb t[2];

			memcpy(t, im->sb[i], sizeof(t));
			memcpy(im->sb[i], im->sb[j], sizeof(t));
			if (rnd() % 2)
				memcpy(im->sb[j], t, sizeof(t));
		}
		break;
	default: /* a member's superblock copy only */
		im->sbstate[i][0] = rnd() % 2 ? SB_ABSENT : SB_BADSUM;
		break;
	}
}

/* Apply one mutation. Most go to log copy 0 and are copied to copy 1 (the mirrors agree). */
static void mutate(struct img *im)
{
	int t = rnd() % 4, c = t == 3 ? 1 : 0, sync = t < 2 && im->n > 1;
	struct rlist *l;
	struct frec *r;

	switch (rnd() % 20) {
	case 0: case 1: case 2: case 3: case 4: case 5:
		if ((r = pick_rec(im, c, &l)))
			mut_field(r);
		break;
	case 6: case 7:
		if ((r = pick_rec(im, c, &l)))
			mut_name(im, c, r);
		break;
	case 8:
		if ((r = pick_rec(im, c, &l)))
			mut_header(r);
		break;
	case 9: case 10: case 11:
		mut_list(im, c);
		break;
	case 12: case 13:
		mut_batch(im, c);
		break;
	case 14: case 15:
		mut_half(im, c);
		break;
	case 16: case 17:
		mut_sb(im);
		sync = 0;
		break;
	default:
		mut_members(im);
		sync = 0;
		break;
	}
	if (sync) {
		half_free(&im->log[1][0]);
		half_free(&im->log[1][1]);
		half_clone(&im->log[1][0], &im->log[0][0]);
		half_clone(&im->log[1][1], &im->log[0][1]);
	}
}

/* ---------------------------------------------------------------- laying out the images */

static int mfd[MAXM];
static int use_members_open = 1;
static uint8_t fs_uuid[16];
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
static void write_images(const struct img *im)
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

static int verbose;

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

enum { AT_MEMBERS, AT_JOURNAL, AT_MOUNT_CHECKS, AT_COMPACTION, AT_MOUNTED };

/* The mount sequence of fs_mount on the member images, with the invariants. Returns the
 * AT_* stage that stopped it. */
static int run_one(const struct img *im, int ro, int older)
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

/* ---------------------------------------------------------------- seeds */

struct builder {
	struct img *im;
	struct buf b;
	uint64_t cur[MAXM]; /* next free byte of each member's data region */
	uint32_t su;
};

static void enc(struct builder *s, const struct fmt_rec *r)
{
	if (fmt_rec_encode(&s->b, r)) {
		fprintf(stderr, "fuzz_meta: a seed record does not encode\n");
		exit(2);
	}
}

static void b_inode(struct builder *s, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t size,
		    uint32_t start)
{
	struct fmt_rec r = { .type = REC_INODE, .ino = ino };

	r.a.mode = mode;
	r.a.nlink = nlink;
	r.a.size = size;
	r.a.uid = 1000;
	r.a.gid = 1000;
	r.a.start_member = start;
	r.a.atime = r.a.mtime = r.a.ctime = 1700000000000000000ll + (int64_t)ino;
	if (S_ISCHR(mode) || S_ISBLK(mode))
		r.a.rdev = 0x0801;
	enc(s, &r);
}

static void b_named(struct builder *s, uint16_t type, uint64_t ino, uint64_t dir, const char *name)
{
	struct fmt_rec r = { .type = type, .ino = ino, .dir = dir };

	r.name = (const uint8_t *)name;
	r.name_len = strlen(name);
	enc(s, &r);
}

static void b_xset(struct builder *s, uint64_t ino, const char *name, const void *val, size_t len)
{
	struct fmt_rec r = { .type = REC_XSET, .ino = ino };

	r.name = (const uint8_t *)name;
	r.name_len = strlen(name);
	r.val = val;
	r.val_len = len;
	enc(s, &r);
}

static void b_op(struct builder *s, uint16_t type, uint64_t ino, uint64_t off, uint64_t len)
{
	struct fmt_rec r = { .type = type, .ino = ino, .off = off, .plen = len };

	enc(s, &r);
}

/* Extents for bytes [from, from + len) of a file, on the members its stripe units go to. */
static void b_data(struct builder *s, uint64_t ino, uint32_t start, uint64_t from, uint64_t len)
{
	for (uint64_t off = from; off < from + len;) {
		uint64_t piece = MIN(s->su - off % s->su, from + len - off);
		struct fmt_rec r = { .type = REC_EXTENT, .ino = ino, .off = off };

		r.len = (uint32_t)piece;
		r.member = (start + off / s->su) % s->im->n;
		r.moff = s->cur[r.member];
		s->cur[r.member] += piece;
		enc(s, &r);
		off += piece;
	}
}

/* The records built so far into @l; the builder starts a new list. */
static void b_take(struct builder *s, struct rlist *l)
{
	rl_from(l, s->b.p, s->b.len);
	s->b.len = 0;
}

static void b_batch(struct builder *s, struct half *h)
{
	struct batch *b = &h->b[h->nb];

	memset(b, 0, sizeof(*b));
	b->gen = h->gen;
	b->seq = h->first_seq + h->nb;
	b_take(s, &b->recs);
	h->nb++;
}

static void b_start(struct builder *s, struct img *im, unsigned n, uint32_t su, uint64_t half)
{
	memset(im, 0, sizeof(*im));
	memset(s, 0, sizeof(*s));
	s->im = im;
	s->su = su;
	im->n = n;
	im->half = half;
	for (unsigned i = 0; i < n; i++) {
		struct fmt_sb *sb = &im->sb[i][0];

		im->fsize[i] = (64ull << 20) + i * (8ull << 20);
		sb->version = FMT_VERSION;
		sb->member_index = i;
		sb->member_count = n;
		sb->stripe_unit = su;
		sb->block_size = DMAFS_BLOCK;
		memcpy(sb->fs_uuid, fs_uuid, 16);
		for (unsigned k = 0; k < n; k++)
			memset(sb->member_uuid[k], 0x10 + k, 16);
		strcpy(sb->label, "fuzz");
		sb->mkfs_time = 1700000000;
		if (fmt_sb_geometry(sb, im->fsize[i], half)) {
			fprintf(stderr, "fuzz_meta: seed geometry does not fit\n");
			exit(2);
		}
		im->sb[i][1] = *sb;
		s->cur[i] = sb->data_offset;
	}
	for (int c = 0; c < 2; c++)
		for (int h = 0; h < 2; h++)
			im->log[c][h].b = xrealloc(NULL, MAXBATCH * sizeof(struct batch));
}

static void b_half(struct half *h, uint64_t gen, uint64_t first_seq, uint64_t next_ino)
{
	h->present = 1;
	h->gen = gen;
	h->first_seq = first_seq;
	h->next_ino = next_ino;
}

/* Copy 0 to copy 1: the mirror on member 1. */
static void b_finish(struct builder *s)
{
	struct img *im = s->im;

	for (int h = 0; h < 2; h++) {
		half_free(&im->log[1][h]);
		half_clone(&im->log[1][h], &im->log[0][h]);
	}
	buf_free(&s->b);
}

/* A populated tree: directories, files over several stripe units, a symlink, special files. */
static void b_tree(struct builder *s)
{
	static uint8_t big[65536];
	char long_name[FMT_NAME_MAX + 1], target[FMT_SYMLINK_MAX + 1];

	memset(long_name, 'n', FMT_NAME_MAX);
	long_name[FMT_NAME_MAX] = 0;
	memset(target, 't', FMT_SYMLINK_MAX);
	target[FMT_SYMLINK_MAX] = 0;
	memset(big, 0x5a, sizeof(big));
	b_inode(s, 1, S_IFDIR | 0755, 4, 0, 0);
	b_inode(s, 2, S_IFDIR | 0755, 3, 0, 0);
	b_inode(s, 3, S_IFREG | 0644, 2, 5 * s->su / 2, 1 % s->im->n);
	b_data(s, 3, 1 % s->im->n, 0, ALIGN_UP(5 * s->su / 2, DMAFS_BLOCK));
	b_xset(s, 3, "user.k", "value", 5);
	b_xset(s, 3, "user.empty", "", 0);
	b_inode(s, 4, S_IFLNK | 0777, 1, 9, 0);
	b_named(s, REC_SYMLINK, 4, 0, "../w.bin");
	b_inode(s, 5, S_IFIFO | 0600, 1, 0, 0);
	b_inode(s, 6, S_IFCHR | 0600, 1, 0, 0);
	b_inode(s, 7, S_IFDIR | 0700, 2, 0, 0);
	b_xset(s, 7, "user.big", big, sizeof(big));
	b_inode(s, 8, S_IFLNK | 0777, 1, FMT_SYMLINK_MAX, 0);
	b_named(s, REC_SYMLINK, 8, 0, target);
	b_inode(s, 9, S_IFREG | 0600, 1, 3 * DMAFS_BLOCK, 0);
	/* a sparse file: a hole, then one block, a hole, then two */
	b_data(s, 9, 0, DMAFS_BLOCK, DMAFS_BLOCK);
	b_data(s, 9, 0, s->su + DMAFS_BLOCK, 2 * DMAFS_BLOCK);
	b_named(s, REC_LINK, 2, 1, "models");
	b_named(s, REC_LINK, 3, 2, "w.bin");
	b_named(s, REC_LINK, 3, 1, "hard");
	b_named(s, REC_LINK, 4, 1, "sym");
	b_named(s, REC_LINK, 5, 2, "fifo");
	b_named(s, REC_LINK, 6, 2, "tty");
	b_named(s, REC_LINK, 7, 1, "deep");
	b_named(s, REC_LINK, 8, 7, long_name);
	b_named(s, REC_LINK, 9, 7, "sparse");
}

/* The changes a live daemon logs: create, write, overwrite, truncate, rename, unlink. */
static void b_changes(struct builder *s, struct half *h, uint64_t base)
{
	b_inode(s, base, S_IFREG | 0644, 1, 0, 0);
	b_named(s, REC_LINK, base, 2, "new");
	b_batch(s, h);
	b_data(s, base, 0, 0, 2 * s->su);
	b_inode(s, base, S_IFREG | 0644, 1, 2 * s->su, 0);
	b_batch(s, h);
	/* an overwrite of blocks 1-2: PUNCH, then their new copies (copy on write) */
	b_op(s, REC_PUNCH, base, DMAFS_BLOCK, 2 * DMAFS_BLOCK);
	b_data(s, base, 0, DMAFS_BLOCK, 2 * DMAFS_BLOCK);
	b_xset(s, base, "user.k", "1", 1);
	b_batch(s, h);
	b_op(s, REC_TRUNC, base, s->su + 5000, 0);
	b_inode(s, base, S_IFREG | 0644, 1, s->su + 5000, 0);
	b_named(s, REC_XDEL, base, 0, "user.k");
	b_batch(s, h);
	/* rename models/new to renamed */
	b_named(s, REC_UNLINK, 0, 2, "new");
	b_named(s, REC_LINK, base, 1, "renamed");
	b_batch(s, h);
	/* unlink sym: nlink 0, then the inode goes */
	b_named(s, REC_UNLINK, 0, 1, "sym");
	b_inode(s, 4, S_IFLNK | 0777, 0, 9, 0);
	b_op(s, REC_IDEL, 4, 0, 0);
	b_batch(s, h);
}

static void replay_into(struct meta *m, const struct half *h)
{
	uint8_t *p;
	size_t len, pos;
	struct fmt_rec r;

	for (size_t i = 0; i <= h->nb; i++) {
		const struct rlist *l = i ? &h->b[i - 1].recs : &h->snap;

		len = rl_bytes(l);
		p = xrealloc(NULL, len);
		rl_encode(l, p, len);
		pos = 0;
		while (fmt_rec_decode(p, len, &pos, &r) > 0)
			if (meta_apply(m, &r)) {
				fprintf(stderr, "fuzz_meta: a seed record does not apply\n");
				exit(2);
			}
		free(p);
	}
}

static struct img seeds[8];
static size_t nseeds;

static void make_seeds(void)
{
	struct builder s;
	struct img *im;
	struct meta m;
	struct buf snap = { 0 };

	memset(fs_uuid, 0xa5, 16);
	/* what mkfs.dmafs writes: the root directory, on 1 and on 3 members */
	for (unsigned n = 1; n <= 3; n += 2) {
		im = &seeds[nseeds++];
		b_start(&s, im, n, 1u << 20, 1u << 20);
		b_inode(&s, 1, S_IFDIR | 0755, 2, 0, 0);
		b_half(&im->log[0][0], 1, 1, 2);
		b_take(&s, &im->log[0][0].snap);
		b_finish(&s);
	}
	/* a tree, then batches of changes; the smallest stripe unit */
	im = &seeds[nseeds++];
	b_start(&s, im, 2, 64u << 10, 1u << 20);
	b_tree(&s);
	b_half(&im->log[0][0], 3, 7, 10);
	b_take(&s, &im->log[0][0].snap);
	b_changes(&s, &im->log[0][0], 10);
	b_finish(&s);
	/* half A an older generation, half B its compaction plus batches (3 members) */
	im = &seeds[nseeds++];
	b_start(&s, im, 3, 1u << 20, 1u << 20);
	b_tree(&s);
	b_half(&im->log[0][0], 4, 10, 10);
	b_take(&s, &im->log[0][0].snap);
	b_changes(&s, &im->log[0][0], 10);
	if (meta_init(&m, s.su, 3))
		exit(2);
	replay_into(&m, &im->log[0][0]);
	if (meta_snapshot(&m, &snap))
		exit(2);
	meta_destroy(&m);
	b_half(&im->log[0][1], 5, 10 + im->log[0][0].nb, 11);
	rl_from(&im->log[0][1].snap, snap.p, snap.len);
	buf_free(&snap);
	b_inode(&s, 11, S_IFDIR | 0755, 2, 0, 0);
	b_named(&s, REC_LINK, 11, 1, "later");
	b_batch(&s, &im->log[0][1]);
	b_data(&s, 9, 0, 2 * s.su, DMAFS_BLOCK);
	b_batch(&s, &im->log[0][1]);
	b_finish(&s);
	/* many small batches, 4 members, the log half mkfs.dmafs gives 64 MiB members */
	im = &seeds[nseeds++];
	b_start(&s, im, 4, 64u << 10, fmt_log_half_for(64ull << 20));
	b_inode(&s, 1, S_IFDIR | 0755, 2, 0, 0);
	b_half(&im->log[0][0], 2, 1, 2);
	b_take(&s, &im->log[0][0].snap);
	for (uint64_t i = 0; i < 60; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%llu", (unsigned long long)i);
		b_inode(&s, 2 + i, S_IFREG | 0644, 1, DMAFS_BLOCK, i % 4);
		b_named(&s, REC_LINK, 2 + i, 1, name);
		b_data(&s, 2 + i, i % 4, 0, DMAFS_BLOCK);
		b_batch(&s, &im->log[0][0]);
	}
	b_finish(&s);
	/* what a crash leaves: an orphan (nlink 0, data, no entry) and an entry whose inode
	 * record was lost, for meta_cleanup */
	im = &seeds[nseeds++];
	b_start(&s, im, 2, 64u << 10, 1u << 20);
	b_tree(&s);
	b_inode(&s, 20, S_IFREG | 0644, 0, 3 * DMAFS_BLOCK, 1);
	b_data(&s, 20, 1, 0, 3 * DMAFS_BLOCK);
	b_named(&s, REC_LINK, 21, 2, "lost");
	b_half(&im->log[0][0], 9, 1, 22);
	b_take(&s, &im->log[0][0].snap);
	b_finish(&s);
	donors = seeds;
	ndonors = nseeds;
}

/* ---------------------------------------------------------------- regression inputs */

/* Records built by @fn appended to list @l of image @im. */
static void append(struct img *im, struct rlist *l, void (*fn)(struct builder *))
{
	struct builder s;
	struct rlist add = { 0 };

	memset(&s, 0, sizeof(s));
	s.im = im;
	s.su = im->sb[0][0].stripe_unit;
	for (unsigned i = 0; i < im->n; i++)
		s.cur[i] = im->sb[i][0].data_offset + (32ull << 20);
	fn(&s);
	b_take(&s, &add);
	buf_free(&s.b);
	for (size_t i = 0; i < add.n; i++)
		rl_insert(l, l->n, &add.r[i]);
	rl_free(&add);
}

static void both_sb(struct img *im, unsigned i, void (*fn)(struct fmt_sb *))
{
	fn(&im->sb[i][0]);
	fn(&im->sb[i][1]);
}

static void sync_copies(struct img *im)
{
	for (int h = 0; h < 2; h++) {
		half_free(&im->log[1][h]);
		half_clone(&im->log[1][h], &im->log[0][h]);
	}
}

static void csum_at_end(struct fmt_sb *sb) { sb->csum_offset = sb->member_size; }
static void half_wraps(struct fmt_sb *sb) { sb->log_half = 1ull << 63; }
static void data_at_zero(struct fmt_sb *sb) { sb->data_offset = 0; }
static void half_8m(struct fmt_sb *sb) { fmt_sb_geometry(sb, sb->member_size, 8ull << 20); }
static void ino_max(struct builder *s) { b_inode(s, UINT64_MAX, S_IFREG | 0644, 1, 0, 0); }
static void link_orphan(struct builder *s) { b_named(s, REC_LINK, 20, 2, "still-named"); }
static void punch_empty(struct builder *s)
{
	b_inode(s, 30, S_IFREG | 0644, 1, 0, 0);
	b_op(s, REC_PUNCH, 30, 0, DMAFS_BLOCK);
}

/* The last block a u64 file offset can address: off + len wraps to 0. */
static void ext_wraps(struct builder *s)
{
	struct fmt_rec r = { .type = REC_EXTENT, .ino = 30, .off = 0 - (uint64_t)DMAFS_BLOCK };

	b_inode(s, 30, S_IFREG | 0644, 1, 0, 1);
	r.len = DMAFS_BLOCK;
	r.member = (1 + r.off / s->su) % s->im->n; /* the member of that stripe unit */
	r.moff = s->cur[r.member];
	enc(s, &r);
}

static void r_csum(struct img *im) { both_sb(im, 0, csum_at_end); }
static void r_half(struct img *im) { both_sb(im, 0, half_wraps); }
static void r_data0(struct img *im) { both_sb(im, 2, data_at_zero); }
static void r_geom(struct img *im) { both_sb(im, 1, half_8m); }
static void r_gen(struct img *im)
{
	im->log[0][0].gen = UINT64_MAX;
	renumber(&im->log[0][0]);
	sync_copies(im);
}
static void r_gen1(struct img *im)
{
	im->log[0][0].gen = UINT64_MAX - 1;
	renumber(&im->log[0][0]);
	sync_copies(im);
}
static void r_older(struct img *im)
{
	im->log[0][1].bad = 1;
	sync_copies(im);
}
static void r_ino(struct img *im)
{
	append(im, &im->log[0][0].snap, ino_max);
	sync_copies(im);
}
static void r_extwrap(struct img *im)
{
	append(im, &im->log[0][0].snap, ext_wraps);
	sync_copies(im);
}
static void r_orphan(struct img *im)
{
	append(im, &im->log[0][0].snap, link_orphan);
	sync_copies(im);
}
static void r_punch(struct img *im)
{
	struct half *h = &im->log[0][0];

	h->b[h->nb] = (struct batch){ h->gen, h->first_seq + h->nb, 0, 0, { 0 } };
	append(im, &h->b[h->nb++].recs, punch_empty);
	sync_copies(im);
}

/*
 * Inputs that once broke an invariant, each a seed with the edit that did it, and the stage
 * where the mount must stop now.
 */
static const struct regress {
	const char *what;
	size_t seed;
	void (*edit)(struct img *);
	int expect;
	int older;
} regressions[] = {
	{ "checksum region at the end of the member (csum_offset = member_size)", 2, r_csum, AT_MEMBERS, 0 },
	{ "log_offset + 2 * log_half wrapping (log_half = 2^63)", 2, r_half, AT_MEMBERS, 0 },
	{ "data region over the superblock of a member without log (data_offset = 0)", 1, r_data0, AT_MEMBERS, 0 },
	{ "log members with different log halves", 2, r_geom, AT_MEMBERS, 0 },
	{ "log half of generation UINT64_MAX (compaction would wrap to 0)", 5, r_gen, AT_COMPACTION, 0 },
	{ "log half of generation UINT64_MAX - 1 (compaction writes the last one)", 5, r_gen1, AT_MOUNTED, 0 },
	{ "inode number UINT64_MAX (next_ino would wrap to 0)", 2, r_ino, AT_JOURNAL, 0 },
	{ "extent whose end wraps past 2^64 (off = 2^64 - 4096)", 2, r_extwrap, AT_JOURNAL, 0 },
	{ "orphan (nlink 0) still named by a directory entry", 5, r_orphan, AT_MOUNTED, 0 },
	{ "PUNCH of a file without extents", 2, r_punch, AT_MOUNTED, 0 },
	/* not a finding: the fallback of dmafs-fsck --repair, which random inputs seldom reach */
	{ "older generation, the current one damaged in both copies", 3, r_older, AT_MOUNTED, 1 },
};

static int run_regressions(void)
{
	static const char *const stage[] = { "members_open", "journal_open", "the mount checks",
					     "compaction", "mounted" };
	int failed = 0;

	for (size_t i = 0; i < sizeof(regressions) / sizeof(regressions[0]); i++) {
		const struct regress *g = &regressions[i];
		struct img im;
		int at;

		cur_what = g->what;
		img_clone(&im, &seeds[g->seed]);
		g->edit(&im);
		at = run_one(&im, 0, g->older);
		img_free(&im);
		if (at != g->expect) {
			fprintf(stderr, "fuzz_meta: regression input '%s': stopped at %s, expected %s\n",
				g->what, stage[at], stage[g->expect]);
			failed = 1;
		}
	}
	return failed;
}

/* ---------------------------------------------------------------- driver */

static void dump(const char *dir, unsigned n)
{
	char path[4096];
	uint8_t *b = xrealloc(NULL, 1 << 20);

	for (unsigned i = 0; i < n; i++) {
		ssize_t got;
		off_t off = 0;
		int fd;

		snprintf(path, sizeof(path), "%s/member-%u.img", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			perror(path);
			exit(2);
		}
		while ((got = pread(mfd[i], b, 1 << 20, off)) > 0) {
			int zero = 1;

			for (ssize_t k = 0; k < got && zero; k++)
				zero = !b[k];
			if (!zero && pwrite(fd, b, got, off) != got) {
				perror(path);
				exit(2);
			}
			off += got;
		}
		if (ftruncate(fd, off) || close(fd)) {
			perror(path);
			exit(2);
		}
		printf("fuzz_meta: wrote %s\n", path);
	}
	free(b);
}

static void report(void)
{
	unsigned long dec = 0, decbad = 0, app = 0, appbad = 0;

	printf("fuzz_meta: %lu inputs (%lu with a checksum broken on purpose)\n", st.inputs,
	       st.sabotaged);
	printf("  members_open: accepted %lu; rejected by", st.open_ok);
	for (int i = 0; i < 8; i++)
		printf("%s %s %lu", i ? "," : "", open_why[i], st.open_err[i]);
	/* superblocks missing, unreadable or failing their checksum stop an input before the rest */
	st.sb_gate = st.inputs - st.open_err[0] - st.open_err[1] - st.open_err[7];
	printf("\n  superblocks past their checksums: %lu; past every checksum (superblocks, a log header, the snapshot) and into replay: %lu\n",
	       st.sb_gate, st.gate);
	printf("  journal_open: accepted %lu (a damaged copy passed over %lu, older generation %lu); rejected by",
	       st.jopen_ok, st.copy_damaged, st.older);
	for (int i = 0; i < 9; i++)
		printf("%s %s %lu", i ? "," : "", jopen_why[i], st.jopen_err[i]);
	printf("\n  mount checks: no root directory %lu, extents outside the data region or shared %lu, mountable %lu\n",
	       st.no_root, st.bad_extent, st.mountable);
	printf("  meta_cleanup repaired %lu; compacted %lu (log full %lu, generation at its limit %lu), compaction replayed to the same state %lu\n",
	       st.cleaned, st.compacted, st.compact_nospc, st.compact_gen, st.reopened);
	printf("  fmt_sb_decode: accepted %lu, no magic %lu, checksum %lu, version %lu, fields %lu\n",
	       st.sb[0], st.sb[1], st.sb[2], st.sb[3], st.sb[4]);
	printf("  fmt_loghdr_decode: accepted %lu, no magic %lu, checksum or version %lu\n",
	       st.lh[0], st.lh[1], st.lh[2]);
	printf("  fmt_txhdr_decode: accepted %lu, no magic %lu, checksum %lu; record buffers replayed (snapshots and batch payloads) %lu\n",
	       st.tx[0], st.tx[1], st.tx[2], st.buffers);
	printf("  records in replay: decoded / malformed (fmt_rec_decode), applied / rejected (meta_apply):\n");
	for (int t = 0; t < NTYPES; t++) {
		dec += st.dec_ok[t];
		decbad += st.dec_bad[t];
		app += st.app_ok[t];
		appbad += st.app_bad[t];
		if (st.dec_ok[t] || st.dec_bad[t] || st.app_ok[t] || st.app_bad[t])
			printf("    %-8s %8lu / %-6lu %8lu / %lu\n", tname[t], st.dec_ok[t],
			       st.dec_bad[t], st.app_ok[t], st.app_bad[t]);
	}
	printf("    %-8s %8lu / %-6lu %8lu / %lu\n", "all", dec, decbad, app, appbad);
}

int main(int argc, char **argv)
{
	unsigned long long n = 3000, seed = 1, only = ~0ull;
	const char *dir = NULL;
	struct member *ms;
	char err[1024];
	int opt, ret;

	while ((opt = getopt(argc, argv, "kvn:s:i:d:")) != -1) {
		switch (opt) {
		case 'k': keep_going = 1; break;
		case 'v': verbose = 1; break;
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'i': only = strtoull(optarg, NULL, 0); break;
		case 'd': dir = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-kv] [-n N] [-s SEED] [-i INDEX [-d DIR]]\n", argv[0]);
			return 2;
		}
	}
	util_log_set_level(-1); /* replay's warnings about damaged copies are expected here */
	for (int i = 0; i < MAXM; i++) {
		mfd[i] = memfd_create("dmafs-fuzz-member", MFD_CLOEXEC);
		if (mfd[i] < 0) {
			perror("fuzz_meta: SKIP: memfd_create");
			return 77;
		}
	}
	make_seeds();
	cur_seed = seed;
	/* members_open needs O_DIRECT on the memfds; then every seed must mount as it is. */
	{
		char list[64];

		write_images(&seeds[0]);
		snprintf(list, sizeof(list), "/proc/self/fd/%d", mfd[0]);
		ret = members_open(list, 1, &ms, err, sizeof(err));
		if (ret == -EINVAL && strstr(err, "O_DIRECT")) {
			use_members_open = 0;
			printf("fuzz_meta: note: no O_DIRECT on memfds (%s): superblocks are read with member_read_sb and the member set checks of members_open are not run\n",
			       err);
		} else if (ret < 0) {
			fprintf(stderr, "fuzz_meta: the first seed does not open: %s\n", err);
			return 1;
		} else {
			members_close(ms, ret);
		}
	}
	for (size_t i = 0; i < nseeds; i++) {
		cur_what = "a built-in seed as it is";
		if (run_one(&seeds[i], 0, 0) != AT_MOUNTED || st.reopened != st.mountable) {
			fprintf(stderr, "fuzz_meta: seed %zu does not mount and compact cleanly\n", i);
			return 1;
		}
	}
	if (run_regressions() && !keep_going)
		return 1;
	cur_what = NULL;
	for (unsigned long long it = only == ~0ull ? 0 : only; it < (only == ~0ull ? n : only + 1); it++) {
		struct img im;
		unsigned k;

		cur_index = it;
		rs = mix(seed, it);
		img_clone(&im, &seeds[rnd() % nseeds]);
		pool_img(&im);
		k = rnd() % 32 == 0 ? 0 : 1 + rnd() % 3 + (rnd() % 4 == 0 ? rnd() % 8 : 0);
		while (k--)
			mutate(&im);
		/* mostly read-write mounts (cleanup and compaction), some read-only, some with the
		 * fallback to the older generation of dmafs-fsck --repair */
		k = rnd() % 10;
		run_one(&im, k == 0 || k == 1, k == 2);
		if (dir)
			dump(dir, im.n);
		img_free(&im);
	}
	report();
	if (findings) {
		printf("fuzz_meta: %lu broken invariants\n", findings);
		return 1;
	}
	printf("fuzz_meta: no crash, no broken invariant\n");
	return 0;
}
