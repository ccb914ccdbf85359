/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the filesystem engine's interface: namespace and data operations on the
 * in-memory metadata, independent of FUSE. Every call returns 0 (or a byte count) on
 * success and -errno on failure; the FUSE handlers (fuse/) only decode, call one of these
 * and reply. Declarations are grouped by the engine file that defines them.
 */
#ifndef DMAFS_ENGINE_H
#define DMAFS_ENGINE_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/statvfs.h>

#include "store/alloc.h"
#include "store/journal.h"
#include "io/member.h"
#include "store/meta.h"
#include "io/uring.h"
#include "io/workpool.h"
#include "engine/tier.h"
#include "engine/wback.h"

/* The checksum block of a member written last, kept to spare a read on the next update. */
struct fs_csum_cache {
	pthread_mutex_t lock; /* serialises read-modify-write of this member's checksum blocks */
	int valid;
	uint64_t pos;
	char *blk;
};

/* What the mount options ask of the engine (daemon/options.c fills it in). */
struct fs_settings {
	int verify_place; /* placements check checksums too (mount option verify_place) */
	int tier_fill_idle; /* tier_fill=idle: placements leave filling the tier for later */
	/* those a remount may change (atime.c, fuse/); read without a lock */
	int atime;	/* FS_ATIME_*: when a read updates the access time */
	int nodiratime; /* ... except for directories, never */
	int sync;	/* every write and metadata change is committed before it returns */
	int dirsync;	/* directory changes are */
	/* to start them when going read-write */
	unsigned commit_interval, writebehind_mb;
};

struct fs {
	struct member *members;
	unsigned n;
	uint32_t su;
	int ro;
	int log_full_said; /* the full metadata log was reported (txn.c); meta.lock */
	/*
	 * Called when the daemon changed an inode's attributes on its own (set-user-ID and
	 * file capabilities dropped by a write, killpriv.c): the kernel's cached copy is
	 * stale. Set by the daemon; NULL: nobody to tell.
	 */
	void (*attr_changed)(void *arg, uint64_t ino);
	void *attr_arg;
	struct meta meta;
	struct alloc alloc;
	struct journal j;
	struct fs_settings set;
	/*
	 * POSIX ACLs are on (the kernel agreed to FUSE_POSIX_ACL and FUSE_DONT_MASK): the
	 * system.posix_acl_* xattrs are kept, new inodes inherit default ACLs, and the umask
	 * is applied here, not by the kernel.
	 */
	int acl;
	/* inodes whose atime changed since the last commit (atime.c); meta.lock */
	uint64_t *atime_dirty;
	size_t natime_dirty, catime_dirty;
	/* read-write mode switches (remount, mode.c) */
	pthread_mutex_t mode_lock;
	int members_ro;		 /* the members were opened read-only (mounted with -o ro) */
	struct fs_csum_cache cc[FMT_MAX_MEMBERS];
	struct wback wb;
	/*
	 * The generation number of the next new inode (meta.lock). It starts at a random
	 * value at each mount: an inode number handed out again after a crash lost the
	 * inode that first had it then gets another generation, and file handles of the
	 * lost inode stay stale.
	 */
	uint32_t next_gen;
	struct workpool *pool; /* CPU work of the I/O paths (checksums); never freed */
	struct tier *tier;     /* the warm tier (tier.h), NULL when off; set before serving */
	/* how each member zeroes a range (falloc.c), learnt at the first try */
	_Atomic int zero_how[FMT_MAX_MEMBERS];
	/*
	 * The mirror data profile (mirror.c): every data block has a second copy on the next
	 * member (fmt_mirror_of). mstate says which members serve reads; one that failed
	 * or is missing serves none, and the filesystem then takes no changes (ro).
	 */
	int mirror;
	uint64_t mirror_half;
	uint64_t doff[FMT_MAX_MEMBERS]; /* each member's data_offset */
	_Atomic int mstate[FMT_MAX_MEMBERS];
	pthread_mutex_t heal_lock; /* one recovery at a time (read.c, fs_mirror_recover) */
	struct fs_mstat {
		_Atomic uint64_t bad;	 /* reads of this member's copies that failed */
		_Atomic uint64_t healed; /* ...whose copy was rewritten from the other */
		_Atomic int said;	 /* the first was logged */
	} mst[FMT_MAX_MEMBERS];
	struct fs_rebuild *rb; /* a rebuild while mounted (rebuild-live.c), or NULL */
	int rebuilt;	       /* a member was rebuilt while mounted: no remount read-write */
	int failed_ro;	       /* read-only since a mirror's member failed (mirror.c): what
				* was logged before still commits */
	pthread_cond_t fill_cond; /* an inode stopped filling (fs_fill_done); meta.lock */
	int finished;	     /* fs_finish has run; its result: */
	int finish_ret;
	char finish_err[256];
};

