// SPDX-License-Identifier: MIT
/*
 * batch.c - samples of many files in one request (DMAFS_IOC_BATCH), and the handles that
 * name the files (DMAFS_IOC_HANDLE).
 *
 * A handle is (inode, generation, MAC): SipHash-2-4 under the mount's key of the inode,
 * its generation, and the process (pid and start time) and user that asked for it on a
 * descriptor open for reading. The daemon keeps nothing per handle; only the process that
 * opened the file can present a handle that verifies, and a pid used again by another
 * process has another start time.
 *
 * A batch holds every file it names (fs_hold_many: a removed file fails its entries
 * alone), waits for their write-behind, then takes their iolocks shared in inode order (so
 * two batches and the writers between them cannot deadlock) and keeps them to the end:
 * each placed byte is the file's content at one moment of the call. The pieces are read in
 * rounds: as many staging slots as the user's share allows are packed with pieces (each
 * read aligned to the members' sector, or to the block with verify_place), their member
 * reads go out with as many in flight as the user's share of the queue depth allows (as a
 * placement's: share.h), and each piece is copied out as its reads arrive: into the
 * client's pages (host) or by an asynchronous copy to the device (GPU), whose slot is
 * given back once the event behind its copies has fired. Into a host buffer without
 * verify_place, the whole blocks of a piece that starts on a block both in the file and in
 * the client's pages are read straight into those pages instead (no slot, no copy; holes
 * zeroed there through usermem_zero). The warm tier is not consulted.
 */
#include "place/place.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/wback.h"
#include "gpu.h"
#include "io/uring.h"
#include "place/reg.h"
#include "place/stage.h"
#include "place/usermem.h"
#include "util/rwlock.h"
#include "util/siphash.h"

/* Member reads of one round: the ring keeps up to its depth (io/uring.c) of them in
 * flight, so a round longer than that costs one wait at its end, not one per depth. */
#define BATCH_ROUND_OPS 1024

/* ---- handles ---- */

/* The start time of process @tgid (clock ticks after boot, /proc/PID/stat field 22). */
static int proc_start(pid_t tgid, uint64_t *start)
{
	char path[64], buf[1024], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tgid);
	f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p)
		return -ESRCH;
	p++;
	for (int field = 3; field <= 22; field++) {
		char *end;
		unsigned long long v;

		while (*p == ' ')
			p++;
		if (field == 22) {
			v = strtoull(p, &end, 10);
			if (end == p)
				return -ESRCH;
			*start = v;
			return 0;
		}
		p = strchr(p, ' ');
		if (!p)
			return -ESRCH;
	}
	return -ESRCH;
}

static uint64_t handle_mac(const struct place *pl, uint64_t ino, uint32_t gen, pid_t tgid,
			   uint64_t start, uid_t uid)
{
	const uint64_t m[4] = { ino, gen | (uint64_t)uid << 32, (uint64_t)(uint32_t)tgid, start };

	return siphash24(pl->hkey, m, sizeof(m));
}

int place_handle(struct place *pl, const struct place_caller *c, uint64_t ino_nr,
		 struct dmafs_ioc_handle *h)
{
	struct fs *fs = pl->fs;
	struct inode *ino;
	uint64_t start;
	uint32_t gen;
	int ret;

	if (h->flags)
		return -EINVAL;
	ret = proc_start(c->tgid, &start);
	if (ret)
		return ret;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	ret = !ino ? -ENOENT : !S_ISREG(ino->a.mode) ? -EINVAL : 0;
	gen = ino ? ino->a.generation : 0;
	pthread_mutex_unlock(&fs->meta.lock);
	if (ret)
		return ret;
	memset(h, 0, sizeof(*h));
	h->ino = ino_nr;
	h->gen = gen;
	h->mac = handle_mac(pl, ino_nr, gen, c->tgid, start, c->uid);
	return 0;
}

/* ---- a batch ---- */

/* A piece: a part of an entry whose aligned read fits one staging slot. */
struct bpiece {
	uint32_t e;	 /* entry */
	uint32_t len;
	uint64_t off;	 /* file offset */
	uint64_t dst;	 /* buffer offset */
	unsigned slot;	 /* index into the round's slots */
	uint32_t at;	 /* where the piece's first byte is in its slot */
	uint32_t op0, nops; /* its member reads: op[op0 .. op0 + nops) */
	uint32_t left;	 /* reads not yet arrived */
	int ready;	 /* read (and checked) */
	int delivered;
	int direct;	 /* read straight into the client's pages: no slot */
};

