#!/bin/bash
# Description: the real transformers' tensor parallelism (tp_plan="auto") and expert
# parallelism (DistributedConfig(enable_expert_parallel=True)) over two small
# mixture-of-experts models it saved itself (Qwen3-MoE's and Mixtral's architectures, one
# tensor per expert in the files, merged by its weight converters), 2 ranks under torchrun:
# on 2 GPUs with NCCL, else on the CPU with gloo. In each rank every parameter is
# bit-identical to transformers' own load, no SlowPathWarning comes, and dmafs places at
# most what the rank keeps + 2 % (tests/tp_gpu.py). Skips (77) without torch.distributed
# and transformers.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch 'import torch.distributed as d, torch.distributed.run, transformers
assert d.is_available(), "no torch.distributed"' "needs torch.distributed and transformers"
cpu=--cpu
"$PY" -c 'import torch, torch.distributed as d
assert torch.cuda.is_available() and torch.cuda.device_count() >= 2 and d.is_nccl_available()' \
	2>/dev/null && cpu=
t_log "2 ranks ${cpu:+on the CPU (gloo)}${cpu:-on 2 GPUs (NCCL)}"
t_workdir
t_images 3 512M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$top_srcdir/tests/moe_models.py" "$M" || t_fail "moe_models.py could not write the models"
for m in qwen3moe mixtral; do
	for ep in "" --ep; do
		CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1} t_torchrun 2 "$top_srcdir/tests/tp_gpu.py" \
			$cpu $ep "$M/$m" || t_fail "tp_gpu.py $cpu $ep $m failed"
	done
done
t_umount "$M"
t_log "PASS"
