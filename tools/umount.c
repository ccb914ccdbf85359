// SPDX-License-Identifier: MIT
/*
 * umount.c - umount.dmafs, the umount(8) helper: unmount a dmafs mount and return only once
 * its daemon has committed, flushed every member's cache and closed the members.
 *
 * umount(8) runs it as
 *
 *	umount.dmafs MOUNTPOINT [-flnrv] [-t TYPE] [-N NAMESPACE]
 *
 * because the daemon marks its mount helper=dmafs in /run/mount/utab (fs/daemon/utab.c), or, under
 * the name umount.fuse.dmafs (a link), when umount(8) reads the mount table without such a
 * marker (umount -c, -l, -f). For a plain FUSE mount the kernel unmounts at once and the
 * daemon learns of it only when its reads of /dev/fuse fail; it then commits, flushes and
 * exits. This helper finds the daemon through the record it keeps under /run/dmafs
 * (fs/util/mountrec.h), holds a pidfd on it, unmounts, waits for it to exit, and reports the
 * final state it wrote. After fusermount3 -u, which runs no helper,
 *
 *	umount.dmafs --wait MOUNTPOINT
 *
 * waits the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "util/mountrec.h"
#include "tool.h"
#include "daemon/utab.h"

#ifndef UMOUNT_NOFOLLOW
#define UMOUNT_NOFOLLOW 8
#endif

static int verbose;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s MOUNTPOINT [-flnrv] [-t TYPE]\n"
		"       %s --wait MOUNTPOINT\n"
		"\n"
		"Unmount a dmafs filesystem and wait until its daemon has written everything to\n"
		"the members, flushed their caches and closed them.\n"
		"  -l          detach now, do not wait (the daemon finishes when the last open\n"
		"              file on the filesystem is closed)\n"
		"  -f          abort the daemon's requests first (a daemon that no longer\n"
		"              answers); then wait for it as usual\n"
		"  -v          say what is done\n"
		"  -n, -r, -t TYPE   accepted from umount(8); no effect\n"
		"  --wait      do not unmount: wait for the daemon of a filesystem already\n"
		"              unmounted (fusermount3 -u), and report how it finished\n"
		"See umount.dmafs(8).\n",
		tool_name(), tool_name());
}

/* Seconds on the monotonic clock, for durations. */
static double now(void)
{
	return (double)dm_mono_ns() / 1e9;
}

/*
 * The mount point as the mount table spells it. The mount root itself is never looked at
 * (a daemon that no longer answers would hang us there): only its parent is resolved.
 */
static int canonical(const char *arg, char *out, size_t len)
{
	char buf[PATH_MAX], *slash, *dir;
	const char *base;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (size_t n = strlen(buf); n > 1 && buf[n - 1] == '/'; n--)
		buf[n - 1] = '\0';
	slash = strrchr(buf, '/');
	if (!slash) {
		base = buf;
		dir = realpath(".", NULL);
	} else if (slash == buf) {
		if (!buf[1]) {
			snprintf(out, len, "/");
			return 0;
		}
		base = slash + 1;
		dir = strdup("/");
	} else {
		*slash = '\0';
		base = slash + 1;
		dir = realpath(buf, NULL);
	}
	if (!dir)
		return -errno;
	if (!strcmp(base, ".") || !strcmp(base, "..")) {
		free(dir);
		return -EINVAL;
	}
	snprintf(out, len, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", base);
	free(dir);
	return 0;
}

/* A daemon's record, and where it lies. */
struct found {
	struct mountrec r;
	char path[PATH_MAX];
	int alive;
};

/*
 * Records in @dir written by root or @uid. For the unmount, @m names the mount: a live
 * daemon's record must have its device (the mount may be a bind mount, or moved: its own
 * mount point may differ), a dead one's its mount point too (device numbers are reused). For
 * --wait, @mnt names the mount point. A live daemon is preferred; among dead ones, the
 * last started.
 */
static void scan(const char *dir, uid_t uid, const struct mountrec_mnt *m, const char *mnt,
		 struct found *best, int *nfound)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct found f;
		struct stat st;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(f.path, sizeof(f.path), "%s/%s", dir, e->d_name);
		if (stat(f.path, &st) < 0 || (st.st_uid != 0 && st.st_uid != uid) ||
		    (st.st_mode & 022) || mountrec_read(f.path, &f.r))
			continue;
		if (m && (f.r.major != m->major || f.r.minor != m->minor))
			continue;
		if (mnt && strcmp(f.r.mountpoint, mnt))
			continue;
		f.alive = mountrec_alive(&f.r);
		if (m && !f.alive && strcmp(f.r.mountpoint, m->target))
			continue;
		(*nfound)++;
		if (*nfound == 1 || (f.alive && !best->alive) ||
		    (f.alive == best->alive && f.r.start > best->r.start))
			*best = f;
	}
	closedir(d);
}

