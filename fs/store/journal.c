// SPDX-License-Identifier: MIT
/* journal.c - metadata log replay, group commit and compaction. */
#include "store/journal.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/uring.h"
#include "store/journal-int.h"


/* Read @len bytes at @off of member @m into a fresh aligned buffer. */
static uint8_t *read_at(struct member *m, uint64_t off, uint64_t len, int *ret)
{
	uint64_t alen = ALIGN_UP(len ? len : 1, DMAFS_BLOCK);
	uint8_t *b = util_aligned_alloc(alen);

	if (!b) {
		*ret = -ENOMEM;
		return NULL;
	}
	*ret = member_pread(m, b, alen, off);
	if (*ret) {
		free(b);
		return NULL;
	}
	return b;
}

/* What a scan of one log copy found. */
struct scan {
	int ok;
	int half;
	struct fmt_loghdr hdr;
	struct fmt_area loc; /* where this generation's snapshot and batches are */
	uint64_t cap;
	uint64_t batches, last_seq, tail;
	int last_empty; /* the last batch carries no records: a clean unmount's mark */
	char why[256];
};

/*
 * Read both log headers of @m and choose the half to scan: the newer generation, or with
 * @older the one before it. Fills s->half and s->hdr.
 */
static int choose_half(struct journal *j, struct member *m, struct scan *s, int older)
{
	struct fmt_loghdr h[2];
	int valid[2], ret;
	uint8_t *b;

	for (int i = 0; i < 2; i++) {
		b = read_at(m, jr_half_off(j, i), DMAFS_BLOCK, &ret);
		if (!b) {
			snprintf(s->why, sizeof(s->why), "read error %s", strerror(-ret));
			return ret;
		}
		valid[i] = fmt_loghdr_decode(b, &h[i]) == 0 && !memcmp(h[i].fs_uuid, j->fs_uuid, 16);
		free(b);
	}
	if (!valid[0] && !valid[1]) {
		snprintf(s->why, sizeof(s->why), "no valid log header in either half");
		return -ENODATA;
	}
	s->half = valid[0] && valid[1] ? (h[1].gen > h[0].gen) : valid[1];
	if (older) {
		/* recovery: the previous generation, kept in the other half until the next
		 * compaction overwrites it */
		if (!(valid[0] && valid[1])) {
			snprintf(s->why, sizeof(s->why), "no older generation in the other half");
			return -ENODATA;
		}
		s->half = !s->half;
	}
	s->hdr = h[s->half];
	return 0;
}

/* Check the snapshot of the chosen half at @base, and with @meta non-NULL apply it. */
static int load_snapshot(struct journal *j, struct member *m, struct scan *s, struct meta *meta,
			 char *err, size_t errlen)
{
	uint64_t h = 0;
	int ret;

	if (s->hdr.snap_len > s->cap - DMAFS_BLOCK) {
		snprintf(s->why, sizeof(s->why), "snapshot length %llu exceeds the log %s",
			 (unsigned long long)s->hdr.snap_len, s->hdr.ext_len ? "area" : "half");
		return -EUCLEAN;
	}
	if (meta) {
		/* the check before the replay hashed this copy's snapshot already: a mismatch
		 * found now (the member read otherwise) still fails the mount */
		uint64_t bad = UINT64_MAX;

		meta_reserve(meta, s->hdr.snap_len / FMT_LOG_BYTES_PER_FILE);
		ret = jr_apply_snapshot(m, &s->loc, s->hdr.snap_len, meta, &h, &bad);
		if (ret && (bad == UINT64_MAX || ret == -ENOMEM)) {
			snprintf(err, errlen, "member %u (%s): metadata snapshot read error %s",
				 m->sb.member_index, m->path, strerror(-ret));
			return ret;
		}
		if (ret) {
			snprintf(err, errlen, "member %u (%s): metadata snapshot is inconsistent at byte %llu (%s); run dmafs-fsck",
				 m->sb.member_index, m->path, (unsigned long long)bad, strerror(-ret));
			return -EUCLEAN;
		}
	} else {
		ret = jr_hash_snapshot(m, &s->loc, s->hdr.snap_len, &h);
		if (ret) {
			snprintf(s->why, sizeof(s->why), "snapshot read error %s", strerror(-ret));
			return ret;
		}
	}
	if (h != s->hdr.snap_xxh3) {
		snprintf(s->why, sizeof(s->why), "snapshot checksum mismatch (half %c, gen %llu)",
			 'A' + s->half, (unsigned long long)s->hdr.gen);
		if (meta)
			snprintf(err, errlen, "member %u (%s): metadata log unusable: %s; run dmafs-fsck",
				 m->sb.member_index, m->path, s->why);
		return -EUCLEAN;
	}
	if (meta) {
		if (s->hdr.next_ino > meta->next_ino)
			meta->next_ino = s->hdr.next_ino;
		j->snap_len = s->hdr.snap_len;
		j->snap_inodes = meta->inodes.n;
	}
	return 0;
}

