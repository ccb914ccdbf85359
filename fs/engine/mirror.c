// SPDX-License-Identifier: MIT
/*
 * mirror.c - the mirror data profile: two copies of every data block, the second on the
 * next member (format.h, fmt_mirror_of). Writes write both copies; reads take the first
 * copy while its member serves reads and the second when it does not; a read that fails,
 * or whose checksum does not match, is served from the other copy, checked there, and the
 * bad copy is rewritten from it (self-heal). A member whose write fails, or that is
 * missing at mount, serves no reads any more, and the filesystem takes no changes until
 * it is replaced (dmafs-replace(8)): every block then has one good copy, never a newer
 * one on a member that might come back.
 */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

void fs_mirror_setup(struct fs *fs)
{
	const struct fmt_sb *sb = &fs->members[0].sb;

	fs->mirror = fmt_is_mirror(sb);
	fs->mirror_half = sb->mirror_half;
	for (unsigned i = 0; i < fs->n; i++) {
		fs->doff[i] = fs->members[i].sb.data_offset;
		atomic_store(&fs->mstate[i], fs->members[i].fd < 0 ? FS_MEMBER_MISSING : FS_MEMBER_OK);
	}
}

void fs_second_copy(const struct fs *fs, unsigned m, uint64_t moff, unsigned *m2, uint64_t *moff2)
{
	fmt_mirror_of(fs->doff, fs->n, fs->mirror_half, m, moff, m2, moff2);
}

/* The other copy of the bytes @op addresses (either copy). */
static void other_copy(const struct fs *fs, const struct uring_op *op, struct uring_op *o)
{
	unsigned m2;
	uint64_t off2;

	fmt_mirror_other(fs->doff, fs->n, fs->mirror_half, (unsigned)op->tag, op->off, &m2, &off2);
	*o = *op;
	o->fd = fs->members[m2].fd;
	o->tag = (int)m2;
	o->off = off2;
	o->res = 0;
	o->recovered = 0;
}

void fs_pick_copy(struct fs *fs, struct uring_op *op)
{
	if (fs->mirror && !fs_member_ok(fs, (unsigned)op->tag)) {
		struct uring_op o;

		other_copy(fs, op, &o);
		*op = o;
	}
}

void fs_member_failed(struct fs *fs, unsigned m, const char *what, int err)
{
	int ok = FS_MEMBER_OK;

	if (!fs->mirror || !atomic_compare_exchange_strong(&fs->mstate[m], &ok, FS_MEMBER_FAILED))
		return;
	/* no change from now on: a block written now would have one copy, and the failed
	 * member's other copies would be older than the log says when it came back */
	__atomic_store_n(&fs->ro, 1, __ATOMIC_SEQ_CST);
	/* what was logged before goes on committing, to the other log copy if it was one */
	journal_member_dead(&fs->j, m);
	log_err("member %u (%s) failed (%s: %s): it serves no reads from now on, files are read from their other copies; the filesystem takes no changes (read-only) until the member is replaced: unmount, then dmafs-replace (see dmafs-replace(8))",
		m, fs->members[m].path, what, strerror(err < 0 ? -err : err));
}

/* The journal's member_failed: a mirror goes on without the member (read-only). */
static int journal_failed(void *arg, unsigned m, int err)
{
	struct fs *fs = arg;

	fs_member_failed(fs, m, "metadata write or sync", err);
	return fs->mirror;
}

void fs_mirror_journal(struct fs *fs)
{
	if (!fs->mirror)
		return;
	fs->j.member_failed = journal_failed;
	fs->j.member_failed_arg = fs;
	for (unsigned i = 0; i < fs->n; i++)
		if (!fs_member_ok(fs, i))
			journal_member_dead(&fs->j, i);
}

int fs_data_write(struct fs *fs, const struct inode *ino, struct uring_op *ops, size_t n,
		  const uint64_t *foffs)
{
	struct uring_op *all = ops;
	uint64_t *af = (uint64_t *)foffs;
	size_t total = n;
	int ret;

	if (fs->mirror && n) {
		if (__atomic_load_n(&fs->ro, __ATOMIC_SEQ_CST))
			return -EROFS; /* a member failed: see fs_member_failed */
		all = malloc(2 * n * sizeof(*all));
		af = malloc(2 * n * sizeof(*af));
		if (!all || !af) {
			free(all);
			free(af);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++) {
			all[i] = ops[i];
			af[i] = af[n + i] = foffs[i];
			other_copy(fs, &ops[i], &all[n + i]);
		}
		total = 2 * n;
	}
	ret = run_ops(fs, ino, all, total, af, "write");
	if (ret && fs->mirror)
		for (size_t i = 0; i < total; i++)
			if (all[i].res)
				fs_member_failed(fs, (unsigned)all[i].tag, "write", all[i].res);
	if (!ret)
		ret = fs_csum_store(fs, all, total); /* also marks the members dirty */
	if (all != ops) {
		free(all);
		free(af);
	}
	return ret;
}

