// SPDX-License-Identifier: MIT
/*
 * st-files.c - the files of a safetensors model found and read for dmafs_model_open (see
 * safetensors.c): one file, a directory of shards, an index and the shards it names, a
 * Hugging Face cache repository resolved to its snapshot; each file opened once and its
 * header read and validated with st-parse.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "libdmafs-int.h"
#include "st-model.h"

#define INDEX_NAME "model.safetensors.index.json"
/* An index names tensors and files: a few MiB even for the largest hub models. */
#define INDEX_MAX (64ULL << 20)

int st_fail(char *err, size_t len, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* ---- paths ---- */

/*
 * "@dir/@name", without doubling a slash. Lexical only: resolving symlinks would turn an
 * HF snapshot's files into their blobs, and the user should see the names they chose.
 */
static char *join(const char *dir, const char *name)
{
	size_t d = strlen(dir);
	char *p;

	while (d > 1 && dir[d - 1] == '/')
		d--;
	p = malloc(d + strlen(name) + 2);
	if (p)
		sprintf(p, "%.*s%s%s", (int)d, dir, d && dir[d - 1] == '/' ? "" : "/", name);
	return p;
}

/*
 * @path made absolute against the working directory ("./" parts and "//" dropped).
 * NULL with errno set (getcwd's error, or ENOMEM).
 */
static char *absolute(const char *path)
{
	char cwd[PATH_MAX], *j, *o, *p;

	if (path[0] == '/') {
		j = strdup(path);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return NULL;
		j = join(cwd, path);
	}
	if (!j)
		return NULL;
	/* Tidy in place: the result is never longer. */
	for (o = p = j; *p;) {
		if (p[0] == '/' && p[1] == '/') {
			p++;
		} else if (p[0] == '/' && p[1] == '.' && (p[2] == '/' || p[2] == '\0') && p != j) {
			p += 2;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	while (o - j > 1 && o[-1] == '/')
		*--o = '\0';
	return j;
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && !strcmp(s + a - b, suf);
}

static char *dir_of(const char *path)
{
	const char *s = strrchr(path, '/');

	if (!s)
		return strdup(".");
	if (s == path)
		return strdup("/");
	return strndup(path, (size_t)(s - path));
}

/* ---- reading ---- */

/* All @len bytes at @off, or -ENODATA: the file is shorter than fstat said (shrinking
 * under us). */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t r = dm_pread_full(fd, buf, len, (off_t)off);

	if (r == (ssize_t)len)
		return 0;
	if (r >= 0) /* end of file, or an error the next read returns */
		r = dm_pread_full(fd, (char *)buf + r, len - (size_t)r, (off_t)(off + (uint64_t)r));
	return r < 0 ? (int)r : -ENODATA;
}

/*
 * Open @shown for reading, refusing what is not a regular file. O_NONBLOCK: a FIFO named
 * like a shard must not hang the open; it is refused by the fstat check instead.
 */
static int open_regular(const char *path, const char *shown, struct stat *st, char *err,
			size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), ret;

	if (fd < 0) {
		ret = -errno;
		return st_fail(err, errlen, ret, "%s: %s", shown, strerror(-ret));
	}
	if (fstat(fd, st)) {
		ret = -errno;
		close(fd);
		return st_fail(err, errlen, ret, "%s: %s", shown, strerror(-ret));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return st_fail(err, errlen, S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL,
			    "%s: not a regular file", shown);
	}
	return fd;
}

/* Open f->path for good (f->fd), read and validate its header; record size and mtime. */
int read_header(struct mfile *f, char *err, size_t errlen)
{
	uint8_t prefix[8] = { 0 }, *json = NULL;
	char why[400];
	struct stat st;
	uint64_t n = 0;
	int fd, ret, io = 0;

	fd = open_regular(f->path, f->shown, &st, err, errlen);
	if (fd < 0)
		return fd;
	/* O_NONBLOCK served the open only (a FIFO); the placements read a regular file */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	f->size = (uint64_t)st.st_size;
	f->mtime = st.st_mtim;
	if (f->size >= 8 && (ret = pread_all(fd, prefix, 8, 0))) {
		io = 1;
		goto out;
	}
	ret = st_header_len(prefix, f->size, &n, why, sizeof(why));
	if (ret)
		goto out;
	json = malloc(n ? n : 1);
	if (!json) {
		ret = -ENOMEM;
		snprintf(why, sizeof(why), "out of memory for a %llu byte header",
			 (unsigned long long)n);
		goto out;
	}
	ret = pread_all(fd, json, (size_t)n, 8);
	if (ret) {
		io = 1;
		goto out;
	}
	ret = st_parse_header(json, (size_t)n, f->size - 8 - n, &f->h, why, sizeof(why));
out:
	free(json);
	if (!ret) {
		f->fd = fd;
		return 0;
	}
	close(fd);
	if (io && ret == -ENODATA)
		return st_fail(err, errlen, -EINVAL, "%s: file shrank while its header was read",
			    f->shown);
	if (io)
		return st_fail(err, errlen, ret, "%s: read: %s", f->shown, strerror(-ret));
	return st_fail(err, errlen, ret, "%s: %s", f->shown, why);
}

static int read_small(const char *path, const char *shown, uint64_t max, uint8_t **buf,
		      size_t *len, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	fd = open_regular(path, shown, &st, err, errlen);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return st_fail(err, errlen, -EINVAL, "%s: %lld bytes, more than an index can be (%llu)",
			    shown, (long long)st.st_size, (unsigned long long)max);
	}
	*len = (size_t)st.st_size;
	*buf = malloc(*len ? *len : 1);
	if (!*buf) {
		close(fd);
		return st_fail(err, errlen, -ENOMEM, "%s: out of memory", shown);
	}
	ret = pread_all(fd, *buf, *len, 0);
	close(fd);
	if (ret) {
		free(*buf);
		*buf = NULL;
		if (ret == -ENODATA)
			return st_fail(err, errlen, -EINVAL, "%s: file shrank while it was read", shown);
		return st_fail(err, errlen, ret, "%s: read: %s", shown, strerror(-ret));
	}
	return 0;
}

