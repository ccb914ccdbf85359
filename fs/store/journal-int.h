/* SPDX-License-Identifier: MIT */
/*
 * journal-int.h - inside the metadata log: where a generation's snapshot and batches are
 * (the log halves, or log areas of the data region: journal-area.c), for the replay,
 * commits and compaction of journal.c.
 */
#ifndef DMAFS_JOURNAL_INT_H
#define DMAFS_JOURNAL_INT_H

#include "store/journal.h"

static inline uint64_t jr_half_off(const struct journal *j, int half)
{
	return j->log_offset + (uint64_t)half * j->half;
}

/* Where a generation's log goes: in the log halves (len 0) or in two log areas. */
struct jr_geom {
	uint64_t len;
	struct fmt_area area[2][2];
};

/* The pieces of a generation in @half on log copy @c: its area's, or the half as one. */
void jr_loc_of(const struct journal *j, uint64_t ext_len, const struct fmt_area area[2][2],
	       int half, unsigned c, struct fmt_area *out);
/* Read @len bytes at @pos of location @loc on member @m into a fresh aligned buffer
 * (NULL with *@ret set on failure; -EIO past the location's end). */
uint8_t *jr_read_loc(struct member *m, const struct fmt_area *loc, uint64_t pos, uint64_t len,
		     int *ret);
/* Apply the records in @b[0, len) to @meta; *@p ends where decoding stopped (at the start
 * of the record that did not apply). 0, or the decoder's or meta_apply's error. */
int jr_apply_records(struct meta *meta, const uint8_t *b, size_t len, size_t *p);
/* The hash of the snapshot's @len bytes at @loc (after its header block). */
int jr_hash_snapshot(struct member *m, const struct fmt_area *loc, uint64_t len, uint64_t *h);
/* Apply the snapshot's @len bytes at @loc to @meta, hashing them into *@h; on a record
 * that does not decode or apply, *@bad is its offset in the snapshot. */
int jr_apply_snapshot(struct member *m, const struct fmt_area *loc, uint64_t len,
		      struct meta *meta, uint64_t *h, uint64_t *bad);
/* A snapshot is read this many bytes at a time (a multiple of the block; tests make it
 * small, so that records are cut between pieces). */
extern size_t jr_snap_piece;
/* Read @alen bytes (aligned) at @pos of location @loc on member @m into @b. */
int jr_read_loc_into(struct member *m, const struct fmt_area *loc, uint64_t pos, void *b,
		     uint64_t alen);
/* Write @len bytes (aligned) at @pos of the location of @half in every copy, then
 * fdatasync them. */
int jr_write_loc(struct journal *j, int half, const void *b, size_t len, uint64_t pos);
/* Write snapshot @p (@len bytes) into the location of @half from its block 1, padded to a
 * block and followed by a block of zeros, in every copy; then fdatasync them. */
int jr_write_snapshot(struct journal *j, int half, const uint8_t *p, size_t len);
/* Write the header block @b of @half in every copy, then fdatasync them. */
int jr_write_hdr(struct journal *j, int half, const void *b);
/* The place in use. */
void jr_geom_now(const struct journal *j, struct jr_geom *g);
/* Choose (taking the space of new areas) the next generation's place for @need bytes of
 * snapshot with its header and zero blocks; 0 or -ENOSPC. Caller holds meta.lock. */
int jr_plan_geometry(struct journal *j, uint64_t need, struct jr_geom *g);
/* Give the areas of @g back to the allocator. */
void jr_put_areas(struct journal *j, const struct jr_geom *g);
/* Make the filesystem format version 4 before a header names log areas. */
int jr_allow_areas(struct journal *j);

/* fdatasync the log copies still written (journal.dead); -EIO when none is left. */
int jr_sync_copies(struct journal *j);

#endif
