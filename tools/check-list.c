// SPDX-License-Identifier: MIT
/*
 * check-list.c - dmafs-check --list: the dmafs filesystems on the machine's block
 * devices and their members, missing and unusable ones named (fs/io/scan.c finds them).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/scan.h"
#include "tool.h"

/* ---- dmafs filesystems on the block devices (--list) ---- */

/* A label as text: control characters escaped (a label is any 64 bytes). */
static const char *label_text(const char *label, char *buf, size_t len)
{
	size_t k = 0;

	for (const unsigned char *c = (const unsigned char *)label; *c && k + 5 < len; c++)
		k += (size_t)snprintf(buf + k, len - k, (*c < 0x20 || *c == 0x7f) ? "\\x%02x" : "%c", *c);
	buf[k] = '\0';
	return buf;
}

static void list_fs(const struct scan_fs *fs)
{
	const struct fmt_sb *sb = fs->sb;
	char u[40], lab[300], size[32];

	util_uuid_str(sb->fs_uuid, u);
	label_text(sb->label, lab, sizeof(lab));
	if (json) {
		open_(NULL, NULL, 0);
		kv("label", NULL, 0, "%s", lab);
		kv("uuid", NULL, 0, "%s", u);
		kv("member_count", NULL, 1, "%u", sb->member_count);
		kv("members_found", NULL, 1, "%d", fs->found);
		kv_bool("complete", NULL, (unsigned)fs->found == sb->member_count && fs->dup < 0);
		open_("members", NULL, 1);
	} else {
		printf("Label: %s%s%s  UUID: %s\n", *lab ? "'" : "", *lab ? lab : "none", *lab ? "'" : "", u);
		printf("\tmembers: %u", sb->member_count);
		if ((unsigned)fs->found < sb->member_count)
			printf(", %u MISSING", sb->member_count - (unsigned)fs->found);
		printf("\n");
	}
	for (unsigned i = 0; i < sb->member_count; i++) {
		const struct scan_dev *d = fs->member[i];
		char mu[40];

		util_uuid_str(sb->member_uuid[i], mu);
		if (json) {
			open_(NULL, NULL, 0);
			kv("index", NULL, 1, "%u", i);
			if (d) {
				kv("path", NULL, 0, "%s", d->path);
				kv("size", NULL, 1, "%llu", (unsigned long long)d->size);
			} else {
				kv("path", NULL, 1, "null");
			}
			kv_bool("missing", NULL, !d);
			kv("member_uuid", NULL, 0, "%s", mu);
			if (d)
				kv_bool("superblock_from_copy", NULL, d->from_copy);
			close_(0);
		} else if (d) {
			printf("\tmember %2u  %-20s %10s%s\n", i, d->path,
			       util_fmt_size(d->size, size, sizeof(size)),
			       d->from_copy ? "  (primary superblock damaged: read from its copy)" : "");
		} else {
			printf("\tmember %2u  MISSING (member UUID %s)\n", i, mu);
		}
	}
	if (json)
		close_(1);
	if (fs->dup >= 0) {
		if (json) {
			open_("duplicate", NULL, 0);
			kv("index", NULL, 1, "%d", fs->dup);
			kv("path", NULL, 0, "%s", fs->member[fs->dup]->path);
			kv("other_path", NULL, 0, "%s", fs->dup_dev->path);
			close_(0);
		} else {
			printf("\tmember %d is on two devices, %s and %s: name the members by path to mount\n",
			       fs->dup, fs->member[fs->dup]->path, fs->dup_dev->path);
		}
	}
	if (json)
		close_(0);
}

/*
 * The superblocks this dmafs cannot use (another format version, damaged in both copies),
 * after @shown filesystems; only in the full list (@all). Returns how many.
 */
