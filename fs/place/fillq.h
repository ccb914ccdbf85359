/* SPDX-License-Identifier: MIT */
/*
 * fillq.h - fills of the warm tier left for later (mount option tier_fill=idle). A
 * placement then fills nothing: it reads the members into staging as without the tier,
 * and the chunks it missed are queued here. One thread reads them into the tier (a
 * prefetch, checksums checked) once no placement has run for FILLQ_IDLE_MS, a window at a
 * time, looking again between windows. A file is named by its inode number and
 * generation while it waits, and held (as an open holds it) only while a window of it is
 * read: one removed meanwhile is not filled, and nothing keeps its space.
 */
#ifndef DMAFS_FILLQ_H
#define DMAFS_FILLQ_H

#include <stdint.h>

struct fs;
struct inode;

#define FILLQ_IDLE_MS 50 /* no placement for this long: the queued fills go */

struct fillq;

/* Start the queue's thread for @fs (which has a tier) in *@out. Returns 0 or -errno. */
int fillq_start(struct fillq **out, struct fs *fs);
/* Stop the thread (a window being filled ends first) and drop what waits. @q NULL: nothing. */
void fillq_stop(struct fillq *q);
/* A placement starts (+1) or ends (-1). @q NULL: nothing. */
void fillq_busy(struct fillq *q, int delta);
/*
 * Queue the chunks of @ino's bytes [@from, @to) for filling, on behalf of @uid (the work
 * pool's turns). A range that meets the last one queued for the same file joins it. Best
 * effort: beyond FILLQ_MAX ranges, or out of memory, it is dropped; the ranges waiting
 * span at most the tier's size, and a range beyond that keeps its start (both counted as
 * dropped). @q NULL: nothing.
 */
void fillq_add(struct fillq *q, const struct inode *ino, uint64_t from, uint64_t to,
	       unsigned uid);
/* What the queue did: ranges waiting, bytes filled, ranges dropped. */
void fillq_stats(struct fillq *q, unsigned *waiting, uint64_t *filled, uint64_t *dropped);

#endif
