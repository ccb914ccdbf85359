// SPDX-License-Identifier: MIT
/*
 * load-prefetch.c - dmafs-load --prefetch: every file (or every file of each model) read
 * into its mount's warm tier (dmafs_prefetch), placed nowhere, and reported.
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "json.h"
#include "load-files.h"
#include "tool.h"

/* --model with --prefetch: the files of each model (headers checked, as a load would). */
static int collect_models(struct job *j, char **paths, int n)
{
	for (int i = 0; i < n; i++) {
		struct dmafs_model *m;
		char err[512];
		int ret = dmafs_model_open(paths[i], &m, err, sizeof(err));

		if (ret) {
			tool_err("%s", err[0] ? err : dmafs_strerror(ret));
			return -1;
		}
		for (unsigned k = 0; k < dmafs_model_files(m) && !ret; k++)
			ret = add_file(j, dmafs_model_file(m, k));
		dmafs_model_close(m);
		if (ret)
			return -1;
	}
	return 0;
}

/* Prefetch @f whole; its result in f->res and f->held, or f->err. */
static void prefetch_file(struct job *j, struct file *f)
{
	f->err = dmafs_prefetch(f->fd, 0, DMAFS_TO_EOF, &f->res, &f->held);
	if (f->err == -EOPNOTSUPP)
		tool_err("%s: its mount has no warm tier, so there is nothing to prefetch into: mount it with -o tier=SIZE (dmafs(8), Warm tier)",
			 f->path);
	else if (f->err == -ENOTTY)
		tool_err("%s: not on a dmafs mount (or its daemon predates prefetch): nothing to prefetch into",
			 f->path);
	else if (f->err)
		tool_err("%s: %s", f->path, dmafs_strerror(f->err));
	j->errors += f->err != 0;
}

static void print_prefetch(const struct job *j, uint64_t read, uint64_t held, uint64_t elapsed)
{
	if (j->opt->json) {
		printf("{\n  \"prefetch\": true,\n  \"files\": [");
		for (size_t i = 0; i < j->nfiles; i++) {
			const struct file *f = &j->files[i];

			printf("%s\n    {\"file\": ", i ? "," : "");
			json_str(f->path);
			printf(", \"size\": %llu, \"read\": %llu, \"held\": %llu, \"seconds\": %.6f, \"error\": ",
			       (unsigned long long)f->size, (unsigned long long)f->res.bytes,
			       (unsigned long long)f->held, f->res.elapsed_ns / 1e9);
			if (f->err)
				json_str(dmafs_strerror(f->err));
			else
				printf("null");
			printf("}");
		}
		printf("\n  ],\n  \"total\": {\"files\": %zu, \"read\": %llu, \"held\": %llu, \"seconds\": %.6f, \"gbps\": %.3f},\n  \"errors\": %d\n}\n",
		       j->nfiles, (unsigned long long)read, (unsigned long long)held, elapsed / 1e9,
		       load_gbps(read, elapsed), j->errors);
		return;
	}
	for (size_t i = 0; i < j->nfiles && !j->opt->quiet; i++) {
		const struct file *f = &j->files[i];

		if (f->err)
			printf("%s  FAILED: %s\n", f->path, dmafs_strerror(f->err));
		else
			printf("%s  read %llu bytes  held %llu bytes  %.3f s  %.2f GB/s\n", f->path,
			       (unsigned long long)f->res.bytes, (unsigned long long)f->held,
			       f->res.elapsed_ns / 1e9, load_gbps(f->res.bytes, f->res.elapsed_ns));
	}
	printf("total  %zu files  read %llu bytes  held %llu bytes  %.3f s  %.2f GB/s  into the warm tier\n",
	       j->nfiles, (unsigned long long)read, (unsigned long long)held, elapsed / 1e9,
	       load_gbps(read, elapsed));
}

/* --prefetch: every file (or every file of each model) into its mount's tier, one at a time. */
int prefetch_files(struct job *j, char **paths, int n)
{
	uint64_t t0, read = 0, held = 0;

	if (j->opt->model ? collect_models(j, paths, n) : collect(j, paths, n))
		return LOAD_EXIT_ERR;
	if (j->nfiles == 0) {
		if (!j->errors)
			tool_err("no regular files found under %s%s", paths[0], n > 1 ? " ..." : "");
		return LOAD_EXIT_ERR;
	}
	t0 = dm_mono_ns();
	for (size_t i = 0; i < j->nfiles; i++) {
		prefetch_file(j, &j->files[i]);
		read += j->files[i].res.bytes;
		held += j->files[i].held;
	}
	print_prefetch(j, read, held, dm_mono_ns() - t0);
	fflush(stdout);
	return j->errors ? LOAD_EXIT_ERR : LOAD_EXIT_OK;
}