/*
 * The batch at @pos of the half at @base, read whole into a fresh buffer with its header in
 * @t, if it is the next one of this generation and intact; NULL where the log ends.
 */
static uint8_t *read_batch(struct journal *j, struct member *m, const struct scan *s,
			   uint64_t pos, struct fmt_txhdr *t)
{
	uint8_t *tb;
	int ret;

	if (pos + DMAFS_BLOCK > s->cap)
		return NULL;
	tb = jr_read_loc(m, &s->loc, pos, DMAFS_BLOCK, &ret);
	if (!tb)
		return NULL; /* an unreadable tail ends the log like a torn one */
	if (fmt_txhdr_decode(tb, t) || t->gen != s->hdr.gen || t->seq != s->last_seq + 1 ||
	    pos + fmt_tx_size(t->payload_len) > s->cap) {
		free(tb);
		return NULL;
	}
	if (fmt_tx_size(t->payload_len) > DMAFS_BLOCK) {
		free(tb);
		tb = jr_read_loc(m, &s->loc, pos, fmt_tx_size(t->payload_len), &ret);
		if (!tb)
			return NULL;
	}
	if (fmt_hash(tb + FMT_TX_HDR, t->payload_len) != t->payload_xxh3) {
		free(tb);
		return NULL;
	}
	return tb;
}

/*
 * Walk one copy: choose its active half, check the snapshot, then follow the batches.
 * With @meta non-NULL, apply everything as it goes (the replay proper).
 */
static int scan_copy(struct journal *j, struct member *m, struct scan *s, struct meta *meta,
		     int older, char *err, size_t errlen)
{
	struct fmt_txhdr t;
	uint8_t *tb;
	uint64_t pos;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = choose_half(j, m, s, older);
	if (ret)
		return ret;
	if (s->hdr.ext_len) {
		/* log areas: this copy's pieces inside its member's data region (the decoder
		 * checked the rest) */
		unsigned c = m->sb.member_index;

		for (int a = 0; a < 2; a++) {
			const struct fmt_area *ar = &s->hdr.area[a][c];

			for (uint32_t i = 0; i < ar->n; i++)
				if (ar->off[i] < m->sb.data_offset ||
				    ar->off[i] + ar->len[i] > m->sb.data_end) {
					snprintf(s->why, sizeof(s->why), "piece %u of log area %d (offset %llu, %llu bytes) is outside the data region",
						 i, a, (unsigned long long)ar->off[i],
						 (unsigned long long)ar->len[i]);
					return -EUCLEAN;
				}
			if (!ar->n || c >= j->ncopies) {
				snprintf(s->why, sizeof(s->why), "log area %d has no pieces on member %u", a, c);
				return -EUCLEAN;
			}
		}
		s->cap = s->hdr.ext_len;
	} else {
		s->cap = j->half;
	}
	jr_loc_of(j, s->hdr.ext_len, s->hdr.area, s->half, m->sb.member_index, &s->loc);
	ret = load_snapshot(j, m, s, meta, err, errlen);
	if (ret)
		return ret;
	pos = DMAFS_BLOCK + ALIGN_UP(s->hdr.snap_len, DMAFS_BLOCK);
	s->last_seq = s->hdr.first_seq - 1;
	while ((tb = read_batch(j, m, s, pos, &t))) {
		if (meta) {
			size_t p = 0;

			ret = jr_apply_records(meta, tb + FMT_TX_HDR, t.payload_len, &p);
			if (ret) {
				free(tb);
				snprintf(err, errlen,
					 "member %u (%s): metadata batch %llu is inconsistent at byte %zu (%s); run dmafs-fsck",
					 m->sb.member_index, m->path, (unsigned long long)t.seq, p,
					 strerror(-ret));
				return -EUCLEAN;
			}
		}
		free(tb);
		s->last_seq = t.seq;
		s->last_empty = t.payload_len == 0;
		s->batches++;
		pos += fmt_tx_size(t.payload_len);
	}
	s->tail = pos;
	s->ok = 1;
	return 0;
}

