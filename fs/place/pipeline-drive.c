// SPDX-License-Identifier: MIT
/*
 * pipeline-drive.c - the placement pipeline's records moved along: member reads submitted
 * and reaped, checksums checked on the hash pool, pieces delivered into host pages or
 * queued as device copies, and a wait when nothing can move (see pipeline.h,
 * pipeline-int.h).
 */
#include "place/pipeline-int.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "place/usermem.h"

/* The request is to stop (interrupted, its client killed)? */
static int stopped(const struct pipe *p)
{
	return p->stop && p->stop->fn && p->stop->fn(p->stop->arg);
}

/* ---- the hash pool: checks pieces' checksums while the reads go on ---- */

/* Where a recovered read's bytes go: the client's pages (a direct read) or the daemon's. */
static int (*rec_copy(const struct rec *r))(void *, const void *, size_t)
{
	return r->slot < 0 && !r->tc ? usermem_copy : NULL;
}

static int rec_verify(struct rec *r)
{
	struct pipe *p = r->p;
	int ret = 0;

	for (unsigned i = 0; i < r->nd; i++) {
		struct uring_op *op = &r->ops[i].op;
		int bad = r->csum_err ? fs_mirror_recover(p->fs, p->ino, op, r->ops[i].foff, 1, rec_copy(r))
				      : fs_verify_or_recover(p->fs, p->ino, op, r->ops[i].csum,
							     r->ops[i].foff, rec_copy(r));

		if (bad)
			ret = -EIO;
	}
	return ret;
}

/*
 * A GPU target takes a packed slot in one copy: pieces at an even pitch in one 2-D copy
 * (a row slice of rows whose length is a multiple of the sector); others are moved
 * together at the slot's start first.
 */
static int needs_pack(const struct pipe *p, const struct rec *r)
{
	return p->t->gpu && r->npc > 1 && !r->pitch && !r->tc; /* tier chunks: join_hits */
}

/*
 * A host target takes a slot's or a tier chunk's bytes by memcpy into its pages: on the
 * hash pool's threads, several at once, not one after the other in the placement's own
 * thread (a placement served from the warm tier is nothing but these copies).
 */
static int host_copy(const struct pipe *p, const struct rec *r)
{
	return !p->t->gpu && !p->fo && (r->tc || r->slot >= 0);
}

/* @r's pieces into the client's pages; -EFAULT when they are gone (the client's fault). */
static int copy_to_host(struct pipe *p, struct rec *r)
{
	for (unsigned k = 0; k < r->npc; k++)
		if (usermem_copy(p->t->base + r->pc[k].dst, r->buf + r->from[k], r->pc[k].len))
			return -EFAULT;
	return 0;
}

static void rec_pack(struct rec *r)
{
	uint64_t at = 0;

	if (!needs_pack(r->p, r))
		return;
	for (unsigned k = 0; k < r->npc; k++) {
		memmove(r->buf + at, r->buf + r->from[k], r->pc[k].len);
		r->from[k] = (uint32_t)at;
		at += r->pc[k].len;
	}
}

/* On a pool thread: check one slot's pieces and pack them, hand it back to its placement. */
static void rec_hash(struct work *w)
{
	struct rec *r = container_of(w, struct rec, w);
	struct pipe *p = r->p;

	r->err = r->verify ? rec_verify(r) : 0;
	if (!r->err)
		rec_pack(r);
	if (!r->err && host_copy(p, r)) {
		r->err = copy_to_host(p, r);
		r->copied = 1;
	}
	pthread_mutex_lock(&p->vlock);
	r->next = p->verified;
	p->verified = r;
	pthread_cond_signal(&p->vcond);
	pthread_mutex_unlock(&p->vlock);
}

/* Add @r at the tail of the queue @head..@tail (the ready list, the copy list). */
static void rec_append(struct rec **head, struct rec **tail, struct rec *r)
{
	r->next = NULL;
	if (*tail)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
}

void pipe_fail(struct pipe *p, int err)
{
	if (!p->err)
		p->err = err;
}

