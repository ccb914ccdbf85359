// SPDX-License-Identifier: MIT
/* gpu-cuda.c - the CUDA driver API through dlopen("libcuda.so.1") (gpu-impl.h). */
#include <cuda.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu-impl.h"

/* Function pointers typed from cuda.h; the symbols are the versioned ones the header's
 * macros name (cuMemcpyHtoDAsync -> cuMemcpyHtoDAsync_v2, ...). */
#define CU_FNS(X)                                                        \
	X(cuInit, "cuInit")                                              \
	X(cuDriverGetVersion, "cuDriverGetVersion")                      \
	X(cuGetErrorString, "cuGetErrorString")                          \
	X(cuDeviceGetCount, "cuDeviceGetCount")                          \
	X(cuDeviceGet, "cuDeviceGet")                                    \
	X(cuDeviceGetName, "cuDeviceGetName")                            \
	X(cuDeviceGetUuid, "cuDeviceGetUuid_v2")                         \
	X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId")                    \
	X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")          \
	X(cuCtxSetCurrent, "cuCtxSetCurrent")                            \
	X(cuMemGetAddressRange, "cuMemGetAddressRange_v2")               \
	X(cuIpcGetMemHandle, "cuIpcGetMemHandle")                        \
	X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2")                   \
	X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle")                    \
	X(cuMemHostRegister, "cuMemHostRegister_v2")                     \
	X(cuMemHostUnregister, "cuMemHostUnregister")                    \
	X(cuStreamCreate, "cuStreamCreate")                              \
	X(cuStreamDestroy, "cuStreamDestroy_v2")                         \
	X(cuStreamSynchronize, "cuStreamSynchronize")                    \
	X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                     \
	X(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2")                         \
	X(cuMemcpyHtoD, "cuMemcpyHtoD_v2")                               \
	X(cuMemAlloc, "cuMemAlloc_v2")                                   \
	X(cuMemFree, "cuMemFree_v2")                                     \
	X(cuMemcpyDtoH, "cuMemcpyDtoH_v2")                               \
	X(cuEventCreate, "cuEventCreate")                                \
	X(cuEventDestroy, "cuEventDestroy_v2")                           \
	X(cuEventRecord, "cuEventRecord")                                \
	X(cuEventQuery, "cuEventQuery")                                  \
	X(cuEventSynchronize, "cuEventSynchronize")

static struct {
#define DECL(fn, sym) __typeof__(fn) *fn;
	CU_FNS(DECL)
#undef DECL
} cu;

static const struct gpu_sym syms[] = {
#define SYM(fn, sym) { sym, (void **)&cu.fn },
	CU_FNS(SYM)
#undef SYM
	{ NULL, NULL },
};

/* Primary contexts by ordinal, retained at first use and kept for the process's life. */
static CUcontext ctx[GPU_DEV_MAX];

static const char *cuerr(CUresult r)
{
	const char *s = NULL;

	if (cu.cuGetErrorString)
		cu.cuGetErrorString(r, &s);
	return s ? s : "unknown CUDA error";
}

/* 0, or -ENOMEM / -EIO for a failed call @what, logged. */
static int check(const char *what, CUresult r)
{
	if (r == CUDA_SUCCESS)
		return 0;
	gpu_log("CUDA %s failed: %s", what, cuerr(r));
	return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

/* Runtime call @fn with its arguments, checked under its own name. */
#define CALL(fn, ...) check(#fn, cu.fn(__VA_ARGS__))

static int start(char *version, size_t vlen, char *why, size_t whylen)
{
	CUresult r = cu.cuInit(0);
	int v = 0, n = 0;

	if (r != CUDA_SUCCESS) {
		snprintf(why, whylen, "cuInit failed: %s", cuerr(r));
		return -ENODEV;
	}
	cu.cuDriverGetVersion(&v);
	snprintf(version, vlen, "CUDA driver %d.%d", v / 1000, v % 1000 / 10);
	return cu.cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}

/* Make the device's primary context (the one PyTorch uses) current in this thread. */
static int use(int dev)
{
	if (!ctx[dev]) {
		CUdevice d;
		CUcontext c;
		int ret = CALL(cuDeviceGet, &d, dev);

		if (!ret)
			ret = CALL(cuDevicePrimaryCtxRetain, &c, d);
		if (ret)
			return ret;
		__atomic_store_n(&ctx[dev], c, __ATOMIC_RELEASE); /* retained twice at worst: harmless */
	}
	return CALL(cuCtxSetCurrent, ctx[dev]);
}

static int name(int dev, char *buf, size_t len)
{
	CUdevice d;
	int ret = CALL(cuDeviceGet, &d, dev);

	return ret ? ret : CALL(cuDeviceGetName, buf, (int)len, d);
}

static int uuid(int dev, uint8_t out[16])
{
	CUdevice d;
	CUuuid u;
	int ret = CALL(cuDeviceGet, &d, dev);

	if (!ret)
		ret = CALL(cuDeviceGetUuid, &u, d);
	if (!ret)
		memcpy(out, u.bytes, 16);
	return ret;
}

static int bus_id(int dev, char *buf, size_t len)
{
	CUdevice d;
	int ret = CALL(cuDeviceGet, &d, dev);

	return ret ? ret : CALL(cuDeviceGetPCIBusId, buf, (int)len, d);
}

static int ipc_get(void *ptr, size_t size, uint8_t handle[64], uint64_t *offset)
{
	CUdeviceptr base;
	size_t len;
	CUipcMemHandle h;
	int ret;

	if (cu.cuMemGetAddressRange(&base, &len, (CUdeviceptr)ptr) != CUDA_SUCCESS)
		return -EINVAL; /* not device memory of this device */
	if ((CUdeviceptr)ptr + size > base + len)
		return -EINVAL;
	ret = CALL(cuIpcGetMemHandle, &h, base);
	if (ret)
		return ret;
	memcpy(handle, h.reserved, 64);
	*offset = (CUdeviceptr)ptr - base;
	return 0;
}

static int copy_htod(void *dst, const void *src, size_t len)
{
	return CALL(cuMemcpyHtoD, (CUdeviceptr)dst, src, len);
}

static int ipc_open(const uint8_t handle[64], void **base, size_t *len)
{
	CUipcMemHandle h;
	CUdeviceptr p, b;
	CUresult r;

	memcpy(h.reserved, handle, 64);
	r = cu.cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (r != CUDA_SUCCESS) {
		gpu_log("cuIpcOpenMemHandle failed: %s", cuerr(r));
		return -ENXIO;
	}
	if (cu.cuMemGetAddressRange(&b, len, p) != CUDA_SUCCESS || b != p) {
		cu.cuIpcCloseMemHandle(p);
		return -ENXIO;
	}
	*base = (void *)p;
	return 0;
}

static int ipc_close(void *base)
{
	return CALL(cuIpcCloseMemHandle, (CUdeviceptr)base);
}

static int host_register(void *p, size_t len)
{
	return CALL(cuMemHostRegister, p, len, CU_MEMHOSTREGISTER_PORTABLE);
}

static int host_unregister(void *p)
{
	return CALL(cuMemHostUnregister, p);
}

static int stream_create(void **s)
{
	CUstream st;
	int ret = CALL(cuStreamCreate, &st, CU_STREAM_NON_BLOCKING);

	if (!ret)
		*s = st;
	return ret;
}

static void stream_destroy(void *s)
{
	cu.cuStreamDestroy((CUstream)s);
}

static int copy_async(void *dst, const void *src, size_t len, void *s)
{
	return CALL(cuMemcpyHtoDAsync, (CUdeviceptr)dst, src, len, (CUstream)s);
}

static int copy_2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			 size_t height, void *s)
{
	CUDA_MEMCPY2D c = {
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = spitch,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = (CUdeviceptr)dst,
		.dstPitch = dpitch, .WidthInBytes = width, .Height = height,
	};

	return CALL(cuMemcpy2DAsync, &c, (CUstream)s);
}

static int stream_sync(void *s)
{
	return CALL(cuStreamSynchronize, (CUstream)s);
}

static int mem_alloc(size_t size, void **p)
{
	CUdeviceptr d;
	int ret = CALL(cuMemAlloc, &d, size);

	if (!ret)
		*p = (void *)d;
	return ret;
}

static int mem_free(void *p)
{
	return CALL(cuMemFree, (CUdeviceptr)p);
}

static int copy_dtoh(void *dst, const void *src, size_t len)
{
	return CALL(cuMemcpyDtoH, dst, (CUdeviceptr)src, len);
}

static int event_create(void **e)
{
	CUevent ev;
	int ret = CALL(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING);

	if (!ret)
		*e = ev;
	return ret;
}

static void event_destroy(void *e)
{
	cu.cuEventDestroy((CUevent)e);
}

static int event_record(void *e, void *s)
{
	return CALL(cuEventRecord, (CUevent)e, (CUstream)s);
}

static int event_query(void *e)
{
	CUresult r = cu.cuEventQuery((CUevent)e);

	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	return r == CUDA_SUCCESS ? 1 : check("cuEventQuery", r);
}

static int event_sync(void *e)
{
	return CALL(cuEventSynchronize, (CUevent)e);
}

static const struct gpu_ops ops = { GPU_OPS(GPU_OP) };

const struct gpu_runtime gpu_cuda = {
	.libs = (const char *const[]){ "libcuda.so.1", NULL },
	.missing = "no NVIDIA driver",
	.too_old = "driver too old",
	.syms = syms,
	.start = start,
	.ops = &ops,
};
