/* SPDX-License-Identifier: MIT */
/*
 * dmafs-proto.h - the placement channel's wire format: ioctls on open files of a dmafs
 * mount. Shared by the daemon and libdmafs; applications use the calls in dmafs.h instead.
 *
 * Every ioctl is a "restricted" FUSE ioctl: its payload size is fixed by the command
 * number and stays under 16 KiB, so the kernel copies it in and out without retries.
 * All integers are native endian (the daemon and its clients share a machine).
 */
#ifndef DMAFS_PROTO_H
#define DMAFS_PROTO_H

#include <linux/ioctl.h>
#include <stddef.h>
#include <stdint.h>

#define DMAFS_PROTO_VERSION 1
#define DMAFS_IOC_MAGIC 0xD7

/* Buffer kinds a client can register (the same values as in dmafs.h). */
#define DMAFS_TARGET_HOST 1 /* shared host memory (memfd or /dev/shm object) */
#define DMAFS_TARGET_CUDA 2 /* CUDA device memory, by IPC handle */
#define DMAFS_TARGET_HIP 3  /* HIP device memory, by IPC handle */
#define DMAFS_TARGET_MAX 3

/* How bytes reached the buffer (the same values as in dmafs.h). */
#define DMAFS_PATH_NONE 0
#define DMAFS_PATH_P2P 1    /* drive DMA into GPU memory (cuFile/hipFile) */
#define DMAFS_PATH_STAGED 2 /* O_DIRECT into pinned staging, async host-to-device copies */
#define DMAFS_PATH_HOST 3   /* O_DIRECT into the client's shared pages (bounce for unaligned parts) */
#define DMAFS_PATH_POSIX 4  /* libdmafs fallback outside dmafs: pread + copy */
/* cuFile in compatibility mode (mount option p2p=force without nvidia-fs): cuFile reads
 * into host memory and copies to the GPU itself; no DMA from the drives into the GPU.
 * Since dmafs 0.6 (a daemon of 0.5 reported DMAFS_PATH_P2P); clients must take values
 * they do not know for a path that is not p2p. */
#define DMAFS_PATH_P2P_COMPAT 5

struct dmafs_ioc_target_info {
	uint32_t target;   /* DMAFS_TARGET_* */
	uint32_t path;	   /* DMAFS_PATH_* a placement into this target takes, or NONE */
	int32_t devices;   /* GPUs visible to the daemon for this target (-1: runtime absent) */
	uint32_t reserved;
	char why[240];	   /* why this path and not a faster one; NUL terminated */
};

/* DMAFS_IOC_INFO: what this daemon can do. */
struct dmafs_ioc_info {
	uint32_t version;	/* DMAFS_PROTO_VERSION */
	uint32_t members;
	uint32_t stripe_unit;
	uint32_t block_size;
	uint64_t staging_bytes; /* pinned staging memory per GPU */
	uint64_t file_size;	/* of the file the ioctl was issued on */
	struct dmafs_ioc_target_info t[DMAFS_TARGET_MAX];
	/* The warm tier (mount option tier=): all 0 when it is off, and from a daemon older
	 * than the tier (these bytes were reserved, and zero). */
	uint64_t tier_size;	/* bytes it may hold */
	uint64_t tier_held;	/* bytes of the chunks it holds now */
	uint64_t tier_hits;	/* pieces placed from it */
	uint64_t tier_misses;	/* pieces looked up there and read from the members */
	uint64_t tier_served;	/* bytes placed from it */
	uint64_t tier_filled;	/* bytes that entered it */
	uint64_t tier_evicted;	/* chunks given up to make room or memory */
	/* The tier and the machine's memory (tier_min_free=): 0 from a daemon older than this. */
	uint64_t tier_cap;	/* bytes it may hold now: tier_size, or tier_held while memory
				   is short (it takes no new chunks) */
	uint64_t tier_resident;	/* bytes of its segments with memory: what it may take now */
	uint64_t tier_shrunk;	/* bytes it gave back because memory was short */
	uint64_t tier_min_free;	/* the available memory it leaves the machine */
	uint64_t tier_pinned;	/* bytes of its segments pinned for the GPU runtimes (0 from
				   an older daemon, and without a GPU) */
	uint32_t tier_fill;	/* 0: placements fill the tier (tier_fill=now, and older
				   daemons); 1: it is filled once placements are idle */
	uint32_t tier_waiting;	/* tier_fill=idle: ranges of files waiting to be filled */
	uint64_t tier_filled_idle; /* tier_fill=idle: bytes filled after the placements */
	uint64_t tier_dropped;	/* tier_fill=idle: ranges given up, whole (the queue was
				   full) or past the tier's size (the rest of a range) */
	char reserved[8];
};

