/* SPDX-License-Identifier: MIT */
/*
 * tier-press.h - the warm tier gives memory back when the machine needs it: a thread that
 * watches the available memory (MemAvailable of /proc/meminfo, every TIER_PRESS_MS and
 * sooner when the kernel's memory pressure stall trigger fires) against the tier's
 * min_free (mount option tier_min_free=; dmafs(8), WARM TIER).
 *
 * Under the line, the tier takes no new chunks and gives back least recently used ones,
 * a segment at a time, until the shortfall is covered or it holds nothing in use; it
 * takes new chunks again once the available memory is above the line by a margin
 * (TIER_SEG, or a sixteenth of the line when that is more), so that it does not swing
 * about the line. Each period it also releases segments that had nothing in use for a
 * whole period.
 */
#ifndef DMAFS_TIER_PRESS_H
#define DMAFS_TIER_PRESS_H

#include <stdint.h>

#include "engine/tier.h"

#define TIER_PRESS_MS 250

struct tier_press;

/*
 * Look at the memory once now (so that a mount whose machine is short of memory fills
 * nothing from its first placement) and start the thread. @t NULL: *@out NULL, nothing
 * started. Returns 0 or -errno (the thread could not start).
 */
int tier_press_start(struct tier_press **out, struct tier *t);
/* Stop the thread and free @p (NULL: nothing), before the tier goes. */
void tier_press_stop(struct tier_press *p);

#endif