struct batch {
	struct place *pl;
	struct fs *fs;
	struct reg *r;
	struct dmafs_ioc_batch *b;
	const struct place_caller *c;
	struct fs_held *f; /* the files: ip held, or NULL (their entries failed) */
	uint32_t nf;
	int locked;	 /* the held files' iolocks are taken */
	uint32_t *fidx;	 /* entry -> file */
	uint32_t *ord;	 /* entries in file order */
	struct stage *st;
	void *stream;	 /* GPU */
	uint64_t gran;
	int verify, gpu;
	/* the next piece to cut: entry cur (the request's order: samples the caller packs
	 * one after another then lie one after another in a slot too, and leave it in one
	 * copy), at byte eoff of it */
	uint32_t cur;
	uint64_t eoff;
	/* one round */
	struct bpiece *pc;
	size_t npc, pccap;
	struct uring_op *op;
	uint32_t *op_piece; /* op -> piece */
	uint64_t *op_foff;
	size_t nop, opcap, opfcap, oppcap;
	int slots[64];
	unsigned nslots;
	/* per slot of the round: its pieces pc[first .. first + n), those not yet ready */
	uint32_t slot_first[64], slot_n[64], slot_left[64];
	int slot_out[64];	/* copied out */
	char *cs;	 /* checksum blocks of the round's reads (verify) */
	size_t cscap;
	int err;	 /* a failure of the whole request (client memory, device) */
	uint64_t t_build, t_io, t_out, t_sync; /* ns spent, for the verbose log line */
	uint32_t ncopies;	/* copies out of slots, for the same */
};

static int by_file(const void *a, const void *b, void *arg)
{
	const struct dmafs_batch_entry *e = arg;
	const struct dmafs_batch_entry *x = &e[*(const uint32_t *)a], *y = &e[*(const uint32_t *)b];

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->gen != y->gen)
		return x->gen < y->gen ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* The request's shape against a buffer of @bufsize: every entry inside it, and all of
 * them together no more than it holds (so a request's work is bounded by the client's
 * own memory). */
static int batch_check(const struct dmafs_ioc_batch *b, uint64_t bufsize)
{
	uint64_t total = 0;

	if (b->count > DMAFS_BATCH_MAX || b->flags)
		return -EINVAL;
	for (uint32_t i = 0; i < b->count; i++) {
		const struct dmafs_batch_entry *e = &b->e[i];

		if (e->hflags)
			return -EINVAL;
		if (e->buffer_offset > bufsize || e->length > bufsize - e->buffer_offset)
			return -ERANGE;
		if (e->length > bufsize - total)
			return -ERANGE;
		total += e->length;
	}
	return 0;
}

/*
 * Check every handle, hold the files named by good ones (in inode order), wait for their
 * write-behind, then lock them shared and clip each entry to its file's size. Entries of
 * a bad handle or a gone file get their result here.
 */
