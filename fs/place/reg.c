// SPDX-License-Identifier: MIT
/* reg.c - the registration table: clients, users, limits, mapped buffers and their reaper. */
#include "place/reg.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
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

#include "place/clientfd.h"
#include "gpu.h"
#include "place/p2p.h"

#define REAP_INTERVAL_MS 500

/* A process with registrations: one pidfd for all of them, closed with the last. */
struct client {
	struct client *next;
	pid_t tgid;
	int pidfd;
	unsigned nregs;		/* protected by regs_lock */
};

/* What one user holds, against the per-user limits. */
struct user {
	struct user *next;
	uid_t uid;
	unsigned nregs;		/* protected by regs_lock */
	uint64_t bytes;		/* host bytes mapped; protected by regs_lock */
	unsigned stuck;		/* descriptors being closed aside (clientfd.h); atomic */
	uint64_t logged_ns;	/* last refusal logged; protected by regs_lock */
};

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

int place_killed(pid_t tid)
{
	char path[64], line[256];
	unsigned long long mask;
	int killed = 1; /* no status: the thread is gone */
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return 1;
	killed = 0;
	while (fgets(line, sizeof(line), f))
		if ((!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7)) &&
		    sscanf(line + 7, "%llx", &mask) == 1 && (mask & (1ull << (SIGKILL - 1))))
			killed = 1;
	fclose(f);
	return killed;
}

/* Has the process behind @pidfd exited? A pidfd polls readable from its exit on, zombie
 * or not, and a pid used again by another process never makes it readable again. */
static int pid_gone(int pidfd)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}

/* Release what a registration holds. Caller holds no lock; the reg is unlinked and its
 * client and user counts already dropped. */
static void reg_free(struct place *pl, struct reg *r)
{
	if (r->target == DMAFS_TARGET_HOST) {
		if (r->map)
			munmap(r->map, r->map_len + r->guard);
	} else if (r->map) {
		if (r->p2p)
			p2p_buf_deregister(pl->p2p, r->map);
		gpu_ipc_close(r->gpu, r->dev, r->map);
	}
	free(r);
}

/* Drop @r's counts; returns its client when that was the client's last registration
 * (unlinked: the caller closes its pidfd and frees it). Caller holds regs_lock. */
static struct client *uncount(struct place *pl, struct reg *r)
{
	struct client **pp, *cl = r->cl;

	pl->nregs--;
	pl->nbytes -= r->charged;
	r->u->nregs--;
	r->u->bytes -= r->charged;
	if (--cl->nregs)
		return NULL;
	for (pp = &pl->clients; *pp != cl; pp = &(*pp)->next)
		;
	*pp = cl->next;
	return cl;
}

/* Unlink and free every dead registration nobody uses. */
static void reap(struct place *pl)
{
	struct reg **pp, *dead = NULL, *r;
	struct client *gone = NULL, *cl;

	pthread_mutex_lock(&pl->regs_lock);
	for (cl = pl->clients; cl; cl = cl->next)
		if (pid_gone(cl->pidfd))
			for (r = pl->regs; r; r = r->next)
				if (r->cl == cl)
					r->dead = 1;
	for (pp = &pl->regs; *pp;) {
		r = *pp;
		if (r->dead && r->refs == 0) {
			*pp = r->next;
			cl = uncount(pl, r);
			if (cl) {
				cl->next = gone;
				gone = cl;
			}
			r->next = dead;
			dead = r;
		} else {
			pp = &r->next;
		}
	}
	pthread_mutex_unlock(&pl->regs_lock);
	while (dead) {
		r = dead;
		dead = r->next;
		log_debug("placement: released buffer %016llx", (unsigned long long)r->id);
		reg_free(pl, r);
	}
	while (gone) {
		cl = gone;
		gone = cl->next;
		close(cl->pidfd);
		free(cl);
	}
}

static void *reaper_main(void *arg)
{
	struct place *pl = arg;

	pthread_mutex_lock(&pl->reaper_lock);
	while (!pl->reaper_stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += REAP_INTERVAL_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&pl->reaper_wake, &pl->reaper_lock, &ts);
		if (pl->reaper_stop)
			break;
		pthread_mutex_unlock(&pl->reaper_lock);
		reap(pl);
		pthread_mutex_lock(&pl->reaper_lock);
	}
	pthread_mutex_unlock(&pl->reaper_lock);
	return NULL;
}


