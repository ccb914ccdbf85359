// SPDX-License-Identifier: MIT
/*
 * Description: safetensors models in libdmafs without a mount: every header validation
 * rule refuses its malformed file with an error naming the file and the problem; valid
 * edge cases are accepted; generated Qwen3-0.6B (scaled 16) and sharded Qwen2.5-7B
 * (scaled 32, 4 shards + index, and as a Hugging Face cache snapshot) read the same as
 * the Python reference reader; dmafs_model_place into a host buffer in posix-fallback
 * mode is byte-exact.
 * Needs python3 for the generated models (that part is skipped without it; the test
 * then exits 77 unless a check failed).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dmafs.h"
#include "t_unit.h"

static char work[256];
static char err[1024];
static const char *srcdir;

static void wfile(const char *name, const void *buf, size_t len)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", work, name);
	f = fopen(p, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		perror(p);
		exit(1);
	}
}

/* A safetensors file: 8-byte length, @n bytes of @json, then @data bytes of a pattern. */
static void mkst_n(const char *name, const char *json, size_t n, size_t data)
{
	size_t len = 8 + n + data;
	uint8_t *b = malloc(len);

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(b + 8, json, n);
	for (size_t i = 0; i < data; i++)
		b[8 + n + i] = (uint8_t)(i * 7 + 3);
	wfile(name, b, len);
	free(b);
}

static void mkst(const char *name, const char *json, size_t data)
{
	mkst_n(name, json, strlen(json), data);
}

static void path_of(char *p, size_t len, const char *name)
{
	snprintf(p, len, "%s/%s", work, name);
}

/* @name must be refused with @want, and the message name the file and contain @what. */
static void refuse_at(int line, const char *name, int want, const char *what)
{
	struct dmafs_model *m = (struct dmafs_model *)1;
	char p[PATH_MAX];
	int ret;

	path_of(p, sizeof(p), name);
	err[0] = '\0';
	ret = dmafs_model_open(p, &m, err, sizeof(err));
	if (getenv("T_VERBOSE"))
		printf("%-28s %d %s\n", name, ret, err);
	if (ret != want || m != NULL || !strstr(err, what) || !strstr(err, work)) {
		fprintf(stderr, "FAIL line %d: %s: got %d (%s) err \"%s\", want %d and \"%s\"\n", line,
			name, ret, strerror(-ret), err, want, what);
		t_failures++;
	}
	if (ret == 0)
		dmafs_model_close(m);
}
#define refuse(name, want, what) refuse_at(__LINE__, name, want, what)

static struct dmafs_model *open_ok_at(int line, const char *name)
{
	struct dmafs_model *m = NULL;
	char p[PATH_MAX];
	int ret;

	if (name[0] == '/')
		snprintf(p, sizeof(p), "%s", name);
	else
		path_of(p, sizeof(p), name);
	ret = dmafs_model_open(p, &m, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "FAIL line %d: %s refused: %d %s\n", line, p, ret, err);
		t_failures++;
		return NULL;
	}
	return m;
}
#define open_ok(name) open_ok_at(__LINE__, name)

#define T1 "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}"

