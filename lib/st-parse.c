// SPDX-License-Identifier: MIT
/*
 * st-parse.c - the strict reader of safetensors headers and index files: a JSON parser
 * that walks their schema, and the checks of what they say (dtypes, shapes, offsets,
 * overlaps, duplicate names). No I/O: safetensors.c reads the files.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "safetensors.h"

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

/* ---- messages ---- */

void st_quote(char *dst, size_t len, const char *s)
{
	size_t o = 0, max = 96;
	const unsigned char *p = (const unsigned char *)s;

	if (!len)
		return;
	/* Leave room for the closing quote, "..." and the NUL. */
	if (len < 8) {
		dst[0] = '\0';
		return;
	}
	if (max > len - 6)
		max = len - 6;
	dst[o++] = '\'';
	for (; *p && o < max; p++) {
		if (*p < 0x20 || *p == 0x7f || *p == '\'' || *p == '\\') {
			if (o + 4 > max)
				break;
			o += (size_t)snprintf(dst + o, len - o, "\\x%02x", *p);
		} else {
			dst[o++] = (char)*p;
		}
	}
	if (*p) {
		/* Cut before a UTF-8 continuation byte, never inside a character. */
		while (o > 1 && ((unsigned char)dst[o - 1] & 0xc0) == 0x80)
			o--;
		if (o > 1 && (unsigned char)dst[o - 1] >= 0xc0)
			o--;
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o++] = '\'';
	dst[o] = '\0';
}

