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
 * Link with `pkg-config --cflags --libs dmafs`. Full manual: libdmafs(3).
 *
 * Caveats:
 *  - A registration belongs to the process that made it and ends with it (also on
 *    kill -9). Buffers cannot be shared with other processes through dmafs; a child
 *    made by fork() must not use its parent's handles (-EPERM).
 *  - Device buffers are passed to the daemon as CUDA/HIP IPC handles: the allocation must
 *    come from cudaMalloc/hipMalloc (not managed, VMM or host memory), and the daemon must
 *    see the same GPU.
 *  - Outside a dmafs mount, every call still works through a pread + copy fallback whose
 *    results say DMAFS_PATH_POSIX: check the path if you need the fast one;
 *    dmafs_session_caps() says why a faster path is not available.
 *  - Thread safety: placing into one buffer from several threads at once is safe (see
 *    dmafs_place_files()), and so are registrations on one session from several threads.
 *    Unregistering a buffer while another thread still uses its handle is not (the
 *    library refuses with -EBUSY while a placement is running, but it cannot protect a
 *    handle that is freed under a thread about to use it), nor is closing a session
 *    while other threads use it or its buffers.
 *  - A session keeps a descriptor open on its mount: the mount is busy (umount fails
 *    with EBUSY) until dmafs_session_close().
 */
#ifndef DMAFS_H
#define DMAFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DMAFS_VERSION_MAJOR, _MINOR and _PATCH: configure makes them from its version. */
#include "dmafs-version.h"
#define DMAFS_VERSION_NUM (DMAFS_VERSION_MAJOR * 10000 + DMAFS_VERSION_MINOR * 100 + DMAFS_VERSION_PATCH)

/* Paths, as in the results; values match the wire protocol. */
#define DMAFS_PATH_NONE 0
#define DMAFS_PATH_P2P 1    /* drive DMA into GPU memory (cuFile/GDS, hipFile) */
#define DMAFS_PATH_STAGED 2 /* O_DIRECT into pinned staging, pipelined host-to-device copies */
#define DMAFS_PATH_HOST 3   /* O_DIRECT straight into shared host memory */
#define DMAFS_PATH_POSIX 4  /* not on dmafs: pread + copy in the calling process */
/*
 * cuFile in compatibility mode (since 0.6): the daemon drove cuFile (mount option
 * p2p=force) where it cannot DMA from the drives into the GPU (no nvidia-fs or P2PDMA), so
 * cuFile bounced the data through host memory itself. Where a result combines paths it
 * ranks between P2P and STAGED: P2P < P2P_COMPAT < STAGED < HOST < POSIX, the slowest
 * reported.
 */
#define DMAFS_PATH_P2P_COMPAT 5

/* Targets. */
#define DMAFS_TARGET_HOST 1
#define DMAFS_TARGET_CUDA 2
#define DMAFS_TARGET_HIP 3

/* Length meaning "to the end of the file". */
#ifndef DMAFS_TO_EOF
#define DMAFS_TO_EOF UINT64_MAX
#endif

struct dmafs_session;
struct dmafs_buf;

/* One extent: file bytes [file_offset, +length) go to buffer bytes [buffer_offset, ...). */
struct dmafs_extent {
	uint64_t file_offset;
	uint64_t length;	/* in: bytes wanted (or DMAFS_TO_EOF); out: bytes placed */
	uint64_t buffer_offset;
};

/*
 * What a placement did. On success path is never DMAFS_PATH_NONE (a placement of 0 bytes
 * reports the path it would have taken); after an error it is DMAFS_PATH_NONE and bytes
 * counts what was placed before the error.
 */
struct dmafs_result {
	uint64_t bytes;	     /* bytes placed */
	int path;	     /* DMAFS_PATH_* that moved them (the slowest used, if several) */
	uint64_t elapsed_ns; /* wall time of the call, in this process */
};

