// SPDX-License-Identifier: MIT
/* main.c - the dmafs daemon: options, member verification, mount, FUSE loop. */
#include "mountrec.h"
#include "ops.h"
#include "p2p.h"
#include "pipeline.h"
#include "place.h"
#include "placeq.h"
#include "remount.h"
#include "scan.h"
#include "utab.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <unistd.h>

#define FUSE_MAX_IO (1u << 20)

struct options {
	char *members;
	char *mountpoint;
	char *user; /* user=NAME from mount(8): recorded in utab, for umount(8) */
	unsigned commit, threads, readahead_kb, staging_mb, writebehind_mb, copy_delay_us;
	unsigned place_threads, place_queue, reg_max, reg_max_user;
	char *reg_bytes, *reg_bytes_user;
	int writeback, verify_place, wronly_cache, verbose, no_handles;
	char *p2p, *gpu_setup;
	int ro, foreground, debug, help, version;
	int atime, nodiratime, sync, dirsync; /* fs.atime (FS_ATIME_*), ... */
	int user_mount; /* user, users, owner or group: a mount for users, nosuid,nodev */
};

enum {
	KEY_DISCARD, KEY_RO, KEY_RW, KEY_HELP, KEY_VERSION, KEY_FG, KEY_DEBUG,
	KEY_NOATIME, KEY_ATIME, KEY_RELATIME, KEY_STRICTATIME, KEY_NOSTRICTATIME,
	KEY_NODIRATIME, KEY_DIRATIME, KEY_SYNC, KEY_ASYNC, KEY_DIRSYNC, KEY_USER_MOUNT
};

#define OPT(t, p) { t, offsetof(struct options, p), 1 }
static const struct fuse_opt opt_spec[] = {
	OPT("commit=%u", commit),
	OPT("threads=%u", threads),
	OPT("readahead_kb=%u", readahead_kb),
	OPT("staging_mb=%u", staging_mb),
	OPT("copy_delay_us=%u", copy_delay_us),
	OPT("writebehind_mb=%u", writebehind_mb),
	OPT("place_threads=%u", place_threads),
	OPT("place_queue=%u", place_queue),
	OPT("reg_max=%u", reg_max),
	OPT("reg_max_user=%u", reg_max_user),
	OPT("reg_bytes=%s", reg_bytes),
	OPT("reg_bytes_user=%s", reg_bytes_user),
	OPT("p2p=%s", p2p),
	OPT("gpu_setup=%s", gpu_setup),
	OPT("user=%s", user),
	OPT("writeback_cache", writeback),
	OPT("verify_place", verify_place),
	OPT("wronly_cache", wronly_cache),
	OPT("no_handles", no_handles),
	OPT("verbose", verbose),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("rw", KEY_RW),
	FUSE_OPT_KEY("-f", KEY_FG),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* words fstab and mount(8) pass that mean nothing to a FUSE mount here */
	FUSE_OPT_KEY("defaults", KEY_DISCARD),
	FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_USER_MOUNT),
	FUSE_OPT_KEY("nouser", KEY_DISCARD),
	FUSE_OPT_KEY("users", KEY_USER_MOUNT),
	FUSE_OPT_KEY("owner", KEY_USER_MOUNT),
	FUSE_OPT_KEY("group", KEY_USER_MOUNT),
	FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", KEY_DISCARD),
	/* access times: the daemon keeps them (the kernel leaves a FUSE inode's atime alone) */
	FUSE_OPT_KEY("atime", KEY_ATIME),
	FUSE_OPT_KEY("noatime", KEY_NOATIME),
	FUSE_OPT_KEY("relatime", KEY_RELATIME),
	FUSE_OPT_KEY("norelatime", KEY_DISCARD), /* relatime stays, as in mount(2) */
	FUSE_OPT_KEY("strictatime", KEY_STRICTATIME),
	FUSE_OPT_KEY("nostrictatime", KEY_NOSTRICTATIME),
	FUSE_OPT_KEY("nodiratime", KEY_NODIRATIME),
	FUSE_OPT_KEY("diratime", KEY_DIRATIME),
	FUSE_OPT_KEY("lazytime", KEY_DISCARD), /* atime changes always wait for a commit */
	FUSE_OPT_KEY("nolazytime", KEY_DISCARD),
	/* the daemon acts on these; libfuse passes them on as kernel mount flags too */
	FUSE_OPT_KEY("sync", KEY_SYNC),
	FUSE_OPT_KEY("async", KEY_ASYNC),
	FUSE_OPT_KEY("dirsync", KEY_DIRSYNC),
	FUSE_OPT_KEY("default_permissions", KEY_DISCARD), /* always on */
	FUSE_OPT_END
};