/*
 * chattr +i and +a (iflags.c): every change the kernel's own filesystems refuse to an
 * immutable or append-only inode is refused here with -EPERM, since the kernel cannot see
 * these flags of a FUSE inode (it checks IS_IMMUTABLE and IS_APPEND, which stay clear).
 */
static inline int fs_immutable(const struct inode *i) { return i->a.flags & FMT_IFL_IMMUTABLE; }
static inline int fs_append(const struct inode *i) { return i->a.flags & FMT_IFL_APPEND; }
/* Neither may lose a name, nor be renamed or linked to. */
static inline int fs_undeletable(const struct inode *i) { return fs_immutable(i) || fs_append(i); }

/* fs.atime */
enum { FS_ATIME_RELATIME, FS_ATIME_STRICT, FS_ATIME_NEVER };

/* Who asks: from the FUSE request context. */
struct fs_ctx {
	uint32_t uid, gid; /* filesystem uid and gid */
	uint32_t umask;	   /* of a creating process (applied only when fs->acl) */
	int32_t pid;	   /* the requesting thread; 0: unknown (see acl_pid_capable) */
};

/* mount.c: the engine's life: mount, end of service, statfs, fsync */
/* Mount-time setup: members already opened and verified. @err gets a one-line reason. */
int fs_mount(struct fs *fs, struct member *ms, unsigned n, int ro, char *err, size_t errlen);
/*
 * End of service, once no request can arrive: stop the commit thread, write what
 * write-behind holds, commit the metadata, then flush the write cache of every member
 * (O_DIRECT writes may still sit in a drive's volatile cache until then). Runs once;
 * later calls return the first result. Returns 0 or -errno; on failure finish_err says
 * what failed (also logged).
 */
int fs_finish(struct fs *fs);
/* fs_finish if not done yet, then free memory (members are closed by the caller). Returns
 * fs_finish's result. */
int fs_unmount(struct fs *fs);
int fs_statfs(struct fs *fs, struct statvfs *sv);
/* Commit everything written so far. */
int fs_fsync(struct fs *fs);

/* attr.c: attributes */
void fs_stat(struct fs *fs, const struct inode *ino, struct stat *st);
int fs_getattr(struct fs *fs, uint64_t ino, struct stat *st);
/*
 * @valid uses FUSE_SET_ATTR_* bits. A size change or a change of owner or group by @c
 * drops set-user-ID and set-group-ID as fs_killpriv_bits() says (@c NULL: nothing is
 * dropped), and the file's capabilities.
 */
int fs_setattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, const struct stat *in,
	       int valid, struct stat *out);

/* namei.c: names */
/*
 * On success the kernel holds one more reference (nlookup) on the returned inode. "." is
 * @parent itself, of any type, while it lives (linked or not); ".." the parent of
 * directory @parent (the root's is the root): the kernel asks for them only to turn a
 * file handle back into an inode (FUSE_CAP_EXPORT_SUPPORT).
 */
int fs_lookup(struct fs *fs, uint64_t parent, const char *name, struct stat *st,
	      int *cache_name);
/*
 * May the kernel keep a name of @i without revalidating it (fuse/ops.h)? A directory's,
 * and one of a file that has had one name only since the mount. Locked.
 */
static inline int fs_name_cacheable(const struct inode *i)
{
	return i->dir || (i->a.nlink == 1 && !i->several_names);
}
/* The generation number of @ino (0 when gone): with the inode number, what a file handle
 * names. */
uint64_t fs_generation(struct fs *fs, uint64_t ino);
void fs_forget(struct fs *fs, uint64_t ino, uint64_t n);
/*
 * Create a file (S_IFREG), directory, symlink (@target) or special file. Counts a lookup.
 * With ACLs on, the new inode gets the access ACL (and, a directory, the default ACL)
 * that @parent's default ACL gives it, or else @c's umask is applied to @mode.
 */
