// SPDX-License-Identifier: MIT
/* Description: allocator: goal allocation, next-fit, coalescing, overlap detection, ENOSPC, pieces of the log areas, against a bitmap model. */
#include <errno.h>
#include <string.h>

#include "store/alloc.h"
#include "t_unit.h"

#define B DMAFS_BLOCK

static void test_basic(void)
{
	struct alloc a;
	uint64_t start[2] = { 1 << 20, 1 << 20 }, end[2] = { 2 << 20, 9 << 20 }, off;
	int64_t got;

	T_EQ(alloc_init(&a, 2, start, end), 0);
	T_EQ(alloc_free_bytes(&a), (1 << 20) + (8 << 20));
	got = alloc_get(&a, 0, 0, 64 * B, &off);
	T_EQ(got, 64 * B);
	T_EQ(off, 1 << 20);
	/* the goal right after the first run continues it */
	got = alloc_get(&a, 0, off + 64 * B, 16 * B, &off);
	T_EQ(off, (1 << 20) + 64 * B);
	T_EQ(got, 16 * B);
	/* a goal that is taken falls back to next-fit */
	got = alloc_get(&a, 0, 1 << 20, 4 * B, &off);
	T_EQ(got, 4 * B);
	T_CHECK(off >= (1 << 20) + 80 * B, "fallback allocated taken space at %llu", (unsigned long long)off);
	/* requests larger than the free space get what there is, then ENOSPC */
	got = alloc_get(&a, 0, 0, 10 << 20, &off);
	T_EQ(got, (1 << 20) - 84 * B);
	T_EQ(alloc_get(&a, 0, 0, B, &off), -ENOSPC);
	T_EQ(alloc_member_free(&a, 0), 0);
	/* free everything back in pieces: coalesces into one range */
	alloc_put(&a, 0, 1 << 20, 64 * B);
	alloc_put(&a, 0, (1 << 20) + 80 * B, 4 * B);
	alloc_put(&a, 0, (1 << 20) + 64 * B, 16 * B);
	alloc_put(&a, 0, (1 << 20) + 84 * B, (1 << 20) - 84 * B);
	T_EQ(a.m[0].n, 1);
	T_EQ(alloc_member_free(&a, 0), 1 << 20);
	/* mark_used: overlaps and out-of-region ranges are corruption */
	T_EQ(alloc_mark_used(&a, 1, 2 << 20, 8 * B), 0);
	T_EQ(alloc_mark_used(&a, 1, (2 << 20) + 4 * B, 8 * B), -EUCLEAN);
	T_EQ(alloc_mark_used(&a, 1, 0, B), -EUCLEAN);
	T_EQ(alloc_mark_used(&a, 1, (9 << 20) - B, 2 * B), -EUCLEAN);
	T_EQ(alloc_mark_used(&a, 5, 2 << 20, B), -EUCLEAN);
	/* deferred frees stay unusable until released */
	alloc_defer(&a, 1, 2 << 20, 8 * B);
	T_EQ(alloc_member_free(&a, 1), (8 << 20) - 8 * B);
	{
		struct alloc_deferred *d;
		size_t n = alloc_take_deferred(&a, &d);

		T_EQ(n, 1);
		alloc_release_deferred(&a, d, n);
	}
	T_EQ(alloc_member_free(&a, 1), 8 << 20);
	alloc_destroy(&a);
}

