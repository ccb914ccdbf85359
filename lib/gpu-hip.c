// SPDX-License-Identifier: MIT
/* gpu-hip.c - the HIP runtime through dlopen("libamdhip64.so") (gpu-impl.h). Untested on
 * AMD hardware by the project's CI (no GPU there); mirrors gpu-cuda.c call for call. */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <errno.h>
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <string.h>

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
	X(hipMemcpy2DAsync)                          \
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

static const struct gpu_sym syms[] = {
#define SYM(fn) { #fn, (void **)&hip.fn },
	HIP_FNS(SYM)
#undef SYM
	{ NULL, NULL },
};

static const char *hiperr(hipError_t r)
{
	const char *s = hip.hipGetErrorString ? hip.hipGetErrorString(r) : NULL;

	return s ? s : "unknown HIP error";
}

/* 0, or -ENOMEM / -EIO for a failed call @what, logged. */
static int check(const char *what, hipError_t r)
{
	if (r == hipSuccess)
		return 0;
	gpu_log("HIP %s failed: %s", what, hiperr(r));
	return r == hipErrorOutOfMemory ? -ENOMEM : -EIO;
}

/* Runtime call @fn with its arguments, checked under its own name. */
#define CALL(fn, ...) check(#fn, hip.fn(__VA_ARGS__))

static int start(char *version, size_t vlen, char *why, size_t whylen)
{
	hipError_t r = hip.hipInit(0);
	int v = 0, n = 0;

	if (r != hipSuccess) {
		snprintf(why, whylen, "hipInit failed: %s", hiperr(r));
		return -ENODEV;
	}
	hip.hipRuntimeGetVersion(&v);
	snprintf(version, vlen, "HIP runtime %d", v);
	return hip.hipGetDeviceCount(&n) == hipSuccess ? n : 0;
}

/* HIP keeps a current device per thread. */
static int use(int dev)
{
	return CALL(hipSetDevice, dev);
}

static int name(int dev, char *buf, size_t len)
{
	return CALL(hipDeviceGetName, buf, (int)len, dev);
}

static int uuid(int dev, uint8_t out[16])
{
	hipUUID u;
	int ret = CALL(hipDeviceGetUuid, &u, dev);

	if (!ret)
		memcpy(out, u.bytes, 16);
	return ret;
}

static int bus_id(int dev, char *buf, size_t len)
{
	return CALL(hipDeviceGetPCIBusId, buf, (int)len, dev);
}

static int ipc_get(void *ptr, size_t size, uint8_t handle[64], uint64_t *offset)
{
	hipDeviceptr_t base;
	size_t len;
	hipIpcMemHandle_t h;
	int ret;

	if (hip.hipMemGetAddressRange(&base, &len, ptr) != hipSuccess)
		return -EINVAL; /* not device memory of this device */
	if ((char *)ptr + size > (char *)base + len)
		return -EINVAL;
	ret = CALL(hipIpcGetMemHandle, &h, base);
	if (ret)
		return ret;
	_Static_assert(sizeof(h) == 64, "hipIpcMemHandle_t is 64 bytes");
	memcpy(handle, &h, 64);
	*offset = (uint64_t)((char *)ptr - (char *)base);
	return 0;
}

static int copy_htod(void *dst, const void *src, size_t len)
{
	return CALL(hipMemcpyHtoD, dst, (void *)src, len);
}

static int ipc_open(const uint8_t handle[64], void **base, size_t *len)
{
	hipIpcMemHandle_t h;
	hipDeviceptr_t b;
	hipError_t r;

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

static int ipc_close(void *base)
{
	return CALL(hipIpcCloseMemHandle, base);
}

static int host_register(void *p, size_t len)
{
	return CALL(hipHostRegister, p, len, hipHostRegisterPortable);
}

static int host_unregister(void *p)
{
	return CALL(hipHostUnregister, p);
}

static int stream_create(void **s)
{
	hipStream_t st;
	int ret = CALL(hipStreamCreateWithFlags, &st, hipStreamNonBlocking);

	if (!ret)
		*s = st;
	return ret;
}

static void stream_destroy(void *s)
{
	hip.hipStreamDestroy((hipStream_t)s);
}

static int copy_async(void *dst, const void *src, size_t len, void *s)
{
	return CALL(hipMemcpyHtoDAsync, dst, (void *)src, len, (hipStream_t)s);
}

static int copy_2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			 size_t height, void *s)
{
	return CALL(hipMemcpy2DAsync, dst, dpitch, src, spitch, width, height,
		    hipMemcpyHostToDevice, (hipStream_t)s);
}

static int stream_sync(void *s)
{
	return CALL(hipStreamSynchronize, (hipStream_t)s);
}

static int mem_alloc(size_t size, void **p)
{
	return CALL(hipMalloc, p, size);
}

static int mem_free(void *p)
{
	return CALL(hipFree, p);
}

static int copy_dtoh(void *dst, const void *src, size_t len)
{
	return CALL(hipMemcpyDtoH, dst, (hipDeviceptr_t)src, len);
}

static int event_create(void **e)
{
	hipEvent_t ev;
	int ret = CALL(hipEventCreateWithFlags, &ev, hipEventDisableTiming);

	if (!ret)
		*e = ev;
	return ret;
}

static void event_destroy(void *e)
{
	hip.hipEventDestroy((hipEvent_t)e);
}

static int event_record(void *e, void *s)
{
	return CALL(hipEventRecord, (hipEvent_t)e, (hipStream_t)s);
}

static int event_query(void *e)
{
	hipError_t r = hip.hipEventQuery((hipEvent_t)e);

	if (r == hipErrorNotReady)
		return 0;
	return r == hipSuccess ? 1 : check("hipEventQuery", r);
}

static int event_sync(void *e)
{
	return CALL(hipEventSynchronize, (hipEvent_t)e);
}

static const struct gpu_ops ops = { GPU_OPS(GPU_OP) };

/* Sonames: the unversioned link of a -dev package, else ROCm 6's or 5's runtime. */
const struct gpu_runtime gpu_hip = {
	.libs = (const char *const[]){ "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", NULL },
	.missing = "no ROCm/HIP runtime",
	.too_old = "runtime too old",
	.syms = syms,
	.start = start,
	.ops = &ops,
};
