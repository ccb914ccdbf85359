// SPDX-License-Identifier: MIT
/*
 * Description: fuzz target for the safetensors header and index parsers (lib/st-parse.c,
 * lib/st-json.c):
 * any input is refused cleanly (-EINVAL/-ENOMEM with a message) or parsed into entries
 * that satisfy every rule the parser promises; a crash, a sanitizer report or an abort on
 * a broken invariant is a finding.
 *
 * An input is a whole safetensors file. Each one is parsed three ways: as a file
 * (st_parse_file: length prefix, header, data section), as header JSON after the 8-byte
 * prefix with a data section of 2^62 bytes (so that mutations that break the prefix
 * still reach the JSON and the schema checks), and as an index file after the prefix.
 *
 * libFuzzer (clang), a long run:
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZING -Ilib \
 *         tests/fuzz_safetensors.c lib/st-parse.c lib/st-json.c -o fuzz_st
 *     tests/fuzz_safetensors.sh --corpus corpus     # seed corpus: valid + malformed
 *     ./fuzz_st -max_len=65536 -timeout=10 -rss_limit_mb=4096 -jobs=16 corpus
 * (-max_total_time=3600 for an hour; crashes land in crash-* files: run one again with
 * ./fuzz_st crash-...).
 *
 * Standalone driver (any compiler, built by make check; add -fsanitize=address by hand):
 *     fuzz_safetensors [-n N] [-s SEED] [FILE...]
 * runs every FILE as is, then N random mutations of them (of built-in seeds when no FILE
 * is given). Exit 0 when nothing crashed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define DATA_BIG (1ULL << 62)

static void bug(const char *what, const char *err)
{
	fprintf(stderr, "fuzz_safetensors: broken invariant: %s (%s)\n", what, err ? err : "");
	abort();
}

/* An error must be -EINVAL/-ENOMEM with a non-empty, terminated message. */
static void check_err(int ret, const char *err, size_t len)
{
	if (ret != -EINVAL && ret != -ENOMEM)
		bug("error is not -EINVAL or -ENOMEM", err);
	if (!memchr(err, '\0', len) || !err[0])
		bug("error without a message", err);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* What a successful parse promises (safetensors.h). */
static void check_header(const struct st_header *h, uint64_t data_len)
{
	const char **names = malloc((h->n ? h->n : 1) * sizeof(*names));
	uint64_t end = 0;

	if (!names)
		return;
	for (size_t i = 0; i < h->n; i++) {
		const struct st_entry *e = &h->e[i];
		uint64_t el = 1, nb;

		if (!e->name || !e->name[0])
			bug("empty name", NULL);
		if (e->dtype < 0 || e->dtype >= DMAFS_DT_COUNT || !dmafs_dtype_name(e->dtype))
			bug("unknown dtype", e->name);
		if (e->ndim < 0 || e->ndim > DMAFS_MAX_DIMS)
			bug("ndim out of range", e->name);
		for (int d = 0; d < e->ndim; d++) {
			if (e->shape[d] < 0 || (uint64_t)e->shape[d] >= ST_INT_MAX)
				bug("dimension out of range", e->name);
			if (__builtin_mul_overflow(el, (uint64_t)e->shape[d], &el))
				bug("element count overflows", e->name);
		}
		nb = e->dtype == DMAFS_DT_F4 ? el / 2 + el % 2 : el * dmafs_dtype_size(e->dtype);
		if (nb != e->nbytes || e->end < e->begin || e->end - e->begin != nb)
			bug("bytes disagree with shape", e->name);
		if (e->end > data_len)
			bug("data outside the data section", e->name);
		if (i && (e->begin < h->e[i - 1].begin ||
			  (e->begin == h->e[i - 1].begin && e->end < h->e[i - 1].end)))
			bug("not sorted by offset", e->name);
		if (e->begin != e->end) {
			if (e->begin < end)
				bug("overlapping tensors", e->name);
			end = e->end;
		}
		names[i] = e->name;
	}
	qsort(names, h->n, sizeof(*names), cmp_name);
	for (size_t i = 1; i < h->n; i++)
		if (!strcmp(names[i - 1], names[i]))
			bug("duplicate names", names[i]);
	free(names);
}

/* Has @f a ".." component? Written apart from the parser's check on purpose. */
static int dotdot(const char *f)
{
	const char *c = f;

	for (const char *p = f;; p++) {
		if (*p == '/' || *p == '\0') {
			if (p - c == 2 && c[0] == '.' && c[1] == '.')
				return 1;
			if (!*p)
				return 0;
			c = p + 1;
		}
	}
}

static void check_index(const struct st_index *ix)
{
	if (ix->n == 0)
		bug("empty index accepted", NULL);
	for (size_t i = 0; i < ix->n; i++) {
		const char *f = ix->e[i].file;

		if (!ix->e[i].tensor[0] || !f[0] || f[0] == '/' || dotdot(f))
			bug("bad index entry accepted", f);
		if (i && strcmp(ix->e[i - 1].tensor, ix->e[i].tensor) >= 0)
			bug("index not sorted or duplicate", ix->e[i].tensor);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_header h;
	struct st_index ix;
	char err[512];
	int ret;

	memset(err, 'x', sizeof(err));
	ret = st_parse_file(data, size, &h, err, sizeof(err));
	if (ret)
		check_err(ret, err, sizeof(err));
	else
		check_header(&h, h.data_len), st_header_free(&h);
	if (size < 8)
		return 0;
	memset(err, 'x', sizeof(err));
	ret = st_parse_header(data + 8, size - 8, DATA_BIG, &h, err, sizeof(err));
	if (ret)
		check_err(ret, err, sizeof(err));
	else
		check_header(&h, DATA_BIG), st_header_free(&h);
	memset(err, 'x', sizeof(err));
	ret = st_parse_index(data + 8, size - 8, &ix, err, sizeof(err));
	if (ret)
		check_err(ret, err, sizeof(err));
	else
		check_index(&ix), st_index_free(&ix);
	return 0;
}

#ifndef FUZZING
/* ---- standalone driver: seeds, then random mutations ---- */

#define MAX_INPUT (256u << 10)

struct seed {
	uint8_t *b;
	size_t len;
	size_t data_len; /* bytes after the header the prefix announces, kept by mutations */
};

static unsigned long long rng = 0x9e3779b97f4a7c15ULL;

static unsigned long long rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static size_t below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static const char *const tokens[] = {
	"{", "}", "[", "]", "\"", ":", ",", "0", "1", "-1", "1.5", "1e3", "01",
	"9007199254740991", "9007199254740992", "18446744073709551616", "\\u0000",
	"\\ud800", "\\udc00", "\\ud83d\\ude00", "\\", "\xff", "\xc0\x80", "\xed\xa0\x80",
	"\xf4\x90\x80\x80", "null", "true", "\"__metadata__\"", "\"dtype\"", "\"shape\"",
	"\"data_offsets\"", "\"BF16\"", "\"F4\"", "\"F8_E8M0\"", "\"weight_map\"",
	"[[[[[[[[[[[[[[[[", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}",
	"[4294967296,4294967296,4294967296]", "[1,1,1,1,1,1,1,1,1]", " ", "\t\n", "\"../x\"",
	"\"/abs\"",
};

static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* One random edit of buf[lo, *len), keeping *len <= MAX_INPUT. */
static void mutate(uint8_t *buf, size_t *len, size_t lo)
{
	size_t n = *len, at = lo + below(n - lo + 1), k;
	const char *t;

	switch (rnd() % 7) {
	case 0: /* flip a bit */
		if (at < n)
			buf[at] ^= (uint8_t)(1u << (rnd() % 8));
		break;
	case 1: /* set a byte to something JSON cares about */
		if (at < n)
			buf[at] = (uint8_t)"{}[]\":,0123456789-.eE\\u \x00\xff\x80\xc3"[rnd() % 29];
		break;
	case 2: /* delete a range */
		k = below(n - at < 64 ? n - at + 1 : 64);
		memmove(buf + at, buf + at + k, n - at - k);
		*len = n - k;
		break;
	case 3: /* insert a token */
		t = tokens[rnd() % (sizeof(tokens) / sizeof(*tokens))];
		k = strlen(t);
		if (n + k > MAX_INPUT)
			break;
		memmove(buf + at + k, buf + at, n - at);
		memcpy(buf + at, t, k);
		*len = n + k;
		break;
	case 4: /* copy a range over another place */
		if (n > lo) {
			size_t from = lo + below(n - lo);

			k = below(n - from < 32 ? n - from + 1 : 32);
			if (at + k <= n)
				memmove(buf + at, buf + from, k);
		}
		break;
	case 5: /* duplicate a range (repeats keys, grows arrays) */
		if (n > lo) {
			size_t from = lo + below(n - lo);

			k = below(n - from < 48 ? n - from + 1 : 48);
			if (n + k > MAX_INPUT)
				break;
			memmove(buf + at + k, buf + at, n - at);
			memmove(buf + at, buf + (from >= at ? from + k : from), k);
			*len = n + k;
		}
		break;
	default: /* truncate */
		*len = at;
		break;
	}
}

static void run_one(const struct seed *s, uint8_t *buf)
{
	size_t len = s->len, edits = 1 + below(4);

	memcpy(buf, s->b, len);
	for (size_t i = 0; i < edits; i++)
		mutate(buf, &len, len >= 8 && rnd() % 5 ? 8 : 0);
	/* Mostly keep the framing right so the JSON is what gets tested; sometimes not. */
	if (len >= 8) {
		switch (rnd() % 8) {
		case 0:
			le64(buf, rnd() % (len + 16));
			break;
		case 1:
			le64(buf, rnd());
			break;
		default:
			if (len >= 8 + s->data_len)
				le64(buf, len - 8 - s->data_len);
		}
	}
	LLVMFuzzerTestOneInput(buf, len);
}

static int add_seed(struct seed **v, size_t *n, const uint8_t *b, size_t len)
{
	struct seed *nv = realloc(*v, (*n + 1) * sizeof(**v));
	uint64_t h = 0;

	if (!nv)
		return -1;
	*v = nv;
	nv[*n].b = malloc(len ? len : 1);
	if (!nv[*n].b)
		return -1;
	memcpy(nv[*n].b, b, len);
	nv[*n].len = len;
	for (int i = 7; len >= 8 && i >= 0; i--)
		h = h << 8 | b[i];
	nv[*n].data_len = len >= 8 && h <= len - 8 ? len - 8 - h : 0;
	(*n)++;
	return 0;
}

static int add_builtin(struct seed **v, size_t *n, const char *json, size_t data)
{
	size_t j = strlen(json), len = 8 + j + data;
	uint8_t *b = calloc(1, len);
	int ret;

	if (!b)
		return -1;
	le64(b, j);
	memcpy(b + 8, json, j);
	ret = add_seed(v, n, b, len);
	free(b);
	return ret;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = malloc(MAX_INPUT);

	if (!f || !b) {
		if (f)
			fclose(f);
		free(b);
		return NULL;
	}
	*len = fread(b, 1, MAX_INPUT, f);
	fclose(f);
	return b;
}

int main(int argc, char **argv)
{
	unsigned long n = 1000;
	struct seed *seeds = NULL;
	size_t nseeds = 0, len;
	uint8_t *buf, *b;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-s") && i + 1 < argc)
			rng = strtoull(argv[++i], NULL, 0) * 2654435761ULL + 1;
		else if (!strcmp(argv[i], "-h") || (argv[i][0] == '-' && argv[i][1])) {
			fprintf(stderr, "usage: fuzz_safetensors [-n MUTATIONS] [-s SEED] [FILE...]\n");
			return argv[i][1] == 'h' ? 0 : 1;
		} else
			break;
	}
	buf = malloc(MAX_INPUT + 64);
	if (!buf)
		return 1;
	for (; i < argc; i++) {
		b = slurp(argv[i], &len);
		if (!b) {
			perror(argv[i]);
			return 1;
		}
		LLVMFuzzerTestOneInput(b, len); /* the file itself first */
		if (add_seed(&seeds, &nseeds, b, len))
			return 1;
		free(b);
	}
	if (!nseeds) {
		add_builtin(&seeds, &nseeds,
			    "{\"__metadata__\":{\"format\":\"pt\"},"
			    "\"a.weight\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
			    "\"b\\u00e9\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[12,14]},"
			    "\"c\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[14,14]},"
			    "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[16,20]}}   ",
			    20);
		add_builtin(&seeds, &nseeds,
			    "{\"metadata\":{\"total_size\":20,\"x\":[1,{\"y\":null}]},\"weight_map\":"
			    "{\"a.weight\":\"model-00001-of-00002.safetensors\",\"b\":\"sub/m.safetensors\"}}",
			    0);
	}
	for (unsigned long k = 0; k < n; k++)
		run_one(&seeds[k % nseeds], buf);
	printf("fuzz_safetensors: %zu input(s) and %lu mutation(s), no crash\n", nseeds, n);
	for (size_t k = 0; k < nseeds; k++)
		free(seeds[k].b);
	free(seeds);
	free(buf);
	return 0;
}
#endif
