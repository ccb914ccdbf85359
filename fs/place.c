// SPDX-License-Identifier: MIT
/* place.c - registered buffers and the placement engine (see place.h). */
#include "place.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
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

/* One pinned staging area per GPU, split in two halves that alternate between "being
 * filled by O_DIRECT reads" and "being copied to the device". */
struct stage {
	pthread_mutex_t lock; /* one placement per GPU at a time: the link is the bottleneck */
	char *mem;
	size_t size;
	void *stream[2];
	int ready;
};

static pthread_mutex_t regs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg *regs; /* protected by regs_lock */
static unsigned nregs;
static uint64_t staging_bytes = 256ull << 20;
static struct stage stages[2][64]; /* [cuda, hip][device] */
static pthread_t reaper;
static int reaper_running, reaper_stop;
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
	while (!__atomic_load_n(&reaper_stop, __ATOMIC_ACQUIRE)) {
		poll(NULL, 0, REAP_INTERVAL_MS);
		reap();
	}
	return NULL;
}

static void gpu_log_to_daemon(const char *msg) { log_err("%s", msg); }

int place_init(struct fs *fs, uint64_t staging)
{
	place_fs = fs;
	if (staging)
		staging_bytes = ALIGN_UP(staging, 2ull << 20);
	gpu_set_log(gpu_log_to_daemon);
	for (int t = 0; t < 2; t++)
		for (int d = 0; d < 64; d++)
			pthread_mutex_init(&stages[t][d].lock, NULL);
	if (pthread_create(&reaper, NULL, reaper_main, NULL))
		return -EAGAIN;
	reaper_running = 1;
	return 0;
}

void place_shutdown(void)
{
	if (reaper_running) {
		__atomic_store_n(&reaper_stop, 1, __ATOMIC_RELEASE);
		pthread_join(reaper, NULL);
		reaper_running = 0;
	}
	pthread_mutex_lock(&regs_lock);
	for (struct reg *r = regs; r; r = r->next)
		r->dead = 1;
	pthread_mutex_unlock(&regs_lock);
	reap();
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
	out->staging_bytes = staging_bytes;
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
		char why[200], p2p[200];

		t->target = target;
		if (gpu_load(target, &g, why, sizeof(why))) {
			t->path = DMAFS_PATH_NONE;
			t->devices = -1;
			snprintf(t->why, sizeof(t->why), "%s", why);
			continue;
		}
		t->path = p2p_reason(fs, target, p2p, sizeof(p2p)) ? DMAFS_PATH_P2P : DMAFS_PATH_STAGED;
		t->devices = gpu_count(g);
		snprintf(t->why, sizeof(t->why), "%s, %d device(s); %s", gpu_version(g), t->devices, p2p);
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
		e->length = len;
	}
	return 0;
}

/* ---- host target ---- */

/* Bounce for the unaligned edges and for unaligned placements. */
static __thread char *bounce;
#define BOUNCE_SIZE (8u << 20)

static char *get_bounce(void)
{
	if (!bounce)
		bounce = util_aligned_alloc(BOUNCE_SIZE);
	return bounce;
}

/* Copy file bytes [off, off+len) into @dst through the bounce buffer. */
static int copy_through(struct fs *fs, struct inode *ino, char *dst, uint64_t off, uint64_t len)
{
	char *b = get_bounce();

	if (!b)
		return -ENOMEM;
	while (len) {
		uint64_t a = ALIGN_DOWN(off, DMAFS_BLOCK);
		uint64_t n = MIN(len, BOUNCE_SIZE - (off - a));
		uint64_t e = ALIGN_UP(off + n, DMAFS_BLOCK);
		int ret = fs_read_blocks(fs, ino, b, a, e, fs->verify_place);

		if (ret)
			return ret;
		memcpy(dst, b + (off - a), n);
		dst += n;
		off += n;
		len -= n;
	}
	return 0;
}

