#!/bin/bash
# Description: the basic POSIX suite on a 2-member dmafs over loop devices (block-device
# members, losetup over /dev/shm files), plus persistence of the tree across a remount.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
. "$(dirname "$0")/t_basic.sh"
t_require_root_fuse
t_require_python
[ -e /dev/loop-control ] || t_skip "no /dev/loop-control (loop driver not available)"
t_workdir
t_loops 2 256M
t_log "loop members: $T_MEMBERS"
t_mkfs "${T_LOOPDEVS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
t_basic_suite "$M" "$T_MEMBERS" $((2 * 256 * 1024 * 1024))
t_log "tree on loop devices survives unmount + mount"
# The 8 GiB sparse files would make the manifest hash 16 GiB of holes.
rm -f "$M/du_sparse" "$M/basic/t_sparse/sparse" || t_fail "rm sparse files"
t_py "$top_srcdir/tests/t_helpers.py" manifest "$M" >"$T_WORK/m1" || t_fail manifest
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" manifest "$M" >"$T_WORK/m2" || t_fail manifest
diff -u "$T_WORK/m1" "$T_WORK/m2" | head -20
cmp -s "$T_WORK/m1" "$T_WORK/m2" || t_fail "tree changed across remount on loop devices"
t_umount "$M"
t_log "PASS"
