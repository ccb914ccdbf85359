// SPDX-License-Identifier: MIT
/*
 * p2p.c - the direct path: cuFile (GPUDirect Storage) reads from the members straight into
 * registered GPU memory. libcufile.so.0 is loaded with dlopen; the few declarations we use
 * are written out below (the ABI of cufile.h, which need not be installed to build).
 *
 * Used only when the platform really does peer-to-peer DMA: nvidia-fs loaded. Otherwise
 * cuFile would run in "compatibility mode", a host bounce inside cuFile, so placements
 * stay staged and INFO says P->why. The mount option p2p=force uses cuFile even
 * then; it exists to test this code on machines without nvidia-fs, and its placements
 * report DMAFS_PATH_P2P_COMPAT, not P2P: the path is never named for what it is not.
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

/* The cuFile driver as one mount uses it (p2p.h). */
struct p2p {
	struct {
		cufile_err_t (*driver_open)(void);
		cufile_err_t (*handle_register)(cufile_handle_t *, cufile_descr_t *);
		void (*handle_deregister)(cufile_handle_t);
		cufile_err_t (*buf_register)(const void *, size_t, int);
		cufile_err_t (*buf_deregister)(const void *);
		ssize_t (*read)(cufile_handle_t, void *, size_t, off_t, off_t);
	} cf;
	pthread_mutex_t lock;
	int probed;		/* protected by lock */
	int mode_force;
	int usable;		/* 1: drive cuFile */
	int compat;		/* usable, but only in compatibility mode (no nvidia-fs) */
	char why[256];
	cufile_handle_t handles[FMT_MAX_MEMBERS]; /* protected by lock */
	int registered[FMT_MAX_MEMBERS];
};

struct p2p *p2p_new(int force)
{
	struct p2p *P = calloc(1, sizeof(*P));

	if (P) {
		pthread_mutex_init(&P->lock, NULL);
		P->mode_force = force;
	}
	return P;
}

static void probe(struct p2p *P)
{
	void *h = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
	int direct = access("/proc/driver/nvidia-fs/version", F_OK) == 0;
	cufile_err_t e;

	if (P->mode_force < 0) {
		snprintf(P->why, sizeof(P->why), "p2p disabled by the mount option p2p=off");
		if (h)
			dlclose(h);
		return;
	}
	if (!h) {
		snprintf(P->why, sizeof(P->why), "p2p unavailable: libcufile.so.0 (GPUDirect Storage) not installed");
		return;
	}
	P->cf.driver_open = dlsym(h, "cuFileDriverOpen");
	P->cf.handle_register = dlsym(h, "cuFileHandleRegister");
	P->cf.handle_deregister = dlsym(h, "cuFileHandleDeregister");
	P->cf.buf_register = dlsym(h, "cuFileBufRegister");
	P->cf.buf_deregister = dlsym(h, "cuFileBufDeregister");
	P->cf.read = dlsym(h, "cuFileRead");
	if (!P->cf.driver_open || !P->cf.handle_register || !P->cf.handle_deregister || !P->cf.buf_register ||
	    !P->cf.buf_deregister || !P->cf.read) {
		snprintf(P->why, sizeof(P->why), "p2p unavailable: libcufile.so.0 lacks the cuFile read API");
		return;
	}
	if (!direct && !P->mode_force) {
		snprintf(P->why, sizeof(P->why), "p2p unavailable: no nvidia-fs for direct DMA (or P2PDMA); cuFile would only bounce through host memory");
		return;
	}
	e = P->cf.driver_open();
	if (e.err) {
		snprintf(P->why, sizeof(P->why), "p2p unavailable: cuFileDriverOpen failed (cuFile error %d, CUDA error %d)", e.err, e.cu_err);
		return;
	}
	P->usable = 1;
	P->compat = !direct;
	snprintf(P->why, sizeof(P->why), direct ? "p2p: cuFile with nvidia-fs (direct DMA from the members)"
					  : "p2p forced by p2p=force: cuFile compatibility mode, NOT direct (direct DMA needs nvidia-fs or P2PDMA)");
}

int p2p_usable(struct p2p *P, char *out, size_t len)
{
	if (!P) {
		if (out)
			snprintf(out, len, "p2p unavailable: out of memory");
		return 0;
	}
	pthread_mutex_lock(&P->lock);
	if (!P->probed) {
		probe(P);
		P->probed = 1;
	}
	pthread_mutex_unlock(&P->lock);
	if (out)
		snprintf(out, len, "%s", P->why);
	return P->usable;
}

int p2p_compat(struct p2p *P)
{
	int c;

	if (!P)
		return 0;
	pthread_mutex_lock(&P->lock);
	c = P->usable && P->compat;
	pthread_mutex_unlock(&P->lock);
	return c;
}

int p2p_member(struct p2p *P, struct member *m, unsigned idx)
{
	cufile_descr_t d;
	cufile_err_t e;
	int ret = 0;

	pthread_mutex_lock(&P->lock);
	if (!P->registered[idx]) {
		memset(&d, 0, sizeof(d));
		d.type = 1;
		d.handle.fd = m->fd;
		e = P->cf.handle_register(&P->handles[idx], &d);
		if (e.err) {
			log_warn("cuFileHandleRegister on member %u (%s) failed (cuFile error %d); placements use the staged path",
				 idx, m->path, e.err);
			ret = -ENOTSUP;
		} else {
			P->registered[idx] = 1;
		}
	}
	pthread_mutex_unlock(&P->lock);
	return ret;
}

int p2p_buf_register(struct p2p *P, void *base, size_t len)
{
	cufile_err_t e = P->cf.buf_register(base, len, 0);

	/* not fatal: unregistered buffers still work, through cuFile's own bounce buffers */
	if (e.err)
		log_info("cuFileBufRegister failed (cuFile error %d); reads into this buffer are slower", e.err);
	return e.err ? -EIO : 0;
}

void p2p_buf_deregister(struct p2p *P, void *base) { P->cf.buf_deregister(base); }

ssize_t p2p_read(struct p2p *P, unsigned member, void *base, size_t len, uint64_t moff, uint64_t boff)
{
	ssize_t n = P->cf.read(P->handles[member], base, len, (off_t)moff, (off_t)boff);

	return n < 0 ? -EIO : n;
}