/* Check @len bytes at @buf, read from @op's place, against that place's checksums. */
static int check_copy(struct fs *fs, const struct uring_op *op)
{
	uint64_t p0, ca, cb;
	struct uring_op c;
	char *cs;
	int ret;

	fs_csum_span(fs, op, &p0, &ca, &cb);
	cs = util_aligned_alloc(cb - ca);
	if (!cs)
		return -ENOMEM;
	c = (struct uring_op){ .fd = op->fd, .buf = cs, .len = (uint32_t)(cb - ca), .off = ca,
			       .tag = op->tag };
	ret = uring_rw(&c, 1) ? -EIO : 0;
	for (uint32_t k = 0; !ret && k < op->len; k += DMAFS_BLOCK)
		if (fmt_csum((const char *)op->buf + k, (uint32_t)op->tag, op->off + k) !=
		    get_u64((const uint8_t *)cs + (p0 - ca) + k / DMAFS_BLOCK * 8))
			ret = -EIO;
	free(cs);
	return ret;
}

static int copy_plain(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

int fs_mirror_recover(struct fs *fs, const struct inode *ino, struct uring_op *op, uint64_t foff,
		      int io_err, int (*copy)(void *dst, const void *src, size_t n))
{
	unsigned bad = (unsigned)op->tag;
	struct fs_mstat *st = &fs->mst[bad];
	struct uring_op o;
	const char *how;
	uint64_t nbad = 0;
	char *priv;
	int ret;

	if (!fs->mirror)
		return -EIO;
	other_copy(fs, op, &o);
	if (!fs_member_ok(fs, (unsigned)o.tag)) {
		log_err("inode %llu file offset %llu: the %s of member %u (%s) at offset %llu failed, and the other copy's member %u is %s: no good copy",
			(unsigned long long)ino->ino, (unsigned long long)foff,
			io_err ? "read" : "checksum", bad, fs->members[bad].path,
			(unsigned long long)op->off, o.tag,
			atomic_load(&fs->mstate[o.tag]) == FS_MEMBER_MISSING ? "missing" : "failed");
		return -EIO;
	}
	/* the daemon's own memory: what is checked is what the bad copy is rewritten from
	 * (a client could change its pages between the two) */
	priv = util_aligned_alloc(op->len);
	if (!priv)
		return -ENOMEM;
	o.buf = priv;
	ret = uring_rw(&o, 1);
	if (ret) {
		fs_io_error(fs, ino, &o, foff, "read");
		ret = -EIO;
	} else if ((ret = check_copy(fs, &o))) {
		log_err("inode %llu file offset %llu (+%u bytes): both copies are damaged (member %u offset %llu: %s; member %u offset %llu: checksum mismatch); reads of it fail with EIO",
			(unsigned long long)ino->ino, (unsigned long long)foff, op->len, bad,
			(unsigned long long)op->off, io_err ? "read error" : "checksum mismatch",
			o.tag, (unsigned long long)o.off);
	}
	if (ret) {
		free(priv);
		return ret;
	}
	/* the blocks that were bad: all after a read error; else those that differ (the
	 * copy read first is the daemon's own memory then: fs_verify_or_recover's callers) */
	for (uint32_t k = 0; k < op->len; k += DMAFS_BLOCK)
		nbad += io_err || memcmp((const char *)op->buf + k, priv + k, DMAFS_BLOCK);
	atomic_fetch_add(&st->bad, nbad);
	/* self-heal: the bad copy rewritten in place, with its checksums (the caller's iolock
	 * keeps writers of this file out; the block's contents do not change) */
	if (!__atomic_load_n(&fs->ro, __ATOMIC_SEQ_CST) && !fs->members_ro && fs_member_ok(fs, bad)) {
		struct uring_op w = *op;

		w.write = 1;
		w.buf = priv;
		w.res = 0;
		w.recovered = 0;
		if (uring_rw(&w, 1) || fs_csum_store(fs, &w, 1)) {
			fs_member_failed(fs, bad, "rewriting a bad copy", w.res ? w.res : -EIO);
			how = "could not be rewritten";
		} else {
			atomic_fetch_add(&st->healed, nbad);
			how = "rewritten from it";
		}
	} else {
		how = "left as it is (a read-only mount: dmafs-fsck --scrub --repair rewrites it)";
	}
	if (!atomic_exchange(&st->said, 1))
		log_warn("member %u (%s): %s at member offset %llu (inode %llu file offset %llu, %u bytes): read from the copy on member %u instead, the bad copy %s; later ones on this member are counted in user.dmafs.members, not logged",
			 bad, fs->members[bad].path, io_err ? "read error" : "checksum mismatch",
			 (unsigned long long)op->off, (unsigned long long)ino->ino,
			 (unsigned long long)foff, op->len, o.tag, how);
	ret = (copy ? copy : copy_plain)(op->buf, priv, op->len);
	free(priv);
	if (!ret)
		op->recovered = 1;
	return ret;
}

int fs_verify_or_recover(struct fs *fs, const struct inode *ino, struct uring_op *op,
			 const void *csums, uint64_t foff,
			 int (*copy)(void *dst, const void *src, size_t n))
{
	if (!fs_verify_read(fs, ino, op, csums, foff))
		return 0;
	return fs->mirror ? fs_mirror_recover(fs, ino, op, foff, 0, copy) : -EIO;
}
