// SPDX-License-Identifier: MIT
/*
 * label.c - dmafs-label: show, or change, the label and the UUID of an unmounted dmafs
 * filesystem. The label and the UUID are in every member's superblock (both copies); the
 * UUID also in the headers of the metadata log (members 0 and 1), which are rewritten
 * first. A label that another dmafs filesystem on the block devices has is refused
 * without --force: LABEL= would name two filesystems and mount neither.
 *
 * A change that is interrupted (power loss) leaves some members with the old values and
 * some with the new: running the same command again finishes it, also for the UUID,
 * whose mixed state no other tool accepts (a mount refuses members of two filesystems).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/member.h"
#include "io/scan.h"
#include "store/journal.h"
#include "tool.h"

/* What the options ask for. */
struct label_opt {
	const char *label;	/* NULL: keep */
	uint8_t uuid[16];
	int set_uuid;
	int random_uuid;	/* -U random: uuid generated */
	int force, quiet;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dmafs-label [-L LABEL] [-U UUID|random] [-f] [-q] MEMBER[,MEMBER...] [MEMBER...]\n"
		"       dmafs-label [-L LABEL] [-U UUID|random] [-f] [-q] LABEL=LABEL|UUID=UUID\n"
		"Show the label and UUID of an unmounted dmafs filesystem, or change them.\n"
		"  -L, --label LABEL  new label: up to %d bytes, no control characters, none of\n"
		"                     / \\ \" , and no space at either end (\"\" removes the label)\n"
		"  -U, --uuid UUID    new filesystem UUID: 32 hex digits (dashes allowed), or random\n"
		"  -f, --force        set a label that another dmafs filesystem on this machine has\n"
		"  -q, --quiet        print only errors\n"
		"Exit status: 0 done, 1 error. See dmafs-label(8).\n",
		FMT_LABEL_MAX);
}

/* The label as text: control characters of an old label escaped. */
static const char *shown(const char *label, char *buf, size_t len)
{
	size_t k = 0;

	for (const unsigned char *c = (const unsigned char *)label; *c && k + 5 < len; c++)
		k += (size_t)snprintf(buf + k, len - k, (*c < 0x20 || *c == 0x7f) ? "\\x%02x" : "%c", *c);
	buf[k] = '\0';
	return buf;
}

static void print_ids(const struct fmt_sb *sb)
{
	char u[40], l[300];

	util_uuid_str(sb->fs_uuid, u);
	printf("LABEL=\"%s\" UUID=\"%s\"\n", shown(sb->label, l, sizeof(l)), u);
}

/*
 * Open the members of an interrupted UUID change to @uuid, which members_open() refuses
 * (members of "two filesystems"): every member of the plain list @list must be at its
 * place, each with the filesystem's old UUID or @uuid. Returns the count with *out and
 * the old UUID in @old, or -1 with the reason printed.
 */
static int open_resumed(const char *list, const uint8_t uuid[16], struct member **out,
			uint8_t old[16])
{
	struct member *ms = calloc(FMT_MAX_MEMBERS, sizeof(*ms));
	char *dup = strdup(list), *save = NULL, *tok, err[512];
	int n = 0, have_old = 0, ret = -1;

	if (!ms || !dup)
		goto out;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct member *m = &ms[n];

		if (n == FMT_MAX_MEMBERS) {
			tool_err("more than %d members given", FMT_MAX_MEMBERS);
			goto out;
		}
		n++;
		if (member_open(m, tok, MEMBER_OFFLINE, err, sizeof(err)) ||
		    member_read_sb(m, err, sizeof(err))) {
			tool_err("member %d: %s", n - 1, err);
			goto out;
		}
		if (m->sb.member_index != (unsigned)n - 1 || m->sb.member_count != ms[0].sb.member_count) {
			tool_err("member %d (%s): is member %u of %u: give the members in their order",
				 n - 1, tok, m->sb.member_index, m->sb.member_count);
			goto out;
		}
		if (!memcmp(m->sb.fs_uuid, uuid, 16))
			continue;
		if (have_old && memcmp(m->sb.fs_uuid, old, 16)) {
			tool_err("member %d (%s): belongs to a third filesystem: these members are not one filesystem in the middle of a UUID change",
				 n - 1, tok);
			goto out;
		}
		memcpy(old, m->sb.fs_uuid, 16);
		have_old = 1;
	}
	if (!n || (unsigned)n != ms[0].sb.member_count) {
		tool_err("%d members given; the filesystem has %u", n, n ? ms[0].sb.member_count : 0);
		goto out;
	}
	if (!have_old)
		memcpy(old, uuid, 16);
	*out = ms;
	ms = NULL;
	ret = n;
out:
	if (ms)
		members_close(ms, n);
	free(dup);
	return ret;
}