static int batch_hold(struct batch *B, uint64_t start)
{
	struct dmafs_ioc_batch *b = B->b;
	struct fs *fs = B->fs;

	B->ord = malloc(sizeof(*B->ord) * (b->count ? b->count : 1));
	B->fidx = malloc(sizeof(*B->fidx) * (b->count ? b->count : 1));
	B->f = calloc(b->count ? b->count : 1, sizeof(*B->f));
	if (!B->ord || !B->fidx || !B->f)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->count; i++) {
		struct dmafs_batch_entry *e = &b->e[i];

		B->ord[i] = i;
		e->result = e->mac == handle_mac(B->pl, e->ino, e->gen, B->c->tgid, start, B->c->uid)
				    ? 0 : -EPERM;
	}
	qsort_r(B->ord, b->count, sizeof(*B->ord), by_file, b->e);
	for (uint32_t k = 0; k < b->count; k++) {
		struct dmafs_batch_entry *e = &b->e[B->ord[k]];
		struct fs_held *f = B->nf ? &B->f[B->nf - 1] : NULL;

		if (e->result)
			continue;
		if (!f || f->ino != e->ino || f->gen != e->gen) {
			f = &B->f[B->nf++];
			f->ino = e->ino;
			f->gen = e->gen;
		}
		B->fidx[B->ord[k]] = (uint32_t)(f - B->f);
	}
	fs_hold_many(fs, B->f, B->nf); /* one take of the metadata lock for them all */
	/* what was written is on the members before it is read; no lock is held while
	 * waiting (write-behind takes iolocks) */
	for (uint32_t k = 0; k < B->nf; k++)
		if (B->f[k].buffered)
			wback_wait(fs, B->f[k].ip, 0);
	for (uint32_t k = 0; k < B->nf; k++)
		if (B->f[k].ip)
			dm_rwlock_rdlock(&B->f[k].ip->iolock);
	B->locked = 1;
	for (uint32_t i = 0; i < b->count; i++) {
		struct dmafs_batch_entry *e = &b->e[i];
		uint64_t size;

		if (!e->result && !B->f[B->fidx[i]].ip)
			e->result = -ENOENT;
		if (e->result) {
			e->length = 0;
			continue;
		}
		size = B->f[B->fidx[i]].ip->a.size;
		e->length = e->file_offset >= size ? 0 : (uint32_t)MIN((uint64_t)e->length, size - e->file_offset);
	}
	return 0;
}

static void batch_release(struct batch *B)
{
	for (uint32_t k = 0; B->locked && k < B->nf; k++)
		if (B->f[k].ip)
			dm_rwlock_unlock(&B->f[k].ip->iolock);
	if (B->f)
		fs_unhold_many(B->fs, B->f, B->nf);
	free(B->f);
	free(B->fidx);
	free(B->ord);
	free(B->pc);
	free(B->op);
	free(B->op_piece);
	free(B->op_foff);
	free(B->cs);
}

struct emit_ctx {
	struct batch *B;
	uint32_t piece;
};

static int emit_op(void *arg, const struct uring_op *op, uint64_t foff)
{
	struct emit_ctx *x = arg;
	struct batch *B = x->B;

	if (dm_grow(&B->op, &B->opcap, B->nop + 1, sizeof(*B->op), 64) ||
	    dm_grow(&B->op_piece, &B->oppcap, B->nop + 1, sizeof(*B->op_piece), 64) ||
	    dm_grow(&B->op_foff, &B->opfcap, B->nop + 1, sizeof(*B->op_foff), 64))
		return -ENOMEM;
	B->op[B->nop] = *op;
	B->op_piece[B->nop] = x->piece;
	B->op_foff[B->nop] = foff;
	B->nop++;
	return 0;
}

/* Give back the round's slots (after their device copies, for a GPU). */
static void put_slots(struct batch *B)
{
	for (unsigned s = 0; s < B->nslots; s++)
		stage_put(B->st, (unsigned)B->slots[s]);
	B->nslots = 0;
}

/* Take one more slot: 1 taken, 0 none now (the share is held, or none free), -EINTR. */
static int take_slot(struct batch *B)
{
	unsigned parts = share_parts(&B->pl->share, B->c->uid);

	for (;;) {
		int s = stage_take(B->st, B->nslots, parts);

		if (s >= 0) {
			B->slot_n[B->nslots] = 0;
			B->slot_out[B->nslots] = 0;
			B->slots[B->nslots++] = s;
			return 1;
		}
		if (B->nslots)
			return 0;
		if (B->c->stop.fn && B->c->stop.fn(B->c->stop.arg))
			return -EINTR;
		stage_wait(B->st, 1000);
	}
}

/*
 * A host buffer, not verified: a piece that starts on a block in the file and in the
 * client's pages is read straight into them (no slot, no copy), its whole blocks (*@len
 * cut down to them; the rest goes through a slot as a piece of its own). Returns 1 when
 * it is such a piece.
 */
static int direct_len(const struct batch *B, uint64_t off, uint64_t dst, uint64_t *len)
{
	if (B->gpu || B->verify || off % DMAFS_BLOCK ||
	    (uintptr_t)(B->r->base + dst) % DMAFS_BLOCK || *len < DMAFS_BLOCK)
		return 0;
	*len = ALIGN_DOWN(*len, DMAFS_BLOCK);
	return 1;
}

/* Add the direct piece [off, off + len) of entry @i at buffer offset @dst: its member
 * reads go to the client's pages, its holes are zeroed there (usermem_zero: the client
 * may have taken the memory away). */
