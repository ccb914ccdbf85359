// SPDX-License-Identifier: MIT
/*
 * Description: warm tier segments: fills take chunks of the lowest segment with memory
 * first; pinners pin a segment when its first chunk is taken (and those with memory when
 * they are added), once, a failure left alone, and unpin it before it is released; memory
 * pressure refuses fills and gives back the segment of the least recently used chunk,
 * never one with a referenced chunk; a released segment reads as zeros and the process's resident
 * memory drops (MADV_DONTNEED); idle segments go after one whole period. Preparer threads
 * keep a window of segments pinned ahead of the fills, each pinned once; under fills,
 * shrinking and idle release at once, no segment is pinned twice or unpinned unpinned.
 * A fill naming the chunk it took last gets the next one in memory, and where the whole
 * tier is pinned, two fills at once keep runs of their own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/tier.h"
#include "t_unit.h"

#define MiB (1ull << 20)

/* A pinner that records what it was asked; @fail: return this from pin. */
struct fake {
	int fail;
	int pins, unpins;
	char *last_pin, *last_unpin;
	size_t last_len;
};

static int fake_pin(void *arg, void *mem, size_t len)
{
	struct fake *f = arg;

	__atomic_add_fetch(&f->pins, 1, __ATOMIC_SEQ_CST); /* preparers pin in parallel */
	__atomic_store_n(&f->last_pin, (char *)mem, __ATOMIC_SEQ_CST);
	__atomic_store_n(&f->last_len, len, __ATOMIC_SEQ_CST);
	return f->fail;
}

static void fake_unpin(void *arg, void *mem, size_t len)
{
	struct fake *f = arg;

	__atomic_add_fetch(&f->unpins, 1, __ATOMIC_SEQ_CST);
	f->last_unpin = mem;
	(void)len;
}

/* VmRSS of this process, bytes. */
static uint64_t rss(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb << 10;
}

static struct tier *t;
static char *base; /* the first chunk's memory: the tier's start */
static struct inode ino = { .ino = 42 };

/* Reserve a chunk, write @byte over it, publish it as chunk @idx of ino; its memory. */
static char *fill(uint64_t idx, int byte)
{
	struct tier_chunk *c;
	char *mem = NULL;

	c = tier_reserve(t, &mem, NULL);
	T_CHECK(c != NULL, "no chunk for %llu", (unsigned long long)idx);
	if (!c)
		return NULL;
	memset(mem, byte, TIER_CHUNK);
	T_EQ(tier_publish(t, c, &ino, idx, TIER_CHUNK, tier_gen(&ino)), 1);
	tier_put(t, c);
	return mem;
}

static long seg_no(const char *mem) { return (long)((mem - base) / (long)TIER_SEG); }

/* Wait up to 10 s for @f to have pinned @n segments; then 50 ms more, for any beyond. */
static int pins_settle(struct fake *f, int n)
{
	for (int i = 0; i < 1000 && __atomic_load_n(&f->pins, __ATOMIC_SEQ_CST) < n; i++)
		usleep(10000);
	usleep(50000);
	return __atomic_load_n(&f->pins, __ATOMIC_SEQ_CST);
}

/*
 * Preparers: an added pinner gets a window of segments pinned ahead (two per preparer),
 * never beyond it nor the tier; fills that move on to a new segment move the window;
 * every segment is pinned once, whoever pins it; empty prepared segments go back when
 * idle, unpinned.
 */