/* Per-target capability of a session. */
struct dmafs_target_caps {
	int path;	/* best path for this target on this mount, or DMAFS_PATH_NONE when a
			 * buffer of this target cannot be registered at all */
	int devices;	/* GPUs the daemon sees for this target; -1 if its runtime is absent */
	char why[240];	/* why this path, not a faster one */
};

/*
 * Capabilities of a session. Off dmafs (on_dmafs == 0) only host/cuda/hip are filled:
 * path DMAFS_PATH_POSIX where this process can do the fallback (host always; a GPU
 * target when its runtime and a device load here), DMAFS_PATH_NONE otherwise, and why
 * says what is missing.
 */
struct dmafs_caps {
	int on_dmafs;	     /* 1 when the session's path is on a dmafs mount */
	int proto_version;   /* DMAFS_PROTO_VERSION the daemon speaks (0 off dmafs) */
	unsigned members;    /* member drives of the mount */
	unsigned stripe_unit; /* bytes */
	uint64_t staging_bytes; /* pinned staging memory per GPU in the daemon */
	struct dmafs_target_caps host, cuda, hip;
};

/* libdmafs version as DMAFS_VERSION_NUM of the library actually loaded. */
int dmafs_version(void);

/*
 * Text for an error returned by a dmafs_* call (a negative errno; a positive one is read
 * the same), with the dmafs meaning where it has one, e.g. -EPERM "buffer registered by
 * another process". Never NULL; the text is static or thread-local, do not free it.
 */
const char *dmafs_strerror(int err);

/*
 * "p2p", "p2p-compat", "staged", "host", "posix", or "none" for DMAFS_PATH_NONE and
 * unknown values.
 */
const char *dmafs_path_name(int path);

/*
 * Open a session for the mount holding @path (any file or directory in it; for other
 * file types its directory is used). The session keeps a descriptor open on the mount.
 * Outside dmafs the session still opens, in posix-fallback mode (caps.on_dmafs == 0),
 * and so it does when the daemon does not answer the placement protocol.
 * Returns 0 and *out, or:
 *   -EINVAL  path or out is NULL
 *   -ENOENT, -EACCES, -ENOTDIR, -ELOOP, -ENAMETOOLONG  from stat(2)/open(2) of @path
 *   -EMFILE, -ENFILE  no descriptor left for the session
 *   -ENOMEM
 * @see dmafs_session_close, dmafs_session_caps
 */
int dmafs_session_open(const char *path, struct dmafs_session **out);

/*
 * Close a session; buffers still registered through it are unregistered (and host
 * buffers freed) first, even if a placement into them is marked running. NULL is a
 * no-op. The handle and all its buffer handles are invalid afterwards.
 */
void dmafs_session_close(struct dmafs_session *s);

/*
 * Capabilities: which path a placement into each target takes and why. On dmafs the
 * daemon is asked each time (its answer changes when a GPU comes or goes). Returns 0, or:
 *   -EINVAL    s or caps is NULL
 *   -ENOTCONN  the daemon is gone (the mount is dead)
 *   -EIO       the daemon did not answer DMAFS_IOC_INFO
 */
int dmafs_session_caps(struct dmafs_session *s, struct dmafs_caps *caps);

/*
 * Register CUDA device memory [devptr, devptr + size) (inside one cudaMalloc allocation)
 * on CUDA device @device (the ordinal in this process). Off dmafs the pointer is only
 * kept for the fallback's copies. Returns 0 and *out, or:
 *   -EINVAL    s, out or devptr NULL, size 0, or [devptr, devptr + size) not inside one
 *              device allocation of @device
 *   -ENODEV    no CUDA runtime or driver in this process, or the device is unknown, or
 *              the CUDA call making the IPC handle failed
 *   -ENXIO     the daemon cannot open the allocation (other GPU, no CUDA in the daemon,
 *              or memory that has no IPC handle)
 *   -EDQUOT    the daemon's per-user registration limit is reached (mount options
 *              reg_max_user, reg_bytes_user)
 *   -ENOSPC    the mount's registration limit is reached (reg_max, reg_bytes)
 *   -EAGAIN    place_queue (256) requests of this user wait in the daemon: try again
 *   -ENOMEM    out of memory (here or in the daemon)
 *   -ENOTCONN  the daemon is gone
 * @see dmafs_buf_unregister
 */
