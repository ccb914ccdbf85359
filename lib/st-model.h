/* SPDX-License-Identifier: MIT */
/*
 * st-model.h - what the model calls (safetensors.c) and the finding and reading of a
 * model's files (st-files.c) share: the model, its files, and the calls safetensors.c
 * makes into st-files.c (never the reverse). Internal to libdmafs.
 */
#ifndef DMAFS_ST_MODEL_H
#define DMAFS_ST_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dmafs.h"
#include "safetensors.h"

struct mfile {
	char *path;	/* absolute, symlinks not resolved: what the user named */
	char *shown;	/* for messages: as the user gave it (maybe relative) */
	char *name;	/* as listed in its directory or named by the index */
	uint64_t size;	/* at open */
	uint64_t base;	/* offset of the file in the model's layout */
	int fd;		/* open from read_header to dmafs_model_close; -1 before */
	/* at open, to refuse placing a file that was written since (-ESTALE) */
	struct timespec mtime;
	struct st_header h;
};

/*
 * A model. Everything is written by dmafs_model_open and read-only afterwards, except the
 * ptr field of each tensor, which dmafs_model_place writes: placements of one model must
 * not run concurrently (placing it into two buffers at once races on ptr).
 */
struct dmafs_model {
	unsigned nfiles;
	struct mfile *f;
	size_t nt;
	struct dmafs_tensor *t;	/* sorted by (file, offset) */
	size_t *by_name;	/* indices into t, sorted by name, for dmafs_model_find */
	uint64_t bytes;
};

/* Write the message into @err (when it has room); returns @ret. */
int st_fail(char *err, size_t len, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Open f->path for good (f->fd), read and validate its header; record size and mtime. */
int read_header(struct mfile *f, char *err, size_t errlen);
/*
 * Find the files of @path into @m and, for an index, parse it into @ix (its name as shown
 * in *@ixshown). @depth: 0 from dmafs_model_open (an HF repository directory resolves to
 * its snapshot once).
 */
int st_locate(struct dmafs_model *m, const char *path, int depth, struct st_index *ix,
	   char **ixshown, char *err, size_t errlen);

#endif
