/* SPDX-License-Identifier: MIT */
/*
 * octal.h - undo the \ooo escapes of /proc/self/mountinfo and /proc/mounts (space, tab,
 * newline and backslash in paths), used by libdmafs and by the daemon's mount records.
 */
#ifndef DMAFS_OCTAL_H
#define DMAFS_OCTAL_H

/* In place: every \ooo (first digit 0-3) becomes its byte; the rest is copied. */
static inline void unescape_octal(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

#endif
