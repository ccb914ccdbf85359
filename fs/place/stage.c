// SPDX-License-Identifier: MIT
/* stage.c - staging slot pools per target device, set up ahead of the first placement
 * (see stage.h). */
#include "place/stage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dmafs-proto.h"
#include "engine/tier.h"
#include "gpu.h"
#include "util/util.h"

#define MAX_DEVS 64

/*
 * A GPU runtime pinning the warm tier's segments (a tier pinner, engine/tier.h): the
 * registration is portable to all of the runtime's devices, so one device does it.
 */
struct tier_pin {
	struct gpu *g;
	int dev, target;
	int warned; /* a failure was logged; atomic */
};

/* Every pool of one mount. */
struct stages {
	struct stage pools[3][MAX_DEVS]; /* [host, cuda, hip][device]; host: device 0 only */
	uint64_t pool_bytes;
	pthread_t setup_thread;
	int setup_running;
	struct tier *tier;		/* the warm tier, or NULL */
	pthread_mutex_t tier_lock;
	struct tier_pin tier_pin[3];	/* per runtime, once added; under tier_lock */
	int tier_pinned[3];		/* whether tier_pin[k] is a pinner; under tier_lock */
};

static int kind(int target)
{
	return target == DMAFS_TARGET_CUDA ? 1 : target == DMAFS_TARGET_HIP ? 2 : 0;
}

static const char *target_name(int target)
{
	return target == DMAFS_TARGET_CUDA ? "CUDA" : target == DMAFS_TARGET_HIP ? "HIP" : "host";
}

uint64_t stage_bytes(const struct stages *S) { return S->pool_bytes; }

/* Undo a partial or complete setup; caller owns @s (state SETUP). */
static void teardown(struct stage *s)
{
	if (s->event) {
		for (unsigned i = 0; i < s->nslots; i++)
			if (s->event[i])
				gpu_event_destroy(s->gpu, s->dev, s->event[i]);
		free(s->event);
		s->event = NULL;
	}
	for (int i = 0; i < STAGE_STREAMS; i++) {
		if (s->stream[i])
			gpu_stream_destroy(s->gpu, s->dev, s->stream[i]);
		s->stream[i] = NULL;
	}
	if (s->mem) {
		if (s->gpu)
			gpu_host_unregister(s->gpu, s->dev, s->mem);
		free(s->mem);
		s->mem = NULL;
	}
	free(s->free);
	s->free = NULL;
}

/*
 * Allocate, pin and equip one pool. Memory is 2 MiB aligned and advised for transparent
 * huge pages where the system allows them: populating and pinning 2 MiB pages is what
 * makes a 256 MiB pool take tens of milliseconds rather than hundreds.
 */
static int setup(struct stage *s, uint64_t pool_bytes)
{
	uint64_t t0 = dm_mono_ns();
	int ret = 0;

	s->nslots = (unsigned)(pool_bytes / STAGE_SLOT);
	s->bytes = (size_t)s->nslots * STAGE_SLOT;
	s->free = malloc(s->nslots * sizeof(*s->free));
	if (!s->free)
		return -ENOMEM;
	s->mem = util_huge_alloc(s->bytes);
	if (!s->mem)
		return -ENOMEM;
	/* touch every page now so that neither pinning nor the first reads fault them in */
	for (size_t off = 0; off < s->bytes; off += 4096)
		s->mem[off] = 0;
	if (s->gpu) {
		ret = gpu_host_register(s->gpu, s->dev, s->mem, s->bytes);
		if (ret) {
			free(s->mem);
			s->mem = NULL;
			return ret;
		}
		for (int i = 0; i < STAGE_STREAMS && !ret; i++)
			ret = gpu_stream_create(s->gpu, s->dev, &s->stream[i]);
		s->event = ret ? NULL : calloc(s->nslots, sizeof(*s->event));
		if (!ret && !s->event)
			ret = -ENOMEM;
		for (unsigned i = 0; i < s->nslots && !ret; i++)
			ret = gpu_event_create(s->gpu, s->dev, &s->event[i]);
		if (ret)
			return ret;
	}
	for (unsigned i = 0; i < s->nslots; i++)
		s->free[i] = s->nslots - 1 - i;
	s->nfree = s->nslots;
	s->setup_ns = dm_mono_ns() - t0;
	return 0;
}

/*
 * The tier's pinner calls: register one segment of the warm tier with the runtime, so
 * that host-to-device copies out of it run at the link's speed (out of pageable memory
 * they go through the driver's own bounce at a fraction of it), and unregister it before
 * the tier gives its pages back. A failure is logged once per runtime; the segment stays
 * usable, pageable (slower copies, the same bytes).
 */