#define DMAFS_HANDLE_SIZE 64

/* DMAFS_IOC_REGISTER: make a buffer placeable; the id belongs to the calling process. */
struct dmafs_ioc_register {
	uint32_t target;		 /* in: DMAFS_TARGET_* */
	uint32_t flags;			 /* in: 0 */
	uint64_t size;			 /* in: bytes usable from offset */
	uint64_t offset;		 /* in: offset into the IPC allocation or memory object */
	int32_t fd;			 /* in (HOST): caller's descriptor of a memfd or /dev/shm object */
	int32_t device;			 /* out: device ordinal in the daemon (GPU targets) */
	uint8_t uuid[16];		 /* in (GPU): device UUID, as cuDeviceGetUuid/hipDeviceGetUuid */
	uint8_t handle[DMAFS_HANDLE_SIZE]; /* in (GPU): cudaIpcMemHandle_t / hipIpcMemHandle_t */
	uint64_t id;			 /* out: buffer id */
	char reserved[64];
};

/* DMAFS_IOC_UNREGISTER */
struct dmafs_ioc_unregister {
	uint64_t id;
};

/*
 * One extent to place: file bytes [file_offset, file_offset + length) go to buffer bytes
 * [buffer_offset, ...). length DMAFS_TO_EOF means "to the end of the file". On return,
 * length holds the bytes placed: less than asked only where the file ends first.
 */
struct dmafs_place_entry {
	uint64_t file_offset;
	uint64_t length;
	uint64_t buffer_offset;
};
#ifndef DMAFS_TO_EOF
#define DMAFS_TO_EOF UINT64_MAX
#endif
#define DMAFS_PLACE_MAX 512

/* DMAFS_IOC_PLACE: place up to DMAFS_PLACE_MAX extents of this file into buffer id. */
struct dmafs_ioc_place {
	uint64_t id;	     /* in */
	uint32_t count;	     /* in: entries used */
	uint32_t flags;	     /* in: 0 */
	uint64_t bytes;	     /* out: total placed */
	uint32_t path;	     /* out: DMAFS_PATH_* */
	uint32_t reserved;
	uint64_t elapsed_ns; /* out: time inside the daemon */
	struct dmafs_place_entry e[DMAFS_PLACE_MAX];
};

/*
 * DMAFS_IOC_PLACE2: DMAFS_IOC_PLACE, served the same way, whose reply also tells where the
 * bytes came from. A daemon older than it answers ENOTTY; then use DMAFS_IOC_PLACE.
 */
struct dmafs_ioc_place2 {
	uint64_t id;	     /* in */
	uint32_t count;	     /* in: entries used */
	uint32_t flags;	     /* in: 0 */
	uint64_t bytes;	     /* out: total placed */
	uint32_t path;	     /* out: DMAFS_PATH_* */
	uint32_t reserved;
	uint64_t elapsed_ns; /* out: time inside the daemon */
	uint64_t tier_bytes; /* out: of bytes, those placed from the warm tier (no member
			      * read); the rest came from the members */
	struct dmafs_place_entry e[DMAFS_PLACE_MAX];
};

/*
 * DMAFS_IOC_PREFETCH: read file bytes [offset, offset + length) into the mount's warm tier
 * (mount option tier=), no buffer needed. The range widens to whole tier chunks (1 MiB,
 * file-offset aligned) and stops at the end of the file; every chunk the tier does not hold
 * is read from the members, its checksums checked, and kept. The descriptor must be open
 * for reading; -EOPNOTSUPP when the mount has no tier. A range larger than the tier cycles
 * it: chunks near its end stay. dmafs-ioctl(7).
 */
struct dmafs_ioc_prefetch {
	uint64_t offset;     /* in */
	uint64_t length;     /* in: bytes, or DMAFS_TO_EOF */
	uint32_t flags;	     /* in: 0 */
	uint32_t reserved;
	uint64_t bytes_read; /* out: bytes read from the members and kept in the tier now */
	uint64_t bytes_held; /* out: bytes of the widened range the tier held already */
	uint64_t bytes_skipped; /* out: bytes not kept: past the tier's size (a request reads
				 * at most that much), holes (never read), no chunk of the
				 * tier free (all in use by copies), or the file changed
				 * while they were read */
	uint64_t elapsed_ns; /* out: time inside the daemon */
	char reserved2[8];
};