int fs_mknod(struct fs *fs, const struct fs_ctx *c, uint64_t parent, const char *name,
	     mode_t mode, dev_t rdev, const char *target, struct stat *st);
/* *@single_dir and @single_name (FMT_NAME_MAX + 1 bytes): the inode's only name before this
 * link (*@single_dir 0: it had more, or none known) */
int fs_link(struct fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *st,
	    uint64_t *single_dir, char *single_name);
int fs_unlink(struct fs *fs, uint64_t parent, const char *name, int rmdir);
/*
 * rename(2) with renameat2(2)'s @flags RENAME_NOREPLACE, RENAME_EXCHANGE and
 * RENAME_WHITEOUT (with NOREPLACE or alone): the last leaves at @name a whiteout, a
 * character device 0:0 without permission bits owned by @c, in the same change (overlayfs
 * upper layers). -EINVAL for other flags or combinations.
 */
int fs_rename(struct fs *fs, const struct fs_ctx *c, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned flags);
int fs_readlink(struct fs *fs, uint64_t ino, char *buf, size_t len);

/* file.c: open files and their data (above write-behind) */
int fs_open(struct fs *fs, uint64_t ino, int flags);
void fs_release(struct fs *fs, uint64_t ino);
/*
 * The regular file @ino of generation @gen while it still has a name, kept as an open
 * keeps it (its data stays if its last name goes meanwhile), with no access check: for
 * the daemon's own later reads of a file a client placed. NULL when it is gone, or
 * removed. fs_unhold() lets go.
 */
struct inode *fs_hold(struct fs *fs, uint64_t ino, uint32_t gen);
void fs_unhold(struct fs *fs, uint64_t ino);
/* Many files held and let go with one take of the metadata lock each way (sample batches). */
struct fs_held {
	uint64_t ino;
	uint32_t gen;
	int buffered;		/* out: write-behind state there (wait for it before reading) */
	struct inode *ip;	/* out: as fs_hold(); fs_unhold_many() sets it to NULL */
};
void fs_hold_many(struct fs *fs, struct fs_held *h, size_t n);
void fs_unhold_many(struct fs *fs, struct fs_held *h, size_t n);
/* Write @ino's buffered data, then commit everything. Returns a background write error
 * of @ino (once) or the commit's. */
int fs_fsync_file(struct fs *fs, uint64_t ino);
/* close(2) of a file descriptor: its buffered data is written; returns a background
 * write error of @ino (once) or 0. */
int fs_flush(struct fs *fs, uint64_t ino);
/*
 * fs_open() that may also have the open send the file's data to the kernel's page cache
 * (the daemon's open_fill option): *@fill is set to the file's size when the open is
 * read-only, not O_DIRECT, @max is not 0, the file is a regular file of 1 to @max bytes
 * with nothing buffered, nobody else has it open or held, and the kernel may hold none of
 * its pages (the inode's kpages). The file is then marked filling until fs_fill_done():
 * meanwhile no other open of it and no change of its size goes ahead, so nothing can
 * change the data, or lock the kernel's pages of it, between the read and the send.
 */
int fs_open_fill(struct fs *fs, uint64_t ino, int flags, uint64_t max, uint64_t *fill);
/* The data of a filling file was sent (@sent 1: the kernel has its pages), or not. */
void fs_fill_done(struct fs *fs, uint64_t ino, int sent);
/*
 * Read up to @size bytes at @off. On success returns the byte count and sets *data to a
 * per-thread buffer valid until this thread's next fs_read. The inode is marked as one
 * the kernel may hold pages of (every caller answers the kernel's reads).
 */
ssize_t fs_read(struct fs *fs, uint64_t ino, uint64_t off, size_t size, const char **data);
/* Write (buffered by write-behind when it can); returns bytes accepted (short only at
 * ENOSPC) or -errno. The daemon's own write: no privileges are dropped (fs_killpriv). */
