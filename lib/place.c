// SPDX-License-Identifier: MIT
/*
 * place.c - dmafs_place, dmafs_place_file, dmafs_place_files: validate extents, hand
 * them to the daemon in DMAFS_PLACE_MAX batches, or do the posix fallback (pread, plus a
 * host-to-device copy for GPU buffers) when the session is not on dmafs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "libdmafs-int.h"

/* Speed order of the paths (dmafs.h): P2P_COMPAT, appended to the values later, ranks after P2P. */
static int rank(int path)
{
	return path == DMAFS_PATH_P2P_COMPAT ? 2 * DMAFS_PATH_P2P + 1 : 2 * path;
}

/* The slower of two paths; NONE (nothing moved) never wins. */
static int slower(int a, int b)
{
	if (a == DMAFS_PATH_NONE)
		return b;
	if (b == DMAFS_PATH_NONE)
		return a;
	return rank(a) > rank(b) ? a : b;
}

/* ---- posix fallback ---- */

/*
 * Per-thread bounce chunk for GPU buffers, reused across calls (an 8 MiB malloc + free
 * per extent costs page faults at every call). Page-locked with the runtime when that
 * works, which doubles the host-to-device rate; plain memory otherwise.
 */
struct bounce {
	void *p;
	struct gpu *g;
	int dev;
	int pinned;
};
static pthread_key_t bounce_key;
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;
static int bounce_key_ok;

static void bounce_free(void *v)
{
	struct bounce *bo = v;

	if (bo->pinned)
		gpu_host_unregister(bo->g, bo->dev, bo->p);
	free(bo->p);
	free(bo);
}

static void bounce_init(void)
{
	bounce_key_ok = pthread_key_create(&bounce_key, bounce_free) == 0;
}

static struct bounce *bounce_get(struct gpu *g, int dev)
{
	struct bounce *bo;

	pthread_once(&bounce_once, bounce_init);
	if (!bounce_key_ok)
		return NULL;
	bo = pthread_getspecific(bounce_key);
	if (bo)
		return bo;
	bo = calloc(1, sizeof(*bo));
	if (!bo)
		return NULL;
	if (posix_memalign(&bo->p, 4096, LIB_BOUNCE_CHUNK)) {
		free(bo);
		return NULL;
	}
	bo->g = g;
	bo->dev = dev;
	bo->pinned = gpu_host_register(g, dev, bo->p, LIB_BOUNCE_CHUNK) == 0;
	if (pthread_setspecific(bounce_key, bo)) {
		bounce_free(bo);
		return NULL;
	}
	return bo;
}

/*
 * Read extent @e (@len bytes, clipped at the end of the file) into @b: straight into a host
 * buffer, or through this thread's bounce chunk and a copy for a GPU buffer. Pieces of at
 * most 1 GiB even for host buffers, so that after a read error e->length still counts
 * what the pieces before it placed.
 */
int lib_posix_extent(struct dmafs_buf *b, int fd, struct dmafs_extent *e, uint64_t len)
{
	uint64_t done = 0, piece = 1ULL << 30;
	struct bounce *bo = NULL;
	int ret = 0;

	if (b->target != DMAFS_TARGET_HOST) {
		bo = bounce_get(b->gpu, b->device);
		if (!bo)
			return -ENOMEM;
		piece = LIB_BOUNCE_CHUNK;
	}
	while (done < len) {
		uint64_t want = len - done < piece ? len - done : piece;
		char *dst = bo ? bo->p : (char *)b->ptr + e->buffer_offset + done;
		ssize_t got = dm_pread_full(fd, dst, (size_t)want, (off_t)(e->file_offset + done));

		if (got < 0) {
			ret = (int)got;
			break;
		}
		if (bo && got && gpu_copy_htod(b->gpu, b->device,
					       (char *)b->ptr + e->buffer_offset + done, bo->p,
					       (size_t)got)) {
			ret = -ENODEV;
			break;
		}
		done += (uint64_t)got;
		if (!got)
			break; /* end of file (a short count may also be an error, which the next
				* read returns) */
	}
	e->length = done;
	return ret;
}

/*
 * The fallback cannot use a descriptor opened with O_DIRECT (our chunks and the caller's
 * buffer offsets need not be aligned): read through a fresh descriptor of the same file.
 */