int dmafs_buf_register_cuda(struct dmafs_session *s, void *devptr, size_t size, int device,
			    struct dmafs_buf **out);

/* As dmafs_buf_register_cuda() for HIP device memory (hipMalloc). Same errors. */
int dmafs_buf_register_hip(struct dmafs_session *s, void *devptr, size_t size, int device,
			   struct dmafs_buf **out);

/*
 * Allocate @size bytes of shared host memory and register it: a memfd mapped shared into
 * this process, in whole pages, zero filled, every page allocated and mapped before the
 * call returns (so that the first placement does not fault them in). 2 MiB hugetlb pages
 * when @size is 64 MiB or more and the pool (vm.nr_hugepages) has enough free ones, unless
 * the environment says DMAFS_HOST_HUGETLB=0; else 4 KiB pages, allocated by fallocate(2)
 * and mapped by up to 4 threads (one per CPU). The cost is the kernel's work on every
 * page, here and in the daemon, which maps the same pages, and again to free them in
 * whichever of the two unmaps last (figures: dmafs_buf_alloc_host(3), NOTES).
 * dmafs_buf_ptr() gives the address; it stays valid until dmafs_buf_unregister().
 * Returns 0 and *out, or:
 *   -EINVAL    s or out NULL, or size 0
 *   -ENOMEM    out of memory, or size too large for a memfd
 *   -EDQUOT    the daemon's per-user registration limit is reached (mount options
 *              reg_max_user, reg_bytes_user)
 *   -ENOSPC    the mount's registration limit is reached (reg_max, reg_bytes)
 *   -EAGAIN    place_queue (256) requests of this user wait in the daemon: try again
 *   -EMFILE    this process is out of descriptors (memfd_create)
 *   -ENFILE    the system is out of descriptors
 *   -ENOTCONN  the daemon is gone
 *   other -errno from memfd_create(2), ftruncate(2), mmap(2) or madvise(2)
 * @see dmafs_buf_unregister
 */
int dmafs_buf_alloc_host(struct dmafs_session *s, size_t size, struct dmafs_buf **out);

/* Host address of a host buffer, or the device pointer of a GPU buffer (NULL for NULL). */
void *dmafs_buf_ptr(const struct dmafs_buf *b);
/* Usable bytes of the buffer, as registered (0 for NULL). */
size_t dmafs_buf_size(const struct dmafs_buf *b);
/* DMAFS_TARGET_* of the buffer (-EINVAL for NULL). */
int dmafs_buf_target(const struct dmafs_buf *b);
/*
 * Bytes placed into the buffer so far by all threads, for progress displays: whole-file
 * placements advance it every 1 GiB, dmafs_place() once per call. Never fails.
 */
uint64_t dmafs_buf_placed(const struct dmafs_buf *b);
/*
 * Of the bytes placed into the buffer so far (all placements, all threads), those the
 * daemon placed from the mount's warm tier (mount option tier=) with no drive read; the
 * rest came from the drives. 0 without a tier, in posix-fallback mode, and from a
 * daemon older than DMAFS_IOC_PLACE2. Never fails (0 for NULL).
 */
uint64_t dmafs_buf_tier_bytes(const struct dmafs_buf *b);

/*
 * Unregister (and, for dmafs_buf_alloc_host buffers, free) a buffer. The handle is
 * invalid afterwards. A daemon that is already gone is not an error: its registrations
 * went with it. Returns 0, or:
 *   -EBUSY   a placement into it is still running (the handle stays valid)
 *   -EINVAL  b is NULL
 */
int dmafs_buf_unregister(struct dmafs_buf *b);

