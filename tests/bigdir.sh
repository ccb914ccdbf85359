#!/bin/bash
# Description: a directory with 100000 entries: ls count, every name exactly once from
# readdir, lookup time, stable readdir while every other entry is deleted during the
# iteration, and the surviving set after a remount.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
N=${BIGDIR_N:-100000}
t_workdir
# Members of 2 GiB (sparse) so the metadata log halves (member/64) hold 100k entries.
t_images 2 2G
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
mkdir "$M/big" || t_fail "mkdir"
t_py "$top_srcdir/tests/t_helpers.py" bigdir "$M/big" "$N" || t_fail "big directory (see above)"
t_log "ls | wc -l and ls -f count the $((N / 2)) survivors"
c=$(ls "$M/big" | wc -l)
[ "$c" = $((N / 2)) ] || t_fail "ls shows $c entries, expected $((N / 2))"
c=$(ls -f "$M/big" | grep -cv '^\.\.\?$')
[ "$c" = $((N / 2)) ] || t_fail "ls -f shows $c entries, expected $((N / 2))"
t_log "directory st_size/st_nlink sane"
[ "$(stat -c %h "$M/big")" -ge 1 ] || t_fail "st_nlink of big dir $(stat -c %h "$M/big")"
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" bigdir-verify "$M/big" "$N" || t_fail "big directory after remount"
t_log "rm -rf of the big directory"
rm -rf "$M/big" || t_fail "rm -rf big dir"
[ ! -e "$M/big" ] || t_fail "big dir still exists"
t_umount "$M"
t_log "PASS"
