// SPDX-License-Identifier: MIT
/* siphash.c - SipHash-2-4, written from the algorithm's description (siphash.h). */
#include "util/siphash.h"

#include <string.h>

static inline uint64_t rotl(uint64_t x, unsigned b) { return (x << b) | (x >> (64 - b)); }

/* the input's bytes as a little-endian word, whatever the machine's order */
static inline uint64_t le64(const unsigned char *p, size_t n)
{
	uint64_t w = 0;

	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)p[i] << (8 * i);
	return w;
}

#define SIPROUND                                                                   \
	do {                                                                       \
		v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);          \
		v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                             \
		v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                             \
		v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);          \
	} while (0)

uint64_t siphash24(const uint64_t k[2], const void *in, size_t len)
{
	const unsigned char *p = in;
	uint64_t v0 = k[0] ^ 0x736f6d6570736575ull, v1 = k[1] ^ 0x646f72616e646f6dull;
	uint64_t v2 = k[0] ^ 0x6c7967656e657261ull, v3 = k[1] ^ 0x7465646279746573ull;
	uint64_t m;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		m = le64(p + i, 8);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	m = le64(p + i, len - i) | (uint64_t)(len & 0xff) << 56;
	v3 ^= m;
	SIPROUND;
	SIPROUND;
	v0 ^= m;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
