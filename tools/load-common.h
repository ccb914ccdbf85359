/* SPDX-License-Identifier: MIT */
/*
 * load-common.h - what dmafs-load's modes share (load-common.c): the options as main()
 * parsed them, the layout constants, the progress bar, the notices on the path a
 * placement took, and opening a session for a file. It needs nothing of the modes.
 */
#ifndef DMAFS_LOAD_COMMON_H
#define DMAFS_LOAD_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "dmafs.h"

#define LOAD_ALIGN 4096ULL
#define LOAD_VERIFY_CHUNK (8u << 20)
#define LOAD_MAX_GPUS 64

/* The options, as main() parsed them: read-only afterwards. */
struct load_opt {
	int target, device;
	int target_set;		/* --target given */
	int verify, json, quiet, list;
	int model;		/* --model, or every PATH a *.safetensors file */
	int prefetch;		/* --prefetch: into the mounts' warm tiers, no buffer */
	unsigned threads;
	int gpus[LOAD_MAX_GPUS]; /* --gpus */
	int ngpus;
};

double load_gbps(uint64_t bytes, uint64_t ns);
/* The slower of two DMAFS_PATH_* values, in dmafs.h's order; NONE never wins. */
int load_slower(int a, int b);
/* "host", "cuda:N", "hip:N", written into @buf. */
const char *load_target_name(int target, int device, char *buf, size_t len);

/*
 * Progress bar on stderr over @n buffers (dmafs_buf_placed), while placements run; only
 * when @show (not -q or --json) and stderr is a terminal. Stop draws the last state and
 * clears it.
 */
void load_progress_start(struct dmafs_buf *const *bufs, size_t n, uint64_t total, int show);
void load_progress_stop(void);

/*
 * Why placements into @target took @used rather than something faster: 1 and a sentence
 * in @buf, or 0 when @used was the best there is.
 */
int load_notice(const struct dmafs_caps *caps, int target, const char *tname, int used,
		char *buf, size_t len);

/*
 * dmafs_session_open() on @path, or, where @path is gone (-ENOENT), on the open file @fd
 * (/proc/self/fd/N): a file removed after it was opened still has its mount.
 */
int load_session_open(const char *path, int fd, struct dmafs_session **s);

#endif
