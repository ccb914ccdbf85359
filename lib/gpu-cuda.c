// SPDX-License-Identifier: MIT
/* gpu-cuda.c - the CUDA driver API through dlopen("libcuda.so.1"). */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dmafs.h"
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
	X(cuCtxGetCurrent, "cuCtxGetCurrent")                            \
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

static struct gpu g_cuda = { .target = DMAFS_TARGET_CUDA };
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_ret;
static char load_why[256];
static CUcontext ctx[64];

static const char *cuerr(CUresult r)
{
	const char *s = NULL;

	if (cu.cuGetErrorString)
		cu.cuGetErrorString(r, &s);
	return s ? s : "unknown CUDA error";
}

static void load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUresult r;
	int v = 0;

	if (!h) {
		snprintf(load_why, sizeof(load_why), "libcuda.so.1 not found (no NVIDIA driver): %s", dlerror());
		load_ret = -ENODEV;
		return;
	}
#define LOAD(fn, sym)                                                                   \
	cu.fn = (__typeof__(fn) *)dlsym(h, sym);                                        \
	if (!cu.fn) {                                                                   \
		snprintf(load_why, sizeof(load_why), "libcuda.so.1 lacks %s (driver too old)", sym); \
		load_ret = -ENODEV;                                                     \
		return;                                                                 \
	}
	CU_FNS(LOAD)
#undef LOAD
	r = cu.cuInit(0);
	if (r != CUDA_SUCCESS) {
		snprintf(load_why, sizeof(load_why), "cuInit failed: %s", cuerr(r));
		load_ret = -ENODEV;
		return;
	}
	cu.cuDriverGetVersion(&v);
	snprintf(g_cuda.version, sizeof(g_cuda.version), "CUDA driver %d.%d", v / 1000, v % 1000 / 10);
	g_cuda.ops = &gpu_cuda_ops;
	if (cu.cuDeviceGetCount(&g_cuda.count) != CUDA_SUCCESS)
		g_cuda.count = 0;
	if (g_cuda.count > 64)
		g_cuda.count = 64;
}

int gpu_cuda_load(struct gpu **out, char *why, size_t whylen)
{
	pthread_once(&once, load);
	if (load_ret) {
		snprintf(why, whylen, "%s", load_why);
		return load_ret;
	}
	*out = &g_cuda;
	return 0;
}

static int fail(const char *what, CUresult r)
{
	gpu_log("CUDA %s failed: %s", what, cuerr(r));
	return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

/* Make the device's primary context (the one PyTorch uses) current in this thread. */
static int use(int dev)
{
	CUresult r;

	if (dev < 0 || dev >= g_cuda.count)
		return -ENODEV;
	if (!ctx[dev]) {
		CUdevice d;
		CUcontext c;

		r = cu.cuDeviceGet(&d, dev);
		if (r == CUDA_SUCCESS)
			r = cu.cuDevicePrimaryCtxRetain(&c, d);
		if (r != CUDA_SUCCESS)
			return fail("primary context", r);
		__atomic_store_n(&ctx[dev], c, __ATOMIC_RELEASE); /* retained twice at worst: harmless */
	}
	r = cu.cuCtxSetCurrent(ctx[dev]);
	return r == CUDA_SUCCESS ? 0 : fail("cuCtxSetCurrent", r);
}

#define CALL(what, expr)                                       \
	do {                                                   \
		CUresult r_ = (expr);                          \
		if (r_ != CUDA_SUCCESS)                        \
			return fail(what, r_);                 \
	} while (0)

static int name(int dev, char *buf, size_t len)
{
	CUdevice d;

	CALL("cuDeviceGet", cu.cuDeviceGet(&d, dev));
	CALL("cuDeviceGetName", cu.cuDeviceGetName(buf, (int)len, d));
	return 0;
}

static int uuid(int dev, uint8_t out[16])
{
	CUdevice d;
	CUuuid u;

	CALL("cuDeviceGet", cu.cuDeviceGet(&d, dev));
	CALL("cuDeviceGetUuid", cu.cuDeviceGetUuid(&u, d));
	memcpy(out, u.bytes, 16);
	return 0;
}

static int bus_id(int dev, char *buf, size_t len)
{
	CUdevice d;

	CALL("cuDeviceGet", cu.cuDeviceGet(&d, dev));
	CALL("cuDeviceGetPCIBusId", cu.cuDeviceGetPCIBusId(buf, (int)len, d));
	return 0;
}

static int ipc_get(int dev, void *ptr, size_t size, uint8_t handle[64], uint64_t *offset)
{
	CUdeviceptr base;
	size_t len;
	CUipcMemHandle h;
	int ret = use(dev);

	if (ret)
		return ret;
	if (cu.cuMemGetAddressRange(&base, &len, (CUdeviceptr)ptr) != CUDA_SUCCESS)
		return -EINVAL; /* not device memory of this device */
	if ((CUdeviceptr)ptr + size > base + len)
		return -EINVAL;
	CALL("cuIpcGetMemHandle", cu.cuIpcGetMemHandle(&h, base));
	memcpy(handle, h.reserved, 64);
	*offset = (CUdeviceptr)ptr - base;
	return 0;
}

static int copy_htod(int dev, void *dst, const void *src, size_t len)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuMemcpyHtoD", cu.cuMemcpyHtoD((CUdeviceptr)dst, src, len));
	return 0;
}