static int tier_pin_seg(void *arg, void *mem, size_t len)
{
	struct tier_pin *p = arg;
	uint64_t t0 = dm_mono_ns();
	int ret = gpu_host_register(p->g, p->dev, mem, len);

	if (!ret) {
		log_debug("placement: %zu MiB of the warm tier pinned for %s in %.1f ms", len >> 20,
			  target_name(p->target), (dm_mono_ns() - t0) / 1e6);
		return 0;
	}
	if (!__atomic_exchange_n(&p->warned, 1, __ATOMIC_RELAXED))
		log_warn("placement: cannot pin %zu MiB of the warm tier for %s: %s; copies out of its unpinned parts to %s devices are slower (said once)",
			 len >> 20, target_name(p->target), strerror(ret < 0 ? -ret : ret),
			 target_name(p->target));
	return ret < 0 ? ret : -EIO;
}

static void tier_unpin_seg(void *arg, void *mem, size_t len)
{
	struct tier_pin *p = arg;

	(void)len;
	gpu_host_unregister(p->g, p->dev, mem);
}

/*
 * Make runtime @g (through device @dev) a pinner of the warm tier, unless done: the
 * segments that hold memory now are pinned at once, the others by the tier's preparers
 * ahead of the fills, or as fills first take a chunk of them (engine/tier.h).
 */
static void pin_tier(struct stages *S, int target, struct gpu *g, int dev)
{
	int k = kind(target), ret;
	struct tier_stats ts;
	uint64_t ahead;
	unsigned np;

	pthread_mutex_lock(&S->tier_lock);
	if (!S->tier || S->tier_pinned[k]) {
		pthread_mutex_unlock(&S->tier_lock);
		return;
	}
	S->tier_pin[k] = (struct tier_pin){ .g = g, .dev = dev, .target = target };
	ret = tier_add_pinner(S->tier, tier_pin_seg, tier_unpin_seg, &S->tier_pin[k]);
	if (ret) {
		log_warn("placement: the warm tier cannot be pinned for %s: %s", target_name(target),
			 strerror(-ret));
	} else {
		S->tier_pinned[k] = 1;
		tier_stats(S->tier, &ts);
		np = tier_preparers(S->tier, &ahead);
		if (tier_pins_all(S->tier))
			log_info("placement: the warm tier (%llu MiB) is being pinned for %s, whole, by %u threads, %llu MiB at a time (tier_pin=all)",
				 (unsigned long long)(ts.size >> 20), target_name(target), np,
				 (unsigned long long)(TIER_SEG >> 20));
		else
			log_info("placement: the warm tier is pinned for %s as it fills, %llu MiB at a time (%llu MiB with memory now); %u threads keep %llu MiB pinned ahead of the fills",
				 target_name(target), (unsigned long long)(TIER_SEG >> 20),
				 (unsigned long long)(ts.resident >> 20), np,
				 (unsigned long long)(ahead >> 20));
	}
	pthread_mutex_unlock(&S->tier_lock);
}

int stage_get(struct stages *S, int target, struct gpu *g, int dev, struct stage **out)
{
	struct stage *s;
	int ret;

	if (dev < 0 || dev >= MAX_DEVS || (target != DMAFS_TARGET_HOST && !g))
		return -ENODEV;
	s = &S->pools[kind(target)][target == DMAFS_TARGET_HOST ? 0 : dev];
	pthread_mutex_lock(&s->lock);
	while (s->state == STAGE_SETUP)
		pthread_cond_wait(&s->cond, &s->lock);
	if (s->state == STAGE_READY) {
		pthread_mutex_unlock(&s->lock);
		*out = s;
		return 0;
	}
	/* nobody has set it up, or the last try failed: try (again) */
	s->state = STAGE_SETUP;
	pthread_mutex_unlock(&s->lock);
	s->target = target;
	s->dev = target == DMAFS_TARGET_HOST ? 0 : dev;
	s->gpu = target == DMAFS_TARGET_HOST ? NULL : g;
	ret = setup(s, S->pool_bytes);
	if (ret) {
		log_err("placement: cannot set up %llu MiB of %s staging for %s device %d: %s (placements to it fail with ENODEV; a smaller staging_mb= may help)",
			(unsigned long long)(S->pool_bytes >> 20), s->gpu ? "pinned" : "host",
			target_name(target), dev, strerror(-ret));
		teardown(s);
	} else if (s->gpu) {
		log_info("placement: %s device %d ready: %u staging slots of 1 MiB pinned, %d copy streams, set up in %.1f ms",
			 target_name(target), dev, s->nslots, STAGE_STREAMS, s->setup_ns / 1e6);
		pin_tier(S, target, g, s->dev); /* before the pool is READY: no copy uses it yet */
	}
	pthread_mutex_lock(&s->lock);
	s->state = ret ? ret : STAGE_READY;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret == -ENOMEM ? -ENOMEM : -ENODEV;
	*out = s;
	return 0;
}