/*
 * Place @n extents of the open file @fd (opened for reading, on the session's mount)
 * into @b. Any n is accepted; the library splits it into daemon-sized batches
 * (DMAFS_PLACE_MAX). Every extent is checked before any I/O. Extents past the end of the
 * file are placed short: ext[i].length is set to the bytes placed (0 beyond EOF). The
 * range of an extent inside the file must fit the buffer, and so must an explicit length
 * even where the file ends first (DMAFS_TO_EOF is clipped at EOF instead). Placing the
 * same extents again writes the same bytes. Returns 0 with @res filled (@res may be
 * NULL), or:
 *   -EINVAL    b NULL, ext NULL with n > 0, or fd not a regular file
 *   -EISDIR    fd is a directory
 *   -EBADF     fd not open, or not open for reading
 *   -EXDEV     fd is on another mount than the session (or not on dmafs while the
 *              session is; use a session for that mount)
 *   -ERANGE    an extent runs past the end of the buffer, or the extents together place
 *              more bytes than the buffer holds
 *   -EPERM     buffer registered by another process
 *   -EIDRM     the daemon does not know the buffer id (it was unregistered, or the
 *              filesystem was remounted since); libdmafs before 0.6 said -ENOENT
 *   -EBUSY     the buffer is being unregistered
 *   -EIO       a member read failed, or (mount option verify_place) data failed its
 *              checksum; the daemon logs member and offset
 *   -ENODEV    the GPU copy failed
 *   -EFAULT    the host buffer's memory was taken away (its memfd truncated) meanwhile
 *   -EAGAIN    place_queue (256) requests of this user wait in the daemon: try again
 *   -ENOMEM    out of memory
 *   -ENOTCONN  the daemon is gone
 * After an error some extents may have been placed: ext[i].length is updated for every
 * batch that completed, and res->bytes counts them.
 */
int dmafs_place(struct dmafs_buf *b, int fd, struct dmafs_extent *ext, size_t n,
		struct dmafs_result *res);

/*
 * Place the whole file @path at @buffer_offset of @b, in pieces of 1 GiB so that
 * dmafs_buf_placed() shows progress. The file is opened once and every piece is read
 * through that descriptor: removing or renaming the file meanwhile does not disturb the
 * placement (an unlinked open file stays readable). The size is taken when the file is
 * opened; a file that shrinks meanwhile is placed short. Same errors as dmafs_place(), and:
 *   -ERANGE  the file does not fit at @buffer_offset
 *   -EINVAL  path NULL, or not a regular file
 *   -ENOENT  the file does not exist
 *   -EACCES, ...  from open(2)
 */
int dmafs_place_file(struct dmafs_buf *b, const char *path, uint64_t buffer_offset,
		     struct dmafs_result *res);

/*
 * Place @n whole files at their buffer offsets using @threads worker threads (0: one per
 * file up to 8; never more than n). Each thread opens its file and places it as
 * dmafs_place_file() does. res[i] (when @res is not NULL) gets each file's result:
 * res[i].path is DMAFS_PATH_NONE exactly for the files that failed (dmafs_place_file()
 * on one of them tells why). @total (when not NULL) the sum of bytes, the slowest path
 * used, and the wall time of the whole call. Returns 0 when every file was placed, or
 * the error of the first failed file in @paths order (the other files are still
 * attempted); errors as dmafs_place_file(), and -EINVAL when b, paths or buffer_offsets
 * is NULL (with n > 0) or paths[i] is NULL.
 */
int dmafs_place_files(struct dmafs_buf *b, const char *const *paths,
		      const uint64_t *buffer_offsets, size_t n, unsigned threads,
		      struct dmafs_result *res, struct dmafs_result *total);

/*
 * dmafs_place_files() for files the caller has open: place each whole file fds[i] (open
 * for reading, on the session's mount) at buffer_offsets[i], on @threads threads. A
 * caller that opens its files before it allocates and registers the buffer is not
 * disturbed by a file removed or renamed in between, and the descriptors stay its own
 * (they are not closed). Results, return value and errors as dmafs_place_files(), with
 * dmafs_place()'s -EBADF for a descriptor not open for reading, and -EINVAL when b, fds
 * or buffer_offsets is NULL (with n > 0).
 * @see dmafs_place_files
 */
