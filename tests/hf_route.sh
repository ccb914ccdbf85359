#!/bin/bash
# Description: dmafs.enable() routes transformers' safetensors reads through dmafs
# (tests/hf_route.py against tests/hf_stub, a stand-in with the shape of transformers 5's
# loader, since transformers is not in Debian): shards + index, a single file and a Hugging
# Face cache snapshot on dmafs are placed by dmafs with tensors equal to the plain loader's;
# a model off dmafs loads as before with a SlowPathWarning. The real transformers is run on
# the GPU machine (see the closing notes of the work). Skips without torch.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch
SYNTH=$top_srcdir/tools/dmafs-synth-model

t_workdir
t_images 3 512M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$SYNTH" -q --model qwen2.5-7b --scale 32 --shards 4 --seed 1 "$M/q7" || t_fail "synth q7"
"$PY" "$SYNTH" -q --model qwen3-0.6b --scale 16 --seed 2 --hf-cache "$M/hub" --repo org/q06 "$M/q06" ||
	t_fail "synth q06"
snap=$(ls -d "$M"/hub/models--org--q06/snapshots/*/ | head -n 1)
[ -d "$snap" ] || t_fail "no snapshot directory under $M/hub"
mkdir -p "$T_WORK/off"
cp -r "$M/q7" "$T_WORK/off/q7" || t_fail "copy off dmafs"
"$PY" "$top_srcdir/tests/hf_route.py" "$top_srcdir/tests/hf_stub" "$M/q7" "$M/q06" "${snap%/}" -- "$T_WORK/off/q7" ||
	t_fail "hf_route.py failed"
t_umount "$M"
t_log "PASS"
