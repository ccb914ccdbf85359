// SPDX-License-Identifier: MIT
/* gpu-hip.c - the HIP runtime through dlopen("libamdhip64.so"). Untested on AMD hardware
 * by the project's CI (no GPU there); mirrors gpu-cuda.c call for call. */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <dlfcn.h>
#include <errno.h>
#include <hip/hip_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dmafs.h"
#include "gpu-impl.h"

#define HIP_FNS(X)                                   \
	X(hipInit)                                   \
	X(hipRuntimeGetVersion)                      \
	X(hipGetErrorString)                         \
	X(hipGetDeviceCount)                         \
	X(hipSetDevice)                              \
	X(hipDeviceGetName)                          \
	X(hipDeviceGetUuid)                          \
	X(hipDeviceGetPCIBusId)                      \
	X(hipMemGetAddressRange)                     \
	X(hipIpcGetMemHandle)                        \
	X(hipIpcOpenMemHandle)                       \
	X(hipIpcCloseMemHandle)                      \
	X(hipHostRegister)                           \
	X(hipHostUnregister)                         \
	X(hipStreamCreateWithFlags)                  \
	X(hipStreamDestroy)                          \
	X(hipStreamSynchronize)                      \
	X(hipMemcpyHtoDAsync)                        \
	X(hipMemcpyHtoD)                             \
	X(hipMalloc)                                 \
	X(hipFree)                                   \
	X(hipMemcpyDtoH)                             \
	X(hipEventCreateWithFlags)                   \
	X(hipEventDestroy)                           \
	X(hipEventRecord)                            \
	X(hipEventQuery)                             \
	X(hipEventSynchronize)

static struct {
#define DECL(fn) __typeof__(fn) *fn;
	HIP_FNS(DECL)
#undef DECL
} hip;

static struct gpu g_hip = { .target = DMAFS_TARGET_HIP };
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_ret;
static char load_why[256];

static const char *hiperr(hipError_t r)
{
	const char *s = hip.hipGetErrorString ? hip.hipGetErrorString(r) : NULL;

	return s ? s : "unknown HIP error";
}

static void load(void)
{
	void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
	hipError_t r;
	int v = 0;

	if (!h)
		h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(load_why, sizeof(load_why), "libamdhip64.so not found (no ROCm/HIP runtime)");
		load_ret = -ENODEV;
		return;
	}
#define LOAD(fn)                                                                        \
	hip.fn = (__typeof__(fn) *)dlsym(h, #fn);                                       \
	if (!hip.fn) {                                                                  \
		snprintf(load_why, sizeof(load_why), "libamdhip64.so lacks %s (runtime too old)", #fn); \
		load_ret = -ENODEV;                                                     \
		return;                                                                 \
	}
	HIP_FNS(LOAD)
#undef LOAD
	r = hip.hipInit(0);
	if (r != hipSuccess) {
		snprintf(load_why, sizeof(load_why), "hipInit failed: %s", hiperr(r));
		load_ret = -ENODEV;
		return;
	}
	hip.hipRuntimeGetVersion(&v);
	snprintf(g_hip.version, sizeof(g_hip.version), "HIP runtime %d", v);
	g_hip.ops = &gpu_hip_ops;
	if (hip.hipGetDeviceCount(&g_hip.count) != hipSuccess)
		g_hip.count = 0;
	if (g_hip.count > 64)
		g_hip.count = 64;
}

int gpu_hip_load(struct gpu **out, char *why, size_t whylen)
{
	pthread_once(&once, load);
	if (load_ret) {
		snprintf(why, whylen, "%s", load_why);
		return load_ret;
	}
	*out = &g_hip;
	return 0;
}

static int fail(const char *what, hipError_t r)
{
	gpu_log("HIP %s failed: %s", what, hiperr(r));
	return r == hipErrorOutOfMemory ? -ENOMEM : -EIO;
}

#define CALL(what, expr)                               \
	do {                                           \
		hipError_t r_ = (expr);                \
		if (r_ != hipSuccess)                  \
			return fail(what, r_);         \
	} while (0)

/* HIP keeps a current device per thread. */
static int use(int dev)
{
	CALL("hipSetDevice", hip.hipSetDevice(dev));
	return 0;
}

static int name(int dev, char *buf, size_t len)
{
	CALL("hipDeviceGetName", hip.hipDeviceGetName(buf, (int)len, dev));
	return 0;
}

static int uuid(int dev, uint8_t out[16])
{
	hipUUID u;

	CALL("hipDeviceGetUuid", hip.hipDeviceGetUuid(&u, dev));
	memcpy(out, u.bytes, 16);
	return 0;
}

static int bus_id(int dev, char *buf, size_t len)
{
	CALL("hipDeviceGetPCIBusId", hip.hipDeviceGetPCIBusId(buf, (int)len, dev));
	return 0;
}

static int ipc_get(int dev, void *ptr, size_t size, uint8_t handle[64], uint64_t *offset)
{
	hipDeviceptr_t base;
	size_t len;
	hipIpcMemHandle_t h;
	int ret = use(dev);

	if (ret)
		return ret;
	if (hip.hipMemGetAddressRange(&base, &len, ptr) != hipSuccess)
		return -EINVAL;
	if ((char *)ptr + size > (char *)base + len)
		return -EINVAL;
	CALL("hipIpcGetMemHandle", hip.hipIpcGetMemHandle(&h, base));
	_Static_assert(sizeof(h) == 64, "hipIpcMemHandle_t is 64 bytes");
	memcpy(handle, &h, 64);
	*offset = (char *)ptr - (char *)base;
	return 0;
}

static int copy_htod(int dev, void *dst, const void *src, size_t len)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipMemcpyHtoD", hip.hipMemcpyHtoD(dst, (void *)src, len));
	return 0;
}

