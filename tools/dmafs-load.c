// SPDX-License-Identifier: MIT
/*
 * dmafs-load.c - place files into host or GPU memory through libdmafs, report the rate
 * and the path each file took, and optionally verify every byte against a POSIX read.
 *
 * All files go into one buffer, each at a 4 KiB-aligned offset (aligned offsets let the
 * daemon read straight into the buffer). Files on different mounts get one session and
 * one registration per mount, over slices of the same allocation. Safetensors models
 * (--model, or PATHs that are *.safetensors files) go through load-model.c instead.
 * Every file is opened once, when it is collected, and placed, verified or prefetched
 * through that descriptor: a file removed or renamed during the load is still loaded.
 * --prefetch places nothing: it reads the files (or a model's files) into the warm tier
 * of their mount (dmafs_prefetch), for placements to come.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "dmafs-load.h"
#include "dmafs.h"
#include "gpu.h"
#include "json.h"
#include "tool.h"

#define ALIGN LOAD_ALIGN
#define VERIFY_CHUNK LOAD_VERIFY_CHUNK

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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dmafs-load [--target host|cuda:N|hip:N] [--verify] [--json] [--threads N] [-q] PATH...\n"
		"       dmafs-load --model [--target T | --gpus N,N,...] [--list] [--verify] ... MODEL...\n"
		"       dmafs-load --prefetch [--model] [--json] [-q] PATH...\n"
		"\n"
		"Place files (directories: every regular file below them) into one buffer of\n"
		"host or GPU memory through libdmafs, and report the rate and the path used.\n"
		"  -t, --target T   host (shared host memory, default), cuda:N or hip:N\n"
		"  -m, --model      each PATH is a safetensors model: a file, a directory of\n"
		"                   shards or with an index, an index .json, an HF cache snapshot\n"
		"                   (implied when every PATH is a *.safetensors file)\n"
		"  -g, --gpus LIST  models: shard i goes to GPU LIST[i %% n], one buffer per GPU\n"
		"  -l, --list       models: print every tensor and where it was placed\n"
		"  -p, --prefetch   place nothing: read the files into their mount's warm tier\n"
		"                   (mount option tier=), so that later placements copy from it\n"
		"  -V, --verify     compare every placed byte (models: every tensor) with a POSIX read\n"
		"  -j, --json       print one JSON document instead of text\n"
		"  -T, --threads N  files placed at once (default: one per file, up to 8)\n"
		"  -q, --quiet      print only the total line (and notices and errors)\n"
		"  -h, --help       this text\n"
		"Exit status: 0 success, 1 error, 2 verify mismatch. See dmafs-load(1).\n");
}

static int parse_target(struct load_opt *o, const char *s)
{
	const char *num = NULL;
	char *end;
	long d = 0;

	if (!strcmp(s, "host")) {
		o->target = DMAFS_TARGET_HOST;
		return 0;
	}
	if (!strncmp(s, "cuda", 4)) {
		o->target = DMAFS_TARGET_CUDA;
		num = s + 4;
	} else if (!strncmp(s, "hip", 3)) {
		o->target = DMAFS_TARGET_HIP;
		num = s + 3;
	} else {
		return -1;
	}
	if (*num == ':') {
		errno = 0;
		d = strtol(num + 1, &end, 10);
		if (errno || end == num + 1 || *end || d < 0 || d > 1023)
			return -1;
	} else if (*num) {
		return -1;
	}
	o->device = (int)d;
	return 0;
}

const char *load_target_name(int target, int device, char *buf, size_t len)
{
	if (target == DMAFS_TARGET_HOST)
		snprintf(buf, len, "host");
	else
		snprintf(buf, len, "%s:%d", target == DMAFS_TARGET_CUDA ? "cuda" : "hip", device);
	return buf;
}

/* --gpus 0,1,...: device ordinals, each once. */
static int parse_gpus(struct load_opt *o, const char *s)
{
	const char *p = s;
	char *end;

	o->ngpus = 0;
	do {
		long d;

		errno = 0;
		d = strtol(p, &end, 10);
		if (errno || end == p || d < 0 || d > 1023 || (*end && *end != ','))
			return -1;
		for (int i = 0; i < o->ngpus; i++)
			if (o->gpus[i] == d)
				return -1;
		if (o->ngpus == LOAD_MAX_GPUS)
			return -1;
		o->gpus[o->ngpus++] = (int)d;
		p = end + 1;
	} while (*end == ',');
	return 0;
}

