/* SPDX-License-Identifier: MIT */
/* gpu-impl.h - what each runtime shim (gpu-cuda.c, gpu-hip.c) provides to gpu.c. */
#ifndef DMAFS_GPU_IMPL_H
#define DMAFS_GPU_IMPL_H

#include "gpu.h"

struct gpu_ops {
	int (*name)(int dev, char *buf, size_t len);
	int (*uuid)(int dev, uint8_t out[16]);
	int (*bus_id)(int dev, char *buf, size_t len);
	int (*ipc_get)(int dev, void *ptr, size_t size, uint8_t handle[64], uint64_t *offset);
	int (*copy_htod)(int dev, void *dst, const void *src, size_t len);
	int (*ipc_open)(int dev, const uint8_t handle[64], void **base, size_t *len);
	int (*ipc_close)(int dev, void *base);
	int (*host_register)(int dev, void *p, size_t len);
	int (*host_unregister)(int dev, void *p);
	int (*stream_create)(int dev, void **s);
	void (*stream_destroy)(int dev, void *s);
	int (*copy_async)(int dev, void *dst, const void *src, size_t len, void *s);
	int (*stream_sync)(int dev, void *s);
	int (*mem_alloc)(int dev, size_t size, void **p);
	int (*mem_free)(int dev, void *p);
	int (*copy_dtoh)(int dev, void *dst, const void *src, size_t len);
	int (*event_create)(int dev, void **e);
	void (*event_destroy)(int dev, void *e);
	int (*event_record)(int dev, void *e, void *stream);
	int (*event_query)(int dev, void *e);
	int (*event_sync)(int dev, void *e);
};

struct gpu {
	int target;
	int count;
	char version[64];
	const struct gpu_ops *ops;
};

extern const struct gpu_ops gpu_cuda_ops, gpu_hip_ops;
int gpu_cuda_load(struct gpu **out, char *why, size_t whylen);
int gpu_hip_load(struct gpu **out, char *why, size_t whylen);
/* Report a failed runtime call (to the daemon log, or stderr when DMAFS_DEBUG is set). */
void gpu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The daemon routes gpu_log to its own log. */
extern void (*gpu_log_hook)(const char *msg);

#endif
