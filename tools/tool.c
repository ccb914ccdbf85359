// SPDX-License-Identifier: MIT
/* tool.c - the tools' error messages (tool.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tool.h"

/* Written once by tool_init() before any thread starts, read-only afterwards. */
static const char *name = "dmafs";

void tool_init(const char *n)
{
	const char *slash;

	if (!n || !*n)
		return;
	slash = strrchr(n, '/');
	name = slash && slash[1] ? slash + 1 : n;
}

const char *tool_name(void) { return name; }

void tool_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
