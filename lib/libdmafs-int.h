/* SPDX-License-Identifier: MIT */
/*
 * libdmafs-int.h - what the files of libdmafs share: the session and buffer structs and
 * the internal calls between session.c, session-ops.c, buf.c, place.c and mountinfo.c.
 */
#ifndef DMAFS_LIBDMAFS_INT_H
#define DMAFS_LIBDMAFS_INT_H

/*
 * dmafs-proto.h must come first: it declares DMAFS_TARGET_* and DMAFS_PATH_* as enum
 * constants, which dmafs.h then #defines to the same values. In the other order the
 * preprocessor would turn the enum declarations into "1 = 1".
 */
#include "dmafs-proto.h"
#include "dmafs.h"
#include "gpu.h"

#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>

_Static_assert(DMAFS_PATH_POSIX == 4 && DMAFS_PATH_HOST == 3 && DMAFS_PATH_P2P == 1,
	       "dmafs.h and dmafs-proto.h agree on path numbers");
_Static_assert(DMAFS_TARGET_HIP == DMAFS_TARGET_MAX, "one info slot per target");

#define FUSE_SUPER_MAGIC 0x65735546
#define DMAFS_FSTYPE "fuse.dmafs"

/*
 * Bytes per PLACE ioctl when the library splits a whole file: small enough that
 * dmafs_buf_placed() moves often enough for a progress bar, large enough that the
 * daemon's staging pipeline stays full (a fill and a drain per chunk); dmafs_place(3),
 * NOTES, has the measurements that chose it.
 */
#define LIB_PLACE_CHUNK (1ULL << 30)
/* Bounce chunk of the posix fallback for GPU buffers (per thread, reused). */
#define LIB_BOUNCE_CHUNK (8ULL << 20)

/*
 * A session: one open descriptor on the mount that carries INFO/REGISTER/UNREGISTER.
 * Lock order: s->lock, then nothing (buffer fields below it are written only by their
 * own registration and unregistration).
 */
struct dmafs_session {
	int fd;			/* O_RDONLY on the session path (file or directory) */
	int on_dmafs;		/* daemon answered INFO with our protocol version */
	dev_t dev;		/* st_dev of the mount: placements on other devices are -EXDEV */
	char *mnt;		/* mount point, from /proc/self/mountinfo (may be NULL) */
	char *fstype;		/* filesystem type, e.g. "fuse.dmafs", "ext4" (may be NULL) */
	struct dmafs_ioc_info info; /* from the last INFO (on_dmafs only) */
	char why_posix[240];	/* why this session is in posix-fallback mode */
	int no_place2;		/* atomic: the daemon answered DMAFS_IOC_PLACE2 with ENOTTY
				 * (older than it): PLACE only from then on */
	pthread_mutex_t lock;
	struct dmafs_buf *bufs; /* protected by lock: every live buffer of the session */
};

struct dmafs_buf {
	struct dmafs_session *s;
	struct dmafs_buf *prev, *next; /* protected by s->lock */
	int target;		       /* DMAFS_TARGET_* */
	void *ptr;		       /* host address, or the device pointer (posix copies) */
	size_t size;
	size_t map_len;		       /* host buffers: length of our mmap */
	int device;		       /* GPU ordinal in this process */
	struct gpu *gpu;	       /* GPU targets: the loaded runtime */
	uint64_t id;		       /* daemon's id; valid when registered */
	int registered;		       /* with the daemon (on_dmafs sessions) */
	int path_hint;		       /* path reported for a successful placement of 0 bytes */
	unsigned busy;		       /* atomic: placements in flight; BUF_DEAD once unregistering */
	uint64_t placed;	       /* atomic: bytes placed so far, for progress displays */
	uint64_t tier_bytes;	       /* atomic: of those, bytes the daemon placed from its
					* warm tier */
};
#define BUF_DEAD 0x80000000u