int dmafs_place_fds(struct dmafs_buf *b, const int *fds, const uint64_t *buffer_offsets,
		    size_t n, unsigned threads, struct dmafs_result *res,
		    struct dmafs_result *total);

/*
 * Read bytes [@offset, @offset + @length) of the open file @fd (on a dmafs mount, opened
 * for reading; @length may be DMAFS_TO_EOF) into the mount's warm tier (mount option
 * tier=; dmafs(8), Warm tier), so that later placements of them, by any process, copy
 * from the daemon's memory instead of reading the members. No buffer is needed. The range
 * widens to whole tier chunks (1 MiB, file-offset aligned) and stops at the end of the
 * file; every chunk the tier does not hold is read, its checksums checked, and kept. At
 * most the tier's size is read, from the start of the range (the rest of a larger range
 * is not: it would only evict this call's own first chunks), and holes are never read
 * (a placement zeroes them). @res (may be NULL) gets the bytes read into
 * the tier by this call, the path DMAFS_PATH_HOST (O_DIRECT reads into host memory, the
 * daemon's) and the wall time; @held (may be NULL) the bytes of the widened range the
 * tier held already. Both together fall short of the range where it is larger than the
 * tier, has holes, the file changed while it was read, or the tier had no chunk to spare
 * (all in use by copies). There is no fallback off dmafs. Returns 0, or:
 *   -EBADF       fd not open, or not open for reading
 *   -EISDIR      fd is a directory
 *   -EINVAL      fd not a regular file
 *   -ENOTTY      fd is not on a dmafs mount, or its daemon is older than this call
 *   -EOPNOTSUPP  the mount has no warm tier (mount it with -o tier=SIZE)
 *   -EIO         a member read failed or data failed its checksum (the daemon logs the
 *                member and offset); the chunks read before stay in the tier
 *   -EAGAIN      place_queue (256) requests of this user wait in the daemon: try again
 *   -ENOMEM      out of memory in the daemon
 *   -ENOTCONN    the daemon is gone
 * @see dmafs_place
 */
int dmafs_prefetch(int fd, uint64_t offset, uint64_t length, struct dmafs_result *res,
		   uint64_t *held);

/*
 * Sample batches: many small reads of many files in one request (dmafs_place_batch), the
 * files named by handles taken once. A handle is a capability of the process that took it,
 * as a descriptor is; the daemon keeps nothing for it. Opaque: copy it, never change it.
 */
struct dmafs_handle {
	uint64_t a, b;
	uint32_t c, d;
};

/*
 * A handle for the open file @fd (a regular file open for reading) in batches of buffers
 * of session @s. On dmafs the daemon makes it: it stays valid in this process (not in a
 * child after fork(2)) until the filesystem is unmounted, whether or not @fd is closed,
 * and does not keep a removed file (its samples then fail with -ENOENT). Off dmafs (a
 * posix-fallback session) the handle is @fd itself, which must then stay open while the
 * handle is used. Returns 0, or:
 *   -EINVAL  s or h NULL, or fd not a regular file
 *   -EISDIR  fd is a directory
 *   -EBADF   fd not open, or not open for reading
 *   -EXDEV   fd is on another mount than the session
 *   -ENOTTY  the daemon is older than batches (dmafs before 0.7)
 *   -ENOTCONN  the daemon is gone
 */
int dmafs_handle_get(struct dmafs_session *s, int fd, struct dmafs_handle *h);

/* One sample: file bytes [file_offset, + length) of the file @file names go to buffer
 * bytes [buffer_offset, + length). The same layout as the daemon's request entries. */
struct dmafs_sample {
	struct dmafs_handle file;
	uint64_t file_offset;
	uint64_t buffer_offset;
	uint32_t length; /* in: bytes; out: bytes placed (less only where the file ends) */
	int32_t result;	 /* out: 0, or -errno for this sample */
};