int journal_open(struct journal *j, struct member *ms, unsigned n, struct meta *meta, int ro,
		 int allow_older, char *err, size_t errlen)
{
	struct scan s[2];
	int best = -1, ret, older = 0;

	memset(j, 0, sizeof(*j));
	pthread_mutex_init(&j->commit_lock, NULL);
	pthread_rwlock_init(&j->inplace, NULL);
	pthread_mutex_init(&j->thread_lock, NULL);
	pthread_cond_init(&j->cond, NULL);
	j->meta = meta;
	j->members = ms;
	j->nmembers = n;
	j->ro = ro;
	j->log_offset = ms[0].sb.log_offset;
	j->half = ms[0].sb.log_half;
	memcpy(j->fs_uuid, ms[0].sb.fs_uuid, 16);
	j->ncopies = n >= 2 ? 2 : 1;
again:
	for (unsigned i = 0; i < j->ncopies; i++) {
		j->copy[i] = &ms[i];
		scan_copy(j, &ms[i], &s[i], NULL, older, err, errlen);
		if (!s[i].ok)
			continue;
		if (best < 0 || s[i].hdr.gen > s[best].hdr.gen ||
		    (s[i].hdr.gen == s[best].hdr.gen && s[i].last_seq > s[best].last_seq))
			best = i;
	}
	if (best < 0 && allow_older && !older) {
		older = 1;
		goto again;
	}
	if (best < 0) {
		snprintf(err, errlen, "member 0 (%s): metadata log unusable: %s%s%s; run dmafs-fsck",
			 ms[0].path, s[0].why, j->ncopies > 1 ? "; mirror on member 1: " : "",
			 j->ncopies > 1 ? s[1].why : "");
		return -EUCLEAN;
	}
	for (unsigned i = 0; i < j->ncopies; i++) {
		j->copy_ok[i] = s[i].ok;
		j->copy_differs[i] = s[i].ok && (s[i].hdr.gen != s[best].hdr.gen ||
						  s[i].last_seq != s[best].last_seq);
		snprintf(j->copy_why[i], sizeof(j->copy_why[i]), "%s", s[i].why);
		if (!s[i].ok && member_missing(&ms[i]))
			log_info("metadata log copy on member %u: the member is missing; using member %d's copy",
				 i, best);
		else if (!s[i].ok)
			log_warn("metadata log copy on member %u (%s) is damaged (%s); using member %d's copy",
				 i, ms[i].path, s[i].why, best);
		else if (i != (unsigned)best && (s[i].hdr.gen != s[best].hdr.gen ||
						 s[i].last_seq != s[best].last_seq))
			log_info("metadata log copies differ (member %u ends at gen %llu seq %llu, member %d at gen %llu seq %llu); using member %d",
				 i, (unsigned long long)s[i].hdr.gen, (unsigned long long)s[i].last_seq,
				 best, (unsigned long long)s[best].hdr.gen,
				 (unsigned long long)s[best].last_seq, best);
	}
	j->recovered_older = older;
	meta_defer_names(meta);
	ret = scan_copy(j, &ms[best], &s[best], meta, older, err, errlen);
	meta_names_done(meta);
	if (ret)
		return ret;
	j->active = s[best].half;
	j->ext_len = s[best].hdr.ext_len;
	memcpy(j->area, s[best].hdr.area, sizeof(j->area));
	j->gen = s[best].hdr.gen;
	j->next_seq = s[best].last_seq + 1;
	j->tail = s[best].tail;
	j->clean = s[best].last_empty && !older;
	for (unsigned i = 0; i < j->ncopies; i++)
		j->clean &= j->copy_ok[i] && !j->copy_differs[i];
	log_debug("replayed gen %llu: %llu batches from member %d%s",
		  (unsigned long long)j->gen, (unsigned long long)s[best].batches, best,
		  j->clean ? ", ending with a clean unmount" : "");
	return 0;
}

