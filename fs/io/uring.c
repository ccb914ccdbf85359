// SPDX-License-Identifier: MIT
/* uring.c - per-thread io_uring rings and batched, concurrent member I/O. */
#include "io/uring.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static __thread struct io_uring ring, pring;
static __thread int ring_ready, pring_ready;
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void ring_exit(void *unused)
{
	if (ring_ready) {
		io_uring_queue_exit(&ring);
		ring_ready = 0;
	}
	if (pring_ready) {
		io_uring_queue_exit(&pring);
		pring_ready = 0;
	}
}

static void make_key(void) { pthread_key_create(&ring_key, ring_exit); }

static int get_ring(void)
{
	int ret;

	if (ring_ready)
		return 0;
	pthread_once(&key_once, make_key);
	ret = io_uring_queue_init(URING_DEPTH, &ring, 0);
	if (ret < 0)
		return ret;
	ring_ready = 1;
	/* a non-NULL value makes the destructor run at thread exit */
	pthread_setspecific(ring_key, (void *)1);
	return 0;
}

struct io_uring *uring_pipe_ring(void)
{
	struct io_uring_params p;

	if (pring_ready)
		return &pring;
	pthread_once(&key_once, make_key);
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = 2 * URING_PIPE_DEPTH; /* completions of resubmitted short reads too */
	if (io_uring_queue_init_params(URING_PIPE_DEPTH, &pring, &p) < 0)
		return NULL;
	pring_ready = 1;
	pthread_setspecific(ring_key, (void *)1);
	return &pring;
}

struct pending {
	struct uring_op *op;
	uint32_t done;
	int fsync;
};

/* one uring_rw_cb() call: its ops, how far they are, and the first error */
struct batch {
	struct uring_op *ops;
	struct pending *pend;
	size_t n, next, inflight, completed;
	size_t qd; /* new ops in flight at most (resubmissions of short ones may pass it) */
	int first_err;
	void (*done)(void *arg, size_t i);
	void *arg;
};

/* Fill the ring with new ops; resubmissions of short ops go first, in reap(). */
static void submit_new(struct batch *b)
{
	while (b->next < b->n && b->inflight < b->qd) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct uring_op *op = &b->ops[b->next];

		if (!sqe)
			break;
		if (op->write)
			io_uring_prep_write(sqe, op->fd, op->buf, op->len, op->off);
		else
			io_uring_prep_read(sqe, op->fd, op->buf, op->len, op->off);
		io_uring_sqe_set_data(sqe, &b->pend[b->next]);
		b->next++;
		b->inflight++;
	}
}

/* short transfer: resubmit the remainder of @p's op; -EBUSY when the ring has no room */
static int resubmit(struct pending *p)
{
	struct uring_op *op = p->op;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	if (!sqe) {
		io_uring_submit(&ring);
		sqe = io_uring_get_sqe(&ring);
	}
	if (!sqe)
		return -EBUSY;
	if (op->write)
		io_uring_prep_write(sqe, op->fd, (char *)op->buf + p->done,
				    op->len - p->done, op->off + p->done);
	else
		io_uring_prep_read(sqe, op->fd, (char *)op->buf + p->done,
				   op->len - p->done, op->off + p->done);
	io_uring_sqe_set_data(sqe, p);
	return 0;
}

/* an op ends in error @err; the batch reports the first one */
static void fail_op(struct batch *b, struct uring_op *op, int err)
{
	op->res = err;
	b->first_err = b->first_err ? b->first_err : err;
	b->completed++;
}

/* take the completions there are: finish, fail or resubmit each op */
static void reap(struct batch *b)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&ring, &cqe) == 0) {
		struct pending *p = io_uring_cqe_get_data(cqe);
		struct uring_op *op = p->op;
		int res = cqe->res;

		io_uring_cqe_seen(&ring, cqe);
		b->inflight--;
		if (res < 0 || (res == 0 && op->len > p->done)) {
			if (res == -EAGAIN || res == -EINTR) {
				res = 0; /* retry below */
			} else {
				fail_op(b, op, res < 0 ? res : -EIO);
				continue;
			}
		}
		p->done += res;
		if (p->done >= op->len) {
			b->completed++;
			if (b->done)
				b->done(b->arg, (size_t)(p - b->pend));
			continue;
		}
		if (resubmit(p)) {
			fail_op(b, op, -EBUSY);
			continue;
		}
		b->inflight++;
	}
}

int uring_rw_cb_qd(struct uring_op *ops, size_t n, unsigned qd,
		   void (*done)(void *arg, size_t i), void *arg)
{
	struct batch b = { .ops = ops, .n = n, .done = done, .arg = arg,
			   .qd = qd && qd < URING_DEPTH ? qd : URING_DEPTH };
	int ret;

	if (n == 0)
		return 0;
	ret = get_ring();
	if (ret)
		return ret;
	b.pend = calloc(n, sizeof(*b.pend));
	if (!b.pend)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		b.pend[i].op = &ops[i];
		ops[i].res = 0;
	}
	while (b.completed < n) {
		submit_new(&b);
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret < 0 && ret != -EINTR) {
			b.first_err = b.first_err ? b.first_err : ret;
			break;
		}
		reap(&b);
	}
	/* After a ring failure, drain what is still in flight before freeing. */
	while (b.inflight > 0) {
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe(&ring, &cqe))
			break;
		io_uring_cqe_seen(&ring, cqe);
		b.inflight--;
	}
	/* the ops the failure kept from completing fail with it: every op's res is set */
	for (size_t i = 0; b.first_err && i < n; i++)
		if (!ops[i].res && b.pend[i].done < ops[i].len)
			ops[i].res = b.first_err;
	/*
	 * Requests still in flight, or queued and never taken by the kernel, would complete
	 * into a later batch on this ring: it is not used again (the next call sets up a
	 * fresh one). Their buffers are the caller's, which this cannot hold back.
	 */
	if (b.inflight > 0 || io_uring_sq_ready(&ring)) {
		io_uring_queue_exit(&ring);
		ring_ready = 0;
	}
	free(b.pend);
	return b.first_err;
}

int uring_rw_cb(struct uring_op *ops, size_t n, void (*done)(void *arg, size_t i), void *arg)
{
	return uring_rw_cb_qd(ops, n, 0, done, arg);
}

int uring_rw(struct uring_op *ops, size_t n) { return uring_rw_cb_qd(ops, n, 0, NULL, NULL); }

int uring_fsync(const int *fds, size_t n)
{
	int ret, first_err = 0;
	size_t done = 0, sub = 0;

	ret = get_ring();
	if (ret)
		return ret;
	while (sub < n) {
		size_t batch = 0;

		while (sub < n && batch < URING_DEPTH) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			if (!sqe)
				break;
			io_uring_prep_fsync(sqe, fds[sub], IORING_FSYNC_DATASYNC);
			sub++;
			batch++;
		}
		ret = io_uring_submit_and_wait(&ring, batch);
		if (ret < 0)
			return ret;
		while (batch > 0) {
			struct io_uring_cqe *cqe;

			if (io_uring_wait_cqe(&ring, &cqe))
				return -EIO;
			if (cqe->res < 0 && !first_err)
				first_err = cqe->res;
			io_uring_cqe_seen(&ring, cqe);
			batch--;
			done++;
		}
	}
	return first_err;
}