static void test_rules(void)
{
	char big[256];
	uint8_t raw[16];

	/* The length prefix. */
	wfile("short.safetensors", "\x02\0\0", 3);
	refuse("short.safetensors", -EINVAL, "too short");
	memset(raw, 0, sizeof(raw));
	raw[3] = 0x06; /* 100 MiB + 1 */
	raw[0] = 0x01;
	raw[2] = 0x40;
	wfile("huge.safetensors", raw, 16);
	refuse("huge.safetensors", -EINVAL, "larger than the 104857600 byte limit");
	memset(raw, 0, sizeof(raw));
	raw[0] = 9;
	memcpy(raw + 8, "{}      ", 8);
	wfile("past.safetensors", raw, 16);
	refuse("past.safetensors", -EINVAL, "runs past the end of the file (16 bytes)");
	mkst("empty-json.safetensors", "", 0);
	refuse("empty-json.safetensors", -EINVAL, "must be a JSON object");

	/* JSON syntax. */
	mkst("array.safetensors", "[]", 0);
	refuse("array.safetensors", -EINVAL, "must be a JSON object, found '['");
	mkst("trunc.safetensors", "{\"a\":", 0);
	refuse("trunc.safetensors", -EINVAL, "invalid JSON at header byte 5");
	mkst("noclose.safetensors", T1, 12);
	refuse("noclose.safetensors", -EINVAL, "expected ',' or '}', found the end of the JSON");
	mkst("trail.safetensors", T1 "}x", 12);
	refuse("trail.safetensors", -EINVAL, "'x' after the end of the top-level object");
	mkst_n("trailnul.safetensors", T1 "}  \0", strlen(T1) + 4, 12);
	refuse("trailnul.safetensors", -EINVAL, "byte 0x00 after the end of the top-level object");
	mkst("comma.safetensors", T1 ",}", 12);
	refuse("comma.safetensors", -EINVAL, "expected a string, found '}'");
	mkst("badutf8.safetensors", "{\"\xff\":{}}", 0);
	refuse("badutf8.safetensors", -EINVAL, "invalid UTF-8");
	mkst("overlong.safetensors", "{\"\xc0\x80\":{}}", 0);
	refuse("overlong.safetensors", -EINVAL, "invalid UTF-8");
	mkst("surrog8.safetensors", "{\"\xed\xa0\x80\":{}}", 0);
	refuse("surrog8.safetensors", -EINVAL, "invalid UTF-8");
	mkst("lone.safetensors", "{\"\\ud800x\":{}}", 0);
	refuse("lone.safetensors", -EINVAL, "unpaired UTF-16 surrogate \\ud800");
	mkst("lowfirst.safetensors", "{\"\\udc00\":{}}", 0);
	refuse("lowfirst.safetensors", -EINVAL, "unpaired UTF-16 surrogate");
	mkst("ctrl.safetensors", "{\"a\tb\":{}}", 0);
	refuse("ctrl.safetensors", -EINVAL, "control character 0x09");
	mkst("esc.safetensors", "{\"a\\x\":{}}", 0);
	refuse("esc.safetensors", -EINVAL, "invalid escape '\\x'");
	mkst("lead0.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[01],\"data_offsets\":[0,1]}}", 1);
	refuse("lead0.safetensors", -EINVAL, "leading zero");
	mkst("nul.safetensors", "{\"a\\u0000b\":{}}", 0);
	refuse("nul.safetensors", -EINVAL, "contains U+0000");
	mkst("emptyname.safetensors", "{\"\":{}}", 0);
	refuse("emptyname.safetensors", -EINVAL, "empty name");

	/* Duplicates. */
	mkst("dupname.safetensors", T1 ",\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[12,12]}}", 12);
	refuse("dupname.safetensors", -EINVAL, "duplicate tensor name 'a'");
	mkst("dupkey.safetensors", "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	refuse("dupkey.safetensors", -EINVAL, "tensor 'a': duplicate key 'dtype'");
	mkst("dupmeta.safetensors", "{\"__metadata__\":{},\"__metadata__\":{}}", 0);
	refuse("dupmeta.safetensors", -EINVAL, "duplicate key '__metadata__'");
	mkst("dupmetakey.safetensors", "{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}", 0);
	refuse("dupmetakey.safetensors", -EINVAL, "\"__metadata__\": duplicate key 'k'");
	mkst("metaval.safetensors", "{\"__metadata__\":{\"k\":1}}", 0);
	refuse("metaval.safetensors", -EINVAL, "\"__metadata__\" value of 'k' must be a string");
	mkst("metaobj.safetensors", "{\"__metadata__\":[]}", 0);
	refuse("metaobj.safetensors", -EINVAL, "\"__metadata__\" must be an object of strings");

	/* Tensor entries. */
	mkst("dtype.safetensors", "{\"a\":{\"dtype\":\"BF17\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2);
	refuse("dtype.safetensors", -EINVAL, "tensor 'a': unknown dtype 'BF17'");
	mkst("dtypecase.safetensors", "{\"a\":{\"dtype\":\"bf16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2);
	refuse("dtypecase.safetensors", -EINVAL, "unknown dtype 'bf16'");
	mkst("dtypenum.safetensors", "{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,2]}}", 2);
	refuse("dtypenum.safetensors", -EINVAL, "\"dtype\" must be a string");
	mkst("negdim.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0);
	refuse("negdim.safetensors", -EINVAL, "tensor 'a': a shape dimension must be a non-negative integer");
	mkst("fracdim.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2.0],\"data_offsets\":[0,2]}}", 2);
	refuse("fracdim.safetensors", -EINVAL, "must be a non-negative integer");
	mkst("expdim.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2e0],\"data_offsets\":[0,2]}}", 2);
	refuse("expdim.safetensors", -EINVAL, "must be a non-negative integer");
	mkst("bigdim.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[9007199254740992],\"data_offsets\":[0,2]}}", 2);
	refuse("bigdim.safetensors", -EINVAL, "must be below 2^53");
	mkst("strdim.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[\"2\"],\"data_offsets\":[0,2]}}", 2);
	refuse("strdim.safetensors", -EINVAL, "expected a number");
	mkst("dims9.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1);
	refuse("dims9.safetensors", -EINVAL, "shape has more than 8 dimensions");
	mkst("elems.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,1]}}", 1);
	refuse("elems.safetensors", -EINVAL, "has more than 2^64 elements");
	mkst("bytes.safetensors", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2147483648,4294967296],\"data_offsets\":[0,1]}}", 1);
	refuse("bytes.safetensors", -EINVAL, "is more than 2^64 bytes");
	mkst("off3.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 2);
	refuse("off3.safetensors", -EINVAL, "\"data_offsets\" must be [begin, end]");
	mkst("off1.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1]}}", 2);
	refuse("off1.safetensors", -EINVAL, "\"data_offsets\" must be [begin, end]");
	mkst("offneg.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 2);
	refuse("offneg.safetensors", -EINVAL, "data_offsets begin must be a non-negative integer");
	mkst("backw.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,1]}}", 2);
	refuse("backw.safetensors", -EINVAL, "data_offsets [2, 1] end before they begin");
	mkst("outside.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3);
	refuse("outside.safetensors", -EINVAL, "data_offsets [0, 4] run past the end of the data section (3 bytes)");
	mkst("mismatch.safetensors", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,10]}}", 12);
	refuse("mismatch.safetensors", -EINVAL, "data_offsets [0, 10] hold 10 byte(s), but shape [2, 3] of BF16 needs 12");
	mkst("f4.safetensors", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 2);
	refuse("f4.safetensors", -EINVAL, "shape [3] of F4 needs 2");
	mkst("overlap.safetensors", T1 ",\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[10,14]}}", 14);
	refuse("overlap.safetensors", -EINVAL, "tensor 'b' data_offsets [10, 14] overlap 'a' [0, 12]");
	mkst("inside.safetensors", T1 ",\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}", 14);
	refuse("inside.safetensors", -EINVAL, "tensor 'b' data_offsets [4, 6] overlap 'a' [0, 12]");
	mkst("same.safetensors", T1 ",\"b\":{\"dtype\":\"I16\",\"shape\":[6],\"data_offsets\":[0,12]}}", 12);
	refuse("same.safetensors", -EINVAL, "overlap");
	mkst("noshape.safetensors", "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1);
	refuse("noshape.safetensors", -EINVAL, "tensor 'a': no \"shape\"");
	mkst("emptyobj.safetensors", "{\"a\":{}}", 1);
	refuse("emptyobj.safetensors", -EINVAL, "tensor 'a': no \"dtype\"");
	mkst("unknownkey.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1);
	refuse("unknownkey.safetensors", -EINVAL, "tensor 'a': unknown key 'x'");
	mkst("notobj.safetensors", "{\"a\":[1]}", 1);
	refuse("notobj.safetensors", -EINVAL, "tensor 'a': expected an object");
	/* A hostile name is quoted printable and bounded in the message. */
	memset(big, 'n', sizeof(big));
	memcpy(big, "{\"\\n", 4);
	snprintf(big + 200, sizeof(big) - 200, "\":{}}");
	mkst("longname.safetensors", big, 0);
	refuse("longname.safetensors", -EINVAL, "tensor '\\x0annnnn");
	T_CHECK(strstr(err, "...'") != NULL, "long name cut with ...: %s", err);
}

static void test_valid(void)
{
	struct dmafs_model *m;
	const struct dmafs_tensor *t;
	char json[4096];
	size_t o = 0;
	long k;

	/* Edge cases the reference reader accepts. */
	mkst("empty.safetensors", "{}", 0);
	m = open_ok("empty.safetensors");
	if (m) {
		T_EQ(dmafs_model_tensors(m), 0);
		T_EQ(dmafs_model_files(m), 1);
		T_EQ(dmafs_model_bytes(m), 10);
		dmafs_model_close(m);
	}
	/* Every dtype, scalars, zero-size tensors between others, escapes, metadata,
	 * whitespace, padding, gaps and trailing bytes in the data section. */
	o += (size_t)snprintf(json + o, sizeof(json) - o,
			      " {\n \"__metadata__\" : {\"format\":\"pt\", \"k\\\"\":\"v\\u00e9\"},\n");
	for (int d = 0; d < DMAFS_DT_COUNT; d++)
		o += (size_t)snprintf(json + o, sizeof(json) - o,
				      "\"t%02d\":{\"shape\":[3],\"data_offsets\":[%d,%u],\"dtype\":\"%s\"},",
				      d, 100 * d, 100 * d + (d == DMAFS_DT_F4 ? 2 : 3 * dmafs_dtype_size(d)),
				      dmafs_dtype_name(d));
	snprintf(json + o, sizeof(json) - o,
		 "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[1800,1804]},"
		 "\"zero\":{\"dtype\":\"F32\",\"shape\":[4,0],\"data_offsets\":[1,1]},"
		 "\"zero2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[1800,1800]},"
		 "\"\\u00e9\\ud83d\\ude00/x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1900,1901]}}    ");
	mkst("edge.safetensors", json, 2000);
	m = open_ok("edge.safetensors");
	if (!m)
		return;
	T_EQ(dmafs_model_tensors(m), DMAFS_DT_COUNT + 4);
	k = dmafs_model_find(m, "\xc3\xa9\xf0\x9f\x98\x80/x");
	T_CHECK(k >= 0, "escaped name found: %ld", k);
	k = dmafs_model_find(m, "t16");
	T_CHECK(k >= 0, "t16 found");
	if (k >= 0) {
		t = dmafs_model_tensor(m, (size_t)k);
		T_EQ(t->dtype, DMAFS_DT_F4);
		T_EQ(t->nbytes, 2);
		T_EQ(t->ndim, 1);
		T_EQ(t->shape[0], 3);
		T_EQ(t->file_offset, 8 + strlen(json) + 1600);
		T_EQ(t->buffer_offset, t->file_offset);
		T_CHECK(t->ptr == NULL, "ptr NULL before placement");
	}
	k = dmafs_model_find(m, "scalar");
	if (k >= 0) {
		t = dmafs_model_tensor(m, (size_t)k);
		T_EQ(t->ndim, 0);
		T_EQ(t->nbytes, 4);
	}
	T_EQ(dmafs_model_find(m, "nope"), -ENOENT);
	T_EQ(dmafs_model_find(m, NULL), -EINVAL);
	T_EQ(dmafs_model_find(NULL, "x"), -EINVAL);
	T_CHECK(dmafs_model_tensor(m, dmafs_model_tensors(m)) == NULL, "tensor past the end is NULL");
	T_CHECK(dmafs_model_file(m, 1) == NULL, "file past the end is NULL");
	/* Sorted by (file, offset). */
	for (size_t i = 1; i < dmafs_model_tensors(m); i++)
		T_CHECK(dmafs_model_tensor(m, i - 1)->file_offset <= dmafs_model_tensor(m, i)->file_offset,
			"tensors in offset order at %zu", i);
	dmafs_model_close(m);

	T_EQ(dmafs_dtype_size(DMAFS_DT_BF16), 2);
	T_EQ(dmafs_dtype_size(DMAFS_DT_F4), 0);
	T_EQ(dmafs_dtype_size(DMAFS_DT_COUNT), 0);
	T_CHECK(dmafs_dtype_name(-1) == NULL && dmafs_dtype_name(DMAFS_DT_COUNT) == NULL,
		"unknown dtype names are NULL");
	T_CHECK(!strcmp(dmafs_dtype_name(DMAFS_DT_F8_E8M0), "F8_E8M0"), "F8_E8M0 name");
	T_EQ(dmafs_model_open(NULL, &m, err, sizeof(err)), -EINVAL);
	T_EQ(dmafs_model_open("x", NULL, NULL, 0), -EINVAL);
	T_EQ(dmafs_model_files(NULL), 0);
	T_EQ(dmafs_model_tensors(NULL), 0);
	T_EQ(dmafs_model_bytes(NULL), 0);
	dmafs_model_close(NULL);
}

static void mkdir_w(const char *name)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), name);
	if (mkdir(p, 0755) && errno != EEXIST) {
		perror(p);
		exit(1);
	}
}

#define IX(map) "{\"metadata\":{\"total_size\":24,\"nested\":[[{\"x\":null}],true,-1.5e3]},\"weight_map\":{" map "}}"
#define S1 "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}"
#define S2 "{\"b\":{\"dtype\":\"U8\",\"shape\":[12],\"data_offsets\":[0,12]}}"

static void test_dirs(void)
{
	struct dmafs_model *m;
	char p[PATH_MAX], q[PATH_MAX], nest[600];

	/* A directory of *.safetensors, in name order; names unique across files. */
	mkdir_w("d1");
	mkst("d1/b.safetensors", S2, 12);
	mkst("d1/a.safetensors", S1, 12);
	wfile("d1/notes.txt", "x", 1);
	m = open_ok("d1");
	if (m) {
		T_EQ(dmafs_model_files(m), 2);
		path_of(p, sizeof(p), "d1/a.safetensors");
		T_CHECK(!strcmp(dmafs_model_file(m, 0), p), "first file %s", dmafs_model_file(m, 0));
		T_EQ(dmafs_model_tensor(m, 1)->file, 1);
		T_EQ(dmafs_model_tensor(m, 1)->buffer_offset, 4096 + 8 + strlen(S2));
		T_EQ(dmafs_model_bytes(m), 4096 + 8 + strlen(S2) + 12);
		dmafs_model_close(m);
	}
	mkdir_w("d2");
	mkst("d2/a.safetensors", S1, 12);
	mkst("d2/b.safetensors", S1, 12);
	refuse("d2", -EINVAL, "d2/b.safetensors: tensor 'a' is also in ");
	mkdir_w("d3");
	refuse("d3", -ENOENT, "no *.safetensors files");
	mkdir_w("d4");
	mkst("d4/a.safetensors", S1, 12);
	path_of(p, sizeof(p), "d4/b.safetensors");
	T_CHECK(symlink("../../nowhere/blob", p) == 0, "symlink");
	refuse("d4", -ENOENT, "d4/b.safetensors: No such file or directory (a symbolic link to a missing file?)");
	refuse("nonexistent", -ENOENT, "nonexistent: No such file or directory");
	mkdir_w("d5");
	mkst("d5/a.safetensors", S1, 12);
	mkst("d5/bad.safetensors", "{\"x\":{}}", 0);
	refuse("d5", -EINVAL, "d5/bad.safetensors: tensor 'x': no \"dtype\"");

	/* Index files. */
	mkdir_w("i1");
	mkst("i1/s1.safetensors", S1, 12);
	mkst("i1/s2.safetensors", S2, 12);
	mkst("i1/stray.safetensors", "{}", 0); /* not in the index: not part of the model */
	wfile("i1/model.safetensors.index.json", IX("\"b\":\"s2.safetensors\",\"a\":\"s1.safetensors\""),
	      strlen(IX("\"b\":\"s2.safetensors\",\"a\":\"s1.safetensors\"")));
	m = open_ok("i1");
	if (m) {
		T_EQ(dmafs_model_files(m), 2);
		T_EQ(dmafs_model_tensors(m), 2);
		dmafs_model_close(m);
	}
	m = open_ok("i1/model.safetensors.index.json");
	if (m) {
		T_EQ(dmafs_model_files(m), 2);
		dmafs_model_close(m);
	}
#define WIX(dir, map)                                                                   \
	do {                                                                            \
		mkdir_w(dir);                                                           \
		mkst(dir "/s1.safetensors", S1, 12);                                    \
		mkst(dir "/s2.safetensors", S2, 12);                                    \
		wfile(dir "/model.safetensors.index.json", map, strlen(map));           \
	} while (0)
	WIX("i2", IX("\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\",\"c\":\"s2.safetensors\""));
	refuse("i2", -EINVAL, "i2/model.safetensors.index.json: weight_map names tensor 'c' in s2.safetensors, which does not hold it");
	WIX("i3", IX("\"a\":\"s2.safetensors\",\"b\":\"s1.safetensors\""));
	refuse("i3", -EINVAL, "weight_map names tensor 'a' in s2.safetensors, but it is in");
	WIX("i4", IX("\"a\":\"s1.safetensors\""));
	mkst("i4/s1.safetensors", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
				  "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 12);
	refuse("i4", -EINVAL, "i4/s1.safetensors: tensor 'z' is not in the weight_map of");
	WIX("i5", IX("\"a\":\"s1.safetensors\",\"b\":\"missing.safetensors\""));
	refuse("i5", -ENOENT, "i5/missing.safetensors: No such file or directory");
	WIX("i6", IX("\"a\":\"/etc/passwd\""));
	refuse("i6", -EINVAL, "file '/etc/passwd' of tensor 'a' is an absolute path");
	WIX("i7", IX("\"a\":\"../i1/s1.safetensors\""));
	refuse("i7", -EINVAL, "leaves the index's directory");
	WIX("i8", IX("\"a\":\"s1.safetensors\",\"a\":\"s1.safetensors\""));
	refuse("i8", -EINVAL, "weight_map: duplicate key 'a'");
	WIX("i9", "{\"metadata\":{}}");
	refuse("i9", -EINVAL, "no \"weight_map\"");
	WIX("i10", "{\"weight_map\":{}}");
	refuse("i10", -EINVAL, "\"weight_map\" is empty");
	WIX("i11", "{\"weight_map\":{\"a\":1}}");
	refuse("i11", -EINVAL, "weight_map: the value of 'a' must be a file name");
	WIX("i12", "{\"metadata\":{\"k\":1,\"k\":2},\"weight_map\":{\"a\":\"s1.safetensors\"}}");
	refuse("i12", -EINVAL, "duplicate key 'k'");
	WIX("i13", "{\"weight_map\":{\"a\":\"s1.safetensors\"},\"weight_map\":{\"a\":\"s1.safetensors\"}}");
	refuse("i13", -EINVAL, "duplicate key 'weight_map'");
	memset(nest, '[', 100);
	memset(nest + 100, ']', 100);
	snprintf(nest + 200, sizeof(nest) - 200, ",\"weight_map\":{\"a\":\"s1.safetensors\"}}");
	memcpy(q, "{\"m\":", 5);
	snprintf(q + 5, sizeof(q) - 5, "%s", nest);
	WIX("i14", q);
	refuse("i14", -EINVAL, "nesting deeper than 64 levels");
	WIX("i15", "{\"weight_map\":{\"a\":\"s1.safetensors\"}} x");
	refuse("i15", -EINVAL, "invalid JSON at byte");
	/* A non-index .json given as the model. */
	wfile("config.json", "{\"hidden_size\":4}", 17);
	refuse("config.json", -EINVAL, "config.json: no \"weight_map\"");
	/* A FIFO is not a model file (and opening it must not hang). */
	path_of(p, sizeof(p), "fifo.safetensors");
	T_CHECK(mkfifo(p, 0600) == 0, "mkfifo");
	refuse("fifo.safetensors", -EINVAL, "fifo.safetensors: not a file or directory");
	mkdir_w("i16");
	mkst("i16/s1.safetensors", S1, 12);
	path_of(p, sizeof(p), "i16/s2.safetensors");
	T_CHECK(mkfifo(p, 0600) == 0, "mkfifo");
	wfile("i16/model.safetensors.index.json", IX("\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\""),
	      strlen(IX("\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"")));
	refuse("i16", -EINVAL, "i16/s2.safetensors: not a regular file");
}

/* ---- generated models against the reference reader ---- */

static int run(const char *cmd)
{
	int rc = system(cmd);

	if (rc != 0)
		fprintf(stderr, "FAIL: %s: exit %d\n", cmd, rc);
	return rc;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Our view of a model in the reference reader's format, sorted by name. */
static char *our_lines(struct dmafs_model *m)
{
	size_t n = dmafs_model_tensors(m), len = 0, cap = 1 << 16;
	char *out = malloc(cap), **lines = calloc(n ? n : 1, sizeof(*lines));
	uint64_t *hlen = calloc(dmafs_model_files(m), sizeof(*hlen));

	for (unsigned i = 0; i < dmafs_model_files(m); i++) {
		uint8_t b[8] = { 0 };
		int fd = open(dmafs_model_file(m, i), O_RDONLY);

		if (fd < 0 || pread(fd, b, 8, 0) != 8)
			perror(dmafs_model_file(m, i));
		for (int k = 7; k >= 0; k--)
			hlen[i] = hlen[i] << 8 | b[k];
		if (fd >= 0)
			close(fd);
	}
	for (size_t i = 0; i < n; i++) {
		const struct dmafs_tensor *t = dmafs_model_tensor(m, i);
		uint64_t data = 8 + hlen[t->file];
		const char *f = strrchr(dmafs_model_file(m, t->file), '/') + 1;
		char shape[256];
		size_t o = 0;

		o += (size_t)snprintf(shape, sizeof(shape), "[");
		for (int d = 0; d < t->ndim; d++)
			o += (size_t)snprintf(shape + o, sizeof(shape) - o, "%s%lld", d ? "," : "",
					      (long long)t->shape[d]);
		snprintf(shape + o, sizeof(shape) - o, "]");
		if (asprintf(&lines[i], "%s %s %s %llu %llu %s\n", t->name, dmafs_dtype_name(t->dtype),
			     shape, (unsigned long long)(t->file_offset - data),
			     (unsigned long long)(t->file_offset - data + t->nbytes), f) < 0)
			exit(1);
	}
	qsort(lines, n, sizeof(*lines), cmp_line);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(lines[i]);

		if (len + l + 1 > cap)
			out = realloc(out, cap = (len + l + 1) * 2);
		memcpy(out + len, lines[i], l + 1);
		len += l;
		free(lines[i]);
	}
	free(lines);
	free(hlen);
	return out;
}

static char *reference_lines(const char *path)
{
	char cmd[PATH_MAX * 2], *out = malloc(1 << 16);
	size_t len = 0, cap = 1 << 16, r;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "python3 '%s/tests/st_reference.py' '%s'", srcdir, path);
	f = popen(cmd, "r");
	if (!f)
		return out;
	while ((r = fread(out + len, 1, cap - len - 1, f)) > 0) {
		len += r;
		if (cap - len < 4096)
			out = realloc(out, cap *= 2);
	}
	out[len] = '\0';
	if (pclose(f))
		fprintf(stderr, "FAIL: %s failed\n", cmd), t_failures++;
	return out;
}

static void same_as_reference(const char *path, size_t tensors, unsigned files)
{
	struct dmafs_model *m = open_ok(path);
	char *a, *b;

	if (!m)
		return;
	T_EQ(dmafs_model_tensors(m), tensors);
	T_EQ(dmafs_model_files(m), files);
	a = our_lines(m);
	b = reference_lines(path);
	T_CHECK(strlen(b) > 0 && !strcmp(a, b), "%s: libdmafs and st_reference.py disagree", path);
	if (strcmp(a, b)) {
		/* Show the first differing line. */
		size_t i = 0, s = 0;

		while (a[i] && a[i] == b[i]) {
			if (a[i] == '\n')
				s = i + 1;
			i++;
		}
		fprintf(stderr, "  ours: %.120s\n  ref:  %.120s\n", a + s, b + s);
	}
	free(a);
	free(b);
	dmafs_model_close(m);
}

/*
 * dmafs_model_place_part: three parts with cuts inside files and across file
 * boundaries give the same bytes as the whole placement @whole (at offset 4096) and
 * @sum bytes in all; the padding between files is not written; the tensors' ptr stay.
 */
static void place_parts(struct dmafs_model *m, struct dmafs_session *s, struct dmafs_buf *whole,
			uint64_t sum)
{
	uint64_t n = dmafs_model_bytes(m), cut[4] = { 0, n / 3 + 1, 2 * n / 3 + 7, n }, got = 0;
	const void *ptr0 = dmafs_model_tensor(m, 0)->ptr;
	struct dmafs_buf *b = NULL;
	struct dmafs_result r;
	const char *w;
	char *p;

	T_EQ(dmafs_buf_alloc_host(s, n, &b), 0);
	if (!b)
		return;
	p = dmafs_buf_ptr(b);
	w = (const char *)dmafs_buf_ptr(whole) + 4096;
	memset(p, 0xa5, n);
	T_EQ(dmafs_model_place_part(m, b, 0, 5, 4, 0, &r), -EINVAL);
	T_EQ(dmafs_model_place_part(m, b, 0, 0, n + 1, 0, &r), -ERANGE);
	T_EQ(dmafs_model_place_part(m, b, 1, 0, n, 0, &r), -ERANGE);
	T_EQ(dmafs_model_place_part(NULL, b, 0, 0, n, 0, &r), -EINVAL);
	T_EQ(dmafs_model_place_part(m, b, 0, 9, 9, 0, &r), 0);
	T_EQ(r.bytes, 0);
	for (int k = 0; k < 3; k++) {
		T_EQ(dmafs_model_place_part(m, b, 0, cut[k], cut[k + 1], 2, &r), 0);
		T_CHECK(r.path != DMAFS_PATH_NONE, "part %d: a path", k);
		got += r.bytes;
	}
	T_EQ(got, sum);
	T_CHECK(dmafs_model_tensor(m, 0)->ptr == ptr0, "place_part leaves ptr alone");
	/* file bytes equal the whole placement's; the rest (padding) untouched */
	for (uint64_t i = 0, pos = 0; i <= dmafs_model_files(m); i++) {
		uint64_t base = n, size = 0;
		struct stat st;

		if (i < dmafs_model_files(m)) {
			stat(dmafs_model_file(m, i), &st);
			size = (uint64_t)st.st_size;
			/* a file's base: the buffer_offset - file_offset of any of its tensors */
			for (size_t t = 0; t < dmafs_model_tensors(m); t++)
				if (dmafs_model_tensor(m, t)->file == i) {
					base = dmafs_model_tensor(m, t)->buffer_offset -
					       dmafs_model_tensor(m, t)->file_offset;
					break;
				}
		}
		for (uint64_t o = pos; o < base; o++)
			if ((unsigned char)p[o] != 0xa5) {
				T_CHECK(0, "padding byte %llu written", (unsigned long long)o);
				break;
			}
		if (i < dmafs_model_files(m))
			T_CHECK(!memcmp(p + base, w + base, size), "file %llu placed in parts",
				(unsigned long long)i);
		pos = base + size;
	}
	dmafs_buf_unregister(b);
}

/*
 * dmafs_model_place_range: every tensor placed alone into a buffer of its own size (at
 * offset 64) equals the whole placement @whole (at offset 4096); one range across all
 * files lands compactly; a buffer one byte short is refused.
 */
static void place_ranges_compact(struct dmafs_model *m, struct dmafs_session *s,
				 struct dmafs_buf *whole)
{
	uint64_t n = dmafs_model_bytes(m);
	const char *w = (const char *)dmafs_buf_ptr(whole) + 4096;
	struct dmafs_buf *b = NULL;
	struct dmafs_result r;
	char *p;

	T_EQ(dmafs_buf_alloc_host(s, n + 64, &b), 0);
	if (!b)
		return;
	p = dmafs_buf_ptr(b);
	T_EQ(dmafs_model_place_range(m, b, 0, 5, 4, 0, &r), -EINVAL);
	T_EQ(dmafs_model_place_range(m, b, 0, 0, n + 1, 0, &r), -ERANGE);
	T_EQ(dmafs_model_place_range(m, b, 65, 0, n, 0, &r), -ERANGE); /* one byte short */
	T_EQ(dmafs_model_place_range(NULL, b, 0, 0, n, 0, &r), -EINVAL);
	for (size_t i = 0; i < dmafs_model_tensors(m); i++) {
		const struct dmafs_tensor *t = dmafs_model_tensor(m, i);

		memset(p, 0xa5, 64 + t->nbytes + 1);
		T_EQ(dmafs_model_place_range(m, b, 64, t->buffer_offset, t->buffer_offset + t->nbytes,
					     1, &r), 0);
		T_EQ(r.bytes, t->nbytes);
		T_CHECK(!memcmp(p + 64, w + t->buffer_offset, t->nbytes), "tensor %s placed alone",
			t->name);
		T_CHECK((unsigned char)p[63] == 0xa5 && (unsigned char)p[64 + t->nbytes] == 0xa5,
			"tensor %s: bytes outside its range written", t->name);
	}
	/* the whole layout from offset 64: the files' bytes where the whole placement has them */
	memset(p, 0, n + 64);
	T_EQ(dmafs_model_place_range(m, b, 64, 0, n, 2, &r), 0);
	for (size_t i = 0; i < dmafs_model_tensors(m); i++) {
		const struct dmafs_tensor *t = dmafs_model_tensor(m, i);

		T_CHECK(!memcmp(p + 64 + t->buffer_offset, w + t->buffer_offset, t->nbytes),
			"tensor %s in the whole range", t->name);
	}
	dmafs_buf_unregister(b);
}

/* Place @path into a host buffer (posix fallback here) and compare every byte. */
static void place_exact(const char *path)
{
	struct dmafs_session *s = NULL;
	struct dmafs_buf *b = NULL, *small = NULL;
	struct dmafs_model *m = open_ok(path);
	struct dmafs_result r;
	uint64_t sum = 0;
	char *ref;
	int ret;

	if (!m)
		return;
	ret = dmafs_session_open(dmafs_model_file(m, 0), &s);
	T_EQ(ret, 0);
	if (ret)
		goto out;
	T_EQ(dmafs_buf_alloc_host(s, dmafs_model_bytes(m) + 4096, &b), 0);
	T_EQ(dmafs_buf_alloc_host(s, dmafs_model_bytes(m) - 1, &small), 0);
	if (!b || !small)
		goto out;
	/* Too small: -ERANGE, nothing marked placed. */
	T_EQ(dmafs_model_place(m, small, 0, 0, &r), -ERANGE);
	T_EQ(r.path, DMAFS_PATH_NONE);
	T_CHECK(dmafs_model_tensor(m, 0)->ptr == NULL, "ptr NULL after -ERANGE");
	T_EQ(dmafs_model_place(m, b, 4097, 0, &r), -ERANGE);
	/* At an offset: every tensor at base + offset + buffer_offset, byte-exact. */
	ret = dmafs_model_place(m, b, 4096, 3, &r);
	T_EQ(ret, 0);
	if (ret)
		goto out;
	T_EQ(r.path, DMAFS_PATH_POSIX);
	for (unsigned i = 0; i < dmafs_model_files(m); i++) {
		struct stat st;

		stat(dmafs_model_file(m, i), &st);
		sum += (uint64_t)st.st_size;
	}
	T_EQ(r.bytes, sum);
	for (size_t i = 0; i < dmafs_model_tensors(m); i++) {
		const struct dmafs_tensor *t = dmafs_model_tensor(m, i);
		int fd = open(dmafs_model_file(m, t->file), O_RDONLY);

		T_CHECK(t->ptr == (char *)dmafs_buf_ptr(b) + 4096 + t->buffer_offset, "ptr of %s", t->name);
		T_EQ(t->buffer_offset % 2, t->file_offset % 2); /* in-file alignment kept */
		ref = malloc(t->nbytes ? t->nbytes : 1);
		T_EQ(pread(fd, ref, t->nbytes, (off_t)t->file_offset), (ssize_t)t->nbytes);
		T_CHECK(!memcmp(ref, t->ptr, t->nbytes), "bytes of %s", t->name);
		free(ref);
		close(fd);
	}
	place_parts(m, s, b, sum);
	place_ranges_compact(m, s, b);
out:
	if (b)
		dmafs_buf_unregister(b);
	if (small)
		dmafs_buf_unregister(small);
	dmafs_session_close(s);
	dmafs_model_close(m);
}

static void test_stale(void)
{
	struct dmafs_session *s = NULL;
	struct dmafs_buf *b = NULL;
	struct dmafs_model *m;
	struct timespec ts[2] = { { 0, 0 }, { 12345, 0 } };
	char p[PATH_MAX];

	mkst("stale.safetensors", S1, 12);
	m = open_ok("stale.safetensors");
	if (!m)
		return;
	path_of(p, sizeof(p), "stale.safetensors");
	T_EQ(dmafs_session_open(p, &s), 0);
	T_EQ(dmafs_buf_alloc_host(s, 8192, &b), 0);
	T_EQ(dmafs_model_place(m, b, 0, 0, NULL), 0);
	T_CHECK(dmafs_model_tensor(m, 0)->ptr != NULL, "placed");
	utimensat(AT_FDCWD, p, ts, 0);
	T_EQ(dmafs_model_place(m, b, 0, 0, NULL), -ESTALE);
	T_CHECK(dmafs_model_tensor(m, 0)->ptr == NULL, "ptr cleared by a failed placement");
	T_EQ(dmafs_model_place(NULL, b, 0, 0, NULL), -EINVAL);
	T_EQ(dmafs_model_place(m, NULL, 0, 0, NULL), -EINVAL);
	dmafs_buf_unregister(b);
	dmafs_session_close(s);
	dmafs_model_close(m);
}

/* A file removed or replaced by a rename after the open is still the one placed. */
static void test_removed(void)
{
	struct dmafs_session *s = NULL;
	struct dmafs_buf *b = NULL;
	struct dmafs_model *m;
	const uint8_t *t;
	char p[PATH_MAX];
	int ok = 1;

	mkst("gone.safetensors", S1, 12);
	m = open_ok("gone.safetensors");
	if (!m)
		return;
	path_of(p, sizeof(p), "gone.safetensors");
	T_CHECK(dmafs_model_fd(m, 0) >= 0, "the model holds its file open");
	T_EQ(dmafs_model_fd(m, 1), -EINVAL);
	T_EQ(dmafs_model_fd(NULL, 0), -EINVAL);
	T_EQ(dmafs_session_open(p, &s), 0);
	T_EQ(dmafs_buf_alloc_host(s, 8192, &b), 0);
	T_EQ(unlink(p), 0);
	mkst("gone.safetensors", "{}", 0); /* another file under the name */
	T_EQ(dmafs_model_place(m, b, 0, 0, NULL), 0);
	t = dmafs_model_tensor(m, 0)->ptr;
	T_CHECK(t != NULL, "placed");
	for (size_t i = 0; t && i < 12; i++)
		ok &= t[i] == (uint8_t)(i * 7 + 3);
	T_CHECK(ok, "the removed file's bytes were placed");
	dmafs_buf_unregister(b);
	dmafs_session_close(s);
	dmafs_model_close(m);
}

static int test_generated(void)
{
	char cmd[PATH_MAX * 2], p[PATH_MAX], snap[PATH_MAX], rev[41] = "";
	FILE *f;

	if (system("python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null")) {
		printf("unit_safetensors: SKIP generated models: python3 (3.9 or later) not found\n");
		return 0;
	}
	snprintf(cmd, sizeof(cmd),
		 "python3 '%s/tools/dmafs-synth-model' -q --model qwen3-0.6b --scale 16 --seed 1 '%s/q3'",
		 srcdir, work);
	if (run(cmd))
		return t_failures++, 1;
	snprintf(cmd, sizeof(cmd),
		 "python3 '%s/tools/dmafs-synth-model' -q --model qwen2.5-7b --scale 32 --shards 4 --seed 2 --hf-cache '%s/hf' '%s/q25'",
		 srcdir, work, work);
	if (run(cmd))
		return t_failures++, 1;
	path_of(p, sizeof(p), "q3");
	same_as_reference(p, 311, 1);
	path_of(p, sizeof(p), "q3/model.safetensors");
	same_as_reference(p, 311, 1);
	path_of(p, sizeof(p), "q25");
	same_as_reference(p, 339, 4);
	path_of(p, sizeof(p), "q25/model.safetensors.index.json");
	same_as_reference(p, 339, 4);
	path_of(p, sizeof(p), "hf/models--dmafs-synth--qwen2.5-7b/refs/main");
	f = fopen(p, "r");
	T_CHECK(f && fscanf(f, "%40s", rev) == 1, "refs/main of the HF cache");
	if (f)
		fclose(f);
	snprintf(snap, sizeof(snap), "%s/hf/models--dmafs-synth--qwen2.5-7b/snapshots/%s", work, rev);
	same_as_reference(snap, 339, 4);
	{
		/* Files are reported by their snapshot names, not as blobs. */
		struct dmafs_model *m = open_ok(snap);

		if (m) {
			T_CHECK(strstr(dmafs_model_file(m, 0), "/snapshots/") &&
					!strstr(dmafs_model_file(m, 0), "/blobs/"),
				"snapshot path kept: %s", dmafs_model_file(m, 0));
			dmafs_model_close(m);
		}
		/* The repository directory resolves refs/main. */
		path_of(p, sizeof(p), "hf/models--dmafs-synth--qwen2.5-7b");
		m = open_ok(p);
		if (m) {
			T_EQ(dmafs_model_files(m), 4);
			T_CHECK(strstr(dmafs_model_file(m, 0), rev) != NULL, "repo dir -> snapshot %s", rev);
			dmafs_model_close(m);
		}
	}
	path_of(p, sizeof(p), "q3");
	place_exact(p);
	path_of(p, sizeof(p), "q25");
	place_exact(p);
	place_exact(snap);
	return 1;
}

int main(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char cmd[PATH_MAX + 16];
	int generated;

	srcdir = getenv("top_srcdir");
	if (!srcdir)
		srcdir = ".";
	snprintf(work, sizeof(work), "%s/dmafs-unit-st.XXXXXX", base);
	if (!mkdtemp(work)) {
		perror("mkdtemp");
		return 1;
	}
	test_rules();
	test_valid();
	test_dirs();
	test_stale();
	test_removed();
	generated = test_generated();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", work);
	if (!t_failures && !generated) {
		printf("unit_safetensors: validation checks passed; generated models skipped\n");
		return 77;
	}
	return t_done("unit_safetensors");
}
