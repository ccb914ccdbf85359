// SPDX-License-Identifier: MIT
/*
 * gpu-log.c - the log of failed GPU runtime calls (gpu_log, gpu_set_log): to the hook the
 * daemon sets, else to stderr when DMAFS_DEBUG is set. Below gpu.c and the runtime shims,
 * which all report through it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu-impl.h"

static void (*log_hook)(const char *msg);

void gpu_log(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_hook)
		log_hook(msg);
	else if (getenv("DMAFS_DEBUG"))
		fprintf(stderr, "libdmafs: %s\n", msg);
}

void gpu_set_log(void (*fn)(const char *msg)) { log_hook = fn; }
