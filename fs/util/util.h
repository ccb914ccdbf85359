/* SPDX-License-Identifier: MIT */
/* util.h - small helpers shared by the daemon and the tools: logging, byte packing, sizes. */
#ifndef DMAFS_UTIL_H
#define DMAFS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common.h"

#define DMAFS_BLOCK 4096u
#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define ALIGN_DOWN(x, a) ((x) / (a) * (a))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* Log levels; messages go to stderr, and to syslog once the daemon has detached. */
enum { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };
void util_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* From now on, log to syslog; info messages held back (below) go there first. */
void util_log_to_syslog(int on);
/*
 * @on: hold back info messages instead of printing them, until util_log_to_syslog(1) sends
 * them to syslog (a daemon that mounted fine and detached: the command that made the mount
 * prints nothing, its log still gets them). Warnings and errors are printed at once. 0:
 * print those still held on stderr (the mount failed: they may explain why). Thread-safe.
 */
void util_log_hold_info(int on);
void util_log_set_level(int level);
/* Whether messages of @level are logged. */
int util_log_enabled(int level);
#define log_err(...) util_log(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) util_log(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) util_log(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) util_log(LOG_LVL_DEBUG, __VA_ARGS__)

/* 4096-aligned allocation suitable for O_DIRECT; NULL on failure. Free with free(). */
void *util_aligned_alloc(size_t size);
/*
 * 2 MiB aligned allocation of @size rounded up to 2 MiB, advised for transparent huge
 * pages: faulted in, pinned and DMA-mapped 2 MiB at a time where the system allows (a
 * plain mmap need not be 2 MiB aligned, and then gets 4 KiB pages). Free with free().
 */
void *util_huge_alloc(size_t size);

/*
 * Sort @n elements of 32 bytes at @v by the uint64_t each starts with, in time that grows
 * with @n (a radix sort, 11 bits a pass over the key bits that differ); stable. @tmp has
 * room for @n elements.
 */
void util_sort32(void *v, size_t n, void *tmp);

/* Parse "123", "4K", "1M", "2G", "1T" (powers of 1024). Returns 0 or -EINVAL. */
int util_parse_size(const char *s, uint64_t *out);
/*
 * A size as util_parse_size() reads it, or "N%": N percent (0 to 100) of @whole. Returns 0
 * or -EINVAL.
 */
int util_parse_size_pct(const char *s, uint64_t whole, uint64_t *out);
/* Format bytes as "1.5 GiB" into buf. */
const char *util_fmt_size(uint64_t v, char *buf, size_t len);
/* Format a 16-byte UUID as 8-4-4-4-12 hex into buf (>= 37 bytes). */
void util_uuid_str(const uint8_t uuid[16], char *buf);
/* Parse @len bytes of @s: 32 hex digits, dashes anywhere between them. 0 or -EINVAL. */
int util_uuid_parse(const char *s, size_t len, uint8_t out[16]);
/* Fill a random v4 UUID from getrandom(). Returns 0 or -errno. */
int util_uuid_gen(uint8_t uuid[16]);

/* Little-endian packing; the on-disk format is little endian whatever the host. */
static inline void put_u16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static inline void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = v >> (8 * i);
}
static inline void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = v >> (8 * i);
}
static inline uint16_t get_u16(const uint8_t *p) { return p[0] | (uint16_t)p[1] << 8; }
static inline uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
static inline uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A growable byte buffer used to encode records and snapshots. */
struct buf {
	uint8_t *p;
	size_t len, cap;
};
int buf_reserve(struct buf *b, size_t more);
void buf_free(struct buf *b);

#endif
