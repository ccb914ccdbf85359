// SPDX-License-Identifier: MIT
/*
 * check-mount.c - what dmafs-check reports about a dmafs mount: its members, the space
 * they hold, what its daemon noted at mount, its warm tier and the path a placement into
 * each target takes, and why.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "io/scan.h"
#include "libdmafs-int.h"
#include "tool.h"
#include "util/mountrec.h"

/* ---- a mount ---- */

/* Logical block size of the device holding a regular file, from sysfs. */
static int sysfs_lbs(dev_t dev)
{
	char p[128];
	FILE *f;
	int v = -1;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/logical_block_size", major(dev), minor(dev));
	f = fopen(p, "re");
	if (!f) {
		/* a partition: its queue is the parent's */
		snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/../queue/logical_block_size", major(dev),
			 minor(dev));
		f = fopen(p, "re");
	}
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void member(int i, const char *path)
{
	struct stat st;
	char desc[512];
	int lbs = -1, blk = 0;

	if (stat(path, &st)) {
		snprintf(desc, sizeof(desc), "cannot stat: %s%s", strerror(errno),
			 path[0] != '/' ? " (a relative path is relative to the daemon's working directory)" : "");
	} else if (S_ISBLK(st.st_mode)) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		blk = 1;
		if (fd >= 0 && ioctl(fd, BLKSSZGET, &lbs) == 0)
			snprintf(desc, sizeof(desc), "block device, logical block size %d", lbs);
		else
			snprintf(desc, sizeof(desc), "block device, logical block size unknown (%s)",
				 strerror(errno));
		if (fd >= 0)
			close(fd);
	} else if (S_ISREG(st.st_mode)) {
		lbs = sysfs_lbs(st.st_dev);
		if (lbs > 0)
			snprintf(desc, sizeof(desc), "image file, not a block device (its device's logical block size %d)", lbs);
		else
			snprintf(desc, sizeof(desc), "image file, not a block device (on a filesystem without a block device)");
	} else {
		snprintf(desc, sizeof(desc), "neither a block device nor a file");
	}
	if (json) {
		open_(NULL, NULL, 0);
		kv("index", NULL, 1, "%d", i);
		kv("path", NULL, 0, "%s", path);
		kv("block_device", NULL, 1, "%s", blk ? "true" : "false");
		kv("logical_block_size", NULL, 1, "%d", lbs);
		kv("description", NULL, 0, "%s", desc);
		close_(0);
	} else {
		indent();
		printf("%d: %s  %s\n", i, path, desc);
	}
}

static int path_rank(int path)
{
	/* Faster paths have smaller numbers; NONE and POSIX never satisfy --require. cuFile in
	 * compatibility mode is no p2p (no DMA into the GPU) but meets staged. */
	if (path == DMAFS_PATH_P2P_COMPAT)
		return DMAFS_PATH_STAGED;
	return path >= DMAFS_PATH_P2P && path <= DMAFS_PATH_HOST ? path : 99;
}

/*
 * Where @st's mount is and what it is made of. The members come from the daemon's record
 * @rec when there is one (a mount by label shows only the label as its source).
 */
static void mount_source(const char *arg, const struct stat *st, const struct mountrec *rec)
{
	struct mountinfo mi;
	const char *list;
	char **m;
	int n, ret = mountinfo_find(st->st_dev, arg, &mi);

	if (ret) {
		kv("mount", "mount", 0, "not found in /proc/self/mountinfo (%s)", strerror(-ret));
		return;
	}
	list = rec && rec->members[0] ? rec->members : mi.source;
	kv("mountpoint", "mount point", 0, "%s", mi.mnt);
	kv("fstype", "type", 0, "%s", mi.fstype);
	if (!strcmp(mi.fstype, DMAFS_FSTYPE) && strcmp(list, mi.source))
		kv("source", "source", 0, "%s", mi.source);
	if (!strcmp(mi.fstype, DMAFS_FSTYPE) && strncmp(list, "dmafs:", 6) &&
	    (n = mountinfo_members(list, &m)) > 0) {
		open_("members", "members:", 1);
		for (int i = 0; i < n; i++) {
			member(i, m[i]);
			free(m[i]);
		}
		free(m);
		close_(1);
	} else if (!strcmp(list, mi.source)) {
		kv("source", "source", 0, "%s", mi.source);
	}
	mountinfo_free(&mi);
}

