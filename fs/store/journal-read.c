// SPDX-License-Identifier: MIT
/* journal-read.c - reading the metadata log at mount: records applied with their inodes
 * asked for ahead, and a snapshot hashed or applied a piece at a time. */
#include "store/journal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "store/journal-int.h"

/* Records decoded ahead of the one applied: a million inodes do not fit the caches, so
 * each record's inode is asked for (bucket, then node) while earlier ones are applied. */
#define AHEAD 16

/* The inode that applying @r looks up first: a link's directory (its inode learns the
 * name later, meta_defer_names), else the record's inode. */
static uint64_t want(const struct fmt_rec *r) { return r->type == REC_LINK ? r->dir : r->ino; }

/* Apply the records in @b[0, len) to @meta; *@p ends where decoding stopped (at the start
 * of the record that did not apply). */
int jr_apply_records(struct meta *meta, const uint8_t *b, size_t len, size_t *p)
{
	struct fmt_rec q[AHEAD];
	size_t at[AHEAD], head = 0, n = 0, pos = *p;
	int dec = 1, ret;

	for (;;) {
		while (dec > 0 && n < AHEAD) { /* decode ahead, asking for each one's bucket */
			size_t k = (head + n) % AHEAD;

			at[k] = pos;
			dec = fmt_rec_decode(b, len, &pos, &q[k]);
			if (dec > 0) {
				meta_iget_prefetch(meta, want(&q[k]), 0);
				n++;
			}
		}
		if (!n)
			break;
		if (n > AHEAD / 2) /* the bucket of one half-way there is in by now: its node */
			meta_iget_prefetch(meta, want(&q[(head + AHEAD / 2) % AHEAD]), 1);
		ret = meta_apply(meta, &q[head]);
		if (ret) {
			*p = at[head];
			return ret;
		}
		head = (head + 1) % AHEAD;
		n--;
	}
	*p = pos; /* the end, or where a record did not decode */
	return dec;
}

size_t jr_snap_piece = 8 << 20;

/* The hash of the snapshot's @len bytes at @s->loc, read a piece at a time into one
 * buffer (a million files' snapshot is 160 MB, read whole only to be applied). */
int jr_hash_snapshot(struct member *m, const struct fmt_area *loc, uint64_t len, uint64_t *h)
{
	const size_t PIECE = jr_snap_piece;
	uint8_t *b = util_aligned_alloc(MIN(ALIGN_UP(len ? len : 1, DMAFS_BLOCK), PIECE));
	XXH3_state_t *st = XXH3_createState();
	int ret = b && st ? 0 : -ENOMEM;

	if (!ret)
		XXH3_64bits_reset(st);
	for (uint64_t at = 0; !ret && at < len; at += PIECE) {
		uint64_t k = MIN(len - at, PIECE);

		ret = jr_read_loc_into(m, loc, DMAFS_BLOCK + at, b, ALIGN_UP(k, DMAFS_BLOCK));
		if (!ret)
			XXH3_64bits_update(st, b, k);
	}
	if (!ret)
		*h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	free(b);
	return ret;
}

/*
 * Apply the snapshot's @len bytes at @s->loc to @meta a piece at a time, hashing them into
 * *@h on the way (read whole, a million files' snapshot took 160 MB of fresh pages). A
 * record cut by the end of a piece is carried in front of the next. On a record that does
 * not decode or apply, *@bad is its offset in the snapshot (else it is left alone).
 */
int jr_apply_snapshot(struct member *m, const struct fmt_area *loc, uint64_t len,
		      struct meta *meta, uint64_t *h, uint64_t *bad)
{
	/* CARRY holds the longest record (an xattr: its name and 64 KiB value) */
	enum { CARRY = 128 << 10 };
	const size_t PIECE = jr_snap_piece;
	uint8_t *b = util_aligned_alloc(CARRY + PIECE);
	XXH3_state_t *st = XXH3_createState();
	size_t tail = 0; /* bytes of a cut record just before b + CARRY */
	int ret = b && st ? 0 : -ENOMEM;

	if (!ret)
		XXH3_64bits_reset(st);
	for (uint64_t at = 0; !ret && at < len; at += PIECE) {
		uint64_t k = MIN(len - at, PIECE);
		uint8_t *r0 = b + CARRY - tail; /* the carried bytes, then this piece's */
		size_t n = tail + k, end = 0, p = 0;

		ret = jr_read_loc_into(m, loc, DMAFS_BLOCK + at, b + CARRY, ALIGN_UP(k, DMAFS_BLOCK));
		if (ret)
			break;
		XXH3_64bits_update(st, b + CARRY, k);
		if (at + k == len) /* the last piece: every record, cut or not, is decoded */
			end = n;
		while (end < n && end + 6 <= n && fmt_rec_len(r0 + end) <= n - end)
			end += fmt_rec_len(r0 + end);
		ret = jr_apply_records(meta, r0, end, &p);
		if (!ret && n - end > CARRY) {
			p = end; /* a record longer than any can be */
			ret = -EBADMSG;
		}
		if (ret) {
			*bad = at - tail + p;
			ret = ret < 0 ? ret : -EBADMSG;
			break;
		}
		memmove(b + CARRY - (n - end), r0 + end, n - end);
		tail = n - end;
	}
	if (!ret)
		*h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	free(b);
	return ret;
}
