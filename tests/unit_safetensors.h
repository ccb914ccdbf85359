/* SPDX-License-Identifier: MIT */
/*
 * unit_safetensors.h - what unit_safetensors' files share: the work directory and the
 * files written into it, and the checks of dmafs_model_open (unit_safetensors.c), and
 * the tests of unit_safetensors-open.c and unit_safetensors-place.c that main() runs.
 */
#ifndef UNIT_SAFETENSORS_H
#define UNIT_SAFETENSORS_H

#include <stddef.h>

#define T_UNIT_SHARED /* t_failures: one count for all of unit_safetensors' files */
#include "t_unit.h"

struct dmafs_model;

/* unit_safetensors.c: the work directory (under /dev/shm or /tmp), the last error message
 * of dmafs_model_open, and the source tree (top_srcdir, for tools/dmafs-synth-model). */
extern char work[256];
extern char errmsg[1024];
extern const char *srcdir;

void wfile(const char *name, const void *buf, size_t len);
/* A safetensors file: 8-byte length, @n bytes of @json, then @data bytes of a pattern. */
void mkst_n(const char *name, const char *json, size_t n, size_t data);
void mkst(const char *name, const char *json, size_t data);
/* @p gets the path of @name in the work directory. */
void path_of(char *p, size_t len, const char *name);
/* @name must be refused with @want, and the message name the file and contain @what. */
void refuse_at(int line, const char *name, int want, const char *what);
#define refuse(name, want, what) refuse_at(__LINE__, name, want, what)
/* The model @name (in the work directory, or an absolute path) opens; NULL and a failed
 * check if not. */
struct dmafs_model *open_ok_at(int line, const char *name);
#define open_ok(name) open_ok_at(__LINE__, name)

/* A file of one tensor "a" (BF16 [2,3], 12 bytes). */
#define S1 "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}"

/* unit_safetensors-open.c: header validation rules, valid edge cases, directories. */
void test_rules(void);
void test_valid(void);
void test_dirs(void);

/* unit_safetensors-place.c: placements after a change and a removal; generated models
 * (0: skipped, no python3). */
void test_stale(void);
void test_removed(void);
int test_generated(void);

#endif
