// SPDX-License-Identifier: MIT
/*
 * load-files.c - dmafs-load's file mode: the files under the PATHs collected and opened,
 * laid out in one buffer (a slice per mount, one session and registration each), placed,
 * verified against a POSIX read, and reported (see dmafs-load.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "json.h"
#include "load-files.h"
#include "tool.h"

#define ALIGN LOAD_ALIGN
#define VERIFY_CHUNK LOAD_VERIFY_CHUNK

/* ---- collecting files ---- */

/*
 * Open @path for the load: without --verify with O_DIRECT where the filesystem accepts it,
 * as libdmafs opens a path (dmafs then sends no small file's data to the page cache with
 * the open, open_fill_kb in dmafs(8), which the placement would not use; the library reads
 * such a descriptor through a plain one where it falls back to pread). The verifying reads
 * go through the page cache, and so a plain descriptor.
 */
static int open_for_load(const char *path, int verify)
{
	int fd = verify ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_DIRECT);

	if (fd < 0 && (verify || errno == EINVAL))
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	return fd;
}

/*
 * Add @path, opened now and kept open. A file that cannot be opened is reported and
 * skipped (it counts as an error). Returns 0, or -ENOMEM.
 */
int add_file(struct job *j, const char *path)
{
	struct file *f;
	struct stat st;
	int fd;

	fd = open_for_load(path, j->opt->verify);
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

int collect(struct job *j, char **paths, int n)
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

/* ---- output ---- */

/* Why the placements were not as fast as they could be, once per mount; 0 if they were. */
static int notice(const struct job *j, const struct group *g, char *buf, size_t len)
{
	if (!g->caps_ok)
		return 0;
	return load_notice(&g->caps, j->opt->target, j->tname, g->total.path, buf, len);
}

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
int load_files(struct job *j, char **paths, int n)
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