ssize_t fs_write(struct fs *fs, uint64_t ino, const char *data, size_t size, uint64_t off);
/* A write by @c (fs_killpriv first; @c NULL: none), with the data brought in by
 * @copy(@arg, dst, size) (0 or -errno), straight into write-behind's buffers when the write
 * is buffered: called once, or several times for consecutive parts of the data. */
ssize_t fs_write_from(struct fs *fs, const struct fs_ctx *c, uint64_t ino, size_t size,
		      uint64_t off, int (*copy)(void *arg, char *dst, size_t size), void *arg);

/* dir.c: directory listing */
/*
 * Open directory @ino for reading. *@limit (kept by the caller for this open) gets the
 * first cookie (meta.h) that the open does not list: entries made after it, a renamed one
 * among them, are left out, so a walk that renames what it finds ends (as btrfs does).
 */
int fs_opendir(struct fs *fs, uint64_t ino, uint64_t *limit);
void fs_releasedir(struct fs *fs, uint64_t ino);
/*
 * Walk a directory from offset @off (0: the start, which also renews *@limit, as
 * rewinddir(3) must show the directory as it is now; "." is 1, ".." 2, and an entry's
 * offset is the one readdir gave with it): entries made before *@limit. @fill returns
 * non-zero when the reply is full; it gets each entry's offset. With @plus (readdirplus)
 * an entry comes with all its attributes and generation, and each one @fill took counts
 * as a lookup (the caller forgets them if the reply fails); "." and ".." come as without
 * it, generation 0, uncounted. A name whose inode is gone comes with st_mode 0.
 * @cache_name: fs_name_cacheable() (plus only).
 */
int fs_readdir(struct fs *fs, uint64_t ino, uint64_t off, uint64_t *limit, int plus,
	       int (*fill)(void *arg, const char *name, const struct stat *st, uint64_t gen,
			   int cache_name, uint64_t next),
	       void *arg);

/* xattr.c: extended attributes and the layout text */
/*
 * xattrs: user.*, trusted.* and security.*, and with ACLs on system.posix_acl_access and
 * system.posix_acl_default; other names get -EOPNOTSUPP. user.dmafs.layout and
 * user.dmafs.tier (bytes of the file in the warm tier) are virtual and read-only;
 * user.dmafs.tier_min_free of the root (with a warm tier) is virtual: it reads as the
 * tier's min_free in bytes, and uid 0 may set it (a size or N%, as the mount option;
 * -EINVAL otherwise; -EPERM for anyone else or elsewhere). The kernel itself allows trusted.* only to CAP_SYS_ADMIN and checks
 * security.* writes; listxattr hides trusted.* names from a caller @c without
 * CAP_SYS_ADMIN (@c NULL: shown). Setting the access ACL sets the mode to agree (and
 * drops setgid unless @c is in the file's group or has CAP_FSETID); an ACL the mode
 * expresses entirely is not stored.
 */
int fs_getxattr(struct fs *fs, uint64_t ino, const char *name, void *buf, size_t size);
int fs_setxattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, const char *name,
		const void *val, size_t size, int flags);
int fs_listxattr(struct fs *fs, const struct fs_ctx *c, uint64_t ino, char *buf, size_t size);
int fs_removexattr(struct fs *fs, uint64_t ino, const char *name);
/* The layout text of a regular file from extent @first (one page of at most ~60 KB;
 * malloc'd, caller frees) or NULL with *err set. */
char *fs_layout(struct fs *fs, uint64_t ino, size_t first, int *err);

/* iflags.c: chattr +i, +a */
/*
 * The flags of @ino as FS_IOC_GETFLAGS gives them (FS_IMMUTABLE_FL, FS_APPEND_FL) in
 * *@flags. Returns 0 or -ENOENT.
 */
int fs_getflags(struct fs *fs, uint64_t ino, uint32_t *flags);
/*
 * FS_IOC_SETFLAGS by @c: @flags may hold FS_IMMUTABLE_FL and FS_APPEND_FL (others:
 * -EOPNOTSUPP). Only the owner or a holder of CAP_FOWNER may set flags, and changing
 * either of these two takes CAP_LINUX_IMMUTABLE (-EPERM), judged from @c's credentials in
 * /proc (pid 0: none). Kept in the inode's INODE records (format version 3: a version 2
 * filesystem is only ever mounted read-only, -EROFS). Returns 0, -ENOENT, -EPERM, -EROFS,
 * -EOPNOTSUPP or fs_begin's errors.
 */