/*
 * Place @n samples of any files into @b: on dmafs, up to 320 samples per request to the
 * daemon (one FUSE round trip for all of them; the library splits larger @n), read from
 * the member drives at once and copied into the buffer (host memory, or the GPU through
 * pinned staging), checksums checked with the mount's verify_place. Off dmafs, pread(2)
 * per sample (the POSIX path, res->path says so). Every sample's buffer range must lie in
 * the buffer and all together hold at most its size (checked before any I/O). Each
 * sample gets its own result: a file removed since its handle was taken fails alone
 * (-ENOENT), as does a handle of another process (-EPERM) or a read error (-EIO); the
 * others are placed. @res (may be NULL) gets the bytes placed, the path and the wall
 * time. Returns 0 when every sample was placed, the first failed sample's error (in
 * order) when some failed, or for the whole request:
 *   -EINVAL  b NULL, s NULL with n > 0, or a handle not from dmafs_handle_get()
 *   -ERANGE  a sample runs past the end of the buffer, or all of them together place
 *            more bytes than the buffer holds
 *   -EXDEV   a handle of a file off dmafs given for a buffer on dmafs, or the reverse
 *   -EPERM, -EIDRM, -EBUSY, -ENODEV, -EFAULT, -EAGAIN, -ENOMEM, -ENOTCONN  as dmafs_place()
 *   -ENOTTY  the daemon is older than batches
 * A request failing whole leaves the samples of earlier requests of the call placed
 * (their result 0); the rest have result -ECANCELED and length 0.
 */
int dmafs_place_batch(struct dmafs_buf *b, struct dmafs_sample *s, size_t n,
		      struct dmafs_result *res);

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
 * Read the layout of @path: where each extent of the file lies on which member. Extents
 * come sorted by file offset, non-overlapping; holes (sparse files) have none; the last
 * may run past size to a block boundary. Returns 0 and *out (free with
 * dmafs_layout_free), or:
 *   -EINVAL   path or out NULL
 *   -ENODATA  not a regular file on dmafs
 *   -EBADMSG  the layout text is malformed (library and daemon versions differ?)
 *   -EAGAIN   the layout kept changing while it was read (file being written)
 *   -ENOMEM
 *   -ENOENT, -EACCES, -ENOTCONN, ...  from statfs(2)/getxattr(2)
 * @see dmafs_layout_free
 */
int dmafs_layout_get(const char *path, struct dmafs_layout **out);
/* Free a layout from dmafs_layout_get(); NULL is a no-op. */
void dmafs_layout_free(struct dmafs_layout *l);

/* ---- safetensors models ---- */

/*
 * A model is a set of safetensors files whose headers libdmafs reads, validates and lays
 * out in one buffer; dmafs_model_place() then places every file whole, with one request
 * per file, and points each tensor into the buffer:
 *
 *     struct dmafs_model *m;
 *     char err[512];
 *
 *     if (dmafs_model_open("/mnt/models/qwen2.5-7b", &m, err, sizeof(err)))
 *         errx(1, "%s", err);                     // "model-00002-of-00004.safetensors: ..."
 *     dmafs_buf_register_cuda(s, dev, dmafs_model_bytes(m), 0, &b);
 *     dmafs_model_place(m, b, 0, 0, &r);
 *     t = dmafs_model_tensor(m, dmafs_model_find(m, "lm_head.weight"));   // t->ptr
 *
 * See dmafs_model_open(3).
 */

/* Element types of safetensors files, as named in their headers. */
enum dmafs_dtype {
	DMAFS_DT_BOOL, DMAFS_DT_U8, DMAFS_DT_I8, DMAFS_DT_I16, DMAFS_DT_U16, DMAFS_DT_F16,
	DMAFS_DT_BF16, DMAFS_DT_I32, DMAFS_DT_U32, DMAFS_DT_F32, DMAFS_DT_F64, DMAFS_DT_I64,
	DMAFS_DT_U64, DMAFS_DT_F8_E4M3, DMAFS_DT_F8_E5M2, DMAFS_DT_F8_E8M0, DMAFS_DT_F4,
	DMAFS_DT_COUNT
};

/* Most dimensions a tensor may have; a header with more is refused. */
#define DMAFS_MAX_DIMS 8

