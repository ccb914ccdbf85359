// SPDX-License-Identifier: MIT
/*
 * unit_safetensors-open.c - what dmafs_model_open refuses, each header validation rule
 * with its error, and the valid edge cases it accepts: single files, directories of
 * shards and their index.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dmafs.h"
#include "unit_safetensors.h"

#define T1 "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}"

void test_rules(void)
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
	T_CHECK(strstr(errmsg, "...'") != NULL, "long name cut with ...: %s", errmsg);
}

void test_valid(void)
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
	T_EQ(dmafs_model_open(NULL, &m, errmsg, sizeof(errmsg)), -EINVAL);
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
#define S2 "{\"b\":{\"dtype\":\"U8\",\"shape\":[12],\"data_offsets\":[0,12]}}"

void test_dirs(void)
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
