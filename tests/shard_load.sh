#!/bin/bash
# Description: dmafs.load(..., shard=...) in 2 and 4 ranks (gloo, host memory): every rank
# gets exactly its slice of every tensor a plan names (odd sizes that do not divide, a
# packed gate_up and qkv, 3-d tensors split along dimension 1 and 2, fewer rows than ranks,
# ranks with an empty slice or nothing at all) and the others whole, equal to the whole
# tensor sliced by the rule; dmafs.last_stats() counts the rank's bytes; with column-wise
# splits the member loop devices read about the rank's share while it loads alone, and all
# ranks together about the model's bytes when they share the tensors kept whole and
# exchange the narrow row slices (LoadStats.exchanged_tensors, also with a send buffer small
# enough for many batches; a rank failing to place raises, the others too, none hangs)
# (tests/shard_check.py); again on a mount with verify_place. Skips without
# torch.distributed.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch 'import torch, torch.distributed as d; assert d.is_available(), "no torch.distributed"' "torch with torch.distributed is not importable"
SYNTH=$top_srcdir/tools/dmafs-synth-model
t_workdir
t_loops 4 256M
t_mkfs "${T_LOOPDEVS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
"$PY" "$SYNTH" -q --model qwen2.5-7b --scale 16 --shards 2 --seed 1 "$M/q7" || t_fail "synth q7"
mkdir -p "$T_WORK/run"
"$PY" "$top_srcdir/tests/shard_check.py" --work "$T_WORK/run" --loops "$T_MEMBERS" \
	--worlds "${SHARD_WORLDS:-2,4}" --device "${SHARD_DEVICE:-cpu}" "$M/q7" "$M/odd.safetensors" ||
	t_fail "shard_check.py failed (see above)"
t_umount "$M"
# again with verify_place: the packed row extents are read by whole 4 KiB blocks and their
# checksums checked in the pool (the reads are reported: each member read brings its own
# 4 KiB checksum block, which costs row slices several times their bytes)
t_log "again with -o verify_place, 2 ranks"
t_mount "$T_MEMBERS" "$M" verify_place
mkdir -p "$T_WORK/run2"
"$PY" "$top_srcdir/tests/shard_check.py" --work "$T_WORK/run2" --loops "$T_MEMBERS" \
	--worlds 2 --device "${SHARD_DEVICE:-cpu}" --no-read-bounds "$M/q7" "$M/odd.safetensors" ||
	t_fail "shard_check.py with verify_place failed (see above)"
t_umount "$M"
t_log "PASS"