static int find_daemon(const struct mountrec_mnt *m, const char *mnt, uid_t uid, struct found *f)
{
	char dir[PATH_MAX];
	int n = 0;

	memset(f, 0, sizeof(*f));
	mountrec_dir(0, dir, sizeof(dir));
	scan(dir, uid, m, mnt, f, &n);
	if (uid != 0) {
		mountrec_dir(uid, dir, sizeof(dir));
		scan(dir, uid, m, mnt, f, &n);
	}
	return n;
}

/* A pidfd on the daemon, opened before the unmount so a reused pid cannot fool the wait. */
static int open_pidfd(struct found *f)
{
#ifdef SYS_pidfd_open
	int fd = (int)syscall(SYS_pidfd_open, f->r.pid, 0);

	if (fd < 0)
		return -1;
	/* the pid may have been reused between the check and the open: check again */
	if (!mountrec_alive(&f->r)) {
		close(fd);
		f->alive = 0;
		return -1;
	}
	return fd;
#else
	return -1;
#endif
}

/*
 * Wait, without a time limit, until the daemon has exited. When it takes a while, say so
 * on a terminal (a person waits there) or with -v; a script or a unit's log gets nothing
 * from an unmount that works.
 */
static void wait_exit(const struct found *f, int pidfd, const char *mnt)
{
	double t0 = now(), next = t0 + 1.0;
	int said = 0, tell = verbose || isatty(STDERR_FILENO);

	for (;;) {
		double t = now();
		int ms = (int)((next - t) * 1000) + 1;

		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };

			if (poll(&p, 1, ms > 0 ? ms : 0) > 0)
				break;
		} else {
			/* no pidfd (Linux before 5.3): a zombie has closed its files too */
			unsigned long long start;

			if (mountrec_proc(f->r.pid, &start, NULL, 0) != 1 || start != f->r.start)
				break;
			usleep(10000);
		}
		t = now();
		if (t >= next && tell) {
			if (!said)
				tool_err("waiting for dmafs daemon %d to finish writing %s...", (int)f->r.pid, mnt);
			else
				tool_err("still waiting for dmafs daemon %d (%.0f s)", (int)f->r.pid, t - t0);
			said = 1;
			next = t + 30.0;
		}
	}
	if (said || verbose)
		tool_err("dmafs daemon %d finished after %.1f s", (int)f->r.pid, now() - t0);
}

/* How the daemon ended, from the state it wrote last. Removes the record. */
static int report(const struct found *f, const char *mnt)
{
	struct mountrec r;
	int ret = mountrec_read(f->path, &r);

	if (ret == 0 && r.pid == f->r.pid)
		unlink(f->path);
	if (ret || r.pid != f->r.pid) {
		tool_err("%s: dmafs daemon %d left no final state in %s: whether everything reached the members is unknown",
		    mnt, (int)f->r.pid, f->path);
		return UMOUNT_EXIT_UNFINISHED;
	}
	if (!strcmp(r.state, "done"))
		return UMOUNT_EXIT_OK;
	if (!strcmp(r.state, "failed")) {
		tool_err("%s: unmounted, but dmafs daemon %d failed to finish: %s (see its messages in the system log; dmafs-fsck checks the members)",
		    mnt, (int)r.pid, r.error[0] ? r.error : "no reason given");
		return UMOUNT_EXIT_UNFINISHED;
	}
	tool_err("%s: unmounted, but dmafs daemon %d had exited without finishing (killed or crashed?): the filesystem comes back as of its last commit at the next mount",
	    mnt, (int)r.pid);
	return UMOUNT_EXIT_UNFINISHED;
}

/* Is anything still mounted from device @major:@minor? */
struct devq {
	unsigned major, minor;
};

static int dev_mounted(const struct mountrec_mnt *m, void *arg)
{
	const struct devq *q = arg;

	return m->major == q->major && m->minor == q->minor;
}

struct devcount {
	unsigned major, minor;
	int n;
};

static int count_one(const struct mountrec_mnt *m, void *arg)
{
	struct devcount *c = arg;

	if (m->major == c->major && m->minor == c->minor)
		c->n++;
	return 0;
}

/* How many mounts of device @major:@minor this mount namespace has. */
static int dev_count(unsigned major, unsigned minor)
{
	struct devcount c = { major, minor, 0 };

	mountrec_mounts(count_one, &c);
	return c.n;
}