static int add_direct(struct batch *B, uint32_t i, uint64_t off, uint64_t dst, uint64_t len)
{
	struct emit_ctx x;
	int ret;

	if (dm_grow(&B->pc, &B->pccap, B->npc + 1, sizeof(*B->pc), 64))
		return -ENOMEM;
	B->pc[B->npc] = (struct bpiece){ .e = i, .len = (uint32_t)len, .off = off, .dst = dst,
					 .direct = 1, .op0 = (uint32_t)B->nop };
	x = (struct emit_ctx){ .B = B, .piece = (uint32_t)B->npc };
	ret = fs_map_reads_z(B->fs, B->f[B->fidx[i]].ip, B->r->base + dst, off, off + len,
			     emit_op, &x, usermem_zero);
	if (ret)
		return ret;
	B->pc[B->npc].nops = (uint32_t)B->nop - B->pc[B->npc].op0;
	B->npc++;
	return 0;
}

/*
 * Cut the next pieces into slots (or, where they may be, straight into the client's
 * pages: direct_len), as many as the share's slots and reads allow, and map their member
 * reads. Returns 1 (a round to run), 0 (nothing left) or -errno.
 */
static int build_round(struct batch *B, unsigned maxops)
{
	struct dmafs_ioc_batch *b = B->b;
	const uint64_t g = B->gran;
	uint64_t at = STAGE_SLOT; /* no slot yet */
	int ret;

	B->npc = 0;
	B->nop = 0;
	while (B->cur < b->count && B->nop < maxops) {
		uint32_t i = B->cur;
		struct dmafs_batch_entry *e = &b->e[i];
		uint64_t off, len, span;
		struct emit_ctx x;

		if (e->result || B->eoff >= e->length) {
			B->cur++;
			B->eoff = 0;
			continue;
		}
		off = e->file_offset + B->eoff;
		len = MIN((uint64_t)e->length - B->eoff, STAGE_SLOT - off % g);
		if (direct_len(B, off, e->buffer_offset + B->eoff, &len)) {
			ret = add_direct(B, i, off, e->buffer_offset + B->eoff, len);
			if (ret)
				return ret;
			B->eoff += len;
			continue;
		}
		span = ALIGN_UP(off % g + len, g);
		if (at + span > STAGE_SLOT) {
			if (B->nslots == sizeof(B->slots) / sizeof(B->slots[0]))
				break;
			ret = take_slot(B);
			if (ret < 0)
				return ret;
			if (ret == 0)
				break;
			at = 0;
		}
		if (dm_grow(&B->pc, &B->pccap, B->npc + 1, sizeof(*B->pc), 64))
			return -ENOMEM;
		if (B->slot_n[B->nslots - 1]++ == 0)
			B->slot_first[B->nslots - 1] = (uint32_t)B->npc;
		B->pc[B->npc] = (struct bpiece){ .e = i, .len = (uint32_t)len, .off = off,
						 .dst = e->buffer_offset + B->eoff,
						 .slot = B->nslots - 1, .at = (uint32_t)(at + off % g) };
		x = (struct emit_ctx){ .B = B, .piece = (uint32_t)B->npc };
		B->pc[B->npc].op0 = (uint32_t)B->nop;
		ret = fs_map_reads(B->fs, B->f[B->fidx[i]].ip,
				   stage_mem(B->st, (unsigned)B->slots[B->nslots - 1]) + at,
				   ALIGN_DOWN(off, g), ALIGN_DOWN(off, g) + span, emit_op, &x);
		if (ret)
			return ret;
		B->pc[B->npc].nops = (uint32_t)B->nop - B->pc[B->npc].op0;
		B->npc++;
		at += span;
		B->eoff += len;
	}
	return B->npc > 0;
}

/* A piece's entry failed: the first error stays. */
static void piece_fail(struct batch *B, uint32_t piece, int err)
{
	struct dmafs_batch_entry *e = &B->b->e[B->pc[piece].e];

	if (!e->result)
		e->result = err;
}

/* Copy @len bytes at @src (slot memory) to buffer offset @dst: the client's pages, or
 * queued to the device. */
