#!/bin/bash
# Description: dmafs.SampleReader, dmafs.batches() and dmafs.SampleDataset
# (tests/python_samples.py): whole-file and (file, offset, length) samples placed into
# host memory equal the files' bytes, more than one request's worth at once, the padding
# of short rows, two shuffled epochs giving every file twice, a DataLoader over the
# dataset; off dmafs the same through pread with a SlowPathWarning. With a CUDA GPU the
# same into cuda:0 (tests/gpu_samples.sh). Skips (77) without torch.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch
DEVICE=${SAMPLES_DEVICE:-cpu}
t_workdir
M=$T_WORK/mnt
t_images 3 512M
t_mkfs "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
"$PY" "$top_srcdir/tests/python_samples.py" "$M/data" "$DEVICE" || t_fail "on dmafs ($DEVICE)"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
"$PY" "$top_srcdir/tests/python_samples.py" "$T_WORK/off" "$DEVICE" --expect-posix || t_fail "off dmafs ($DEVICE)"
t_log "PASS"
