/* SPDX-License-Identifier: MIT */
/*
 * gpu-impl.h - what each runtime shim (gpu-cuda.c, gpu-hip.c) gives gpu.c: the library to
 * open, the entry points to look up, how to start the runtime, and one call per gpu.h
 * operation. Everything the two runtimes do alike (loading once, device checks, making
 * a device current before a call) lives in gpu.c, the log of failed calls in gpu-log.c.
 */
#ifndef DMAFS_GPU_IMPL_H
#define DMAFS_GPU_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gpu.h"

/* Devices a process can address: the CUDA shim keeps one primary context per ordinal. */
#define GPU_DEV_MAX 64

/*
 * The calls of one runtime. name, uuid and bus_id take a device ordinal; the others run
 * after use(dev) has made the device current in the calling thread, so they take none.
 * gpu.c has checked @dev against the device count. Each returns 0 or -errno (-EIO for a
 * failed runtime call, -ENOMEM when the runtime is out of memory) and logs the runtime's
 * message with gpu_log().
 */
struct gpu_ops {
	int (*use)(int dev);
	int (*name)(int dev, char *buf, size_t len);
	int (*uuid)(int dev, uint8_t out[16]);
	int (*bus_id)(int dev, char *buf, size_t len);
	/* -EINVAL: [ptr, +size) is not within one allocation of the current device. */
	int (*ipc_get)(void *ptr, size_t size, uint8_t handle[64], uint64_t *offset);
	int (*copy_htod)(void *dst, const void *src, size_t len);
	/* -ENXIO: the handle does not open (another device, freed, not an IPC handle). */
	int (*ipc_open)(const uint8_t handle[64], void **base, size_t *len);
	int (*ipc_close)(void *base);
	int (*host_register)(void *p, size_t len);
	int (*host_unregister)(void *p);
	int (*stream_create)(void **s);
	void (*stream_destroy)(void *s);
	int (*copy_async)(void *dst, const void *src, size_t len, void *s);
	/* @height rows of @width bytes, @spitch apart in host memory, @dpitch on the device. */
	int (*copy_2d_async)(void *dst, size_t dpitch, const void *src, size_t spitch,
			     size_t width, size_t height, void *s);
	int (*stream_sync)(void *s);
	int (*mem_alloc)(size_t size, void **p);
	int (*mem_free)(void *p);
	int (*copy_dtoh)(void *dst, const void *src, size_t len);
	int (*event_create)(void **e);
	void (*event_destroy)(void *e);
	int (*event_record)(void *e, void *s);
	/* 1 fired, 0 not yet, or -errno. */
	int (*event_query)(void *e);
	int (*event_sync)(void *e);
};

/*
 * Every operation of struct gpu_ops. A shim defines a static function of each name and
 * fills its table with { GPU_OPS(GPU_OP) }: one it lacks is a compile error, not a NULL
 * pointer found at run time.
 */
#define GPU_OPS(X)                                                                      \
	X(use) X(name) X(uuid) X(bus_id) X(ipc_get) X(copy_htod) X(ipc_open) X(ipc_close) \
	X(host_register) X(host_unregister) X(stream_create) X(stream_destroy)           \
	X(copy_async) X(copy_2d_async) X(stream_sync) X(mem_alloc) X(mem_free) X(copy_dtoh)               \
	X(event_create) X(event_destroy) X(event_record) X(event_query) X(event_sync)
#define GPU_OP(op) .op = op,

/* An entry point of the runtime library, and the function pointer it is stored in. */
struct gpu_sym {
	const char *name;
	void **slot;
};

/* A runtime as gpu_load() opens it, once per process. */
struct gpu_runtime {
	const char *const *libs;	/* sonames tried in turn, NULL-terminated */
	const char *missing;		/* why none opens: "no NVIDIA driver" */
	const char *too_old;		/* why a symbol is missing: "driver too old" */
	const struct gpu_sym *syms;	/* ends with a NULL name */
	/*
	 * After every symbol is found: initialise the runtime, write its version for people
	 * into @version, and return the device count, or -ENODEV with the reason in @why.
	 */
	int (*start)(char *version, size_t vlen, char *why, size_t whylen);
	const struct gpu_ops *ops;
};

extern const struct gpu_runtime gpu_cuda, gpu_hip;

struct gpu {
	int count;			/* at most GPU_DEV_MAX */
	char version[64];
	const struct gpu_ops *ops;
};

/*
 * Report a failed runtime call (to the daemon log, or stderr when DMAFS_DEBUG is set);
 * gpu-log.c.
 */
void gpu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
