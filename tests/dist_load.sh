#!/bin/bash
# Description: dmafs.load_distributed() with 2 ranks on the gloo backend (host memory):
# every rank gets the whole model equal to the reference reader's, the ranks' parts add up
# to the model and the member loop devices are read about once (against twice for a plain
# dmafs.load in each rank, counted in the same run); a tensor-parallel plan gives each rank
# its slices; uneven plans, ranks with different models and a rank whose placement fails
# are reported on every rank; a model off dmafs loads with a SlowPathWarning; a model
# smaller than one part per rank; transformers' loader (the stand-in of tests/hf_stub)
# with dmafs.enable(distributed=True) places in parts. The NCCL case runs in
# tests/dist_gpu.sh. Skips without torch.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
BACKEND=${DIST_BACKEND:-gloo}
t_require_torch 'import torch, torch.distributed as d; assert d.is_available(), "no torch.distributed"' "torch with torch.distributed is not importable"
SYNTH=$top_srcdir/tools/dmafs-synth-model

t_workdir
t_loops 4 384M
t_mkfs "${T_LOOPDEVS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$SYNTH" -q --model qwen2.5-7b --scale 16 --shards 3 --seed 1 "$M/q7" || t_fail "synth q7"
"$PY" "$SYNTH" -q --model qwen3-0.6b --scale 16 --seed 2 "$M/q06" || t_fail "synth q06"
"$PY" "$SYNTH" -q --model qwen3-0.6b --scale 128 --seed 3 "$M/tiny" || t_fail "synth tiny"
mkdir -p "$T_WORK/off" "$T_WORK/run"
cp -r "$M/q7" "$T_WORK/off/q7" || t_fail "copy off dmafs"
sync -f "$M/q7" 2>/dev/null
"$PY" "$top_srcdir/tests/dist_load.py" --backend "$BACKEND" --world 2 --work "$T_WORK/run" \
	--loops "$T_MEMBERS" --hf-stub "$top_srcdir/tests/hf_stub" "$M/q7" "$M/q06" "$T_WORK/off/q7" "$M/tiny" ||
	t_fail "dist_load.py failed"
t_umount "$M"
t_log "PASS"
