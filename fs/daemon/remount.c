// SPDX-License-Identifier: MIT
/*
 * remount.c - remount of a running dmafs mount: the helper side (dmafs --remount) and the
 * daemon's DMAFS_IOC_MODE handler. See remount.h.
 *
 * Order of the steps, so that no write can slip between the daemon's last commit and the
 * kernel refusing writes:
 *   read-only:  mount(2) MS_REMOUNT|MS_RDONLY first. The kernel refuses it with EBUSY
 *               while a file is open for writing (or unlinked and still open), and writes
 *               back dirty cached pages; then the daemon writes what write-behind holds,
 *               commits and refuses changes. It checks that the kernel mount is read-only.
 *   read-write: the daemon first (a filesystem mounted with -o ro reopens its members for
 *               writing), then mount(2); if the kernel refuses, the daemon goes back.
 */
#include "daemon/remount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "engine/acl.h"
#include "util/mountrec.h"
#include "fuse/ops.h"


/* ---- the daemon's side ---- */

int remount_set_atime(const char *mnt, int atime, int nodiratime)
{
	struct mount_attr a = { .attr_clr = MOUNT_ATTR__ATIME | MOUNT_ATTR_NODIRATIME };

	a.attr_set = atime == FS_ATIME_NEVER    ? MOUNT_ATTR_NOATIME
		     : atime == FS_ATIME_STRICT ? MOUNT_ATTR_STRICTATIME
						: MOUNT_ATTR_RELATIME;
	if (nodiratime)
		a.attr_set |= MOUNT_ATTR_NODIRATIME;
	return mount_setattr(AT_FDCWD, mnt, 0, &a, sizeof(a)) ? -errno : 0;
}

/* ---- the helper's side: dmafs --remount ---- */

static const char *const ignored[] = {
	/* fstab and mount(8) words, FUSE options the kernel keeps, markers of utab */
	"defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "nofail",
	"_netdev", "remount", "default_permissions", "allow_other", "allow_root", "silent",
	"loud", "lazytime", "nolazytime", "iversion", "noiversion", "mand", "nomand", NULL
};
static const char *const ignored_prefix[] = {
	"x-", "comment=", "helper=", "user=", "user_id=", "group_id=", "fsname=", "subtype=",
	"max_read=", "blksize=", "rootmode=", "fd=", NULL
};
/* daemon options that only a new mount can change */
static const char *const kept[] = {
	"commit=", "threads=", "readahead_kb=", "max_background=", "open_fill_kb=", "staging_mb=", "writebehind_mb=", "p2p=",
	"gpu_setup=", "attr_timeout=", "entry_timeout=", "writeback_cache", "verify_place",
	"wronly_cache", "copy_delay_us=", "verbose", "debug", "no_handles", "tier=",
	"tier_min_free=", "tier_pin=", "tier_fill=", "acl", "noacl", "listxattr", "nolistxattr", NULL
};

static int in_list(const char *o, const char *const *list, int prefix)
{
	for (int i = 0; list[i]; i++)
		if (prefix || list[i][strlen(list[i]) - 1] == '=' ? !strncmp(o, list[i], strlen(list[i]))
								 : !strcmp(o, list[i]))
			return 1;
	return 0;
}

struct want {
	int ro, nosuid, nodev, noexec, sync, dirsync, atime, nodiratime, bind;
};