static int posix_fd(int fd, int flags)
{
	char p[64];

	if (!(flags & O_DIRECT))
		return fd;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int place_posix(struct dmafs_buf *b, int fd, int flags, struct dmafs_extent *ext,
		       size_t n, const uint64_t *len, uint64_t *bytes)
{
	int rfd = posix_fd(fd, flags), ret = 0;

	if (rfd < 0)
		return rfd;
	for (size_t i = 0; i < n && !ret; i++) {
		ret = lib_posix_extent(b, rfd, &ext[i], len[i]);
		*bytes += ext[i].length;
	}
	if (rfd != fd)
		close(rfd);
	return ret;
}

/* ---- daemon ---- */

/* One request, as PLACE2 or (where PLACE2 is not used) PLACE: the same header. */
union place_req {
	struct dmafs_ioc_place2 p2;
	struct dmafs_ioc_place p;
};

static int ioctl_restart(int fd, unsigned long cmd, void *arg)
{
	int r;

	/* A placement writes the same bytes again when repeated: safe to restart. */
	do
		r = ioctl(fd, cmd, arg);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

/*
 * Send @q's request (filled as PLACE2): DMAFS_IOC_PLACE2, or DMAFS_IOC_PLACE for a daemon
 * that answered PLACE2 with ENOTTY once (older than it; remembered in the session), its
 * entries moved down over tier_bytes and back, tier_bytes 0.
 */
static int place_ioctl(struct dmafs_session *s, int fd, union place_req *q)
{
	const size_t from = offsetof(struct dmafs_ioc_place2, e), to = offsetof(struct dmafs_ioc_place, e);
	int ret;

	if (!__atomic_load_n(&s->no_place2, __ATOMIC_RELAXED)) {
		ret = ioctl_restart(fd, DMAFS_IOC_PLACE2, &q->p2);
		if (ret != -ENOTTY)
			return ret;
		__atomic_store_n(&s->no_place2, 1, __ATOMIC_RELAXED);
	}
	memmove((char *)q + to, (char *)q + from, sizeof(q->p2.e));
	ret = ioctl_restart(fd, DMAFS_IOC_PLACE, &q->p);
	memmove((char *)q + from, (char *)q + to, sizeof(q->p2.e));
	q->p2.tier_bytes = 0;
	return ret;
}

static int place_daemon(struct dmafs_buf *b, int fd, struct dmafs_extent *ext, size_t n,
			uint64_t *bytes, int *path)
{
	/* calloc: the kernel copies the whole struct, unused entries included. */
	union place_req *q = calloc(1, sizeof(*q));
	struct dmafs_ioc_place2 *p = &q->p2;
	int ret = 0;

	if (!q)
		return -ENOMEM;
	for (size_t i = 0; i < n && !ret; i += DMAFS_PLACE_MAX) {
		uint32_t cnt = n - i < DMAFS_PLACE_MAX ? (uint32_t)(n - i) : DMAFS_PLACE_MAX;

		memset(p, 0, offsetof(struct dmafs_ioc_place2, e));
		p->id = b->id;
		p->count = cnt;
		for (uint32_t k = 0; k < cnt; k++) {
			p->e[k].file_offset = ext[i + k].file_offset;
			p->e[k].length = ext[i + k].length;
			p->e[k].buffer_offset = ext[i + k].buffer_offset;
		}
		ret = place_ioctl(b->s, fd, q);
		/* The daemon answers ENOENT for a buffer id it does not know (the file is
		 * open: it cannot be the file); EIDRM keeps that apart from a missing file. */
		if (ret == -ENOENT)
			ret = -EIDRM;
		if (ret)
			break;
		for (uint32_t k = 0; k < cnt; k++)
			ext[i + k].length = p->e[k].length;
		*bytes += p->bytes;
		if (p->tier_bytes)
			__atomic_fetch_add(&b->tier_bytes, p->tier_bytes, __ATOMIC_RELAXED);
		if (p->bytes)
			*path = slower(*path, (int)p->path);
	}
	free(q);
	return ret;
}

/*
 * Check every extent before any I/O, by the daemon's rules (place_validate in fs/place/place.c),
 * so that both modes fail the same requests: the part of an extent inside the file must
 * fit the buffer, and so must an explicit length even where the file is shorter (a short
 * file must not hide a bad request); and all extents together place at most the buffer's
 * size (checked over all n here, which implies the daemon's check of each request).
 * @len gets each extent's effective length, clipped at the end of a file of @fsize bytes.
 */
static int check_extents(const struct dmafs_buf *b, const struct dmafs_extent *ext, size_t n,
			 uint64_t fsize, uint64_t *len)
{
	uint64_t total = 0;

	for (size_t i = 0; i < n; i++) {
		const struct dmafs_extent *e = &ext[i];
		uint64_t l = 0;

		if (e->file_offset < fsize)
			l = e->length < fsize - e->file_offset ? e->length : fsize - e->file_offset;
		if (e->buffer_offset > b->size || l > b->size - e->buffer_offset)
			return -ERANGE;
		if (e->length != DMAFS_TO_EOF &&
		    (e->length > b->size || e->buffer_offset > b->size - e->length))
			return -ERANGE;
		if (l > b->size - total) /* all extents together: at most the buffer's size */
			return -ERANGE;
		total += l;
		if (len)
			len[i] = l;
	}
	return 0;
}

int lib_read_fd(int fd, struct stat *st)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fstat(fd, st))
		return -EBADF;
	if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_PATH))
		return -EBADF;
	if (!S_ISREG(st->st_mode))
		return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	return flags;
}

