#!/bin/bash
# Description: dmafs.enable() with the real transformers on a GPU (tests/hf_gpu.py):
# from_pretrained of a sharded model with an index, a single-file model and a Hugging Face
# cache snapshot on dmafs, device_map "cuda:0" and "cpu", bit-identical to the plain
# from_pretrained; with 2 GPUs, a device_map that splits the layers between them; off
# dmafs with a SlowPathWarning. Skips (77) without torch, a CUDA GPU
# or transformers (not in Debian: the CPU route is tested by hf_route.sh).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch 'import torch; assert torch.cuda.is_available(), "torch.cuda.is_available() is False"; import transformers' "needs torch with a CUDA GPU and transformers"
SYNTH=$top_srcdir/tools/dmafs-synth-model

t_workdir
t_images 4 1G
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$SYNTH" -q --model qwen2.5-7b --scale 8 --shards 4 --seed 1 "$M/q7" || t_fail "synth q7"
"$PY" "$SYNTH" -q --model qwen3-0.6b --scale 4 --shards 1 --seed 2 "$M/q06" || t_fail "synth q06"
"$PY" "$SYNTH" -q --model qwen3-0.6b --scale 8 --seed 3 --hf-cache "$M/hub" --repo org/q06 "$M/q06b" ||
	t_fail "synth into an HF cache"
snap=$(ls -d "$M"/hub/models--org--q06/snapshots/*/ | head -n 1)
[ -d "$snap" ] || t_fail "no snapshot directory under $M/hub"
mkdir -p "$T_WORK/off"
cp -r "$M/q06" "$T_WORK/off/q06" || t_fail "copy off dmafs"
"$PY" "$top_srcdir/tests/hf_gpu.py" "$M/q7" "$M/q06" "${snap%/}" -- "$T_WORK/off/q06" ||
	t_fail "hf_gpu.py failed"
t_umount "$M"
t_log "PASS"
