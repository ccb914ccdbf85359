// SPDX-License-Identifier: MIT
/*
 * mountinfo.c - which mount a file lives on, and a dmafs mount's members, from
 * /proc/self/mountinfo. Used by the session (is this fuse.dmafs?) and by dmafs-check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "libdmafs-int.h"
#include "octal.h"

/* Length of the mount point @mnt as a path prefix of @path, or -1 if it is not one. */
static long prefix_len(const char *mnt, const char *path)
{
	size_t n = strlen(mnt);

	if (!path)
		return 0;
	if (!strcmp(mnt, "/"))
		return 1;
	if (strncmp(mnt, path, n) || (path[n] != '/' && path[n] != '\0'))
		return -1;
	return (long)n;
}

void mountinfo_free(struct mountinfo *m)
{
	free(m->mnt);
	free(m->fstype);
	free(m->source);
	memset(m, 0, sizeof(*m));
}

int mountinfo_find(dev_t dev, const char *path, struct mountinfo *out)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *rp = path ? realpath(path, NULL) : NULL;
	size_t cap = 0;
	long best = -2;
	int ret = -ENOENT;

	memset(out, 0, sizeof(*out));
	if (!f) {
		free(rp);
		return -errno;
	}
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok, *mnt = NULL, *fstype = NULL, *source = NULL;
		unsigned maj, min;
		int field = 0, after_dash = 0;
		long pl;

		line[strcspn(line, "\n")] = '\0';
		for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
			if (field == 2) {
				if (sscanf(tok, "%u:%u", &maj, &min) != 2)
					break;
			} else if (field == 4) {
				mnt = tok;
			} else if (field > 5 && !after_dash && !strcmp(tok, "-")) {
				after_dash = 1;
			} else if (after_dash == 1) {
				fstype = tok;
				after_dash = 2;
			} else if (after_dash == 2) {
				source = tok;
				break;
			}
		}
		if (!mnt || !fstype || !source || makedev(maj, min) != dev)
			continue;
		unescape_octal(mnt);
		pl = prefix_len(mnt, rp);
		if (pl <= best)
			continue;
		best = pl;
		mountinfo_free(out);
		unescape_octal(fstype);
		unescape_octal(source);
		out->mnt = strdup(mnt);
		out->fstype = strdup(fstype);
		out->source = strdup(source);
		if (!out->mnt || !out->fstype || !out->source) {
			mountinfo_free(out);
			ret = -ENOMEM;
			break;
		}
		ret = 0;
	}
	free(line);
	free(rp);
	fclose(f);
	return ret;
}

int mountinfo_members(const char *source, char ***out)
{
	size_t n = 1, len = strlen(source);
	char **v, *cur;
	int k = 0;

	for (const char *p = source; *p; p++) {
		if (p[0] == '\\' && p[1])
			p++;
		else if (*p == ',')
			n++;
	}
	v = calloc(n + 1, sizeof(*v));
	cur = v ? malloc(len + 1) : NULL;
	if (!cur) {
		free(v);
		return -ENOMEM;
	}
	for (const char *p = source;; p++) {
		char *d = cur;

		for (; *p && *p != ','; p++) {
			if (p[0] == '\\' && p[1])
				p++;
			*d++ = *p;
		}
		*d = '\0';
		v[k] = strdup(cur);
		if (!v[k]) {
			while (k--)
				free(v[k]);
			free(v);
			free(cur);
			return -ENOMEM;
		}
		k++;
		if (!*p)
			break;
	}
	free(cur);
	*out = v;
	return k;
}