void reg_init(struct place *pl)
{
	pthread_mutex_init(&pl->regs_lock, NULL);
	pthread_mutex_init(&pl->reaper_lock, NULL);
	pthread_cond_init(&pl->reaper_wake, NULL);
}

int reg_reaper_start(struct place *pl)
{
	if (pthread_create(&pl->reaper, NULL, reaper_main, pl))
		return -EAGAIN;
	pl->reaper_running = 1;
	return 0;
}

void reg_shutdown(struct place *pl)
{
	if (pl->reaper_running) {
		pthread_mutex_lock(&pl->reaper_lock);
		pl->reaper_stop = 1;
		pthread_cond_signal(&pl->reaper_wake);
		pthread_mutex_unlock(&pl->reaper_lock);
		pthread_join(pl->reaper, NULL);
		pl->reaper_running = 0;
	}
	pthread_mutex_lock(&pl->regs_lock);
	for (struct reg *r = pl->regs; r; r = r->next)
		r->dead = 1;
	pthread_mutex_unlock(&pl->regs_lock);
	reap(pl);
	/* pl->users stay: a descriptor still being closed aside counts in its user's entry */
}

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

/* Is a page mapped or cached behind every page of [p, p + len)? (mincore(2): a page of
 * a shmem object that is swapped out counts as missing.) */
static int pages_present(void *p, size_t len)
{
	unsigned char vec[4096];
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *a = (char *)ALIGN_DOWN((uintptr_t)p, pg);

	len = ALIGN_UP(len + ((char *)p - a), pg);
	for (size_t off = 0; off < len; off += sizeof(vec) * pg) {
		size_t n = MIN(len - off, sizeof(vec) * pg);

		if (mincore(a + off, n, vec))
			return 0;
		for (size_t i = 0; i < n / pg; i++)
			if (!(vec[i] & 1))
				return 0;
	}
	return 1;
}

/*
 * Does the client's object have a page behind every page of [map, map + len)? The daemon
 * must not allocate memory the client did not: a fault on a hole of a shmem object would
 * allocate a page, charged to the daemon. An object whose blocks cover its size has no
 * hole; otherwise mincore(2) asks the page cache page by page.
 */
static int no_holes(const struct stat *st, int hugetlb, void *map, size_t len)
{
	if ((uint64_t)st->st_blocks * 512 >= (uint64_t)st->st_size)
		return 1;
	if (hugetlb)
		return 0; /* mincore sees only this mapping's pages there, and it has none */
	return pages_present(map, len);
}

/*
 * Map [r->map_off, + r->map_len) of @fd shared, @unit aligned, with a PROT_NONE guard of
 * @unit after it. The guard keeps two registrations of adjacent ranges of one object
 * from merging into one mapping, so /proc/self/map_files names each exactly
 * (reg_host_intact). Returns 0 or -errno (nothing left mapped).
 */
static int map_guarded(struct reg *r, int fd, uint64_t unit)
{
	size_t span = r->map_len + 2 * unit;
	char *res, *a;

	res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED)
		return -errno;
	a = (char *)ALIGN_UP((uintptr_t)res, unit);
	if (mmap(a, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
		 (off_t)r->map_off) == MAP_FAILED) {
		int err = errno;

		munmap(res, span);
		return -err;
	}
	/* keep [a, a + map_len + unit); give back the alignment slack either side */
	if (a > res)
		munmap(res, (size_t)(a - res));
	if (res + span > a + r->map_len + unit)
		munmap(a + r->map_len + unit, (size_t)(res + span - (a + r->map_len + unit)));
	r->map = a;
	r->guard = unit;
	return 0;
}

/*
 * Before a placement into a host buffer: is memory still behind every page it writes?
 * The client may have punched holes since it registered, and a write there would
 * allocate pages charged to the daemon. The object is reached through
 * /proc/self/map_files (the daemon's own mapping: nothing a client names); an object
 * whose blocks cover its size is whole, else its holes are looked for in the ranges
 * placed. Without map_files (no CAP_SYS_ADMIN), mincore decides, and a swapped-out page
 * counts as missing. A hole punched while the placement runs is still filled: the
 * registered-bytes limits bound that. Returns 0 or -EFAULT.
 */
