/* SPDX-License-Identifier: MIT */
/*
 * safetensors.h - internal: the strict reader of safetensors headers and of
 * model.safetensors.index.json, working on bytes in memory (no I/O), so that the model
 * code (safetensors.c), the unit test and the fuzz target share one parser.
 *
 * Every call returns 0 or -EINVAL/-ENOMEM; on -EINVAL @err holds what is wrong without
 * the file name ("tensor 'x' data_offsets [10, 20] overlap 'y' [0, 16]"): the caller
 * knows the file and puts it in front.
 */
#ifndef DMAFS_SAFETENSORS_H
#define DMAFS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dmafs.h"

/*
 * Largest header accepted (the reference reader stops at 100,000,000 bytes). Real headers
 * are a few hundred KiB even for models with thousands of tensors; the bound keeps a
 * hostile length from making us allocate gigabytes.
 */
#define ST_HEADER_MAX (100ULL << 20)
/*
 * Deepest JSON nesting accepted (only where the schema allows arbitrary values: the
 * index's "metadata" and its unknown keys). The parser recurses once per level, so this
 * bounds its stack use.
 */
#define ST_DEPTH_MAX 64
/* Integers in the headers are JSON numbers: beyond 2^53 a double-based writer rounds. */
#define ST_INT_MAX (1ULL << 53)

/* One tensor of a header. */
struct st_entry {
	const char *name;	/* NUL-terminated UTF-8, in st_header.strings */
	int dtype;		/* enum dmafs_dtype */
	int ndim;
	int64_t shape[DMAFS_MAX_DIMS];
	uint64_t nbytes;	/* elements * size; F4: ceil(elements / 2) */
	uint64_t begin, end;	/* data_offsets, relative to the data section */
};

struct st_header {
	uint64_t header_len;	/* N of the file: data starts at 8 + N */
	uint64_t data_len;	/* bytes of the data section */
	size_t n;
	struct st_entry *e;	/* sorted by (begin, end, name) */
	char *strings;		/* the names, one allocation */
	size_t nmeta;		/* entries of "__metadata__" (checked, not kept) */
};

/*
 * Parse the @len bytes of header JSON of a file whose data section holds @data_len bytes,
 * and validate every entry: dtype known, at most DMAFS_MAX_DIMS dims, data_offsets inside
 * the data section and holding exactly the bytes of the shape, no two tensors overlapping,
 * names unique, non-empty and free of U+0000, "__metadata__" an object of strings. On
 * success *h is filled (free with st_header_free; h->header_len is @len); on failure *h is
 * empty and needs no freeing.
 */
int st_parse_header(const uint8_t *json, size_t len, uint64_t data_len, struct st_header *h,
		    char *err, size_t errlen);

/*
 * Check the 8-byte little-endian header length at the start of a file of @file_size
 * bytes: it must fit the file and ST_HEADER_MAX. Returns 0 and *n, or -EINVAL.
 */
int st_header_len(const uint8_t prefix[8], uint64_t file_size, uint64_t *n, char *err,
		  size_t errlen);

/* A whole file in memory: st_header_len, then st_parse_header on what follows. */
int st_parse_file(const uint8_t *buf, size_t len, struct st_header *h, char *err,
		  size_t errlen);

void st_header_free(struct st_header *h);

/* One entry of an index's weight_map. */
struct st_map_entry {
	const char *tensor, *file;
};

struct st_index {
	size_t n;
	struct st_map_entry *e; /* sorted by tensor name */
	char *strings;
};

/*
 * Parse model.safetensors.index.json: an object with "weight_map" {tensor: file} (required,
 * non-empty), "metadata" and any other keys checked as JSON and otherwise ignored. File
 * names must be relative paths without "..". Free with st_index_free.
 */
int st_parse_index(const uint8_t *json, size_t len, struct st_index *ix, char *err,
		   size_t errlen);
void st_index_free(struct st_index *ix);

/* Write @s into @dst as a quoted, printable, length-bounded form for error messages. */
void st_quote(char *dst, size_t len, const char *s);

#endif
