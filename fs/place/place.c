// SPDX-License-Identifier: MIT
/* place.c - the placement service: start and stop, info, validation, each request's path. */
#include "place/place.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "place/clientfd.h"
#include "place/fillq.h"
#include "gpu.h"
#include "place/p2p.h"
#include "place/pipeline.h"
#include "place/reg.h"
#include "place/stage.h"
#include "place/usermem.h"

static void gpu_log_to_daemon(const char *msg) { log_err("%s", msg); }

int place_init(struct place **out, struct fs *fs, const struct place_limits *limits,
	       uint64_t staging, unsigned copy_delay_us, int prewarm, int p2p_force)
{
	struct place *pl = calloc(1, sizeof(*pl));
	int ret;

	*out = pl;
	if (!pl)
		return -ENOMEM;
	pl->fs = fs;
	pl->lim = *limits;
	pl->copy_delay_ns = copy_delay_us * 1000ull;
	if (getrandom(pl->hkey, sizeof(pl->hkey), 0) != sizeof(pl->hkey))
		return -EAGAIN;
	pl->p2p = p2p_new(p2p_force);
	reg_init(pl);
	share_init(&pl->share);
	gpu_set_log(gpu_log_to_daemon);
	clientfd_init(&pl->shm);
	ret = usermem_init();
	if (ret)
		return ret;
	ret = stage_init(&pl->stages, staging, prewarm, fs->tier);
	if (ret)
		return ret;
	if (fs->tier && fs->set.tier_fill_idle && (ret = fillq_start(&pl->fillq, fs)))
		return ret;
	return reg_reaper_start(pl);
}

void place_shutdown(struct place *pl)
{
	if (!pl)
		return;
	fillq_stop(pl->fillq); /* no placement runs now; what waits is dropped */
	pl->fillq = NULL;
	reg_shutdown(pl);
	stage_shutdown(pl->stages);
	share_free(&pl->share);
}

/* ---- capabilities ---- */

/* Why the direct (p2p) path is or is not used for @target. */
static int p2p_reason(struct place *pl, int target, char *why, size_t len)
{
	void *h;

	if (pl->fs->set.verify_place) {
		snprintf(why, len, "p2p not used: verify_place is on, and checksums are checked only in host staging");
		return 0;
	}
	if (target == DMAFS_TARGET_CUDA)
		return p2p_usable(pl->p2p, why, len);
	h = dlopen("libhipfile.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "p2p unavailable: libhipfile.so (ROCm >= 7.2) not installed");
		return 0;
	}
	dlclose(h);
	snprintf(why, len, "p2p unavailable: hipFile is present, but this dmafs version drives only cuFile");
	return 0;
}

int place_info(struct place *pl, uint64_t ino, struct dmafs_ioc_info *out)
{
	struct fs *fs = pl->fs;
	struct stat st;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = fs_getattr(fs, ino, &st);
	if (ret)
		return ret;
	out->version = DMAFS_PROTO_VERSION;
	out->members = fs->n;
	out->stripe_unit = fs->su;
	out->block_size = DMAFS_BLOCK;
	out->staging_bytes = stage_bytes(pl->stages);
	out->file_size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	if (fs->tier) {
		struct tier_stats ts;

		tier_stats(fs->tier, &ts);
		out->tier_size = ts.size;
		out->tier_held = ts.held;
		out->tier_hits = ts.hits;
		out->tier_misses = ts.misses;
		out->tier_served = ts.served;
		out->tier_filled = ts.filled;
		out->tier_evicted = ts.evicted;
		out->tier_cap = ts.cap;
		out->tier_resident = ts.resident;
		out->tier_shrunk = ts.shrunk;
		out->tier_min_free = ts.min_free;
		out->tier_pinned = ts.pinned;
		out->tier_fill = pl->fillq != NULL;
		fillq_stats(pl->fillq, &out->tier_waiting, &out->tier_filled_idle,
			    &out->tier_dropped);
	}
	out->t[0].target = DMAFS_TARGET_HOST;
	out->t[0].path = DMAFS_PATH_HOST;
	out->t[0].devices = 0;
	snprintf(out->t[0].why, sizeof(out->t[0].why),
		 "O_DIRECT reads straight into the client's shared pages (zero copy where buffer and file offsets agree modulo 4096)%s",
		 fs->set.verify_place ? "; checksums verified" : "");
	for (int k = 1; k < 3; k++) {
		struct dmafs_ioc_target_info *t = &out->t[k];
		int target = k == 1 ? DMAFS_TARGET_CUDA : DMAFS_TARGET_HIP;
		struct gpu *g;
		char why[200], p2p[200], stg[96];

		t->target = target;
		if (gpu_load(target, &g, why, sizeof(why))) {
			t->path = DMAFS_PATH_NONE;
			t->devices = -1;
			snprintf(t->why, sizeof(t->why), "%s", why);
			continue;
		}
		t->path = !p2p_reason(pl, target, p2p, sizeof(p2p)) ? DMAFS_PATH_STAGED
			  : p2p_compat(pl->p2p)			     ? DMAFS_PATH_P2P_COMPAT
								     : DMAFS_PATH_P2P;
		t->devices = gpu_count(g);
		stage_describe(pl->stages, target, 0, stg, sizeof(stg));
		snprintf(t->why, sizeof(t->why), "%.40s, %d device(s); %.120s; device 0 %.52s",
			 gpu_version(g), t->devices, p2p, stg);
	}
	return 0;
}