/*
 * DMAFS_IOC_HANDLE (on a regular file opened for reading): a handle naming this file in
 * batches (DMAFS_IOC_BATCH) of the calling process. It is a capability as an open
 * descriptor is, with no state in the daemon: it holds the inode, its generation and a
 * keyed MAC over them, the caller's process (its pid and start time) and user, with a key
 * drawn when the filesystem was mounted. Only that process may use it, until it exits or
 * the filesystem is unmounted; it does not keep a removed file (entries naming one fail
 * with -ENOENT).
 */
struct dmafs_ioc_handle {
	uint64_t ino;	/* out */
	uint32_t gen;	/* out */
	uint32_t flags; /* in: 0; out: 0 */
	uint64_t mac;	/* out */
	char reserved[8];
};

/* One sample of a batch: file bytes [file_offset, + length) of the file the handle
 * (ino, mac, gen) names go to buffer bytes [buffer_offset, + length). */
struct dmafs_batch_entry {
	uint64_t ino, mac; /* in: from DMAFS_IOC_HANDLE */
	uint32_t gen;	   /* in: from DMAFS_IOC_HANDLE */
	uint32_t hflags;   /* in: 0 (DMAFS_IOC_HANDLE's flags) */
	uint64_t file_offset;
	uint64_t buffer_offset;
	uint32_t length;   /* in: bytes; out: bytes placed (less only where the file ends) */
	int32_t result;	   /* out: 0, or -errno for this entry alone */
};
#define DMAFS_BATCH_MAX 320

/*
 * DMAFS_IOC_BATCH (on any file of the mount the caller has open): place up to
 * DMAFS_BATCH_MAX samples, of any files the caller holds handles for, into buffer id.
 * Every entry is checked before any I/O (a malformed one fails the whole request,
 * -EINVAL or -ERANGE); an entry whose file is gone, or whose handle is not this
 * process's, fails alone (result -ENOENT, -ESTALE or -EPERM) and the others are placed.
 */
struct dmafs_ioc_batch {
	uint64_t id;	     /* in */
	uint32_t count;	     /* in: entries used */
	uint32_t flags;	     /* in: 0 */
	uint64_t bytes;	     /* out: total placed */
	uint32_t path;	     /* out: DMAFS_PATH_* */
	uint32_t failed;     /* out: entries with a result other than 0 */
	uint64_t elapsed_ns; /* out: time inside the daemon */
	char reserved[24];
	struct dmafs_batch_entry e[DMAFS_BATCH_MAX];
};

#define DMAFS_IOC_INFO _IOR(DMAFS_IOC_MAGIC, 1, struct dmafs_ioc_info)
#define DMAFS_IOC_REGISTER _IOWR(DMAFS_IOC_MAGIC, 2, struct dmafs_ioc_register)
#define DMAFS_IOC_UNREGISTER _IOW(DMAFS_IOC_MAGIC, 3, struct dmafs_ioc_unregister)
#define DMAFS_IOC_PLACE _IOWR(DMAFS_IOC_MAGIC, 4, struct dmafs_ioc_place)
#define DMAFS_IOC_PREFETCH _IOWR(DMAFS_IOC_MAGIC, 5, struct dmafs_ioc_prefetch)
#define DMAFS_IOC_PLACE2 _IOWR(DMAFS_IOC_MAGIC, 6, struct dmafs_ioc_place2)
#define DMAFS_IOC_HANDLE _IOWR(DMAFS_IOC_MAGIC, 7, struct dmafs_ioc_handle)
#define DMAFS_IOC_BATCH _IOWR(DMAFS_IOC_MAGIC, 8, struct dmafs_ioc_batch)

/*
 * DMAFS_IOC_MODE: the daemon's half of `mount -o remount` (dmafs --remount sends it after
 * mount(2) MS_REMOUNT). Only on the mount's root directory, only by uid 0 with
 * CAP_SYS_ADMIN; going read-only needs the kernel mount read-only first (EBUSY in status).
 */