/* Apply one option word; returns 0, or -1 for a word no remount knows. */
static int apply(struct want *w, const char *o)
{
	static const struct {
		const char *name;
		size_t off;
		int val;
	} flags[] = {
		{ "ro", offsetof(struct want, ro), 1 },
		{ "rw", offsetof(struct want, ro), 0 },
		{ "nosuid", offsetof(struct want, nosuid), 1 },
		{ "suid", offsetof(struct want, nosuid), 0 },
		{ "nodev", offsetof(struct want, nodev), 1 },
		{ "dev", offsetof(struct want, nodev), 0 },
		{ "noexec", offsetof(struct want, noexec), 1 },
		{ "exec", offsetof(struct want, noexec), 0 },
		{ "sync", offsetof(struct want, sync), 1 },
		{ "async", offsetof(struct want, sync), 0 },
		{ "dirsync", offsetof(struct want, dirsync), 1 },
		{ "nodiratime", offsetof(struct want, nodiratime), 1 },
		{ "diratime", offsetof(struct want, nodiratime), 0 },
		{ "bind", offsetof(struct want, bind), 1 },
		{ "noatime", offsetof(struct want, atime), FS_ATIME_NEVER },
		{ "strictatime", offsetof(struct want, atime), FS_ATIME_STRICT },
		{ "relatime", offsetof(struct want, atime), FS_ATIME_RELATIME },
	};

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (strcmp(o, flags[i].name))
			continue;
		*(int *)((char *)w + flags[i].off) = flags[i].val;
		return 0;
	}
	/* as mount(2): atime undoes noatime, nostrictatime strictatime; norelatime leaves
	 * relatime, the kernel's default, unless strictatime is given */
	if (!strcmp(o, "atime") || !strcmp(o, "nostrictatime")) {
		if (w->atime == (strcmp(o, "atime") ? FS_ATIME_STRICT : FS_ATIME_NEVER))
			w->atime = FS_ATIME_RELATIME;
		return 0;
	}
	if (!strcmp(o, "norelatime"))
		return 0;
	if (in_list(o, ignored, 0) || in_list(o, ignored_prefix, 1))
		return 0;
	if (in_list(o, kept, 0)) {
		fprintf(stderr, "dmafs: remount: %s is kept as the daemon was started with it (a remount changes only ro/rw, nosuid, nodev, noexec, sync, dirsync and the atime options)\n",
			o);
		return 0;
	}
	return -1;
}

static int ioctl_mode(int fd, const struct want *w, const char *mnt)
{
	struct dmafs_ioc_mode m = { 0 };

	m.flags = (w->ro ? DMAFS_MODE_RO : 0) | (w->nodiratime ? DMAFS_MODE_NODIRATIME : 0) |
		  (w->sync ? DMAFS_MODE_SYNC : 0) | (w->dirsync ? DMAFS_MODE_DIRSYNC : 0);
	m.atime = w->atime;
	if (ioctl(fd, DMAFS_IOC_MODE, &m) < 0) {
		if (errno == ENOTTY || errno == ENOSYS)
			fprintf(stderr, "dmafs: remount %s: the daemon serving it cannot change its mode (a dmafs older than this one?); unmount and mount again\n",
				mnt);
		else if (errno == EPERM)
			fprintf(stderr, "dmafs: remount %s: only root (CAP_SYS_ADMIN) may remount\n", mnt);
		else
			fprintf(stderr, "dmafs: remount %s: asking the daemon failed: %s\n", mnt,
				strerror(errno));
		return -1;
	}
	if (m.status) {
		fprintf(stderr, "dmafs: remount %s %s: %s\n", mnt, w->ro ? "read-only" : "read-write",
			m.msg[0] ? m.msg : strerror(-m.status));
		return -1;
	}
	return 0;
}

static unsigned long mount_flags(const struct want *w)
{
	unsigned long f = MS_REMOUNT;

	f |= w->bind ? MS_BIND : 0;
	f |= w->ro ? MS_RDONLY : 0;
	f |= w->nosuid ? MS_NOSUID : 0;
	f |= w->nodev ? MS_NODEV : 0;
	f |= w->noexec ? MS_NOEXEC : 0;
	f |= w->sync && !w->bind ? MS_SYNCHRONOUS : 0;
	f |= w->dirsync && !w->bind ? MS_DIRSYNC : 0;
	f |= w->nodiratime ? MS_NODIRATIME : 0;
	f |= w->atime == FS_ATIME_NEVER	   ? MS_NOATIME
	     : w->atime == FS_ATIME_STRICT ? MS_STRICTATIME
					   : MS_RELATIME;
	return f;
}

static int do_mount(const char *mnt, const struct want *w)
{
	if (mount("dmafs", mnt, NULL, mount_flags(w), NULL) == 0)
		return 0;
	if (errno == EBUSY && w->ro)
		fprintf(stderr, "dmafs: remount %s read-only: mount point busy: a file is open for writing, or deleted while still open; close it and try again\n",
			mnt);
	else
		fprintf(stderr, "dmafs: remount %s: mount(2): %s\n", mnt, strerror(errno));
	return -1;
}

