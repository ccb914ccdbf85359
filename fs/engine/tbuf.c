// SPDX-License-Identifier: MIT
/* tbuf.c - the per-thread aligned buffers of the data paths (fs_thread_buf). */
#include "engine/engine.h"

#include <stdlib.h>
#include "engine/internal.h"

/* Per-thread aligned buffers, reused: a fresh 1 MiB buffer per request would cost an mmap
 * and 256 page faults each time. 0: read data, 1: write data, 2: checksum blocks. */
static __thread void *tbuf[3];
static __thread size_t tbuf_len[3];

void *fs_thread_buf(int which, size_t len)
{
	if (tbuf_len[which] < len) {
		free(tbuf[which]);
		tbuf[which] = util_aligned_alloc(len);
		tbuf_len[which] = tbuf[which] ? ALIGN_UP(len, DMAFS_BLOCK) : 0;
	}
	return tbuf[which];
}
