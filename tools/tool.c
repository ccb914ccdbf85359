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

void tool_progress(const char *what, unsigned long long done, unsigned long long total,
		   double elapsed_s, int final)
{
	const int w = 30;
	double frac = total ? (double)done / (double)total : 1.0, rate;
	char bar[64], left[32] = "";
	int fill;

	if (frac > 1)
		frac = 1;
	fill = (int)(frac * w);
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, ' ', (size_t)(w - fill));
	bar[w] = '\0';
	rate = elapsed_s > 0 ? (double)done / elapsed_s : 0;
	if (rate > 0 && done < total) {
		unsigned long s = (unsigned long)((double)(total - done) / rate + 0.5);

		snprintf(left, sizeof(left), " %lu:%02lu left", s / 60, s % 60);
	}
	fprintf(stderr, "\r%s%s[%s] %3d%% %.2f/%.2f GB %.2f GB/s%s\033[K%s", what ? what : "",
		what ? " " : "", bar, (int)(frac * 100), done / 1e9, total / 1e9, rate / 1e9, left,
		final ? "\r\033[K" : "");
	fflush(stderr);
}

void tool_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