static int copy_out(struct batch *B, const char *src, uint64_t dst, uint64_t len)
{
	struct reg *r = B->r;

	B->ncopies++;
	if (!B->gpu)
		return usermem_copy(r->base + dst, src, len);
	return gpu_copy_htod_async(r->gpu, r->dev, r->base + dst, src, len, B->stream) ? -ENODEV : 0;
}

/*
 * Copy out the ready pieces of slot @s, pieces adjacent both in the slot and in the buffer
 * in one copy (samples packed one after another: one device copy per slot, not per sample).
 */
static void slot_out(struct batch *B, unsigned s)
{
	const char *mem = stage_mem(B->st, (unsigned)B->slots[s]), *src = NULL;
	uint64_t dst = 0, len = 0, t = dm_mono_ns();
	int ret = 0;

	B->slot_out[s] = 1;
	/* the slot's pieces follow slot_first in order; direct pieces may lie between them */
	for (uint32_t k = B->slot_first[s], seen = 0; seen < B->slot_n[s] && !ret; k++) {
		struct bpiece *q = &B->pc[k];
		int ok = q->ready && !B->b->e[q->e].result;

		if (q->direct || q->slot != s)
			continue;
		seen++;

		if (ok && len && mem + q->at == src + len && q->dst == dst + len) {
			len += q->len;
		} else {
			if (len)
				ret = copy_out(B, src, dst, len);
			len = 0;
			if (ok) {
				src = mem + q->at;
				dst = q->dst;
				len = q->len;
			}
		}
		q->delivered = ok;
	}
	if (len && !ret)
		ret = copy_out(B, src, dst, len);
	B->t_out += dm_mono_ns() - t;
	if (ret && !B->err)
		B->err = ret; /* the client's memory or the device: the whole request fails */
}

/* A piece whose reads (and checksum reads) have all arrived: checked; its slot copied out
 * once every piece there is ready. */
static void piece_done(struct batch *B, uint32_t k)
{
	struct bpiece *q = &B->pc[k];
	const struct inode *ip = B->f[B->fidx[q->e]].ip;
	size_t nd = B->nop;

	q->ready = 1;
	for (uint32_t i = q->op0; B->verify && i < q->op0 + q->nops; i++)
		if (fs_verify_or_recover(B->fs, ip, &B->op[i], B->op[nd + i].buf, B->op_foff[i],
					 q->direct ? usermem_copy : NULL)) {
			piece_fail(B, k, -EIO);
			q->ready = 0;
			break;
		}
	if (q->direct) /* in the client's pages already */
		q->delivered = !B->b->e[q->e].result;
	else if (--B->slot_left[q->slot] == 0 && !B->err && !B->gpu)
		slot_out(B, q->slot);
}

/* uring_rw_cb's: op @i has completed in full. */
static void op_done(void *arg, size_t i)
{
	struct batch *B = arg;
	size_t nd = B->nop;
	uint32_t k = B->op_piece[i < nd ? i : i - nd];

	if (--B->pc[k].left == 0 && !B->err)
		piece_done(B, k);
}

/*
 * Read the round's pieces, member reads (and checksum reads, with verify) in flight up to
 * the user's share of the queue depth (share_qd: a lone request 32 per member, 64 at
 * least, the ring's depth at most; cut by the users running requests and this user's
 * requests, 8 at least); each piece is checked the moment its last read arrives. Into a
 * host buffer a slot is copied out as soon as all its pieces are in, while the others are
 * still being read; to a GPU the slots are queued for their device copies once every read
 * of the round is in (a copy started at once reads a slot still in the cache of the core
 * that filled it, and slows the reads that follow: batches(records) into an H200 read
 * 3-12 % more samples/s so, docs/benchmarks.md; as copy_delay_us for placements). Then a
 * GPU's copies are waited for and the slots given back. Returns 0 (a piece that failed
 * has its entry's result set) or -errno for the whole request.
 */