static int submit_op(struct pipe *p, struct pop *o)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(p->ring);

	if (!sqe) {
		io_uring_submit(p->ring);
		sqe = io_uring_get_sqe(p->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_read(sqe, o->op.fd, (char *)o->op.buf + o->done, o->op.len - o->done,
			   o->op.off + o->done);
	io_uring_sqe_set_data(sqe, o);
	p->inflight++;
	return 0;
}

/* ---- delivery ---- */

static void deliver(struct pipe *p, struct rec *r);
static void copy_out(struct pipe *p, struct rec *r);

/* All reads of @r are in. */
static void rec_read(struct pipe *p, struct rec *r)
{
	if (p->ps && r->nops) {
		p->ps->read_ns += dm_mono_ns() - r->t_sub;
		p->ps->nread++;
		p->ps->nops += r->nd;
	}
	if (r->err || p->err) {
		pipe_fail(p, r->err);
		rec_release(p, r);
		return;
	}
	if (r->verify || needs_pack(p, r) || host_copy(p, r)) {
		if (workpool_start(p->fs->pool) > 0) {
			p->hashing++;
			r->w.fn = rec_hash;
			workpool_queue(p->fs->pool, &r->w);
			return;
		}
		r->err = r->verify ? rec_verify(r) : 0;
		if (r->err) {
			pipe_fail(p, r->err);
			rec_release(p, r);
			return;
		}
		rec_pack(r);
	}
	deliver(p, r);
}

static void deliver(struct pipe *p, struct rec *r)
{
	const struct piece *pc = &r->pc[0];

	if (p->fo) { /* a prefetch: kept, or someone else's copy is there, or the file changed */
		if (tier_publish(p->tier, r->tc, p->ino, pc->off / PIECE, (uint32_t)pc->len, p->tgen))
			p->fo->read += pc->len;
		else if (tier_has(p->tier, p->ino, pc->off / PIECE, (uint32_t)pc->len))
			p->fo->held += pc->len;
		else
			p->fo->skipped += pc->len;
		rec_release(p, r);
		return;
	}
	if (r->fill) /* read and verified: the tier may keep it */
		tier_publish(p->tier, r->tc, p->ino, pc->off / PIECE, (uint32_t)pc->len, p->tgen);
	if (r->slot < 0 && !r->tc) { /* direct: the bytes are where they belong */
		rec_release(p, r);
		return;
	}
	if (!p->t->gpu) {
		/* the client may have shrunk its memory object: its fault, not a member's */
		if (!r->copied && copy_to_host(p, r))
			pipe_fail(p, -EFAULT);
		rec_release(p, r);
		return;
	}
	if (!p->t->copy_delay_ns) {
		copy_out(p, r);
		return;
	}
	r->t_ready = dm_mono_ns();
	rec_append(&p->rd_head, &p->rd_tail, r);
}

/*
 * Queue the device copies of ready pieces that have waited the copy delay; with @all,
 * of every ready piece. A slot just filled by a CPU copy (a loop device's worker) still
 * sits in that core's private cache, and the device reading it from there slows the
 * reads that follow; a short wait lets it reach the shared cache first (pipeline.h).
 */
static int flush_ready(struct pipe *p, int all)
{
	uint64_t now = dm_mono_ns();
	int n = 0;

	while (p->rd_head && (all || now - p->rd_head->t_ready >= p->t->copy_delay_ns)) {
		struct rec *r = p->rd_head;

		p->rd_head = r->next;
		if (!p->rd_head)
			p->rd_tail = NULL;
		if (p->err)
			rec_release(p, r);
		else
			copy_out(p, r);
		n++;
	}
	return n;
}

/*
 * Queue @r's host-to-device copy (its pieces lie together from from[0], rec_pack, or at
 * an even pitch); its slot comes back when the copy's event fires. A copy out of a tier
 * chunk has no slot: the chunk joins keep, the record is free at once.
 */
static void copy_out(struct pipe *p, struct rec *r)
{
	struct stage *s = p->st;
	char *dst = p->t->base + r->pc[0].dst;
	int ret = r->npc > 1 && r->pitch ?
		gpu_copy_htod_2d_async(s->gpu, s->dev, dst, r->pc[0].len, r->buf + r->from[0],
				       r->pitch, r->pc[0].len, r->npc, p->stream) :
		gpu_copy_htod_async(s->gpu, s->dev, dst, r->buf + r->from[0], r->len, p->stream);

	if (ret) {
		pipe_fail(p, -ENODEV);
		rec_release(p, r);
		return;
	}
	if (r->slot < 0) {
		if (dm_grow(&p->keep, &p->keepcap, p->nkeep + 1, sizeof(*p->keep), 256)) {
			gpu_stream_sync(s->gpu, s->dev, p->stream); /* then the chunk can go */
		} else {
			p->keep[p->nkeep++] = r->tc;
			r->tc = NULL;
		}
		rec_release(p, r);
		return;
	}
	if (gpu_event_record(s->gpu, s->dev, s->event[r->slot], p->stream)) {
		/* without the event, only a full sync says the slot is free again */
		pipe_fail(p, -ENODEV);
		gpu_stream_sync(s->gpu, s->dev, p->stream);
		rec_release(p, r);
		return;
	}
	if (p->ps)
		r->t_copy = dm_mono_ns();
	rec_append(&p->cq_head, &p->cq_tail, r);
}

/* Release the slots whose device copies have finished; with @wait, the oldest at least. */
static int reclaim(struct pipe *p, int wait)
{
	struct stage *s = p->st;
	int n = 0;

	while (p->cq_head) {
		struct rec *r = p->cq_head;
		int q = wait && !n ? (gpu_event_sync(s->gpu, s->dev, s->event[r->slot]) ? -ENODEV : 1)
				   : gpu_event_query(s->gpu, s->dev, s->event[r->slot]);

		if (q == 0)
			break;
		if (q < 0) {
			/* the device is in trouble: wait for the stream so no copy reads a
			 * slot after it is given back */
			pipe_fail(p, -ENODEV);
			gpu_stream_sync(s->gpu, s->dev, p->stream);
		}
		p->cq_head = r->next;
		if (!p->cq_head)
			p->cq_tail = NULL;
		if (p->ps) {
			p->ps->copy_ns += dm_mono_ns() - r->t_copy;
			p->ps->ncopy++;
		}
		rec_release(p, r);
		n++;
	}
	return n;
}

/* Pieces back from the hash pool: deliver them, or fail. */
static int take_verified(struct pipe *p, int wait)
{
	struct rec *list;
	int n = 0;

	pthread_mutex_lock(&p->vlock);
	if (wait && !p->verified) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += POLL_US * 1000;
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&p->vcond, &p->vlock, &ts);
	}
	list = p->verified;
	p->verified = NULL;
	pthread_mutex_unlock(&p->vlock);
	while (list) {
		struct rec *r = list;

		list = r->next;
		p->hashing--;
		n++;
		if (r->err || p->err) {
			pipe_fail(p, r->err);
			rec_release(p, r);
		} else {
			deliver(p, r);
		}
	}
	return n;
}

