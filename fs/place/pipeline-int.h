/* SPDX-License-Identifier: MIT */
/*
 * pipeline-int.h - what the placement pipeline's files share: its pieces, the records
 * they are read into and the pipe that moves them (pipeline.h says how). pipeline.c runs
 * a placement or prefetch, pipeline-drive.c moves its records along, pipeline-build.c
 * cuts the pieces and builds the records; calls go in that order, never back. Nothing
 * outside fs/place/ includes it.
 */
#ifndef DMAFS_PLACE_PIPELINE_INT_H
#define DMAFS_PLACE_PIPELINE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "engine/tier.h"
#include "io/uring.h"
#include "io/workpool.h"
#include "place/pipeline.h"

#define PIECE STAGE_SLOT	 /* file window a piece stays inside */
#define MAX_RECS 1024
#define POLL_US 50		 /* wait slice while copies or hashing are outstanding */
#define PACK_MAX 256		 /* pieces packed into one slot at most */
/*
 * A copy out of the tier takes chunks that follow one another in the file, the target and
 * tier memory at once, up to this much: from pinned memory, device copies of 1 MiB each
 * reach 48 GB/s on an H100, of 8 MiB 54, of 64 MiB 55 (dmafs(8), Warm tier).
 */
#define TIER_COPY_MAX (16u << 20)

_Static_assert(TIER_CHUNK == PIECE, "a piece lies inside one chunk of the warm tier");

/* A piece: file bytes [off, off + len) go to buffer offset dst. */
struct piece {
	uint64_t off, len, dst;
	int direct; /* read straight into the client's pages (host, block aligned) */
	int whole;  /* a whole chunk of the warm tier (to the end of the file in the last) */
};

struct pipe;

/* One member read of a piece in flight. */
struct pop {
	struct uring_op op;
	uint64_t foff;	/* file offset of the op's first byte (data reads) */
	uint32_t done;	/* bytes transferred so far */
	struct rec *rec;
	const char *csum; /* data reads with checksums: where the checksum blocks of its
			   * first block begin (fs_verify_read's @csums) */
};

/*
 * A slot's worth in flight: read, then (verified and) delivered, then released. Small
 * pieces whose destinations follow one another share a slot (a row slice of a matrix is
 * one piece per row): each is read on its own, aligned to the members' sector, and the
 * slot is packed (memmove) before one device copy takes them all.
 */
struct rec {
	struct work w;		/* with the hash pool */
	struct rec *next;	/* copy FIFO, hash queue, verified list */
	struct pipe *p;
	const struct piece *pc;	/* pc[0 .. npc) */
	unsigned npc;
	uint32_t *from;		/* slot offset of each piece's first byte */
	size_t fcap;
	uint64_t len;		/* bytes of all its pieces */
	uint32_t pitch;		/* with npc > 1: the pieces are alike, this far apart in the
				 * slot (one 2-D device copy takes them); 0: they are not */
	int slot;		/* staging slot, or -1 when direct or from the tier to the host */
	char *buf;		/* the slot (direct: the client's pages at pc[0].dst; tier: the chunk) */
	struct tier_chunk *tc;	/* the tier chunk it is placed from, or read into (fill) */
	int fill;		/* read into tc, published once verified */
	int verify;		/* its checksum reads follow its data reads in ops */
	int copied;		/* a host target's copy is done (on the hash pool) */
	int csum_err;		/* a checksum read failed: its data comes from the other copy
				 * of a mirror (rec_verify) */
	unsigned left;		/* reads outstanding */
	int err;
	struct pop *ops;	/* data reads [0, nd), then their checksum reads [nd, 2 nd) */
	unsigned nd, nops;
	size_t cap;
	char *cbuf;		/* checksum blocks */
	size_t ccap;
	uint64_t t_sub, t_copy;	/* when its reads went out, when its copy was queued */
	uint64_t t_ready;	/* when it joined the ready list */
};

/* What a placement waited on, logged at debug level when it ends. */
struct pstats {
	uint64_t t0, last;
	uint64_t held_ns, inflight_ns;	/* time-weighted: slots held, reads in flight */
	uint64_t read_ns, copy_ns;	/* summed over pieces */
	uint64_t nread, ncopy, nops;
	uint64_t wait_ns[4];		/* in wait_some: reads, copies, hashing, no slot */
	uint64_t starved;
};

