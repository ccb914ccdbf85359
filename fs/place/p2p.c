// SPDX-License-Identifier: MIT
/*
 * p2p.c - the direct path: cuFile (GPUDirect Storage) reads from the members straight into
 * registered GPU memory. libcufile.so.0 is loaded with dlopen; the few declarations we use
 * are written out below (the ABI of cufile.h, which need not be installed to build).
 *
 * Used only when the platform really does peer-to-peer DMA: nvidia-fs loaded. Otherwise
 * cuFile would run in "compatibility mode", a host bounce slower than the staged path, so
 * placements stay staged and INFO says why. The mount option p2p=force uses cuFile even
 * then; it exists to test this code on machines without nvidia-fs.
 */
#include "place/p2p.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* From cufile.h (stable since GDS 1.0). */
typedef struct {
	int err;    /* CUfileOpError, 0 = CU_FILE_SUCCESS */
	int cu_err; /* CUresult */
} cufile_err_t;
typedef struct {
	int type; /* CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1 */
	union {
		int fd;
		void *handle;
	} handle;
	const void *fs_ops;
} cufile_descr_t;
typedef void *cufile_handle_t;

static struct {
	cufile_err_t (*driver_open)(void);
	cufile_err_t (*handle_register)(cufile_handle_t *, cufile_descr_t *);
	void (*handle_deregister)(cufile_handle_t);
	cufile_err_t (*buf_register)(const void *, size_t, int);
	cufile_err_t (*buf_deregister)(const void *);
	ssize_t (*read)(cufile_handle_t, void *, size_t, off_t, off_t);
} cf;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int mode_force;
static int usable;		/* 1: drive cuFile */
static char why[256];
static cufile_handle_t handles[FMT_MAX_MEMBERS]; /* protected by lock */
static int registered[FMT_MAX_MEMBERS];

void p2p_configure(int force) { mode_force = force; }

static void probe(void)
{
	void *h = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
	int direct = access("/proc/driver/nvidia-fs/version", F_OK) == 0;
	cufile_err_t e;

	if (mode_force < 0) {
		snprintf(why, sizeof(why), "p2p disabled by the mount option p2p=off");
		if (h)
			dlclose(h);
		return;
	}
	if (!h) {
		snprintf(why, sizeof(why), "p2p unavailable: libcufile.so.0 (GPUDirect Storage) not installed");
		return;
	}
	cf.driver_open = dlsym(h, "cuFileDriverOpen");
	cf.handle_register = dlsym(h, "cuFileHandleRegister");
	cf.handle_deregister = dlsym(h, "cuFileHandleDeregister");
	cf.buf_register = dlsym(h, "cuFileBufRegister");
	cf.buf_deregister = dlsym(h, "cuFileBufDeregister");
	cf.read = dlsym(h, "cuFileRead");
	if (!cf.driver_open || !cf.handle_register || !cf.handle_deregister || !cf.buf_register ||
	    !cf.buf_deregister || !cf.read) {
		snprintf(why, sizeof(why), "p2p unavailable: libcufile.so.0 lacks the cuFile read API");
		return;
	}
	if (!direct && !mode_force) {
		snprintf(why, sizeof(why), "p2p unavailable: cuFile present but nvidia-fs is not loaded, so cuFile would only bounce through host memory (compatibility mode); the staged path is used instead");
		return;
	}
	e = cf.driver_open();
	if (e.err) {
		snprintf(why, sizeof(why), "p2p unavailable: cuFileDriverOpen failed (cuFile error %d, CUDA error %d)", e.err, e.cu_err);
		return;
	}
	usable = 1;
	snprintf(why, sizeof(why), direct ? "p2p: cuFile with nvidia-fs (direct DMA from the members)"
					  : "p2p forced by p2p=force: cuFile in compatibility mode (NOT direct: a host bounce inside cuFile)");
}

int p2p_usable(char *out, size_t len)
{
	pthread_once(&once, probe);
	if (out)
		snprintf(out, len, "%s", why);
	return usable;
}

int p2p_member(struct member *m, unsigned idx)
{
	cufile_descr_t d;
	cufile_err_t e;
	int ret = 0;

	pthread_mutex_lock(&lock);
	if (!registered[idx]) {
		memset(&d, 0, sizeof(d));
		d.type = 1;
		d.handle.fd = m->fd;
		e = cf.handle_register(&handles[idx], &d);
		if (e.err) {
			log_warn("cuFileHandleRegister on member %u (%s) failed (cuFile error %d); placements use the staged path",
				 idx, m->path, e.err);
			ret = -ENOTSUP;
		} else {
			registered[idx] = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

int p2p_buf_register(void *base, size_t len)
{
	cufile_err_t e = cf.buf_register(base, len, 0);

	/* not fatal: unregistered buffers still work, through cuFile's own bounce buffers */
	if (e.err)
		log_info("cuFileBufRegister failed (cuFile error %d); reads into this buffer are slower", e.err);
	return e.err ? -EIO : 0;
}

void p2p_buf_deregister(void *base) { cf.buf_deregister(base); }

ssize_t p2p_read(unsigned member, void *base, size_t len, uint64_t moff, uint64_t boff)
{
	ssize_t n = cf.read(handles[member], base, len, (off_t)moff, (off_t)boff);

	return n < 0 ? -EIO : n;
}
