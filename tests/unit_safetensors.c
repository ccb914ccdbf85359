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
 *
 * This file holds the files the tests write and the checks of dmafs_model_open, and main();
 * the tests are in unit_safetensors-open.c (validation) and unit_safetensors-place.c
 * (generated models, placements). unit_safetensors.h declares what they share.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dmafs.h"
#include "unit_safetensors.h"

int t_failures;
char work[256];
char errmsg[1024];
const char *srcdir;

void wfile(const char *name, const void *buf, size_t len)
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
void mkst_n(const char *name, const char *json, size_t n, size_t data)
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

void mkst(const char *name, const char *json, size_t data)
{
	mkst_n(name, json, strlen(json), data);
}

void path_of(char *p, size_t len, const char *name)
{
	snprintf(p, len, "%s/%s", work, name);
}

/* @name must be refused with @want, and the message name the file and contain @what. */
void refuse_at(int line, const char *name, int want, const char *what)
{
	struct dmafs_model *m = (struct dmafs_model *)1;
	char p[PATH_MAX];
	int ret;

	path_of(p, sizeof(p), name);
	errmsg[0] = '\0';
	ret = dmafs_model_open(p, &m, errmsg, sizeof(errmsg));
	if (getenv("T_VERBOSE"))
		printf("%-28s %d %s\n", name, ret, errmsg);
	if (ret != want || m != NULL || !strstr(errmsg, what) || !strstr(errmsg, work)) {
		fprintf(stderr, "FAIL line %d: %s: got %d (%s) err \"%s\", want %d and \"%s\"\n", line,
			name, ret, strerror(-ret), errmsg, want, what);
		t_failures++;
	}
	if (ret == 0)
		dmafs_model_close(m);
}

struct dmafs_model *open_ok_at(int line, const char *name)
{
	struct dmafs_model *m = NULL;
	char p[PATH_MAX];
	int ret;

	if (name[0] == '/')
		snprintf(p, sizeof(p), "%s", name);
	else
		path_of(p, sizeof(p), name);
	ret = dmafs_model_open(p, &m, errmsg, sizeof(errmsg));
	if (ret) {
		fprintf(stderr, "FAIL line %d: %s refused: %d %s\n", line, p, ret, errmsg);
		t_failures++;
		return NULL;
	}
	return m;
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