/*
 * Does the superblock of FUSE connection @minor live on? Its directory in the fusectl
 * filesystem goes when the last mount of it does, before umount2() returns; a mount in
 * another namespace keeps it. Without fusectl mounted, this cannot tell: no.
 */
static int conn_alive(unsigned major, unsigned minor)
{
	char path[64];
	struct stat st;

	if (major != 0)
		return 0;
	snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u", minor);
	return stat(path, &st) == 0;
}

/*
 * Unmount as a user: the kernel lets only root umount2() a FUSE mount, and fusermount3
 * (setuid root) unmounts one the caller mounted itself (its user_id= is the caller's),
 * which is what a fstab `user` mount made through mount(8) is. Returns 0, or the errno
 * of umount2 (EPERM when fusermount3 refused too: it said why on stderr).
 */
static int user_unmount(const char *mnt, int lazy)
{
	int st;
	pid_t pid;

	if (getuid() == 0)
		return EPERM;
	pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", lazy ? "-uz" : "-u", "--", mnt, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return EPERM;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : EPERM;
}

/*
 * The dmafs mount @arg names, as @mnt (the mount table's spelling) and @m. Returns 0 or
 * the exit status, with the reason printed.
 */
static int find_mount(const char *arg, char *mnt, size_t len, struct mountrec_mnt *m)
{
	int ret;

	if (mountrec_find_mount(arg, m) == 0) {
		snprintf(mnt, len, "%s", arg);
	} else {
		ret = canonical(arg, mnt, len);
		if (ret) {
			tool_err("%s: %s", arg, strerror(-ret));
			return UMOUNT_EXIT_FAIL;
		}
		ret = mountrec_find_mount(mnt, m);
		if (ret) {
			tool_err("%s: %s", arg, ret == -ENOENT ? "not mounted" : strerror(-ret));
			return UMOUNT_EXIT_FAIL;
		}
	}
	if (strcmp(m->fstype, "fuse.dmafs")) {
		tool_err("%s: not a dmafs mount (type %s); unmount it with umount -i", mnt, m->fstype);
		return UMOUNT_EXIT_FAIL;
	}
	return 0;
}

/* -v: the daemon, and what else of the filesystem stays mounted. */
static void tell(const char *mnt, const struct mountrec_mnt *m, const struct found *f,
		 int others)
{
	if (f->alive)
		tool_err("%s: served by dmafs daemon %d (record %s)", mnt, (int)f->r.pid, f->path);
	else
		tool_err("%s: no running dmafs daemon recorded for it", mnt);
	if (strcmp(m->root, "/"))
		tool_err("%s: a bind mount of %s", mnt, m->root);
	if (others > 0)
		tool_err("%s: %d other mount%s of this filesystem stay%s", mnt, others,
			 others > 1 ? "s" : "", others > 1 ? "" : "s");
}

/*
 * Ask for a commit while the mount still answers: the work left after the unmount is
 * then small, and an error shows up while the filesystem is still there.
 */
static void commit_first(const char *mnt)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		if (fsync(fd) < 0 && verbose)
			tool_err("%s: commit before unmounting failed: %s", mnt, strerror(errno));
		close(fd);
	}
}

/* umount2(), or fusermount3 for a user's mount. Returns 0 or the exit status, printed. */
static int unmount(const char *mnt, int lazy, int force)
{
	int flags = UMOUNT_NOFOLLOW, e;

	if (lazy)
		flags |= MNT_DETACH;
	if (force)
		flags |= MNT_FORCE;
	e = umount2(mnt, flags) < 0 ? errno : 0;
	if (e == EPERM)
		e = user_unmount(mnt, lazy);
	if (!e) {
		if (verbose)
			tool_err("%s: unmounted%s", mnt, lazy ? " (detached)" : "");
		return 0;
	}
	if (e == EBUSY) {
		tool_err("%s: target is busy%s", mnt,
			 force ? " (the daemon's connection was aborted: it finishes now; umount -l detaches the dead mount)"
			       : " (lsof or fuser -m show who uses it; umount -l detaches it now)");
		return UMOUNT_EXIT_FAIL;
	}
	if (e == EPERM) {
		tool_err("%s: must be superuser to unmount, or the user who mounted it (fusermount3 -u refused too)", mnt);
		return UMOUNT_EXIT_USAGE;
	}
	tool_err("%s: %s", mnt, e == EINVAL ? "not mounted" : strerror(e));
	return UMOUNT_EXIT_FAIL;
}

/* After the unmount: wait for daemon @f (@pidfd) and report how it finished. */
static int wait_daemon(const char *mnt, struct found *f, int pidfd)
{
	int ret;

	if (f->alive)
		wait_exit(f, pidfd, mnt);
	ret = report(f, mnt);
	/* umount(8) keeps the utab entry when a helper fails: drop it, it is unmounted */
	if (ret)
		utab_prune();
	return ret;
}

