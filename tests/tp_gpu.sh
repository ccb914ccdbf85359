#!/bin/bash
# Description: the real transformers' tensor parallelism under torchrun on 2 GPUs (NCCL):
# in each rank, AutoModelForCausalLM.from_pretrained(tp_plan="auto") under dmafs.enable()
# is bit-identical, shard for shard, to the plain tp load, dmafs places only this rank's
# slices (the rest whole) and transformers asks for nothing else (no SlowPathWarning)
# (tests/tp_gpu.py). Prints the times. Skips (77) without torch, two CUDA GPUs and NCCL,
# or transformers.
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
"$PY" "$SYNTH" -q --model qwen3-0.6b --scale 2 --shards 1 --seed 2 "$M/q06" || t_fail "synth q06"
sync -f "$M/q7" 2>/dev/null
for m in q7 q06; do
	CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1} t_torchrun 2 "$top_srcdir/tests/tp_gpu.py" \
		--loops "$T_MEMBERS" ${TP_GPU_ALLOW_SLOW:+--allow-slow} "$M/$m" || t_fail "tp_gpu.py $m failed"
done
t_umount "$M"
t_log "PASS"