static double attr_timeout = 1.0, entry_timeout = 1.0;

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct options *o = data;

	switch (key) {
	case KEY_DISCARD:
		return 0;
	case KEY_USER_MOUNT:
		o->user_mount = 1;
		return 0;
	case KEY_ATIME: /* undoes noatime */
		if (o->atime == FS_ATIME_NEVER)
			o->atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_NOATIME:
		o->atime = FS_ATIME_NEVER;
		return 0;
	case KEY_RELATIME:
		o->atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_STRICTATIME:
		o->atime = FS_ATIME_STRICT;
		return 0;
	case KEY_NOSTRICTATIME:
		if (o->atime == FS_ATIME_STRICT)
			o->atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_NODIRATIME:
		o->nodiratime = 1;
		return 0;
	case KEY_DIRATIME:
		o->nodiratime = 0;
		return 0;
	case KEY_SYNC:
		o->sync = 1;
		return 1;
	case KEY_ASYNC:
		o->sync = 0;
		return 1;
	case KEY_DIRSYNC:
		o->dirsync = 1;
		return 1;
	case KEY_RO:
		o->ro = 1;
		return 1; /* also a kernel mount option */
	case KEY_RW:
		o->ro = 0;
		return 0;
	case KEY_FG:
		o->foreground = 1;
		return 0;
	case KEY_DEBUG:
		o->debug = o->foreground = 1;
		return 0;
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_VERSION:
		o->version = 1;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (!o->members) {
			o->members = strdup(arg);
			return 0;
		}
		if (!o->mountpoint) {
			o->mountpoint = realpath(arg, NULL);
			if (!o->mountpoint) {
				fprintf(stderr, "dmafs: mount point %s: %s\n", arg, strerror(errno));
				return -1;
			}
			return 0;
		}
		fprintf(stderr, "dmafs: unexpected argument '%s'\n", arg);
		return -1;
	case FUSE_OPT_KEY_OPT:
		if (!strncmp(arg, "attr_timeout=", 13)) {
			attr_timeout = atof(arg + 13);
			return 0;
		}
		if (!strncmp(arg, "entry_timeout=", 14)) {
			entry_timeout = atof(arg + 14);
			return 0;
		}
		return 1;
	}
	return 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dmafs [-f] [-d] [-o OPTION[,OPTION...]] MEMBER[,MEMBER...] MOUNTPOINT\n"
		"       dmafs [-f] [-d] [-o OPTION[,OPTION...]] LABEL=LABEL|UUID=UUID MOUNTPOINT\n"
		"\n"
		"Mount the dmafs filesystem made of MEMBERs (in order) at MOUNTPOINT, or the one\n"
		"with that label or UUID, its members found on the block devices (also spelled\n"
		"dmafs:LABEL=LABEL and dmafs:UUID=UUID, which mount(8) and fstab pass on as they are).\n"
		"  -f                  stay in the foreground\n"
		"  -d                  debug output (implies -f)\n"
		"  -o ro               read-only\n"
		"  -o allow_other      let other users access the mount\n"
		"  -o commit=SECONDS   metadata commit interval (default 5)\n"
		"  -o threads=N        FUSE worker threads (default: 2 per CPU, 4 to 16)\n"
		"  -o readahead_kb=N   kernel readahead on the mount (default 16384)\n"
		"  -o staging_mb=N     pinned staging memory per GPU for placements (default 64)\n"
		"  -o copy_delay_us=N  a staged piece waits N us before its copy to the GPU\n"
		"                      (default 300; 0: at once)\n"
		"  -o gpu_setup=mount|first_use  set up every GPU's staging in the background\n"
		"                      at mount (default), or at its first placement\n"
		"  -o p2p=auto|off|force  cuFile direct path: when nvidia-fs is loaded (auto),\n"
		"                      never, or always (testing: cuFile compatibility mode)\n"
		"  -o attr_timeout=S, entry_timeout=S   kernel cache timeouts (default 1)\n"
		"  -o place_threads=N  threads that run registrations and placements, apart\n"
		"                      from the FUSE workers (default: as many as threads)\n"
		"  -o place_queue=N    requests of one user that may wait for them (default 256)\n"
		"  -o reg_max=N, reg_max_user=N  registrations on the mount (default 8192) and\n"
		"                      per user (default 4096)\n"
		"  -o reg_bytes=SIZE, reg_bytes_user=SIZE  host buffer bytes registered on the\n"
		"                      mount (default twice the RAM) and per user (default the RAM)\n"
		"  -o verify_place     placements check every block's checksum too, in host\n"
		"                      memory (costs CPU; the GPU direct path is not used)\n"
		"  -o writebehind_mb=N memory for writes accepted before they reach the members\n"
		"                      (default 256; 0: every write waits for its members)\n"
		"  -o verbose          log the daemon's own debugging messages (placement\n"
		"                      pipeline statistics among them) without -d's trace\n"
		"  -o wronly_cache     write-only opens go through the kernel's page cache too\n"
		"                      (by default they bypass it: one copy fewer per write)\n"
		"  -o writeback_cache  let the kernel batch writes in its page cache (faster\n"
		"                      buffered writes; unsynced data dies with the daemon)\n"
		"  -o no_handles       file handles of inodes the kernel has cached only (for\n"
		"                      an overlayfs lower layer; see dmafs(8))\n"
		"  -o fsname=NAME      source shown in /proc/mounts\n"
		"  -o user=NAME        the user mount(8) mounts for: recorded in\n"
		"                      /run/mount/utab, where umount(8) looks for it\n"
		"  -o relatime|strictatime|noatime, nodiratime  when reads update access\n"
		"                      times (default relatime)\n"
		"  -o sync, dirsync    every change (sync) or every directory change (dirsync)\n"
		"                      is committed to the members before it returns\n"
		"  -o nosuid, nodev, noexec, dev, suid, exec  kernel mount flags (root's mounts\n"
		"                      are suid,dev, as a kernel filesystem's; mounts by other\n"
		"                      users and with user, users, owner, group are nosuid,nodev)\n"
		"\n"
		"dmafs --remount [-v] -o OPTIONS MOUNTPOINT  (run by mount -o remount through\n"
		"mount.dmafs) changes ro/rw and the options above of a running mount.\n"
		"See dmafs(8).\n");
}