/* ---- reads ---- */

static void op_done(struct pipe *p, struct pop *o)
{
	struct rec *r = o->rec;

	if (--r->left == 0)
		rec_read(p, r);
}

/* Handle one completion. */
static void complete(struct pipe *p, struct io_uring_cqe *cqe)
{
	struct pop *o = io_uring_cqe_get_data(cqe);
	int res = cqe->res;

	p->inflight--;
	if (res == -EAGAIN || res == -EINTR) {
		res = 0;
	} else if (res == -EFAULT && o->rec->slot < 0 && !o->rec->tc) {
		/* a direct read into client pages that are gone: the client's fault, so no
		 * member is blamed (staging slots and tier chunks are the daemon's and never
		 * fault) */
		o->op.res = res;
		o->rec->err = -EFAULT;
		op_done(p, o);
		return;
	} else if (res < 0 || (res == 0 && o->done < o->op.len)) {
		struct rec *r = o->rec;

		o->op.res = res < 0 ? res : -EIO;
		fs_io_error(p->fs, p->ino, &o->op, o->foff, "read");
		if (p->fs->mirror) {
			/* a mirror's other copy: a checksum read's failure fails the check of
			 * the data it covers, which then comes from the other copy too */
			int got = 0;

			if (o >= r->ops + r->nd)
				r->csum_err = 1;
			else if (!(got = fs_mirror_recover(p->fs, p->ino, &o->op, o->foff, 1, rec_copy(r))))
				o->op.res = 0;
			if (!o->op.res || o >= r->ops + r->nd) {
				op_done(p, o);
				return;
			}
			if (got == -EFAULT) { /* the client's pages went: its fault, not a member's */
				r->err = -EFAULT;
				op_done(p, o);
				return;
			}
		}
		r->err = -EIO;
		op_done(p, o);
		return;
	}
	o->done += (uint32_t)res;
	if (o->done < o->op.len) { /* short read: the rest */
		if (submit_op(p, o)) {
			o->op.res = -EBUSY;
			o->rec->err = -EIO;
			op_done(p, o);
		}
		return;
	}
	op_done(p, o);
}