int fs_setflags(struct fs *fs, const struct fs_ctx *c, uint64_t ino, uint32_t flags);

/* killpriv.c: what changing a file takes away */
/*
 * The bits of @mode (set-user-ID, set-group-ID) that the daemon takes away when @c
 * changes a file of group @gid, on top of what the kernel does itself (killpriv.c). A
 * write, truncate or fallocate (@chown 0): the whole rule of setattr_should_drop_suidgid()
 * for regular files: nothing when @c has CAP_FSETID, else set-user-ID, and set-group-ID
 * when the file is group-executable or @c is not in group @gid. A change of owner or group
 * (@chown 1): set-group-ID of a file that is not group-executable (not a directory) when
 * @c is neither in the old group @gid nor has CAP_FSETID. None when @c is NULL (the
 * daemon's own change, or a write-back from the page cache whose writer is not known) or
 * when the kernel made the request for @c with other credentials (overlayfs, nfsd: that
 * layer applied the rule with @c's). A caller /proc does not show (pid 0, another user
 * namespace) counts as one without CAP_FSETID in no group but the request's. Reads
 * /proc/PID/status only when @mode has one of the bits.
 */
uint32_t fs_killpriv_bits(const struct fs_ctx *c, uint32_t mode, uint32_t gid, int chown);
/*
 * A write or fallocate by @c is about to change regular file @ino: drop its file
 * capabilities (security.capability; the kernel does that itself only for writes through
 * its page cache) and the bits fs_killpriv_bits() names, logging the change. Returns 0,
 * -ENOENT, or fs_begin's errors.
 */
int fs_killpriv(struct fs *fs, const struct fs_ctx *c, uint64_t ino);
/* Would a write by @c take something from @ino now (a bit fs_killpriv_bits() names)? */
int fs_killpriv_due(struct fs *fs, const struct fs_ctx *c, uint64_t ino);

/* mirror.c: the mirror data profile (its writes and its recovery are write.c's and read.c's) */
enum { FS_MEMBER_OK, FS_MEMBER_FAILED, FS_MEMBER_MISSING };
/* Set the profile and the members' states up from their superblocks (fs_mount). */
void fs_mirror_setup(struct fs *fs);
/* After journal_open: the log goes on without a member that fails (journal.member_failed). */
void fs_mirror_journal(struct fs *fs);
static inline int fs_member_ok(struct fs *fs, unsigned m)
{
	return atomic_load(&fs->mstate[m]) == FS_MEMBER_OK;
}
/* The other copy of the bytes that member I/O @op addresses (either copy), as an op. */
void fs_other_copy(const struct fs *fs, const struct uring_op *op, struct uring_op *o);
/* Where the second copy of the block at member offset @moff of member @m lies. */
void fs_second_copy(const struct fs *fs, unsigned m, uint64_t moff, unsigned *m2, uint64_t *moff2);
/*
 * The copy a read @op (the first copy, at file offset @foff) takes on a mirror: rows of
 * stripe units (a unit on every member) alternately the first and the second copies, and
 * the other copy where a member serves no reads. Nothing changes on a single profile.
 */
void fs_pick_copy(struct fs *fs, struct uring_op *op, uint64_t foff);
/*
 * Member @m failed (@what: "write", "rewrite"; @err): from now on it serves no reads and
 * the filesystem takes no changes. Logged once.
 */
void fs_member_failed(struct fs *fs, unsigned m, const char *what, int err);
/*
 * write.c: write file data: the member writes @ops (each with its file offset in @foffs), and with
 * the mirror profile their second copies too, then the checksums of all. A failed write
 * is logged, and with the mirror profile fails its member. Returns 0 or -EIO/-EROFS/-ENOMEM.
 */
int fs_data_write(struct fs *fs, const struct inode *ino, struct uring_op *ops, size_t n,
		  const uint64_t *foffs);
/*
 * read.c: the data read @op (file offset @foff of @ino) failed (@io_err: the read; else its
 * checksum): with the mirror profile, read the other copy into a buffer of the daemon's,
 * check it, rewrite the bad copy from it (self-heal, on a read-write mount) and copy it
 * to op->buf with @copy (memcpy when NULL; 0 or -errno). Sets op->recovered. Returns 0,
 * or -EIO when there is no good copy (logged). Caller holds ino->iolock.
 */
