#!/bin/bash
# Description: write-behind (writes answered before they reach the members): unsynced data
# read back with O_DIRECT, stat sizes, odd-sized appends, random overwrites against a
# model, truncate of buffered data, times set before close, unlinked open files, statfs,
# ENOSPC from write(2) itself; everything after a remount and a clean fsck; the same
# checks with write-behind off; the daemon killed right after fsync loses nothing synced.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 4 160M
M=$T_WORK/mnt
PY="$top_srcdir/tests/writebehind.py"

for opts in "" "writebehind_mb=0" "writebehind_mb=32"; do
	t_log "mkfs; mount ${opts:-(defaults)}; checks on the live mount"
	t_mkfs -f "${T_IMGS[@]}"
	t_mount "$T_MEMBERS" "$M" "$opts"
	t_timeout 600 t_py "$PY" "$M" live || t_fail "live checks failed (${opts:-defaults}); daemon: $(tail -5 "$T_DAEMON_ERR")"
	t_umount "$M"
	t_fsck 0 --scrub "${T_IMGS[@]}"
	t_mount "$T_MEMBERS" "$M" "$opts"
	t_timeout 300 t_py "$PY" "$M" after || t_fail "checks after remount failed (${opts:-defaults})"
	t_umount "$M"
done

t_log "kill -9 right after fsync: the synced file is whole"
t_mkfs -f "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
head -c 50000000 /dev/urandom >"$T_WORK/src"
dd if="$T_WORK/src" of="$M/synced" bs=1M conv=fsync status=none || t_fail "dd conv=fsync"
head -c 20000000 /dev/urandom >"$M/unsynced" # may or may not survive: not checked
t_crash "$M"
t_mount "$T_MEMBERS" "$M"
cmp "$T_WORK/src" "$M/synced" || t_fail "fsynced file differs after kill -9 of the daemon"
t_umount "$M"
t_fsck 0 --scrub "${T_IMGS[@]}"
t_log "PASS"
