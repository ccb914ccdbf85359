// SPDX-License-Identifier: MIT
/*
 * session.c - the daemon's life around libfuse: detaching, INIT (what the kernel is
 * asked for), the mount record and its notes, readahead, and the end of the session.
 */
#include "daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/utab.h"

#define FUSE_MAX_IO (1u << 20)

static void set_readahead(const char *mnt, unsigned kb);

/*
 * Direct writes invalidate other descriptors' cached pages of the range only since Linux
 * 6.6 ("fuse: invalidate page cache pages before direct write"): before that, write-only
 * opens keep the page cache, or a reader could see stale data.
 */
int daemon_kernel_at_least(int major, int minor)
{
	struct utsname u;
	int a = 0, b = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return 0;
	return a > major || (a == major && b >= minor);
}

/*
 * What the daemon notes about a mount that works but is not all it could be (written data
 * copied twice, no POSIX ACLs, fewer registrations): not failures, so a mount prints
 * nothing. They are info messages, which wait for the log (util_log_hold_info: syslog once
 * detached; stderr at once with -f or -o verbose), and go into the mount record, where
 * dmafs-check shows them.
 */

void daemon_note(struct daemon *d, const char *fmt, ...)
{
	va_list ap;

	if (d->nnotes == DAEMON_NOTES_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(d->notes[d->nnotes], sizeof(d->notes[0]), fmt, ap);
	va_end(ap);
	log_info("%s", d->notes[d->nnotes]);
	d->nnotes++;
}

/* atexit: a daemon that exits before it detached prints the info messages it held. */
void daemon_release_held(void)
{
	util_log_hold_info(0);
}

/* The notes into the mount record's notice, a line each. */
static void notes_to_record(struct daemon *d)
{
	size_t len = 0;

	d->rec.notice[0] = '\0';
	for (int i = 0; i < d->nnotes && len < sizeof(d->rec.notice); i++)
		len += snprintf(d->rec.notice + len, sizeof(d->rec.notice) - len, "%s\n", d->notes[i]);
}

/* The record rewritten with the notes: before the mount is reported up, so that a
 * dmafs-check right after the mount command finds them. */
static void notes_record(struct daemon *d)
{
	if (d->rec.pid && d->nnotes) {
		notes_to_record(d);
		mountrec_write(d->rec_dir, &d->rec);
	}
}

/*
 * Detach like a daemon, but keep the parent until the kernel's INIT has been answered,
 * so "dmafs ... && ls MNT" works and every failure up to then reaches the terminal.
 */
int daemon_detach(struct daemon *d)
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
	d->notify_fd = p[1];
	setsid();
	return 0;
}

static void mount_ready(struct daemon *d)
{
	int fd;

	if (d->notify_fd < 0)
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
	if (write(d->notify_fd, "1", 1) != 1) { /* parent gone: nothing to tell */ }
	close(d->notify_fd);
	d->notify_fd = -1;
}

/* The kernel caps the mount's readahead when it processes our INIT reply, which is sent
 * after op_init returns: raise it from a short-lived thread once that is done. */
static void *readahead_thread(void *arg)
{
	struct daemon *d = arg;

	usleep(200000);
	set_readahead(d->o.mountpoint, d->o.readahead_kb);
	return NULL;
}

/*
 * NULL when this process can make a pipe of @bytes, else why not (static text, or
 * a message in @why).
 */
static const char *pipe_fits(size_t bytes, char *why, size_t whylen)
{
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
		snprintf(why, whylen,
			 "a pipe of %zu bytes is needed, fs.pipe-max-size is %ld and the daemon "
			 "lacks CAP_SYS_RESOURCE; sysctl fs.pipe-max-size=2097152 enables it",
			 bytes, max);
	else
		snprintf(why, whylen, "a pipe of %zu bytes is needed and could not be made: %s",
			 bytes, got < 0 ? strerror(err) : "the kernel gave a smaller one");
	return why;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct daemon *d = container_of(userdata, struct daemon, srv);
	char why[240];
	const char *splice_why;
	pthread_t t;

	conn->max_write = FUSE_MAX_IO;
	conn->max_readahead = FUSE_MAX_IO;
	/*
	 * Readahead goes to us as asynchronous requests, at most max_background of them in
	 * flight for the whole mount (the kernel's default is 12). 64 held eight sequential
	 * readers to 9-10 GB/s on 8 members that give 26-30; 256 gives 12-14 (docs/benchmarks.md).
	 */
	conn->max_background = d->o.max_background;
	conn->congestion_threshold = d->o.max_background * 3 / 4;
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
								 : pipe_fits(FUSE_MAX_IO + 4096, why, sizeof(why));
	if (!splice_why)
		conn->want |= FUSE_CAP_SPLICE_READ;
	else
		daemon_note(d, "written data is copied twice on its way in (no splice from /dev/fuse: %s)",
		     splice_why);
	/* the kernel's page cache is write-through unless writeback_cache is asked for */
	if (d->o.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		d->srv.opts.writeback_cache = 1;
	} else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/*
	 * Asynchronous direct I/O (libfuse asks for it): one O_DIRECT call's pieces are sent
	 * all at once (16 MiB reads ran 8 times as fast, dmafs(8), sync_dio). Its cost is the
	 * kernel's: it drops a file's cached pages over an O_DIRECT write's range before
	 * sending it, and again afterwards only for a write it waited for, so after an aio
	 * or io_uring write completed asynchronously a buffered reader may keep old pages
	 * (xfstests generic/451; Linux 6.18 lacks the drop in fuse_aio_complete()). -o
	 * sync_dio turns it off for mounts that need that case exact.
	 */
	if (d->o.sync_dio)
		conn->want &= ~FUSE_CAP_ASYNC_DIO;
	else if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
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
	if (!d->o.no_handles && (conn->capable & FUSE_CAP_EXPORT_SUPPORT))
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/*
	 * POSIX ACLs: the kernel enforces them and caches them, we keep them, keep the mode in
	 * step and apply default ACLs to new inodes, which needs the umask unapplied
	 * (DONT_MASK: the kernel passes it along, and we apply it where no default ACL is).
	 */
	if (d->o.noacl) {
		/* the system.posix_acl_* names then get EOPNOTSUPP (xattr.c), and ls -l stops
		 * asking this filesystem for them after the first file */
		conn->want &= ~(FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK);
		log_debug("POSIX ACLs are off (-o noacl): stored ACLs are neither returned nor enforced");
	} else if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		d->srv.fs.acl = 1;
	} else {
		daemon_note(d, "POSIX ACLs are off: the kernel does not offer FUSE_POSIX_ACL and FUSE_DONT_MASK");
	}
	if (pthread_create(&t, NULL, readahead_thread, d) == 0)
		pthread_detach(t);
	notes_record(d);
	mount_ready(d);
}

