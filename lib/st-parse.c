// SPDX-License-Identifier: MIT
/*
 * st-parse.c - the strict reader of safetensors headers and index files: their schema
 * walked with the JSON reader of st-json.c, and the checks of what they say (dtypes,
 * shapes, offsets, overlaps, duplicate names). No I/O: safetensors.c reads the files.
 *
 * Why a JSON parser of our own: libdmafs depends on nothing but libc (the GPU runtimes are
 * dlopen'ed), and a header is a small fixed schema. A JSON library would become a
 * dependency of every program that loads a model, still leave the schema checks to us,
 * and be lenient exactly where this reader must not be: duplicate keys (which the common
 * C libraries resolve silently, last or first wins), integers past 2^53 (rounded through
 * doubles), invalid UTF-8, unbounded nesting. Walking the schema directly also keeps
 * memory proportional to the tensors rather than to a document tree.
 *
 * Input is hostile until checked: every read is bounded by the end of the buffer, every
 * multiplication is checked for overflow, and recursion only happens where the schema
 * allows arbitrary values (index metadata), bounded by ST_DEPTH_MAX.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "safetensors.h"
#include "st-json.h"

/* ---- dtypes ---- */

static const struct {
	const char *name;
	unsigned size; /* bytes per element; 0 for F4 (two per byte) */
} dtypes[DMAFS_DT_COUNT] = {
	[DMAFS_DT_BOOL] = { "BOOL", 1 },       [DMAFS_DT_U8] = { "U8", 1 },
	[DMAFS_DT_I8] = { "I8", 1 },	       [DMAFS_DT_I16] = { "I16", 2 },
	[DMAFS_DT_U16] = { "U16", 2 },	       [DMAFS_DT_F16] = { "F16", 2 },
	[DMAFS_DT_BF16] = { "BF16", 2 },       [DMAFS_DT_I32] = { "I32", 4 },
	[DMAFS_DT_U32] = { "U32", 4 },	       [DMAFS_DT_F32] = { "F32", 4 },
	[DMAFS_DT_F64] = { "F64", 8 },	       [DMAFS_DT_I64] = { "I64", 8 },
	[DMAFS_DT_U64] = { "U64", 8 },	       [DMAFS_DT_F8_E4M3] = { "F8_E4M3", 1 },
	[DMAFS_DT_F8_E5M2] = { "F8_E5M2", 1 }, [DMAFS_DT_F8_E8M0] = { "F8_E8M0", 1 },
	[DMAFS_DT_F4] = { "F4", 0 },
};

const char *dmafs_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < DMAFS_DT_COUNT ? dtypes[dtype].name : NULL;
}

unsigned dmafs_dtype_size(int dtype)
{
	return dtype >= 0 && dtype < DMAFS_DT_COUNT ? dtypes[dtype].size : 0;
}

static int dtype_find(const char *s, size_t len)
{
	for (int i = 0; i < DMAFS_DT_COUNT; i++)
		if (strlen(dtypes[i].name) == len && !memcmp(dtypes[i].name, s, len))
			return i;
	return -1;
}

/* ---- safetensors header ---- */

struct entries {
	struct st_entry *e;
	size_t n, cap;
};

static int entry_add(struct entries *v, struct st_entry **out)
{
	if (dm_grow(&v->e, &v->cap, v->n + 1, sizeof(*v->e), 64))
		return -ENOMEM;
	*out = &v->e[v->n++];
	memset(*out, 0, sizeof(**out));
	return 0;
}

static int parse_meta(struct jp *j, size_t *count)
{
	struct keys ks = { 0 };
	size_t mark = j->used;
	const struct key *d;
	int ret = 0, more = 0;
	char q[128];

	if (!stj_starts(j, '{'))
		return jbad(j, "\"__metadata__\" must be an object of strings");
	j->p++;
	if (stj_peek(j) == '}') {
		j->p++;
		return 0;
	}
	do {
		if (jstr(j) || stj_expect(j, ':')) {
			ret = -EINVAL;
			break;
		}
		ret = keys_add(&ks, j->s, j->slen);
		if (ret)
			break;
		stj_keep(j);
		if (!stj_starts(j, '"')) {
			st_quote(q, sizeof(q), ks.k[ks.n - 1].s);
			ret = jbad(j, "\"__metadata__\" value of %s must be a string", q);
			break;
		}
		if (jstr(j)) {
			ret = -EINVAL;
			break;
		}
	} while ((more = stj_next(j, '}')) == 1);
	if (!ret && more < 0)
		ret = -EINVAL;
	if (!ret && (d = keys_dup(&ks)))
		ret = stj_dup_err(j, "\"__metadata__\": ", d);
	*count = ks.n;
	free(ks.k);
	j->used = mark;
	return ret;
}

