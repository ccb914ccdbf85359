/* SPDX-License-Identifier: MIT */
/*
 * mountrec.h - the daemon's mount record, and the mount table as the kernel shows it.
 *
 * For a plain FUSE mount the kernel neither waits for the daemon at unmount nor tells
 * anyone when the daemon is done, so the daemon leaves a record of itself where
 * umount.dmafs can find it: a small text file per daemon, /run/dmafs/PID (for a daemon
 * not run by root, /run/user/UID/dmafs/PID), with lines
 *
 *	pid=1234
 *	start=567890		starttime from /proc/PID/stat: a reused pid is never taken for it
 *	dev=0:38		the mount's device; 38 is /sys/fs/fuse/connections/38
 *	mountpoint=/data	octal escapes as in /proc/self/mountinfo
 *	state=serving		then done or failed, written as the daemon's last act
 *	error=...		with failed: what went wrong
 *	members=/dev/a,/dev/b	the members it opened, in order: commas and backslashes in a
 *				path escaped with a backslash, then octal escapes as above
 *	notice=...		one line per thing it noted at mount that is no failure
 *				(written data copied twice, ...); dmafs-check shows them
 *
 * Every write replaces the file atomically (a temporary file, then rename).
 */
#ifndef DMAFS_MOUNTREC_H
#define DMAFS_MOUNTREC_H

#include <limits.h>
#include <sys/types.h>

struct mountrec {
	pid_t pid;
	unsigned long long start;
	unsigned major, minor;
	char mountpoint[PATH_MAX];
	char state[16];
	char error[512];
	char members[8192];
	char notice[1024]; /* the notice lines, each ending in a newline */
};

/* One line of /proc/self/mountinfo, unescaped. */
struct mountrec_mnt {
	unsigned major, minor;
	char root[PATH_MAX];	/* the directory of the filesystem mounted here: / for the
				 * daemon's own mount, the bound one for a bind mount */
	char target[PATH_MAX];
	char fstype[64];
	char source[8192];
	long user_id; /* from the FUSE option user_id=, -1 if absent */
	char mntopts[1024];   /* per-mount options: rw,nosuid,nodev,relatime... */
	char superopts[1024]; /* superblock options: ro,sync,user_id=0... */
};

/* The record directory of daemons run by @uid: /run/dmafs for root, else /run/user/UID/dmafs. */
void mountrec_dir(uid_t uid, char *buf, size_t len);
/* Write @r as @dir/PID, creating @dir if needed. Returns 0 or -errno. */
int mountrec_write(const char *dir, const struct mountrec *r);
/* Read the record at @path. Returns 0, -errno, or -EINVAL if it is not a record. */
int mountrec_read(const char *path, struct mountrec *r);
/*
 * The start time (clock ticks after boot) and name of process @pid. Returns 1 if it runs,
 * 0 if it is gone or a zombie (exited: its files are closed), -errno if unreadable.
 */
int mountrec_proc(pid_t pid, unsigned long long *start, char *comm, size_t commlen);
/* 1 if the daemon of @r still runs: same pid, same start time, named dmafs. */
int mountrec_alive(const struct mountrec *r);
/*
 * The record of the running daemon that serves the mount with device @major:@minor, looked
 * for among root's daemons and @uid's. Returns 0 (*out filled), -ENOENT, or -ENOMEM.
 */
int mountrec_find_live(unsigned major, unsigned minor, uid_t uid, struct mountrec *out);
/*
 * Remove records in @dir whose daemon no longer runs and that were last written more than
 * @age seconds ago (a killed daemon's, or a final state nobody collected).
 */
void mountrec_prune(const char *dir, unsigned age);

/*
 * Call @fn for each mount in /proc/self/mountinfo, in table order; a non-zero return
 * stops the walk and is returned. Returns 0, or -errno if the table cannot be read.
 */
int mountrec_mounts(int (*fn)(const struct mountrec_mnt *m, void *arg), void *arg);
/* Is @word one of the comma-separated options in @opts? */
int mountrec_has_opt(const char *opts, const char *word);
/* Is the mount of device @major:@minor read-only? 1 yes, 0 no, -ENOENT not mounted. */
int mountrec_dev_ro(unsigned major, unsigned minor);
/* The last (topmost) mount on @target. Returns 0, -ENOENT, or -errno. */
int mountrec_find_mount(const char *target, struct mountrec_mnt *out);

#endif