/*
 * The session has ended: libfuse calls this once, from fuse_session_destroy (a plain FUSE
 * mount gets no FUSE_DESTROY from the kernel) or on FUSE_DESTROY. Make everything durable
 * here; fs_unmount then finds it done.
 */
static void op_destroy(void *userdata)
{
	fs_finish(&((struct srv *)userdata)->fs);
}

const struct fuse_lowlevel_ops daemon_ops = {
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
	.readdirplus = op_readdirplus,
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
void daemon_publish(struct daemon *d)
{
	const char *mnt = d->o.mountpoint;
	struct mountrec_mnt m;
	int ret;

	if (mountrec_find_mount(mnt, &m) || strcmp(m.fstype, "fuse.dmafs")) {
		log_warn("%s: this mount is not in /proc/self/mountinfo; umount will not wait for the daemon",
			 mnt);
		return;
	}
	d->rec.pid = getpid();
	d->rec.major = m.major;
	d->rec.minor = m.minor;
	snprintf(d->rec.mountpoint, sizeof(d->rec.mountpoint), "%s", mnt);
	snprintf(d->rec.state, sizeof(d->rec.state), "serving");
	snprintf(d->rec.members, sizeof(d->rec.members), "%s", d->member_list);
	notes_to_record(d);
	mountrec_dir(geteuid(), d->rec_dir, sizeof(d->rec_dir));
	mountrec_prune(d->rec_dir, 60);
	ret = mountrec_proc(d->rec.pid, &d->rec.start, NULL, 0) == 1 ? mountrec_write(d->rec_dir, &d->rec) : -EIO;
	if (ret) {
		log_warn("cannot write %s/%d (%s); umount will not wait for the daemon", d->rec_dir,
			 (int)d->rec.pid, strerror(-ret));
		d->rec.pid = 0;
		return;
	}
	d->srv.dev_major = m.major;
	d->srv.dev_minor = m.minor;
	d->srv.dev_known = 1;
	if (utab_add_user(m.source, mnt, d->o.user))
		log_warn("cannot add %s to /run/mount/utab; a plain umount will not run umount.dmafs (umount -c will)",
			 mnt);
}

/* The last act: the final state, for umount.dmafs to report. */
void daemon_unpublish(struct daemon *d, int ret, const char *why)
{
	if (!d->rec.pid)
		return;
	utab_prune();
	snprintf(d->rec.state, sizeof(d->rec.state), "%s", ret ? "failed" : "done");
	snprintf(d->rec.error, sizeof(d->rec.error), "%s", ret ? why : "");
	mountrec_write(d->rec_dir, &d->rec);
}

char *daemon_escape_commas(const char *s)
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
char *daemon_members_abs(const struct member *ms, int n, int esc)
{
	char list[8192];
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		char *abs = realpath(ms[i].path, NULL);
		char *p = esc ? daemon_escape_commas(abs ? abs : ms[i].path) : NULL;

		len += snprintf(list + len, sizeof(list) - MIN(len, sizeof(list)), "%s%s", i ? "," : "",
				p ? p : abs ? abs : ms[i].path);
		free(abs);
		free(p);
		if (len >= sizeof(list))
			return strdup("dmafs");
	}
	return strdup(list);
}

int daemon_fsname_given(const struct fuse_args *args)
{
	for (int i = 0; i < args->argc; i++)
		if (strstr(args->argv[i], "fsname="))
			return 1;
	return 0;
}
