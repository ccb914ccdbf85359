// SPDX-License-Identifier: MIT
/*
 * fsck-problem.c - what dmafs-fsck's checks share (fsck.h): the members, the metadata,
 * how much to repair, the problems found (held back with fsck -p until it is known
 * whether any repair may be written) and the paths that name inodes in them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fsck.h"

int repair, quiet, tty;
unsigned errors, fixed;
struct member *ms;
struct meta meta;

/* Is a problem of @level repaired in this run? */
int fixes(int level)
{
	return level != FIX_NONE && (repair == REPAIR_ALL || (repair == REPAIR_SAFE && level == FIX_SAFE));
}

/*
 * With REPAIR_SAFE the problems are held back (held, nheld) until the end: whether their
 * repairs are written depends on all of them (flush_problems).
 */
struct held {
	char *msg;
	const char *done; /* said after msg when the repair is written */
	int fix;
};
static struct held *held;
static size_t nheld, cheld;

/* One problem: "FIXED: msg done" when this run repairs it, "ERROR: msg" when not. */
void problem(int level, const char *done, const char *fmt, ...)
{
	char msg[8192];
	va_list ap;

	errors++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fixes(level))
		fixed++;
	if (repair == REPAIR_SAFE &&
	    !dm_grow(&held, &cheld, nheld + 1, sizeof(*held), 16) && (held[nheld].msg = strdup(msg))) {
		held[nheld].done = done;
		held[nheld++].fix = fixes(level);
		return;
	}
	printf("%s: %s%s\n", fixes(level) ? "FIXED" : "ERROR", msg, fixes(level) ? done : "");
}

/* Print the held problems, as repaired when @written, else all as errors. */
void flush_problems(int written)
{
	for (size_t k = 0; k < nheld; k++) {
		int f = written && held[k].fix;

		printf("%s: %s%s\n", f ? "FIXED" : "ERROR", held[k].msg, f ? held[k].done : "");
		free(held[k].msg);
	}
	nheld = 0;
}

/* ---- paths, for messages ---- */

struct parent *parents;
uint64_t maxino;

struct parent *par(uint64_t ino) { return ino <= maxino ? &parents[ino] : NULL; }

const char *path_of(uint64_t ino, char *buf, size_t len)
{
	char tmp[4096];
	int depth = 0;

	buf[0] = '\0';
	if (ino == FMT_ROOT_INO)
		return "/";
	while (ino != FMT_ROOT_INO && depth++ < 256) {
		struct parent *p = par(ino);

		if (!p || !p->name) {
			snprintf(tmp, sizeof(tmp), "<inode %llu>%s", (unsigned long long)ino, buf);
			snprintf(buf, len, "%s", tmp);
			return buf;
		}
		snprintf(tmp, sizeof(tmp), "/%s%s", p->name, buf);
		snprintf(buf, len, "%s", tmp);
		ino = p->dir;
	}
	return buf;
}
