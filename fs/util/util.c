// SPDX-License-Identifier: MIT
/* util.c - logging, sizes, UUIDs and the growable buffer. */
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <syslog.h>
#include <time.h>

static int use_syslog;
static int max_level = LOG_LVL_INFO;

#define HELD_MAX 32
static struct {
	pthread_mutex_t lock;
	int on, n;	/* protected by lock */
	char *msg[HELD_MAX];
} held = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Send the held messages to syslog or stderr, and hold no more. */
static void held_flush(int to_syslog)
{
	pthread_mutex_lock(&held.lock);
	for (int i = 0; i < held.n; i++) {
		if (to_syslog)
			syslog(LOG_INFO, "%s", held.msg[i]);
		else
			fprintf(stderr, "dmafs: %s\n", held.msg[i]);
		free(held.msg[i]);
	}
	held.n = 0;
	held.on = 0;
	pthread_mutex_unlock(&held.lock);
}

void util_log_to_syslog(int on)
{
	use_syslog = on;
	if (on) {
		openlog("dmafs", LOG_PID, LOG_DAEMON);
		held_flush(1);
	}
}

void util_log_hold_info(int on)
{
	if (on) {
		pthread_mutex_lock(&held.lock);
		held.on = 1;
		pthread_mutex_unlock(&held.lock);
	} else {
		held_flush(0);
	}
}

/* Keep an info message while they are held; 1 if kept (or dropped past HELD_MAX). */
static int hold(const char *fmt, va_list ap)
{
	int kept = 0;

	pthread_mutex_lock(&held.lock);
	if (held.on) {
		kept = 1;
		if (held.n < HELD_MAX && vasprintf(&held.msg[held.n], fmt, ap) >= 0)
			held.n++;
	}
	pthread_mutex_unlock(&held.lock);
	return kept;
}

void util_log_set_level(int level) { max_level = level; }
int util_log_enabled(int level) { return level <= max_level; }

void util_log(int level, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	va_list ap;

	if (level > max_level)
		return;
	if (level == LOG_LVL_INFO && !use_syslog) {
		int kept;

		va_start(ap, fmt);
		kept = hold(fmt, ap);
		va_end(ap);
		if (kept)
			return;
	}
	va_start(ap, fmt);
	if (use_syslog) {
		vsyslog(prio[level], fmt, ap);
	} else {
		fputs("dmafs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

void *util_aligned_alloc(size_t size)
{
	void *p;

	if (posix_memalign(&p, DMAFS_BLOCK, size ? ALIGN_UP(size, DMAFS_BLOCK) : DMAFS_BLOCK))
		return NULL;
	return p;
}

void *util_huge_alloc(size_t size)
{
	size_t len = ALIGN_UP(size ? size : 1, (size_t)2 << 20);
	void *p;

	if (posix_memalign(&p, (size_t)2 << 20, len))
		return NULL;
	madvise(p, len, MADV_HUGEPAGE); /* advice only: fine if refused */
	return p;
}

static uint64_t key32(const unsigned char *e)
{
	uint64_t k;

	memcpy(&k, e, sizeof(k));
	return k;
}

void util_sort32(void *v, size_t n, void *tmp)
{
	enum { E = 32, BITS = 11, NB = 1 << BITS };
	unsigned char *src = v, *dst = tmp, *t;
	uint64_t any = 0, first = n ? key32(src) : 0;
	unsigned lo, top;
	size_t cnt[NB];

	for (size_t i = 0; i < n; i++) {
		uint64_t k = key32(src + i * E);

		any |= k ^ first; /* the bits in which keys differ */
	}
	if (!any)
		return;
	lo = __builtin_ctzll(any);
	top = 64 - __builtin_clzll(any);
	for (unsigned sh = lo; sh < top; sh += BITS) {
		size_t sum = 0;

		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[(key32(src + i * E) >> sh) & (NB - 1)]++;
		for (size_t d = 0; d < NB; d++) {
			size_t c = cnt[d];

			cnt[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			memcpy(dst + cnt[(key32(src + i * E) >> sh) & (NB - 1)]++ * E, src + i * E, E);
		t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * E);
}

int util_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	case '\0': break;
	default: return -EINVAL;
	}
	if (*end == 'i' && shift) /* accept "MiB"-style "Mi" */
		end++;
	if (*end == 'B' && shift)
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int util_parse_size_pct(const char *s, uint64_t whole, uint64_t *out)
{
	size_t n = s ? strlen(s) : 0;
	unsigned long pct;
	char *end;

	if (n < 2 || s[n - 1] != '%')
		return util_parse_size(s, out);
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	pct = strtoul(s, &end, 10);
	if (errno || end != s + n - 1 || pct > 100)
		return -EINVAL;
	*out = whole / 100 * pct;
	return 0;
}

const char *util_fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = v;
	int i = 0;

	while (d >= 1024 && i < 5) {
		d /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)v);
	else
		snprintf(buf, len, "%.1f %s", d, unit[i]);
	return buf;
}

void util_uuid_str(const uint8_t u[16], char *buf)
{
	sprintf(buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		u[13], u[14], u[15]);
}

int util_uuid_parse(const char *s, size_t len, uint8_t out[16])
{
	int k = 0;

	for (size_t i = 0; i < len; i++) {
		int h;

		if (s[i] == '-')
			continue;
		if (!isxdigit((unsigned char)s[i]) || k == 32)
			return -EINVAL;
		h = isdigit((unsigned char)s[i]) ? s[i] - '0' : tolower((unsigned char)s[i]) - 'a' + 10;
		out[k / 2] = (uint8_t)(k % 2 ? out[k / 2] | h : h << 4);
		k++;
	}
	return k == 32 ? 0 : -EINVAL;
}

int util_uuid_gen(uint8_t u[16])
{
	if (getrandom(u, 16, 0) != 16)
		return -errno;
	u[6] = (u[6] & 0x0f) | 0x40;
	u[8] = (u[8] & 0x3f) | 0x80;
	return 0;
}

int buf_reserve(struct buf *b, size_t more)
{
	if (more > SIZE_MAX - b->len)
		return -ENOMEM;
	return dm_grow(&b->p, &b->cap, b->len + more, 1, 4096);
}

void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