int dmafs_place(struct dmafs_buf *b, int fd, struct dmafs_extent *ext, size_t n,
		struct dmafs_result *res)
{
	uint64_t t0 = dm_mono_ns(), bytes = 0, *len = NULL;
	int path = DMAFS_PATH_NONE, flags, ret;
	struct stat st;

	if (res)
		memset(res, 0, sizeof(*res));
	if (!b || (n && !ext))
		return -EINVAL;
	flags = lib_read_fd(fd, &st);
	if (flags < 0)
		return flags;
	if (b->s->on_dmafs && st.st_dev != b->s->dev)
		return -EXDEV;
	if (!b->registered && n) {
		len = malloc(n * sizeof(*len));
		if (!len)
			return -ENOMEM;
	}
	ret = check_extents(b, ext, n, (uint64_t)st.st_size, len);
	if (!ret)
		ret = buf_enter(b);
	if (ret) {
		free(len);
		return ret;
	}
	if (b->registered) {
		ret = place_daemon(b, fd, ext, n, &bytes, &path);
	} else {
		ret = place_posix(b, fd, flags, ext, n, len, &bytes);
		path = DMAFS_PATH_POSIX;
	}
	buf_leave(b, bytes);
	free(len);
	if (path == DMAFS_PATH_NONE)
		path = b->path_hint;
	if (res) {
		res->bytes = bytes;
		res->path = ret ? DMAFS_PATH_NONE : path;
		res->elapsed_ns = dm_mono_ns() - t0;
	}
	return ret;
}

/* Place bytes [@foff, +@len) of the open regular file @fd at @boff, in LIB_PLACE_CHUNK pieces. */
static int place_range(struct dmafs_buf *b, int fd, uint64_t foff, uint64_t len, uint64_t boff,
		       struct dmafs_result *res)
{
	uint64_t t0 = dm_mono_ns(), off = 0;
	struct dmafs_result r, sum = { .path = DMAFS_PATH_NONE };
	int ret = 0;

	if (boff > b->size || len > b->size - boff)
		return -ERANGE;
	/* An empty range places nothing but still reports the path a placement takes. */
	if (len == 0)
		sum.path = b->path_hint;
	while (off < len) {
		struct dmafs_extent e = {
			.file_offset = foff + off,
			.length = len - off < LIB_PLACE_CHUNK ? len - off : LIB_PLACE_CHUNK,
			.buffer_offset = boff + off,
		};
		uint64_t want = e.length;

		ret = dmafs_place(b, fd, &e, 1, &r);
		sum.bytes += r.bytes;
		sum.path = slower(sum.path, r.path);
		if (ret || e.length < want)
			break; /* error, or the file shrank under us */
		off += want;
	}
	if (res) {
		*res = sum;
		if (ret)
			res->path = DMAFS_PATH_NONE;
		res->elapsed_ns = dm_mono_ns() - t0;
	}
	return ret;
}

#define WHOLE_FILE UINT64_MAX

/* Place [foff, +len) of the open file @fd (len WHOLE_FILE: all of it) at @boff. */
static int place_fd(struct dmafs_buf *b, int fd, uint64_t foff, uint64_t len, uint64_t boff,
		    struct dmafs_result *res)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	return place_range(b, fd, foff, len == WHOLE_FILE ? (uint64_t)st.st_size : len, boff, res);
}