/*
 * Direct writes invalidate other descriptors' cached pages of the range only since Linux
 * 6.6 ("fuse: invalidate page cache pages before direct write"): before that, write-only
 * opens keep the page cache, or a reader could see stale data.
 */
static int kernel_at_least(int major, int minor)
{
	struct utsname u;
	int a = 0, b = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return 0;
	return a > major || (a == major && b >= minor);
}

static const struct fuse_lowlevel_ops ops;
static int notify_fd = -1; /* the waiting parent, until the mount answers */

/*
 * What the daemon notes about a mount that works but is not all it could be (written data
 * copied twice, no POSIX ACLs, fewer registrations): not failures, so a mount prints
 * nothing. They are info messages, which wait for the log (util_log_hold_info: syslog once
 * detached; stderr at once with -f or -o verbose), and go into the mount record, where
 * dmafs-check shows them.
 */
#define NOTES_MAX 8
static struct {
	int n;
	char text[NOTES_MAX][320];
} notes;

static struct mountrec rec;
static char rec_dir[PATH_MAX];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	if (notes.n == NOTES_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(notes.text[notes.n], sizeof(notes.text[0]), fmt, ap);
	va_end(ap);
	log_info("%s", notes.text[notes.n]);
	notes.n++;
}

/* atexit: a daemon that exits before it detached prints the info messages it held. */
static void release_held(void)
{
	util_log_hold_info(0);
}

/* The notes into the mount record's notice, a line each. */
static void notes_to_record(void)
{
	size_t len = 0;

	rec.notice[0] = '\0';
	for (int i = 0; i < notes.n && len < sizeof(rec.notice); i++)
		len += snprintf(rec.notice + len, sizeof(rec.notice) - len, "%s\n", notes.text[i]);
}

/* The record rewritten with the notes: before the mount is reported up, so that a
 * dmafs-check right after the mount command finds them. */
static void notes_record(void)
{
	if (rec.pid && notes.n) {
		notes_to_record();
		mountrec_write(rec_dir, &rec);
	}
}


/*
 * Detach like a daemon, but keep the parent until the kernel's INIT has been answered,
 * so "dmafs ... && ls MNT" works and every failure up to then reaches the terminal.
 */
static int detach(void)
{
	int p[2], status;
	pid_t pid;
	char c;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &c, 1) == 1)
			_exit(0);
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status))
			_exit(WEXITSTATUS(status));
		_exit(1);
	}
	close(p[0]);
	notify_fd = p[1];
	setsid();
	return 0;
}

static void mount_ready(void)
{
	int fd;

	if (notify_fd < 0)
		return;
	util_log_to_syslog(1);
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	if (chdir("/") < 0) { /* keep no directory busy */ }
	if (write(notify_fd, "1", 1) != 1) { /* parent gone: nothing to tell */ }
	close(notify_fd);
	notify_fd = -1;
}

