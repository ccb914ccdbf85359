#!/bin/bash
# Description: a torch.distributed job started by torchrun (2 processes, env:// rendezvous,
# gloo on host memory): dmafs.load_distributed() with the default group and device equals
# the reference reader in both ranks, the ranks' parts add up to the model and the member
# loop devices are read about once; a plan; transformers' loader (the stand-in of
# tests/hf_stub) under dmafs.enable(distributed=True). The real transformers on 2 GPUs
# under torchrun: tests/torchrun_gpu.sh. Skips without torch.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch 'import torch.distributed as d, torch.distributed.run; assert d.is_available(), "no torch.distributed"' "torch with torch.distributed and torchrun is not importable"
SYNTH=$top_srcdir/tools/dmafs-synth-model

t_workdir
t_loops 4 256M
t_mkfs "${T_LOOPDEVS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$SYNTH" -q --model qwen2.5-7b --scale 16 --shards 3 --seed 1 "$M/q7" || t_fail "synth q7"
sync -f "$M/q7" 2>/dev/null
# CUDA_VISIBLE_DEVICES= : host memory and gloo here, even on a machine with GPUs
CUDA_VISIBLE_DEVICES= t_torchrun 2 "$top_srcdir/tests/torchrun.py" load --loops "$T_MEMBERS" \
	--hf-stub "$top_srcdir/tests/hf_stub" "$M/q7" || t_fail "torchrun.py load failed"
t_umount "$M"
t_log "PASS"
