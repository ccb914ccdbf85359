// SPDX-License-Identifier: MIT
/*
 * safetensors.c - dmafs_model_*: find the files of a safetensors model (one file, a
 * directory, an index, a Hugging Face cache snapshot), read and validate their headers
 * with st-parse.c, lay the files out in one buffer and place them with
 * dmafs_place_fds().
 *
 * Layout: every file goes whole (header included) to a 4096-aligned offset, in file
 * order. Placing whole files keeps one request per file (the daemon streams it over all
 * members at full rate; a request per tensor would be hundreds of small ones), and the
 * alignment keeps host placements zero copy. A tensor is then at file base + 8 + N +
 * begin, with the alignment it has in its file.
 *
 * Each file is opened once, when its header is read, and placed through that descriptor:
 * a file removed or renamed between open and place is still the one whose header was
 * read (POSIX keeps an unlinked open file readable).
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
#include "safetensors.h"

#define MODEL_ALIGN 4096ULL
#define INDEX_NAME "model.safetensors.index.json"
/* An index names tensors and files: a few MiB even for the largest hub models. */
#define INDEX_MAX (64ULL << 20)

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

static int fail(char *err, size_t len, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t len, int ret, const char *fmt, ...)
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
		return fail(err, errlen, ret, "%s: %s", shown, strerror(-ret));
	}
	if (fstat(fd, st)) {
		ret = -errno;
		close(fd);
		return fail(err, errlen, ret, "%s: %s", shown, strerror(-ret));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return fail(err, errlen, S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL,
			    "%s: not a regular file", shown);
	}
	return fd;
}