/* Random allocate/free against a bitmap: no block is ever handed out twice. */
static void test_model(void)
{
	enum { NB = 4096 };
	static unsigned char used[NB];
	struct { uint64_t off, len; } held[2048];
	size_t nheld = 0;
	uint64_t start = 0, end = (uint64_t)NB * B, off, model_free = NB;
	unsigned long long seed = 99;
	struct alloc a;

	start = B; /* offset 0 means "no goal" */
	end += B;
	T_EQ(alloc_init(&a, 1, &start, &end), 0);
	for (int step = 0; step < 200000; step++) {
		if (nheld < 2048 && (t_rand(&seed) % 3 || nheld == 0)) {
			uint64_t want = (1 + t_rand(&seed) % 64) * B;
			uint64_t goal = t_rand(&seed) % 2 ? start + (t_rand(&seed) % NB) * B : 0;
			int64_t got = alloc_get(&a, 0, goal, want, &off);

			if (got == -ENOSPC) {
				T_EQ(model_free, 0);
				continue;
			}
			T_CHECK(got > 0 && (uint64_t)got <= want && got % B == 0, "bad length %lld", (long long)got);
			for (uint64_t k = (off - start) / B; k < (off - start + got) / B; k++) {
				T_CHECK(!used[k], "block %llu handed out twice", (unsigned long long)k);
				used[k] = 1;
			}
			model_free -= got / B;
			held[nheld].off = off;
			held[nheld++].len = got;
		} else {
			size_t i = t_rand(&seed) % nheld;

			for (uint64_t k = (held[i].off - start) / B; k < (held[i].off - start + held[i].len) / B; k++)
				used[k] = 0;
			model_free += held[i].len / B;
			alloc_put(&a, 0, held[i].off, held[i].len);
			held[i] = held[--nheld];
		}
		if (step % 1000 == 0)
			T_EQ(alloc_free_bytes(&a), model_free * B);
		if (t_failures > 10)
			break;
	}
	alloc_destroy(&a);
}

/* Pieces for the log areas: the largest free ranges first, from their tops, all or none. */
static void test_pieces(void)
{
	struct alloc a;
	uint64_t start[2] = { 1 << 20, 1 << 20 }, end[2] = { 64 << 20, 64 << 20 };
	uint64_t off[4], len[4];

	T_EQ(alloc_init(&a, 2, start, end), 0);
	/* member 0 free: [1M, 10M) 9M, [30M, 40M) 10M, [60M, 64M) 4M */
	T_EQ(alloc_mark_used(&a, 0, 10 << 20, 20 << 20), 0);
	T_EQ(alloc_mark_used(&a, 0, 40 << 20, 20 << 20), 0);
	T_EQ(alloc_get_pieces(&a, 0, 8 << 20, 4, off, len), 1); /* one range holds it */
	T_EQ(off[0], 32 << 20);
	T_EQ(len[0], 8 << 20);
	/* 12M: the 9M range, then the 4M one (the 2M left of [30M, 40M) is smaller) */
	T_EQ(alloc_get_pieces(&a, 0, 12 << 20, 4, off, len), 2);
	T_EQ(off[0], 1 << 20);
	T_EQ(len[0], 9 << 20);
	T_EQ(off[1], 61 << 20);
	T_EQ(len[1], 3 << 20);
	T_EQ(alloc_member_free(&a, 0), 3 << 20);
	/* not enough: nothing taken */
	T_EQ(alloc_get_pieces(&a, 0, 4 << 20, 4, off, len), -ENOSPC);
	T_EQ(alloc_member_free(&a, 0), 3 << 20);
	/* enough space but not in that many pieces: nothing taken */
	T_EQ(alloc_get_pieces(&a, 0, 3 << 20, 1, off, len), -ENOSPC);
	T_EQ(alloc_member_free(&a, 0), 3 << 20);
	T_EQ(alloc_get_pieces(&a, 0, 3 << 20, 2, off, len), 2);
	T_EQ(alloc_member_free(&a, 0), 0);
	T_EQ(alloc_member_free(&a, 1), 63 << 20); /* another member untouched */
	T_EQ(alloc_get_pieces(&a, 1, 1000, 2, off, len), -EINVAL);
	T_EQ(alloc_get_pieces(&a, 5, B, 2, off, len), -EINVAL);
	alloc_destroy(&a);
}

int main(void)
{
	test_basic();
	test_pieces();
	test_model();
	return t_done("unit_alloc");
}
