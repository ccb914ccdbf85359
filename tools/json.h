/* SPDX-License-Identifier: MIT */
/* json.h - the tools' --json output: one string, escaped, to stdout. */
#ifndef DMAFS_TOOLS_JSON_H
#define DMAFS_TOOLS_JSON_H

void json_str(const char *s);

#endif