struct pipe {
	struct fs *fs;
	struct inode *ino;
	const struct pipe_target *t;
	int verify;
	uint64_t gran;		/* slot reads are aligned to this (read_granule) */
	struct tier *tier;	/* the warm tier, or NULL */
	uint64_t tgen;		/* the file's tier generation before any read went out */
	uint64_t fsize;		/* the file's size (fixed: the caller holds iolock) */
	struct io_uring *ring;
	struct stage *st;	/* slots: the GPU pool, or the host bounce pool once needed */
	int entered;		/* stage_enter() done on st */
	void *stream;
	struct piece *pc;
	size_t npc, next;
	struct rec *recs, **free_recs;
	unsigned nrecs, nfree_recs;
	struct rec *pending;	/* built but not submitted: the queue was full */
	unsigned held;		/* slots held */
	unsigned qd, inflight;	/* member reads in flight (limit, now) */
	unsigned hashing;	/* pieces with the hash pool */
	struct rec *rd_head, *rd_tail; /* read (and verified), device copy not queued yet */
	struct rec *cq_head, *cq_tail; /* device copies in flight, in stream order */
	int starved;		/* the last issue found no slot */
	int err;
	pthread_mutex_t vlock;
	pthread_cond_t vcond;
	struct rec *verified;	/* back from the hash pool; protected by vlock */
	struct pstats *ps;	/* NULL unless debug logging is on */
	struct pipe_fill *fo;	/* a prefetch: no target, whole chunks read into the warm
				 * tier only, counted here; NULL for a placement */
	uint64_t tier_bytes;	/* a placement: bytes of its pieces placed from the tier */
	int nofill;		/* tier_fill=idle: a placement fills nothing, it notes... */
	uint64_t miss_from, miss_to; /* ...the whole chunks it missed, [from, to) */
	/*
	 * Chunks copied out of the tier that no record holds any more: a GPU target's
	 * records hold no staging slot (the chunk is the source, pinned), so they are not
	 * bounded by the pool, and their chunks stay referenced until the placement's stream
	 * is synchronised at its end; the chunks join_hits added to a record, of any target,
	 * stay until then too.
	 */
	struct tier_chunk **keep;
	size_t nkeep, keepcap;
	/* checksum blocks read ahead for the verified reads (csum_ahead), by member, offset */
	struct cspan *cs;
	size_t ncs;
	char *csbuf;
	const struct tier_chunk *last_fill; /* the chunk it reserved last: the next goes after */
	const struct pipe_stop *stop; /* the request's: asked before each record is built */
	struct share *share;	/* the user's part of qd (share.h), or NULL: all of it */
	uid_t uid;
};

/* Checksum bytes [a, b) of member @tag, read ahead into buf (NULL: the read failed). */
struct cspan {
	uint32_t tag;
	uint64_t a, b;
	char *buf;
};

/* pipeline-build.c: pieces and records */

/* @rq's entries cut into p->pc (see pipeline-build.c); 0 or -ENOMEM. */
int pipe_cut(struct pipe *p, const struct dmafs_ioc_place *rq);
/* A prefetch's pieces: the chunks of [from, to) the tier lacks; 0 or -ENOMEM. */
int pipe_cut_chunks(struct pipe *p, uint64_t from, uint64_t to);
/* The records pieces are read into, all on the free list: 0 or -ENOMEM (nothing kept). */
int recs_alloc(struct pipe *p);
/* Build the record of the next pieces: 1 built (*@out), 0 nothing to do now, -errno. */
int pipe_build(struct pipe *p, struct rec **out);
/* Give back what @r holds: its slot, its tier chunk and the record itself. */
void rec_release(struct pipe *p, struct rec *r);
/* The alignment of slot reads (filesystem block with @verify, else the members' sector). */
uint64_t read_granule(const struct fs *fs, int verify);
/* Read ahead the checksum blocks of every piece that will be checked (p->cs). */
void pipe_csum_ahead(struct pipe *p);

/* pipeline-drive.c: moving records along */

/* Note @err as the pipe's error, unless it has one already. */
void pipe_fail(struct pipe *p, int err);
/* Move every stage along until all pieces are placed or the pipe failed. */
void pipe_drive(struct pipe *p);

#endif