/* ---- collecting files ---- */

/*
 * Add @path, opened now and kept open. A file that cannot be opened is reported and
 * skipped (it counts as an error). Returns 0, or -ENOMEM.
 */
static int add_file(struct job *j, const char *path)
{
	struct file *f;
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int err = fd < 0 ? errno : 0;

		if (fd >= 0)
			close(fd);
		tool_err("%s: cannot open: %s, skipped", path,
			 err == EMFILE ? "too many open files (every file stays open during the load: raise ulimit -n or load fewer files at once)"
			 : err ? strerror(err) : "no longer a regular file");
		j->errors++;
		return 0;
	}
	if (dm_grow(&j->files, &j->capfiles, j->nfiles + 1, sizeof(*j->files), 64)) {
		close(fd);
		return -ENOMEM;
	}
	f = &j->files[j->nfiles];
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->path = strdup(path);
	if (!f->path) {
		close(fd);
		return -ENOMEM;
	}
	f->size = (uint64_t)st.st_size;
	f->dev = st.st_dev;
	j->nfiles++;
	return 0;
}

/* The job nftw() adds to: it passes its callback no argument of ours. */
static struct job *walk_job;

/* Directory walk: regular files, and symlinks that lead to regular files. Symlinks to
 * directories are not followed (they could loop). */
static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	struct stat t;

	if (type == FTW_F && S_ISREG(st->st_mode))
		return add_file(walk_job, path) ? FTW_STOP : 0;
	if (type == FTW_SL && !stat(path, &t) && S_ISREG(t.st_mode))
		return add_file(walk_job, path) ? FTW_STOP : 0;
	if (type == FTW_DNR || type == FTW_NS) {
		tool_err("%s: cannot read, skipped", path);
		walk_job->errors++;
	}
	return 0;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(((const struct file *)a)->path, ((const struct file *)b)->path);
}

static int collect(struct job *j, char **paths, int n)
{
	for (int i = 0; i < n; i++) {
		size_t first = j->nfiles;
		struct stat st;

		if (stat(paths[i], &st)) {
			tool_err("%s: %s", paths[i], strerror(errno));
			return -1;
		}
		if (S_ISREG(st.st_mode)) {
			if (add_file(j, paths[i]))
				return -1;
		} else if (S_ISDIR(st.st_mode)) {
			walk_job = j;
			if (nftw(paths[i], walk_cb, 64, FTW_PHYS)) {
				tool_err("%s: %s", paths[i], strerror(errno));
				return -1;
			}
			/* readdir order is arbitrary: sort each directory argument's files */
			qsort(j->files + first, j->nfiles - first, sizeof(*j->files), cmp_path);
		} else {
			tool_err("%s: not a regular file or directory", paths[i]);
			return -1;
		}
	}
	return 0;
}

/* ---- layout, sessions, buffers ---- */