static void preparers(void)
{
	struct fake p = { 0 };
	struct tier_stats st;
	uint64_t ahead;

	T_EQ(tier_init(&t, 6 * TIER_SEG, 0, 2, 0), 0);
	T_EQ(tier_preparers(t, &ahead), 2);
	T_EQ(ahead, 4 * TIER_SEG);
	usleep(50000);
	T_EQ(p.pins, 0); /* nothing to pin with yet */
	T_EQ(tier_add_pinner(t, fake_pin, fake_unpin, &p), 0);
	T_EQ(pins_settle(&p, 4), 4);
	tier_stats(t, &st);
	T_EQ(st.resident, 4 * TIER_SEG);
	T_EQ(st.held, 0);
	base = NULL;
	for (uint64_t i = 0; i < TIER_SEG_CHUNKS; i++) { /* segment 0, prepared: no pin */
		char *m = fill(i, 3);

		if (!base)
			base = m;
	}
	T_EQ(seg_no(base), 0);
	/* the first chunk of segment 1 was taken: the window moves on by one segment */
	T_EQ(pins_settle(&p, 5), 5);
	for (uint64_t i = TIER_SEG_CHUNKS; i < 6 * TIER_SEG_CHUNKS; i++)
		fill(i, 4);
	T_EQ(pins_settle(&p, 6), 6); /* six segments, each pinned once */
	tier_stats(t, &st);
	T_EQ(st.held, 6 * TIER_SEG);
	/* emptied and idle: released and unpinned, and the preparers do not take them back
	 * while nothing fills */
	tier_forget(t, &ino);
	T_EQ(tier_release_idle(t), 0);
	T_EQ(tier_release_idle(t), 6 * TIER_SEG);
	T_EQ(p.unpins, 6);
	T_EQ(pins_settle(&p, 6), 6);
	tier_stats(t, &st);
	T_EQ(st.resident, 0);
	tier_drop_pinners(t);
	tier_destroy(t);
	t = NULL;

	/* pin_all: every segment at once, kept while idle, until pressure gives memory back */
	memset(&p, 0, sizeof(p));
	T_EQ(tier_init(&t, 6 * TIER_SEG, 0, 2, 1), 0);
	T_EQ(tier_pins_all(t), 1);
	/* no pinner (no GPU) yet: nothing is prepared, and an emptied segment goes when idle */
	fill(0, 5);
	tier_forget(t, &ino);
	T_EQ(tier_release_idle(t), 0);
	T_EQ(tier_release_idle(t), TIER_SEG);
	tier_stats(t, &st);
	T_EQ(st.resident, 0);
	T_EQ(tier_add_pinner(t, fake_pin, fake_unpin, &p), 0);
	T_EQ(pins_settle(&p, 6), 6);
	T_EQ(tier_release_idle(t), 0);
	T_EQ(tier_release_idle(t), 0);
	tier_stats(t, &st);
	T_EQ(st.resident, 6 * TIER_SEG);
	T_EQ(tier_shrink(t, 1), TIER_SEG);
	T_EQ(tier_pins_all(t), 0);
	T_EQ(p.unpins, 1);
	T_EQ(tier_release_idle(t), 0);
	T_EQ(tier_release_idle(t), 5 * TIER_SEG); /* empty and idle: back to the system now */
	T_EQ(p.unpins, 6);
	tier_drop_pinners(t);
	tier_destroy(t);
	t = NULL;

	/* a placement that fills nothing runs: pin_all's preparers start no segment until it
	 * ends (tier_yield); a fill meanwhile pins the segment it takes */
	memset(&p, 0, sizeof(p));
	T_EQ(tier_init(&t, 6 * TIER_SEG, 0, 2, 1), 0);
	tier_yield(t, 1);
	tier_yield(t, 1);
	T_EQ(tier_add_pinner(t, fake_pin, fake_unpin, &p), 0);
	usleep(100000);
	T_EQ(__atomic_load_n(&p.pins, __ATOMIC_SEQ_CST), 0);
	fill(0, 6);
	T_EQ(__atomic_load_n(&p.pins, __ATOMIC_SEQ_CST), 1);
	tier_yield(t, -1);
	usleep(100000);
	T_EQ(__atomic_load_n(&p.pins, __ATOMIC_SEQ_CST), 1); /* one still runs */
	tier_yield(t, -1);
	T_EQ(pins_settle(&p, 6), 6);
	tier_forget(t, &ino);
	tier_drop_pinners(t);
	tier_destroy(t);
	t = NULL;
}

/*
 * A pinner that checks the protocol: a segment is never pinned twice without an unpin
 * between, nor unpinned unpinned; each call takes a little time, so that the preparers,
 * the fills, shrinking and idle release overlap.
 */
#define STRESS_SEGS 8
static struct {
	char *base;
	int state[STRESS_SEGS]; /* 1: pinned */
	int bad;
	int pins, unpins;
} sp;