static int want_writeback, want_handles;
static const char *ra_mnt;
static unsigned ra_kb;
static void set_readahead(const char *mnt, unsigned kb);

/* The kernel caps the mount's readahead when it processes our INIT reply, which is sent
 * after op_init returns: raise it from a short-lived thread once that is done. */
static void *readahead_thread(void *arg)
{
	usleep(200000);
	set_readahead(ra_mnt, ra_kb);
	return NULL;
}

/*
 * NULL when this process can make a pipe of @bytes, else why not (static text, or
 * a message in a static buffer).
 */
static const char *pipe_fits(size_t bytes)
{
	static char why[240];
	long max = -1;
	int fd[2], got, err;
	FILE *f;

	if (pipe2(fd, O_CLOEXEC))
		return "no pipe could be made";
	got = fcntl(fd[0], F_SETPIPE_SZ, (int)bytes);
	err = errno;
	close(fd[0]);
	close(fd[1]);
	if (got >= (int)bytes)
		return NULL;
	f = fopen("/proc/sys/fs/pipe-max-size", "r");
	if (f) {
		if (fscanf(f, "%ld", &max) != 1)
			max = -1;
		fclose(f);
	}
	if (got < 0 && err == EPERM && max >= 0 && max < (long)bytes)
		snprintf(why, sizeof(why),
			 "a pipe of %zu bytes is needed, fs.pipe-max-size is %ld and the daemon "
			 "lacks CAP_SYS_RESOURCE; sysctl fs.pipe-max-size=2097152 enables it",
			 bytes, max);
	else
		snprintf(why, sizeof(why), "a pipe of %zu bytes is needed and could not be made: %s",
			 bytes, got < 0 ? strerror(err) : "the kernel gave a smaller one");
	return why;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	const char *splice_why;
	pthread_t t;

	conn->max_write = FUSE_MAX_IO;
	conn->max_readahead = FUSE_MAX_IO;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	/*
	 * Written data arrives through a pipe (spliced from /dev/fuse: the writer's pages are
	 * referenced, not copied) and is read from it once, into write-behind's buffer. Without
	 * it the kernel copies the data into libfuse's buffer and we copy it again. Needs a pipe
	 * of 1 MiB + a page, beyond the default fs.pipe-max-size: CAP_SYS_RESOURCE may grow
	 * one that far, or the administrator raises the limit. libfuse would fall back to
	 * plain reads without a word when it cannot, so we find out first.
	 */
	splice_why = !(conn->capable & FUSE_CAP_SPLICE_READ) ? "the kernel does not offer it"
		     : getenv("DMAFS_NO_SPLICE")		 ? "DMAFS_NO_SPLICE is set"
								 : pipe_fits(FUSE_MAX_IO + 4096);
	if (!splice_why)
		conn->want |= FUSE_CAP_SPLICE_READ;
	else
		note("written data is copied twice on its way in (no splice from /dev/fuse: %s)",
		     splice_why);
	/* the kernel's page cache is write-through unless writeback_cache is asked for */
	if (want_writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		ops_opts.writeback_cache = 1;
	} else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/*
	 * The kernel drops set-user-ID and set-group-ID itself; the daemon adds what its rule
	 * lacks (killpriv.c). libfuse 3.14 asks for HANDLE_KILLPRIV but never sends it; a
	 * later one would, and the kernel would then leave chown(2) to a daemon that cannot
	 * tell it from overlayfs's copy-up.
	 */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/*
	 * File handles (open_by_handle_at, NFS export, fanotify): the kernel turns one whose
	 * inode it no longer caches back into it by a lookup of "." (and of ".." for a
	 * directory's parent), and checks the generation number (fs_lookup).
	 */
	if (want_handles && (conn->capable & FUSE_CAP_EXPORT_SUPPORT))
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/*
	 * POSIX ACLs: the kernel enforces them and caches them, we keep them, keep the mode in
	 * step and apply default ACLs to new inodes, which needs the umask unapplied
	 * (DONT_MASK: the kernel passes it along, and we apply it where no default ACL is).
	 */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		ops_fs->acl = 1;
	} else {
		note("POSIX ACLs are off: the kernel does not offer FUSE_POSIX_ACL and FUSE_DONT_MASK");
	}
	if (ra_mnt && pthread_create(&t, NULL, readahead_thread, NULL) == 0)
		pthread_detach(t);
	notes_record();
	mount_ready();
}

/*
 * The session has ended: libfuse calls this once, from fuse_session_destroy (a plain FUSE
 * mount gets no FUSE_DESTROY from the kernel) or on FUSE_DESTROY. Make everything durable
 * here; fs_unmount then finds it done.
 */
