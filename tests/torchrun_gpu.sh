#!/bin/bash
# Description: the real transformers under torchrun on 2 GPUs (NCCL): in each rank,
# AutoModelForCausalLM.from_pretrained(device_map="cuda:LOCAL_RANK") under
# dmafs.enable(distributed=True) is bit-identical to the plain from_pretrained, is placed
# in parts that add up to the model, and reads the member loop devices about once for
# both ranks; then dmafs.load_distributed() with the default group and device. Prints
# the times. Skips (77) without torch, two CUDA GPUs and NCCL, or transformers.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_gpus 2 'import transformers' transformers
SYNTH=$top_srcdir/tools/dmafs-synth-model

t_workdir
t_loops 4 1G
t_mkfs "${T_LOOPDEVS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$SYNTH" -q --model qwen2.5-7b --scale 8 --shards 4 --seed 1 "$M/q7" || t_fail "synth q7"
sync -f "$M/q7" 2>/dev/null
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1} t_torchrun 2 "$top_srcdir/tests/torchrun.py" hf \
	--loops "$T_MEMBERS" "$M/q7" || t_fail "torchrun.py hf failed"
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1} t_torchrun 2 "$top_srcdir/tests/torchrun.py" load \
	--loops "$T_MEMBERS" "$M/q7" || t_fail "torchrun.py load (NCCL) failed"
t_umount "$M"
t_log "PASS"
