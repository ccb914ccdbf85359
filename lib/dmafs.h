/* SPDX-License-Identifier: MIT */
/*
 * dmafs.h - libdmafs: place file extents from a dmafs mount straight into GPU or shared
 * host memory.
 *
 * Usage:
 *
 *     struct dmafs_session *s;
 *     struct dmafs_buf *b;
 *     struct dmafs_result r;
 *     void *dev;                                   // cudaMalloc'd by the application
 *
 *     dmafs_session_open("/mnt/models", &s);
 *     dmafs_buf_register_cuda(s, dev, size, 0, &b);    // once per buffer
 *     dmafs_place_file(b, "/mnt/models/model.safetensors", 0, &r);
 *     printf("%.2f GB/s via %s\n", r.bytes / (r.elapsed_ns * 1.0), dmafs_path_name(r.path));
 *     dmafs_buf_unregister(b);
 *     dmafs_session_close(s);
 *
 * Every call returns 0 (or a count) on success and a negative errno on failure;
 * dmafs_strerror() turns one into a sentence.
 *
 * Caveats:
 *  - A registration belongs to the process that made it and ends with it (also on
 *    kill -9). Buffers cannot be shared with other processes through dmafs.
 *  - Device buffers are passed to the daemon as CUDA/HIP IPC handles: the allocation must
 *    come from cudaMalloc/hipMalloc (not managed or host memory), and the daemon must see
 *    the same GPU.
 *  - Outside a dmafs mount, every call still works through a pread + copy fallback whose
 *    results say DMAFS_PATH_POSIX: check the path if you need the fast one.
 *  - The session and buffer handles are not thread-safe for concurrent unregister; placing
 *    into one buffer from several threads at once is safe (see dmafs_place_files()).
 */
#ifndef DMAFS_H
#define DMAFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DMAFS_VERSION_MAJOR 0
#define DMAFS_VERSION_MINOR 1
#define DMAFS_VERSION_PATCH 0
#define DMAFS_VERSION_NUM (DMAFS_VERSION_MAJOR * 10000 + DMAFS_VERSION_MINOR * 100 + DMAFS_VERSION_PATCH)

/* Paths, as in the results; values match the wire protocol. */
#define DMAFS_PATH_NONE 0
#define DMAFS_PATH_P2P 1    /* drive DMA into GPU memory (cuFile/GDS, hipFile) */
#define DMAFS_PATH_STAGED 2 /* O_DIRECT into pinned staging, pipelined host-to-device copies */
#define DMAFS_PATH_HOST 3   /* O_DIRECT straight into shared host memory */
#define DMAFS_PATH_POSIX 4  /* not on dmafs: pread + copy in the calling process */

/* Targets. */
#define DMAFS_TARGET_HOST 1
#define DMAFS_TARGET_CUDA 2
#define DMAFS_TARGET_HIP 3

/* Length meaning "to the end of the file". */
#define DMAFS_TO_EOF UINT64_MAX

struct dmafs_session;
struct dmafs_buf;

/* One extent: file bytes [file_offset, +length) go to buffer bytes [buffer_offset, ...). */
struct dmafs_extent {
	uint64_t file_offset;
	uint64_t length;	/* in: bytes wanted (or DMAFS_TO_EOF); out: bytes placed */
	uint64_t buffer_offset;
};

/* What a placement did. */
struct dmafs_result {
	uint64_t bytes;	     /* bytes placed */
	int path;	     /* DMAFS_PATH_* that moved them (the slowest used, if several) */
	uint64_t elapsed_ns; /* wall time of the call */
};

/* Per-target capability of a session. */
struct dmafs_target_caps {
	int path;	/* best path for this target on this mount, or DMAFS_PATH_NONE */
	int devices;	/* GPUs the daemon sees for this target; -1 if its runtime is absent */
	char why[240];	/* why this path, not a faster one */
};

struct dmafs_caps {
	int on_dmafs;	     /* 1 when the session's path is on a dmafs mount */
	int proto_version;
	unsigned members;
	unsigned stripe_unit;
	uint64_t staging_bytes;
	struct dmafs_target_caps host, cuda, hip;
};

/* libdmafs version as DMAFS_VERSION_NUM of the library actually loaded. */
int dmafs_version(void);

/*
 * Text for an error returned by a dmafs_* call (a negative errno), with the dmafs meaning
 * where it has one, e.g. -EPERM "buffer registered by another process". Never NULL.
 */
const char *dmafs_strerror(int err);

/* "p2p", "staged", "host", "posix" or "none". */
const char *dmafs_path_name(int path);

/*
 * Open a session for the mount holding @path (any file or directory in it). Outside dmafs
 * the session still opens, in posix-fallback mode (caps.on_dmafs == 0).
 * Returns 0 and *out, or -ENOENT, -EACCES (path), -ENOMEM.
 * @see dmafs_session_close
 */
