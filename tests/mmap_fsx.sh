#!/bin/bash
# Description: random read/write/truncate/mmap/fsync exerciser (tests/fsx) checked against
# an in-memory model: on a tmpfs file as a control, then on dmafs with 1M and 64K stripe
# units (files spanning many stripe units and members); the final content survives a remount.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
FSX=${FSX:-$top_builddir/tests/fsx}
[ -x "$FSX" ] || t_skip "tests/fsx not built ($FSX); run make check"
OPS=${FSX_OPS:-4000}
t_workdir
M=$T_WORK/mnt

t_log "control: fsx on a tmpfs file"
"$FSX" -N "$OPS" -S 1 "$T_WORK/control" || t_fail "fsx fails on tmpfs: the exerciser itself is broken"

t_images 3 256M a
t_mkfs "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
for seed in 1 2 3; do
	t_log "fsx seed $seed, $OPS ops, file up to 8 MiB over 3 members, stripe unit 1M"
	"$FSX" -N "$OPS" -S $seed -D "$T_WORK/model$seed" "$M/fsx$seed" || t_fail "fsx -N $OPS -S $seed $M/fsx$seed (repro: see op log above)"
done
t_log "fsx without mmap writes (pure read/write/truncate path), seed 4"
"$FSX" -N "$OPS" -S 4 -W -D "$T_WORK/model4" "$M/fsx4" || t_fail "fsx -W -S 4"
if [ -n "$T_PY" ]; then
	t_log "user.dmafs.layout of the fsx files (holes, many extents) is valid"
	t_py "$top_srcdir/tests/t_helpers.py" layoutsave "$T_MEMBERS" "$T_WORK/layout.json" "$M"/fsx[1-4] ||
		t_fail "layout of fsx files (see above)"
fi
t_umount "$M"
if [ -n "$T_PY" ]; then
	t_log "after unmount the members hold the final fsx data where the layout says, nothing unmapped"
	t_py "$top_srcdir/tests/t_helpers.py" ondisk "$T_WORK/layout.json" "$T_MEMBERS" \
		"$M/fsx1=$T_WORK/model1" "$M/fsx2=$T_WORK/model2" "$M/fsx3=$T_WORK/model3" "$M/fsx4=$T_WORK/model4" ||
		t_fail "fsx files: layout vs member bytes (see above)"
fi
t_mount "$T_MEMBERS" "$M"
for seed in 1 2 3 4; do
	cmp "$T_WORK/model$seed" "$M/fsx$seed" || t_fail "fsx$seed content changed across remount"
done
t_umount "$M"
rm -f "${T_IMGS[@]}"

t_images 4 128M b
t_mkfs -s 64K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
for seed in 5 6; do
	t_log "fsx seed $seed on stripe unit 64K over 4 members, ops up to 300 KiB, file up to 4 MiB"
	"$FSX" -N "$OPS" -S $seed -l $((4 * 1024 * 1024)) -o 300000 "$M/fsx$seed" || t_fail "fsx -S $seed on 64K stripes"
done
t_umount "$M"
t_log "PASS"
