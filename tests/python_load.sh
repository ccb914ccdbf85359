#!/bin/bash
# Description: the dmafs Python module (lib/python/dmafs) loads safetensors models from a
# mount into torch tensors equal to a reference reader's (tests/python_check.py): single
# files of every dtype, shards with an index, a Hugging Face snapshot of symlinks,
# synthetic Qwen-shaped models (tools/dmafs-synth-model, when present), safe_open, host
# placement lifetime, the posix fallback's warning, malformed files; on cuda:0 too when
# torch sees a GPU. Skips (77) when the test's python cannot import torch.
# Environment: DMAFS_TEST_PYTHON (default /usr/bin/python3, Debian's, with python3-torch).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch
CHECK=$top_srcdir/tests/python_check.py
SYNTH=$top_srcdir/tools/dmafs-synth-model

t_workdir
t_images 3 1G
t_mkfs -s 256K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt"

t_log "test models: every dtype, misaligned, 3 shards + index, HF snapshot, malformed"
"$PY" "$CHECK" gen "$T_WORK/src" || t_fail "python_check.py gen"
models=()
if [ -x "$SYNTH" ]; then
	t_log "synthetic models: qwen3-0.6b / 16, qwen2.5-7b / 32 in 4 shards"
	"$SYNTH" --model qwen3-0.6b --scale 16 "$T_WORK/src/qwen3-0.6b" ||
		t_fail "dmafs-synth-model --model qwen3-0.6b --scale 16"
	"$SYNTH" --model qwen2.5-7b --scale 32 --shards 4 "$T_WORK/src/qwen2.5-7b" ||
		t_fail "dmafs-synth-model --model qwen2.5-7b --scale 32 --shards 4"
	models=("$T_WORK/mnt/qwen3-0.6b" "$T_WORK/mnt/qwen2.5-7b")
else
	t_log "NOTE: $SYNTH not there: built-in test models only"
fi
cp -a "$T_WORK/src/." "$T_WORK/mnt/" || t_fail "copy the models into the mount"
# The same file outside dmafs (the work dir is on /dev/shm) for the posix fallback.
mkdir -p "$T_WORK/outside" && cp -a "$T_WORK/src/mixed" "$T_WORK/outside/" || t_fail "copy outside"

t_log "python_check.py check with $PY"
"$PY" "$CHECK" check "$T_WORK/mnt" "$T_WORK/outside" "${models[@]}"
rc=$?
[ $rc = 0 ] || t_fail "python_check.py exited $rc (see above)"
t_log "no session left behind: the mount unmounts"
t_umount "$T_WORK/mnt"
t_log "PASS"