/* ---- validation ---- */

int place_validate(struct dmafs_ioc_place *p, uint64_t bufsize, uint64_t fsize)
{
	uint64_t total = 0;

	if (p->count > DMAFS_PLACE_MAX || p->flags)
		return -EINVAL;
	for (uint32_t i = 0; i < p->count; i++) {
		struct dmafs_place_entry *e = &p->e[i];
		uint64_t len = 0;

		if (e->file_offset < fsize)
			len = MIN(e->length, fsize - e->file_offset);
		if (e->buffer_offset > bufsize || len > bufsize - e->buffer_offset)
			return -ERANGE;
		/* an explicit length must also fit: a short file must not hide a bad request */
		if (e->length != DMAFS_TO_EOF &&
		    (e->length > bufsize || e->buffer_offset > bufsize - e->length))
			return -ERANGE;
		/* All entries together place at most the buffer's size: a request cannot have
		 * the daemon read, or hold pieces for, more than the client's own memory (512
		 * entries of a whole large file each would take gigabytes of piece lists). */
		if (len > bufsize - total)
			return -ERANGE;
		total += len;
		e->length = len;
	}
	return 0;
}

/* The direct path for this registration, with every member registered with cuFile? */
static int use_p2p(struct place *pl, struct reg *r)
{
	struct fs *fs = pl->fs;

	if (r->target != DMAFS_TARGET_CUDA || !r->p2p || fs->set.verify_place)
		return 0;
	for (unsigned m = 0; m < fs->n; m++)
		if (p2p_member(pl->p2p, &fs->members[m], m) || !fs_member_ok(fs, m))
			return 0; /* a mirror's lost member: the staged path reads the other copies */
	return 1;
}

static int run_one(struct place *pl, const struct place_caller *c, uint64_t ino_nr,
		   struct dmafs_ioc_place *p, uint64_t *tier_bytes)
{
	struct fs *fs = pl->fs;
	uint64_t t0 = dm_mono_ns(), total = 0;
	struct pipe_out out = { 0 };
	struct inode *ino;
	struct reg *r;
	int ret, path = DMAFS_PATH_NONE;