#define DMAFS_MODE_RO 1u	 /* read-only (else read-write) */
#define DMAFS_MODE_NODIRATIME 2u /* no atime updates for directories */
#define DMAFS_MODE_SYNC 4u	 /* every change committed before it returns */
#define DMAFS_MODE_DIRSYNC 8u	 /* every directory change is */
/* dmafs_ioc_mode.atime */
#define DMAFS_ATIME_RELATIME 0u
#define DMAFS_ATIME_STRICT 1u
#define DMAFS_ATIME_NEVER 2u

struct dmafs_ioc_mode {
	uint32_t flags;	 /* in: DMAFS_MODE_* */
	uint32_t atime;	 /* in: DMAFS_ATIME_* */
	int32_t status;	 /* out: 0 or -errno */
	uint32_t reserved;
	char msg[256];	 /* out: why it failed */
};

#define DMAFS_IOC_MODE _IOWR(DMAFS_IOC_MAGIC, 16, struct dmafs_ioc_mode)

/*
 * DMAFS_IOC_REBUILD: dmafs-replace's half of a rebuild while mounted (a mirror whose
 * member is missing or failed: read-only). Only on the mount's root directory, only by
 * uid 0 with CAP_SYS_ADMIN. START hands the daemon the new device as a descriptor of the
 * caller's, open read-write with O_DIRECT (taken with pidfd_getfd; nothing is opened by
 * name), and starts the copy on a thread of the daemon's; STATUS says how it goes.
 */
#define DMAFS_REBUILD_START 1u
#define DMAFS_REBUILD_STATUS 2u
/* dmafs_ioc_rebuild.state */
#define DMAFS_REBUILD_NONE 0   /* none started on this mount */
#define DMAFS_REBUILD_RUNNING 1
#define DMAFS_REBUILD_DONE 2   /* the member serves again; unmount and mount to write */
#define DMAFS_REBUILD_FAILED 3 /* msg says why; the new device is no member */

struct dmafs_ioc_rebuild {
	uint32_t op;	   /* in: DMAFS_REBUILD_START or _STATUS */
	int32_t fd;	   /* in, START: the new device, open O_RDWR | O_DIRECT */
	int32_t member;	   /* in, START: the member to replace, -1: the one not serving;
			    * out: the member being (or last) rebuilt */
	int32_t state;	   /* out: DMAFS_REBUILD_* */
	int32_t status;	   /* out, START: 0, or -errno (msg says why) */
	uint32_t reserved;
	uint64_t done, total; /* out: bytes copied, to copy */
	uint64_t damaged;  /* out: bytes that had no good copy (written failing: see dmafs-replace(8)) */
	char msg[256];	   /* out: why START failed or the rebuild did, or where it went */
};

#define DMAFS_IOC_REBUILD _IOWR(DMAFS_IOC_MAGIC, 17, struct dmafs_ioc_rebuild)

_Static_assert(sizeof(struct dmafs_ioc_place) < 16384, "restricted FUSE ioctl limit");
_Static_assert(sizeof(struct dmafs_ioc_rebuild) == 304, "DMAFS_IOC_REBUILD keeps its size");
_Static_assert(sizeof(struct dmafs_ioc_batch) < 16384, "restricted FUSE ioctl limit");
_Static_assert(sizeof(struct dmafs_batch_entry) == 48, "batch entries are 48 bytes");
/* _IOC's size field has 14 bits: at most 16383 bytes */
_Static_assert(sizeof(struct dmafs_ioc_place2) <= 16383, "DMAFS_IOC_PLACE2's size fits its number");
_Static_assert(sizeof(struct dmafs_ioc_place2) == 12336, "DMAFS_IOC_PLACE2 keeps its size");
_Static_assert(offsetof(struct dmafs_ioc_place2, e) == offsetof(struct dmafs_ioc_place, e) + 8,
	       "PLACE2 is PLACE with tier_bytes before the entries");
_Static_assert(sizeof(struct dmafs_ioc_info) < 16384, "restricted FUSE ioctl limit");
/* DMAFS_IOC_INFO's number holds the struct's size: fields come out of reserved only */
_Static_assert(sizeof(struct dmafs_ioc_info) == 928, "DMAFS_IOC_INFO keeps its size");
_Static_assert(sizeof(struct dmafs_ioc_prefetch) == 64, "DMAFS_IOC_PREFETCH keeps its size");

#endif