/* Place [foff, +len) of @path (len WHOLE_FILE: all of it) at @boff. */
static int place_path(struct dmafs_buf *b, const char *path, uint64_t foff, uint64_t len,
		      uint64_t boff, struct dmafs_result *res)
{
	int fd, ret;

	/* O_DIRECT: placed data need not reach the page cache (a small file's open on dmafs
	 * would send it there, open_fill_kb in dmafs(8)); place_fd reads such a descriptor
	 * through another where it must (posix_fd) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	ret = place_fd(b, fd, foff, len, boff, res);
	close(fd);
	return ret;
}

int dmafs_place_file(struct dmafs_buf *b, const char *path, uint64_t buffer_offset,
		     struct dmafs_result *res)
{
	if (res)
		memset(res, 0, sizeof(*res));
	if (!b || !path)
		return -EINVAL;
	return place_path(b, path, 0, WHOLE_FILE, buffer_offset, res);
}

/* ---- many files over threads ---- */

struct files_job {
	struct dmafs_buf *b;
	const char *const *paths; /* or, when NULL, fds */
	const int *fds;
	const uint64_t *offs;
	const uint64_t *foffs, *lens; /* NULL: whole files */
	size_t n;
	size_t next; /* atomic: next file to take */
	struct dmafs_result *res;
	int *err;
};

static void *files_worker(void *arg)
{
	struct files_job *j = arg;
	size_t i;

	while ((i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->n) {
		uint64_t foff = j->foffs ? j->foffs[i] : 0, len = j->foffs ? j->lens[i] : WHOLE_FILE;

		if (j->paths)
			j->err[i] = j->paths[i] ? place_path(j->b, j->paths[i], foff, len, j->offs[i],
							     &j->res[i])
						: -EINVAL;
		else
			j->err[i] = place_fd(j->b, j->fds[i], foff, len, j->offs[i], &j->res[i]);
		if (j->err[i])
			j->res[i].path = DMAFS_PATH_NONE;
	}
	return NULL;
}

int place_ranges(struct dmafs_buf *b, const char *const *paths, const int *fds,
		 const uint64_t *file_offsets, const uint64_t *lengths,
		 const uint64_t *buffer_offsets, size_t n, unsigned threads,
		 struct dmafs_result *res, struct dmafs_result *total)
{
	uint64_t t0 = dm_mono_ns();
	struct files_job j = { .b = b, .paths = paths, .fds = fds, .offs = buffer_offsets,
			       .foffs = file_offsets, .lens = lengths, .n = n };
	pthread_t *tid = NULL;
	unsigned started = 0;
	int ret = 0;

	if (total)
		memset(total, 0, sizeof(*total));
	if (!b || (n && (!paths == !fds || !buffer_offsets)) || !file_offsets != !lengths)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (threads == 0)
		threads = n < 8 ? (unsigned)n : 8;
	if (threads > n)
		threads = (unsigned)n;
	if (threads > 256)
		threads = 256;
	j.res = res ? res : calloc(n, sizeof(*j.res));
	j.err = calloc(n, sizeof(*j.err));
	if (threads > 1)
		tid = calloc(threads - 1, sizeof(*tid));
	if (!j.res || !j.err || (threads > 1 && !tid)) {
		ret = -ENOMEM;
		goto out;
	}
	memset(j.res, 0, n * sizeof(*j.res));
	/* The calling thread is worker 0; fewer threads if creating them fails. */
	for (unsigned t = 0; t + 1 < threads; t++) {
		if (pthread_create(&tid[t], NULL, files_worker, &j))
			break;
		started++;
	}
	files_worker(&j);
	for (unsigned t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	if (total)
		total->path = DMAFS_PATH_NONE;
	for (size_t i = 0; i < n; i++) {
		if (j.err[i] && !ret)
			ret = j.err[i];
		if (total) {
			total->bytes += j.res[i].bytes;
			total->path = slower(total->path, j.res[i].path);
		}
	}
	if (total)
		total->elapsed_ns = dm_mono_ns() - t0;
out:
	if (!res)
		free(j.res);
	free(j.err);
	free(tid);
	return ret;
}

int dmafs_place_files(struct dmafs_buf *b, const char *const *paths,
		      const uint64_t *buffer_offsets, size_t n, unsigned threads,
		      struct dmafs_result *res, struct dmafs_result *total)
{
	return place_ranges(b, paths, NULL, NULL, NULL, buffer_offsets, n, threads, res, total);
}

int dmafs_place_fds(struct dmafs_buf *b, const int *fds, const uint64_t *buffer_offsets,
		    size_t n, unsigned threads, struct dmafs_result *res,
		    struct dmafs_result *total)
{
	return place_ranges(b, NULL, fds, NULL, NULL, buffer_offsets, n, threads, res, total);
}