static int stress_pin(void *arg, void *mem, size_t len)
{
	long k = ((char *)mem - sp.base) / (long)TIER_SEG;

	(void)arg;
	(void)len;
	usleep(200);
	if (k < 0 || k >= STRESS_SEGS || __atomic_exchange_n(&sp.state[k], 1, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&sp.bad, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&sp.pins, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static void stress_unpin(void *arg, void *mem, size_t len)
{
	long k = ((char *)mem - sp.base) / (long)TIER_SEG;

	(void)arg;
	(void)len;
	if (k < 0 || k >= STRESS_SEGS || !__atomic_exchange_n(&sp.state[k], 0, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&sp.bad, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&sp.unpins, 1, __ATOMIC_SEQ_CST);
}

static int stress_stop; /* atomic */

/* Fill chunks of its own inode and let them go again, over and over. */
static void *stress_filler(void *arg)
{
	struct inode *me = arg;
	unsigned i = 0;

	while (!__atomic_load_n(&stress_stop, __ATOMIC_SEQ_CST)) {
		char *mem = NULL;
		struct tier_chunk *c = tier_reserve(t, &mem, NULL);

		if (c) {
			mem[0] = (char)i;
			tier_publish(t, c, me, i % 100, TIER_CHUNK, tier_gen(me));
			tier_put(t, c);
		}
		if (++i % 50 == 0)
			tier_forget(t, me);
	}
	tier_forget(t, me);
	return NULL;
}

/* Shrink and release idle segments while the fills and the preparers run. */
static void *stress_shrinker(void *arg)
{
	unsigned i = 0;

	(void)arg;
	while (!__atomic_load_n(&stress_stop, __ATOMIC_SEQ_CST)) {
		tier_set_short(t, i % 4 == 0);
		if (i % 3 == 0)
			tier_shrink(t, TIER_SEG * (1 + i % 3));
		tier_release_idle(t);
		usleep(300);
		i++;
	}
	tier_set_short(t, 0);
	return NULL;
}

/*
 * Preparers, fills, shrinking and idle release at once for a second: the pinner's
 * protocol holds throughout, and once the pinners go every segment is unpinned.
 */
static void stress(void)
{
	struct inode a = { .ino = 7 }, b = { .ino = 8 };
	pthread_t th[3];
	char *mem = NULL;
	struct tier_chunk *c;

	T_EQ(tier_init(&t, STRESS_SEGS * TIER_SEG, 0, 4, 1), 0);
	c = tier_reserve(t, &mem, NULL); /* the tier's lowest chunk: where it starts */
	T_CHECK(c != NULL && mem != NULL, "a first chunk");
	sp.base = mem;
	tier_put(t, c);
	T_EQ(tier_add_pinner(t, stress_pin, stress_unpin, NULL), 0);
	pthread_create(&th[0], NULL, stress_filler, &a);
	pthread_create(&th[1], NULL, stress_filler, &b);
	pthread_create(&th[2], NULL, stress_shrinker, NULL);
	usleep(1000000);
	__atomic_store_n(&stress_stop, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	tier_drop_pinners(t);
	T_EQ(sp.bad, 0);
	T_EQ(sp.pins, sp.unpins);
	T_CHECK(sp.pins > STRESS_SEGS, "only %d pins in a second of fills and shrinking", sp.pins);
	for (int k = 0; k < STRESS_SEGS; k++)
		T_EQ(sp.state[k], 0);
	tier_destroy(t);
	t = NULL;
}

/*
 * A fill that names the chunk it took last gets the one right after it in memory. Where
 * the whole tier is pinned, two placements filling at once each start in an empty
 * segment of their own, so neither breaks the other's run (a warm placement copies a run
 * in one device copy).
 */
static void runs(void)
{
	enum { N = 40 };
	struct tier_chunk *ca[N], *cb[N];
	char *ma[N], *mb[N];
	struct fake f = { 0 };
	struct tier *u;

	T_EQ(tier_init(&u, 4 * TIER_SEG, 0, 1, 1), 0);
	T_EQ(tier_add_pinner(u, fake_pin, fake_unpin, &f), 0);
	/* a run goes on into the next segment (a fresh tier: it starts at the lowest chunk),
	 * but one device copy may not take both */
	{
		struct tier_chunk *c[TIER_SEG_CHUNKS + 1];
		char *m[TIER_SEG_CHUNKS + 1];
		int n = 0;

		for (; n <= TIER_SEG_CHUNKS; n++) {
			c[n] = tier_reserve(u, &m[n], n ? c[n - 1] : NULL);
			if (!c[n])
				break;
		}
		T_EQ(n, TIER_SEG_CHUNKS + 1);
		if (n == TIER_SEG_CHUNKS + 1) {
			T_CHECK(m[TIER_SEG_CHUNKS] == m[0] + TIER_SEG, "the run went on in memory");
			T_EQ(tier_follows(u, c[0], c[TIER_SEG_CHUNKS - 1], TIER_SEG_CHUNKS - 1), 1);
			T_EQ(tier_follows(u, c[0], c[TIER_SEG_CHUNKS], TIER_SEG_CHUNKS), 0);
			T_EQ(tier_follows(u, c[0], c[2], 1), 0);
		}
		while (n--)
			tier_put(u, c[n]);
	}
	for (int i = 0; i < N; i++) {
		ca[i] = tier_reserve(u, &ma[i], i ? ca[i - 1] : NULL);
		cb[i] = tier_reserve(u, &mb[i], i ? cb[i - 1] : NULL);
		T_CHECK(ca[i] && cb[i], "reserve %d", i);
		if (!ca[i] || !cb[i])
			return;
	}
	for (int i = 1; i < N; i++) {
		T_CHECK(ma[i] == ma[0] + (size_t)i * TIER_CHUNK, "a's run broke at chunk %d", i);
		T_CHECK(mb[i] == mb[0] + (size_t)i * TIER_CHUNK, "b's run broke at chunk %d", i);
	}
	T_CHECK(ma[0] + TIER_SEG <= mb[0] || mb[0] + TIER_SEG <= ma[0],
		"the two runs start %lld bytes apart, want a segment (%llu) at least",
		(long long)(mb[0] - ma[0]), (unsigned long long)TIER_SEG);
	/* the chunk after a RESERVED one is not taken: a fresh run elsewhere */
	{
		char *m = NULL;
		struct tier_chunk *c = tier_reserve(u, &m, ca[0]);

		T_CHECK(c && m != ma[1], "a chunk in use was handed out again");
		if (c)
			tier_put(u, c);
	}
	for (int i = 0; i < N; i++) {
		tier_put(u, ca[i]);
		tier_put(u, cb[i]);
	}
	tier_drop_pinners(u);
	tier_destroy(u);
}

/* Without a whole pinned tier a run does not go on into a segment without memory while
 * a segment with memory has a free chunk: that would take memory a fill elsewhere does
 * not (host-only tiers touch memory as chunks are first filled). */
static void host_runs(void)
{
	struct tier_chunk *c[TIER_SEG_CHUNKS + 1];
	char *m[TIER_SEG_CHUNKS + 1];
	struct tier *u;
	int n = 0;

	T_EQ(tier_init(&u, 3 * TIER_SEG, 0, 0, 0), 0);
	for (; n < TIER_SEG_CHUNKS; n++) { /* segment 0, whole, as one run */
		c[n] = tier_reserve(u, &m[n], n ? c[n - 1] : NULL);
		if (!c[n])
			break;
	}
	T_EQ(n, TIER_SEG_CHUNKS);
	if (n == TIER_SEG_CHUNKS) {
		T_CHECK(m[n - 1] == m[0] + (size_t)(n - 1) * TIER_CHUNK, "segment 0 is not one run");
		tier_put(u, c[0]); /* segment 0 has memory and a free chunk */
		c[n] = tier_reserve(u, &m[n], c[n - 1]);
		T_CHECK(c[n] && m[n] == m[0], "the run went on into an untouched segment (%lld bytes "
			"from the free chunk of segment 0)", c[n] ? (long long)(m[n] - m[0]) : -1LL);
		if (c[n])
			tier_put(u, c[n]);
		/* with segment 0 full again, the run goes on into segment 1 */
		c[0] = tier_reserve(u, &m[0], NULL);
		T_CHECK(c[0] != NULL, "reserve segment 0's free chunk again");
		c[n] = tier_reserve(u, &m[n], c[n - 1]);
		T_CHECK(c[n] && m[n] == m[n - 1] + TIER_CHUNK, "a full segment 0: the run did not "
			"go on into segment 1");
		if (c[n])
			tier_put(u, c[n]);
		while (n--)
			if (c[n])
				tier_put(u, c[n]);
	}
	tier_destroy(u);
}

int main(void)
{
	struct fake a = { 0 }, b = { 0 }, bad = { .fail = -ENOMEM };
	struct tier_stats st;
	struct tier_chunk *c, *ref;
	char *mem, *m;
	uint64_t r0, r1, r2, got;

	/* 2.5 segments; min_free is only kept here */
	T_EQ(tier_init(&t, 160 * MiB, 7 * MiB, 0, 0), 0);
	tier_stats(t, &st);
	T_EQ(st.size, 160 * MiB);
	T_EQ(st.resident, 0);
	T_EQ(st.cap, 160 * MiB);
	T_EQ(st.min_free, 7 * MiB);

	/* an empty tier pins nothing when a pinner comes */
	T_EQ(tier_add_pinner(t, fake_pin, fake_unpin, &a), 0);
	T_EQ(a.pins, 0);

	/* the first chunk: the lowest, and its segment is pinned, whole, once (populated
	 * first, where the kernel can: RSS is taken before) */
	r0 = rss();
	c = tier_reserve(t, &base, NULL);
	T_CHECK(c != NULL, "first reserve");
	T_EQ(a.pins, 1);
	T_CHECK(a.last_pin == base && a.last_len == TIER_SEG, "pinned %p+%zu, want %p+%llu",
		(void *)a.last_pin, a.last_len, (void *)base, (unsigned long long)TIER_SEG);
	tier_put(t, c); /* RESERVED: freed */

	/* 100 chunks: segment 0 fills first, then segment 1; one pin each */
	for (uint64_t i = 0; i < 100; i++) {
		m = fill(i, 0x40 + (int)(i % 64));
		T_EQ(seg_no(m), i < 64 ? 0 : 1);
	}
	T_EQ(a.pins, 2);
	tier_stats(t, &st);
	T_EQ(st.held, 100 * MiB);
	T_EQ(st.resident, 2 * TIER_SEG);
	r1 = rss();
	T_CHECK(r1 >= r0 + 90 * MiB, "RSS grew %llu MiB over 100 MiB filled",
		(unsigned long long)((r1 - r0) >> 20));

	/* a chunk of segment 0 let go: the next fill takes it, not segment 1's or 2's */
	tier_invalidate(t, &ino, 5 * MiB, 6 * MiB);
	m = fill(5, 0x45);
	T_EQ(seg_no(m), 0);

	/* a second pinner pins the two segments with memory now; one that fails is asked once */
	T_EQ(tier_add_pinner(t, fake_pin, fake_unpin, &b), 0);
	T_EQ(b.pins, 2);
	T_EQ(tier_add_pinner(t, fake_pin, fake_unpin, &bad), 0);
	T_EQ(bad.pins, 2);
	tier_invalidate(t, &ino, 70 * MiB, 71 * MiB);
	m = fill(70, 0x46); /* segment 1 again: no pinner asked again */
	T_EQ(seg_no(m), 1);
	T_EQ(a.pins + b.pins + bad.pins, 6);

	/* memory short: no fills, lookups still served */
	tier_set_short(t, 1);
	T_CHECK(tier_reserve(t, &mem, NULL) == NULL, "a fill while memory is short");
	tier_stats(t, &st);
	T_EQ(st.cap, st.held);

	/* a referenced chunk of segment 1 stays; segment 0 (least recently used) goes first */
	ref = tier_get(t, &ino, 80, TIER_CHUNK, &mem);
	T_CHECK(ref != NULL, "chunk 80");
	got = tier_shrink(t, 1);
	T_EQ(got, TIER_SEG);
	T_EQ(a.unpins, 1);
	T_EQ(b.unpins, 1);
	T_EQ(bad.unpins, 0); /* it never pinned it */
	T_CHECK(a.last_unpin == base, "unpinned %p, want segment 0 at %p", (void *)a.last_unpin,
		(void *)base);
	T_CHECK(base[0] == 0 && base[TIER_SEG - 1] == 0, "segment 0 still holds its bytes");
	tier_stats(t, &st);
	T_EQ(st.held, 36 * MiB);
	T_EQ(st.shrunk, TIER_SEG);
	T_EQ(st.resident, TIER_SEG);
	r2 = rss();
	T_CHECK(r2 + 56 * MiB <= r1, "RSS %llu MiB after giving back 64 MiB, %llu MiB before",
		(unsigned long long)(r2 >> 20), (unsigned long long)(r1 >> 20));

	/* all it can: nothing of segment 1 goes while a chunk of it is referenced */
	got = tier_shrink(t, UINT64_MAX);
	T_EQ(got, 0);
	tier_stats(t, &st);
	T_EQ(st.held, 36 * MiB);
	T_EQ(st.resident, TIER_SEG);
	T_EQ(mem[0], 0x40 + 80 % 64);
	T_EQ(mem[TIER_CHUNK - 1], 0x40 + 80 % 64);
	/* a fill now takes segment 1, which has memory, not the lower segment 0, which has none */
	tier_set_short(t, 0);
	m = fill(150, 0x52);
	T_EQ(seg_no(m), 1);
	tier_invalidate(t, &ino, 150 * MiB, 151 * MiB);
	tier_set_short(t, 1);
	tier_put(t, ref);
	got = tier_shrink(t, UINT64_MAX);
	T_EQ(got, TIER_SEG);
	tier_stats(t, &st);
	T_EQ(st.held, 0);
	T_EQ(st.resident, 0);
	T_EQ(st.shrunk, 2 * TIER_SEG);
	T_EQ(a.unpins, 2);
	T_EQ(b.unpins, 2);

	/* memory back: a fill takes segment 0 again, pinned anew by the two that can */
	tier_set_short(t, 0);
	m = fill(0, 0x50);
	T_EQ(seg_no(m), 0);
	T_EQ(a.pins, 3);
	T_EQ(b.pins, 3);
	T_EQ(bad.pins, 3); /* released: tried again */

	/* an idle segment goes after one whole period, not at once; a fill resets it */
	tier_forget(t, &ino);
	T_EQ(tier_release_idle(t), 0);
	m = fill(1, 0x51);
	tier_forget(t, &ino);
	T_EQ(tier_release_idle(t), 0);
	T_EQ(tier_release_idle(t), TIER_SEG);
	T_EQ(a.unpins, 3);
	tier_stats(t, &st);
	T_EQ(st.shrunk, 2 * TIER_SEG); /* not counted as shrunk */
	T_EQ(st.resident, 0);

	/* the last segment has 32 chunks: pinned and released at that size */
	for (uint64_t i = 0; i < 160; i++)
		fill(i, 1);
	T_EQ(a.last_len, 32 * MiB);
	tier_stats(t, &st);
	T_EQ(st.resident, 160 * MiB);
	/* a full tier evicts the least recently used chunk for a fill */
	tier_stats(t, &st);
	got = st.evicted;
	m = fill(200, 2);
	T_CHECK(m != NULL, "a fill into a full tier");
	T_EQ(tier_has(t, &ino, 0, 1), 0);
	T_EQ(tier_has(t, &ino, 1, 1), 1);
	tier_stats(t, &st);
	T_EQ(st.evicted, got + 1);

	/* the pinners go: every pinned segment is unpinned */
	a.unpins = b.unpins = 0;
	tier_drop_pinners(t);
	T_EQ(a.unpins, 3);
	T_EQ(b.unpins, 3);
	T_EQ(bad.unpins, 0);
	tier_forget(t, &ino);
	tier_destroy(t);
	preparers();
	runs();
	host_runs();
	stress();
	return t_done("unit_tier");
}
