// SPDX-License-Identifier: MIT
/* place-p2p.c - the CUDA direct path: cuFile reads from the members straight into GPU
 * memory, one thread per member (used when nvidia-fs or P2PDMA lets cuFile do DMA). */
#include "place/place.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "gpu.h"
#include "place/p2p.h"

/* A member read of at most this: a killed client's request stops within one */
#define P2P_PIECE (64ull << 20)

struct p2p_piece {
	uint64_t moff, len, boff;
};

struct p2p_job {
	struct p2p *p2p;
	unsigned member;
	void *map;
	struct p2p_piece *pc;
	size_t n, cap;
	const struct pipe_stop *stop;
	int err, started;
	pthread_t t;
};

static void *p2p_member_main(void *arg)
{
	struct p2p_job *j = arg;

	for (size_t i = 0; i < j->n && !j->err; i++) {
		ssize_t got;

		if (j->stop && j->stop->fn && j->stop->fn(j->stop->arg)) {
			j->err = -EINTR;
			break;
		}
		got = p2p_read(j->p2p, j->member, j->map, j->pc[i].len, j->pc[i].moff, j->pc[i].boff);

		if (got != (ssize_t)j->pc[i].len) {
			log_err("p2p read error on member %u at member offset %llu (+%llu bytes)", j->member,
				(unsigned long long)j->pc[i].moff, (unsigned long long)j->pc[i].len);
			j->err = -EIO;
		}
	}
	return NULL;
}

static int job_add(struct p2p_job *j, uint64_t moff, uint64_t len, uint64_t boff)
{
	while (len) {
		uint64_t l = MIN(len, P2P_PIECE);

		if (dm_grow(&j->pc, &j->cap, j->n + 1, sizeof(*j->pc), 64))
			return -ENOMEM;
		j->pc[j->n++] = (struct p2p_piece){ moff, l, boff };
		moff += l;
		boff += l;
		len -= l;
	}
	return 0;
}

int place_p2p(struct p2p *P, struct fs *fs, struct inode *ino, struct gpu *g, int dev, void *map,
	      uint64_t rel, const struct dmafs_ioc_place *p, const struct pipe_stop *killed)
{
	struct p2p_job *jobs = calloc(fs->n, sizeof(*jobs));
	static const char zero[64 << 10];
	int ret = 0;

	if (!jobs)
		return -ENOMEM;
	for (unsigned m = 0; m < fs->n; m++) {
		jobs[m].p2p = P;
		jobs[m].member = m;
		jobs[m].map = map;
		jobs[m].stop = killed;
	}
	for (uint32_t i = 0; !ret && i < p->count; i++) {
		uint64_t off = p->e[i].file_offset, end = off + p->e[i].length;
		uint64_t dst = rel + p->e[i].buffer_offset;
		size_t k = meta_ext_find(ino, off);

		while (!ret && off < end) {
			const struct extent *e = k < ino->next ? &ino->ext[k] : NULL;
			uint64_t stop;

			if (!e || e->off >= end || e->off > off) { /* a hole: zeros */
				stop = e && e->off < end ? e->off : end;
				for (uint64_t z = off; !ret && z < stop; z += sizeof(zero))
					ret = gpu_copy_htod(g, dev, (char *)map + dst + (z - off), zero,
							    MIN(sizeof(zero), stop - z)) ? -ENODEV : 0;
			} else {
				stop = MIN(end, e->off + e->len);
				ret = job_add(&jobs[e->member], e->moff + (off - e->off), stop - off, dst);
				k++;
			}
			dst += stop - off;
			off = stop;
		}
	}
	for (unsigned m = 0; m < fs->n; m++) {
		if (ret || !jobs[m].n)
			continue;
		if (pthread_create(&jobs[m].t, NULL, p2p_member_main, &jobs[m]))
			ret = -EAGAIN;
		else
			jobs[m].started = 1;
	}
	for (unsigned m = 0; m < fs->n; m++) {
		if (jobs[m].started)
			pthread_join(jobs[m].t, NULL);
		if (jobs[m].err && (!ret || ret == -EINTR))
			ret = jobs[m].err; /* an I/O error outranks a stop */
		free(jobs[m].pc);
	}
	free(jobs);
	return ret;
}

