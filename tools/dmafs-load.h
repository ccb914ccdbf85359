/* SPDX-License-Identifier: MIT */
/*
 * dmafs-load.h - what the two halves of dmafs-load share: options, messages, the
 * progress bar and notices (dmafs-load.c, files) and the model mode (load-model.c).
 */
#ifndef DMAFS_LOAD_H
#define DMAFS_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "dmafs.h"

#define LOAD_ALIGN 4096ULL
#define LOAD_VERIFY_CHUNK (8u << 20)
#define LOAD_MAX_GPUS 64

enum { EXIT_OK = 0, EXIT_ERR = 1, EXIT_MISMATCH = 2 };

struct load_opt {
	int target, device;
	int target_set;		/* --target given */
	int verify, json, quiet, list;
	int model;		/* --model, or every PATH a *.safetensors file */
	unsigned threads;
	int gpus[LOAD_MAX_GPUS]; /* --gpus */
	int ngpus;
};
extern struct load_opt opt;
/* Errors reported so far (each also printed); decides exit status 1. */
extern int load_errors;

void load_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double load_gbps(uint64_t bytes, uint64_t ns);
void load_json_str(const char *s);
/* "host", "cuda:N", "hip:N", written into @buf. */
const char *load_target_name(int target, int device, char *buf, size_t len);

/*
 * Progress bar on stderr over @n buffers (dmafs_buf_placed), while placements run; only
 * when stderr is a terminal and not -q / --json. Stop draws the last state and clears it.
 */
void load_progress_start(struct dmafs_buf *const *bufs, size_t n, uint64_t total);
void load_progress_stop(void);

/*
 * Why placements into @target took @used rather than something faster: 1 and a sentence
 * in @buf, or 0 when @used was the best there is.
 */
int load_notice(const struct dmafs_caps *caps, int target, const char *tname, int used,
		char *buf, size_t len);

/* load-model.c: the model mode. main() hands over every PATH; returns an exit status. */
int load_models(char **paths, int n);

#endif