/* The daemon's pid and the notes it made at mount (@rec's notices, cut into lines). */
static void daemon_notes(struct mountrec *rec)
{
	kv("daemon_pid", "daemon", 1, "%d", (int)rec->pid);
	open_("notices", "notices (not failures; the daemon's log has them too):", 1);
	for (char *line = rec->notice, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break; /* a note cut short by the record's size */
		*nl = '\0';
		if (json) {
			jsep();
			jstr(line);
		} else {
			indent();
			printf("%s\n", line);
		}
	}
	if (!json && !rec->notice[0]) {
		indent();
		printf("none\n");
	}
	close_(1);
}

/* The path a placement into each target takes, and why. 1 if one is @require or faster. */
static int placement_paths(const struct dmafs_caps *c, int require)
{
	const struct { const char *key; const struct dmafs_target_caps *t; } tg[] = {
		{ "host", &c->host }, { "cuda", &c->cuda }, { "hip", &c->hip },
	};
	int ok = 0;

	open_("placement", "placement (path a placement into each target takes, and why):", 0);
	for (size_t i = 0; i < 3; i++) {
		const struct dmafs_target_caps *t = tg[i].t;

		if (path_rank(t->path) <= require)
			ok = 1;
		if (json) {
			open_(tg[i].key, NULL, 0);
			kv("path", NULL, 0, "%s", dmafs_path_name(t->path));
			kv("devices", NULL, 1, "%d", t->devices);
			kv("why", NULL, 0, "%s", t->why);
			close_(0);
		} else {
			indent();
			printf("%-5s %-7s %s\n", tg[i].key, dmafs_path_name(t->path), t->why);
		}
	}
	close_(0);
	return ok;
}

/* The warm tier the daemon reports (DMAFS_IOC_INFO, which dmafs_session_caps just asked). */
static void warm_tier(const struct dmafs_ioc_info *i)
{
	if (!json && !i->tier_size) {
		kv("tier", "warm tier", 0, "off (mount option tier=)");
		return;
	}
	open_("tier", "warm tier (file data the daemon keeps in memory for placements):", 0);
	kv("size", "size", 1, "%llu", (unsigned long long)i->tier_size);
	kv("held", "bytes held", 1, "%llu", (unsigned long long)i->tier_held);
	kv("hits", "hits", 1, "%llu", (unsigned long long)i->tier_hits);
	kv("misses", "misses", 1, "%llu", (unsigned long long)i->tier_misses);
	kv("served", "bytes served", 1, "%llu", (unsigned long long)i->tier_served);
	kv("filled", "bytes filled", 1, "%llu", (unsigned long long)i->tier_filled);
	kv("evicted", "chunks evicted", 1, "%llu", (unsigned long long)i->tier_evicted);
	kv("cap", "bytes it may hold now", 1, "%llu", (unsigned long long)i->tier_cap);
	kv("resident", "bytes in segments", 1, "%llu", (unsigned long long)i->tier_resident);
	kv("pinned", "bytes pinned for GPUs", 1, "%llu", (unsigned long long)i->tier_pinned);
	kv("shrunk", "bytes given back", 1, "%llu", (unsigned long long)i->tier_shrunk);
	kv("min_free", "memory left free", 1, "%llu", (unsigned long long)i->tier_min_free);
	kv("fill", "filled (tier_fill=)", 0, "%s", i->tier_fill ? "idle" : "now");
	if (i->tier_fill) {
		kv("fill_waiting", "ranges waiting", 1, "%u", i->tier_waiting);
		kv("filled_idle", "bytes filled later", 1, "%llu",
		   (unsigned long long)i->tier_filled_idle);
		kv("fill_dropped", "ranges given up", 1, "%llu", (unsigned long long)i->tier_dropped);
	}
	close_(0);
}