static int seterr(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static void fmt_shape(char *dst, size_t len, const int64_t *shape, int ndim)
{
	size_t o = 0;

	o += (size_t)snprintf(dst, len, "[");
	for (int i = 0; i < ndim && o < len; i++)
		o += (size_t)snprintf(dst + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (o < len)
		snprintf(dst + o, len - o, "]");
}

/* ---- JSON ---- */

/*
 * Strings are decoded into an arena as large as the input plus one: a decoded string with
 * its NUL is never longer than its quoted form (escapes only shrink), and strings that are
 * kept come from disjoint parts of the input, so the arena never needs to grow and
 * pointers into it stay valid for the whole parse.
 */
struct jp {
	const uint8_t *start, *p, *end;
	char *err;
	size_t errlen;
	int failed;	/* err already holds the first error */
	char *arena;
	size_t used;	/* bytes of kept strings */
	/* the last string read, at arena + used (kept only by keep()) */
	char *s;
	size_t slen;
	int snul;	/* it contains U+0000 */
	const char *where; /* "header byte" (offset 8 in the file) or "byte" */
};

static int jfail(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jfail(struct jp *j, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	if (j->failed)
		return -EINVAL;
	j->failed = 1;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return seterr(j->err, j->errlen, "invalid JSON at %s %zu: %s", j->where,
		      (size_t)(j->p - j->start), what);
}

/* A schema error: the JSON is well formed so far, what it says is wrong. */
static int jbad(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jbad(struct jp *j, const char *fmt, ...)
{
	va_list ap;

	if (j->failed)
		return -EINVAL;
	j->failed = 1;
	if (j->err && j->errlen) {
		va_start(ap, fmt);
		vsnprintf(j->err, j->errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int jinit(struct jp *j, const uint8_t *buf, size_t len, const char *where, char *err,
		 size_t errlen)
{
	memset(j, 0, sizeof(*j));
	j->where = where;
	j->start = j->p = buf;
	j->end = buf + len;
	j->err = err;
	j->errlen = errlen;
	j->arena = malloc(len + 1);
	return j->arena ? 0 : -ENOMEM;
}

static int peek(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
	return j->p < j->end ? *j->p : -1;
}

static const char *found(struct jp *j)
{
	static __thread char b[24];
	int c = peek(j);

	if (c < 0)
		return "the end of the JSON";
	if (c >= 0x20 && c < 0x7f)
		snprintf(b, sizeof(b), "'%c'", c);
	else
		snprintf(b, sizeof(b), "byte 0x%02x", c);
	return b;
}

static int expect(struct jp *j, int c)
{
	if (peek(j) != c)
		return jfail(j, "expected '%c', found %s", c, found(j));
	j->p++;
	return 0;
}

/*
 * Does the value at the cursor start with @c? When not, the caller reports a schema error
 * ("must be an object"), unless the input ended, which is a syntax error reported here.
 */
static int starts(struct jp *j, int c)
{
	int k = peek(j);

	if (k == c)
		return 1;
	if (k < 0)
		jfail(j, "unexpected end of the JSON");
	return 0;
}

/* After a member or element: 1 for ',', 0 for @close, or an error. */
static int next(struct jp *j, int close)
{
	int c = peek(j);

	if (c == ',' || c == close) {
		j->p++;
		return c == ',';
	}
	return jfail(j, "expected ',' or '%c', found %s", close, found(j));
}

/* Length of the well-formed UTF-8 sequence at @p (Unicode table 3-7), 0 if there is none. */
static size_t utf8_len(const uint8_t *p, const uint8_t *end)
{
	uint8_t c = p[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		if (c == 0xed)
			hi = 0x9f; /* UTF-16 surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		if (c == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return 0;
	}
	if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

static int hex4(struct jp *j, unsigned *v)
{
	*v = 0;
	if (j->end - j->p < 4)
		return jfail(j, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		int c = j->p[i], d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return jfail(j, "invalid \\u escape");
		*v = *v << 4 | (unsigned)d;
	}
	j->p += 4;
	return 0;
}

static void put_utf8(struct jp *j, unsigned cp)
{
	char *o = j->s + j->slen;

	if (cp < 0x80) {
		o[0] = (char)cp;
		j->slen += 1;
	} else if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		j->slen += 2;
	} else if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		j->slen += 3;
	} else {
		o[0] = (char)(0xf0 | cp >> 18);
		o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[3] = (char)(0x80 | (cp & 0x3f));
		j->slen += 4;
	}
}

static int escape(struct jp *j)
{
	unsigned cp, lo;
	int c;

	if (j->p >= j->end)
		return jfail(j, "unterminated string");
	c = *j->p++;
	switch (c) {
	case '"': case '\\': case '/':
		cp = (unsigned)c;
		break;
	case 'b': cp = '\b'; break;
	case 'f': cp = '\f'; break;
	case 'n': cp = '\n'; break;
	case 'r': cp = '\r'; break;
	case 't': cp = '\t'; break;
	case 'u':
		if (hex4(j, &cp))
			return -EINVAL;
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return jfail(j, "unpaired UTF-16 surrogate \\u%04x", cp);
		if (cp >= 0xd800 && cp <= 0xdbff) {
			if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
				return jfail(j, "unpaired UTF-16 surrogate \\u%04x", cp);
			j->p += 2;
			if (hex4(j, &lo))
				return -EINVAL;
			if (lo < 0xdc00 || lo > 0xdfff)
				return jfail(j, "unpaired UTF-16 surrogate \\u%04x", cp);
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		break;
	default:
		j->p--;
		return jfail(j, "invalid escape '\\%c'", c >= 0x20 && c < 0x7f ? c : '?');
	}
	if (cp == 0)
		j->snul = 1;
	put_utf8(j, cp);
	return 0;
}

/* Read a string into j->s (NUL-terminated, j->slen bytes; not kept). */
static int jstr(struct jp *j)
{
	if (!starts(j, '"'))
		return jfail(j, "expected a string, found %s", found(j));
	j->p++;
	j->s = j->arena + j->used;
	j->slen = 0;
	j->snul = 0;
	for (;;) {
		const uint8_t *q = j->p;
		size_t n;

		while (q < j->end && *q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\')
			q++;
		memcpy(j->s + j->slen, j->p, (size_t)(q - j->p));
		j->slen += (size_t)(q - j->p);
		j->p = q;
		if (j->p >= j->end)
			return jfail(j, "unterminated string");
		if (*j->p == '"') {
			j->p++;
			break;
		}
		if (*j->p < 0x20)
			return jfail(j, "control character 0x%02x in a string (must be escaped)", *j->p);
		if (*j->p == '\\') {
			j->p++;
			if (escape(j))
				return -EINVAL;
			continue;
		}
		n = utf8_len(j->p, j->end);
		if (!n)
			return jfail(j, "invalid UTF-8 in a string");
		memcpy(j->s + j->slen, j->p, n);
		j->slen += n;
		j->p += n;
	}
	j->s[j->slen] = '\0';
	return 0;
}

/* Keep the last string: the arena moves past it. Returns its address. */
static char *keep(struct jp *j)
{
	char *s = j->s;

	j->used += j->slen + 1;
	return s;
}

static int is(const struct jp *j, const char *lit)
{
	return j->slen == strlen(lit) && !memcmp(j->s, lit, j->slen);
}

struct jnum {
	uint64_t v;	/* when an integer below ST_INT_MAX */
	int neg, frac, exp, big;
};

static int isdig(const struct jp *j)
{
	return j->p < j->end && *j->p >= '0' && *j->p <= '9';
}

/* A JSON number (RFC 8259 grammar). */
static int jnum(struct jp *j, struct jnum *n)
{
	memset(n, 0, sizeof(*n));
	peek(j);
	if (j->p < j->end && *j->p == '-') {
		n->neg = 1;
		j->p++;
	}
	if (!isdig(j))
		return jfail(j, "expected a number, found %s", found(j));
	if (*j->p == '0') {
		j->p++;
		if (isdig(j))
			return jfail(j, "number with a leading zero");
	} else {
		/* v < 2^53 before each step, so v * 10 + 9 cannot overflow. */
		for (; isdig(j); j->p++) {
			if (!n->big)
				n->v = n->v * 10 + (uint64_t)(*j->p - '0');
			if (n->v >= ST_INT_MAX)
				n->big = 1;
		}
	}
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		n->frac = 1;
		if (!isdig(j))
			return jfail(j, "no digits after the decimal point");
		while (isdig(j))
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		n->exp = 1;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (!isdig(j))
			return jfail(j, "no digits in the exponent");
		while (isdig(j))
			j->p++;
	}
	return 0;
}

/* A number that must be a non-negative integer below 2^53; @what names it in errors. */
static int juint(struct jp *j, const char *what, uint64_t *v)
{
	struct jnum n;

	if (jnum(j, &n))
		return -EINVAL;
	if (n.neg || n.frac || n.exp)
		return jbad(j, "%s must be a non-negative integer without fraction or exponent", what);
	if (n.big)
		return jbad(j, "%s must be below 2^53", what);
	*v = n.v;
	return 0;
}

static int jlit(struct jp *j, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n))
		return jfail(j, "expected a JSON value, found %s", found(j));
	j->p += n;
	return 0;
}

/* Keys of one object, for the duplicate check (they may hold U+0000: compared by length). */
struct keys {
	struct key {
		const char *s;
		size_t len;
	} *k;
	size_t n, cap;
};

static int keys_add(struct keys *ks, const char *s, size_t len)
{
	if (dm_grow(&ks->k, &ks->cap, ks->n + 1, sizeof(*ks->k), 16))
		return -ENOMEM;
	ks->k[ks->n].s = s;
	ks->k[ks->n].len = len;
	ks->n++;
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	const struct key *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->s, y->s, n);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The first duplicate key, or NULL. Sorts the keys. */
static const struct key *keys_dup(struct keys *ks)
{
	if (ks->n < 2)
		return NULL;
	qsort(ks->k, ks->n, sizeof(*ks->k), key_cmp);
	for (size_t i = 1; i < ks->n; i++)
		if (!key_cmp(&ks->k[i - 1], &ks->k[i]))
			return &ks->k[i];
	return NULL;
}

static int dup_err(struct jp *j, const char *where, const struct key *k)
{
	char q[128];

	st_quote(q, sizeof(q), k->s);
	return jbad(j, "%sduplicate key %s", where, q);
}

/* Any JSON value, checked and dropped; @depth levels are open around it. */
static int jskip(struct jp *j, int depth)
{
	int c = peek(j), ret = 0, more = 0;

	if (c == '"')
		return jstr(j);
	if (c == '-' || (c >= '0' && c <= '9')) {
		struct jnum n;

		return jnum(j, &n);
	}
	if (c == 't')
		return jlit(j, "true");
	if (c == 'f')
		return jlit(j, "false");
	if (c == 'n')
		return jlit(j, "null");
	if (c != '{' && c != '[')
		return jfail(j, "expected a JSON value, found %s", found(j));
	if (depth >= ST_DEPTH_MAX)
		return jfail(j, "nesting deeper than %d levels", ST_DEPTH_MAX);
	j->p++;
	if (peek(j) == (c == '{' ? '}' : ']')) {
		j->p++;
		return 0;
	}
	if (c == '[') {
		do {
			if (jskip(j, depth + 1))
				return -EINVAL;
		} while ((more = next(j, ']')) == 1);
		return more < 0 ? -EINVAL : 0;
	}
	/* An object: its keys stay in the arena until its end, then the arena rolls back. */
	{
		struct keys ks = { 0 };
		size_t mark = j->used;
		const struct key *d;

		do {
			if (jstr(j) || expect(j, ':')) {
				ret = -EINVAL;
				break;
			}
			ret = keys_add(&ks, j->s, j->slen);
			if (ret)
				break;
			keep(j);
			if (jskip(j, depth + 1)) {
				ret = -EINVAL;
				break;
			}
		} while ((more = next(j, '}')) == 1);
		if (!ret && more < 0)
			ret = -EINVAL;
		if (!ret && (d = keys_dup(&ks)))
			ret = dup_err(j, "", d);
		free(ks.k);
		j->used = mark;
		return ret;
	}
}

/* Only whitespace may follow the top object (the reference writer pads with spaces). */
static int jend(struct jp *j)
{
	if (peek(j) >= 0)
		return jfail(j, "%s after the end of the top-level object (only whitespace may follow it)",
			     found(j));
	return 0;
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

	if (!starts(j, '{'))
		return jbad(j, "\"__metadata__\" must be an object of strings");
	j->p++;
	if (peek(j) == '}') {
		j->p++;
		return 0;
	}
	do {
		if (jstr(j) || expect(j, ':')) {
			ret = -EINVAL;
			break;
		}
		ret = keys_add(&ks, j->s, j->slen);
		if (ret)
			break;
		keep(j);
		if (!starts(j, '"')) {
			st_quote(q, sizeof(q), ks.k[ks.n - 1].s);
			ret = jbad(j, "\"__metadata__\" value of %s must be a string", q);
			break;
		}
		if (jstr(j)) {
			ret = -EINVAL;
			break;
		}
	} while ((more = next(j, '}')) == 1);
	if (!ret && more < 0)
		ret = -EINVAL;
	if (!ret && (d = keys_dup(&ks)))
		ret = dup_err(j, "\"__metadata__\": ", d);
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

	if (!starts(j, '['))
		return jbad(j, "tensor %s: \"shape\" must be an array of integers", q);
	j->p++;
	if (peek(j) == ']') {
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
	} while ((more = next(j, ']')) == 1);
	return more < 0 ? -EINVAL : 0;
}

static int parse_offsets(struct jp *j, const char *q, struct st_entry *e)
{
	char what[160];

	if (!starts(j, '['))
		return jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q);
	j->p++;
	snprintf(what, sizeof(what), "tensor %s: data_offsets begin", q);
	if (peek(j) == ']')
		return jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q);
	if (juint(j, what, &e->begin))
		return -EINVAL;
	if (peek(j) != ',')
		return peek(j) == ']' ? jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q)
				      : expect(j, ',');
	j->p++;
	snprintf(what, sizeof(what), "tensor %s: data_offsets end", q);
	if (juint(j, what, &e->end))
		return -EINVAL;
	if (peek(j) == ',')
		return jbad(j, "tensor %s: \"data_offsets\" must be [begin, end]", q);
	return expect(j, ']');
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
	if (!starts(j, '{'))
		return jbad(j, "tensor %s: expected an object with \"dtype\", \"shape\", \"data_offsets\"",
			    q);
	j->p++;
	if (peek(j) == '}') {
		j->p++;
		goto done;
	}
	do {
		int *have;

		if (jstr(j) || expect(j, ':'))
			return -EINVAL;
		if (is(j, "dtype"))
			have = &have_dtype;
		else if (is(j, "shape"))
			have = &have_shape;
		else if (is(j, "data_offsets"))
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

			if (!starts(j, '"'))
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
	} while ((more = next(j, '}')) == 1);
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

	if (is(j, "__metadata__")) {
		if (*seen_meta)
			return jbad(j, "duplicate key '__metadata__'");
		*seen_meta = 1;
		ret = expect(j, ':');
		return ret ? ret : parse_meta(j, nmeta);
	}
	if (j->slen == 0)
		return jbad(j, "a tensor with an empty name");
	if (j->snul) {
		char q[128];

		st_quote(q, sizeof(q), j->s);
		return jbad(j, "tensor name %s contains U+0000", q);
	}
	name = keep(j);
	ret = expect(j, ':');
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
		return seterr(err, errlen, "no header");
	if (len > ST_HEADER_MAX)
		return seterr(err, errlen, "header of %zu bytes is larger than the %llu byte limit",
			      len, (unsigned long long)ST_HEADER_MAX);
	if (jinit(&j, json, len, "header byte", err, errlen))
		return -ENOMEM;
	if (peek(&j) != '{') {
		ret = jfail(&j, "the header must be a JSON object, found %s", found(&j));
		goto out;
	}
	j.p++;
	if (peek(&j) == '}') {
		j.p++;
		more = 0;
	} else {
		do {
			ret = jstr(&j);
			if (!ret)
				ret = header_member(&j, &v, data_len, &seen_meta, &h->nmeta);
			if (ret)
				goto out;
		} while ((more = next(&j, '}')) == 1);
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
		seterr(err, errlen, "out of memory");
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
		return seterr(err, errlen,
			      "file of %llu bytes is too short for a safetensors header (8-byte length, then JSON)",
			      (unsigned long long)file_size);
	for (int i = 7; i >= 0; i--)
		v = v << 8 | prefix[i];
	if (v > ST_HEADER_MAX)
		return seterr(err, errlen,
			      "header length %llu is larger than the %llu byte limit (not a safetensors file?)",
			      (unsigned long long)v, (unsigned long long)ST_HEADER_MAX);
	if (v > file_size - 8)
		return seterr(err, errlen,
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
		return seterr(err, errlen, "no data");
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

	if (!starts(j, '{'))
		return jbad(j, "\"weight_map\" must be an object {tensor: file}");
	j->p++;
	if (peek(j) == '}') {
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
		t = keep(j);
		if (expect(j, ':'))
			return -EINVAL;
		if (!starts(j, '"'))
			return jbad(j, "weight_map: the value of %s must be a file name", q);
		if (jstr(j))
			return -EINVAL;
		why = bad_file(j->s, j->slen, j->snul);
		if (why) {
			st_quote(r, sizeof(r), j->s);
			return jbad(j, "weight_map: file %s of tensor %s %s", r, q, why);
		}
		f = keep(j);
		if (map_add(v, t, f))
			return -ENOMEM;
	} while ((more = next(j, '}')) == 1);
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
	int map = is(j, "weight_map") && !*seen_map;
	int ret = keys_add(ks, j->s, j->slen);

	if (ret)
		return ret;
	keep(j);
	ret = expect(j, ':');
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
		return dup_err(j, "", d);
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
		return seterr(err, errlen, "no data");
	if (jinit(&j, json, len, "byte", err, errlen))
		return -ENOMEM;
	if (peek(&j) != '{') {
		ret = jfail(&j, "the index must be a JSON object, found %s", found(&j));
		goto out;
	}
	j.p++;
	if (peek(&j) == '}')
		j.p++;
	else {
		do {
			ret = jstr(&j);
			if (!ret)
				ret = index_member(&j, &ks, &v, &seen_map);
			if (ret)
				goto out;
		} while ((more = next(&j, '}')) == 1);
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
		seterr(err, errlen, "out of memory");
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