static void op_destroy(void *userdata)
{
	if (ops_fs)
		fs_finish(ops_fs);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write_buf = op_write_buf,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.fallocate = op_fallocate,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.ioctl = op_ioctl,
};

/* Raise the kernel readahead of our mount: the bdi is named after the mount's st_dev,
 * read from mountinfo (a stat of the mount point would wait for the loop we have not
 * started yet). */
static void set_readahead(const char *mnt, unsigned kb)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], dev[64] = "", path[PATH_MAX];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char mp[4096], d[64];

		if (sscanf(line, "%*s %*s %63s %*s %4095s", d, mp) == 2 && !strcmp(mp, mnt))
			snprintf(dev, sizeof(dev), "%s", d); /* the last match is the newest */
	}
	fclose(f);
	if (!*dev)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%u\n", kb) < 0 || fclose(f) != 0) {
		log_info("could not set readahead to %u KiB via %s (%s); sequential reads may be slower",
			 kb, path, strerror(errno));
		if (f)
			fclose(f);
	}
}

/*
 * What umount.dmafs finds this daemon by (mountrec.h), and the utab marker that makes
 * umount(8) run umount.dmafs (utab.c). Without them the mount works, but umount returns
 * before the daemon has finished: say so, do not fail. Runs before the loop answers INIT,
 * so nothing here may touch the mount itself (a stat of it would wait forever): only
 * mountinfo and files under /run (libmount 2.38 does not look at the mount point).
 */
static void publish(const char *mnt, const char *user, const char *members)
{
	struct mountrec_mnt m;
	int ret;

	if (mountrec_find_mount(mnt, &m) || strcmp(m.fstype, "fuse.dmafs")) {
		log_warn("%s: this mount is not in /proc/self/mountinfo; umount will not wait for the daemon",
			 mnt);
		return;
	}
	rec.pid = getpid();
	rec.major = m.major;
	rec.minor = m.minor;
	snprintf(rec.mountpoint, sizeof(rec.mountpoint), "%s", mnt);
	snprintf(rec.state, sizeof(rec.state), "serving");
	snprintf(rec.members, sizeof(rec.members), "%s", members);
	notes_to_record();
	mountrec_dir(geteuid(), rec_dir, sizeof(rec_dir));
	mountrec_prune(rec_dir, 60);
	ret = mountrec_proc(rec.pid, &rec.start, NULL, 0) == 1 ? mountrec_write(rec_dir, &rec) : -EIO;
	if (ret) {
		log_warn("cannot write %s/%d (%s); umount will not wait for the daemon", rec_dir,
			 (int)rec.pid, strerror(-ret));
		rec.pid = 0;
		return;
	}
	remount_major = m.major;
	remount_minor = m.minor;
	remount_dev_known = 1;
	if (utab_add_user(m.source, mnt, user))
		log_warn("cannot add %s to /run/mount/utab; a plain umount will not run umount.dmafs (umount -c will)",
			 mnt);
}

/* The last act: the final state, for umount.dmafs to report. */
static void unpublish(int ret, const char *why)
{
	if (!rec.pid)
		return;
	utab_prune();
	snprintf(rec.state, sizeof(rec.state), "%s", ret ? "failed" : "done");
	snprintf(rec.error, sizeof(rec.error), "%s", ret ? why : "");
	mountrec_write(rec_dir, &rec);
}

static char *escape_commas(const char *s)
{
	char *out = malloc(2 * strlen(s) + 1), *p = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		if (*s == ',' || *s == '\\')
			*p++ = '\\';
		*p++ = *s;
	}
	*p = '\0';
	return out;
}

/*
 * The member list with absolute paths, for the mount's source (tools find members there)
 * and the mount record; with @esc, a comma or backslash in a path is escaped with a
 * backslash, so that the list splits back into its paths.
 */
static const char *members_abs(struct member *ms, int n, int esc)
{
	static char list[8192];
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		char *abs = realpath(ms[i].path, NULL);
		char *p = esc ? escape_commas(abs ? abs : ms[i].path) : NULL;

		len += snprintf(list + len, sizeof(list) - MIN(len, sizeof(list)), "%s%s", i ? "," : "",
				p ? p : abs ? abs : ms[i].path);
		free(abs);
		free(p);
		if (len >= sizeof(list))
			return "dmafs";
	}
	return list;
}

static int fsname_given(const struct fuse_args *args)
{
	for (int i = 0; i < args->argc; i++)
		if (strstr(args->argv[i], "fsname="))
			return 1;
	return 0;
}

