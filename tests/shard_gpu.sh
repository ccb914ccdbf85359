#!/bin/bash
# Description: tests/shard_load.sh on the NCCL backend: 2 ranks, one GPU each (cuda:RANK),
# every check of the gloo run (every slice byte-exact, odd sizes whose exchanged ranges
# end in the middle of rows, the members' reads, a planted failure in one rank), with the
# shards placed into the GPUs and the row slices exchanged GPU to GPU, and the GPU memory
# a rank's load takes: its shard, plus the send buffer while it runs. Skips (77) without
# torch, NCCL or two CUDA GPUs.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_gpus 2
SHARD_DEVICE=cuda SHARD_WORLDS=2 exec bash "$(dirname "$0")/shard_load.sh"
