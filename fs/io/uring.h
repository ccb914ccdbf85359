/* SPDX-License-Identifier: MIT */
/*
 * uring.h - member I/O through io_uring. Each calling thread owns a ring (created on first
 * use), so FUSE worker threads never contend for a submission queue; a batch of reads or
 * writes spanning several members is submitted at once and reaped together, which keeps
 * every member busy on a large request.
 */
#ifndef DMAFS_URING_H
#define DMAFS_URING_H

#include <stddef.h>
#include <stdint.h>

struct uring_op {
	int fd;
	int write;
	void *buf; /* 4096-aligned for O_DIRECT members */
	uint32_t len;
	uint64_t off;
	int res; /* out: 0, or -errno for this op */
	int tag; /* caller's, e.g. the member index, for error messages */
	int recovered; /* a data read whose bytes came from the other copy of a mirror,
			* checked there (fs_mirror_recover): not to be checked against this
			* copy's checksums */
};

/*
 * Run @n ops concurrently and wait for all. Short transfers are resubmitted for the
 * remainder; a zero-length read (past the end of a member) is -EIO. Returns 0, or the first
 * failing op's -errno (every op's res is set). -ENOMEM/-errno if no ring can be set up.
 */
int uring_rw(struct uring_op *ops, size_t n);
/* The same, calling @done(@arg, i) in this thread as soon as op i has completed in full. */
int uring_rw_cb(struct uring_op *ops, size_t n, void (*done)(void *arg, size_t i), void *arg);
#define URING_DEPTH 256 /* each thread's ring: ops in flight at most */
/* The same with at most @qd (1..URING_DEPTH; 0: URING_DEPTH) new ops in flight at once. */
int uring_rw_cb_qd(struct uring_op *ops, size_t n, unsigned qd,
		   void (*done)(void *arg, size_t i), void *arg);
/*
 * This thread's second ring, for the placement pipeline (pipeline.c), which keeps up to
 * URING_PIPE_DEPTH reads in flight and reaps them itself. NULL if it cannot be set up.
 */
#define URING_PIPE_DEPTH 512
struct io_uring;
struct io_uring *uring_pipe_ring(void);
/* fdatasync @n descriptors concurrently. Returns 0 or the first -errno. */
int uring_fsync(const int *fds, size_t n);

#endif
