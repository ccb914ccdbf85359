/* SPDX-License-Identifier: MIT */
/* p2p.h - cuFile (GPUDirect Storage) reads from members into GPU memory; see p2p.c. */
#ifndef DMAFS_P2P_H
#define DMAFS_P2P_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "io/member.h"

/* p2p=force: use cuFile even without nvidia-fs (testing). Call before anything else. */
void p2p_configure(int force);
/* Is the direct path usable? @why (may be NULL) gets the reason either way. */
int p2p_usable(char *why, size_t len);
/* Register member @idx with cuFile (once). Returns 0 or -ENOTSUP. */
int p2p_member(struct member *m, unsigned idx);
int p2p_buf_register(void *base, size_t len);
void p2p_buf_deregister(void *base);
/* Read @len bytes at member offset @moff into base + boff. Returns bytes or -EIO. */
ssize_t p2p_read(unsigned member, void *base, size_t len, uint64_t moff, uint64_t boff);

#endif