static uint64_t align_up(uint64_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

static int plan(struct job *j, uint64_t *total)
{
	uint64_t off = 0;

	for (size_t i = 0; i < j->nfiles; i++) {
		size_t g;

		for (g = 0; g < j->ngroups && j->groups[g].dev != j->files[i].dev; g++)
			;
		if (g == j->ngroups) {
			struct group *ng = realloc(j->groups, (j->ngroups + 1) * sizeof(*ng));

			if (!ng)
				return -ENOMEM;
			j->groups = ng;
			memset(&j->groups[g], 0, sizeof(j->groups[g]));
			j->groups[g].dev = j->files[i].dev;
			j->ngroups++;
		}
		j->files[i].group = (int)g;
	}
	/* Lay the groups out one after the other, each file aligned inside its group. */
	for (size_t g = 0; g < j->ngroups; g++) {
		j->groups[g].base = off;
		for (size_t i = 0; i < j->nfiles; i++) {
			if (j->files[i].group != (int)g)
				continue;
			if (j->files[i].size > UINT64_MAX - ALIGN - off)
				return -EOVERFLOW;
			j->files[i].off = off;
			off = align_up(off + j->files[i].size);
		}
		j->groups[g].size = off - j->groups[g].base;
		if (!j->groups[g].size) { /* only empty files: still one page to register */
			j->groups[g].size = ALIGN;
			off += ALIGN;
		}
	}
	*total = off;
	return 0;
}

static int open_groups(struct job *j, uint64_t total)
{
	char why[256];
	int ret;

	if (j->opt->target != DMAFS_TARGET_HOST) {
		ret = gpu_load(j->opt->target, &j->gpu, why, sizeof(why));
		if (ret) {
			tool_err("%s: no GPU: %s", j->tname, why);
			return ret;
		}
		if (j->opt->device >= gpu_count(j->gpu)) {
			tool_err("%s: no such device (%d %s device(s) found)", j->tname,
			    gpu_count(j->gpu), j->opt->target == DMAFS_TARGET_CUDA ? "CUDA" : "HIP");
			return -ENODEV;
		}
		ret = gpu_mem_alloc(j->gpu, j->opt->device, total, (void **)&j->gpumem);
		if (ret) {
			tool_err("%s: cannot allocate %llu bytes of device memory: %s (load fewer files at once)",
			    j->tname, (unsigned long long)total, strerror(-ret));
			return ret;
		}
	}
	for (size_t g = 0; g < j->ngroups; g++) {
		struct group *gr = &j->groups[g];
		const char *first = NULL;
		int fd = -1;

		for (size_t i = 0; i < j->nfiles && !first; i++) {
			if (j->files[i].group == (int)g) {
				first = j->files[i].path;
				fd = j->files[i].fd;
			}
		}
		ret = load_session_open(first, fd, &gr->s);
		if (ret) {
			tool_err("%s: cannot open a dmafs session: %s", first, dmafs_strerror(ret));
			return ret;
		}
		gr->caps_ok = dmafs_session_caps(gr->s, &gr->caps) == 0;
		if (j->opt->target == DMAFS_TARGET_HOST)
			ret = dmafs_buf_alloc_host(gr->s, gr->size, &gr->b);
		else if (j->opt->target == DMAFS_TARGET_CUDA)
			ret = dmafs_buf_register_cuda(gr->s, j->gpumem + gr->base, gr->size, j->opt->device,
						      &gr->b);
		else
			ret = dmafs_buf_register_hip(gr->s, j->gpumem + gr->base, gr->size, j->opt->device,
						     &gr->b);
		if (ret) {
			tool_err("cannot register %llu bytes of %s memory for the files on the mount of %s: %s",
			    (unsigned long long)gr->size, j->tname, first, dmafs_strerror(ret));
			return ret;
		}
	}
	return 0;
}

static void close_groups(struct job *j)
{
	for (size_t g = 0; g < j->ngroups; g++) {
		if (j->groups[g].b)
			dmafs_buf_unregister(j->groups[g].b);
		if (j->groups[g].s)
			dmafs_session_close(j->groups[g].s);
	}
	if (j->gpumem)
		gpu_mem_free(j->gpu, j->opt->device, j->gpumem);
}

/* ---- progress ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop, on;
	uint64_t total, t0;
	struct dmafs_buf *const *bufs;
	size_t nbufs;
	pthread_t tid;
} prog = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void progress_draw(int final)
{
	uint64_t done = 0, el = dm_mono_ns() - prog.t0;

	for (size_t i = 0; i < prog.nbufs; i++)
		done += dmafs_buf_placed(prog.bufs[i]);
	tool_progress(NULL, done, prog.total, el / 1e9, final);
}

static void *progress_main(void *arg)
{
	struct timespec ts;

	pthread_mutex_lock(&prog.lock);
	while (!prog.stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&prog.cond, &prog.lock, &ts);
		if (!prog.stop)
			progress_draw(0);
	}
	pthread_mutex_unlock(&prog.lock);
	progress_draw(1);
	return NULL;
}

void load_progress_start(struct dmafs_buf *const *bufs, size_t n, uint64_t total, int show)
{
	prog.bufs = bufs;
	prog.nbufs = n;
	prog.total = total;
	prog.t0 = dm_mono_ns();
	prog.stop = 0;
	prog.on = show && isatty(STDERR_FILENO) &&
		  !pthread_create(&prog.tid, NULL, progress_main, NULL);
}

void load_progress_stop(void)
{
	if (!prog.on)
		return;
	pthread_mutex_lock(&prog.lock);
	prog.stop = 1;
	pthread_cond_signal(&prog.cond);
	pthread_mutex_unlock(&prog.lock);
	pthread_join(prog.tid, NULL);
	prog.on = 0;
}

/* ---- placing ---- */

static int place_all(struct job *j, uint64_t *elapsed)
{
	uint64_t t0 = dm_mono_ns(), total = 0;
	struct dmafs_buf **bufs = calloc(j->ngroups, sizeof(*bufs));
	int ret = 0;

	if (!bufs)
		return -ENOMEM;
	for (size_t g = 0; g < j->ngroups; g++)
		bufs[g] = j->groups[g].b;
	for (size_t i = 0; i < j->nfiles; i++)
		total += j->files[i].size;
	load_progress_start(bufs, j->ngroups, total, !j->opt->quiet && !j->opt->json);
	for (size_t g = 0; g < j->ngroups; g++) {
		struct group *gr = &j->groups[g];
		size_t n = 0, k = 0;
		int *fds;
		uint64_t *offs;
		struct dmafs_result *res;

		for (size_t i = 0; i < j->nfiles; i++)
			n += j->files[i].group == (int)g;
		fds = calloc(n, sizeof(*fds));
		offs = calloc(n, sizeof(*offs));
		res = calloc(n, sizeof(*res));
		if (!fds || !offs || !res) {
			free(fds);
			free(offs);
			free(res);
			ret = -ENOMEM;
			break;
		}
		for (size_t i = 0; i < j->nfiles; i++) {
			if (j->files[i].group != (int)g)
				continue;
			fds[k] = j->files[i].fd;
			offs[k] = j->files[i].off - gr->base;
			k++;
		}
		if (dmafs_place_fds(gr->b, fds, offs, n, j->opt->threads, res, &gr->total))
			ret = -EIO;
		k = 0;
		for (size_t i = 0; i < j->nfiles; i++) {
			if (j->files[i].group != (int)g)
				continue;
			j->files[i].res = res[k++];
			if (j->files[i].res.path == DMAFS_PATH_NONE) {
				/* dmafs_place_fds() marks failed files; ask again for the reason. */
				uint64_t off = j->files[i].off - gr->base;
				struct dmafs_result r;

				j->files[i].err = dmafs_place_fds(gr->b, &j->files[i].fd, &off, 1, 1,
								  NULL, &r);
				if (!j->files[i].err) {
					j->files[i].res = r; /* a transient failure: it worked now */
				} else {
					tool_err("%s: %s", j->files[i].path, dmafs_strerror(j->files[i].err));
					j->errors++;
				}
			}
		}
		free(fds);
		free(offs);
		free(res);
	}
	load_progress_stop();
	free(bufs);
	*elapsed = dm_mono_ns() - t0;
	return ret;
}

/* ---- verify ---- */

static void verify_file(struct job *j, struct file *f, char *a, char *b)
{
	uint64_t off = 0;
	int fd = f->fd;

	if (f->err)
		return;
	f->verified = 1;
	if (f->res.bytes != f->size) {
		f->verified = -1;
		f->bad_at = f->res.bytes < f->size ? f->res.bytes : f->size;
	}
	while (f->verified == 1 && off < f->size) {
		size_t want = f->size - off < VERIFY_CHUNK ? (size_t)(f->size - off) : VERIFY_CHUNK;
		ssize_t n = dm_pread_full(fd, a, want, (off_t)off);
		const char *placed;

		if (n <= 0) {
			tool_err("%s: cannot verify: read at %llu: %s", f->path, (unsigned long long)off,
			    n ? strerror((int)-n) : "file shrank");
			j->errors++;
			f->verified = 0;
			break;
		}
		if (j->opt->target == DMAFS_TARGET_HOST) {
			placed = (char *)dmafs_buf_ptr(j->groups[f->group].b) +
				 (f->off - j->groups[f->group].base) + off;
		} else {
			int ret = gpu_copy_dtoh(j->gpu, j->opt->device, b, j->gpumem + f->off + off, (size_t)n);

			if (ret) {
				tool_err("%s: cannot verify: copy back from %s failed: %s", f->path,
				    j->tname, strerror(-ret));
				j->errors++;
				f->verified = 0;
				break;
			}
			placed = b;
		}
		if (memcmp(a, placed, (size_t)n)) {
			size_t k = 0;

			while (a[k] == placed[k])
				k++;
			f->verified = -1;
			f->bad_at = off + k;
		}
		off += (uint64_t)n;
	}
}

static int verify_all(struct job *j)
{
	char *a = malloc(VERIFY_CHUNK), *b = malloc(VERIFY_CHUNK);
	int bad = 0;

	if (!a || !b) {
		free(a);
		free(b);
		tool_err("cannot verify: out of memory");
		j->errors++;
		return 0;
	}
	for (size_t i = 0; i < j->nfiles; i++) {
		verify_file(j, &j->files[i], a, b);
		if (j->files[i].verified < 0) {
			bad++;
			tool_err("%s: MISMATCH at byte %llu (placed %llu of %llu bytes)", j->files[i].path,
			    (unsigned long long)j->files[i].bad_at, (unsigned long long)j->files[i].res.bytes,
			    (unsigned long long)j->files[i].size);
		}
	}
	free(a);
	free(b);
	return bad;
}

/* ---- notices and output ---- */

int load_slower(int a, int b)
{
	/* dmafs.h's order: p2p-compat, appended to the values later, after p2p */
	int ra = a == DMAFS_PATH_P2P_COMPAT ? 3 : 2 * a, rb = b == DMAFS_PATH_P2P_COMPAT ? 3 : 2 * b;

	if (a == DMAFS_PATH_NONE)
		return b;
	if (b == DMAFS_PATH_NONE)
		return a;
	return ra > rb ? a : b;
}

int load_notice(const struct dmafs_caps *caps, int target, const char *tname, int used,
		char *buf, size_t len)
{
	const struct dmafs_target_caps *t = target == DMAFS_TARGET_HOST   ? &caps->host
					    : target == DMAFS_TARGET_CUDA ? &caps->cuda
									  : &caps->hip;

	if (used == DMAFS_PATH_NONE)
		return 0;
	if (used == DMAFS_PATH_POSIX)
		snprintf(buf, len, "path posix: %s", t->why);
	else if (t->path != DMAFS_PATH_NONE && used != t->path && load_slower(used, t->path) == used)
		snprintf(buf, len, "path %s used although the mount offers %s for %s", dmafs_path_name(used),
			 dmafs_path_name(t->path), tname);
	else if (target != DMAFS_TARGET_HOST && used != DMAFS_PATH_P2P)
		snprintf(buf, len, "path %s, not p2p: %s", dmafs_path_name(used), t->why);
	else
		return 0;
	return 1;
}

/* Why the placements were not as fast as they could be, once per mount; 0 if they were. */
static int notice(const struct job *j, const struct group *g, char *buf, size_t len)
{
	if (!g->caps_ok)
		return 0;
	return load_notice(&g->caps, j->opt->target, j->tname, g->total.path, buf, len);
}

double load_gbps(uint64_t bytes, uint64_t ns) { return ns ? (double)bytes / (double)ns : 0.0; }

static void print_text(const struct job *j, uint64_t total_bytes, uint64_t elapsed, int path)
{
	if (!j->opt->quiet) {
		for (size_t i = 0; i < j->nfiles; i++) {
			const struct file *f = &j->files[i];

			if (f->err)
				printf("%s  FAILED: %s\n", f->path, dmafs_strerror(f->err));
			else
				printf("%s  %llu bytes  %.3f s  %.2f GB/s  %s%s\n", f->path,
				       (unsigned long long)f->res.bytes, f->res.elapsed_ns / 1e9,
				       load_gbps(f->res.bytes, f->res.elapsed_ns), dmafs_path_name(f->res.path),
				       f->verified > 0 ? "  verified" : f->verified < 0 ? "  MISMATCH" : "");
		}
	}
	printf("total  %zu files  %llu bytes  %.3f s  %.2f GB/s  %s  target %s\n", j->nfiles,
	       (unsigned long long)total_bytes, elapsed / 1e9, load_gbps(total_bytes, elapsed),
	       dmafs_path_name(path), j->tname);
}

static void print_json(const struct job *j, uint64_t total_bytes, uint64_t elapsed, int path,
		       int mismatches)
{
	char buf[512];
	int first = 1;

	printf("{\n  \"target\": ");
	json_str(j->tname);
	printf(",\n  \"files\": [");
	for (size_t i = 0; i < j->nfiles; i++) {
		const struct file *f = &j->files[i];

		printf("%s\n    {\"file\": ", i ? "," : "");
		json_str(f->path);
		printf(", \"size\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.3f, \"path\": ",
		       (unsigned long long)f->size, (unsigned long long)f->res.bytes,
		       f->res.elapsed_ns / 1e9, load_gbps(f->res.bytes, f->res.elapsed_ns));
		json_str(dmafs_path_name(f->res.path));
		printf(", \"error\": ");
		if (f->err)
			json_str(dmafs_strerror(f->err));
		else
			printf("null");
		if (j->opt->verify)
			printf(", \"verified\": %s", f->verified > 0 ? "true" : "false");
		if (f->verified < 0)
			printf(", \"mismatch_at\": %llu", (unsigned long long)f->bad_at);
		printf("}");
	}
	printf("\n  ],\n  \"total\": {\"files\": %zu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.3f, \"path\": ",
	       j->nfiles, (unsigned long long)total_bytes, elapsed / 1e9, load_gbps(total_bytes, elapsed));
	json_str(dmafs_path_name(path));
	printf("},\n  \"notices\": [");
	for (size_t g = 0; g < j->ngroups; g++) {
		if (!notice(j, &j->groups[g], buf, sizeof(buf)))
			continue;
		printf("%s\n    ", first ? "" : ",");
		json_str(buf);
		first = 0;
	}
	printf("%s],\n  \"verify\": ", first ? "" : "\n  ");
	json_str(!j->opt->verify ? "skipped" : mismatches ? "mismatch" : "ok");
	printf(",\n  \"errors\": %d\n}\n", j->errors);
}

/* The path that all placements into one mount took: the slowest. */
static void group_paths(struct job *j)
{
	for (size_t g = 0; g < j->ngroups; g++)
		j->groups[g].total.path = DMAFS_PATH_NONE;
	for (size_t i = 0; i < j->nfiles; i++) {
		struct group *gr = &j->groups[j->files[i].group];

		if (!j->files[i].err)
			gr->total.path = load_slower(gr->total.path, j->files[i].res.path);
	}
}

/* The file mode: place every file under @paths, report, verify. Returns the exit status. */
static int load_files(struct job *j, char **paths, int n)
{
	uint64_t total = 0, elapsed = 0, bytes = 0;
	int path = DMAFS_PATH_NONE, mismatches = 0;
	char buf[512];

	if (collect(j, paths, n))
		return LOAD_EXIT_ERR;
	if (j->nfiles == 0) {
		if (!j->errors) /* else each file was named with its error */
			tool_err("no regular files found under %s%s", paths[0], n > 1 ? " ..." : "");
		return LOAD_EXIT_ERR;
	}
	if (plan(j, &total)) {
		tool_err("the files do not fit one address space");
		return LOAD_EXIT_ERR;
	}
	if (open_groups(j, total)) {
		close_groups(j);
		return LOAD_EXIT_ERR;
	}
	place_all(j, &elapsed);
	for (size_t i = 0; i < j->nfiles; i++) {
		bytes += j->files[i].res.bytes;
		if (!j->files[i].err)
			path = load_slower(path, j->files[i].res.path);
	}
	group_paths(j);
	if (j->opt->verify)
		mismatches = verify_all(j);
	if (j->opt->json) {
		print_json(j, bytes, elapsed, path, mismatches);
	} else {
		print_text(j, bytes, elapsed, path);
		for (size_t g = 0; g < j->ngroups; g++)
			if (notice(j, &j->groups[g], buf, sizeof(buf)))
				tool_err("notice: %s", buf);
		if (j->opt->verify && !mismatches && !j->errors)
			printf("verify  ok: every placed byte matches a POSIX read\n");
	}
	fflush(stdout);
	/*
	 * Host buffers are left to the daemon rather than unregistered: whichever side
	 * unmaps a host buffer last frees its pages, and unregistering and then unmapping
	 * ours would do it before we exit. Exiting only drops our page tables; the daemon,
	 * whose mapping is then the last, frees the pages when it sees this process gone
	 * (within half a second), after the command is over.
	 */
	if (j->opt->target != DMAFS_TARGET_HOST)
		close_groups(j);
	if (mismatches)
		return LOAD_EXIT_MISMATCH;
	return j->errors ? LOAD_EXIT_ERR : LOAD_EXIT_OK;
}

/* ---- prefetch ---- */

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
static int prefetch_files(struct job *j, char **paths, int n)
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

int load_session_open(const char *path, int fd, struct dmafs_session **s)
{
	char link[64];
	int ret = dmafs_session_open(path, s);

	/* removed since it was opened: the descriptor still leads to the file and its mount */
	if (ret == -ENOENT && fd >= 0) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ret = dmafs_session_open(link, s);
	}
	return ret;
}