/* ---- finding the files ---- */

static int add_file(struct dmafs_model *m, const char *dir_abs, const char *dir_shown,
		    const char *name)
{
	struct mfile *f = realloc(m->f, (m->nfiles + 1) * sizeof(*f));

	if (!f)
		return -ENOMEM;
	m->f = f;
	f = &m->f[m->nfiles];
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	m->nfiles++;
	f->path = dir_abs ? join(dir_abs, name) : absolute(name);
	f->shown = dir_shown ? join(dir_shown, name) : strdup(name);
	f->name = strdup(name);
	return f->path && f->shown && f->name ? 0 : -ENOMEM;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Every *.safetensors in @dir that stj_is (or links to) a regular file, in name order. A
 * dangling symlink (an HF snapshot whose blob is missing) is an error, not a smaller model.
 */
static int list_dir(struct dmafs_model *m, const char *dir, const char *shown, char *err,
		    size_t errlen)
{
	char **names = NULL, *p, *sp;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	int ret = 0;
	DIR *d = opendir(dir);

	if (!d) {
		ret = -errno;
		return st_fail(err, errlen, ret, "%s: %s", shown, strerror(-ret));
	}
	while (!ret && (errno = 0, de = readdir(d))) {
		if (!ends_with(de->d_name, ".safetensors") || !strcmp(de->d_name, ".safetensors"))
			continue;
		p = join(dir, de->d_name);
		if (!p) {
			ret = -ENOMEM;
			break;
		}
		if (stat(p, &st)) {
			ret = -errno;
			sp = join(shown, de->d_name);
			st_fail(err, errlen, ret, "%s: %s%s", sp ? sp : de->d_name, strerror(-ret),
			     ret == -ENOENT ? " (a symbolic link to a missing file?)" : "");
			free(sp);
			free(p);
			break;
		}
		free(p);
		if (!S_ISREG(st.st_mode))
			continue;
		if (dm_grow(&names, &cap, n + 1, sizeof(*names), 16) ||
		    !(names[n] = strdup(de->d_name))) {
			ret = -ENOMEM;
			break;
		}
		n++;
	}
	if (!ret && errno) {
		ret = -errno;
		st_fail(err, errlen, ret, "%s: readdir: %s", shown, strerror(-ret));
	}
	closedir(d);
	if (!ret && n == 0)
		ret = st_fail(err, errlen, -ENOENT, "%s: no *.safetensors files and no %s", shown,
			   INDEX_NAME);
	if (!ret) {
		qsort(names, n, sizeof(*names), cmp_str);
		for (size_t i = 0; i < n && !ret; i++)
			ret = add_file(m, dir, shown, names[i]);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (ret == -ENOMEM)
		st_fail(err, errlen, ret, "%s: out of memory", shown);
	return ret;
}

/* The shards an index names, each once, in name order. */
static int index_files(struct dmafs_model *m, const struct st_index *ix, const char *dir,
		       const char *shown)
{
	const char **names = malloc(ix->n * sizeof(*names));
	int ret = 0;

	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < ix->n; i++)
		names[i] = ix->e[i].file;
	qsort(names, ix->n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < ix->n && !ret; i++) {
		if (i && !strcmp(names[i], names[i - 1]))
			continue;
		ret = add_file(m, dir, shown, names[i]);
	}
	free(names);
	return ret;
}

/*
 * An HF cache repository directory (models--org--name): its refs/main names the
 * snapshot. Returns 1 and *snap (allocated) when @dir is one, 0 when not, or -errno.
 */
static int hf_repo_snapshot(const char *dir, char **snap)
{
	char *ref = join(dir, "refs/main"), rev[128], *sub;
	size_t len = 0;
	FILE *f;

	if (!ref)
		return -ENOMEM;
	f = fopen(ref, "re");
	free(ref);
	if (!f)
		return 0;
	len = fread(rev, 1, sizeof(rev) - 1, f);
	fclose(f);
	rev[len] = '\0';
	rev[strcspn(rev, " \t\r\n")] = '\0';
	if (!rev[0] || strchr(rev, '/') || !strcmp(rev, "..") || !strcmp(rev, "."))
		return 0;
	sub = malloc(strlen(rev) + sizeof("snapshots/"));
	if (!sub)
		return -ENOMEM;
	sprintf(sub, "snapshots/%s", rev);
	*snap = join(dir, sub);
	free(sub);
	return *snap ? 1 : -ENOMEM;
}

/*
 * A directory @path (@abs) without an index: a Hugging Face cache repository, resolved to
 * its snapshot when @depth is 0, or a directory of shards.
 */
static int locate_unindexed(struct dmafs_model *m, const char *path, const char *abs,
			    int depth, struct st_index *ix, char **ixshown, char *err,
			    size_t errlen)
{
	char *snap = NULL;
	int ret, hf = depth ? 0 : hf_repo_snapshot(abs, &snap);

	if (hf < 0)
		return st_fail(err, errlen, hf, "%s: out of memory", path);
	if (hf == 1 && !access(snap, F_OK)) {
		/* Messages show the snapshot by its absolute path: "refs/main" named it. */
		ret = st_locate(m, snap, 1, ix, ixshown, err, errlen);
		free(snap);
		return ret;
	}
	free(snap);
	return list_dir(m, abs, path, err, errlen);
}

/*
 * Parse the index @ixpath (shown as @ixshown) into @ix and add its shards, named relative
 * to @dir and shown relative to @sdir (NULL: out of memory); @path is what the user gave.
 */
static int read_index(struct dmafs_model *m, const char *path, const char *ixpath,
		      const char *ixshown, const char *dir, const char *sdir,
		      struct st_index *ix, char *err, size_t errlen)
{
	char why[400];
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret = read_small(ixpath, ixshown, INDEX_MAX, &buf, &len, err, errlen);

	if (ret)
		return ret;
	ret = st_parse_index(buf, len, ix, why, sizeof(why));
	if (ret) {
		ret = st_fail(err, errlen, ret, "%s: %s", ixshown, why);
	} else {
		ret = sdir ? index_files(m, ix, dir, sdir) : -ENOMEM;
		if (ret)
			ret = st_fail(err, errlen, ret, "%s: out of memory", path);
	}
	free(buf);
	return ret;
}

/*
 * Find the files of @path and, for an index, parse it into @ix. @depth: an HF repository
 * directory resolves to its snapshot once; a snapshot is not resolved again (a symlink
 * loop under snapshots/ must not recurse).
 */
int st_locate(struct dmafs_model *m, const char *path, int depth, struct st_index *ix,
		  char **ixshown, char *err, size_t errlen)
{
	char *abs = NULL, *dir = NULL, *ixpath = NULL, *sdir = NULL;
	struct stat st;
	int ret;

	if (stat(path, &st)) {
		ret = -errno;
		return st_fail(err, errlen, ret, "%s: %s", path, strerror(-ret));
	}
	abs = absolute(path);
	if (!abs) {
		ret = errno ? -errno : -ENOMEM;
		return st_fail(err, errlen, ret, "%s: cannot make the path absolute: %s", path,
			    strerror(-ret));
	}
	if (S_ISREG(st.st_mode) && !ends_with(path, ".json")) {
		ret = add_file(m, NULL, NULL, path);
		if (ret)
			ret = st_fail(err, errlen, ret, "%s: out of memory", path);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		ixpath = join(abs, INDEX_NAME);
		if (!ixpath) {
			ret = st_fail(err, errlen, -ENOMEM, "%s: out of memory", path);
			goto out;
		}
		if (access(ixpath, F_OK)) {
			ret = locate_unindexed(m, path, abs, depth, ix, ixshown, err, errlen);
			goto out;
		}
		*ixshown = join(path, INDEX_NAME);
		dir = strdup(abs);
		sdir = strdup(path);
	} else if (S_ISREG(st.st_mode)) {
		ixpath = strdup(abs);
		*ixshown = strdup(path);
		dir = dir_of(abs);
		sdir = dir_of(path);
	} else {
		ret = st_fail(err, errlen, -EINVAL, "%s: not a file or directory", path);
		goto out;
	}
	if (!ixpath || !*ixshown || !dir) {
		ret = st_fail(err, errlen, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	/* Shards are named relative to the index, shown relative to what the user gave. */
	ret = read_index(m, path, ixpath, *ixshown, dir, sdir, ix, err, errlen);
out:
	free(abs);
	free(dir);
	free(sdir);
	free(ixpath);
	return ret;
}
