#!/bin/bash
# Description: concurrent access from several processes: interleaved pwrite to one file,
# creates/unlinks in one directory, O_APPEND records never lost or torn, a rename storm
# conserving names; the result survives a remount.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 3 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" concurrency "$M/c" || t_fail "concurrent access (see above)"
t_py "$top_srcdir/tests/t_helpers.py" manifest "$M" >"$T_WORK/m1" || t_fail manifest
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" manifest "$M" >"$T_WORK/m2" || t_fail manifest
diff -u "$T_WORK/m1" "$T_WORK/m2" | head -20
cmp -s "$T_WORK/m1" "$T_WORK/m2" || t_fail "tree changed across remount"
t_umount "$M"
t_log "PASS"
