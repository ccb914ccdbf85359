// SPDX-License-Identifier: MIT
/*
 * busy.c - which dmafs mount serves a member that another daemon cannot open.
 *
 * The members of a mounted filesystem are held by its daemon (a lock on an image file,
 * an exclusive open of a block device), so a second mount of the same filesystem fails
 * when it opens them; a second daemon could not share the metadata held in the first one's
 * memory anyway. The error then names the mount that has it, found by the member list that
 * is the mount's source (daemon/main.c), and the bind mount that shows it elsewhere.
 */
#include "io/busy.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/mountrec.h"

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* Is @real one of the comma-separated members of @source? */
static int lists(char *source, const char *real)
{
	for (char *save = NULL, *m = strtok_r(source, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
		char r[PATH_MAX];

		if (realpath(m, r) && !strcmp(r, real))
			return 1;
	}
	return 0;
}

/*
 * Is @real one of the members in a daemon record's list (mountrec.h: commas and
 * backslashes in a path escaped with a backslash)?
 */
static int rec_lists(const char *members, const char *real)
{
	char one[PATH_MAX], r[PATH_MAX];
	size_t k = 0;

	for (const char *c = members;; c++) {
		if (*c == '\\' && c[1]) {
			if (k + 1 < sizeof(one))
				one[k++] = *++c;
			continue;
		}
		if (*c == ',' || !*c) {
			one[k] = '\0';
			if (k && realpath(one, r) && !strcmp(r, real))
				return 1;
			k = 0;
			if (!*c)
				return 0;
			continue;
		}
		if (k + 1 < sizeof(one))
			one[k++] = *c;
	}
}

/*
 * Does the daemon serving device @dev ("major:minor") have @real among its members? For
 * a mount by LABEL= or UUID=, whose source names no member: its record says.
 */
static int record_lists(const char *dev, const char *real)
{
	struct mountrec *rec;
	unsigned major, minor;
	int found;

	if (sscanf(dev, "%u:%u", &major, &minor) != 2 || !(rec = malloc(sizeof(*rec))))
		return 0;
	found = mountrec_find_live(major, minor, getuid(), rec) == 0 && rec_lists(rec->members, real);
	free(rec);
	return found;
}

/* The mount point of the dmafs mount whose source lists @path into @mnt; 0 if none. */
static int served_by(const char *path, char *mnt, size_t len)
{
	char real[PATH_MAX], *line = NULL;
	size_t cap = 0;
	int found = 0;
	FILE *f;

	if (!realpath(path, real) || !(f = fopen("/proc/self/mountinfo", "re")))
		return 0;
	while (!found && getline(&line, &cap, f) > 0) {
		char *sep = strstr(line, " - "), *save = NULL, *fields[5], *type, *source;
		int k = 0;

		if (!sep)
			continue;
		*sep = '\0';
		for (char *t = strtok_r(line, " ", &save); t && k < 5; t = strtok_r(NULL, " ", &save))
			fields[k++] = t;
		type = strtok_r(sep + 3, " ", &save);
		source = strtok_r(NULL, " ", &save);
		if (k < 5 || !type || !source || strcmp(type, "fuse.dmafs"))
			continue;
		unescape(source);
		if (lists(source, real) || (strchr(source, '=') && record_lists(fields[2], real))) {
			unescape(fields[4]);
			snprintf(mnt, len, "%s", fields[4]);
			found = 1;
		}
	}
	free(line);
	fclose(f);
	return found;
}

int busy_mounted(const char *path)
{
	char mnt[PATH_MAX];

	return served_by(path, mnt, sizeof(mnt));
}

void busy_explain(const char *path, const char *otherwise, int offline, char *err, size_t errlen)
{
	char mnt[PATH_MAX];

	if (served_by(path, mnt, sizeof(mnt)) && offline)
		snprintf(err, errlen,
			 "%s: this filesystem is mounted on %s: unmount it first (umount %s)",
			 path, mnt, mnt);
	else if (served_by(path, mnt, sizeof(mnt)))
		snprintf(err, errlen,
			 "%s: this filesystem is mounted on %s already, and a dmafs filesystem is served by one daemon: to show it at another place as well, bind-mount that mount (mount --bind %s DIR)",
			 path, mnt, mnt);
	else
		snprintf(err, errlen, "%s: %s", path, otherwise);
}
