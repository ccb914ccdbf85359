#!/bin/bash
# Description: write-behind (writes answered before they reach the members): unsynced data
# read back with O_DIRECT, stat sizes, odd-sized appends, random overwrites against a
# model, truncate of buffered data, times set before close, unlinked open files, statfs,
# ENOSPC from write(2) itself; everything after a remount and a clean fsck; the same
# checks with write-behind off; the daemon killed right after fsync loses nothing synced;
# written data is spliced from /dev/fuse exactly when a big enough pipe can be made here,
# and the daemon notes why not otherwise (and with DMAFS_NO_SPLICE=1) where dmafs-check
# shows it, never on the terminal.
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
# The splice of written data: the daemon asks for it exactly when a pipe of 1 MiB + 4 KiB
# can be made here (as this test, root with the same capabilities, finds out itself), and
# notes why not otherwise, in its log and for dmafs-check, not on the terminal (a mount that
# works prints nothing); DMAFS_NO_SPLICE=1 turns it off with its reason.
fits=$(python3 -c 'import fcntl, os
r, w = os.pipe()
try:
    print(1 if fcntl.fcntl(r, 1031, (1 << 20) + 4096) >= (1 << 20) + 4096 else 0)
except OSError:
    print(0)') || t_fail "pipe probe failed"
# notices MNT - the daemon's notes about the mount on MNT, one a line, from dmafs-check
notices() {
	"$top_builddir/tools/dmafs-check" --json "$1" 2>/dev/null |
		python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["mount"].get("notices", [])))'
}
for nosplice in "" 1; do
	if [ -n "$nosplice" ]; then DMAFS_NO_SPLICE=1 t_mount "$T_MEMBERS" "$M"; else t_mount "$T_MEMBERS" "$M"; fi
	stat "$M" >/dev/null # INIT has been answered once a request is
	grep -q "copied twice" "$T_DAEMON_ERR" &&
		t_fail "the splice notice reached the terminal at mount: $(cat "$T_DAEMON_ERR")"
	msg=$(notices "$M" | grep "written data is copied twice")
	if [ -n "$nosplice" ]; then
		echo "$msg" | grep -q "DMAFS_NO_SPLICE is set" ||
			t_fail "DMAFS_NO_SPLICE=1: no notice saying so (dmafs-check: $(notices "$M"))"
	elif [ "$fits" = 1 ]; then
		[ -z "$msg" ] || t_fail "a big enough pipe can be made here, yet the daemon notes: $msg"
	else
		echo "$msg" | grep -q "a pipe of 1052672 bytes is needed" ||
			t_fail "no pipe of 1 MiB + 4 KiB can be made here, and the daemon does not note so (dmafs-check: $(notices "$M"))"
	fi
	t_log "splice of written data (pipe of 1 MiB + 4 KiB possible: $fits${nosplice:+, DMAFS_NO_SPLICE=1}): ${msg:-used}"
	t_umount "$M"
done
t_log "PASS"
