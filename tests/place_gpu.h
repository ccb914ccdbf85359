/* SPDX-License-Identifier: MIT */
/*
 * place_gpu.h - what place_gpu's files share: the test file and the mount's placement
 * path (place_gpu.c), and mode basic's client (place_gpu-basic.c).
 */
#ifndef PLACE_GPU_H
#define PLACE_GPU_H

#include <stddef.h>
#include <stdint.h>

#define T_UNIT_SHARED /* t_failures: one count for both files (place_gpu.c) */
#include "t_unit.h"

struct dmafs_buf;
struct dmafs_session;
struct gpu;

/* place_gpu.c */
extern const char *path;	/* the test file, on dmafs */
extern char *ref;		/* its contents, from REF */
extern uint64_t fsize;		/* its size */
extern int target;		/* DMAFS_TARGET_CUDA or DMAFS_TARGET_HIP */
/* The direct path the mount offers (dmafs_session_caps): P2P, P2P_COMPAT or STAGED. */
extern int mount_path;
/* A placement may report path @p: STAGED or the mount's own. */
int path_ok(int p);
/* Register device memory @d of @size bytes with the runtime of target. */
int reg(struct dmafs_session *s, struct gpu *g, void *d, size_t size, struct dmafs_buf **b);

/* place_gpu-basic.c: mode basic's client; returns the number of failed checks. */
int run_client(struct gpu *g, unsigned long long seed);

#endif
