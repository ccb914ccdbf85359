/* SPDX-License-Identifier: MIT */
/* t_unit.h - tiny assertion helpers for the unit test programs (exit 0 pass, 1 fail, 77 skip). */
#ifndef T_UNIT_H
#define T_UNIT_H

#include <stdio.h>
#include <stdlib.h>

/*
 * Failed checks so far; T_CHECK may be used from several threads at once. A test program
 * made of several files defines T_UNIT_SHARED before including this header, in each of
 * them, and defines the counter (int t_failures;) in one: their checks then count together.
 */
#ifdef T_UNIT_SHARED
extern int t_failures;
#else
static int t_failures;
#endif

#define T_CHECK(cond, ...)                                                         \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                              \
			fputc('\n', stderr);                                       \
			__atomic_add_fetch(&t_failures, 1, __ATOMIC_RELAXED);      \
		}                                                                  \
	} while (0)

#define T_EQ(a, b) T_CHECK((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))

static inline int t_done(const char *name)
{
	int n = __atomic_load_n(&t_failures, __ATOMIC_RELAXED);

	if (n) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, n);
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

/* xorshift, seeded: reproducible random streams */
static inline unsigned long long t_rand(unsigned long long *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif
