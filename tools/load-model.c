// SPDX-License-Identifier: MIT
/*
 * load-model.c - dmafs-load's model mode: open a safetensors model with
 * dmafs_model_open (which validates every header), place it, report tensors, bytes, time,
 * rate and path, and with --verify compare every tensor with a POSIX read.
 *
 * One target: one buffer of dmafs_model_bytes, placed with dmafs_model_place.
 * --gpus LIST: shard i goes to GPU LIST[i % n], each GPU gets one buffer holding its
 * shards (4 KiB aligned, in model file order), and all GPUs are placed at once, one
 * thread per GPU running dmafs_place_fds over its shards. A shard is the unit: a
 * single tensor is never split over GPUs (no tensor parallelism), so a GPU holds whole
 * tensors of whole files, and GPUs get uneven loads when shards are uneven.
 * Every file is read through the descriptor dmafs_model_open keeps (dmafs_model_fd), for
 * the placement and for --verify: a shard removed during the load is still loaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "dmafs.h"
#include "gpu.h"
#include "json.h"
#include "load-model.h"
#include "tool.h"

/* One buffer: the whole model, or one GPU's shards under --gpus. */
struct slot {
	int target, dev;
	char name[32];		/* "host", "cuda:1" */
	struct dmafs_buf *b;
	char *mem;		/* GPU targets: our allocation */
	uint64_t size;
	size_t n;		/* files placed here */
	int *fds;		/* the model's descriptors of them */
	unsigned *files;	/* model file index of each */
	uint64_t *offs;
	struct dmafs_result *res, total;
	unsigned threads;	/* --threads */
	int err;
};

/* Every model of one run: the options, and the totals so far. */
struct models {
	const struct load_opt *opt;
	int first_json;		/* no model printed yet (--json) */
	uint64_t bytes, ns;
	size_t tensors, models;
	int path;
	int mismatches;
	int errors;		/* reported so far (each also printed); decides exit status 1 */
};

struct load {
	const struct load_opt *opt;
	struct models *run;
	const char *path;	/* as given */
	struct dmafs_model *m;
	struct dmafs_session *s;
	struct dmafs_caps caps;
	int caps_ok;
	struct gpu *gpu;
	struct slot *slots;
	int nslots;
	unsigned nfiles;
	uint64_t *fsize;	/* per file */
	int *fslot;		/* per file: its slot */
	uint64_t *foff;		/* per file: its offset in its slot's buffer */
	struct dmafs_result total;
	int err;		/* placement error */
	int verified;		/* 1 ok, -1 mismatch, 0 not done */
};

/* Where tensor @t lies in memory: its slot and the pointer there. */
static char *where(const struct load *l, const struct dmafs_tensor *t, const struct slot **sl)
{
	*sl = &l->slots[l->fslot[t->file]];
	if (!l->opt->ngpus)
		return t->ptr;
	return (*sl)->mem + l->foff[t->file] + t->file_offset;
}

/* ---- buffers ---- */

static int slot_buffer(struct load *l, struct slot *sl)
{
	int ret;

	if (sl->target == DMAFS_TARGET_HOST) {
		ret = dmafs_buf_alloc_host(l->s, sl->size, &sl->b);
	} else {
		if (sl->dev >= gpu_count(l->gpu)) {
			tool_err("%s: no such device (%d %s device(s) found)", sl->name, gpu_count(l->gpu),
				 sl->target == DMAFS_TARGET_CUDA ? "CUDA" : "HIP");
			return -ENODEV;
		}
		ret = gpu_mem_alloc(l->gpu, sl->dev, sl->size, (void **)&sl->mem);
		if (ret) {
			tool_err("%s: cannot allocate %llu bytes of device memory for %s: %s", sl->name,
				 (unsigned long long)sl->size, l->path, strerror(-ret));
			sl->mem = NULL;
			return ret;
		}
		ret = sl->target == DMAFS_TARGET_CUDA
			      ? dmafs_buf_register_cuda(l->s, sl->mem, sl->size, sl->dev, &sl->b)
			      : dmafs_buf_register_hip(l->s, sl->mem, sl->size, sl->dev, &sl->b);
	}
	if (ret) {
		tool_err("%s: cannot register %llu bytes of %s memory: %s", l->path,
			 (unsigned long long)sl->size, sl->name, dmafs_strerror(ret));
		sl->b = NULL;
	}
	return ret;
}

/* Files to slots: everything in one, or shard i on gpus[i % n]. */
static int plan(struct load *l)
{
	struct stat st;

	l->nfiles = dmafs_model_files(l->m);
	l->nslots = l->opt->ngpus ? l->opt->ngpus : 1;
	l->slots = calloc((size_t)l->nslots, sizeof(*l->slots));
	l->fsize = calloc(l->nfiles, sizeof(*l->fsize));
	l->fslot = calloc(l->nfiles, sizeof(*l->fslot));
	l->foff = calloc(l->nfiles, sizeof(*l->foff));
	if (!l->slots || !l->fsize || !l->fslot || !l->foff)
		return -ENOMEM;
	for (int k = 0; k < l->nslots; k++) {
		struct slot *sl = &l->slots[k];

		sl->target = l->opt->target;
		sl->threads = l->opt->threads;
		sl->dev = l->opt->ngpus ? l->opt->gpus[k] : l->opt->device;
		load_target_name(sl->target, sl->dev, sl->name, sizeof(sl->name));
		sl->fds = calloc(l->nfiles, sizeof(*sl->fds));
		sl->offs = calloc(l->nfiles, sizeof(*sl->offs));
		sl->files = calloc(l->nfiles, sizeof(*sl->files));
		sl->res = calloc(l->nfiles, sizeof(*sl->res));
		if (!sl->fds || !sl->offs || !sl->files || !sl->res)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < l->nfiles; i++) {
		struct slot *sl = &l->slots[i % (unsigned)l->nslots];

		if (fstat(dmafs_model_fd(l->m, i), &st)) {
			tool_err("%s: %s", dmafs_model_file(l->m, i), strerror(errno));
			return -errno;
		}
		l->fsize[i] = (uint64_t)st.st_size;
		l->fslot[i] = (int)(i % (unsigned)l->nslots);
		l->foff[i] = (sl->size + LOAD_ALIGN - 1) / LOAD_ALIGN * LOAD_ALIGN;
		sl->fds[sl->n] = dmafs_model_fd(l->m, i);
		sl->offs[sl->n] = l->foff[i];
		sl->files[sl->n] = i;
		sl->n++;
		sl->size = l->foff[i] + l->fsize[i];
	}
	if (!l->opt->ngpus)
		l->slots[0].size = dmafs_model_bytes(l->m);
	return 0;
}

static int open_buffers(struct load *l)
{
	char why[256];
	int ret;

	ret = load_session_open(dmafs_model_file(l->m, 0), dmafs_model_fd(l->m, 0), &l->s);
	if (ret) {
		tool_err("%s: cannot open a dmafs session: %s", dmafs_model_file(l->m, 0),
			 dmafs_strerror(ret));
		return ret;
	}
	l->caps_ok = dmafs_session_caps(l->s, &l->caps) == 0;
	if (l->opt->target != DMAFS_TARGET_HOST) {
		ret = gpu_load(l->opt->target, &l->gpu, why, sizeof(why));
		if (ret) {
			tool_err("%s: no GPU: %s", l->slots[0].name, why);
			return ret;
		}
	}
	for (int k = 0; k < l->nslots; k++) {
		if (!l->slots[k].n)
			continue; /* more GPUs than shards */
		ret = slot_buffer(l, &l->slots[k]);
		if (ret)
			return ret;
	}
	return 0;
}

static void close_buffers(struct load *l)
{
	for (int k = 0; k < l->nslots; k++) {
		struct slot *sl = &l->slots[k];

		if (sl->b)
			dmafs_buf_unregister(sl->b);
		if (sl->mem)
			gpu_mem_free(l->gpu, sl->dev, sl->mem);
		free(sl->fds);
		free(sl->offs);
		free(sl->files);
		free(sl->res);
	}
	dmafs_session_close(l->s);
	free(l->slots);
	free(l->fsize);
	free(l->fslot);
	free(l->foff);
}

/* ---- placing ---- */

static void *slot_main(void *arg)
{
	struct slot *sl = arg;

	sl->err = dmafs_place_fds(sl->b, sl->fds, sl->offs, sl->n, sl->threads, sl->res,
				  &sl->total);
	return NULL;
}

static int place(struct load *l)
{
	struct dmafs_buf *bufs[LOAD_MAX_GPUS];
	pthread_t tid[LOAD_MAX_GPUS];
	int started[LOAD_MAX_GPUS] = { 0 }, nb = 0;
	uint64_t t0 = dm_mono_ns();

	for (int k = 0; k < l->nslots; k++)
		if (l->slots[k].b)
			bufs[nb++] = l->slots[k].b;
	load_progress_start(bufs, (size_t)nb, dmafs_model_bytes(l->m), !l->opt->quiet && !l->opt->json);
	if (!l->opt->ngpus) {
		l->err = dmafs_model_place(l->m, l->slots[0].b, 0, l->opt->threads, &l->total);
		l->slots[0].total = l->total;
		load_progress_stop();
		return l->err;
	}
	/* One thread per GPU; the files of each GPU in parallel inside dmafs_place_fds. */
	for (int k = 0; k < l->nslots; k++)
		if (l->slots[k].n)
			started[k] = !pthread_create(&tid[k], NULL, slot_main, &l->slots[k]);
	for (int k = 0; k < l->nslots; k++) {
		if (started[k])
			pthread_join(tid[k], NULL);
		else if (l->slots[k].n)
			slot_main(&l->slots[k]);
	}
	load_progress_stop();
	l->total.path = DMAFS_PATH_NONE;
	for (int k = 0; k < l->nslots; k++) {
		struct slot *sl = &l->slots[k];

		if (!sl->n)
			continue;
		if (sl->err && !l->err)
			l->err = sl->err;
		/* A shard placed short changed since the model was opened. */
		for (size_t i = 0; i < sl->n && !l->err; i++)
			if (sl->res[i].bytes != l->fsize[sl->files[i]])
				l->err = -ESTALE;
		l->total.bytes += sl->total.bytes;
		l->total.path = load_slower(l->total.path, sl->total.path);
	}
	l->total.elapsed_ns = dm_mono_ns() - t0;
	if (l->err)
		l->total.path = DMAFS_PATH_NONE;
	return l->err;
}

/* ---- verify ---- */

/* Compare every tensor with a POSIX read of its file: 0 ok, 1 mismatch, -1 error. */
static int verify(struct load *l)
{
	char *a = malloc(LOAD_VERIFY_CHUNK), *b = malloc(LOAD_VERIFY_CHUNK);
	int fd = -1, bad = 0;
	unsigned fdfile = ~0u;

	if (!a || !b) {
		free(a);
		free(b);
		tool_err("cannot verify: out of memory");
		return -1;
	}
	for (size_t i = 0; i < dmafs_model_tensors(l->m) && !bad; i++) {
		const struct dmafs_tensor *t = dmafs_model_tensor(l->m, i);
		const struct slot *sl;
		char *placed = where(l, t, &sl);
		uint64_t off = 0;

		if (t->file != fdfile) {
			fdfile = t->file;
			fd = dmafs_model_fd(l->m, t->file); /* the model's: not closed here */
		}
		while (off < t->nbytes) {
			size_t want = t->nbytes - off < LOAD_VERIFY_CHUNK ? (size_t)(t->nbytes - off)
									  : LOAD_VERIFY_CHUNK;
			ssize_t n = dm_pread_full(fd, a, want, (off_t)(t->file_offset + off));
			const char *p = placed + off;

			/* a short count: compare what came; the next read says why it stopped */
			if (n > 0)
				want = (size_t)n;
			if (n <= 0) {
				tool_err("%s: cannot verify tensor %s: read at %llu: %s",
					 dmafs_model_file(l->m, t->file), t->name,
					 (unsigned long long)(t->file_offset + off),
					 n < 0 ? strerror((int)-n) : "file shrank");
				bad = -1;
				break;
			}
			if (sl->target != DMAFS_TARGET_HOST) {
				int ret = gpu_copy_dtoh(l->gpu, sl->dev, b, p, want);

				if (ret) {
					tool_err("cannot verify tensor %s: copy back from %s failed: %s",
						 t->name, sl->name, strerror(-ret));
					bad = -1;
					break;
				}
				p = b;
			}
			if (memcmp(a, p, want)) {
				size_t k = 0;

				while (a[k] == p[k])
					k++;
				tool_err("%s: tensor %s MISMATCH at byte %llu of %llu (file offset %llu, %s)",
					 l->path, t->name, (unsigned long long)(off + k),
					 (unsigned long long)t->nbytes,
					 (unsigned long long)(t->file_offset + off + k), sl->name);
				bad = 1;
				break;
			}
			off += want;
		}
	}
	free(a);
	free(b);
	return bad;
}

/* ---- output ---- */

static void shape_str(const struct dmafs_tensor *t, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "[");

	for (int d = 0; d < t->ndim && o < len; d++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

static void print_list(const struct load *l)
{
	char sh[200];

	for (size_t i = 0; i < dmafs_model_tensors(l->m); i++) {
		const struct dmafs_tensor *t = dmafs_model_tensor(l->m, i);
		const struct slot *sl;
		char *p = where(l, t, &sl);

		shape_str(t, sh, sizeof(sh));
		printf("  %s  %s %s  %llu bytes  %s+%llu  %p\n", t->name, dmafs_dtype_name(t->dtype), sh,
		       (unsigned long long)t->nbytes, sl->name,
		       (unsigned long long)(p - (char *)dmafs_buf_ptr(sl->b)), (void *)p);
	}
}

static void print_text(const struct load *l)
{
	char tn[32];

	if (l->opt->list && !l->err)
		print_list(l);
	if (l->opt->ngpus && !l->opt->quiet) {
		for (int k = 0; k < l->nslots; k++) {
			const struct slot *sl = &l->slots[k];

			if (!sl->n)
				continue;
			printf("  %s  %zu shard(s)  %llu bytes  %.3f s  %.2f GB/s  path %s%s%s\n", sl->name,
			       sl->n, (unsigned long long)sl->total.bytes, sl->total.elapsed_ns / 1e9,
			       load_gbps(sl->total.bytes, sl->total.elapsed_ns),
			       dmafs_path_name(sl->err ? DMAFS_PATH_NONE : sl->total.path),
			       sl->err ? "  FAILED: " : "", sl->err ? dmafs_strerror(sl->err) : "");
		}
	}
	if (l->opt->quiet)
		return;
	printf("model %s  %zu tensors  %u files  %llu bytes  %.3f s  %.2f GB/s  path %s  target %s%s\n",
	       l->path, dmafs_model_tensors(l->m), l->nfiles, (unsigned long long)l->total.bytes,
	       l->total.elapsed_ns / 1e9, load_gbps(l->total.bytes, l->total.elapsed_ns),
	       dmafs_path_name(l->total.path),
	       l->opt->ngpus ? "gpus" : load_target_name(l->opt->target, l->opt->device, tn, sizeof(tn)),
	       l->verified > 0 ? "  verified" : l->verified < 0 ? "  MISMATCH" : "");
}

static void print_json(const struct load *l, const char *error)
{
	printf("%s\n    {\"model\": ", l->run->first_json ? "" : ",");
	l->run->first_json = 0;
	json_str(l->path);
	printf(", \"files\": [");
	for (unsigned i = 0; l->m && i < l->nfiles; i++) {
		printf("%s", i ? ", " : "");
		json_str(dmafs_model_file(l->m, i));
	}
	printf("], \"tensors\": %zu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.3f, \"path\": ",
	       l->m ? dmafs_model_tensors(l->m) : 0, (unsigned long long)l->total.bytes,
	       l->total.elapsed_ns / 1e9, load_gbps(l->total.bytes, l->total.elapsed_ns));
	json_str(dmafs_path_name(l->total.path));
	printf(", \"error\": ");
	if (error)
		json_str(error);
	else
		printf("null");
	if (l->opt->verify)
		printf(", \"verified\": %s", l->verified > 0 ? "true" : "false");
	if (l->opt->ngpus && l->slots) {
		printf(", \"gpus\": [");
		for (int k = 0, first = 1; k < l->nslots; k++) {
			const struct slot *sl = &l->slots[k];

			if (!sl->n)
				continue;
			printf("%s{\"target\": ", first ? "" : ", ");
			first = 0;
			json_str(sl->name);
			printf(", \"shards\": %zu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.3f, \"path\": ",
			       sl->n, (unsigned long long)sl->total.bytes, sl->total.elapsed_ns / 1e9,
			       load_gbps(sl->total.bytes, sl->total.elapsed_ns));
			json_str(dmafs_path_name(sl->err ? DMAFS_PATH_NONE : sl->total.path));
			printf("}");
		}
		printf("]");
	}
	printf("}");
}

/* ---- one model ---- */

static void load_one(struct models *run, const char *path)
{
	struct load l = { .opt = run->opt, .run = run, .path = path };
	char errbuf[1024], notice[512];
	int ret;

	ret = dmafs_model_open(path, &l.m, errbuf, sizeof(errbuf));
	if (ret) {
		tool_err("%s", errbuf);
		run->errors++;
		if (run->opt->json)
			print_json(&l, errbuf);
		return;
	}
	ret = plan(&l);
	if (ret == -ENOMEM)
		tool_err("%s: out of memory", path);
	if (!ret)
		ret = open_buffers(&l);
	if (!ret) {
		ret = place(&l);
		if (ret)
			tool_err("%s: placement failed: %s", path, dmafs_strerror(ret));
	}
	if (ret) {
		run->errors++;
		if (run->opt->json)
			print_json(&l, dmafs_strerror(ret));
		else if (l.slots && l.total.elapsed_ns)
			print_text(&l);
		goto out;
	}
	if (run->opt->verify) {
		int v = verify(&l);

		l.verified = v == 0 ? 1 : v > 0 ? -1 : 0;
		if (v > 0)
			run->mismatches++;
		else if (v < 0)
			run->errors++;
	}
	if (run->opt->json)
		print_json(&l, NULL);
	else
		print_text(&l);
	if (l.caps_ok) {
		for (int k = 0; k < l.nslots; k++) {
			const struct slot *sl = &l.slots[k];

			if (sl->n && load_notice(&l.caps, sl->target, sl->name, sl->total.path, notice,
						 sizeof(notice)) &&
			    !run->opt->json)
				tool_err("notice: %s: %s", sl->name, notice);
		}
	}
	run->bytes += l.total.bytes;
	run->ns += l.total.elapsed_ns;
	run->tensors += dmafs_model_tensors(l.m);
	run->models++;
	run->path = load_slower(run->path, l.total.path);
out:
	if (l.slots)
		close_buffers(&l);
	else
		dmafs_session_close(l.s);
	dmafs_model_close(l.m);
}

int load_models(const struct load_opt *opt, char **paths, int n)
{
	struct models run = { .opt = opt, .first_json = 1 };
	char tn[32];

	if (opt->json) {
		printf("{\n  \"target\": ");
		json_str(opt->ngpus ? "gpus" : load_target_name(opt->target, opt->device, tn, sizeof(tn)));
		printf(",\n  \"models\": [");
	}
	for (int i = 0; i < n; i++)
		load_one(&run, paths[i]);
	if (opt->json) {
		printf("%s],\n  \"total\": {\"models\": %zu, \"tensors\": %zu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.3f, \"path\": ",
		       run.first_json ? "" : "\n  ", run.models, run.tensors,
		       (unsigned long long)run.bytes, run.ns / 1e9, load_gbps(run.bytes, run.ns));
		json_str(dmafs_path_name(run.path));
		printf("},\n  \"verify\": ");
		json_str(!opt->verify ? "skipped" : run.mismatches ? "mismatch" : "ok");
		printf(",\n  \"errors\": %d\n}\n", run.errors);
	} else {
		/* Always, as in file mode: scripts read the total line (dmafs-bench models). */
		printf("total  %zu models  %zu tensors  %llu bytes  %.3f s  %.2f GB/s  path %s  target %s\n",
		       run.models, run.tensors, (unsigned long long)run.bytes, run.ns / 1e9,
		       load_gbps(run.bytes, run.ns), dmafs_path_name(run.path),
		       opt->ngpus ? "gpus" : load_target_name(opt->target, opt->device, tn, sizeof(tn)));
		if (opt->verify && !run.mismatches && !run.errors)
			printf("verify  ok: every tensor matches a POSIX read\n");
	}
	fflush(stdout);
	if (run.mismatches)
		return LOAD_EXIT_MISMATCH;
	return run.errors ? LOAD_EXIT_ERR : LOAD_EXIT_OK;
}