static int parse_shape(struct jp *j, const char *q, struct st_entry *e)
{
	char what[160];
	uint64_t v;
	int more;

	if (!stj_starts(j, '['))
		return jbad(j, "tensor %s: \"shape\" must be an array of integers", q);
	j->p++;
	if (stj_peek(j) == ']') {
		j->p++;
		return 0; /* a scalar: one element */
	}
	snprintf(what, sizeof(what), "tensor %s: a shape dimension", q);
	do {
		if (e->ndim == DMAFS_MAX_DIMS)
			return jbad(j, "tensor %s: shape has more than %d dimensions", q,
				    DMAFS_MAX_DIMS);
		if (juint(j, what, &v))
			return -EINVAL;
		e->shape[e->ndim++] = (int64_t)v;
	} while ((more = stj_next(j, ']')) == 1);
	return more < 0 ? -EINVAL : 0;
}

static int parse_offsets(struct jp *j, const char *q, struct st_entry *e)
{
	char what[160];

	if (!stj_starts(j, '['))
		return jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q);
	j->p++;
	snprintf(what, sizeof(what), "tensor %s: data_offsets begin", q);
	if (stj_peek(j) == ']')
		return jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q);
	if (juint(j, what, &e->begin))
		return -EINVAL;
	if (stj_peek(j) != ',')
		return stj_peek(j) == ']' ? jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q)
				      : stj_expect(j, ',');
	j->p++;
	snprintf(what, sizeof(what), "tensor %s: data_offsets end", q);
	if (juint(j, what, &e->end))
		return -EINVAL;
	if (stj_peek(j) == ',')
		return jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q);
	return stj_expect(j, ']');
}

/* Shape and offsets agree, and the data lies inside the data section. */
static int check_entry(struct jp *j, const char *q, struct st_entry *e, uint64_t data_len)
{
	uint64_t el = 1, nb;
	unsigned size = dtypes[e->dtype].size;
	char sh[160];

	fmt_shape(sh, sizeof(sh), e->shape, e->ndim);
	for (int i = 0; i < e->ndim; i++)
		if (__builtin_mul_overflow(el, (uint64_t)e->shape[i], &el))
			return jbad(j, "tensor %s: shape %s has more than 2^64 elements", q, sh);
	if (e->dtype == DMAFS_DT_F4)
		nb = el / 2 + el % 2; /* two per byte, the last byte maybe half used */
	else if (__builtin_mul_overflow(el, (uint64_t)size, &nb))
		return jbad(j, "tensor %s: shape %s of %s is more than 2^64 bytes", q, sh,
			    dtypes[e->dtype].name);
	e->nbytes = nb;
	if (e->end < e->begin)
		return jbad(j, "tensor %s: data_offsets [%llu, %llu] end before they begin", q,
			    (unsigned long long)e->begin, (unsigned long long)e->end);
	if (e->end > data_len)
		return jbad(j, "tensor %s: data_offsets [%llu, %llu] run past the end of the data section (%llu bytes)",
			    q, (unsigned long long)e->begin, (unsigned long long)e->end,
			    (unsigned long long)data_len);
	if (e->end - e->begin != nb)
		return jbad(j, "tensor %s: data_offsets [%llu, %llu] hold %llu byte(s), but shape %s of %s needs %llu",
			    q, (unsigned long long)e->begin, (unsigned long long)e->end,
			    (unsigned long long)(e->end - e->begin), sh, dtypes[e->dtype].name,
			    (unsigned long long)nb);
	return 0;
}