	if (p->count > DMAFS_PLACE_MAX || p->flags)
		return -EINVAL;
	if (c->stop.fn && c->stop.fn(c->stop.arg)) /* killed while it waited in the queue */
		return -EINTR;
	ret = reg_get(pl, c, p->id, &r);
	if (ret)
		return ret;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino || !S_ISREG(ino->a.mode)) {
		reg_put(pl, r);
		return ino ? -EINVAL : -ENOENT;
	}
	wback_wait(fs, ino, 0); /* what was written is on the members before we read */
	/* the size and extent map stay fixed while we read: writers wait */
	dm_rwlock_rdlock(&ino->iolock);
	ret = place_validate(p, r->size, ino->a.size);
	if (!ret) {
		struct pipe_target t = { .gpu = r->target != DMAFS_TARGET_HOST, .base = r->base,
					 .stages = pl->stages, .copy_delay_ns = pl->copy_delay_ns,
					 .stop = &c->stop, .share = &pl->share, .uid = c->uid };

		if (r->target == DMAFS_TARGET_HOST) {
			ret = reg_host_intact(r, p);
			if (!ret)
				ret = pipeline_run(fs, ino, &t, p, fs->set.verify_place, &out);
			path = DMAFS_PATH_HOST;
		} else if (use_p2p(pl, r)) {
			ret = place_p2p(pl->p2p, fs, ino, r->gpu, r->dev, r->map,
					(uint64_t)(r->base - (char *)r->map), p, &c->stop);
			/* cuFile without nvidia-fs bounces through host memory itself: say so */
			path = p2p_compat(pl->p2p) ? DMAFS_PATH_P2P_COMPAT : DMAFS_PATH_P2P;
		}
		if (ret == -EIO && fs->mirror && path != DMAFS_PATH_STAGED &&
		    r->target != DMAFS_TARGET_HOST) {
			/* a read error on the direct path (logged): the staged path reads the
			 * other copy of what fails (mirror.c), and says so by its path */
			ret = 0;
			path = DMAFS_PATH_NONE;
		}
		if (!ret && path == DMAFS_PATH_NONE) {
			ret = stage_get(pl->stages, r->target, r->gpu, r->dev, &t.stage);
			if (!ret)
				ret = pipeline_run(fs, ino, &t, p, fs->set.verify_place, &out);
			path = DMAFS_PATH_STAGED;
		}
	}
	dm_rwlock_unlock(&ino->iolock);
	reg_put(pl, r);
	if (ret)
		return ret;
	fillq_add(pl->fillq, ino, out.miss_from, out.miss_to, c->uid);
	for (uint32_t i = 0; i < p->count; i++)
		total += p->e[i].length;
	p->bytes = total;
	p->path = path;
	p->elapsed_ns = dm_mono_ns() - t0;
	*tier_bytes = out.tier_bytes;
	return 0;
}

int place_run(struct place *pl, const struct place_caller *c, uint64_t ino_nr,
	      struct dmafs_ioc_place *p, uint64_t *tier_bytes)
{
	int ret;

	if (pl->fillq) { /* tier_fill=idle: the fills left for later wait, and the pinning */
		fillq_busy(pl->fillq, 1);
		tier_yield(pl->fs->tier, 1);
	}
	share_enter(&pl->share, c->uid);
	ret = run_one(pl, c, ino_nr, p, tier_bytes);
	share_leave(&pl->share, c->uid);
	if (pl->fillq) {
		tier_yield(pl->fs->tier, -1);
		fillq_busy(pl->fillq, -1);
	}
	return ret;
}


/* A prefetch holds the file's iolock for this much of it at a time: writers get in between. */
#define PREFETCH_WINDOW (1024ull * TIER_CHUNK)


int place_prefetch(struct place *pl, const struct place_caller *c, uint64_t ino_nr,
		   struct dmafs_ioc_prefetch *rq)
{
	struct fs *fs = pl->fs;
	uint64_t t0 = dm_mono_ns(), off, end, want, cap;
	struct pipe_fill f = { 0 };
	struct pipe_target req = { .stop = &c->stop, .share = &pl->share, .uid = c->uid };
	struct tier_stats ts;
	struct inode *ino;
	int ret = 0;

	if (rq->flags)
		return -EINVAL;
	if (!fs->tier)
		return -EOPNOTSUPP;
	if (c->stop.fn && c->stop.fn(c->stop.arg))
		return -EINTR;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino || !S_ISREG(ino->a.mode))
		return ino ? -EINVAL : -ENOENT;
	off = rq->offset;
	want = rq->length > UINT64_MAX - rq->offset ? UINT64_MAX : rq->offset + rq->length;
	/* A prefetch larger than the tier would evict its own first chunks: it reads at most
	 * the tier's size, so no request runs longer than filling the tier once. */
	tier_stats(fs->tier, &ts);
	cap = ALIGN_DOWN(off, TIER_CHUNK) + ts.size;
	end = MIN(want, cap < ts.size ? UINT64_MAX : cap);
	share_enter(&pl->share, c->uid);
	while (!(ret = pipeline_prefetch_window(fs, ino, &off, end, PREFETCH_WINDOW, &f, &req)))
		;
	share_leave(&pl->share, c->uid);
	if (ret < 0)
		return ret;
	if (want > end) { /* the part past the tier's size, within the file, is skipped */
		uint64_t size = __atomic_load_n(&ino->a.size, __ATOMIC_RELAXED);

		if (MIN(want, size) > end)
			f.skipped += MIN(want, size) - end;
	}
	rq->bytes_read = f.read;
	rq->bytes_held = f.held;
	rq->bytes_skipped = f.skipped;
	rq->elapsed_ns = dm_mono_ns() - t0;
	return 0;
}