int journal_clean(const struct journal *j)
{
	uint64_t batches = j->tail - DMAFS_BLOCK - ALIGN_UP(j->snap_len, DMAFS_BLOCK);

	return j->clean && batches <= MAX((uint64_t)1 << 20, j->snap_len / 4);
}

int journal_mark_clean(struct journal *j)
{
	struct fmt_txhdr t;
	uint8_t *io;
	int ret = 0;

	if (j->ro)
		return 0;
	pthread_mutex_lock(&j->commit_lock);
	/* only after everything was committed; not into a log that needs compacting */
	if (j->failed || j->pending.len || __atomic_load_n(&j->compact_due, __ATOMIC_RELAXED) ||
	    j->tail + fmt_tx_size(0) > journal_cap(j))
		goto out;
	io = util_aligned_alloc(fmt_tx_size(0));
	if (!io) {
		ret = -ENOMEM;
		goto out;
	}
	memset(io, 0, fmt_tx_size(0));
	t.gen = j->gen;
	t.seq = j->next_seq;
	t.payload_len = 0;
	t.payload_xxh3 = fmt_hash(io, 0);
	fmt_txhdr_encode(&t, io);
	ret = jr_write_loc(j, j->active, io, fmt_tx_size(0), j->tail);
	free(io);
	if (!ret) {
		j->next_seq++;
		j->tail += fmt_tx_size(0);
	}
out:
	pthread_mutex_unlock(&j->commit_lock);
	return ret;
}

int journal_room(struct journal *j, size_t need)
{
	return j->tail + fmt_tx_size(j->pending.len + need) <= journal_cap(j);
}

int journal_log(struct journal *j, const struct fmt_rec *r)
{
	size_t mark = j->pending.len;
	int ret;

	if (j->ro)
		return -EROFS;
	if (j->failed)
		return -EIO;
	ret = fmt_rec_encode(&j->pending, r);
	if (ret)
		return ret;
	ret = meta_apply(j->meta, r);
	if (ret) {
		j->pending.len = mark;
		log_err("internal error: record type %u for inode %llu does not apply (%s)",
			r->type, (unsigned long long)r->ino, strerror(-ret));
	}
	return ret;
}

/* fdatasync every member written since the last commit: data before metadata. */
static int sync_data(struct journal *j)
{
	uint64_t mask = atomic_exchange(&j->dirty, 0) & ~atomic_load(&j->dead);
	int fds[FMT_MAX_MEMBERS];
	size_t n = 0;
	int ret;

	for (unsigned i = 0; i < j->nmembers; i++)
		if (mask & (1ull << i))
			fds[n++] = j->members[i].fd;
	ret = uring_fsync(fds, n);
	if (ret && j->member_failed) {
		/* one by one: a mirror goes on without a member whose sync fails */
		ret = 0;
		for (unsigned i = 0; i < j->nmembers; i++)
			if ((mask & (1ull << i)) && fdatasync(j->members[i].fd) &&
			    !journal_drop_member(j, i, -errno))
				ret = -EIO;
	}
	if (ret)
		atomic_fetch_or(&j->dirty, mask);
	return ret;
}

static void fail(struct journal *j, const char *what, int err)
{
	j->failed = 1;
	log_err("metadata log %s failed (%s); the filesystem refuses further changes until remounted",
		what, strerror(-err));
}

/*
 * Compaction body; caller holds commit_lock, not meta.lock. The snapshot covers every
 * record appended so far, so the pending batch is dropped, and frees queued before the
 * snapshot become reusable once it is durable.
 */
