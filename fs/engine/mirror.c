// SPDX-License-Identifier: MIT
/*
 * mirror.c - the mirror data profile: two copies of every data block, the second on the
 * next member (format.h, fmt_mirror_of). Here: where the copies lie, which copy a read
 * takes (rows of stripe units alternately the first and the second; the other one when
 * a member serves no reads), and a member's failure. Writes of both copies are write.c's
 * (fs_data_write); a read that
 * fails, or whose checksum does not match, is served from the other copy, checked there,
 * and the bad copy rewritten from it by read.c (fs_mirror_recover). A member whose write
 * fails, or that is missing at mount, serves no reads any more, and the filesystem takes
 * no changes until it is replaced (dmafs-replace(8), rebuild.c): every block then has one
 * good copy, never a newer one on a member that might come back.
 */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fs_mirror_setup(struct fs *fs)
{
	const struct fmt_sb *sb = &fs->members[0].sb;

	fs->mirror = fmt_is_mirror(sb);
	fs->mirror_half = sb->mirror_half;
	pthread_mutex_init(&fs->heal_lock, NULL);
	for (unsigned i = 0; i < fs->n; i++) {
		fs->doff[i] = fs->members[i].sb.data_offset;
		atomic_store(&fs->mstate[i], fs->members[i].fd < 0 ? FS_MEMBER_MISSING : FS_MEMBER_OK);
	}
}

void fs_second_copy(const struct fs *fs, unsigned m, uint64_t moff, unsigned *m2, uint64_t *moff2)
{
	fmt_mirror_of(fs->doff, fs->n, fs->mirror_half, m, moff, m2, moff2);
}

void fs_other_copy(const struct fs *fs, const struct uring_op *op, struct uring_op *o)
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

void fs_pick_copy(struct fs *fs, struct uring_op *op, uint64_t foff)
{
	struct uring_op o;
	int second;

	if (!fs->mirror)
		return;
	/* rows of stripe units (one on every member) alternately from the first and the
	 * second copies: a long read keeps every member busy either way, and both copies
	 * are read, so a bad one is met (and rewritten) by reads too, not only by a scrub */
	second = (int)((foff / fs->su / fs->n) & 1);
	fs_other_copy(fs, op, &o);
	if (!fs_member_ok(fs, (unsigned)op->tag))
		second = 1;
	else if (!fs_member_ok(fs, (unsigned)o.tag))
		second = 0;
	if (second)
		*op = o;
}

void fs_member_failed(struct fs *fs, unsigned m, const char *what, int err)
{
	int ok = FS_MEMBER_OK;

	if (!fs->mirror || !atomic_compare_exchange_strong(&fs->mstate[m], &ok, FS_MEMBER_FAILED))
		return;
	/* no change from now on: a block written now would have one copy, and the failed
	 * member's other copies would be older than the log says when it came back */
	__atomic_store_n(&fs->failed_ro, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&fs->ro, 1, __ATOMIC_SEQ_CST);
	/* what was logged before goes on committing, to the other log copy if it was one */
	journal_member_dead(&fs->j, m);
	log_err("member %u (%s) failed (%s: %s): it serves no reads from now on, files are read from their other copies; the filesystem takes no changes (read-only) until the member is replaced with dmafs-replace, mounted or not (see dmafs-replace(8))",
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

