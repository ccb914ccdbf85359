/* SPDX-License-Identifier: MIT */
/* load-model.h - dmafs-load's model mode (load-model.c), which main() hands models to. */
#ifndef DMAFS_LOAD_MODEL_H
#define DMAFS_LOAD_MODEL_H

#include "load-common.h"

/* The model mode. main() hands over every PATH; returns an exit status. */
int load_models(const struct load_opt *opt, char **paths, int n);

#endif
