// SPDX-License-Identifier: MIT
/*
 * pipeline.c - the placement pipeline's entry points: a placement or a prefetch of the warm
 * tier cut into pieces, set up, driven through and torn down (see pipeline.h).
 */
#include "place/pipeline-int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "gpu.h"

static void pstats_log(const struct pipe *p, uint64_t bytes)
{
	const struct pstats *s = p->ps;
	double t = (double)(dm_mono_ns() - s->t0);

	log_debug("placement pipeline: inode %llu, %zu pieces (%llu member reads), %.1f MiB in "
		  "%.2f ms (%.2f GB/s); average slots held %.1f, reads in flight %.1f (limit %u); "
		  "per piece: read %.0f us, copy %.0f us after a delay of %llu us; waited for reads "
		  "%.2f ms, copies %.2f ms, hashing %.2f ms, a slot %.2f ms (%llu times)",
		  (unsigned long long)p->ino->ino, p->npc, (unsigned long long)s->nops,
		  bytes / 1048576.0, t / 1e6, bytes / t, s->held_ns / t, s->inflight_ns / t, p->qd,
		  s->nread ? s->read_ns / 1e3 / s->nread : 0.0,
		  s->ncopy ? s->copy_ns / 1e3 / s->ncopy : 0.0,
		  (unsigned long long)(p->t->gpu ? p->t->copy_delay_ns / 1000 : 0), s->wait_ns[0] / 1e6,
		  s->wait_ns[1] / 1e6, s->wait_ns[2] / 1e6, s->wait_ns[3] / 1e6,
		  (unsigned long long)s->starved);
}

/* release what pipeline_run() set up, the statistics logged first */
static void teardown(struct pipe *p)
{
	if (p->ps) {
		uint64_t bytes = 0;

		for (size_t i = 0; i < p->npc; i++)
			bytes += p->pc[i].len;
		pstats_log(p, bytes);
		free(p->ps);
	}
	if (p->pending)
		rec_release(p, p->pending);
	if (p->entered)
		stage_leave(p->st);
	for (unsigned i = 0; i < p->nrecs; i++) {
		free(p->recs[i].ops);
		free(p->recs[i].cbuf);
		free(p->recs[i].from);
	}
	pthread_mutex_destroy(&p->vlock);
	pthread_cond_destroy(&p->vcond);
	free(p->cs);
	free(p->csbuf);
	free(p->recs);
	free(p->free_recs);
	free(p->pc);
}

/* Set up what @p's pieces need, drive them through, tear down. Returns p->err. */
static int run(struct pipe *p)
{
	const struct pipe_target *t = p->t;

	p->ring = uring_pipe_ring();
	if (!p->ring) {
		free(p->pc);
		return -ENOMEM;
	}
	p->qd = MIN(URING_PIPE_DEPTH, MAX(QD_MIN, QD_PER_MEMBER * p->fs->n));
	if (recs_alloc(p)) {
		free(p->pc);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->vlock, NULL);
	pthread_cond_init(&p->vcond, NULL);
	if (t->gpu) {
		stage_enter(p->st);
		p->entered = 1;
		p->stream = p->st->stream[__atomic_fetch_add(&p->st->next_stream, 1, __ATOMIC_RELAXED) %
					  STAGE_STREAMS];
	}
	if (util_log_enabled(LOG_LVL_DEBUG)) {
		p->ps = calloc(1, sizeof(*p->ps));
		if (p->ps)
			p->ps->t0 = p->ps->last = dm_mono_ns();
	}
	if (p->verify || p->tier)
		pipe_csum_ahead(p);
	pipe_drive(p);
	if (p->nkeep) {
		/* the copies out of the tier are done (the placement's bytes are in place when
		 * it returns; a host target's were made on the pool before pipe_drive() ended), then
		 * their chunks may go */
		if (p->t->gpu && gpu_stream_sync(p->st->gpu, p->st->dev, p->stream))
			pipe_fail(p, -ENODEV);
		for (size_t i = 0; i < p->nkeep; i++)
			tier_put(p->tier, p->keep[i]);
		free(p->keep);
	}
	teardown(p);
	return p->err;
}

int pipeline_run(struct fs *fs, struct inode *ino, const struct pipe_target *t,
		 const struct dmafs_ioc_place *rq, int verify, struct pipe_out *out)
{
	struct pipe p = { .fs = fs, .ino = ino, .t = t, .verify = verify, .st = t->stage,
			  .gran = read_granule(fs, verify), .tier = fs->tier, .fsize = ino->a.size,
			  .nofill = fs->tier && fs->set.tier_fill_idle, .stop = t->stop,
			  .share = t->share, .uid = t->uid };
	int ret;

	if (p.tier) /* before any read goes out: a change after it keeps fills out */
		p.tgen = tier_gen(ino);

	ret = pipe_cut(&p, rq);
	if (ret || !p.npc) {
		free(p.pc);
		return ret;
	}
	ret = run(&p);
	if (!ret) {
		out->tier_bytes += p.tier_bytes;
		if (p.miss_to) {
			out->miss_from = out->miss_to ? MIN(out->miss_from, p.miss_from) : p.miss_from;
			out->miss_to = MAX(out->miss_to, p.miss_to);
		}
	}
	return ret;
}

int pipeline_prefetch(struct fs *fs, struct inode *ino, uint64_t from, uint64_t to,
		      struct pipe_fill *out, const struct pipe_target *req)
{
	static const struct pipe_target none; /* no target: deliver only publishes */
	struct pipe p = { .fs = fs, .ino = ino, .t = &none, .verify = 1,
			  .gran = read_granule(fs, 1), .tier = fs->tier, .fsize = ino->a.size,
			  .fo = out, .stop = req ? req->stop : NULL,
			  .share = req ? req->share : NULL, .uid = req ? req->uid : 0 };
	int ret;

	if (!p.tier)
		return -EOPNOTSUPP;
	p.tgen = tier_gen(ino); /* before any read goes out, as for placements */
	ret = pipe_cut_chunks(&p, from, MIN(to, p.fsize));
	if (ret || !p.npc) {
		free(p.pc);
		return ret;
	}
	return run(&p);
}

int pipeline_prefetch_window(struct fs *fs, struct inode *ino, uint64_t *off, uint64_t end,
			     uint64_t window, struct pipe_fill *f, const struct pipe_target *req)
{
	uint64_t from = ALIGN_DOWN(*off, TIER_CHUNK), last, to;
	size_t e;
	int ret;

	wback_wait(fs, ino, 0); /* what was written is on the members before we read */
	dm_rwlock_rdlock(&ino->iolock);
	last = MIN(end, ino->a.size); /* the size may have changed since the last window */
	if (from >= last || *off >= last) { /* an empty range widens to nothing */
		dm_rwlock_unlock(&ino->iolock);
		return 1;
	}
	/* holes are not read: the window starts at the chunk of the next mapped byte */
	e = meta_ext_find(ino, from);
	if (e >= ino->next || ino->ext[e].off >= last) {
		f->skipped += last - from;
		dm_rwlock_unlock(&ino->iolock);
		*off = last;
		return 1;
	}
	if (ino->ext[e].off >= from + TIER_CHUNK) {
		uint64_t at = ALIGN_DOWN(ino->ext[e].off, TIER_CHUNK);

		f->skipped += at - from;
		from = at;
	}
	to = MIN(ALIGN_UP(MIN(last, from + window), TIER_CHUNK), ino->a.size);
	ret = pipeline_prefetch(fs, ino, from, to, f, req);
	dm_rwlock_unlock(&ino->iolock);
	*off = to;
	return ret;
}