/* A label another dmafs filesystem on the block devices has: 0 if none (or --force). */
static int label_taken(const struct label_opt *o, struct member *ms, int n)
{
	dev_t skip[FMT_MAX_MEMBERS];
	char devs[1024], l[300];
	int ns = 0, users;

	for (int i = 0; i < n; i++) {
		struct stat st;

		if (ms[i].is_blkdev && !fstat(ms[i].fd, &st))
			skip[ns++] = st.st_rdev;
	}
	users = scan_label_users(o->label, NULL, skip, ns, devs, sizeof(devs));
	if (users < 0) {
		tool_err("cannot look for other filesystems labelled '%s' on the block devices: %s (--force skips the check)",
			 shown(o->label, l, sizeof(l)), strerror(-users));
		return -1;
	}
	if (!users || o->force)
		return 0;
	tool_err("label '%s' is already the label of %s dmafs filesystem on this machine (on %s): LABEL=%s would name two filesystems and mount neither; choose another label, or use --force",
		 shown(o->label, l, sizeof(l)), users == 1 ? "another" : "other", devs, l);
	return -1;
}

/* Write the new label and UUID (@old: the UUID the log and superblocks hold now). */
static int relabel(const struct label_opt *o, struct member *ms, int n, const uint8_t old[16])
{
	char u[40];
	int ret;

	if (o->set_uuid && memcmp(old, o->uuid, 16)) {
		util_uuid_str(o->uuid, u);
		if (!o->quiet && o->random_uuid)
			printf("new UUID %s (if this is interrupted, run dmafs-label -U %s with the same members again)\n",
			       u, u);
		ret = journal_set_uuid(ms, (unsigned)n, old, o->uuid);
		if (ret) {
			tool_err("writing the new UUID into the metadata log failed: %s (nothing else was changed: run the command again)",
				 strerror(-ret));
			return -1;
		}
	}
	for (int i = 0; i < n; i++) {
		if (o->set_uuid)
			memcpy(ms[i].sb.fs_uuid, o->uuid, 16);
		if (o->label)
			snprintf(ms[i].sb.label, sizeof(ms[i].sb.label), "%s", o->label);
		ret = member_write_sb(&ms[i]);
		if (ret) {
			tool_err("member %d (%s): writing the superblock failed: %s (run the command again to finish the change)",
				 i, ms[i].path, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

/* Parse -U: "random" or a UUID. 0, or -1 with the reason printed. */
static int parse_uuid_opt(struct label_opt *o, const char *arg)
{
	o->set_uuid = 1;
	if (!strcmp(arg, "random")) {
		o->random_uuid = 1;
		if (util_uuid_gen(o->uuid) == 0)
			return 0;
		tool_err("cannot make a random UUID: %s", strerror(errno));
		return -1;
	}
	if (util_uuid_parse(arg, strlen(arg), o->uuid)) {
		tool_err("--uuid %s: expected 32 hex digits (dashes allowed, as 3f2a1c9e-...) or random", arg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "label", required_argument, NULL, 'L' }, { "uuid", required_argument, NULL, 'U' },
		{ "force", no_argument, NULL, 'f' },	   { "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },	   { NULL, 0, NULL, 0 },
	};
	struct label_opt o = { 0 };
	char list[8192] = "", err[1024] = "", why[256];
	struct member *ms = NULL;
	const char *v;
	uint8_t old[16];
	size_t vlen;
	int c, n, change;

	tool_init("dmafs-label");
	while ((c = getopt_long(argc, argv, "L:U:fqh", lo, NULL)) != -1) {
		switch (c) {
		case 'L':
			if (fmt_label_check(optarg, why, sizeof(why))) {
				tool_err("label '%s': %s", optarg, why);
				return LABEL_EXIT_ERR;
			}
			o.label = optarg;
			break;
		case 'U':
			if (parse_uuid_opt(&o, optarg))
				return LABEL_EXIT_ERR;
			break;
		case 'f': o.force = 1; break;
		case 'q': o.quiet = 1; break;
		case 'h': usage(stdout); return LABEL_EXIT_OK;
		default: usage(stderr); return LABEL_EXIT_ERR;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return LABEL_EXIT_ERR;
	}
	for (int i = optind; i < argc; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i > optind ? "," : "", argv[i]);
	change = o.label || o.set_uuid;
	n = members_open(list, (change ? 0 : MEMBER_RDONLY) | MEMBER_OFFLINE, &ms, err, sizeof(err));
	if (n == -EXDEV && o.set_uuid && !o.random_uuid &&
	    scan_source_kind(list, &v, &vlen) == SCAN_NOT_NAME) {
		/* members of two filesystems: maybe a change to this very UUID, interrupted */
		n = open_resumed(list, o.uuid, &ms, old);
		if (n < 0) {
			tool_err("%s", err);
			return LABEL_EXIT_ERR;
		}
	} else if (n < 0) {
		tool_err("%s", err);
		return LABEL_EXIT_ERR;
	} else {
		memcpy(old, ms[0].sb.fs_uuid, 16);
	}
	if (change && ((o.label && *o.label && label_taken(&o, ms, n)) || relabel(&o, ms, n, old))) {
		members_close(ms, n);
		return LABEL_EXIT_ERR;
	}
	if (!o.quiet)
		print_ids(&ms[0].sb);
	members_close(ms, n);
	return LABEL_EXIT_OK;
}