static int compact_locked(struct journal *j)
{
	struct buf snap = { 0 };
	struct alloc_deferred *freed = NULL;
	size_t nfreed = 0;
	struct fmt_loghdr h;
	struct jr_geom old, g;
	uint8_t *io;
	int ret, half;
	uint64_t snap_len, t0, t1;

	/* gen + 1 must exceed gen, or the next mount would replay the half it replaces */
	if (j->gen == UINT64_MAX)
		return -EOVERFLOW;
	/*
	 * Room for about the last snapshot, its pages touched before the metadata is locked:
	 * growing the buffer while encoding faulted in 160 MB at a million files, a third of
	 * the time every request of the mount waited for the lock.
	 */
	if (j->snap_len >= (1 << 20) && !buf_reserve(&snap, j->snap_len + j->snap_len / 8))
		memset(snap.p, 0, snap.cap);
	pthread_rwlock_wrlock(&j->inplace);
	pthread_mutex_lock(&j->meta->lock);
	t0 = dm_mono_ns();
	ret = meta_snapshot(j->meta, &snap);
	t1 = dm_mono_ns();
	if (!ret)
		ret = jr_plan_geometry(j, DMAFS_BLOCK + ALIGN_UP(snap.len, DMAFS_BLOCK) + DMAFS_BLOCK, &g);
	if (ret) {
		pthread_mutex_unlock(&j->meta->lock);
		pthread_rwlock_unlock(&j->inplace);
		if (ret == -ENOSPC)
			log_warn("metadata snapshot (%zu bytes) does not fit the log (%llu bytes): delete files to make room",
				 snap.len, (unsigned long long)journal_cap(j));
		buf_free(&snap);
		return ret;
	}
	if (j->meta->alloc)
		nfreed = alloc_take_deferred(j->meta->alloc, &freed);
	half = !j->active;
	memset(&h, 0, sizeof(h));
	memcpy(h.fs_uuid, j->fs_uuid, 16);
	/* a version 2 log stays one until fs_mount upgrades; areas need version 4 */
	h.version = g.len ? MAX(j->copy[0]->sb.version, FMT_VERSION_GROW) : j->copy[0]->sb.version;
	h.gen = j->gen + 1;
	h.first_seq = j->next_seq;
	h.next_ino = j->meta->next_ino;
	h.snap_len = snap.len;
	h.snap_xxh3 = fmt_hash(snap.p, snap.len);
	h.ext_len = g.len;
	memcpy(h.area, g.area, sizeof(h.area));
	jr_geom_now(j, &old);
	j->snap_len = snap.len;
	j->snap_inodes = j->meta->inodes.n;
	j->active = half;
	j->gen = h.gen;
	j->ext_len = g.len;
	memcpy(j->area, g.area, sizeof(j->area));
	j->tail = DMAFS_BLOCK + ALIGN_UP(snap.len, DMAFS_BLOCK);
	j->pending.len = 0;
	atomic_fetch_add(&j->epoch, 1);
	pthread_mutex_unlock(&j->meta->lock);
	pthread_rwlock_unlock(&j->inplace);

	ret = sync_data(j);
	if (!ret && g.len)
		ret = jr_allow_areas(j);
	/* the snapshot, then a block of zeros so a stale batch there can never follow it */
	if (!ret)
		ret = jr_write_snapshot(j, half, snap.p, snap.len);
	if (!ret) {
		io = util_aligned_alloc(DMAFS_BLOCK);
		if (!io)
			ret = -ENOMEM;
	}
	if (!ret) {
		fmt_loghdr_encode(&h, io);
		ret = jr_write_hdr(j, half, io);
		free(io);
	}
	snap_len = snap.len;
	buf_free(&snap);
	malloc_trim(0); /* the snapshot's pages (~150 bytes per file) go back to the system */
	if (ret) {
		fail(j, "compaction", ret);
		free(freed);
		return ret;
	}
	j->compactions++;
	log_debug("metadata log compacted: a snapshot of %llu bytes made in %.3f s (metadata locked), written in %.3f s",
		  (unsigned long long)snap_len, (t1 - t0) / 1e9, (dm_mono_ns() - t1) / 1e9);
	if (memcmp(&old, &g, sizeof(g))) {
		char h1[32], h2[32];

		/* the new header is durable in every copy: nothing reads the old place now */
		if (j->meta->alloc)
			jr_put_areas(j, &old);
		if (g.len)
			log_info("metadata log moved to two areas of %s in %u and %u pieces on member 0 (snapshot %s)",
				 util_fmt_size(g.len, h1, sizeof(h1)), g.area[0][0].n, g.area[1][0].n,
				 util_fmt_size(snap_len, h2, sizeof(h2)));
		else
			log_info("metadata log moved back into its log halves (snapshot %s)",
				 util_fmt_size(snap_len, h2, sizeof(h2)));
	}
	if (j->meta->alloc)
		alloc_release_deferred(j->meta->alloc, freed, nfreed);
	else
		free(freed);
	return 0;
}

