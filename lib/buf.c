// SPDX-License-Identifier: MIT
/*
 * buf.c - dmafs_buf_*: register CUDA, HIP and shared host buffers with the daemon, and
 * keep what the posix fallback needs (the pointer itself) for sessions off dmafs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libdmafs-int.h"

static struct dmafs_buf *buf_new(struct dmafs_session *s, int target, size_t size)
{
	struct dmafs_buf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->s = s;
	b->target = target;
	b->size = size;
	b->device = -1;
	b->path_hint = session_target_path(s, target);
	return b;
}

static int reg_gpu(struct dmafs_session *s, int target, void *devptr, size_t size, int device,
		   struct dmafs_buf **out)
{
	struct dmafs_ioc_register r;
	struct dmafs_buf *b;
	struct gpu *g;
	char why[256];
	int ret;

	if (!s || !out || !devptr || !size)
		return -EINVAL;
	if (gpu_load(target, &g, why, sizeof(why)))
		return -ENODEV; /* why: set DMAFS_DEBUG=1, or run dmafs-check */
	if (device < 0 || device >= gpu_count(g))
		return -ENODEV;
	b = buf_new(s, target, size);
	if (!b)
		return -ENOMEM;
	b->ptr = devptr;
	b->device = device;
	b->gpu = g;
	if (s->on_dmafs) {
		memset(&r, 0, sizeof(r));
		r.target = (uint32_t)target;
		r.size = size;
		r.fd = -1;
		ret = gpu_ipc_get(g, device, devptr, size, r.handle, &r.offset);
		if (!ret)
			ret = gpu_device_uuid(g, device, r.uuid);
		if (!ret)
			ret = session_ioctl(s, DMAFS_IOC_REGISTER, &r);
		if (ret) {
			free(b);
			/* gpu_* failures other than "not device memory" are the runtime's. */
			return ret == -EIO ? -ENODEV : ret;
		}
		b->id = r.id;
		b->registered = 1;
	}
	session_link(s, b);
	*out = b;
	return 0;
}

int dmafs_buf_register_cuda(struct dmafs_session *s, void *devptr, size_t size, int device,
			    struct dmafs_buf **out)
{
	return reg_gpu(s, DMAFS_TARGET_CUDA, devptr, size, device, out);
}

int dmafs_buf_register_hip(struct dmafs_session *s, void *devptr, size_t size, int device,
			   struct dmafs_buf **out)
{
	return reg_gpu(s, DMAFS_TARGET_HIP, devptr, size, device, out);
}

int dmafs_buf_alloc_host(struct dmafs_session *s, size_t size, struct dmafs_buf **out)
{
	struct dmafs_ioc_register r;
	struct dmafs_buf *b;
	struct hostmem m;
	int ret;

	if (!s || !out || !size)
		return -EINVAL;
	/* Every page present before the first placement: the daemon's O_DIRECT reads would
	 * otherwise allocate and zero them inside it, much slower than into present pages,
	 * and a buffer is registered once to be placed into many times. */
	ret = hostmem_alloc(size, &m);
	if (ret)
		return ret;
	b = buf_new(s, DMAFS_TARGET_HOST, size);
	if (!b) {
		munmap(m.ptr, m.len);
		close(m.fd);
		return -ENOMEM;
	}
	b->ptr = m.ptr;
	b->map_len = m.len;
	if (s->on_dmafs) {
		/* The daemon opens /proc/<our pid>/fd/<fd> during the ioctl and maps it; after
		 * that our descriptor is not needed, the mapping keeps the memory alive. */
		memset(&r, 0, sizeof(r));
		r.target = DMAFS_TARGET_HOST;
		/* Huge pages: register all of them, so that the daemon maps and unmaps whole
		 * huge pages even where it does not round the length up itself (earlier
		 * daemons did not, and their munmap of a partial huge page failed). */
		r.size = m.huge ? m.len : size;
		r.offset = 0;
		r.fd = m.fd;
		r.device = -1;
		ret = session_ioctl(s, DMAFS_IOC_REGISTER, &r);
		if (ret) {
			munmap(m.ptr, m.len);
			close(m.fd);
			free(b);
			return ret;
		}
		b->id = r.id;
		b->registered = 1;
	}
	close(m.fd);
	session_link(s, b);
	*out = b;
	return 0;
}

void *dmafs_buf_ptr(const struct dmafs_buf *b) { return b ? b->ptr : NULL; }
size_t dmafs_buf_size(const struct dmafs_buf *b) { return b ? b->size : 0; }
int dmafs_buf_target(const struct dmafs_buf *b) { return b ? b->target : -EINVAL; }

uint64_t dmafs_buf_placed(const struct dmafs_buf *b)
{
	return b ? __atomic_load_n(&b->placed, __ATOMIC_RELAXED) : 0;
}

uint64_t dmafs_buf_tier_bytes(const struct dmafs_buf *b)
{
	return b ? __atomic_load_n(&b->tier_bytes, __ATOMIC_RELAXED) : 0;
}

int buf_enter(struct dmafs_buf *b)
{
	unsigned old = __atomic_fetch_add(&b->busy, 1, __ATOMIC_ACQUIRE);

	if (old & BUF_DEAD) {
		__atomic_fetch_sub(&b->busy, 1, __ATOMIC_RELEASE);
		return -EBUSY;
	}
	return 0;
}

void buf_leave(struct dmafs_buf *b, uint64_t placed)
{
	if (placed)
		__atomic_fetch_add(&b->placed, placed, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&b->busy, 1, __ATOMIC_RELEASE);
}

int buf_release(struct dmafs_buf *b, int force)
{
	struct dmafs_ioc_unregister u;
	unsigned zero = 0;
	int ret = 0;

	/* Claim the buffer: from here on buf_enter() refuses new placements. */
	if (!__atomic_compare_exchange_n(&b->busy, &zero, BUF_DEAD, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		if (!force)
			return -EBUSY;
		__atomic_fetch_or(&b->busy, BUF_DEAD, __ATOMIC_ACQ_REL);
	}
	if (b->registered) {
		u.id = b->id;
		ret = session_ioctl(b->s, DMAFS_IOC_UNREGISTER, &u);
		if (ret == -EBUSY && !force) {
			__atomic_fetch_and(&b->busy, ~BUF_DEAD, __ATOMIC_ACQ_REL);
			return ret;
		}
		/* Gone already (the daemon's -ENOENT: an unknown id) or the daemon is gone
		 * (-ENOTCONN): the registration ended with it. Either way nothing is left to
		 * undo on our side. */
		if (ret == -ENOENT || ret == -ENOTCONN)
			ret = 0;
	}
	session_unlink(b->s, b);
	if (b->target == DMAFS_TARGET_HOST && b->ptr)
		munmap(b->ptr, b->map_len);
	free(b);
	return ret;
}

int dmafs_buf_unregister(struct dmafs_buf *b)
{
	if (!b)
		return -EINVAL;
	return buf_release(b, 0);
}