/*
 * FUSE worker threads when threads= is not given: two per CPU this process may run on
 * (one works while the other waits for its member reads), at least 4 and at most 16.
 * Measured on a 2-CPU machine reading a file back with the page cache dropped: 16
 * threads there gave a median 3.21 GB/s against 3.63 with 4, the same writes; machines
 * of 8 CPUs and more keep 16.
 */
#define THREADS_AUTO UINT_MAX

static unsigned default_threads(void)
{
	cpu_set_t set;
	long n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n <= 2 ? 4 : n >= 8 ? 16 : (unsigned)(2 * n);
}

/*
 * The placement limits from the options, checked. Every client process with
 * registrations holds one pidfd in the daemon, so reg_max must fit the descriptor limit,
 * raised to its hard limit here, with room kept for everything else the daemon opens
 * (members, rings, the FUSE device). Returns 0 or -1 (message printed).
 */
#define FD_RESERVE 512

static int limits(const struct options *o, struct place_limits *l)
{
	uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	*l = (struct place_limits){ .regs = o->reg_max ? o->reg_max : 8192,
				    .regs_user = o->reg_max_user ? o->reg_max_user : 4096,
				    .bytes = 2 * ram, .bytes_user = ram };
	if ((o->reg_bytes && (util_parse_size(o->reg_bytes, &l->bytes) || !l->bytes)) ||
	    (o->reg_bytes_user && (util_parse_size(o->reg_bytes_user, &l->bytes_user) ||
				   !l->bytes_user))) {
		fprintf(stderr, "dmafs: reg_bytes and reg_bytes_user take a size above 0 (such as 512M, 64G)\n");
		return -1;
	}
	if (l->regs > 1u << 20 || l->regs_user > l->regs) {
		fprintf(stderr, "dmafs: reg_max must be 1..1048576 and reg_max_user at most reg_max\n");
		return -1;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)l->regs + FD_RESERVE) {
		unsigned fit = rl.rlim_cur > 2 * FD_RESERVE ? (unsigned)(rl.rlim_cur - FD_RESERVE) : FD_RESERVE;

		/* a number asked for and not given is a warning; the default, a note */
		if (o->reg_max)
			fprintf(stderr, "dmafs: reg_max=%u does not fit the descriptor limit (ulimit -n %llu, %d kept for the filesystem); using reg_max=%u\n",
				l->regs, (unsigned long long)rl.rlim_cur, FD_RESERVE, fit);
		else
			note("the default reg_max=%u does not fit the descriptor limit (ulimit -n %llu, %d kept for the filesystem); using reg_max=%u",
			     l->regs, (unsigned long long)rl.rlim_cur, FD_RESERVE, fit);
		l->regs = fit;
		l->regs_user = MIN(l->regs_user, fit);
	}
	return 0;
}

/* @s up to @end (or its end when NULL) with control characters and backslashes escaped. */
static void put_escaped(FILE *f, const char *s, const char *end)
{
	for (const unsigned char *c = (const unsigned char *)s; *c && (!end || c < (const unsigned char *)end); c++) {
		if (*c == '\n')
			fputs("\\n", f);
		else if (*c == '\t')
			fputs("\\t", f);
		else if (*c == '\\')
			fputs("\\\\", f);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(f, "\\x%02x", *c);
		else
			fputc(*c, f);
	}
}

/*
 * A control character (0x01-0x1f, 0x7f) in an argument would split a line of a log or of
 * the mount table, or reach a terminal as an escape sequence: refuse it before anything
 * runs, naming the option (one comma-separated piece of a -o argument) or the argument.
 * mount.dmafs refuses the same. Returns 0 or 1 (refused, said on stderr).
 */
