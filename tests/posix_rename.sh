#!/bin/bash
# Description: rename(2) over files and dirs, cross-dir moves, RENAME_NOREPLACE and
# RENAME_EXCHANGE (renameat2 via python3 ctypes), and that the result survives a remount.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" rename "$M/r" || t_fail "rename semantics (see above)"
t_log "the renamed tree is the same after unmount + mount"
t_py "$top_srcdir/tests/t_helpers.py" manifest "$M" >"$T_WORK/before" || t_fail "manifest before remount"
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" manifest "$M" >"$T_WORK/after" || t_fail "manifest after remount"
diff -u "$T_WORK/before" "$T_WORK/after" || t_fail "tree changed across remount (diff above)"
t_umount "$M"
t_log "PASS"
