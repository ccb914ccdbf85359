// SPDX-License-Identifier: MIT
/*
 * st-json.c - the strict JSON reader under the safetensors parser (st-parse.c says why it
 * is our own): strings decoded and checked as UTF-8, numbers by the RFC 8259 grammar,
 * nesting bounded, duplicate keys found, and the messages that say what is wrong where.
 * Every read is bounded by the end of the buffer.
 */
#include "st-json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

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

int stj_seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

void fmt_shape(char *dst, size_t len, const int64_t *shape, int ndim)
{
	size_t o = 0;

	o += (size_t)snprintf(dst, len, "[");
	for (int i = 0; i < ndim && o < len; i++)
		o += (size_t)snprintf(dst + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (o < len)
		snprintf(dst + o, len - o, "]");
}

/* ---- JSON ---- */

int jfail(struct jp *j, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	if (j->failed)
		return -EINVAL;
	j->failed = 1;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return stj_seterr(j->err, j->errlen, "invalid JSON at %s %zu: %s", j->where,
		      (size_t)(j->p - j->start), what);
}

/* A schema error: the JSON is well formed so far, what it says is wrong. */
int jbad(struct jp *j, const char *fmt, ...)
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

int jinit(struct jp *j, const uint8_t *buf, size_t len, const char *where, char *err,
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

int stj_peek(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
	return j->p < j->end ? *j->p : -1;
}

const char *stj_found(struct jp *j)
{
	static __thread char b[24];
	int c = stj_peek(j);

	if (c < 0)
		return "the end of the JSON";
	if (c >= 0x20 && c < 0x7f)
		snprintf(b, sizeof(b), "'%c'", c);
	else
		snprintf(b, sizeof(b), "byte 0x%02x", c);
	return b;
}

int stj_expect(struct jp *j, int c)
{
	if (stj_peek(j) != c)
		return jfail(j, "expected '%c', found %s", c, stj_found(j));
	j->p++;
	return 0;
}

/*
 * Does the value at the cursor start with @c? When not, the caller reports a schema error
 * ("must be an object"), unless the input ended, which is a syntax error reported here.
 */
int stj_starts(struct jp *j, int c)
{
	int k = stj_peek(j);

	if (k == c)
		return 1;
	if (k < 0)
		jfail(j, "unexpected end of the JSON");
	return 0;
}

/* After a member or element: 1 for ',', 0 for @close, or an error. */
int stj_next(struct jp *j, int close)
{
	int c = stj_peek(j);

	if (c == ',' || c == close) {
		j->p++;
		return c == ',';
	}
	return jfail(j, "expected ',' or '%c', found %s", close, stj_found(j));
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
int jstr(struct jp *j)
{
	if (!stj_starts(j, '"'))
		return jfail(j, "expected a string, found %s", stj_found(j));
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
char *stj_keep(struct jp *j)
{
	char *s = j->s;

	j->used += j->slen + 1;
	return s;
}

int stj_is(const struct jp *j, const char *lit)
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
	stj_peek(j);
	if (j->p < j->end && *j->p == '-') {
		n->neg = 1;
		j->p++;
	}
	if (!isdig(j))
		return jfail(j, "expected a number, found %s", stj_found(j));
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
int juint(struct jp *j, const char *what, uint64_t *v)
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
		return jfail(j, "expected a JSON value, found %s", stj_found(j));
	j->p += n;
	return 0;
}

int keys_add(struct keys *ks, const char *s, size_t len)
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
const struct key *keys_dup(struct keys *ks)
{
	if (ks->n < 2)
		return NULL;
	qsort(ks->k, ks->n, sizeof(*ks->k), key_cmp);
	for (size_t i = 1; i < ks->n; i++)
		if (!key_cmp(&ks->k[i - 1], &ks->k[i]))
			return &ks->k[i];
	return NULL;
}

int stj_dup_err(struct jp *j, const char *where, const struct key *k)
{
	char q[128];

	st_quote(q, sizeof(q), k->s);
	return jbad(j, "%sduplicate key %s", where, q);
}

/* Any JSON value, checked and dropped; @depth levels are open around it. */
int jskip(struct jp *j, int depth)
{
	int c = stj_peek(j), ret = 0, more = 0;

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
		return jfail(j, "expected a JSON value, found %s", stj_found(j));
	if (depth >= ST_DEPTH_MAX)
		return jfail(j, "nesting deeper than %d levels", ST_DEPTH_MAX);
	j->p++;
	if (stj_peek(j) == (c == '{' ? '}' : ']')) {
		j->p++;
		return 0;
	}
	if (c == '[') {
		do {
			if (jskip(j, depth + 1))
				return -EINVAL;
		} while ((more = stj_next(j, ']')) == 1);
		return more < 0 ? -EINVAL : 0;
	}
	/* An object: its keys stay in the arena until its end, then the arena rolls back. */
	{
		struct keys ks = { 0 };
		size_t mark = j->used;
		const struct key *d;

		do {
			if (jstr(j) || stj_expect(j, ':')) {
				ret = -EINVAL;
				break;
			}
			ret = keys_add(&ks, j->s, j->slen);
			if (ret)
				break;
			stj_keep(j);
			if (jskip(j, depth + 1)) {
				ret = -EINVAL;
				break;
			}
		} while ((more = stj_next(j, '}')) == 1);
		if (!ret && more < 0)
			ret = -EINVAL;
		if (!ret && (d = keys_dup(&ks)))
			ret = stj_dup_err(j, "", d);
		free(ks.k);
		j->used = mark;
		return ret;
	}
}

/* Only whitespace may follow the top object (the reference writer pads with spaces). */
int jend(struct jp *j)
{
	if (stj_peek(j) >= 0)
		return jfail(j, "%s after the end of the top-level object (only whitespace may follow it)",
			     stj_found(j));
	return 0;
}