static int refuse_control(int argc, char *argv[])
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *c = a, *start, *end;
		int opt = i > 1 && !strcmp(argv[i - 1], "-o");

		while (*c && (unsigned char)*c >= 0x20 && *c != 0x7f)
			c++;
		if (!*c)
			continue;
		if (!strncmp(a, "-o", 2) && a[2])
			a += 2, opt = 1;
		start = a;
		end = NULL;
		if (opt) {
			/* the comma-separated piece with the character in it */
			for (const char *p = a; p < c; p++)
				if (*p == ',')
					start = p + 1;
			end = strchr(c, ',');
		}
		fprintf(stderr, "dmafs: %s \"", opt ? "option" : "argument");
		put_escaped(stderr, start, end);
		fprintf(stderr, "\" contains a control character: refused\n");
		return 1;
	}
	return 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct options o = { .commit = 5, .threads = THREADS_AUTO, .readahead_kb = 16384, .staging_mb = 64,
			     .copy_delay_us = PIPELINE_COPY_DELAY_US, .writebehind_mb = 256 };
	struct fuse_session *se = NULL;
	struct fuse_loop_config *cfg;
	struct place_limits lim;
	struct member *ms = NULL;
	static struct fs fs;
	char err[1024], *opt, *member_list = NULL;
	const char *name_value;
	size_t name_len;
	int n, named, ret = 1;

	if (refuse_control(argc, argv))
		return 1;
	if (argc > 1 && !strcmp(argv[1], "--remount"))
		return remount_main(argc - 1, argv + 1);
	if (fuse_opt_parse(&args, &o, opt_spec, opt_proc) == -1)
		return 1;
	if (o.help) {
		usage(stdout);
		return 0;
	}
	if (o.version) {
		printf("dmafs %s (on-disk format %d)\n", PACKAGE_VERSION, FMT_VERSION);
		return 0;
	}
	if (!o.members || !o.mountpoint) {
		usage(stderr);
		return 1;
	}
	/*
	 * A mount that works prints nothing: info messages (notes, the engine's) wait for the
	 * log until the daemon has detached, or reach stderr if the mount fails. -f keeps
	 * stderr as the log, -o verbose wants them on the terminal.
	 */
	if (!o.foreground && !o.verbose) {
		util_log_hold_info(1);
		atexit(release_held);
	}
	if (o.threads == THREADS_AUTO)
		o.threads = default_threads();
	if (!o.place_threads)
		o.place_threads = o.threads;
	if (!o.place_queue)
		o.place_queue = PLACEQ_PER_USER;
	if (o.place_threads > 1024 || o.place_queue > 65536) {
		fprintf(stderr, "dmafs: place_threads must be 1..1024 and place_queue 1..65536\n");
		return 1;
	}
	if (limits(&o, &lim))
		return 1;
	if (o.threads < 1 || o.threads > 1024 || o.commit < 1 || o.commit > 3600 ||
	    o.staging_mb < 4 || o.staging_mb > 65536 || o.writebehind_mb > 65536 ||
	    o.copy_delay_us > 100000) {
		fprintf(stderr, "dmafs: threads must be 1..1024, commit 1..3600 seconds, staging_mb 4..65536, writebehind_mb 0..65536, copy_delay_us 0..100000\n");
		return 1;
	}
	if (o.debug || o.verbose)
		util_log_set_level(LOG_LVL_DEBUG);
	if (o.p2p && strcmp(o.p2p, "auto") && strcmp(o.p2p, "off") && strcmp(o.p2p, "force")) {
		fprintf(stderr, "dmafs: p2p=%s: want auto, off or force\n", o.p2p);
		return 1;
	}
	if (o.gpu_setup && strcmp(o.gpu_setup, "mount") && strcmp(o.gpu_setup, "first_use")) {
		fprintf(stderr, "dmafs: gpu_setup=%s: want mount or first_use\n", o.gpu_setup);
		return 1;
	}
	if (o.p2p && !strcmp(o.p2p, "off"))
		p2p_configure(-1);
	else if (o.p2p && !strcmp(o.p2p, "force"))
		p2p_configure(1);
	if (!o.foreground && detach()) {
		fprintf(stderr, "dmafs: cannot start the daemon: %s\n", strerror(errno));
		return 1;
	}
	n = members_open(o.members, o.ro, &ms, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "dmafs: %s\n", err);
		return 1;
	}
	for (int i = 0; i < n; i++)
		if (ms[i].sb_from_copy)
			log_warn("member %d (%s): primary superblock damaged; using the copy at the end of the member%s",
				 i, ms[i].path, o.ro ? "" : " (primary rewritten)");
	ret = fs_mount(&fs, ms, n, o.ro, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "dmafs: %s\n", err[0] ? err : strerror(-ret));
		members_close(ms, n);
		return 1;
	}
	ret = 1;
	for (int i = 0; i < n && !o.ro; i++)
		if (ms[i].sb_from_copy && member_write_sb(&ms[i]))
			log_warn("member %d (%s): could not rewrite the primary superblock", i, ms[i].path);
	ops_fs = &fs;
	ops_opts.attr_timeout = attr_timeout;
	ops_opts.entry_timeout = entry_timeout;
	ops_opts.wronly_direct = !o.wronly_cache && !o.writeback && kernel_at_least(6, 6);
	fs.atime = o.atime;
	fs.nodiratime = o.nodiratime;
	fs.sync = o.sync;
	fs.dirsync = o.dirsync;
	fs.commit_interval = o.commit;
	fs.writebehind_mb = o.writebehind_mb;

	/*
	 * The mount's source in /proc/mounts, unless fsname= was given: the member list, or for
	 * a filesystem named by label or UUID the name as given, in the dmafs:LABEL= spelling
	 * that fstab uses: mount -a finds its fstab line mounted only when the two agree, and
	 * umount dmafs:LABEL=... finds the mount. The members are in the mount record.
	 */
	fuse_opt_add_arg(&args, "-osubtype=dmafs,default_permissions");
	named = scan_source_kind(o.members, &name_value, &name_len) > 0;
	member_list = strdup(members_abs(ms, n, 1));
	if (!member_list)
		return 1;
	if (named)
		log_debug("%s: members %s", o.members, member_list);
	if (!fsname_given(&args)) {
		char *esc = escape_commas(named ? o.members : members_abs(ms, n, 0));

		if (!esc || asprintf(&opt, "-ofsname=%s%s",
				     named && strncmp(o.members, "dmafs:", 6) ? "dmafs:" : "", esc) < 0)
			return 1;
		fuse_opt_add_arg(&args, opt);
		free(esc);
	}
	/*
	 * A kernel filesystem mounted by root is suid,dev unless told otherwise; libfuse makes
	 * every mount nosuid,nodev, and mount(8) passes neither suid nor dev (its defaults): a
	 * root mount from fstab could never be suid,dev. They come first, so a nosuid or nodev
	 * given wins. A user mount (user, users, owner, group, user=NAME) keeps nosuid,nodev, as
	 * does every mount by another user (fusermount3 forces them).
	 */
	if (geteuid() == 0 && !o.user_mount && !o.user)
		fuse_opt_insert_arg(&args, 1, "-osuid,dev");
	if (o.debug)
		fuse_opt_add_arg(&args, "-d");
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		goto out_fs;
	if (fuse_set_signal_handlers(se))
		goto out_session;
	if (fuse_session_mount(se, o.mountpoint)) {
		fprintf(stderr, "dmafs: cannot mount on %s (see the message above)\n", o.mountpoint);
		goto out_signals;
	}
	publish(o.mountpoint, o.user, member_list);
	/* the kernel mount's atime flags say what the daemon does (mount -o remount passes
	 * them back); the path walk stops at the mount's root, so this asks the daemon nothing */
	if ((o.atime != FS_ATIME_RELATIME || o.nodiratime) &&
	    (ret = remount_set_atime(o.mountpoint, o.atime, o.nodiratime)))
		note("%s: the kernel mount's flags do not show the atime options (mount_setattr: %s); the daemon applies them all the same",
		     o.mountpoint, strerror(-ret));
	ret = 1;
	want_writeback = o.writeback;
	want_handles = !o.no_handles;
	fs.verify_place = o.verify_place;
	ra_mnt = o.mountpoint;
	ra_kb = o.readahead_kb;
	pipeline_set_copy_delay(o.copy_delay_us);
	if (place_init(&fs, &lim, (uint64_t)o.staging_mb << 20,
		       !o.gpu_setup || !strcmp(o.gpu_setup, "mount"))) {
		log_err("cannot start the placement service");
		goto out_unmount;
	}
	if ((ret = placeq_start(o.place_threads, o.place_queue))) {
		log_err("cannot start the placement threads: %s", strerror(-ret));
		ret = 1;
		goto out_unmount;
	}
	log_debug("placement: %u threads; at most %u registrations (%u per user), %llu host bytes (%llu per user)",
		  o.place_threads, lim.regs, lim.regs_user, (unsigned long long)lim.bytes,
		  (unsigned long long)lim.bytes_user);
	if (!o.ro && (ret = wback_start(&fs, o.writebehind_mb))) {
		log_err("cannot start write-behind: %s", strerror(-ret));
		ret = 1;
		goto out_unmount;
	}
	fs.j.before_commit = wback_before_commit;
	fs.j.before_arg = &fs;
	fs.j.before_take = fs_atime_log;
	fs.j.take_arg = &fs;
	if (journal_start(&fs.j, o.commit)) {
		log_err("cannot start the commit thread");
		goto out_unmount;
	}
	cfg = fuse_loop_cfg_create();
	log_debug("serving FUSE requests with %u worker threads", o.threads);
	fuse_loop_cfg_set_max_threads(cfg, o.threads);
	fuse_loop_cfg_set_idle_threads(cfg, o.threads);
	ret = fuse_session_loop_mt(se, cfg) ? 1 : 0;
	fuse_loop_cfg_destroy(cfg);
out_unmount:
	placeq_stop(); /* before the session goes: the queued requests are answered */
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_fs:
	place_shutdown();
	if (fs_unmount(&fs))
		ret = 1;
	members_close(ms, n);
	unpublish(fs.finish_ret, fs.finish_err);
	fuse_opt_free_args(&args);
	free(member_list);
	return ret;
}
