// SPDX-License-Identifier: MIT
/* place.c - the placement service: registrations, capabilities, validation, and the
 * choice of path for each request (see place.h). The paths: pipeline.c (host and staged),
 * place-p2p.c (cuFile). */
#include "place.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "p2p.h"
#include "pipeline.h"
#include "stage.h"

#define MAX_REGS_PER_PROCESS 4096
#define REAP_INTERVAL_MS 500

struct reg {
	struct reg *next;
	uint64_t id;
	pid_t tgid;
	int pidfd;
	int target;
	int dev;		/* GPU ordinal in the daemon */
	struct gpu *gpu;
	char *base;		/* where buffer byte 0 is: host mapping or device pointer */
	uint64_t size;
	void *map;		/* host: mmap address; GPU: IPC mapping base */
	size_t map_len;
	int p2p;		/* registered with cuFile */
	unsigned refs;		/* placements running; protected by regs_lock */
	int dead;		/* unregistered or owner gone; freed when refs drops to 0 */
};

static pthread_mutex_t regs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg *regs; /* protected by regs_lock */
static unsigned nregs;
static pthread_t reaper;
static int reaper_running;
/* The unmount wakes the reaper instead of waiting out its sleep. */
static pthread_mutex_t reaper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reaper_wake = PTHREAD_COND_INITIALIZER;
static int reaper_stop; /* protected by reaper_lock */
static struct fs *place_fs;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int place_tgid(pid_t tid, pid_t *tgid)
{
	char path[64], line[256];
	FILE *f;
	int ret = -ESRCH;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Tgid:", 5)) {
			*tgid = atoi(line + 5);
			ret = *tgid > 0 ? 0 : -ESRCH;
			break;
		}
	}
	fclose(f);
	return ret;
}

static int pid_alive(int pidfd)
{
	return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM;
}

/* Release what a registration holds. Caller holds no lock; the reg is unlinked. */
static void reg_free(struct reg *r)
{
	if (r->target == DMAFS_TARGET_HOST) {
		if (r->map)
			munmap(r->map, r->map_len);
	} else if (r->map) {
		if (r->p2p)
			p2p_buf_deregister(r->map);
		gpu_ipc_close(r->gpu, r->dev, r->map);
	}
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
}

/* Unlink and free every dead registration nobody uses. */
static void reap(void)
{
	struct reg **pp, *dead = NULL, *r;

	pthread_mutex_lock(&regs_lock);
	for (pp = &regs; *pp;) {
		r = *pp;
		if (!r->dead && !pid_alive(r->pidfd))
			r->dead = 1;
		if (r->dead && r->refs == 0) {
			*pp = r->next;
			nregs--;
			r->next = dead;
			dead = r;
		} else {
			pp = &r->next;
		}
	}
	pthread_mutex_unlock(&regs_lock);
	while (dead) {
		r = dead;
		dead = r->next;
		log_debug("placement: released buffer %016llx of process %d",
			  (unsigned long long)r->id, (int)r->tgid);
		reg_free(r);
	}
}

static void *reaper_main(void *arg)
{
	pthread_mutex_lock(&reaper_lock);
	while (!reaper_stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += REAP_INTERVAL_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&reaper_wake, &reaper_lock, &ts);
		if (reaper_stop)
			break;
		pthread_mutex_unlock(&reaper_lock);
		reap();
		pthread_mutex_lock(&reaper_lock);
	}
	pthread_mutex_unlock(&reaper_lock);
	return NULL;
}

static void gpu_log_to_daemon(const char *msg) { log_err("%s", msg); }

int place_init(struct fs *fs, uint64_t staging, int prewarm)
{
	int ret;

	place_fs = fs;
	gpu_set_log(gpu_log_to_daemon);
	ret = stage_init(staging, prewarm);
	if (ret)
		return ret;
	if (pthread_create(&reaper, NULL, reaper_main, NULL))
		return -EAGAIN;
	reaper_running = 1;
	return 0;
}

void place_shutdown(void)
{
	if (reaper_running) {
		pthread_mutex_lock(&reaper_lock);
		reaper_stop = 1;
		pthread_cond_signal(&reaper_wake);
		pthread_mutex_unlock(&reaper_lock);
		pthread_join(reaper, NULL);
		reaper_running = 0;
	}
	pthread_mutex_lock(&regs_lock);
	for (struct reg *r = regs; r; r = r->next)
		r->dead = 1;
	pthread_mutex_unlock(&regs_lock);
	reap();
	stage_shutdown();
}

