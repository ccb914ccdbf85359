/* SPDX-License-Identifier: MIT */
/* p2p.h - cuFile (GPUDirect Storage) reads from members into GPU memory; see p2p.c. */
#ifndef DMAFS_P2P_H
#define DMAFS_P2P_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "io/member.h"

/* The cuFile driver as one mount uses it (p2p.c). */
struct p2p;

/* @force (mount option p2p=): 1 force, use cuFile even without nvidia-fs (testing); -1
 * off; 0 auto. The driver is probed at the first p2p_usable(). NULL: no memory. */
struct p2p *p2p_new(int force);
/* Is the direct path usable? @why (may be NULL) gets the reason either way. */
int p2p_usable(struct p2p *P, char *why, size_t len);
/*
 * Is cuFile, where usable, in compatibility mode: forced (p2p=force) without nvidia-fs,
 * so that it bounces through host memory instead of DMA into the GPU? Placements then
 * report DMAFS_PATH_P2P_COMPAT. 0 before the first p2p_usable().
 */
int p2p_compat(struct p2p *P);
/* Register member @idx with cuFile (once). Returns 0 or -ENOTSUP. */
int p2p_member(struct p2p *P, struct member *m, unsigned idx);
int p2p_buf_register(struct p2p *P, void *base, size_t len);
void p2p_buf_deregister(struct p2p *P, void *base);
/* Read @len bytes at member offset @moff into base + boff. Returns bytes or -EIO. */
ssize_t p2p_read(struct p2p *P, unsigned member, void *base, size_t len, uint64_t moff,
		 uint64_t boff);

#endif