int stage_describe(struct stages *S, int target, int dev, char *buf, size_t len)
{
	struct stage *s;
	int state;

	if (dev < 0 || dev >= MAX_DEVS)
		return -ENODEV;
	s = &S->pools[kind(target)][target == DMAFS_TARGET_HOST ? 0 : dev];
	pthread_mutex_lock(&s->lock);
	state = s->state;
	pthread_mutex_unlock(&s->lock);
	if (state == STAGE_READY)
		snprintf(buf, len, "staging ready (%u MiB%s, %.0f ms)", s->nslots,
			 s->gpu ? " pinned" : "", s->setup_ns / 1e6);
	else if (state == STAGE_SETUP)
		snprintf(buf, len, "staging being set up");
	else if (state < 0)
		snprintf(buf, len, "staging failed: %s", strerror(-state));
	else
		snprintf(buf, len, "staging set up at first use");
	return state;
}

/* Prepare every device of every runtime found, so the first placement finds them ready. */
static void *setup_main(void *arg)
{
	static const int targets[] = { DMAFS_TARGET_CUDA, DMAFS_TARGET_HIP };
	struct stages *S = arg;

	for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
		struct gpu *g;
		struct stage *s;
		char why[256];

		if (gpu_load(targets[t], &g, why, sizeof(why))) {
			log_debug("placement: no %s staging prepared: %s", target_name(targets[t]), why);
			continue;
		}
		for (int d = 0; d < gpu_count(g) && d < MAX_DEVS; d++)
			stage_get(S, targets[t], g, d, &s);
	}
	return NULL;
}

int stage_init(struct stages **out, uint64_t bytes, int prewarm, struct tier *tier)
{
	struct stages *S = calloc(1, sizeof(*S));

	*out = S;
	if (!S)
		return -ENOMEM;
	S->tier = tier;
	pthread_mutex_init(&S->tier_lock, NULL);
	S->pool_bytes = 64ull << 20;
	for (int k = 0; k < 3; k++)
		for (int d = 0; d < MAX_DEVS; d++) {
			pthread_mutex_init(&S->pools[k][d].lock, NULL);
			pthread_cond_init(&S->pools[k][d].cond, NULL);
		}
	if (bytes)
		S->pool_bytes = MAX(ALIGN_UP(bytes, STAGE_SLOT), 4ull * STAGE_SLOT);
	if (!prewarm)
		return 0;
	if (pthread_create(&S->setup_thread, NULL, setup_main, S))
		return -EAGAIN;
	S->setup_running = 1;
	return 0;
}

void stage_shutdown(struct stages *S)
{
	if (!S)
		return;
	if (S->setup_running) {
		pthread_join(S->setup_thread, NULL);
		S->setup_running = 0;
	}
	for (int k = 0; k < 3; k++)
		for (int d = 0; d < MAX_DEVS; d++) {
			struct stage *s = &S->pools[k][d];

			if (s->state == STAGE_READY)
				teardown(s);
			s->state = STAGE_NONE;
		}
	tier_drop_pinners(S->tier); /* while the runtimes are there */
	for (int k = 0; k < 3; k++)
		S->tier_pinned[k] = 0;
}

void stage_enter(struct stage *s)
{
	pthread_mutex_lock(&s->lock);
	s->users++;
	pthread_mutex_unlock(&s->lock);
}

void stage_leave(struct stage *s)
{
	pthread_mutex_lock(&s->lock);
	s->users--;
	pthread_cond_broadcast(&s->cond); /* the others' share grew */
	pthread_mutex_unlock(&s->lock);
}

int stage_take(struct stage *s, unsigned held, unsigned parts)
{
	int slot = -1;

	pthread_mutex_lock(&s->lock);
	if (!parts)
		parts = MAX(1u, s->users);
	if (s->nfree && held < MAX(STAGE_MIN_SHARE, s->nslots / parts))
		slot = (int)s->free[--s->nfree];
	pthread_mutex_unlock(&s->lock);
	return slot;
}

void stage_put(struct stage *s, unsigned slot)
{
	pthread_mutex_lock(&s->lock);
	s->free[s->nfree++] = slot;
	if (s->nfree == 1 || s->users > 1)
		pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void stage_wait(struct stage *s, unsigned timeout_us)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)timeout_us * 1000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_mutex_lock(&s->lock);
	if (s->nfree == 0)
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	pthread_mutex_unlock(&s->lock);
}