/* One tensor of a model: where it is in its file and, once placed, in memory. */
struct dmafs_tensor {
	const char *name;	/* as in the header (UTF-8); valid while the model is open */
	int dtype;		/* enum dmafs_dtype */
	int ndim;		/* 0 for a scalar */
	int64_t shape[DMAFS_MAX_DIMS];
	uint64_t nbytes;	/* product of shape times element size (F4: two per byte,
				 * rounded up) */
	unsigned file;		/* index into the model's files (dmafs_model_file) */
	uint64_t file_offset;	/* absolute byte offset of the data in that file */
	uint64_t buffer_offset; /* byte offset in the model's buffer layout */
	void *ptr;		/* after a successful dmafs_model_place: buffer base +
				 * placement offset + buffer_offset (a device pointer for GPU
				 * buffers); NULL before, and after a failed placement */
};

struct dmafs_model;

/*
 * Open a model: one .safetensors file; a directory with a model.safetensors.index.json
 * (its weight_map names the shards) or else all its *.safetensors files, in name order;
 * an index .json itself; a Hugging Face cache snapshot directory (its symlinks into
 * ../../blobs are followed, but files keep their snapshot names), or the cache's
 * models--org--name directory (refs/main names the snapshot). Every header is read and
 * validated: 8-byte length at most 100 MiB and inside the file; strict JSON (UTF-8
 * strings, no duplicate keys, integers below 2^53, nesting bounded); every dtype known;
 * at most DMAFS_MAX_DIMS dims; data_offsets inside the data section and holding exactly
 * the bytes of the shape; no two tensors overlapping; tensor names unique across all
 * files; with an index, every mapped tensor in its shard and every shard tensor mapped.
 * Nothing is placed. Every file stays open (one descriptor each, close-on-exec) until
 * dmafs_model_close(), and placements read through those descriptors: a file removed or
 * replaced by a rename after this call is still the one placed.
 * @err (may be NULL; @errlen bytes, 512 is plenty) gets a message for every error:
 * "PATH: what is wrong", with PATH the file as the user named it, e.g.
 * "m/model-00002-of-00004.safetensors: tensor 'x' data_offsets [10, 20] overlap 'y' [0, 16]".
 * Returns 0 and *out (free with dmafs_model_close), or, with *out NULL:
 *   -EINVAL  path or out NULL; a malformed header or index; a path that is not a
 *            file or directory, or a shard that is not a regular file
 *   -ENOENT  the path, a shard named by the index, or the file behind a symlink is
 *            missing; a directory without *.safetensors files or index
 *   -EISDIR  a shard named by the index is a directory
 *   -EACCES, -ELOOP, -ENAMETOOLONG, -ENOTDIR, -EMFILE, -EIO ...  from stat(2), open(2),
 *            opendir(3), pread(2), getcwd(3) (a relative path is made absolute)
 *   -ENOMEM
 * @see dmafs_model_close
 */
int dmafs_model_open(const char *path, struct dmafs_model **out, char *err, size_t errlen);
/* Free a model and its tensors' names. NULL is a no-op. */
void dmafs_model_close(struct dmafs_model *m);
/*
 * Files of the model, in placement order (the order of their layout), and their count (0
 * for NULL). Paths are absolute but symlinks are not resolved: an HF snapshot's files are
 * reported under snapshots/, not as their blobs. NULL for i out of range or NULL m.
 */
unsigned dmafs_model_files(const struct dmafs_model *m);
const char *dmafs_model_file(const struct dmafs_model *m, unsigned i);
/*
 * The descriptor the model holds open on file @i (read-only, close-on-exec), valid until
 * dmafs_model_close(), which closes it: for dmafs_place() or dmafs_session_open() on
 * "/proc/self/fd/N" where the file may have been removed since dmafs_model_open(). The
 * caller must not close it. Returns it, or -EINVAL for NULL m or i out of range.
 */
int dmafs_model_fd(const struct dmafs_model *m, unsigned i);
/*
 * Tensors, sorted by (file, offset): their count (0 for NULL), and the i-th (NULL for i
 * out of range or NULL m), valid until dmafs_model_close().
 */