static int ipc_open(int dev, const uint8_t handle[64], void **base, size_t *len)
{
	hipIpcMemHandle_t h;
	hipDeviceptr_t b;
	hipError_t r;
	int ret = use(dev);

	if (ret)
		return ret;
	memcpy(&h, handle, 64);
	r = hip.hipIpcOpenMemHandle(base, h, hipIpcMemLazyEnablePeerAccess);
	if (r != hipSuccess) {
		gpu_log("hipIpcOpenMemHandle failed: %s", hiperr(r));
		return -ENXIO;
	}
	if (hip.hipMemGetAddressRange(&b, len, *base) != hipSuccess || b != *base) {
		hip.hipIpcCloseMemHandle(*base);
		return -ENXIO;
	}
	return 0;
}

static int ipc_close(int dev, void *base)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipIpcCloseMemHandle", hip.hipIpcCloseMemHandle(base));
	return 0;
}

static int host_register(int dev, void *p, size_t len)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipHostRegister", hip.hipHostRegister(p, len, hipHostRegisterPortable));
	return 0;
}

static int host_unregister(int dev, void *p)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipHostUnregister", hip.hipHostUnregister(p));
	return 0;
}

static int stream_create(int dev, void **s)
{
	hipStream_t st;
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipStreamCreateWithFlags", hip.hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
	*s = st;
	return 0;
}

static void stream_destroy(int dev, void *s)
{
	if (!use(dev))
		hip.hipStreamDestroy((hipStream_t)s);
}

static int copy_async(int dev, void *dst, const void *src, size_t len, void *s)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipMemcpyHtoDAsync", hip.hipMemcpyHtoDAsync(dst, (void *)src, len, (hipStream_t)s));
	return 0;
}

static int stream_sync(int dev, void *s)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipStreamSynchronize", hip.hipStreamSynchronize((hipStream_t)s));
	return 0;
}

static int mem_alloc(int dev, size_t size, void **p)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipMalloc", hip.hipMalloc(p, size));
	return 0;
}

static int mem_free(int dev, void *p)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipFree", hip.hipFree(p));
	return 0;
}

static int copy_dtoh(int dev, void *dst, const void *src, size_t len)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipMemcpyDtoH", hip.hipMemcpyDtoH(dst, (hipDeviceptr_t)src, len));
	return 0;
}

static int event_create(int dev, void **e)
{
	hipEvent_t ev;
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipEventCreateWithFlags", hip.hipEventCreateWithFlags(&ev, hipEventDisableTiming));
	*e = ev;
	return 0;
}

static void event_destroy(int dev, void *e)
{
	if (!use(dev))
		hip.hipEventDestroy((hipEvent_t)e);
}

static int event_record(int dev, void *e, void *s)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipEventRecord", hip.hipEventRecord((hipEvent_t)e, (hipStream_t)s));
	return 0;
}

static int event_query(int dev, void *e)
{
	hipError_t r;
	int ret = use(dev);

	if (ret)
		return ret;
	r = hip.hipEventQuery((hipEvent_t)e);
	if (r == hipErrorNotReady)
		return 0;
	return r == hipSuccess ? 1 : fail("hipEventQuery", r);
}

static int event_sync(int dev, void *e)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("hipEventSynchronize", hip.hipEventSynchronize((hipEvent_t)e));
	return 0;
}

const struct gpu_ops gpu_hip_ops = {
	.name = name,
	.uuid = uuid,
	.bus_id = bus_id,
	.ipc_get = ipc_get,
	.copy_htod = copy_htod,
	.ipc_open = ipc_open,
	.ipc_close = ipc_close,
	.host_register = host_register,
	.host_unregister = host_unregister,
	.stream_create = stream_create,
	.stream_destroy = stream_destroy,
	.copy_async = copy_async,
	.stream_sync = stream_sync,
	.mem_alloc = mem_alloc,
	.mem_free = mem_free,
	.copy_dtoh = copy_dtoh,
	.event_create = event_create,
	.event_destroy = event_destroy,
	.event_record = event_record,
	.event_query = event_query,
	.event_sync = event_sync,
};