static int parse_tensor(struct jp *j, const char *name, uint64_t data_len, struct st_entry *e)
{
	int have_dtype = 0, have_shape = 0, have_off = 0, more;
	char q[128];

	st_quote(q, sizeof(q), name);
	e->name = name;
	if (!stj_starts(j, '{'))
		return jbad(j, "tensor %s: expected an object with \"dtype\", \"shape\", \"data_offsets\"",
			    q);
	j->p++;
	if (stj_peek(j) == '}') {
		j->p++;
		goto done;
	}
	do {
		int *have;

		if (jstr(j) || stj_expect(j, ':'))
			return -EINVAL;
		if (stj_is(j, "dtype"))
			have = &have_dtype;
		else if (stj_is(j, "shape"))
			have = &have_shape;
		else if (stj_is(j, "data_offsets"))
			have = &have_off;
		else {
			char k[128];

			st_quote(k, sizeof(k), j->s);
			return jbad(j, "tensor %s: unknown key %s (expected dtype, shape, data_offsets)",
				    q, k);
		}
		if (*have) {
			char k[128];

			st_quote(k, sizeof(k), j->s);
			return jbad(j, "tensor %s: duplicate key %s", q, k);
		}
		*have = 1;
		if (have == &have_dtype) {
			char d[64];

			if (!stj_starts(j, '"'))
				return jbad(j, "tensor %s: \"dtype\" must be a string", q);
			if (jstr(j))
				return -EINVAL;
			e->dtype = j->snul ? -1 : dtype_find(j->s, j->slen);
			if (e->dtype < 0) {
				st_quote(d, sizeof(d), j->s);
				return jbad(j, "tensor %s: unknown dtype %s", q, d);
			}
		} else if (have == &have_shape) {
			if (parse_shape(j, q, e))
				return -EINVAL;
		} else if (parse_offsets(j, q, e)) {
			return -EINVAL;
		}
	} while ((more = stj_next(j, '}')) == 1);
	if (more < 0)
		return -EINVAL;
done:
	if (!have_dtype || !have_shape || !have_off)
		return jbad(j, "tensor %s: no \"%s\"", q,
			    !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
	return check_entry(j, q, e, data_len);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct st_entry *)a)->name, ((const struct st_entry *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Names unique, data ranges disjoint (empty tensors overlap nothing). Sorts by offset. */
static int check_all(struct jp *j, struct st_entry *e, size_t n)
{
	char q[128], r[128];
	size_t last = SIZE_MAX;

	if (n == 0)
		return 0; /* e may be NULL: not even qsort may see it */
	qsort(e, n, sizeof(*e), by_name);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(e[i - 1].name, e[i].name)) {
			st_quote(q, sizeof(q), e[i].name);
			return jbad(j, "duplicate tensor name %s", q);
		}
	}
	qsort(e, n, sizeof(*e), by_offset);
	for (size_t i = 0; i < n; i++) {
		if (e[i].begin == e[i].end)
			continue;
		if (last != SIZE_MAX && e[i].begin < e[last].end) {
			st_quote(q, sizeof(q), e[i].name);
			st_quote(r, sizeof(r), e[last].name);
			return jbad(j, "tensor %s data_offsets [%llu, %llu] overlap %s [%llu, %llu]", q,
				    (unsigned long long)e[i].begin, (unsigned long long)e[i].end, r,
				    (unsigned long long)e[last].begin,
				    (unsigned long long)e[last].end);
		}
		if (last == SIZE_MAX || e[i].end > e[last].end)
			last = i;
	}
	return 0;
}

/* Move the kept strings into an allocation of their own size; rebase the names. */
static int shrink(struct jp *j, struct st_entry *e, size_t n, char **out)
{
	char *s = malloc(j->used ? j->used : 1);

	if (!s)
		return -ENOMEM;
	memcpy(s, j->arena, j->used);
	for (size_t i = 0; i < n; i++)
		e[i].name = s + (e[i].name - j->arena);
	*out = s;
	return 0;
}

/*
 * One member of the header object, its key just read: "__metadata__" (at most once;
 * *@seen_meta) or a tensor, added to @v.
 */
static int header_member(struct jp *j, struct entries *v, uint64_t data_len, int *seen_meta,
			 size_t *nmeta)
{
	struct st_entry *e;
	char *name;
	int ret;

	if (stj_is(j, "__metadata__")) {
		if (*seen_meta)
			return jbad(j, "duplicate key '__metadata__'");
		*seen_meta = 1;
		ret = stj_expect(j, ':');
		return ret ? ret : parse_meta(j, nmeta);
	}
	if (j->slen == 0)
		return jbad(j, "a tensor with an empty name");
	if (j->snul) {
		char q[128];

		st_quote(q, sizeof(q), j->s);
		return jbad(j, "tensor name %s contains U+0000", q);
	}
	name = stj_keep(j);
	ret = stj_expect(j, ':');
	if (!ret)
		ret = entry_add(v, &e);
	if (!ret)
		ret = parse_tensor(j, name, data_len, e);
	return ret;
}