/* Every file stays open for the whole load: the soft descriptor limit goes up to the hard one. */
static void raise_nofile(void)
{
	struct rlimit r;

	if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

/* PATHs that are all safetensors files are models: show their tensors. */
static int all_safetensors(char **paths, int n)
{
	struct stat st;

	for (int i = 0; i < n; i++) {
		size_t l = strlen(paths[i]);

		if (l < 12 || strcmp(paths[i] + l - 12, ".safetensors") || stat(paths[i], &st) ||
		    !S_ISREG(st.st_mode))
			return 0;
	}
	return 1;
}

/* Options that go together, and what they imply. 0, or -1 with the reason printed. */
static int check_opts(struct load_opt *o)
{
	if (o->prefetch) {
		const char *opt = o->target_set ? "--target" : o->ngpus ? "--gpus" : o->list ? "--list" :
				  o->verify ? "--verify" : o->threads ? "--threads" : NULL;

		if (opt) {
			tool_err("%s does not go with --prefetch, which places nothing: it reads the files into their mount's warm tier",
				 opt);
			return -1;
		}
		return 0;
	}
	if (o->ngpus) {
		if (!o->model) {
			tool_err("--gpus places safetensors models shard by shard: add --model");
			return -1;
		}
		if (o->target_set && o->target == DMAFS_TARGET_HOST) {
			tool_err("--gpus with --target host: give --target cuda or hip (or leave it out for cuda)");
			return -1;
		}
		if (!o->target_set)
			o->target = DMAFS_TARGET_CUDA;
	}
	if (o->list && !o->model) {
		tool_err("--list shows the tensors of models: add --model");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "target", required_argument, NULL, 't' },
		{ "model", no_argument, NULL, 'm' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "list", no_argument, NULL, 'l' },
		{ "prefetch", no_argument, NULL, 'p' },
		{ "verify", no_argument, NULL, 'V' },
		{ "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 'T' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct load_opt opt = { .target = DMAFS_TARGET_HOST };
	struct job j = { .opt = &opt };
	int c;

	tool_init("dmafs-load");
	while ((c = getopt_long(argc, argv, "t:mg:lpVjT:qh", lopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_target(&opt, optarg)) {
				tool_err("--target %s: expected host, cuda:N or hip:N", optarg);
				return LOAD_EXIT_ERR;
			}
			opt.target_set = 1;
			break;
		case 'm':
			opt.model = 1;
			break;
		case 'g':
			if (parse_gpus(&opt, optarg)) {
				tool_err("--gpus %s: expected distinct device numbers 0-1023 separated by commas (at most %d)",
					 optarg, LOAD_MAX_GPUS);
				return LOAD_EXIT_ERR;
			}
			break;
		case 'l':
			opt.list = 1;
			break;
		case 'p':
			opt.prefetch = 1;
			break;
		case 'V':
			opt.verify = 1;
			break;
		case 'j':
			opt.json = 1;
			break;
		case 'T': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (end == optarg || *end || v < 1 || v > 256) {
				tool_err("--threads %s: expected a number from 1 to 256", optarg);
				return LOAD_EXIT_ERR;
			}
			opt.threads = (unsigned)v;
			break;
		}
		case 'q':
			opt.quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return LOAD_EXIT_OK;
		default:
			usage(stderr);
			return LOAD_EXIT_ERR;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return LOAD_EXIT_ERR;
	}
	if (!opt.model && !opt.prefetch)
		opt.model = all_safetensors(argv + optind, argc - optind);
	if (check_opts(&opt))
		return LOAD_EXIT_ERR;
	raise_nofile();
	if (opt.prefetch)
		return prefetch_files(&j, argv + optind, argc - optind);
	if (opt.model)
		return load_models(&opt, argv + optind, argc - optind);
	load_target_name(opt.target, opt.device, j.tname, sizeof(j.tname));
	return load_files(&j, argv + optind, argc - optind);
}
