// SPDX-License-Identifier: MIT
/*
 * gpu.c - what CUDA and HIP have in common: opening the runtime once, device checks and
 * making the device current before each call. The runtime calls themselves are in
 * gpu-cuda.c and gpu-hip.c (gpu-impl.h); the log of failed calls is gpu-log.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dmafs.h"
#include "gpu-impl.h"

/* The shim of @target, or NULL with the reason in @why (not built, or no such target). */
static const struct gpu_runtime *runtime(int target, char *why, size_t whylen)
{
	if (target == DMAFS_TARGET_CUDA) {
#ifdef DMAFS_HAVE_CUDA
		return &gpu_cuda;
#else
		snprintf(why, whylen, "dmafs was built without CUDA headers (configure --with-cuda=DIR)");
#endif
	} else if (target == DMAFS_TARGET_HIP) {
#ifdef DMAFS_HAVE_HIP
		return &gpu_hip;
#else
		snprintf(why, whylen, "dmafs was built without HIP headers (Debian package libamdhip64-dev)");
#endif
	}
	return NULL;
}

/* dlopen the first of r->libs that opens, look up every symbol, start the runtime. */
static int open_runtime(const struct gpu_runtime *r, struct gpu *g, char *why, size_t whylen)
{
	void *h = NULL;
	int n;

	for (const char *const *lib = r->libs; *lib && !h; lib++)
		h = dlopen(*lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, whylen, "%s not found (%s): %s", r->libs[0], r->missing, dlerror());
		return -ENODEV;
	}
	/* The library stays open for the life of the process: its calls are all we use. */
	for (const struct gpu_sym *s = r->syms; s->name; s++) {
		*s->slot = dlsym(h, s->name);
		if (!*s->slot) {
			snprintf(why, whylen, "%s lacks %s (%s)", r->libs[0], s->name, r->too_old);
			return -ENODEV;
		}
	}
	n = r->start(g->version, sizeof(g->version), why, whylen);
	if (n < 0)
		return n;
	g->count = n < GPU_DEV_MAX ? n : GPU_DEV_MAX;
	g->ops = r->ops;
	return 0;
}

int gpu_load(int target, struct gpu **out, char *why, size_t whylen)
{
	/* One slot per target, filled at the first call: a runtime is never unloaded. */
	static struct {
		int done, ret;
		char why[256];
		struct gpu g;
	} slot[DMAFS_TARGET_HIP + 1];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct gpu_runtime *r;
	int ret;

	if (target != DMAFS_TARGET_CUDA && target != DMAFS_TARGET_HIP)
		return -EINVAL;
	r = runtime(target, why, whylen);
	if (!r)
		return -ENODEV;
	pthread_mutex_lock(&lock);
	if (!slot[target].done) {
		slot[target].ret = open_runtime(r, &slot[target].g, slot[target].why,
						sizeof(slot[target].why));
		slot[target].done = 1;
	}
	pthread_mutex_unlock(&lock);
	ret = slot[target].ret;
	if (ret) {
		snprintf(why, whylen, "%s", slot[target].why);
		return ret;
	}
	*out = &slot[target].g;
	if ((*out)->count == 0) {
		snprintf(why, whylen, "%s: runtime loaded but no device found", (*out)->version);
		return -ENODEV;
	}
	return 0;
}

int gpu_count(struct gpu *g) { return g->count; }
const char *gpu_version(struct gpu *g) { return g->version; }

static int valid(const struct gpu *g, int dev) { return dev >= 0 && dev < g->count; }

/* Check @dev and make it current in this thread: 0 or -errno. */
static int enter(struct gpu *g, int dev)
{
	return valid(g, dev) ? g->ops->use(dev) : -ENODEV;
}

int gpu_device_name(struct gpu *g, int dev, char *name, size_t len)
{
	return valid(g, dev) ? g->ops->name(dev, name, len) : -ENODEV;
}

int gpu_device_uuid(struct gpu *g, int dev, uint8_t uuid[16])
{
	return valid(g, dev) ? g->ops->uuid(dev, uuid) : -ENODEV;
}

int gpu_find_uuid(struct gpu *g, const uint8_t uuid[16])
{
	uint8_t u[16];

	for (int i = 0; i < g->count; i++)
		if (!g->ops->uuid(i, u) && !memcmp(u, uuid, 16))
			return i;
	return -ENODEV;
}

int gpu_pci_bus_id(struct gpu *g, int dev, char *buf, size_t len)
{
	return valid(g, dev) ? g->ops->bus_id(dev, buf, len) : -ENODEV;
}

int gpu_ipc_get(struct gpu *g, int dev, void *ptr, size_t size, uint8_t handle[64],
		uint64_t *offset)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->ipc_get(ptr, size, handle, offset);
}

int gpu_copy_htod(struct gpu *g, int dev, void *dst, const void *src, size_t len)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->copy_htod(dst, src, len);
}

int gpu_ipc_open(struct gpu *g, int dev, const uint8_t handle[64], void **base, size_t *len)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->ipc_open(handle, base, len);
}

int gpu_ipc_close(struct gpu *g, int dev, void *base)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->ipc_close(base);
}

int gpu_host_register(struct gpu *g, int dev, void *p, size_t len)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->host_register(p, len);
}

int gpu_host_unregister(struct gpu *g, int dev, void *p)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->host_unregister(p);
}

int gpu_stream_create(struct gpu *g, int dev, void **stream)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->stream_create(stream);
}

void gpu_stream_destroy(struct gpu *g, int dev, void *stream)
{
	if (!enter(g, dev))
		g->ops->stream_destroy(stream);
}

int gpu_copy_htod_async(struct gpu *g, int dev, void *dst, const void *src, size_t len,
			void *stream)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->copy_async(dst, src, len, stream);
}

int gpu_copy_htod_2d_async(struct gpu *g, int dev, void *dst, size_t dpitch, const void *src,
			   size_t spitch, size_t width, size_t height, void *stream)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->copy_2d_async(dst, dpitch, src, spitch, width, height, stream);
}

int gpu_stream_sync(struct gpu *g, int dev, void *stream)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->stream_sync(stream);
}

int gpu_mem_alloc(struct gpu *g, int dev, size_t size, void **p)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->mem_alloc(size, p);
}

int gpu_mem_free(struct gpu *g, int dev, void *p)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->mem_free(p);
}

int gpu_copy_dtoh(struct gpu *g, int dev, void *dst, const void *src, size_t len)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->copy_dtoh(dst, src, len);
}

int gpu_event_create(struct gpu *g, int dev, void **event)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->event_create(event);
}

void gpu_event_destroy(struct gpu *g, int dev, void *event)
{
	if (!enter(g, dev))
		g->ops->event_destroy(event);
}

int gpu_event_record(struct gpu *g, int dev, void *event, void *stream)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->event_record(event, stream);
}

int gpu_event_query(struct gpu *g, int dev, void *event)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->event_query(event);
}

int gpu_event_sync(struct gpu *g, int dev, void *event)
{
	int ret = enter(g, dev);

	return ret ? ret : g->ops->event_sync(event);
}
