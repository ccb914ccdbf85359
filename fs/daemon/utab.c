// SPDX-License-Identifier: MIT
/*
 * utab.c - the helper=dmafs marker of a mount in libmount's utab (/run/mount/utab).
 *
 * umount(8), run by root on a directory, normally learns the filesystem type from
 * statfs(2), which says only "fuse", and so would run /sbin/umount.fuse if anything. An
 * utab entry for the mount point makes it read the mount table instead, and the entry's
 * helper=dmafs option makes it run /sbin/umount.dmafs, which unmounts and then waits until
 * this daemon has finished (see umount.dmafs(8)). umount(8) removes the entry itself
 * after the helper succeeded; utab_prune() covers the other ways a mount ends (and the
 * entries of daemons that were killed). A mount that root makes for a user (mount -o
 * user=NAME) carries user=NAME there too, the entry mount(8) would have written: umount(8)
 * checks it when NAME asks to unmount an /etc/fstab line with the user option (and then
 * runs umount.dmafs with NAME's IDs, which cannot unmount a mount that root made).
 */
#include "daemon/utab.h"

#include <errno.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/mountrec.h"

static void remove_target(const char *target)
{
	struct libmnt_update *upd = mnt_new_update();

	if (!upd)
		return;
	if (mnt_update_set_fs(upd, 0, target, NULL) == 0 && mnt_update_is_ready(upd))
		mnt_update_table(upd, NULL); /* nothing there (umount(8) removed it): fine */
	mnt_free_update(upd);
}

/*
 * libmount removes entries but offers no parser for utab (it reads it as fstab), so the
 * lines are read here: one entry per line, space-separated KEY=VALUE fields, values
 * escaped as in mountinfo. A mount point with something mounted on it keeps its entries
 * (a mount we were stacked on may own one).
 */
void utab_prune(void)
{
	struct libmnt_update *upd;
	const char *path;
	char *line = NULL, *stale[64];
	size_t cap = 0, n = 0;
	FILE *f = NULL;

	if (geteuid() != 0)
		return;
	upd = mnt_new_update();
	/* any target: the update only tells where utab is */
	if (!upd || mnt_update_set_fs(upd, 0, "/", NULL) || !(path = mnt_update_get_filename(upd)) ||
	    !(f = fopen(path, "re")))
		goto out;
	while (n < 64 && getline(&line, &cap, f) > 0) {
		char *target = NULL, *save = NULL, *osave = NULL, *tok, *o, *t;
		int ours = 0;
		struct mountrec_mnt m;

		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			if (!strncmp(tok, "TARGET=", 7))
				target = tok + 7;
			else if (!strncmp(tok, "OPTS=", 5))
				for (o = strtok_r(tok + 5, ",", &osave); o; o = strtok_r(NULL, ",", &osave))
					ours |= !strcmp(o, "helper=dmafs");
		}
		if (!ours || !target || !(t = mnt_unmangle(target)))
			continue;
		if (mountrec_find_mount(t, &m) == -ENOENT)
			stale[n++] = t;
		else
			free(t);
	}
out:
	free(line);
	if (f)
		fclose(f);
	mnt_free_update(upd);
	for (size_t i = 0; i < n; i++) {
		remove_target(stale[i]);
		free(stale[i]);
	}
}

/* A user name that reads back as one option of a comma-separated list, and prints safely. */
static int user_ok(const char *user)
{
	if (!*user)
		return 0;
	for (const unsigned char *c = (const unsigned char *)user; *c; c++)
		if (*c == ',' || *c <= ' ' || *c == 0x7f)
			return 0;
	return 1;
}

/*
 * The daemon's entry is the one umount(8) reads: mount(8), after its helper has mounted,
 * adds its own (with user=NAME) only when utab has no entry for the same source and
 * mount point, and the daemon's is there by then. So the user= goes into ours.
 */
int utab_add_user(const char *source, const char *target, const char *user)
{
	struct libmnt_update *upd;
	struct libmnt_fs *fs;
	char *opts = NULL;
	int ret;

	if (user && !user_ok(user))
		return -EINVAL;
	if (geteuid() != 0)
		return 0; /* utab is root's; mount(8) records user= itself for a user's own mount */
	utab_prune();
	fs = mnt_new_fs();
	upd = mnt_new_update();
	ret = fs && upd ? 0 : -ENOMEM;
	if (!ret)
		ret = mnt_fs_set_source(fs, source);
	if (!ret)
		ret = mnt_fs_set_target(fs, target);
	if (!ret)
		ret = mnt_fs_set_fstype(fs, "fuse.dmafs");
	if (!ret)
		ret = mnt_optstr_append_option(&opts, "helper", "dmafs");
	if (!ret && user)
		ret = mnt_optstr_append_option(&opts, "user", user);
	if (!ret)
		ret = mnt_fs_set_options(fs, opts);
	if (!ret)
		ret = mnt_update_set_fs(upd, 0, NULL, fs);
	if (ret == 0 && mnt_update_is_ready(upd))
		ret = mnt_update_table(upd, NULL);
	free(opts);
	mnt_free_update(upd);
	mnt_unref_fs(fs);
	return ret > 0 ? 0 : ret;
}