static int ipc_open(int dev, const uint8_t handle[64], void **base, size_t *len)
{
	CUipcMemHandle h;
	CUdeviceptr p, b;
	CUresult r;
	int ret = use(dev);

	if (ret)
		return ret;
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

static int ipc_close(int dev, void *base)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuIpcCloseMemHandle", cu.cuIpcCloseMemHandle((CUdeviceptr)base));
	return 0;
}

static int host_register(int dev, void *p, size_t len)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuMemHostRegister", cu.cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE));
	return 0;
}

static int host_unregister(int dev, void *p)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuMemHostUnregister", cu.cuMemHostUnregister(p));
	return 0;
}

static int stream_create(int dev, void **s)
{
	CUstream st;
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuStreamCreate", cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	*s = st;
	return 0;
}

static void stream_destroy(int dev, void *s)
{
	if (!use(dev))
		cu.cuStreamDestroy((CUstream)s);
}

static int copy_async(int dev, void *dst, const void *src, size_t len, void *s)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuMemcpyHtoDAsync", cu.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, len, (CUstream)s));
	return 0;
}

static int stream_sync(int dev, void *s)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuStreamSynchronize", cu.cuStreamSynchronize((CUstream)s));
	return 0;
}

static int mem_alloc(int dev, size_t size, void **p)
{
	CUdeviceptr d;
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuMemAlloc", cu.cuMemAlloc(&d, size));
	*p = (void *)d;
	return 0;
}

static int mem_free(int dev, void *p)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuMemFree", cu.cuMemFree((CUdeviceptr)p));
	return 0;
}

static int copy_dtoh(int dev, void *dst, const void *src, size_t len)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuMemcpyDtoH", cu.cuMemcpyDtoH(dst, (CUdeviceptr)src, len));
	return 0;
}

static int event_create(int dev, void **e)
{
	CUevent ev;
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuEventCreate", cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	*e = ev;
	return 0;
}

static void event_destroy(int dev, void *e)
{
	if (!use(dev))
		cu.cuEventDestroy((CUevent)e);
}

static int event_record(int dev, void *e, void *s)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuEventRecord", cu.cuEventRecord((CUevent)e, (CUstream)s));
	return 0;
}

static int event_query(int dev, void *e)
{
	CUresult r;
	int ret = use(dev);

	if (ret)
		return ret;
	r = cu.cuEventQuery((CUevent)e);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	return r == CUDA_SUCCESS ? 1 : fail("cuEventQuery", r);
}

static int event_sync(int dev, void *e)
{
	int ret = use(dev);

	if (ret)
		return ret;
	CALL("cuEventSynchronize", cu.cuEventSynchronize((CUevent)e));
	return 0;
}

const struct gpu_ops gpu_cuda_ops = {
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