static int run_round(struct batch *B)
{
	struct fs *fs = B->fs;
	size_t nd = B->nop, total = 0;
	int ret = 0;

	if (B->verify && nd) {
		for (size_t i = 0; i < nd; i++) {
			uint64_t p0, ca, cb;

			fs_csum_span(fs, &B->op[i], &p0, &ca, &cb);
			total += cb - ca;
		}
		if (total > B->cscap) {
			free(B->cs);
			B->cscap = 0;
			B->cs = util_aligned_alloc(total);
			if (!B->cs)
				ret = -ENOMEM;
			else
				B->cscap = total;
		}
		if (!ret && dm_grow(&B->op, &B->opcap, 2 * nd, sizeof(*B->op), 64))
			ret = -ENOMEM;
		total = 0;
		for (size_t i = 0; i < nd && !ret; i++) {
			uint64_t p0, ca, cb;
			struct uring_op *o = &B->op[nd + i];

			fs_csum_span(fs, &B->op[i], &p0, &ca, &cb);
			*o = B->op[i];
			o->buf = B->cs + total;
			o->off = ca;
			o->len = (uint32_t)(cb - ca);
			total += cb - ca;
		}
	}
	for (unsigned sl = 0; sl < B->nslots; sl++)
		B->slot_left[sl] = B->slot_n[sl];
	for (size_t k = 0; k < B->npc && !ret; k++) {
		B->pc[k].left = B->pc[k].nops * (B->verify ? 2 : 1);
		if (!B->pc[k].left) /* holes only: zeroed already */
			piece_done(B, (uint32_t)k);
	}
	if (!ret && nd) {
		uint64_t t = dm_mono_ns();

		/* the user's part of what one request may keep in flight alone, as placements */
		unsigned qd = share_qd(&B->pl->share, B->c->uid,
				       MIN(URING_DEPTH, MAX(QD_MIN, QD_PER_MEMBER * fs->n)));

		uring_rw_cb_qd(B->op, B->verify ? 2 * nd : nd, qd, op_done, B);
		B->t_io += dm_mono_ns() - t;
	}
	/* a mirror: what did not arrive whole comes from the other copy, then is done */
	for (size_t i = 0; i < nd && !ret && fs->mirror; i++) {
		uint32_t k = B->op_piece[i];
		int dfail = B->op[i].res != 0, cfail = B->verify && B->op[nd + i].res;

		if ((!dfail && !cfail) || B->op[i].res == -EFAULT)
			continue;
		if (fs_mirror_recover(fs, B->f[B->fidx[B->pc[k].e]].ip, &B->op[i], B->op_foff[i], 1,
				      B->pc[k].direct ? usermem_copy : NULL))
			continue; /* failed below */
		B->op[i].res = 0;
		if (cfail)
			B->op[nd + i].res = 0;
		if (dfail)
			op_done(B, i);
		if (cfail)
			op_done(B, nd + i);
	}
	/* what did not arrive whole: a member read failed (logged), or the ring did */
	for (size_t i = 0; i < nd && !ret; i++) {
		int err = B->op[i].res ? B->op[i].res : B->verify ? B->op[nd + i].res : 0;
		uint32_t k = B->op_piece[i];

		if (err == -EFAULT && B->pc[k].direct && B->op[i].res == -EFAULT) {
			/* the client's pages went away under a direct read: not the member's
			 * fault; the whole request fails, as a copy out would */
			if (!B->err)
				B->err = -EFAULT;
		} else if (err) {
			fs_io_error(fs, B->f[B->fidx[B->pc[k].e]].ip, &B->op[i], B->op_foff[i], "read");
			piece_fail(B, k, -EIO);
		}
	}
	/* a GPU's slots, and slots a failed read kept back: their good pieces go out now */
	for (unsigned sl = 0; sl < B->nslots && !ret && !B->err; sl++)
		if (!B->slot_out[sl])
			slot_out(B, sl);
	for (size_t k = 0; k < B->npc && !ret && !B->err; k++)
		if (!B->pc[k].delivered && !B->b->e[B->pc[k].e].result)
			piece_fail(B, (uint32_t)k, -EIO);
	{
		uint64_t t = dm_mono_ns();

		if (B->gpu && gpu_stream_sync(B->r->gpu, B->r->dev, B->stream) && !B->err)
			B->err = -ENODEV;
		B->t_sync += dm_mono_ns() - t;
	}
	put_slots(B);
	return ret ? ret : B->err;
}