unsigned place_count(void)
{
	unsigned n;

	pthread_mutex_lock(&regs_lock);
	n = nregs;
	pthread_mutex_unlock(&regs_lock);
	return n;
}

/* ---- capabilities ---- */

/* Why the direct (p2p) path is or is not used for @target. */
static int p2p_reason(struct fs *fs, int target, char *why, size_t len)
{
	void *h;

	if (fs->verify_place) {
		snprintf(why, len, "p2p not used: verify_place is on, and checksums can only be checked while the data is in host staging");
		return 0;
	}
	if (target == DMAFS_TARGET_CUDA)
		return p2p_usable(why, len);
	h = dlopen("libhipfile.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "p2p unavailable: libhipfile.so (ROCm >= 7.2) not installed");
		return 0;
	}
	dlclose(h);
	snprintf(why, len, "p2p unavailable: hipFile is present, but this dmafs version drives only cuFile; the staged path is used");
	return 0;
}

int place_info(struct fs *fs, uint64_t ino, struct dmafs_ioc_info *out)
{
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
	out->staging_bytes = stage_bytes();
	out->file_size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	out->t[0].target = DMAFS_TARGET_HOST;
	out->t[0].path = DMAFS_PATH_HOST;
	out->t[0].devices = 0;
	snprintf(out->t[0].why, sizeof(out->t[0].why),
		 "O_DIRECT reads straight into the client's shared pages (zero copy where buffer and file offsets agree modulo 4096)%s",
		 fs->verify_place ? "; checksums verified" : "");
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
		t->path = p2p_reason(fs, target, p2p, sizeof(p2p)) ? DMAFS_PATH_P2P : DMAFS_PATH_STAGED;
		t->devices = gpu_count(g);
		stage_describe(target, 0, stg, sizeof(stg));
		snprintf(t->why, sizeof(t->why), "%.60s, %d device(s); %.100s; device 0 %.40s",
			 gpu_version(g), t->devices, p2p, stg);
	}
	return 0;
}

/* ---- registration ---- */

