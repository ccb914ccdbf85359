// SPDX-License-Identifier: MIT
/*
 * safetensors.c - dmafs_model_*: the files of a safetensors model found and their headers
 * read (st-files.c: one file, a directory, an index, a Hugging Face cache snapshot), their
 * tensors checked across files, the files laid out in one buffer and placed with
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
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "libdmafs-int.h"
#include "st-model.h"

#define MODEL_ALIGN 4096ULL

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
			return st_fail(err, errlen, -EINVAL,
				    "%s: weight_map names tensor %s in %s, which does not hold it",
				    ixshown, q, ix->e[i].file);
		f = &m->f[m->t[k].file];
		if (strcmp(f->name, ix->e[i].file))
			return st_fail(err, errlen, -EINVAL,
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
				return st_fail(err, errlen, -EINVAL,
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
		return st_fail(err, errlen, -ENOMEM, "out of memory for %zu tensors", m->nt);
	for (unsigned i = 0; i < m->nfiles; i++) {
		struct mfile *f = &m->f[i];
		uint64_t data = 8 + f->h.header_len;

		if (off > UINT64_MAX - MODEL_ALIGN - f->size)
			return st_fail(err, errlen, -EINVAL, "%s: the model is larger than 2^64 bytes",
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
			return st_fail(err, errlen, -EINVAL, "%s: tensor %s is also in %s",
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
		return st_fail(err, errlen, -EINVAL, "dmafs_model_open: %s is NULL",
			    !path ? "path" : "out");
	m = calloc(1, sizeof(*m));
	if (!m)
		return st_fail(err, errlen, -ENOMEM, "%s: out of memory", path);
	ret = st_locate(m, path, 0, &ix, &ixshown, err, errlen);
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