size_t dmafs_model_tensors(const struct dmafs_model *m);
const struct dmafs_tensor *dmafs_model_tensor(const struct dmafs_model *m, size_t i);
/* Index of the tensor called @name (O(log n)), -ENOENT if there is none, -EINVAL for NULL. */
long dmafs_model_find(const struct dmafs_model *m, const char *name);
/*
 * Bytes of buffer the model needs (0 for NULL): each file is placed whole (header
 * included) at a 4096-aligned offset, in file order, so tensors keep their in-file
 * alignment and host placements are zero copy. The last file is not padded.
 */
uint64_t dmafs_model_bytes(const struct dmafs_model *m);
/*
 * Place every file of the model into @b at @buffer_offset + its layout offset (a
 * 4096-aligned @buffer_offset keeps the daemon's reads direct), one whole-file placement
 * per file through dmafs_place_files() on @threads threads (0: one per file, up to 8),
 * and set every tensor's ptr. @res (may be NULL) gets the bytes of all files, the
 * slowest path used and the wall time. The files are read through the descriptors
 * dmafs_model_open() kept, each first checked to be unchanged (same size and modification
 * time); a file removed or renamed since is still placed. Places of one model must not
 * run concurrently (they write the tensors' ptr fields). Returns 0, or, with every ptr
 * NULL and res->path DMAFS_PATH_NONE:
 *   -EINVAL   m or b NULL; and dmafs_place_file()'s -EINVAL
 *   -ERANGE   the model does not fit @b at @buffer_offset
 *   -ESTALE   a file was written or truncated since dmafs_model_open() (open the model
 *             again)
 *   -EXDEV    a file is on another mount than @b's session (a model must be on one
 *             mount; blobs of an HF cache included)
 *   -EPERM, -EBUSY, -EIO, -ENODEV, -ENOMEM, -ENOTCONN  as dmafs_place()
 * After an error some files may have been placed (res->bytes counts them).
 */
int dmafs_model_place(struct dmafs_model *m, struct dmafs_buf *b, uint64_t buffer_offset,
		      unsigned threads, struct dmafs_result *res);
/*
 * Place only bytes [@begin, @end) of the model's buffer layout (the offsets
 * dmafs_model_bytes() counts, before @buffer_offset is added) into @b at @buffer_offset +
 * their layout offset: the parts of the files that fall in the range, in parallel as
 * dmafs_model_place() does; padding between files is not written. Several processes
 * (ranks of a distributed job) that each place a disjoint range of the same layout read
 * the model once between them. The tensors' ptr fields are not changed. The range must
 * lie inside the layout and @b must hold the whole layout at @buffer_offset. Returns 0,
 * or dmafs_model_place()'s errors, and -EINVAL for begin > end.
 */
int dmafs_model_place_part(struct dmafs_model *m, struct dmafs_buf *b, uint64_t buffer_offset,
			   uint64_t begin, uint64_t end, unsigned threads,
			   struct dmafs_result *res);
/*
 * Like dmafs_model_place_part(), but compact: layout byte @begin lands at @buffer_offset
 * (byte x at @buffer_offset + x - @begin), so @b needs only @end - @begin bytes there.
 * Serves placing the tensors of one device into a buffer of that device's size when a
 * model is spread over several devices. Returns 0 or dmafs_model_place_part()'s errors.
 */
int dmafs_model_place_range(struct dmafs_model *m, struct dmafs_buf *b, uint64_t buffer_offset,
			    uint64_t begin, uint64_t end, unsigned threads,
			    struct dmafs_result *res);
/*
 * "BF16", "F32", ... (the header's spelling); NULL for a code outside enum dmafs_dtype.
 * Element size in bytes: 1, 2, 4 or 8; 0 for F4 (two elements per byte) and unknown codes.
 */
const char *dmafs_dtype_name(int dtype);
unsigned dmafs_dtype_size(int dtype);

#ifdef __cplusplus
}
#endif
#endif