/* session-ops.c */
/* Issue an ioctl on the session descriptor; retries EINTR. Returns 0 or -errno. */
int session_ioctl(struct dmafs_session *s, unsigned long cmd, void *arg);
void session_link(struct dmafs_session *s, struct dmafs_buf *b);
void session_unlink(struct dmafs_session *s, struct dmafs_buf *b);
/* Best path the daemon (or the fallback) reports for @target. */
int session_target_path(struct dmafs_session *s, int target);

/* buf.c */
/* Unregister and free @b even if a placement is marked in flight (session close). */
int buf_release(struct dmafs_buf *b, int force);
/* Enter/leave a placement; buf_enter returns -EBUSY once the buffer is being unregistered. */
int buf_enter(struct dmafs_buf *b);
void buf_leave(struct dmafs_buf *b, uint64_t placed);

/* hostmem.c - the memory of host buffers. */
struct hostmem {
	int fd;		/* the memfd (close it once the daemon has mapped it) */
	void *ptr;	/* our shared mapping of all of it */
	size_t len;	/* bytes of the object and of the mapping: whole (huge) pages */
	int huge;	/* 2 MiB hugetlb pages, else 4 KiB shmem pages */
};
/*
 * Create a memfd of at least @size bytes, map it shared and have every page allocated,
 * zeroed and mapped: reserved 2 MiB pages when the pool has enough (and the environment
 * does not say DMAFS_HOST_HUGETLB=0), else 4 KiB pages. Returns 0, or -ENOMEM, -EMFILE,
 * -ENFILE, other -errno of memfd_create/ftruncate/mmap/madvise; nothing is left behind.
 */
int hostmem_alloc(size_t size, struct hostmem *m);

/* place.c */
/*
 * dmafs_place_files() or dmafs_place_fds() over parts of files: item i places
 * [file_offsets[i], +lengths[i]) of paths[i] (or, with @paths NULL, of the open file
 * fds[i]) at buffer_offsets[i]; both offset arrays NULL places whole files. Exactly one
 * of @paths and @fds is given (-EINVAL otherwise, for n > 0).
 */
int place_ranges(struct dmafs_buf *b, const char *const *paths, const int *fds,
		 const uint64_t *file_offsets, const uint64_t *lengths,
		 const uint64_t *buffer_offsets, size_t n, unsigned threads,
		 struct dmafs_result *res, struct dmafs_result *total);
/*
 * The checks every call on a client's descriptor makes: @fd is open for reading (not
 * write-only, not O_PATH) on a regular file. Returns its status flags (and @st), or
 * -EBADF, -EISDIR, -EINVAL.
 */
int lib_read_fd(int fd, struct stat *st);
/* place.c: the fallback's read of extent @e (@len bytes, clipped at the end of the file)
 * of @fd into @b, straight or through a bounce chunk for a GPU buffer; e->length gets
 * the bytes placed. Returns 0 or -errno. */
struct dmafs_extent;
int lib_posix_extent(struct dmafs_buf *b, int fd, struct dmafs_extent *e, uint64_t len);

/* mountinfo.c - the mount of a device number, from /proc/self/mountinfo. */
struct mountinfo {
	char *mnt;	/* mount point */
	char *fstype;	/* "fuse.dmafs", "ext4", ... */
	char *source;	/* mount source, unescaped (dmafs: the member list) */
};
/*
 * Find the mount whose device is @dev; where several entries share it (bind mounts),
 * the one whose mount point is the longest prefix of @path (may be NULL). Returns 0,
 * -ENOENT when no entry matches, -ENOMEM or -errno from reading the file.
 */
int mountinfo_find(dev_t dev, const char *path, struct mountinfo *out);
void mountinfo_free(struct mountinfo *m);
/*
 * Split a dmafs mount source (members joined by ',' with ',' and '\' escaped by '\')
 * into a NULL-terminated array (free each entry and the array). Returns the count or
 * -ENOMEM.
 */
int mountinfo_members(const char *source, char ***out);

#endif