int st_parse_header(const uint8_t *json, size_t len, uint64_t data_len, struct st_header *h,
		    char *err, size_t errlen)
{
	struct entries v = { 0 };
	struct jp j;
	int ret, seen_meta = 0, more;

	memset(h, 0, sizeof(*h));
	if (!json && len)
		return stj_seterr(err, errlen, "no header");
	if (len > ST_HEADER_MAX)
		return stj_seterr(err, errlen, "header of %zu bytes is larger than the %llu byte limit",
			      len, (unsigned long long)ST_HEADER_MAX);
	if (jinit(&j, json, len, "header byte", err, errlen))
		return -ENOMEM;
	if (stj_peek(&j) != '{') {
		ret = jfail(&j, "the header must be a JSON object, found %s", stj_found(&j));
		goto out;
	}
	j.p++;
	if (stj_peek(&j) == '}') {
		j.p++;
		more = 0;
	} else {
		do {
			ret = jstr(&j);
			if (!ret)
				ret = header_member(&j, &v, data_len, &seen_meta, &h->nmeta);
			if (ret)
				goto out;
		} while ((more = stj_next(&j, '}')) == 1);
	}
	ret = more < 0 ? -EINVAL : jend(&j);
	if (!ret)
		ret = check_all(&j, v.e, v.n);
	if (!ret)
		ret = shrink(&j, v.e, v.n, &h->strings);
	if (!ret) {
		h->header_len = len;
		h->data_len = data_len;
		h->n = v.n;
		h->e = v.e;
		v.e = NULL;
	}
out:
	if (ret == -ENOMEM)
		stj_seterr(err, errlen, "out of memory");
	if (ret)
		h->nmeta = 0;
	free(v.e);
	free(j.arena);
	return ret;
}

int st_header_len(const uint8_t prefix[8], uint64_t file_size, uint64_t *n, char *err,
		  size_t errlen)
{
	uint64_t v = 0;

	if (file_size < 8)
		return stj_seterr(err, errlen,
			      "file of %llu bytes is too short for a safetensors header (8-byte length, then JSON)",
			      (unsigned long long)file_size);
	for (int i = 7; i >= 0; i--)
		v = v << 8 | prefix[i];
	if (v > ST_HEADER_MAX)
		return stj_seterr(err, errlen,
			      "header length %llu is larger than the %llu byte limit (not a safetensors file?)",
			      (unsigned long long)v, (unsigned long long)ST_HEADER_MAX);
	if (v > file_size - 8)
		return stj_seterr(err, errlen,
			      "header length %llu runs past the end of the file (%llu bytes): truncated?",
			      (unsigned long long)v, (unsigned long long)file_size);
	*n = v;
	return 0;
}

int st_parse_file(const uint8_t *buf, size_t len, struct st_header *h, char *err,
		  size_t errlen)
{
	uint64_t n;
	int ret;

	memset(h, 0, sizeof(*h));
	if (!buf && len)
		return stj_seterr(err, errlen, "no data");
	ret = st_header_len(buf, len, &n, err, errlen);
	if (ret)
		return ret;
	return st_parse_header(buf + 8, (size_t)n, len - 8 - n, h, err, errlen);
}

void st_header_free(struct st_header *h)
{
	if (!h)
		return;
	free(h->e);
	free(h->strings);
	memset(h, 0, sizeof(*h));
}

/* ---- index ---- */

struct mapv {
	struct st_map_entry *e;
	size_t n, cap;
};

static int map_add(struct mapv *v, const char *t, const char *f)
{
	if (dm_grow(&v->e, &v->cap, v->n + 1, sizeof(*v->e), 64))
		return -ENOMEM;
	v->e[v->n].tensor = t;
	v->e[v->n].file = f;
	v->n++;
	return 0;
}

/* A shard name from an index must stay in the index's directory tree. */
static const char *bad_file(const char *f, size_t len, int nul)
{
	if (len == 0)
		return "is empty";
	if (nul)
		return "contains U+0000";
	if (f[0] == '/')
		return "is an absolute path (shards are named relative to the index)";
	for (const char *p = f; *p;) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "leaves the index's directory ('..')";
		p += n;
		p += *p == '/';
	}
	return NULL;
}

