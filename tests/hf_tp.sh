#!/bin/bash
# Description: dmafs.enable() under a tensor-parallel load (tp_plan="auto") of the stand-in
# of transformers 5's loader (tests/hf_tp.py, tests/hf_stub) in 2 and 4 ranks on gloo: each
# rank places only the slices it keeps (dmafs.last_stats().bytes is its share, the rowwise
# slices read as blocks of rows and exchanged between the ranks), every parameter is
# byte-equal to the stand-in's own tp load, requests for other parts are read from the file
# with a SlowPathWarning naming the tensor. Skips without torch.distributed.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch 'import torch, torch.distributed as d; assert d.is_available(), "no torch.distributed"' "torch with torch.distributed is not importable"
SYNTH=$top_srcdir/tools/dmafs-synth-model
t_workdir
t_images 3 512M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$SYNTH" -q --model qwen2.5-7b --scale 16 --shards 2 --seed 1 "$M/q7" || t_fail "synth q7"
mkdir -p "$T_WORK/run"
"$PY" "$top_srcdir/tests/hf_tp.py" --stub "$top_srcdir/tests/hf_stub" --work "$T_WORK/run" \
	--worlds "${HF_TP_WORLDS:-2,4}" "$M/q7" "$M/odd" || t_fail "hf_tp.py failed (see above)"
t_umount "$M"
t_log "PASS"
