/* SPDX-License-Identifier: MIT */
/*
 * load-files.h - dmafs-load's file mode (load-files.c) and prefetch mode
 * (load-prefetch.c): the files of a run, their mounts, and the calls main() makes.
 */
#ifndef DMAFS_LOAD_FILES_H
#define DMAFS_LOAD_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpu.h"
#include "load-common.h"

struct file {
	char *path;
	int fd;		/* open from collect() on: every read of the file goes through it */
	uint64_t size;
	dev_t dev;
	uint64_t off;	/* in the whole allocation */
	int group;
	struct dmafs_result res;
	uint64_t held;	/* --prefetch: bytes the tier held already */
	int err;	/* -errno of a failed placement */
	int verified;	/* 1 ok, -1 mismatch, 0 not checked */
	uint64_t bad_at; /* first differing byte, when verified == -1 */
};

/* Files of one mount: one session and one registration. */
struct group {
	dev_t dev;
	struct dmafs_session *s;
	struct dmafs_buf *b;
	uint64_t base, size;	/* slice of the allocation */
	struct dmafs_caps caps;
	int caps_ok;
	struct dmafs_result total;
};

/* One run of the file mode: its options, the files and their mounts, the device memory. */
struct job {
	const struct load_opt *opt;
	char tname[32];		/* the target as the user names it: "host", "cuda:0" */
	struct file *files;
	size_t nfiles, capfiles;
	struct group *groups;
	size_t ngroups;
	struct gpu *gpu;
	char *gpumem;		/* GPU target: the allocation */
	int errors;		/* reported so far (each also printed); decides exit status 1 */
};

/* load-files.c */

/*
 * Add @path, opened now and kept open. A file that cannot be opened is reported and
 * skipped (it counts as an error). Returns 0, or -ENOMEM.
 */
int add_file(struct job *j, const char *path);
/* Every regular file of @paths (directories walked, each sorted) into @j; 0 or -1 (reported). */
int collect(struct job *j, char **paths, int n);
/* The file mode: place every file under @paths, report, verify. Returns the exit status. */
int load_files(struct job *j, char **paths, int n);

/* load-prefetch.c */

/* --prefetch: every file (or every file of each model) into its mount's tier, one at a time. */
int prefetch_files(struct job *j, char **paths, int n);

#endif