int fs_mirror_recover(struct fs *fs, const struct inode *ino, struct uring_op *op, uint64_t foff,
		      int io_err, int (*copy)(void *dst, const void *src, size_t n));
/* fs_verify_read, and on a mismatch fs_mirror_recover (@copy as there). */
int fs_verify_or_recover(struct fs *fs, const struct inode *ino, struct uring_op *op,
			 const void *csums, uint64_t foff,
			 int (*copy)(void *dst, const void *src, size_t n));

/* rebuild-live.c: a mirror's member rebuilt while mounted (read-only) */
enum { FS_REBUILD_NONE, FS_REBUILD_RUNNING, FS_REBUILD_DONE, FS_REBUILD_FAILED };
struct fs_rebuild_status {
	int state;		/* FS_REBUILD_* */
	unsigned member;
	uint64_t done, total, damaged;
	char msg[512];
};
/*
 * Start rebuilding member @member (-1: the one member that serves no reads) onto the device
 * open as @fd (read-write, O_DIRECT; owned from now on, closed on failure), on a thread.
 * *@k gets the member. 0, or -errno with the reason in @err.
 */
int fs_rebuild_start(struct fs *fs, int fd, int member, unsigned *k, char *err, size_t errlen);
void fs_rebuild_status(struct fs *fs, struct fs_rebuild_status *st);
/* Stop a rebuild that runs (at its next batch), wait for it, free what it holds. */
void fs_rebuild_stop(struct fs *fs);

/* read.c: reading file data */
/*
 * The member reads that fill the block-aligned file range [a, b) of @ino into @buf, in
 * file order: holes are zeroed in @buf here, and @emit gets each read (never crossing a
 * stripe unit) with its file offset; a non-zero return from @emit stops the walk and is
 * returned. Caller holds ino->iolock.
 */
int fs_map_reads(struct fs *fs, const struct inode *ino, char *buf, uint64_t a, uint64_t b,
		 int (*emit)(void *arg, const struct uring_op *op, uint64_t foff), void *arg);
/* As fs_map_reads, with the holes zeroed by @zero (0, or -errno that stops the walk and is
 * returned): for @buf in memory the daemon must not touch with a plain store (a client's
 * pages, which can go away under it). */
int fs_map_reads_z(struct fs *fs, const struct inode *ino, char *buf, uint64_t a, uint64_t b,
		   int (*emit)(void *arg, const struct uring_op *op, uint64_t foff), void *arg,
		   int (*zero)(void *dst, size_t n));
/* The member's checksum blocks [*a, *b) covering data read @op; its first checksum is at
 * member offset *p0. */
void fs_csum_span(const struct fs *fs, const struct uring_op *op, uint64_t *p0, uint64_t *a,
		  uint64_t *b);
/* Check the data of completed read @op against @csums (the blocks fs_csum_span names);
 * logs each damaged block with inode, file offset (@foff = file offset of op's first
 * byte), member and member offset. Returns 0 or -EIO. */
int fs_verify_read(struct fs *fs, const struct inode *ino, const struct uring_op *op,
		   const void *csums, uint64_t foff);
/* Log a failed member I/O (@what: "read", "write") with member, offsets and inode. */
void fs_io_error(struct fs *fs, const struct inode *ino, const struct uring_op *op,
		 uint64_t foff, const char *what);
/* Read blocks [a, b) of @ino into @buf (holes zeroed); caller holds ino->iolock. */
int fs_read_blocks(struct fs *fs, struct inode *ino, char *buf, uint64_t a, uint64_t b,
		   int verify);

/* write.c: writing file data */
/* Write to the members now; returns bytes written (short only at ENOSPC) or -errno.
 * @mtime: when the write was accepted (ns; 0: now). Caller holds no lock of @ino. */
ssize_t fs_write_inode(struct fs *fs, struct inode *ino, const char *data, size_t size,
		       uint64_t off, int64_t mtime);