static int place_host(struct fs *fs, struct inode *ino, struct reg *r, struct dmafs_ioc_place *p)
{
	for (uint32_t i = 0; i < p->count; i++) {
		const struct dmafs_place_entry *e = &p->e[i];
		uint64_t off = e->file_offset, end = off + e->length;
		char *dst = r->base + e->buffer_offset;
		uint64_t a = ALIGN_UP(off, DMAFS_BLOCK), b = ALIGN_DOWN(end, DMAFS_BLOCK);
		int ret;

		if (e->length == 0)
			continue;
		/* zero copy for the block-aligned interior when the buffer agrees on alignment */
		if (((uintptr_t)dst - off) % DMAFS_BLOCK == 0 && a < b) {
			ret = copy_through(fs, ino, dst, off, a - off);
			if (!ret)
				ret = fs_read_blocks(fs, ino, dst + (a - off), a, b, fs->verify_place);
			if (!ret)
				ret = copy_through(fs, ino, dst + (b - off), b, end - b);
		} else {
			ret = copy_through(fs, ino, dst, off, e->length);
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- GPU targets: pipelined staging ---- */

static int stage_ready(struct stage *s, struct gpu *g, int dev)
{
	int ret;

	if (s->ready)
		return 0;
	s->size = staging_bytes;
	s->mem = util_aligned_alloc(s->size);
	if (!s->mem)
		return -ENOMEM;
	ret = gpu_host_register(g, dev, s->mem, s->size);
	if (!ret)
		ret = gpu_stream_create(g, dev, &s->stream[0]);
	if (!ret)
		ret = gpu_stream_create(g, dev, &s->stream[1]);
	if (ret) {
		log_err("placement: cannot set up %zu MiB of pinned staging on GPU %d", s->size >> 20, dev);
		free(s->mem);
		s->mem = NULL;
		return -ENODEV;
	}
	s->ready = 1;
	return 0;
}

struct piece {
	uint64_t a, b;	   /* aligned file range read into staging */
	uint64_t skip;	   /* useful bytes start at a + skip */
	uint64_t len;
	uint64_t dst;	   /* buffer offset */
	size_t spos;	   /* offset in the staging half */
};

/* Read a batch of pieces into half @h and queue their copies on its stream. Member read
 * errors come back as -EIO, GPU failures as -ENODEV. */
static int stage_batch(struct fs *fs, struct inode *ino, struct reg *r, struct stage *s, int h,
		       struct piece *pc, size_t n)
{
	char *half = s->mem + (size_t)h * (s->size / 2);
	struct fs_range *rg = malloc(n * sizeof(*rg));
	int ret;

	if (!rg)
		return -ENOMEM;
	/* the other half's copies may still run; this half's previous copies must be done */
	if (gpu_stream_sync(r->gpu, r->dev, s->stream[h])) {
		free(rg);
		return -ENODEV;
	}
	for (size_t i = 0; i < n; i++)
		rg[i] = (struct fs_range){ half + pc[i].spos, pc[i].a, pc[i].b };
	ret = fs_read_ranges(fs, ino, rg, n, fs->verify_place);
	free(rg);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++)
		if (gpu_copy_htod_async(r->gpu, r->dev, r->base + pc[i].dst,
					half + pc[i].spos + pc[i].skip, pc[i].len, s->stream[h]))
			return -ENODEV;
	return 0;
}

static int place_gpu(struct fs *fs, struct inode *ino, struct reg *r, struct dmafs_ioc_place *p)
{
	struct stage *s = &stages[r->target == DMAFS_TARGET_HIP][r->dev];
	size_t half, used = 0, n = 0, cap = 64;
	struct piece *pc = malloc(cap * sizeof(*pc));
	int h = 0, ret, r0, r1;

	if (!pc)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	ret = stage_ready(s, r->gpu, r->dev);
	half = s->size / 2;
	for (uint32_t i = 0; !ret && i < p->count; i++) {
		uint64_t off = p->e[i].file_offset, left = p->e[i].length;
		uint64_t dst = p->e[i].buffer_offset;

		while (!ret && left) {
			uint64_t room = half - used, a = ALIGN_DOWN(off, DMAFS_BLOCK), take, span;

			/* a piece reads [a, align_up(off + take)): at most take + 2 blocks */
			if (room < 3 * DMAFS_BLOCK || n == cap) {
				if (n == cap && room >= 3 * DMAFS_BLOCK) {
					struct piece *np = realloc(pc, 2 * cap * sizeof(*pc));

					if (!np) {
						ret = -ENOMEM;
						break;
					}
					pc = np;
					cap *= 2;
					continue;
				}
				ret = stage_batch(fs, ino, r, s, h, pc, n);
				h ^= 1;
				used = n = 0;
				continue;
			}
			take = MIN(left, ALIGN_DOWN(room, DMAFS_BLOCK) - 2 * DMAFS_BLOCK);
			span = ALIGN_UP(off + take, DMAFS_BLOCK) - a;
			pc[n++] = (struct piece){ a, a + span, off - a, take, dst, used };
			used += span;
			off += take;
			dst += take;
			left -= take;
		}
	}
	if (!ret && n)
		ret = stage_batch(fs, ino, r, s, h, pc, n);
	/* the placement is complete only when both halves' copies have landed */
	r0 = s->ready ? gpu_stream_sync(r->gpu, r->dev, s->stream[0]) : 0;
	r1 = s->ready ? gpu_stream_sync(r->gpu, r->dev, s->stream[1]) : 0;
	if (!ret && (r0 || r1))
		ret = -ENODEV;
	pthread_mutex_unlock(&s->lock);
	free(pc);
	return ret;
}

/* ---- CUDA direct path: cuFile reads, one thread per member ---- */

struct p2p_piece {
	uint64_t moff, len, boff;
};

struct p2p_job {
	unsigned member;
	struct reg *r;
	struct p2p_piece *pc;
	size_t n, cap;
	int err, started;
	pthread_t t;
};

static void *p2p_member_main(void *arg)
{
	struct p2p_job *j = arg;

	for (size_t i = 0; i < j->n && !j->err; i++) {
		ssize_t got = p2p_read(j->member, j->r->map, j->pc[i].len, j->pc[i].moff, j->pc[i].boff);

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
	if (j->n == j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 64;
		struct p2p_piece *p = realloc(j->pc, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		j->pc = p;
		j->cap = cap;
	}
	j->pc[j->n++] = (struct p2p_piece){ moff, len, boff };
	return 0;
}

static int place_p2p(struct fs *fs, struct inode *ino, struct reg *r, struct dmafs_ioc_place *p)
{
	struct p2p_job *jobs = calloc(fs->n, sizeof(*jobs));
	static const char zero[64 << 10];
	uint64_t rel = r->base - (char *)r->map; /* registration offset inside the allocation */
	int ret = 0;

	if (!jobs)
		return -ENOMEM;
	for (unsigned m = 0; m < fs->n; m++) {
		jobs[m].member = m;
		jobs[m].r = r;
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
					ret = gpu_copy_htod(r->gpu, r->dev, (char *)r->map + dst + (z - off), zero,
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
		if (!ret && jobs[m].err)
			ret = jobs[m].err;
		free(jobs[m].pc);
	}
	free(jobs);
	return ret;
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
	/* the size and extent map stay fixed while we read: writers wait */
	pthread_rwlock_rdlock(&ino->iolock);
	ret = place_validate(p, r->size, ino->a.size);
	if (!ret) {
		if (r->target == DMAFS_TARGET_HOST) {
			ret = place_host(fs, ino, r, p);
			path = DMAFS_PATH_HOST;
		} else if (use_p2p(fs, r)) {
			ret = place_p2p(fs, ino, r, p);
			path = DMAFS_PATH_P2P;
		} else {
			ret = place_gpu(fs, ino, r, p);
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