/*
 * The filesystem's UUID and label, and each member's size, used and free bytes, from the
 * daemon's user.dmafs.members (dmafs(8)); @paths[0..@npaths) name the members where known.
 * A daemon older than that attribute: nothing is shown.
 */
static void fs_space(const char *arg, char **paths, int npaths)
{
	struct { unsigned long long size, data, free, bad, healed; char uuid[40], state[16]; } m[FMT_MAX_MEMBERS];
	char v[8192], uuid[40] = "", *label = NULL, *line, *save = NULL, s1[32], s2[32], s3[32];
	unsigned long long tdata = 0, tfree = 0, lsize = 0, lsnap = 0, linodes = 0;
	ssize_t len = getxattr(arg, "user.dmafs.members", v, sizeof(v) - 1);
	unsigned n = 0, k;
	char lplace[16] = "", profile[16] = "";

	if (len <= 0)
		return;
	v[len] = '\0';
	for (line = strtok_r(v, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "uuid=", 5))
			snprintf(uuid, sizeof(uuid), "%s", line + 5);
		else if (!strncmp(line, "label=", 6))
			label = line + 6;
		else if (!strncmp(line, "profile=", 8))
			snprintf(profile, sizeof(profile), "%s", line + 8);
		else if (n < FMT_MAX_MEMBERS &&
			 sscanf(line, "member=%u uuid=%39s size=%llu data=%llu free=%llu", &k, m[n].uuid,
				&m[n].size, &m[n].data, &m[n].free) == 5 && k == n) {
			const char *st = strstr(line, " state=");

			/* a daemon from before the data profiles says no state */
			if (!st || sscanf(st, " state=%15s bad=%llu healed=%llu", m[n].state, &m[n].bad,
					  &m[n].healed) != 3) {
				snprintf(m[n].state, sizeof(m[n].state), "ok");
				m[n].bad = m[n].healed = 0;
			}
			n++;
		}
		else if (sscanf(line, "log=%15s size=%llu snapshot=%llu inodes=%llu", lplace, &lsize,
				&lsnap, &linodes) != 4)
			continue;
	}
	kv("uuid", "filesystem UUID", 0, "%s", uuid);
	kv("label", "label", 0, "%s", label && (*label || json) ? label : "(none)");
	if (profile[0])
		kv("data_profile", "data profile", 0, "%s", strcmp(profile, "mirror") ? profile
			: json ? profile : "mirror (two copies of every block, the second on the next member)");
	open_("space", "space (each member's data region: size, used, free):", 1);
	for (k = 0; k < n; k++) {
		const char *path = (int)k < npaths ? paths[k] : "?";

		tdata += m[k].data;
		tfree += m[k].free;
		if (json) {
			open_(NULL, NULL, 0);
			kv("index", NULL, 1, "%u", k);
			kv("path", NULL, 0, "%s", path);
			kv("member_uuid", NULL, 0, "%s", m[k].uuid);
			kv("member_size", NULL, 1, "%llu", m[k].size);
			kv("size", NULL, 1, "%llu", m[k].data);
			kv("used", NULL, 1, "%llu", m[k].data - m[k].free);
			kv("free", NULL, 1, "%llu", m[k].free);
			kv("state", NULL, 0, "%s", m[k].state);
			kv("bad_blocks", NULL, 1, "%llu", m[k].bad);
			kv("healed_blocks", NULL, 1, "%llu", m[k].healed);
			close_(0);
		} else {
			indent();
			printf("%u: %s  size %s  used %s  free %s  (member UUID %s)", k, path,
			       util_fmt_size(m[k].data, s1, sizeof(s1)),
			       util_fmt_size(m[k].data - m[k].free, s2, sizeof(s2)),
			       util_fmt_size(m[k].free, s3, sizeof(s3)), m[k].uuid);
			if (strcmp(m[k].state, "ok"))
				printf("  %s: %s", m[k].state, !strcmp(m[k].state, "missing")
				       ? "its files are read from their other copies"
				       : "it serves no reads; replace it (dmafs-replace(8))");
			if (m[k].bad)
				printf("  %llu bad block%s read from the other copy, %llu rewritten", m[k].bad,
				       m[k].bad == 1 ? "" : "s", m[k].healed);
			printf("\n");
		}
	}
	if (!json && n > 1) {
		indent();
		printf("all: size %s  used %s  free %s\n", util_fmt_size(tdata, s1, sizeof(s1)),
		       util_fmt_size(tdata - tfree, s2, sizeof(s2)), util_fmt_size(tfree, s3, sizeof(s3)));
	}
	close_(1);
	if (!lplace[0]) /* a daemon from before the log could grow */
		return;
	if (json) {
		open_("metadata_log", NULL, 0);
		kv("place", NULL, 0, "%s", lplace);
		kv("size", NULL, 1, "%llu", lsize);
		kv("snapshot", NULL, 1, "%llu", lsnap);
		kv("inodes", NULL, 1, "%llu", linodes);
		close_(0);
	} else {
		kv("metadata_log", "metadata log", 0, "%s of %s on member%s (last snapshot %s, %llu inodes)",
		   strcmp(lplace, "areas") ? "in its halves" : "grown into two areas",
		   util_fmt_size(lsize, s1, sizeof(s1)), n > 1 ? "s 0 and 1" : " 0",
		   util_fmt_size(lsnap, s2, sizeof(s2)), linodes);
	}
}

