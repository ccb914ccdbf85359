// SPDX-License-Identifier: MIT
/* json.c - JSON string output shared by dmafs-load and dmafs-check. */
#include <stdio.h>

#include "json.h"

void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}