int journal_compact(struct journal *j)
{
	int ret;

	if (j->ro)
		return -EROFS;
	pthread_mutex_lock(&j->commit_lock);
	if (!j->failed)
		__atomic_store_n(&j->compact_due, 0, __ATOMIC_RELAXED);
	ret = j->failed ? -EIO : compact_locked(j);
	pthread_mutex_unlock(&j->commit_lock);
	return ret;
}

int journal_make_room(struct journal *j, size_t need)
{
	int room;

	if (j->ro)
		return -EROFS;
	pthread_mutex_lock(&j->commit_lock);
	pthread_mutex_lock(&j->meta->lock);
	room = journal_room(j, need);
	pthread_mutex_unlock(&j->meta->lock);
	pthread_mutex_unlock(&j->commit_lock);
	/* another thread's compaction, which this one waited for, made the room */
	return room ? 0 : journal_compact(j);
}

void journal_compact_first(struct journal *j)
{
	if (!j->ro)
		__atomic_store_n(&j->compact_due, 1, __ATOMIC_RELAXED);
}

int journal_commit(struct journal *j)
{
	struct alloc_deferred *freed = NULL;
	size_t nfreed = 0, size;
	struct fmt_txhdr t;
	uint8_t *io = NULL;
	uint64_t pos;
	int ret;

	if (j->ro)
		return 0;
	pthread_mutex_lock(&j->commit_lock);
	if (j->failed) {
		pthread_mutex_unlock(&j->commit_lock);
		return -EIO;
	}
	if (__atomic_exchange_n(&j->compact_due, 0, __ATOMIC_RELAXED)) {
		/* the first commit since the mount (journal_compact_first) */
		ret = compact_locked(j);
		if (ret && ret != -ENOSPC && !j->failed) /* -ENOMEM: still due, next time */
			__atomic_store_n(&j->compact_due, 1, __ATOMIC_RELAXED);
		if (ret != -ENOSPC) {
			pthread_mutex_unlock(&j->commit_lock);
			return ret;
		}
		/* keep appending to the current half; deletes will make room */
		log_warn("metadata log is full; only deletions will succeed until space is freed");
	}
	pthread_rwlock_wrlock(&j->inplace);
	pthread_mutex_lock(&j->meta->lock);
	if (j->before_take)
		j->before_take(j->take_arg);
	if (j->pending.len == 0) {
		pthread_mutex_unlock(&j->meta->lock);
		pthread_rwlock_unlock(&j->inplace);
		/* nothing new in metadata, but data may have been written */
		ret = sync_data(j);
		pthread_mutex_unlock(&j->commit_lock);
		return ret;
	}
	size = fmt_tx_size(j->pending.len);
	if (j->tail + size > journal_cap(j)) {
		pthread_mutex_unlock(&j->meta->lock);
		pthread_rwlock_unlock(&j->inplace);
		ret = compact_locked(j);
		pthread_mutex_unlock(&j->commit_lock);
		return ret;
	}
	io = util_aligned_alloc(size);
	if (!io) {
		pthread_mutex_unlock(&j->meta->lock);
		pthread_rwlock_unlock(&j->inplace);
		pthread_mutex_unlock(&j->commit_lock);
		return -ENOMEM;
	}
	memset(io + size - DMAFS_BLOCK, 0, DMAFS_BLOCK);
	memcpy(io + FMT_TX_HDR, j->pending.p, j->pending.len);
	t.gen = j->gen;
	t.seq = j->next_seq++;
	t.payload_len = j->pending.len;
	t.payload_xxh3 = fmt_hash(j->pending.p, j->pending.len);
	fmt_txhdr_encode(&t, io);
	pos = j->tail;
	j->tail += size;
	j->pending.len = 0;
	atomic_fetch_add(&j->epoch, 1);
	if (j->meta->alloc)
		nfreed = alloc_take_deferred(j->meta->alloc, &freed);
	pthread_mutex_unlock(&j->meta->lock);
	pthread_rwlock_unlock(&j->inplace);

	ret = sync_data(j);
	if (!ret)
		ret = jr_write_loc(j, j->active, io, size, pos);
	free(io);
	if (ret) {
		fail(j, "write", ret);
		free(freed);
	} else {
		j->commits++;
		if (j->meta->alloc)
			alloc_release_deferred(j->meta->alloc, freed, nfreed);
		else
			free(freed);
	}
	pthread_mutex_unlock(&j->commit_lock);
	return ret;
}

