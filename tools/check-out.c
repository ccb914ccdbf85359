// SPDX-License-Identifier: MIT
/*
 * check-out.c - dmafs-check's output: each fact printed as an aligned text line or as
 * a member of one JSON document (see check.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "check.h"
#include "json.h"

/*
 * Output: every fact is a (section, key, value) triple printed as text or as JSON.
 * Sections open and close explicitly; lists of objects are sections whose keys repeat.
 */
int json;
static int first_in_obj = 1, depth;

void jstr(const char *s) { json_str(s); }

void indent(void)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", stdout);
}

void jsep(void)
{
	if (!first_in_obj)
		putchar(',');
	putchar('\n');
	first_in_obj = 0;
	indent();
}

/* Open an object (@key NULL inside an array) or, with @array, an array. */
void open_(const char *key, const char *title, int array)
{
	if (json) {
		jsep();
		if (key) {
			jstr(key);
			fputs(": ", stdout);
		}
		putchar(array ? '[' : '{');
		first_in_obj = 1;
	} else if (title) {
		indent();
		printf("%s\n", title);
	}
	depth++;
}

void close_(int array)
{
	depth--;
	if (json) {
		putchar('\n');
		indent();
		putchar(array ? ']' : '}');
		first_in_obj = 0;
	}
}

/* One value: a string (quoted in JSON), or raw JSON when @raw (numbers, true/false). */
void kv(const char *key, const char *label, int raw, const char *fmt, ...)
{
	char v[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	if (json) {
		jsep();
		jstr(key);
		fputs(": ", stdout);
		if (raw)
			fputs(v, stdout);
		else
			jstr(v);
	} else {
		indent();
		printf("%-22s %s\n", label ? label : key, v);
	}
}

/* A yes/no fact: true/false in JSON, yes/no in text. */
void kv_bool(const char *key, const char *label, int v)
{
	if (json)
		kv(key, label, 1, "%s", v ? "true" : "false");
	else
		kv(key, label, 0, "%s", v ? "yes" : "no");
}