/* Change the size (caller holds nothing); data beyond the new end is released. */
int fs_truncate_locked_data(struct fs *fs, struct inode *ino, uint64_t size);
/* A new extent not yet in the map: allocated, written, then logged. */
struct newext {
	uint64_t off, moff;
	uint32_t len, member;
};
/*
 * Allocate new space for file blocks [a, b) of @ino with the striping and goals of an
 * ordinary write: pieces (each inside one stripe unit) are appended to @ne from index *nne,
 * at most @max in all. Returns the end of the allocated prefix (b when everything got
 * space; less when space or @max ran out) or -ENOMEM. The pieces are not logged; free them
 * with alloc_put() if they never are. Caller holds ino->iolock exclusively.
 */
int64_t fs_alloc_blocks(struct fs *fs, struct inode *ino, uint64_t a, uint64_t b,
			struct newext *ne, size_t *nne, size_t max);
/*
 * Store the checksums of the blocks that the (completed) member writes @ops wrote, from
 * op->buf, and mark their members dirty for the next commit. Returns 0 or -EIO/-ENOMEM.
 */
int fs_csum_store(struct fs *fs, const struct uring_op *ops, size_t n);
/*
 * Note file blocks [a, b) as allocated by records of journal epoch @epoch, so that writes
 * rewrite them in place while that epoch lasts. Caller holds ino->iolock exclusively and
 * meta.lock, with those records already logged.
 */
void fs_fresh_add(struct inode *ino, uint64_t a, uint64_t b, uint64_t epoch);

/* atime.c: access times */
/*
 * A read of @ino (file data, a directory listing or a placement) reached the daemon:
 * update its atime in memory as fs.atime says (relatime: only when the atime is not later
 * than mtime or ctime, or is a day old). The change is logged by the next commit, never
 * written on its own. Returns 1 if the atime changed.
 */
int fs_accessed(struct fs *fs, uint64_t ino);
/* Would a read of @ino now change its atime? (An open then drops the file's cached pages,
 * so that the read reaches the daemon.) */
int fs_atime_due(struct fs *fs, uint64_t ino);
/* journal.before_take: log the atime changes made since the last commit. Caller holds
 * meta.lock. */
void fs_atime_log(void *fs);

/* mode.c: switching between read-only and read-write while mounted (remount) */
/*
 * Go read-only: write what write-behind holds, stop accepting changes (-EROFS), commit.
 * Or read-write again; a filesystem mounted read-only has its members reopened for
 * writing, its log compacted, write-behind and the periodic commit started, as a
 * read-write mount does. Returns 0 or -errno with a one-line reason in @err.
 */
int fs_set_ro(struct fs *fs, int ro, char *err, size_t errlen);

/* falloc.c: fallocate(2) */
/*
 * fallocate(2) on regular file @ino. @mode 0 or FALLOC_FL_KEEP_SIZE reserves the blocks of
 * [off, off + len) that have none (zeroed on the members, with their checksums), mode 0
 * also extending the size to off + len; FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE frees
 * the whole blocks inside the range and zeroes the bytes of the partial ones;
 * FALLOC_FL_ZERO_RANGE does the same, and without KEEP_SIZE then extends the size to
 * off + len (the zeroed whole blocks are holes, not reserved). Returns 0, -EINVAL (len 0,
 * or an offset or length that does not fit off_t), -EFBIG (past the largest file),
 * -EOPNOTSUPP (another mode, PUNCH_HOLE without KEEP_SIZE or with ZERO_RANGE), -EISDIR,
 * -ENODEV (not a regular file), -ENOENT, -EROFS, -ENOSPC (nothing reserved then), -EIO or
 * -ENOMEM.
 * Like a write, any of these first drops what fs_killpriv() says for @c.
 */
int fs_fallocate(struct fs *fs, const struct fs_ctx *c, uint64_t ino, int mode, uint64_t off,
		 uint64_t len);

/* txn.c: one metadata change at a time */
/*
 * Take meta.lock with room for @need bytes of log records (compacting if needed).
 * @grows: the operation adds metadata, and must leave the deletion reserve free.
 * Returns 0 (locked) or -ENOSPC/-EROFS/-EIO (not locked).
 */
int fs_begin(struct fs *fs, size_t need, int grows);
/* The log bytes kept for deletions (and atime records); caller holds meta.lock. */
size_t fs_log_reserve(const struct fs *fs);
void fs_end(struct fs *fs);
int64_t fs_now(void);

#endif