int dmafs_session_open(const char *path, struct dmafs_session **out);

/* Close a session; buffers still registered through it are unregistered first. */
void dmafs_session_close(struct dmafs_session *s);

/*
 * Capabilities: which path a placement into each target takes and why.
 * Returns 0, or -EIO/-ENOTCONN when the daemon does not answer.
 */
int dmafs_session_caps(struct dmafs_session *s, struct dmafs_caps *caps);

/*
 * Register CUDA device memory [devptr, devptr + size) (inside one cudaMalloc allocation)
 * on CUDA device @device. Returns 0 and *out, or:
 *   -ENODEV  no CUDA runtime or driver in this process, or the device is unknown
 *   -EINVAL  devptr/size not inside one device allocation, or size 0
 *   -ENXIO   the daemon cannot open the allocation (other GPU, no CUDA in the daemon)
 *   -EMFILE  the daemon's per-process registration limit is reached
 * @see dmafs_buf_unregister
 */
int dmafs_buf_register_cuda(struct dmafs_session *s, void *devptr, size_t size, int device,
			    struct dmafs_buf **out);

/* As dmafs_buf_register_cuda() for HIP device memory (hipMalloc). Same errors. */
int dmafs_buf_register_hip(struct dmafs_session *s, void *devptr, size_t size, int device,
			   struct dmafs_buf **out);

/*
 * Allocate @size bytes of shared host memory (a memfd mapped into this process) and
 * register it. dmafs_buf_ptr() gives its address. Returns 0 and *out, or -ENOMEM,
 * -EMFILE (limit reached), -errno from memfd_create/mmap.
 */
int dmafs_buf_alloc_host(struct dmafs_session *s, size_t size, struct dmafs_buf **out);

/* Host address of a host buffer, or the device pointer of a GPU buffer. */
void *dmafs_buf_ptr(const struct dmafs_buf *b);
size_t dmafs_buf_size(const struct dmafs_buf *b);
/* DMAFS_TARGET_* of the buffer. */
int dmafs_buf_target(const struct dmafs_buf *b);

/*
 * Unregister (and, for dmafs_buf_alloc_host buffers, free) a buffer. The handle is
 * invalid afterwards. Returns 0 or -EBUSY if a placement into it is still running.
 */
int dmafs_buf_unregister(struct dmafs_buf *b);

/*
 * Place @n extents of the open file @fd (opened for reading, on the session's mount)
 * into @b. Any n is accepted; the library splits it into daemon-sized batches. Extents
 * past the end of the file are placed short: ext[i].length is set to the bytes placed
 * (0 beyond EOF). Returns 0 with @res filled, or:
 *   -EBADF   fd not open for reading
 *   -EXDEV   fd is on another mount than the session (or not on dmafs while the
 *            session is; use a session for that mount)
 *   -ERANGE  an extent runs past the end of the buffer
 *   -EPERM   buffer registered by another process
 *   -EIO     a member read failed (the daemon logs member and offset)
 *   -ENODEV  the GPU copy failed
 */
int dmafs_place(struct dmafs_buf *b, int fd, struct dmafs_extent *ext, size_t n,
		struct dmafs_result *res);

/*
 * Place the whole file @path at @buffer_offset of @b. Same errors as dmafs_place(), and
 * -ERANGE when the file does not fit.
 */
int dmafs_place_file(struct dmafs_buf *b, const char *path, uint64_t buffer_offset,
		     struct dmafs_result *res);

/*
 * Place @n whole files at their buffer offsets using @threads worker threads (0: one per
 * file up to 8). res[i] (when @res is not NULL) gets each file's result; @total the sum
 * (elapsed: the wall time of the whole call). Returns 0 when every file was placed, or the
 * first error (the other files are still attempted).
 */
int dmafs_place_files(struct dmafs_buf *b, const char *const *paths,
		      const uint64_t *buffer_offsets, size_t n, unsigned threads,
		      struct dmafs_result *res, struct dmafs_result *total);

/* Layout of a file on dmafs (from the user.dmafs.layout xattr). */
struct dmafs_layout_extent {
	uint64_t file_offset, length, member_offset;
	uint32_t member;
};
struct dmafs_layout {
	uint32_t stripe_unit, members, start_member;
	uint64_t size;
	size_t count;
	struct dmafs_layout_extent *extents; /* count entries */
};

/*
 * Read the layout of @path. Returns 0 and *out (free with dmafs_layout_free), or -ENODATA
 * (not a regular file on dmafs), -errno.
 */
int dmafs_layout_get(const char *path, struct dmafs_layout **out);
void dmafs_layout_free(struct dmafs_layout *l);

#ifdef __cplusplus
}
#endif
#endif