/* A host buffer: is memory still behind every byte the entries write (reg_host_intact)? */
static int host_intact(const struct batch *B)
{
	struct dmafs_ioc_place *p = calloc(1, sizeof(*p));
	int ret;

	_Static_assert(DMAFS_BATCH_MAX <= DMAFS_PLACE_MAX, "a batch's ranges fit a placement's");
	if (!p)
		return -ENOMEM;
	for (uint32_t i = 0; i < B->b->count; i++)
		if (!B->b->e[i].result && B->b->e[i].length)
			p->e[p->count++] = (struct dmafs_place_entry){
				.buffer_offset = B->b->e[i].buffer_offset, .length = B->b->e[i].length };
	ret = reg_host_intact(B->r, p);
	free(p);
	return ret;
}

static int batch_io(struct batch *B)
{
	struct place *pl = B->pl;
	struct reg *r = B->r;
	int ret;

	if (r->target == DMAFS_TARGET_HOST) {
		ret = host_intact(B);
		if (ret)
			return ret;
	}

	B->gpu = r->target != DMAFS_TARGET_HOST;
	ret = B->gpu ? stage_get(pl->stages, r->target, r->gpu, r->dev, &B->st)
		     : stage_get(pl->stages, DMAFS_TARGET_HOST, NULL, 0, &B->st);
	if (ret)
		return ret;
	if (B->gpu) {
		/* a stream of its own: a sync then waits for this request's copies only */
		if (gpu_stream_create(r->gpu, r->dev, &B->stream))
			return -ENODEV;
	}
	stage_enter(B->st);
	for (;;) {
		if (B->c->stop.fn && B->c->stop.fn(B->c->stop.arg)) {
			ret = -EINTR;
			break;
		}
		uint64_t t = dm_mono_ns();

		ret = build_round(B, BATCH_ROUND_OPS);
		B->t_build += dm_mono_ns() - t;
		if (ret <= 0) {
			put_slots(B);
			break;
		}
		ret = run_round(B);
		if (ret)
			break;
	}
	stage_leave(B->st);
	if (B->stream)
		gpu_stream_destroy(r->gpu, r->dev, B->stream);
	return ret;
}

int place_batch(struct place *pl, const struct place_caller *c, struct dmafs_ioc_batch *b)
{
	struct batch B = { .pl = pl, .fs = pl->fs, .b = b, .c = c };
	uint64_t t0 = dm_mono_ns(), start, bytes = 0;
	uint32_t failed = 0;
	int ret;

	if (b->count > DMAFS_BATCH_MAX || b->flags)
		return -EINVAL;
	if (c->stop.fn && c->stop.fn(c->stop.arg))
		return -EINTR;
	ret = reg_get(pl, c, b->id, &B.r);
	if (ret)
		return ret;
	ret = batch_check(b, B.r->size);
	if (!ret)
		ret = proc_start(c->tgid, &start);
	if (ret) {
		reg_put(pl, B.r);
		return ret;
	}
	B.verify = pl->fs->set.verify_place;
	B.gran = B.verify ? DMAFS_BLOCK : 512;
	for (unsigned m = 0; m < pl->fs->n; m++)
		B.gran = MAX(B.gran, pl->fs->members[m].lbs);
	share_enter(&pl->share, c->uid);
	uint64_t t_hold = dm_mono_ns();

	ret = batch_hold(&B, start);
	t_hold = dm_mono_ns() - t_hold;
	if (!ret)
		ret = batch_io(&B);
	share_leave(&pl->share, c->uid);
	batch_release(&B);
	reg_put(pl, B.r);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < b->count; i++) {
		if (b->e[i].result) {
			b->e[i].length = 0;
			failed++;
		}
		bytes += b->e[i].length;
	}
	b->bytes = bytes;
	b->failed = failed;
	b->path = B.gpu ? DMAFS_PATH_STAGED : DMAFS_PATH_HOST;
	b->elapsed_ns = dm_mono_ns() - t0;
	log_debug("batch of %u samples (%u files) for pid %d: %llu bytes in %llu us: hold %llu, "
		  "build %llu, reads %llu (of which %u copies out %llu), device sync %llu",
		  b->count, B.nf, (int)c->tgid, (unsigned long long)bytes,
		  (unsigned long long)b->elapsed_ns / 1000, (unsigned long long)t_hold / 1000,
		  (unsigned long long)B.t_build / 1000, (unsigned long long)B.t_io / 1000,
		  B.ncopies, (unsigned long long)B.t_out / 1000, (unsigned long long)B.t_sync / 1000);
	return 0;
}