static int list_unusable(const struct scan_result *r, int shown, int all)
{
	int unusable = 0;

	if (json)
		open_("unusable", NULL, 1);
	for (int i = 0; all && i < r->n; i++) {
		const struct scan_dev *d = &r->dev[i];
		char why[128];

		if (!d->err)
			continue;
		if (d->err == -EPROTONOSUPPORT)
			snprintf(why, sizeof(why), "dmafs on-disk format version %u; this dmafs reads versions up to %d",
				 d->version, FMT_VERSION_MAX);
		else
			snprintf(why, sizeof(why), "%s in both copies",
				 d->err == -EBADMSG ? "superblock checksum mismatch" : "superblock fields inconsistent");
		if (json) {
			open_(NULL, NULL, 0);
			kv("path", NULL, 0, "%s", d->path);
			kv("why", NULL, 0, "%s", why);
			close_(0);
		} else {
			printf("%s%s  %s\n", unusable ? "" : shown ? "\nNot usable:\n" : "Not usable:\n", d->path, why);
		}
		unusable++;
	}
	if (json)
		close_(1);
	return unusable;
}

/*
 * List the dmafs filesystems on the block devices, or the ones @name (LABEL=, UUID=)
 * names. Returns CHECK_EXIT_OK when every one listed has all its members,
 * CHECK_EXIT_MISSING when one lacks a member or has one twice, or when @name matches
 * none, CHECK_EXIT_ERR on an error.
 */
int list_filesystems(const char *name)
{
	struct scan_result r;
	struct scan_fs *fs = NULL;
	int nfs, ret, shown = 0, bad = 0, unusable = 0;
	const char *v;
	size_t vlen;

	if (name && scan_source_kind(name, &v, &vlen) <= 0) {
		tool_err("%s: not a filesystem name: LABEL=NAME, UUID=UUID, dmafs:LABEL=NAME or dmafs:UUID=UUID",
			name);
		return CHECK_EXIT_ERR;
	}
	ret = scan_block_devices(&r);
	if (ret) {
		tool_err("cannot list the block devices in /sys/class/block: %s (is sysfs mounted?)",
			strerror(-ret));
		return CHECK_EXIT_ERR;
	}
	nfs = scan_filesystems(&r, &fs);
	if (nfs < 0) {
		tool_err("%s", strerror(-nfs));
		scan_result_free(&r);
		return CHECK_EXIT_ERR;
	}
	if (json) {
		putchar('{');
		kv("version", NULL, 0, "%s", PACKAGE_VERSION);
		open_("filesystems", NULL, 1);
	}
	for (int i = 0; i < nfs; i++) {
		if (name && !scan_matches(fs[i].sb, name))
			continue;
		if (shown++ && !json)
			putchar('\n');
		list_fs(&fs[i]);
		if ((unsigned)fs[i].found < fs[i].sb->member_count || fs[i].dup >= 0)
			bad = 1;
	}
	if (json)
		close_(1);
	unusable = list_unusable(&r, shown, !name);
	if (json) {
		kv("devices_read", NULL, 1, "%d", r.candidates - r.denied - r.failed);
		kv("devices_denied", NULL, 1, "%d", r.denied);
		kv("devices_failed", NULL, 1, "%d", r.failed);
		printf("\n}\n");
	} else if (!shown && !unusable) {
		printf("no dmafs filesystem%s%s on this machine's block devices\n", name ? " with " : "",
		       name ? name : "");
	}
	/* a list that may be short says so where scripts parsing the output do not look */
	if (r.denied)
		tool_err("%d block device%s could not be opened (%s%s: permission denied%s): the list may be incomplete",
			r.denied, r.denied == 1 ? "" : "s", r.denied_path, r.denied > 1 ? " and others" : "",
			geteuid() ? "; run as root" : "");
	if (r.failed)
		tool_err("%d block device%s could not be read (%s%s): the list may be incomplete",
			r.failed, r.failed == 1 ? "" : "s", r.failed_path, r.failed > 1 ? " and others" : "");
	if (!shown && !json && unusable == 0)
		tool_err("image files are not scanned: attach them with losetup -f --show IMAGE");
	free(fs);
	scan_result_free(&r);
	if (name && !shown)
		return CHECK_EXIT_MISSING;
	return bad ? CHECK_EXIT_MISSING : CHECK_EXIT_OK;
}