/* The member paths of @arg's mount (the daemon's record @rec, else mountinfo); a count or 0. */
static int member_paths(const char *arg, const struct stat *st, const struct mountrec *rec, char ***out)
{
	struct mountinfo mi;
	int n = 0;

	*out = NULL;
	if (rec && rec->members[0]) {
		n = mountinfo_members(rec->members, out);
		return n > 0 ? n : 0;
	}
	if (mountinfo_find(st->st_dev, arg, &mi))
		return 0;
	if (strncmp(mi.source, "dmafs:", 6))
		n = mountinfo_members(mi.source, out);
	mountinfo_free(&mi);
	return n > 0 ? n : 0;
}

/* The mount of @arg: 1 when a target's path is @require or faster, 0 when not, -1 on error. */
int check_mount(const char *arg, int require)
{
	struct dmafs_session *s;
	struct dmafs_caps c;
	static struct mountrec rec;
	struct stat st;
	int ret, ok, have_rec;

	if (stat(arg, &st)) {
		tool_err("%s: %s", arg, strerror(errno));
		return -1;
	}
	open_("mount", "Mount", 0);
	kv("path", "path", 0, "%s", arg);
	have_rec = mountrec_find_live(major(st.st_dev), minor(st.st_dev), getuid(), &rec) == 0;
	mount_source(arg, &st, have_rec ? &rec : NULL);
	if (have_rec)
		daemon_notes(&rec);
	ret = dmafs_session_open(arg, &s);
	if (ret) {
		tool_err("%s: cannot open a session: %s", arg, dmafs_strerror(ret));
		close_(0);
		return -1;
	}
	ret = dmafs_session_caps(s, &c);
	if (ret) {
		tool_err("%s: the daemon does not answer: %s", arg, dmafs_strerror(ret));
		dmafs_session_close(s);
		close_(0);
		return -1;
	}
	kv_bool("on_dmafs", "on dmafs", c.on_dmafs);
	if (c.on_dmafs) {
		char **paths;
		int np = member_paths(arg, &st, have_rec ? &rec : NULL, &paths);

		kv("proto_version", "protocol", 1, "%d", c.proto_version);
		kv("members_count", "member count", 1, "%u", c.members);
		kv("stripe_unit", "stripe unit", 1, "%u", c.stripe_unit);
		fs_space(arg, paths, np);
		for (int i = 0; i < np; i++)
			free(paths[i]);
		free(paths);
		kv("staging_bytes", "staging per GPU", 1, "%llu", (unsigned long long)c.staging_bytes);
		warm_tier(&s->info);
	}
	ok = placement_paths(&c, require);
	close_(0);
	dmafs_session_close(s);
	return ok;
}
