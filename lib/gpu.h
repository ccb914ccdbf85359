/* SPDX-License-Identifier: MIT */
/*
 * gpu.h - CUDA and HIP, loaded at run time with dlopen so that one build runs on NVIDIA,
 * AMD and GPU-less hosts. Used by the daemon (open IPC handles, pin staging memory, async
 * host-to-device copies) and by libdmafs (make IPC handles, fallback copies).
 *
 * CUDA goes through the driver API in libcuda.so.1: always installed with the driver,
 * stable across toolkits, and it shares the primary context PyTorch's runtime uses. HIP
 * goes through libamdhip64.so. All calls return 0 or -errno (-ENODEV when the runtime or
 * device is missing, -EIO for a failed GPU call, with the runtime's message logged).
 */
#ifndef DMAFS_GPU_H
#define DMAFS_GPU_H

#include <stddef.h>
#include <stdint.h>

struct gpu;

/*
 * Load the runtime for @target (DMAFS_TARGET_CUDA or DMAFS_TARGET_HIP). Returns 0 and
 * *out (process-wide, never freed), or -ENODEV with a reason in @why ("libcuda.so.1 not
 * found", "cuInit failed: CUDA_ERROR_NO_DEVICE ...").
 */
int gpu_load(int target, struct gpu **out, char *why, size_t whylen);
/* Route messages about failed runtime calls (default: stderr when DMAFS_DEBUG is set). */
void gpu_set_log(void (*fn)(const char *msg));
/* Number of devices, and driver/runtime version as text. */
int gpu_count(struct gpu *g);
const char *gpu_version(struct gpu *g);
int gpu_device_name(struct gpu *g, int dev, char *name, size_t len);
int gpu_device_uuid(struct gpu *g, int dev, uint8_t uuid[16]);
/* Ordinal of the device with @uuid, or -ENODEV. */
int gpu_find_uuid(struct gpu *g, const uint8_t uuid[16]);
/* Bus id "0000:41:00.0" of a device, for P2P checks. */
int gpu_pci_bus_id(struct gpu *g, int dev, char *buf, size_t len);

/* Client side: the allocation holding [ptr, ptr+size) as an IPC handle plus offset. */
int gpu_ipc_get(struct gpu *g, int dev, void *ptr, size_t size, uint8_t handle[64],
		uint64_t *offset);
/* Synchronous copy host -> device (the posix fallback). */
int gpu_copy_htod(struct gpu *g, int dev, void *dst, const void *src, size_t len);

/* Daemon side. */
/* Map another process's allocation; *len gets the allocation's size. */
int gpu_ipc_open(struct gpu *g, int dev, const uint8_t handle[64], void **base, size_t *len);
int gpu_ipc_close(struct gpu *g, int dev, void *base);
/* Page-lock existing host memory for async DMA. */
int gpu_host_register(struct gpu *g, int dev, void *p, size_t len);
int gpu_host_unregister(struct gpu *g, int dev, void *p);
int gpu_stream_create(struct gpu *g, int dev, void **stream);
void gpu_stream_destroy(struct gpu *g, int dev, void *stream);
int gpu_copy_htod_async(struct gpu *g, int dev, void *dst, const void *src, size_t len,
			void *stream);
/* @height rows of @width bytes from pinned host memory @spitch apart, @dpitch apart on the device. */
int gpu_copy_htod_2d_async(struct gpu *g, int dev, void *dst, size_t dpitch, const void *src,
			   size_t spitch, size_t width, size_t height, void *stream);
int gpu_stream_sync(struct gpu *g, int dev, void *stream);
/* Events mark a point in a stream: a staging slot is reused once the event recorded after
 * its copy has fired. gpu_event_query returns 1 (fired), 0 (not yet) or -errno. */
int gpu_event_create(struct gpu *g, int dev, void **event);
void gpu_event_destroy(struct gpu *g, int dev, void *event);
int gpu_event_record(struct gpu *g, int dev, void *event, void *stream);
int gpu_event_query(struct gpu *g, int dev, void *event);
int gpu_event_sync(struct gpu *g, int dev, void *event);

/* Tools (dmafs-load): device memory of their own, and reading it back for --verify. */
int gpu_mem_alloc(struct gpu *g, int dev, size_t size, void **p);
int gpu_mem_free(struct gpu *g, int dev, void *p);
/* Synchronous copy device -> host. */
int gpu_copy_dtoh(struct gpu *g, int dev, void *dst, const void *src, size_t len);

#endif