static int gen_id(uint64_t *id)
{
	do {
		if (getrandom(id, sizeof(*id), 0) != sizeof(*id))
			return -EIO;
	} while (*id == 0);
	return 0;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* A part of a daemon mapping to populate (map_host); runs in a thread of its own. */
struct map_part {
	char *p;
	size_t len;
	int err;
};

static void *map_populate(void *arg)
{
	struct map_part *m = arg;

	m->err = madvise(m->p, m->len, MADV_POPULATE_READ) ? errno : 0;
	return NULL;
}

static int map_host(const struct place_caller *c, struct dmafs_ioc_register *rq, struct reg *r)
{
	char path[64];
	struct stat st;
	struct statfs sf;
	struct map_part part[4];
	pthread_t tid[4];
	int started[4] = { 0 };
	sigset_t all, old;
	cpu_set_t cpus;
	uint64_t start, end, unit = (uint64_t)sysconf(_SC_PAGESIZE);
	size_t n, step;
	int fd;

	if (rq->fd < 0)
		return -EBADF;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)c->tgid, rq->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -EBADF : -errno;
	/* only shared memory the caller owns: memfd or tmpfs/hugetlbfs objects */
	if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (st.st_uid != c->uid) {
		close(fd);
		return -EACCES;
	}
	if (sf.f_type != TMPFS_MAGIC && sf.f_type != HUGETLBFS_MAGIC) {
		close(fd);
		return -EINVAL;
	}
	if (rq->offset > (uint64_t)st.st_size || rq->size > (uint64_t)st.st_size - rq->offset) {
		close(fd);
		return -ERANGE;
	}
	/* hugetlbfs maps and unmaps whole huge pages (its st_blksize): an unaligned offset
	 * fails mmap, and an unaligned length fails the munmap in reg_free, which would leave
	 * the mapping and its pages to the daemon's end. Its file sizes are whole pages. */
	if (sf.f_type == HUGETLBFS_MAGIC && st.st_blksize > 0)
		unit = (uint64_t)st.st_blksize;
	start = ALIGN_DOWN(rq->offset, unit);
	end = ALIGN_UP(rq->offset + rq->size, unit);
	r->map_len = end - start;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, start);
	if (r->map == MAP_FAILED) {
		close(fd);
		r->map = NULL;
		return -errno;
	}
	/*
	 * Populated now: page faults at registration, not inside the first placement. The
	 * client has the pages already; read faults map 16 of them each (fault-around), in
	 * up to 4 threads with 64 MiB or more each. Measured on a 16-core VM, 2 GiB: 0.15 s
	 * in one thread, 0.075 s in 4; 16 GiB: 1.3 s, 0.6 s; 8 and 16 threads were slower.
	 * Failures are left to the placement's own faults, as MAP_POPULATE leaves them.
	 */
	n = sched_getaffinity(0, sizeof(cpus), &cpus) ? 1 : (size_t)CPU_COUNT(&cpus);
	n = MAX(MIN(MIN(n, 4), r->map_len / (64u << 20)), 1);
	step = ALIGN_UP((r->map_len + n - 1) / n, unit);
	for (n = 0; n * step < r->map_len; n++)
		part[n] = (struct map_part){ (char *)r->map + n * step,
					     MIN(step, r->map_len - n * step), 0 };
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (size_t i = 1; i < n; i++)
		started[i] = !pthread_create(&tid[i], NULL, map_populate, &part[i]);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	map_populate(&part[0]);
	for (size_t i = 1; i < n; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			map_populate(&part[i]);
	}
	/* Linux < 5.14 has no MADV_POPULATE_READ: map again in place, populated. A failed
	 * MAP_FIXED may leave the range unmapped, so that is a failed registration. */
	if (part[0].err == EINVAL &&
	    mmap(r->map, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
		 fd, start) == MAP_FAILED) {
		part[0].err = errno;
		munmap(r->map, r->map_len);
		r->map = NULL;
		close(fd);
		return -part[0].err;
	}
	close(fd);
	r->base = (char *)r->map + (rq->offset - start);
	return 0;
}

static int map_gpu(struct dmafs_ioc_register *rq, struct reg *r)
{
	char why[256];
	size_t len;
	int ret;

	ret = gpu_load(rq->target, &r->gpu, why, sizeof(why));
	if (ret) {
		log_info("placement: cannot register a %s buffer: %s",
			 rq->target == DMAFS_TARGET_CUDA ? "CUDA" : "HIP", why);
		return -ENXIO;
	}
	r->dev = gpu_find_uuid(r->gpu, rq->uuid);
	if (r->dev < 0)
		return -ENXIO;
	ret = gpu_ipc_open(r->gpu, r->dev, rq->handle, &r->map, &len);
	if (ret)
		return ret;
	if (rq->offset > len || rq->size > len - rq->offset) {
		gpu_ipc_close(r->gpu, r->dev, r->map);
		r->map = NULL;
		return -ERANGE;
	}
	r->base = (char *)r->map + rq->offset;
	rq->device = r->dev;
	if (rq->target == DMAFS_TARGET_CUDA && p2p_usable(NULL, 0))
		r->p2p = p2p_buf_register(r->map, len) == 0;
	r->map_len = len;
	return 0;
}

int place_register(struct fs *fs, const struct place_caller *c, struct dmafs_ioc_register *rq)
{
	struct reg *r;
	unsigned mine = 0;
	int ret;

	if (rq->flags || rq->size == 0 || rq->offset > UINT64_MAX - rq->size)
		return -EINVAL;
	if (rq->target != DMAFS_TARGET_HOST && rq->target != DMAFS_TARGET_CUDA &&
	    rq->target != DMAFS_TARGET_HIP)
		return -EINVAL;
	pthread_mutex_lock(&regs_lock);
	for (r = regs; r; r = r->next)
		mine += r->tgid == c->tgid && !r->dead;
	pthread_mutex_unlock(&regs_lock);
	if (mine >= MAX_REGS_PER_PROCESS)
		return -EMFILE;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->pidfd = syscall(SYS_pidfd_open, c->tgid, 0);
	if (r->pidfd < 0) {
		free(r);
		return -ESRCH;
	}
	r->tgid = c->tgid;
	r->target = rq->target;
	r->size = rq->size;
	ret = gen_id(&r->id);
	if (!ret)
		ret = rq->target == DMAFS_TARGET_HOST ? map_host(c, rq, r) : map_gpu(rq, r);
	if (ret) {
		reg_free(r);
		return ret;
	}
	rq->id = r->id;
	pthread_mutex_lock(&regs_lock);
	r->next = regs;
	regs = r;
	nregs++;
	pthread_mutex_unlock(&regs_lock);
	log_debug("placement: process %d registered buffer %016llx (%llu bytes, target %d)",
		  (int)c->tgid, (unsigned long long)r->id, (unsigned long long)r->size, r->target);
	return 0;
}