static int parse_map(struct jp *j, struct mapv *v)
{
	int more;
	char q[128], r[128];

	if (!stj_starts(j, '{'))
		return jbad(j, "\"weight_map\" must be an object {tensor: file}");
	j->p++;
	if (stj_peek(j) == '}') {
		j->p++;
		return 0;
	}
	do {
		const char *t, *f, *why;

		if (jstr(j))
			return -EINVAL;
		st_quote(q, sizeof(q), j->s);
		if (j->slen == 0)
			return jbad(j, "weight_map: a tensor with an empty name");
		if (j->snul)
			return jbad(j, "weight_map: tensor name %s contains U+0000", q);
		t = stj_keep(j);
		if (stj_expect(j, ':'))
			return -EINVAL;
		if (!stj_starts(j, '"'))
			return jbad(j, "weight_map: the value of %s must be a file name", q);
		if (jstr(j))
			return -EINVAL;
		why = bad_file(j->s, j->slen, j->snul);
		if (why) {
			st_quote(r, sizeof(r), j->s);
			return jbad(j, "weight_map: file %s of tensor %s %s", r, q, why);
		}
		f = stj_keep(j);
		if (map_add(v, t, f))
			return -ENOMEM;
	} while ((more = stj_next(j, '}')) == 1);
	return more < 0 ? -EINVAL : 0;
}

static int by_tensor(const void *a, const void *b)
{
	return strcmp(((const struct st_map_entry *)a)->tensor,
		      ((const struct st_map_entry *)b)->tensor);
}

/*
 * One member of the index object, its key just read: the first "weight_map" is parsed
 * into @v, anything else skipped; every key goes to @ks for the duplicate check.
 */
static int index_member(struct jp *j, struct keys *ks, struct mapv *v, int *seen_map)
{
	int map = stj_is(j, "weight_map") && !*seen_map;
	int ret = keys_add(ks, j->s, j->slen);

	if (ret)
		return ret;
	stj_keep(j);
	ret = stj_expect(j, ':');
	if (ret)
		return ret;
	if (!map)
		return jskip(j, 1);
	*seen_map = 1;
	return parse_map(j, v);
}

/* The whole index read: no key twice, a "weight_map" that is not empty and names each
 * tensor once (@v sorted by tensor). */
static int index_check(struct jp *j, struct keys *ks, struct mapv *v, int seen_map)
{
	const struct key *d = keys_dup(ks);
	char q[128];

	if (d)
		return stj_dup_err(j, "", d);
	if (!seen_map)
		return jbad(j, "no \"weight_map\"");
	if (v->n == 0)
		return jbad(j, "\"weight_map\" is empty");
	qsort(v->e, v->n, sizeof(*v->e), by_tensor);
	for (size_t i = 1; i < v->n; i++) {
		if (!strcmp(v->e[i - 1].tensor, v->e[i].tensor)) {
			st_quote(q, sizeof(q), v->e[i].tensor);
			return jbad(j, "weight_map: duplicate key %s", q);
		}
	}
	return 0;
}

int st_parse_index(const uint8_t *json, size_t len, struct st_index *ix, char *err,
		   size_t errlen)
{
	struct keys ks = { 0 };
	struct mapv v = { 0 };
	struct jp j;
	int ret = 0, seen_map = 0, more = 0;

	memset(ix, 0, sizeof(*ix));
	if (!json && len)
		return stj_seterr(err, errlen, "no data");
	if (jinit(&j, json, len, "byte", err, errlen))
		return -ENOMEM;
	if (stj_peek(&j) != '{') {
		ret = jfail(&j, "the index must be a JSON object, found %s", stj_found(&j));
		goto out;
	}
	j.p++;
	if (stj_peek(&j) == '}')
		j.p++;
	else {
		do {
			ret = jstr(&j);
			if (!ret)
				ret = index_member(&j, &ks, &v, &seen_map);
			if (ret)
				goto out;
		} while ((more = stj_next(&j, '}')) == 1);
	}
	ret = more < 0 ? -EINVAL : jend(&j);
	if (!ret)
		ret = index_check(&j, &ks, &v, seen_map);
	if (ret)
		goto out;
	ix->strings = malloc(j.used ? j.used : 1);
	if (!ix->strings) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(ix->strings, j.arena, j.used);
	for (size_t i = 0; i < v.n; i++) {
		v.e[i].tensor = ix->strings + (v.e[i].tensor - j.arena);
		v.e[i].file = ix->strings + (v.e[i].file - j.arena);
	}
	ix->n = v.n;
	ix->e = v.e;
	v.e = NULL;
out:
	if (ret == -ENOMEM)
		stj_seterr(err, errlen, "out of memory");
	free(ks.k);
	free(v.e);
	free(j.arena);
	return ret;
}

void st_index_free(struct st_index *ix)
{
	if (!ix)
		return;
	free(ix->e);
	free(ix->strings);
	memset(ix, 0, sizeof(*ix));
}