static int reap(struct pipe *p)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(p->ring, head, cqe) {
		complete(p, cqe);
		n++;
	}
	io_uring_cq_advance(p->ring, n);
	if (io_uring_sq_ready(p->ring)) /* resubmitted short reads */
		io_uring_submit(p->ring);
	return (int)n;
}

/* Submit the reads of every piece that can go now. Returns how many pieces went. */
static int issue(struct pipe *p)
{
	/* this user's part of the queue depth, as the users running requests are now */
	unsigned qd = share_qd(p->share, p->uid, p->qd);
	int n = 0;

	p->starved = 0;
	while (!p->err && (p->pending || p->next < p->npc)) {
		struct rec *r = p->pending;
		int ret;

		if (!r) {
			if (stopped(p)) { /* no new reads: what is in flight finishes */
				pipe_fail(p, -EINTR);
				break;
			}
			ret = pipe_build(p, &r);
			if (ret < 0) {
				pipe_fail(p, ret);
				break;
			}
			if (ret == 0)
				break;
		}
		if (p->inflight && p->inflight + r->nops > qd) {
			p->pending = r;
			break;
		}
		p->pending = NULL;
		r->left = r->nops;
		if (p->ps)
			r->t_sub = dm_mono_ns();
		if (r->nops == 0) { /* all hole */
			rec_read(p, r);
			n++;
			continue;
		}
		for (unsigned i = 0; i < r->nops; i++) {
			r->ops[i].done = 0;
			if (submit_op(p, &r->ops[i])) {
				/* the ring is wedged: treat the rest as failed reads */
				pipe_fail(p, -EIO);
				r->left -= r->nops - i;
				if (r->left == 0)
					rec_read(p, r);
				break;
			}
		}
		n++;
	}
	if (n)
		io_uring_submit(p->ring);
	return n;
}

static int finished(const struct pipe *p)
{
	return (p->err || (p->next == p->npc && !p->pending)) && !p->inflight && !p->hashing &&
	       !p->rd_head && !p->cq_head;
}

/* Nothing moved: sleep until something can. */
static void wait_some(struct pipe *p)
{
	struct io_uring_cqe *cqe;
	int why = p->starved ? 3 : p->inflight ? 0 : p->hashing ? 2 : 1;
	uint64_t t = p->ps ? dm_mono_ns() : 0;

	if (p->rd_head && !p->inflight && !p->hashing) {
		flush_ready(p, 1); /* nothing else is coming: no reason to wait */
	} else if (p->inflight) {
		if (p->cq_head || p->hashing || p->starved || p->rd_head) {
			struct __kernel_timespec ts = { 0, POLL_US * 1000 };

			io_uring_wait_cqe_timeout(p->ring, &cqe, &ts);
		} else {
			io_uring_wait_cqe(p->ring, &cqe);
		}
	} else if (p->hashing) {
		take_verified(p, 1);
	} else if (p->cq_head) {
		reclaim(p, 1);
	} else if (p->starved) {
		stage_wait(p->st, 1000);
	}
	if (p->ps) {
		p->ps->wait_ns[why] += dm_mono_ns() - t;
		p->ps->starved += p->starved;
	}
}

/* Account the time since the last step to the slots held and reads in flight. */
static void pstats_step(struct pipe *p)
{
	uint64_t now = dm_mono_ns(), dt = now - p->ps->last;

	p->ps->held_ns += dt * p->held;
	p->ps->inflight_ns += dt * p->inflight;
	p->ps->last = now;
}

/* Move every stage along until all pieces are placed or the pipe failed; sleep only when stuck. */
void pipe_drive(struct pipe *p)
{
	for (;;) {
		int moved = 0;

		if (p->ps)
			pstats_step(p);
		if (p->rd_head)
			moved += flush_ready(p, p->err != 0);
		if (p->cq_head)
			moved += reclaim(p, 0);
		if (p->hashing)
			moved += take_verified(p, 0);
		moved += issue(p);
		moved += reap(p);
		if (finished(p))
			break;
		if (!moved)
			wait_some(p);
	}
}