/* Find the caller's live registration and take a reference. */
static int reg_get(const struct place_caller *c, uint64_t id, struct reg **out)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&regs_lock);
	for (struct reg *r = regs; r; r = r->next) {
		if (r->id != id || r->dead)
			continue;
		if (r->tgid != c->tgid) {
			ret = -EPERM;
		} else {
			r->refs++;
			*out = r;
			ret = 0;
		}
		break;
	}
	pthread_mutex_unlock(&regs_lock);
	return ret;
}

static void reg_put(struct reg *r)
{
	int free_now;

	pthread_mutex_lock(&regs_lock);
	free_now = --r->refs == 0 && r->dead;
	pthread_mutex_unlock(&regs_lock);
	if (free_now)
		reap();
}

int place_unregister(const struct place_caller *c, uint64_t id)
{
	struct reg *r;
	int ret = reg_get(c, id, &r);

	if (ret)
		return ret;
	pthread_mutex_lock(&regs_lock);
	r->dead = 1;
	pthread_mutex_unlock(&regs_lock);
	reg_put(r);
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
static int use_p2p(struct fs *fs, struct reg *r)
{
	if (r->target != DMAFS_TARGET_CUDA || !r->p2p || fs->verify_place)
		return 0;
	for (unsigned m = 0; m < fs->n; m++)
		if (p2p_member(&fs->members[m], m))
			return 0;
	return 1;
}

int place_run(struct fs *fs, const struct place_caller *c, uint64_t ino_nr,
	      struct dmafs_ioc_place *p)
{
	uint64_t t0 = now_ns(), total = 0;
	struct inode *ino;
	struct reg *r;
	int ret, path = DMAFS_PATH_NONE;

	if (p->count > DMAFS_PLACE_MAX || p->flags)
		return -EINVAL;
	ret = reg_get(c, p->id, &r);
	if (ret)
		return ret;
	pthread_mutex_lock(&fs->meta.lock);
	ino = meta_iget(&fs->meta, ino_nr);
	pthread_mutex_unlock(&fs->meta.lock);
	if (!ino || !S_ISREG(ino->a.mode)) {
		reg_put(r);
		return ino ? -EINVAL : -ENOENT;
	}
	wback_wait(fs, ino, 0); /* what was written is on the members before we read */
	/* the size and extent map stay fixed while we read: writers wait */
	pthread_rwlock_rdlock(&ino->iolock);
	ret = place_validate(p, r->size, ino->a.size);
	if (!ret) {
		struct pipe_target t = { .gpu = r->target != DMAFS_TARGET_HOST, .base = r->base };

		if (r->target == DMAFS_TARGET_HOST) {
			ret = pipeline_run(fs, ino, &t, p, fs->verify_place);
			path = DMAFS_PATH_HOST;
		} else if (use_p2p(fs, r)) {
			ret = place_p2p(fs, ino, r->gpu, r->dev, r->map, (uint64_t)(r->base - (char *)r->map), p);
			path = DMAFS_PATH_P2P;
		} else {
			ret = stage_get(r->target, r->gpu, r->dev, &t.stage);
			if (!ret)
				ret = pipeline_run(fs, ino, &t, p, fs->verify_place);
			path = DMAFS_PATH_STAGED;
		}
	}
	pthread_rwlock_unlock(&ino->iolock);
	reg_put(r);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < p->count; i++)
		total += p->e[i].length;
	p->bytes = total;
	p->path = path;
	p->elapsed_ns = now_ns() - t0;
	return 0;
}
