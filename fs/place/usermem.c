// SPDX-License-Identifier: MIT
/* usermem.c - fault-safe copies into client memory, and zeroing of it (see usermem.h). */
#include "place/usermem.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

/*
 * The copy in progress on this thread: the handler returns to jb only for a fault inside
 * [lo, hi). The handler is installed with SA_NODEFER, so SIGBUS is not left blocked after
 * the jump and sigsetjmp need not save the mask (no system call per copy).
 */
struct guard {
	sigjmp_buf jb;
	uintptr_t lo, hi;
};
static __thread struct guard *volatile cur;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct guard *g = cur;
	uintptr_t a = (uintptr_t)si->si_addr;

	(void)uc;
	if (g && a >= g->lo && a < g->hi) {
		cur = NULL;
		siglongjmp(g->jb, 1);
	}
	/* not a client's memory: die of the signal as if no handler had been there */
	signal(sig, SIG_DFL);
	raise(sig);
}

int usermem_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL) ? -errno : 0;
}

/* Write @n bytes at client memory @dst: a copy of @src, or zeroes when @src is NULL. */
static int guarded_store(void *dst, const void *src, size_t n)
{
	struct guard g;

	g.lo = (uintptr_t)dst;
	g.hi = g.lo + n;
	if (sigsetjmp(g.jb, 0))
		return -EFAULT;
	cur = &g;
	if (src)
		memcpy(dst, src, n);
	else
		memset(dst, 0, n);
	cur = NULL;
	return 0;
}

int usermem_copy(void *dst, const void *src, size_t n)
{
	return guarded_store(dst, src, n);
}

int usermem_zero(void *dst, size_t n)
{
	return guarded_store(dst, NULL, n);
}
