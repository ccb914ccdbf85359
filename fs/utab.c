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
 * entries of daemons that were killed).
 */
#include "utab.h"

#include <errno.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mountrec.h"

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

int utab_add(const char *source, const char *target)
{
	struct libmnt_update *upd;
	struct libmnt_fs *fs;
	int ret;

	if (geteuid() != 0)
		return 0; /* utab is root's; umount(8) runs no helper for users anyway */
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
		ret = mnt_fs_set_options(fs, "helper=dmafs");
	if (!ret)
		ret = mnt_update_set_fs(upd, 0, NULL, fs);
	if (ret == 0 && mnt_update_is_ready(upd))
		ret = mnt_update_table(upd, NULL);
	mnt_free_update(upd);
	mnt_unref_fs(fs);
	return ret > 0 ? 0 : ret;
}