int reg_host_intact(const struct reg *r, const struct dmafs_ioc_place *p)
{
	uint64_t rel = (uint64_t)(r->base - (char *)r->map);
	char path[64];
	struct stat st;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)r->map,
		 (unsigned long)r->map + r->map_len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 &&
	    (uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size) {
		close(fd);
		return 0;
	}
	for (uint32_t i = 0; i < p->count && !ret; i++) {
		const struct dmafs_place_entry *e = &p->e[i];
		off_t a = (off_t)(r->map_off + rel + e->buffer_offset), h;

		if (!e->length)
			continue;
		if (fd >= 0 && !r->hugetlb) {
			/* shmem answers holes by its page cache; swapped pages are data */
			h = lseek(fd, a, SEEK_HOLE);
			if (h >= 0 && (uint64_t)h < (uint64_t)a + e->length)
				ret = -EFAULT;
		} else if (!pages_present(r->base + e->buffer_offset, e->length)) {
			ret = -EFAULT;
		}
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Map the client's shared memory: @fd is the daemon's descriptor of it (clientfd.h). */
static int map_host(const struct place_caller *c, struct dmafs_ioc_register *rq, struct reg *r,
		    int fd)
{
	struct stat st;
	struct statfs sf;
	uint64_t start, end, unit = (uint64_t)sysconf(_SC_PAGESIZE);
	int hugetlb, ret;

	/* fstat and fstatfs are safe now: clientfd_take let only shmem and hugetlbfs by */
	if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0 || !S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_uid != c->uid)
		return -EACCES;
	if (sf.f_type != TMPFS_MAGIC && sf.f_type != HUGETLBFS_MAGIC)
		return -EINVAL;
	if (rq->offset > (uint64_t)st.st_size || rq->size > (uint64_t)st.st_size - rq->offset)
		return -ERANGE;
	/* hugetlbfs maps and unmaps whole huge pages (its st_blksize): an unaligned offset
	 * fails mmap, and an unaligned length fails the munmap in reg_free, which would leave
	 * the mapping and its pages to the daemon's end. Its file sizes are whole pages. */
	hugetlb = sf.f_type == HUGETLBFS_MAGIC;
	if (hugetlb && st.st_blksize > 0)
		unit = (uint64_t)st.st_blksize;
	start = ALIGN_DOWN(rq->offset, unit);
	end = ALIGN_UP(rq->offset + rq->size, unit);
	r->map_len = end - start;
	r->map_off = start;
	r->hugetlb = hugetlb;
	ret = map_guarded(r, fd, unit);
	if (ret)
		return ret;
	if (!no_holes(&st, hugetlb, r->map, r->map_len))
		return -EFAULT;
	/* page faults at registration, not inside the first placement; failures are left to
	 * the placement's own faults (usermem.h), as MAP_POPULATE leaves them */
	dm_populate(r->map, r->map_len, MADV_POPULATE_READ, unit);
	r->base = (char *)r->map + (rq->offset - start);
	return 0;
}

static int map_gpu(struct place *pl, struct dmafs_ioc_register *rq, struct reg *r)
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
	if (rq->target == DMAFS_TARGET_CUDA && p2p_usable(pl->p2p, NULL, 0))
		r->p2p = p2p_buf_register(pl->p2p, r->map, len) == 0;
	r->map_len = len;
	return 0;
}

/* The user entry of @uid (made if new), or NULL (-ENOMEM). Caller holds regs_lock. */
static struct user *user_get(struct place *pl, uid_t uid)
{
	struct user *u;