/* Open f->path for good (f->fd), read and validate its header; record size and mtime. */
static int read_header(struct mfile *f, char *err, size_t errlen)
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
		return fail(err, errlen, -EINVAL, "%s: file shrank while its header was read",
			    f->shown);
	if (io)
		return fail(err, errlen, ret, "%s: read: %s", f->shown, strerror(-ret));
	return fail(err, errlen, ret, "%s: %s", f->shown, why);
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
		return fail(err, errlen, -EINVAL, "%s: %lld bytes, more than an index can be (%llu)",
			    shown, (long long)st.st_size, (unsigned long long)max);
	}
	*len = (size_t)st.st_size;
	*buf = malloc(*len ? *len : 1);
	if (!*buf) {
		close(fd);
		return fail(err, errlen, -ENOMEM, "%s: out of memory", shown);
	}
	ret = pread_all(fd, *buf, *len, 0);
	close(fd);
	if (ret) {
		free(*buf);
		*buf = NULL;
		if (ret == -ENODATA)
			return fail(err, errlen, -EINVAL, "%s: file shrank while it was read", shown);
		return fail(err, errlen, ret, "%s: read: %s", shown, strerror(-ret));
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
 * Every *.safetensors in @dir that is (or links to) a regular file, in name order. A
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
		return fail(err, errlen, ret, "%s: %s", shown, strerror(-ret));
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
			fail(err, errlen, ret, "%s: %s%s", sp ? sp : de->d_name, strerror(-ret),
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
		fail(err, errlen, ret, "%s: readdir: %s", shown, strerror(-ret));
	}
	closedir(d);
	if (!ret && n == 0)
		ret = fail(err, errlen, -ENOENT, "%s: no *.safetensors files and no %s", shown,
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
		fail(err, errlen, ret, "%s: out of memory", shown);
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

/* ---- checks across files ---- */

static int tensor_name_cmp(const void *a, const void *b, void *arg)
{
	const struct dmafs_tensor *t = arg;

	return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

/* Lookup by name in the sorted index; -1 when absent. */
static long find(const struct dmafs_model *m, const char *name)
{
	size_t lo = 0, hi = m->nt;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->t[m->by_name[mid]].name, name);

		if (!c)
			return (long)m->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int index_check(const struct dmafs_model *m, const struct st_index *ix,
		       const char *ixshown, char *err, size_t errlen)
{
	char q[128];

	/* Each mapped tensor is in the shard the map names. */
	for (size_t i = 0; i < ix->n; i++) {
		long k = find(m, ix->e[i].tensor);
		const struct mfile *f;

		st_quote(q, sizeof(q), ix->e[i].tensor);
		if (k < 0)
			return fail(err, errlen, -EINVAL,
				    "%s: weight_map names tensor %s in %s, which does not hold it",
				    ixshown, q, ix->e[i].file);
		f = &m->f[m->t[k].file];
		if (strcmp(f->name, ix->e[i].file))
			return fail(err, errlen, -EINVAL,
				    "%s: weight_map names tensor %s in %s, but it is in %s", ixshown,
				    q, ix->e[i].file, f->shown);
	}
	/* And each shard tensor is in the map: the counts agree once the above held. */
	if (m->nt != ix->n) {
		for (size_t k = 0; k < m->nt; k++) {
			size_t lo = 0, hi = ix->n;
			int hit = 0;

			while (lo < hi && !hit) {
				size_t mid = lo + (hi - lo) / 2;
				int c = strcmp(ix->e[mid].tensor, m->t[k].name);

				hit = c == 0;
				if (c < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (!hit) {
				st_quote(q, sizeof(q), m->t[k].name);
				return fail(err, errlen, -EINVAL,
					    "%s: tensor %s is not in the weight_map of %s",
					    m->f[m->t[k].file].shown, q, ixshown);
			}
		}
	}
	return 0;
}

/* Tensors of all files, the layout, and names unique across files. */
static int build(struct dmafs_model *m, char *err, size_t errlen)
{
	uint64_t off = 0;
	size_t k = 0;
	char q[128];

	m->nt = 0;
	for (unsigned i = 0; i < m->nfiles; i++)
		m->nt += m->f[i].h.n;
	m->t = calloc(m->nt ? m->nt : 1, sizeof(*m->t));
	m->by_name = calloc(m->nt ? m->nt : 1, sizeof(*m->by_name));
	if (!m->t || !m->by_name)
		return fail(err, errlen, -ENOMEM, "out of memory for %zu tensors", m->nt);
	for (unsigned i = 0; i < m->nfiles; i++) {
		struct mfile *f = &m->f[i];
		uint64_t data = 8 + f->h.header_len;

		if (off > UINT64_MAX - MODEL_ALIGN - f->size)
			return fail(err, errlen, -EINVAL, "%s: the model is larger than 2^64 bytes",
				    f->shown);
		f->base = off;
		for (size_t e = 0; e < f->h.n; e++, k++) {
			const struct st_entry *s = &f->h.e[e];
			struct dmafs_tensor *t = &m->t[k];

			t->name = s->name;
			t->dtype = s->dtype;
			t->ndim = s->ndim;
			memcpy(t->shape, s->shape, sizeof(t->shape));
			t->nbytes = s->nbytes;
			t->file = i;
			t->file_offset = data + s->begin;
			t->buffer_offset = f->base + data + s->begin;
			m->by_name[k] = k;
		}
		m->bytes = off + f->size;
		off = (off + f->size + MODEL_ALIGN - 1) / MODEL_ALIGN * MODEL_ALIGN;
	}
	qsort_r(m->by_name, m->nt, sizeof(*m->by_name), tensor_name_cmp, m->t);
	for (size_t i = 1; i < m->nt; i++) {
		const struct dmafs_tensor *a = &m->t[m->by_name[i - 1]], *b = &m->t[m->by_name[i]];

		if (!strcmp(a->name, b->name)) {
			if (a->file > b->file) {
				const struct dmafs_tensor *x = a;

				a = b;
				b = x;
			}
			st_quote(q, sizeof(q), a->name);
			return fail(err, errlen, -EINVAL, "%s: tensor %s is also in %s",
				    m->f[b->file].shown, q, m->f[a->file].shown);
		}
	}
	return 0;
}

/* ---- open, close, accessors ---- */

void dmafs_model_close(struct dmafs_model *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->nfiles; i++) {
		if (m->f[i].fd >= 0)
			close(m->f[i].fd);
		free(m->f[i].path);
		free(m->f[i].shown);
		free(m->f[i].name);
		st_header_free(&m->f[i].h);
	}
	free(m->f);
	free(m->t);
	free(m->by_name);
	free(m);
}

static int locate(struct dmafs_model *m, const char *path, int depth, struct st_index *ix,
		  char **ixshown, char *err, size_t errlen);

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
		return fail(err, errlen, hf, "%s: out of memory", path);
	if (hf == 1 && !access(snap, F_OK)) {
		/* Messages show the snapshot by its absolute path: "refs/main" named it. */
		ret = locate(m, snap, 1, ix, ixshown, err, errlen);
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
		ret = fail(err, errlen, ret, "%s: %s", ixshown, why);
	} else {
		ret = sdir ? index_files(m, ix, dir, sdir) : -ENOMEM;
		if (ret)
			ret = fail(err, errlen, ret, "%s: out of memory", path);
	}
	free(buf);
	return ret;
}

/*
 * Find the files of @path and, for an index, parse it into @ix. @depth: an HF repository
 * directory resolves to its snapshot once; a snapshot is not resolved again (a symlink
 * loop under snapshots/ must not recurse).
 */
static int locate(struct dmafs_model *m, const char *path, int depth, struct st_index *ix,
		  char **ixshown, char *err, size_t errlen)
{
	char *abs = NULL, *dir = NULL, *ixpath = NULL, *sdir = NULL;
	struct stat st;
	int ret;

	if (stat(path, &st)) {
		ret = -errno;
		return fail(err, errlen, ret, "%s: %s", path, strerror(-ret));
	}
	abs = absolute(path);
	if (!abs) {
		ret = errno ? -errno : -ENOMEM;
		return fail(err, errlen, ret, "%s: cannot make the path absolute: %s", path,
			    strerror(-ret));
	}
	if (S_ISREG(st.st_mode) && !ends_with(path, ".json")) {
		ret = add_file(m, NULL, NULL, path);
		if (ret)
			ret = fail(err, errlen, ret, "%s: out of memory", path);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		ixpath = join(abs, INDEX_NAME);
		if (!ixpath) {
			ret = fail(err, errlen, -ENOMEM, "%s: out of memory", path);
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
		ret = fail(err, errlen, -EINVAL, "%s: not a file or directory", path);
		goto out;
	}
	if (!ixpath || !*ixshown || !dir) {
		ret = fail(err, errlen, -ENOMEM, "%s: out of memory", path);
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

int dmafs_model_open(const char *path, struct dmafs_model **out, char *err, size_t errlen)
{
	struct st_index ix = { 0 };
	struct dmafs_model *m;
	char *ixshown = NULL;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (out)
		*out = NULL;
	if (!path || !out)
		return fail(err, errlen, -EINVAL, "dmafs_model_open: %s is NULL",
			    !path ? "path" : "out");
	m = calloc(1, sizeof(*m));
	if (!m)
		return fail(err, errlen, -ENOMEM, "%s: out of memory", path);
	ret = locate(m, path, 0, &ix, &ixshown, err, errlen);
	for (unsigned i = 0; i < m->nfiles && !ret; i++)
		ret = read_header(&m->f[i], err, errlen);
	if (!ret)
		ret = build(m, err, errlen);
	if (!ret && ix.n)
		ret = index_check(m, &ix, ixshown, err, errlen);
	st_index_free(&ix);
	free(ixshown);
	if (ret) {
		dmafs_model_close(m);
		return ret;
	}
	*out = m;
	return 0;
}

unsigned dmafs_model_files(const struct dmafs_model *m)
{
	return m ? m->nfiles : 0;
}

const char *dmafs_model_file(const struct dmafs_model *m, unsigned i)
{
	return m && i < m->nfiles ? m->f[i].path : NULL;
}

int dmafs_model_fd(const struct dmafs_model *m, unsigned i)
{
	return m && i < m->nfiles ? m->f[i].fd : -EINVAL;
}

size_t dmafs_model_tensors(const struct dmafs_model *m)
{
	return m ? m->nt : 0;
}

const struct dmafs_tensor *dmafs_model_tensor(const struct dmafs_model *m, size_t i)
{
	return m && i < m->nt ? &m->t[i] : NULL;
}

long dmafs_model_find(const struct dmafs_model *m, const char *name)
{
	long k;

	if (!m || !name)
		return -EINVAL;
	k = find(m, name);
	return k < 0 ? -ENOENT : k;
}

uint64_t dmafs_model_bytes(const struct dmafs_model *m)
{
	return m ? m->bytes : 0;
}

/* ---- placing ---- */

/*
 * The open file still holds what its header described (same size and mtime). Its name
 * does not matter: a file removed or replaced by a rename is still the open one.
 */
static int unchanged(const struct mfile *f)
{
	struct stat st;

	if (fstat(f->fd, &st))
		return -errno;
	if ((uint64_t)st.st_size != f->size || st.st_mtim.tv_sec != f->mtime.tv_sec ||
	    st.st_mtim.tv_nsec != f->mtime.tv_nsec)
		return -ESTALE;
	return 0;
}

int dmafs_model_place(struct dmafs_model *m, struct dmafs_buf *b, uint64_t buffer_offset,
		      unsigned threads, struct dmafs_result *res)
{
	struct dmafs_result *per = NULL, total;
	uint64_t *offs = NULL;
	int *fds = NULL;
	char *base;
	int ret;

	if (res)
		memset(res, 0, sizeof(*res));
	if (!m || !b)
		return -EINVAL;
	for (size_t i = 0; i < m->nt; i++)
		m->t[i].ptr = NULL;
	if (buffer_offset > dmafs_buf_size(b) || m->bytes > dmafs_buf_size(b) - buffer_offset)
		return -ERANGE;
	for (unsigned i = 0; i < m->nfiles; i++) {
		ret = unchanged(&m->f[i]);
		if (ret)
			return ret;
	}
	fds = calloc(m->nfiles, sizeof(*fds));
	offs = calloc(m->nfiles, sizeof(*offs));
	per = calloc(m->nfiles, sizeof(*per));
	if (!fds || !offs || !per) {
		ret = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < m->nfiles; i++) {
		fds[i] = m->f[i].fd;
		offs[i] = buffer_offset + m->f[i].base;
	}
	ret = dmafs_place_fds(b, fds, offs, m->nfiles, threads, per, &total);
	/* A file that changed between the check and the placement is placed short or long. */
	for (unsigned i = 0; i < m->nfiles && !ret; i++)
		if (per[i].bytes != m->f[i].size)
			ret = -ESTALE;
	if (res) {
		*res = total;
		if (ret)
			res->path = DMAFS_PATH_NONE;
	}
	if (ret)
		goto out;
	base = (char *)dmafs_buf_ptr(b) + buffer_offset;
	for (size_t i = 0; i < m->nt; i++)
		m->t[i].ptr = base + m->t[i].buffer_offset;
out:
	free(fds);
	free(offs);
	free(per);
	return ret;
}

/*
 * Place the files' bytes in layout range [begin, end); layout byte x lands at buffer
 * offset @at + (x - begin). Arguments already checked.
 */
static int place_layout(struct dmafs_model *m, struct dmafs_buf *b, uint64_t at, uint64_t begin,
			uint64_t end, unsigned threads, struct dmafs_result *res)
{
	struct dmafs_result *per = NULL;
	uint64_t *offs = NULL, *foffs = NULL, *lens = NULL;
	int *fds = NULL;
	size_t n = 0;
	int ret;

	fds = calloc(m->nfiles + 1, sizeof(*fds));
	offs = calloc(m->nfiles + 1, sizeof(*offs));
	foffs = calloc(m->nfiles + 1, sizeof(*foffs));
	lens = calloc(m->nfiles + 1, sizeof(*lens));
	per = calloc(m->nfiles + 1, sizeof(*per));
	if (!fds || !offs || !foffs || !lens || !per) {
		ret = -ENOMEM;
		goto out;
	}
	/* The files' bytes inside [begin, end); the padding between files is not written. */
	for (unsigned i = 0; i < m->nfiles; i++) {
		const struct mfile *f = &m->f[i];
		uint64_t lo = begin > f->base ? begin : f->base;
		uint64_t hi = end < f->base + f->size ? end : f->base + f->size;

		if (lo >= hi)
			continue;
		ret = unchanged(f);
		if (ret)
			goto out;
		fds[n] = f->fd;
		foffs[n] = lo - f->base;
		lens[n] = hi - lo;
		offs[n] = at + (lo - begin);
		n++;
	}
	if (n == 0) {
		/* Nothing of the model in the range: the path a placement would take. */
		if (res)
			res->path = b->path_hint;
		ret = 0;
		goto out;
	}
	ret = place_ranges(b, NULL, fds, foffs, lens, offs, n, threads, per, res);
	/* A file that changed between the check and the placement is placed short. */
	for (size_t i = 0; i < n && !ret; i++)
		if (per[i].bytes != lens[i])
			ret = -ESTALE;
	if (ret && res)
		res->path = DMAFS_PATH_NONE;
out:
	free(fds);
	free(offs);
	free(foffs);
	free(lens);
	free(per);
	return ret;
}

/*
 * The checks of a layout range [@begin, @end) placed into @b at @buffer_offset: the
 * whole layout must fit there (@compact 0), or only the range (@compact 1).
 */
static int range_args(struct dmafs_model *m, struct dmafs_buf *b, uint64_t buffer_offset,
		      uint64_t begin, uint64_t end, int compact, struct dmafs_result *res)
{
	if (res)
		memset(res, 0, sizeof(*res));
	if (!m || !b || begin > end)
		return -EINVAL;
	if (end > m->bytes)
		return -ERANGE;
	if (buffer_offset > dmafs_buf_size(b) ||
	    (compact ? end - begin : m->bytes) > dmafs_buf_size(b) - buffer_offset)
		return -ERANGE;
	return 0;
}

int dmafs_model_place_part(struct dmafs_model *m, struct dmafs_buf *b, uint64_t buffer_offset,
			   uint64_t begin, uint64_t end, unsigned threads,
			   struct dmafs_result *res)
{
	int ret = range_args(m, b, buffer_offset, begin, end, 0, res);

	return ret ? ret : place_layout(m, b, buffer_offset + begin, begin, end, threads, res);
}

int dmafs_model_place_range(struct dmafs_model *m, struct dmafs_buf *b, uint64_t buffer_offset,
			    uint64_t begin, uint64_t end, unsigned threads,
			    struct dmafs_result *res)
{
	int ret = range_args(m, b, buffer_offset, begin, end, 1, res);

	return ret ? ret : place_layout(m, b, buffer_offset, begin, end, threads, res);
}
