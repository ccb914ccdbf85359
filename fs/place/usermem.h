/* SPDX-License-Identifier: MIT */
/*
 * usermem.h - access to memory a client shares with the daemon (registered host buffers),
 * safe against the client taking it away.
 *
 * A client's shared memory object can shrink under the daemon's mapping (ftruncate, or a
 * hole punched in a hugetlbfs file with no huge page left to refill it): a load or store
 * there raises SIGBUS, which would kill the daemon and every user's mount with it. Every
 * access to a client mapping goes through usermem_copy() or usermem_zero() (the holes of
 * a file read straight into a client's pages), which turn such a fault into -EFAULT for
 * that one placement.
 */
#ifndef DMAFS_USERMEM_H
#define DMAFS_USERMEM_H

#include <stddef.h>

/* Install the SIGBUS handler once, at start. Returns 0 or -errno of sigaction. */
int usermem_init(void);

/*
 * Copy @n bytes from daemon memory @src into client memory @dst. The calling thread must
 * not block SIGBUS (a blocked synchronous SIGBUS kills the process). Returns 0, or -EFAULT
 * when part of @dst is gone (then an unknown prefix was copied). A fault outside @dst is
 * a daemon bug and kills the daemon as SIGBUS always would.
 */
int usermem_copy(void *dst, const void *src, size_t n);

/* Zero @n bytes of client memory at @dst, as usermem_copy. Returns 0 or -EFAULT. */
int usermem_zero(void *dst, size_t n);

#endif