	for (u = pl->users; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (u) {
		u->uid = uid;
		u->next = pl->users;
		pl->users = u;
	}
	return u;
}

static struct client *client_find(struct place *pl, pid_t tgid)
{
	for (struct client *cl = pl->clients; cl; cl = cl->next)
		if (cl->tgid == tgid && !pid_gone(cl->pidfd))
			return cl;
	return NULL;
}

/*
 * Count a registration of @bytes host bytes against the limits, for user @u. Returns 0,
 * -EDQUOT (a per-user limit) or -ENOSPC (a limit of the mount); @msg gets the line to
 * log, naming the limit, or stays empty: a user's refusals are logged once per
 * REFUSE_LOG_NS, so a flood of them cannot flood the log. Caller holds regs_lock.
 */
#define REFUSE_LOG_NS (10 * 1000000000ull)

static int charge(struct place *pl, const struct place_caller *c, struct user *u, uint64_t bytes, char *msg,
		  size_t len)
{
	const char *what = NULL;
	char a[32], b[32];
	uint64_t now;
	int ret = 0;

	msg[0] = 0;
	if (u->nregs >= pl->lim.regs_user) {
		what = "reg_max_user";
		ret = -EDQUOT;
		snprintf(a, sizeof(a), "%u registrations", pl->lim.regs_user);
	} else if (bytes > pl->lim.bytes_user - MIN(u->bytes, pl->lim.bytes_user)) {
		what = "reg_bytes_user";
		ret = -EDQUOT;
		snprintf(a, sizeof(a), "%s", util_fmt_size(pl->lim.bytes_user, b, sizeof(b)));
	} else if (pl->nregs >= pl->lim.regs) {
		what = "reg_max";
		ret = -ENOSPC;
		snprintf(a, sizeof(a), "%u registrations", pl->lim.regs);
	} else if (bytes > pl->lim.bytes - MIN(pl->nbytes, pl->lim.bytes)) {
		what = "reg_bytes";
		ret = -ENOSPC;
		snprintf(a, sizeof(a), "%s", util_fmt_size(pl->lim.bytes, b, sizeof(b)));
	}
	if (ret) {
		now = dm_mono_ns();
		if (!u->logged_ns || now - u->logged_ns >= REFUSE_LOG_NS) {
			u->logged_ns = now;
			snprintf(msg, len, "placement: process %d (uid %u) refused a registration: %s %s is reached (%s; mount option %s=; further refusals of this user in the next 10 s are not logged)",
				 (int)c->tgid, (unsigned)c->uid,
				 ret == -EDQUOT ? "the per-user limit of" : "the mount's limit of", a,
				 ret == -EDQUOT ? "EDQUOT" : "ENOSPC", what);
		}
		return ret;
	}
	u->nregs++;
	u->bytes += bytes;
	pl->nregs++;
	pl->nbytes += bytes;
	return 0;
}

/*
 * Check a registration request; *@bytes gets the host bytes it will cost against the
 * limits (0 for a GPU buffer). Returns 0, -EINVAL or -ERANGE.
 */
static int check_request(const struct dmafs_ioc_register *rq, uint64_t *bytes)
{
	*bytes = 0;
	if (rq->flags || rq->size == 0 || rq->offset > UINT64_MAX - rq->size)
		return -EINVAL;
	if (rq->target != DMAFS_TARGET_HOST && rq->target != DMAFS_TARGET_CUDA &&
	    rq->target != DMAFS_TARGET_HIP)
		return -EINVAL;
	if (rq->target == DMAFS_TARGET_HOST) {
		/* what the mapping will take, with a page either side at most */
		uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);

		if (rq->size > UINT64_MAX - 2 * pg)
			return -ERANGE;
		*bytes = ALIGN_UP(rq->size, pg);
	}
	return 0;
}

/*
 * A client entry in *@fresh for a caller that has none yet (NULL if it has one), made
 * outside regs_lock: pidfd_open and calloc need not hold it. Returns 0, -ESRCH or -ENOMEM.
 */
static int client_prepare(struct place *pl, const struct place_caller *c, struct client **fresh)
{
	struct client *cl;
	int pidfd;

	*fresh = NULL;
	pthread_mutex_lock(&pl->regs_lock);
	cl = client_find(pl, c->tgid);
	pthread_mutex_unlock(&pl->regs_lock);
	if (cl)
		return 0;
	pidfd = (int)syscall(SYS_pidfd_open, c->tgid, 0);
	*fresh = pidfd < 0 ? NULL : calloc(1, sizeof(**fresh));
	if (!*fresh) {
		if (pidfd >= 0)
			close(pidfd);
		return pidfd < 0 ? -ESRCH : -ENOMEM;
	}
	(*fresh)->tgid = c->tgid;
	(*fresh)->pidfd = pidfd;
	return 0;
}

/* count_reg(): the client known to client_prepare() has since lost its last
 * registration, and with it its pidfd. */
#define CLIENT_GONE 1

/*
 * Count @r, of @bytes host bytes, for the caller's user and client; @fresh becomes the
 * client if there is none by now, else it is freed. Counted before anything is mapped:
 * the limits hold while registrations race. Returns 0, CLIENT_GONE (nothing counted,
 * @fresh untouched: NULL), or -errno of charge() or -ENOMEM.
 */
