#!/bin/bash
# Description: tests/shard_load.sh on the NCCL backend: 2 ranks, one GPU each (cuda:RANK),
# every check of the gloo run (every slice byte-exact, odd sizes whose exchanged ranges
# end in the middle of rows, the members' reads, a planted failure in one rank), with the
# shards placed into the GPUs and the row slices exchanged GPU to GPU, and the GPU memory
# a rank's load takes: its shard, plus the send buffer while it runs. Skips (77) without
# torch, NCCL or two CUDA GPUs.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
PY=${DMAFS_TEST_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || t_skip "$PY not found (set DMAFS_TEST_PYTHON to a python with torch)"
n=$("$PY" -c 'import torch, torch.distributed as d
print(torch.cuda.device_count() if torch.cuda.is_available() and d.is_nccl_available() else 0)' 2>/dev/null | tail -n 1)
[ "${n:-0}" -ge 2 ] 2>/dev/null || t_skip "needs 2 CUDA GPUs and torch with NCCL (found ${n:-no torch})"
SHARD_DEVICE=cuda SHARD_WORLDS=2 exec bash "$(dirname "$0")/shard_load.sh"
