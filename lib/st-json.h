/* SPDX-License-Identifier: MIT */
/*
 * st-json.h - what the safetensors parser (st-parse.c) takes from its JSON reader
 * (st-json.c): the reader's state, its error messages and the calls that walk a
 * document. Internal to libdmafs; st-json.c calls nothing of st-parse.c.
 */
#ifndef DMAFS_ST_JSON_H
#define DMAFS_ST_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

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
	/* the last string read, at arena + used (kept only by stj_keep()) */
	char *s;
	size_t slen;
	int snul;	/* it contains U+0000 */
	const char *where; /* "header byte" (offset 8 in the file) or "byte" */
};

/* Keys of one object, for the duplicate check (they may hold U+0000: compared by length). */
struct keys {
	struct key {
		const char *s;
		size_t len;
	} *k;
	size_t n, cap;
};

/* Write the message into @err (when it has room); returns -EINVAL. */
int stj_seterr(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* @shape's @ndim dimensions as "[a, b, c]" into @dst. */
void fmt_shape(char *dst, size_t len, const int64_t *shape, int ndim);

/* A JSON error at the reader's position (the first one only); returns -EINVAL. */
int jfail(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A schema error: the JSON is well formed so far, what it says is wrong; -EINVAL. */
int jbad(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Start reading @len bytes at @buf; @where names positions in errors. 0 or -ENOMEM. */
int jinit(struct jp *j, const uint8_t *buf, size_t len, const char *where, char *err,
	  size_t errlen);
/* The next byte after whitespace (not taken), or -1 at the end. */
int stj_peek(struct jp *j);
/* What is at the reader's position, for an error message. */
const char *stj_found(struct jp *j);
/* Take the byte @c after whitespace, or fail. */
int stj_expect(struct jp *j, int c);
/* Whether the next value starts with @c (nothing taken). */
int stj_starts(struct jp *j, int c);
/* After a member or element: 1 for ',', 0 for @close, or an error. */
int stj_next(struct jp *j, int close);
/* Read a string into j->s (NUL-terminated, j->slen bytes; not kept). */
int jstr(struct jp *j);
/* Keep the last string: the arena moves past it. Returns its address. */
char *stj_keep(struct jp *j);
/* Whether the last string is @lit. */
int stj_is(const struct jp *j, const char *lit);
/* A number that must be a non-negative integer below 2^53; @what names it in errors. */
int juint(struct jp *j, const char *what, uint64_t *v);
/* Note a key of an object for the duplicate check. 0 or -ENOMEM. */
int keys_add(struct keys *ks, const char *s, size_t len);
/* The first duplicate key, or NULL. Sorts the keys. */
const struct key *keys_dup(struct keys *ks);
/* The error for duplicate key @k, @where in front. */
int stj_dup_err(struct jp *j, const char *where, const struct key *k);
/* Any JSON value, checked and dropped; @depth levels are open around it. */
int jskip(struct jp *j, int depth);
/* Only whitespace may follow the top object. */
int jend(struct jp *j);

#endif