static int count_reg(struct place *pl, const struct place_caller *c, struct reg *r,
		     uint64_t bytes, struct client *fresh)
{
	struct client *cl;
	struct user *u;
	char msg[320];
	int ret;

	pthread_mutex_lock(&pl->regs_lock);
	cl = client_find(pl, c->tgid);
	if (!cl && !fresh) {
		/* its last registration went since client_prepare(): take a new pidfd */
		pthread_mutex_unlock(&pl->regs_lock);
		return CLIENT_GONE;
	}
	u = user_get(pl, c->uid);
	msg[0] = 0;
	ret = u ? charge(pl, c, u, bytes, msg, sizeof(msg)) : -ENOMEM;
	if (!ret) {
		if (!cl) {
			cl = fresh;
			fresh = NULL;
			cl->next = pl->clients;
			pl->clients = cl;
		}
		cl->nregs++;
		r->cl = cl;
		r->u = u;
		r->charged = bytes;
	}
	pthread_mutex_unlock(&pl->regs_lock);
	if (fresh) {
		close(fresh->pidfd);
		free(fresh);
	}
	if (msg[0])
		log_info("%s", msg);
	return ret;
}

/* Give counted @r its id and map the buffer: the client's shared memory or its GPU memory. */
static int map_reg(struct place *pl, const struct place_caller *c, struct dmafs_ioc_register *rq,
		   struct reg *r)
{
	int ret, fd = -1;

	r->target = rq->target;
	r->size = rq->size;
	ret = gen_id(&r->id);
	if (!ret && rq->target == DMAFS_TARGET_HOST) {
		ret = clientfd_take(&pl->shm, c->tgid, r->cl->pidfd, rq->fd, &r->u->stuck, &fd);
		if (!ret)
			ret = map_host(c, rq, r, fd);
		if (fd >= 0)
			close(fd);
	} else if (!ret) {
		ret = map_gpu(pl, rq, r);
	}
	return ret;
}

/* Undo count_reg() and free @r, whose mapping failed; it was never in the table. */
static void drop_reg(struct place *pl, struct reg *r)
{
	struct client *drop;

	pthread_mutex_lock(&pl->regs_lock);
	drop = uncount(pl, r);
	pthread_mutex_unlock(&pl->regs_lock);
	if (drop) {
		close(drop->pidfd);
		free(drop);
	}
	reg_free(pl, r);
}

int place_register(struct place *pl, const struct place_caller *c, struct dmafs_ioc_register *rq)
{
	struct client *fresh;
	struct reg *r;
	uint64_t bytes;
	int ret;

	ret = check_request(rq, &bytes);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (int tries = 0;; tries++) {
		ret = client_prepare(pl, c, &fresh);
		if (!ret)
			ret = count_reg(pl, c, r, bytes, fresh);
		if (ret != CLIENT_GONE)
			break;
		if (tries == 8) { /* unregistering as fast as it registers */
			ret = -EAGAIN;
			break;
		}
	}
	if (ret) {
		free(r);
		return ret;
	}
	ret = map_reg(pl, c, rq, r);
	if (ret) {
		drop_reg(pl, r);
		return ret;
	}
	rq->id = r->id;
	pthread_mutex_lock(&pl->regs_lock);
	r->next = pl->regs;
	pl->regs = r;
	pthread_mutex_unlock(&pl->regs_lock);
	log_debug("placement: process %d registered buffer %016llx (%llu bytes, target %d)",
		  (int)c->tgid, (unsigned long long)r->id, (unsigned long long)r->size, r->target);
	return 0;
}

/* Find the caller's live registration and take a reference. */
int reg_get(struct place *pl, const struct place_caller *c, uint64_t id, struct reg **out)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&pl->regs_lock);
	for (struct reg *r = pl->regs; r; r = r->next) {
		if (r->id != id || r->dead)
			continue;
		/* a pid used again by another process must not reach the old one's buffers
		 * in the half second before the pl->reaper runs */
		if (pid_gone(r->cl->pidfd))
			break;
		if (r->cl->tgid != c->tgid) {
			ret = -EPERM;
		} else {
			r->refs++;
			*out = r;
			ret = 0;
		}
		break;
	}
	pthread_mutex_unlock(&pl->regs_lock);
	return ret;
}

void reg_put(struct place *pl, struct reg *r)
{
	int free_now;

	pthread_mutex_lock(&pl->regs_lock);
	free_now = --r->refs == 0 && r->dead;
	pthread_mutex_unlock(&pl->regs_lock);
	if (free_now)
		reap(pl);
}

int place_unregister(struct place *pl, const struct place_caller *c, uint64_t id)
{
	struct reg *r;
	int ret = reg_get(pl, c, id, &r);

	if (ret)
		return ret;
	pthread_mutex_lock(&pl->regs_lock);
	r->dead = 1;
	pthread_mutex_unlock(&pl->regs_lock);
	reg_put(pl, r);
	return 0;
}
