#!/bin/bash
# Description: dmafs.enable() under tensor-parallel and expert-parallel loads of two small
# mixture-of-experts checkpoints (Qwen3-MoE's and Mixtral's layouts: per-expert tensors that
# transformers' weight converters merge) with the stand-in of transformers 5.17's DTensor
# loading path (tests/hf_stub), 2 and 4 ranks on gloo: every parameter byte-equal to the
# stand-in's own load, no SlowPathWarning, each rank places at most what it keeps + 2 %
# (its slices of every expert under tp, only its experts under ep). Skips without
# torch.distributed.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch 'import torch, torch.distributed as d; assert d.is_available(), "no torch.distributed"' "torch with torch.distributed is not importable"
t_workdir
t_images 3 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
mkdir -p "$T_WORK/run"
"$PY" "$top_srcdir/tests/hf_moe.py" --stub "$top_srcdir/tests/hf_stub" --work "$T_WORK/run" \
	--worlds "${HF_MOE_WORLDS:-2,4}" "$M/qmoe" "$M/mix" || t_fail "hf_moe.py failed (see above)"
t_umount "$M"
t_log "PASS"
