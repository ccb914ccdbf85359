// SPDX-License-Identifier: MIT
/* gpu.c - dispatch to the CUDA or HIP shim, and device lookup shared by both. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dmafs.h"
#include "gpu-impl.h"

void (*gpu_log_hook)(const char *msg);

#ifndef DMAFS_HAVE_CUDA
int gpu_cuda_load(struct gpu **out, char *why, size_t whylen)
{
	snprintf(why, whylen, "dmafs was built without CUDA headers (configure --with-cuda=DIR)");
	return -ENODEV;
}
#endif
#ifndef DMAFS_HAVE_HIP
int gpu_hip_load(struct gpu **out, char *why, size_t whylen)
{
	snprintf(why, whylen, "dmafs was built without HIP headers (Debian package libamdhip64-dev)");
	return -ENODEV;
}
#endif

void gpu_log(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (gpu_log_hook)
		gpu_log_hook(msg);
	else if (getenv("DMAFS_DEBUG"))
		fprintf(stderr, "libdmafs: %s\n", msg);
}

int gpu_load(int target, struct gpu **out, char *why, size_t whylen)
{
	int ret;

	if (target == DMAFS_TARGET_CUDA)
		ret = gpu_cuda_load(out, why, whylen);
	else if (target == DMAFS_TARGET_HIP)
		ret = gpu_hip_load(out, why, whylen);
	else
		return -EINVAL;
	if (!ret && (*out)->count == 0) {
		snprintf(why, whylen, "%s: runtime loaded but no device found", (*out)->version);
		return -ENODEV;
	}
	return ret;
}

int gpu_target(const struct gpu *g) { return g->target; }
void gpu_set_log(void (*fn)(const char *msg)) { gpu_log_hook = fn; }
int gpu_count(struct gpu *g) { return g->count; }
const char *gpu_version(struct gpu *g) { return g->version; }

#define CHECK_DEV(g, dev) \
	do { if ((dev) < 0 || (dev) >= (g)->count) return -ENODEV; } while (0)

int gpu_device_name(struct gpu *g, int dev, char *name, size_t len)
{
	CHECK_DEV(g, dev);
	return g->ops->name(dev, name, len);
}

int gpu_device_uuid(struct gpu *g, int dev, uint8_t uuid[16])
{
	CHECK_DEV(g, dev);
	return g->ops->uuid(dev, uuid);
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
	CHECK_DEV(g, dev);
	return g->ops->bus_id(dev, buf, len);
}

int gpu_ipc_get(struct gpu *g, int dev, void *ptr, size_t size, uint8_t handle[64],
		uint64_t *offset)
{
	CHECK_DEV(g, dev);
	return g->ops->ipc_get(dev, ptr, size, handle, offset);
}

int gpu_copy_htod(struct gpu *g, int dev, void *dst, const void *src, size_t len)
{
	CHECK_DEV(g, dev);
	return g->ops->copy_htod(dev, dst, src, len);
}

int gpu_ipc_open(struct gpu *g, int dev, const uint8_t handle[64], void **base, size_t *len)
{
	CHECK_DEV(g, dev);
	return g->ops->ipc_open(dev, handle, base, len);
}

int gpu_ipc_close(struct gpu *g, int dev, void *base)
{
	CHECK_DEV(g, dev);
	return g->ops->ipc_close(dev, base);
}

int gpu_host_register(struct gpu *g, int dev, void *p, size_t len)
{
	CHECK_DEV(g, dev);
	return g->ops->host_register(dev, p, len);
}

int gpu_host_unregister(struct gpu *g, int dev, void *p)
{
	CHECK_DEV(g, dev);
	return g->ops->host_unregister(dev, p);
}

int gpu_stream_create(struct gpu *g, int dev, void **stream)
{
	CHECK_DEV(g, dev);
	return g->ops->stream_create(dev, stream);
}

void gpu_stream_destroy(struct gpu *g, int dev, void *stream)
{
	if (dev >= 0 && dev < g->count)
		g->ops->stream_destroy(dev, stream);
}

int gpu_copy_htod_async(struct gpu *g, int dev, void *dst, const void *src, size_t len,
			void *stream)
{
	CHECK_DEV(g, dev);
	return g->ops->copy_async(dev, dst, src, len, stream);
}

int gpu_stream_sync(struct gpu *g, int dev, void *stream)
{
	CHECK_DEV(g, dev);
	return g->ops->stream_sync(dev, stream);
}

int gpu_mem_alloc(struct gpu *g, int dev, size_t size, void **p)
{
	CHECK_DEV(g, dev);
	return g->ops->mem_alloc(dev, size, p);
}

int gpu_mem_free(struct gpu *g, int dev, void *p)
{
	CHECK_DEV(g, dev);
	return g->ops->mem_free(dev, p);
}

int gpu_copy_dtoh(struct gpu *g, int dev, void *dst, const void *src, size_t len)
{
	CHECK_DEV(g, dev);
	return g->ops->copy_dtoh(dev, dst, src, len);
}

int gpu_event_create(struct gpu *g, int dev, void **event)
{
	CHECK_DEV(g, dev);
	return g->ops->event_create(dev, event);
}

void gpu_event_destroy(struct gpu *g, int dev, void *event)
{
	if (dev >= 0 && dev < g->count)
		g->ops->event_destroy(dev, event);
}

int gpu_event_record(struct gpu *g, int dev, void *event, void *stream)
{
	CHECK_DEV(g, dev);
	return g->ops->event_record(dev, event, stream);
}

int gpu_event_query(struct gpu *g, int dev, void *event)
{
	CHECK_DEV(g, dev);
	return g->ops->event_query(dev, event);
}

int gpu_event_sync(struct gpu *g, int dev, void *event)
{
	CHECK_DEV(g, dev);
	return g->ops->event_sync(dev, event);
}