/* dmafs --remount [-v] -o OPTIONS MOUNTPOINT: the -o lists joined in @opts; 0, or 1 on a usage error */
static int parse_args(int argc, char **argv, char *opts, size_t size, int *verbose,
		      const char **target)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-v")) {
			*verbose = 1;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			size_t len = strlen(opts);

			snprintf(opts + len, size - len, "%s%s", len ? "," : "", argv[++i]);
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "dmafs --remount: unknown option %s\n", argv[i]);
			return 1;
		} else {
			*target = argv[i]; /* the last argument; a source before it is ignored */
		}
	}
	if (!*target) {
		fprintf(stderr, "usage: dmafs --remount [-v] -o OPTIONS MOUNTPOINT\n");
		return 1;
	}
	return 0;
}

/* what the mount is now: options not given stay as they are */
static void read_current(const struct mountrec_mnt *cur, struct want *was)
{
	memset(was, 0, sizeof(*was));
	was->ro = mountrec_has_opt(cur->superopts, "ro");
	was->nosuid = mountrec_has_opt(cur->mntopts, "nosuid");
	was->nodev = mountrec_has_opt(cur->mntopts, "nodev");
	was->noexec = mountrec_has_opt(cur->mntopts, "noexec");
	was->sync = mountrec_has_opt(cur->superopts, "sync");
	was->dirsync = mountrec_has_opt(cur->superopts, "dirsync");
	was->nodiratime = mountrec_has_opt(cur->mntopts, "nodiratime");
	was->atime = mountrec_has_opt(cur->mntopts, "noatime")	  ? FS_ATIME_NEVER
		     : mountrec_has_opt(cur->mntopts, "relatime") ? FS_ATIME_RELATIME
								  : FS_ATIME_STRICT;
}

static void print_want(const char *mnt, const struct want *w)
{
	fprintf(stderr, "dmafs: remount %s: %s%s%s%s%s%s, atime %s%s%s\n", mnt,
		w->ro ? "ro" : "rw", w->nosuid ? ",nosuid" : "", w->nodev ? ",nodev" : "",
		w->noexec ? ",noexec" : "", w->sync ? ",sync" : "", w->dirsync ? ",dirsync" : "",
		w->atime == FS_ATIME_NEVER ? "never" : w->atime == FS_ATIME_STRICT ? "every read" : "relatime",
		w->nodiratime ? ", not for directories" : "", w->bind ? " (this mount only)" : "");
}

/* tell the daemon and the kernel, in the order the top of this file gives: 0 or 32 */
static int change_mode(const char *mnt, const struct want *was, const struct want *w)
{
	int fd, ret = 0;

	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "dmafs: remount %s: %s\n", mnt, strerror(errno));
		return 32;
	}
	if (was->ro && !w->ro) {
		if (ioctl_mode(fd, w, mnt))
			ret = 32;
		else if (do_mount(mnt, w)) {
			struct want back = *w;

			back.ro = 1;
			ioctl_mode(fd, &back, mnt);
			ret = 32;
		}
	} else {
		if (do_mount(mnt, w) || ioctl_mode(fd, w, mnt))
			ret = 32;
	}
	close(fd);
	return ret;
}

int remount_main(int argc, char **argv)
{
	char opts[8192] = "", *save = NULL, *mnt = NULL;
	const char *target = NULL;
	struct mountrec_mnt cur;
	struct want w, was;
	int verbose = 0, ret;

	if (parse_args(argc, argv, opts, sizeof(opts), &verbose, &target))
		return 1;
	mnt = realpath(target, NULL);
	if (!mnt) {
		fprintf(stderr, "dmafs: remount %s: %s\n", target, strerror(errno));
		return 32;
	}
	ret = mountrec_find_mount(mnt, &cur);
	if (ret || strcmp(cur.fstype, "fuse.dmafs")) {
		if (ret)
			fprintf(stderr, "dmafs: remount %s: not mounted\n", mnt);
		else
			fprintf(stderr, "dmafs: remount %s: not a dmafs mount (type %s)\n", mnt, cur.fstype);
		free(mnt);
		return 32;
	}
	read_current(&cur, &was);
	w = was;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (apply(&w, o)) {
			fprintf(stderr, "dmafs: remount %s: unknown option '%s'\n", mnt, o);
			free(mnt);
			return 32;
		}
	}
	if (verbose)
		print_want(mnt, &w);
	if (w.bind) {
		/* MS_BIND: the flags of this one mount; the filesystem and its daemon stay */
		ret = do_mount(mnt, &w);
		free(mnt);
		return ret ? 32 : 0;
	}
	ret = change_mode(mnt, &was, &w);
	free(mnt);
	return ret;
}
