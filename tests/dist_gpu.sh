#!/bin/bash
# Description: tests/dist_load.sh on the NCCL backend: 2 ranks, one GPU each (cuda:RANK),
# every check of the gloo run, with the parts exchanged GPU to GPU. Skips (77) without
# torch, CUDA or two GPUs.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_gpus 2
DIST_BACKEND=nccl exec bash "$(dirname "$0")/dist_load.sh"