static int do_unmount(const char *arg, int lazy, int force)
{
	char mnt[PATH_MAX];
	struct mountrec_mnt m;
	struct found f;
	int ret, pidfd = -1, n, others;

	ret = find_mount(arg, mnt, sizeof(mnt), &m);
	if (ret)
		return ret;
	n = find_daemon(&m, NULL, m.user_id > 0 ? (uid_t)m.user_id : 0, &f);
	/*
	 * The daemon ends with the last mount of its filesystem: a bind mount (of a directory, a
	 * file or the whole mount) is one more mount of the same device, and unmounting it, or
	 * the daemon's own mount while binds remain, leaves the daemon serving the others.
	 */
	others = dev_count(m.major, m.minor) - 1;
	if (f.alive)
		pidfd = open_pidfd(&f);
	if (verbose)
		tell(mnt, &m, &f, others);
	/* Not with -f (the daemon may not answer) or -l (which must not block). */
	if (f.alive && !lazy && !force && others <= 0)
		commit_first(mnt);
	ret = unmount(mnt, lazy, force);
	if (ret || others > 0 || (!lazy && conn_alive(m.major, m.minor))) {
		/* other mounts of the filesystem stay, here or in another mount namespace */
		if (!ret && verbose)
			tool_err("%s: the filesystem stays mounted elsewhere%s: its daemon goes on serving it", mnt,
				 others > 0 ? "" : " (in another mount namespace?)");
		if (pidfd >= 0)
			close(pidfd);
		return ret;
	}
	if (!n) {
		tool_err("%s: unmounted, but no record of its dmafs daemon under /run/dmafs (a dmafs from before umount.dmafs, or one that could not write there): not waiting for it",
			 mnt);
		return UMOUNT_EXIT_OK;
	}
	if (f.alive && lazy) {
		if (verbose)
			tool_err("%s: dmafs daemon %d finishes once the last file open on the filesystem is closed; %s --wait %s waits for it",
				 mnt, (int)f.r.pid, tool_name(), mnt);
		if (pidfd >= 0)
			close(pidfd);
		return UMOUNT_EXIT_OK;
	}
	ret = wait_daemon(mnt, &f, pidfd);
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

static int do_wait(const char *arg)
{
	char mnt[PATH_MAX];
	struct found f;
	int ret, pidfd;

	ret = canonical(arg, mnt, sizeof(mnt));
	if (ret) {
		tool_err("%s: %s", arg, strerror(-ret));
		return UMOUNT_EXIT_FAIL;
	}
	if (!find_daemon(NULL, mnt, getuid(), &f)) {
		if (verbose)
			tool_err("%s: no dmafs daemon recorded for it: nothing to wait for", mnt);
		return UMOUNT_EXIT_OK;
	}
	if (f.alive && mountrec_mounts(dev_mounted, &(struct devq){ f.r.major, f.r.minor }) > 0) {
		tool_err("%s: still mounted (dmafs daemon %d serves it): unmount it first (umount %s waits by itself)",
		    mnt, (int)f.r.pid, mnt);
		return UMOUNT_EXIT_FAIL;
	}
	if (f.alive) {
		pidfd = open_pidfd(&f);
		wait_exit(&f, pidfd, mnt);
		if (pidfd >= 0)
			close(pidfd);
	}
	return report(&f, mnt);
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c, lazy = 0, force = 0, wait_only = 0;

	/* messages carry the name umount(8) ran us by: umount.dmafs or umount.fuse.dmafs */
	tool_init(argv[0] && *argv[0] ? argv[0] : "umount.dmafs");
	while ((c = getopt_long(argc, argv, "flnrvt:N:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			lazy = 1;
			break;
		case 'f':
			force = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'n': /* no mtab: there is none to write */
		case 'r': /* remount read-only if busy: not offered; a busy mount stays */
		case 't': /* the type: the mount table says it */
			break;
		case 'N':
			tool_err("-N (another mount namespace) is not supported");
			return UMOUNT_EXIT_USAGE;
		case 'w':
			wait_only = 1;
			break;
		case 'h':
			usage(stdout);
			return UMOUNT_EXIT_OK;
		case 'V':
			printf("%s (dmafs) %s\n", tool_name(), PACKAGE_VERSION);
			return UMOUNT_EXIT_OK;
		default:
			usage(stderr);
			return UMOUNT_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return UMOUNT_EXIT_USAGE;
	}
	if (wait_only)
		return do_wait(argv[optind]);
	return do_unmount(argv[optind], lazy, force);
}