static void *commit_thread(void *arg)
{
	struct journal *j = arg;
	int first = 1;

	pthread_mutex_lock(&j->thread_lock);
	while (!j->stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += j->interval;
		/* a compaction due since the mount runs at once (journal_compact_first) */
		if (!first || !__atomic_load_n(&j->compact_due, __ATOMIC_RELAXED))
			pthread_cond_timedwait(&j->cond, &j->thread_lock, &ts);
		first = 0;
		if (j->stop)
			break;
		pthread_mutex_unlock(&j->thread_lock);
		if (j->before_commit)
			j->before_commit(j->before_arg);
		journal_commit(j);
		pthread_mutex_lock(&j->thread_lock);
	}
	pthread_mutex_unlock(&j->thread_lock);
	return NULL;
}

int journal_start(struct journal *j, unsigned interval)
{
	int ret;

	if (j->ro)
		return 0;
	j->interval = interval ? interval : 5;
	ret = pthread_create(&j->thread, NULL, commit_thread, j);
	if (ret)
		return -ret;
	j->thread_running = 1;
	return 0;
}

void journal_stop(struct journal *j)
{
	if (!j->thread_running)
		return;
	pthread_mutex_lock(&j->thread_lock);
	j->stop = 1;
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->thread_lock);
	pthread_join(j->thread, NULL);
	j->thread_running = 0;
}

int journal_format(struct member *ms, unsigned n, const struct buf *snap, uint64_t next_ino)
{
	uint64_t half = ms[0].sb.log_half, off = ms[0].sb.log_offset;
	size_t slen = ALIGN_UP(snap->len, DMAFS_BLOCK);
	size_t len = 2 * DMAFS_BLOCK + slen;
	uint8_t *io = util_aligned_alloc(len);
	struct fmt_loghdr h;
	int ret = 0;

	if (!io)
		return -ENOMEM;
	if (len > half) {
		free(io);
		return -ENOSPC;
	}
	memset(io, 0, len);
	memset(&h, 0, sizeof(h));
	memcpy(h.fs_uuid, ms[0].sb.fs_uuid, 16);
	h.version = ms[0].sb.version;
	h.gen = 1;
	h.first_seq = 1;
	h.next_ino = next_ino;
	h.snap_len = snap->len;
	h.snap_xxh3 = fmt_hash(snap->p, snap->len);
	fmt_loghdr_encode(&h, io);
	memcpy(io + DMAFS_BLOCK, snap->p, snap->len);
	for (unsigned i = 0; i < n && i < 2; i++) {
		uint8_t *zero = util_aligned_alloc(DMAFS_BLOCK);

		if (!zero) {
			ret = -ENOMEM;
			break;
		}
		memset(zero, 0, DMAFS_BLOCK);
		/* half B header cleared so an old filesystem's log cannot be picked up */
		ret = member_pwrite(&ms[i], zero, DMAFS_BLOCK, off + half);
		free(zero);
		if (!ret)
			ret = member_pwrite(&ms[i], io, len, off);
		if (!ret && fdatasync(ms[i].fd) < 0)
			ret = -errno;
		if (ret)
			break;
	}
	free(io);
	return ret;
}

int journal_set_uuid(struct member *ms, unsigned n, const uint8_t old[16], const uint8_t uuid[16])
{
	uint8_t *b = util_aligned_alloc(DMAFS_BLOCK);
	struct fmt_loghdr h;
	int ret = 0;

	if (!b)
		return -ENOMEM;
	for (unsigned i = 0; i < n && !ret; i++) {
		const struct fmt_sb *sb = &ms[i].sb;

		if (!fmt_has_log(i) || !sb->log_offset)
			continue;
		for (int half = 0; half < 2 && !ret; half++) {
			uint64_t off = sb->log_offset + (uint64_t)half * sb->log_half;

			ret = member_pread(&ms[i], b, DMAFS_BLOCK, off);
			if (ret || fmt_loghdr_decode(b, &h) || memcmp(h.fs_uuid, old, 16))
				continue; /* no header of ours there (the other half of a new log) */
			memcpy(h.fs_uuid, uuid, 16);
			fmt_loghdr_encode(&h, b);
			ret = member_pwrite(&ms[i], b, DMAFS_BLOCK, off);
		}
		if (!ret && fdatasync(ms[i].fd) < 0)
			ret = -errno;
	}
	free(b);
	return ret;
}
