// SPDX-License-Identifier: MIT
/*
 * unit_safetensors-place.c - generated models read the same as the Python reference
 * reader, and dmafs_model_place into a host buffer (posix fallback) is byte-exact, also
 * after the files changed or were removed.
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
#include "unit_safetensors.h"

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

void test_stale(void)
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
void test_removed(void)
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

int test_generated(void)
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
