#!/bin/bash
# Description: umount(8) of dmafs returns only when the daemon is done: right after it,
# every member opens exclusively (O_EXCL), no daemon is left, and what was written up to
# the umount (last write just before it, no fsync) is all there after a remount, fsck
# clean; several rounds. The umount.fuse helper leaves other mounts to plain umount and
# fails for a path that is not mounted.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
HELPER=$top_srcdir/tools/umount.fuse
# util-linux's umount(8) runs /sbin/umount.fuse for FUSE mounts: put ours there for the
# test unless one is installed already (then it must be ours).
if [ -e /sbin/umount.fuse ]; then
	cmp -s /sbin/umount.fuse "$HELPER" ||
		t_skip "/sbin/umount.fuse exists and is not this build's tools/umount.fuse (install it, or remove the other one)"
else
	cp "$HELPER" /sbin/umount.fuse || t_fail "cannot install /sbin/umount.fuse"
	T_HELPER_INSTALLED=1
fi
cleanup_helper() {
	local rc=$?
	[ -n "${T_HELPER_INSTALLED:-}" ] && rm -f /sbin/umount.fuse
	(exit $rc)
	t_cleanup
}
trap cleanup_helper EXIT
t_workdir
t_loops 4 320M
M=$T_WORK/mnt

excl_open_all() {
	t_py - "${T_LOOPDEVS[@]}" <<'PY'
import os, sys
bad = []
for dev in sys.argv[1:]:
    try:
        os.close(os.open(dev, os.O_RDONLY | os.O_EXCL))
    except OSError as e:
        bad.append(f"{dev}: {e.strerror}")
if bad:
    print("exclusive open failed right after umount: " + "; ".join(bad))
    sys.exit(1)
PY
}

t_mkfs -f "${T_LOOPDEVS[@]}"
for round in 1 2 3 4 5; do
	t_log "round $round: write (no fsync), umount, members free at once"
	t_mount "$T_MEMBERS" "$M"
	pids=$(t_daemon_pids "$M")
	[ -n "$pids" ] || t_fail "no daemon found for $M"
	mkdir -p "$M/r$round"
	head -c $((60 + round * 7))M /dev/urandom >"$T_WORK/big$round" || t_fail "source"
	cp "$T_WORK/big$round" "$M/r$round/big" || t_fail "cp"
	for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom >"$M/r$round/small$i"; done
	head -c 3000001 /dev/urandom >"$T_WORK/last$round"
	dd if="$T_WORK/last$round" of="$M/r$round/last" bs=1M status=none || t_fail "last write"
	(cd "$M/r$round" && sha256sum small* >"$T_WORK/small$round.sum") || t_fail "sha256sum"
	umount "$M" || t_fail "umount $M exited $?"
	excl_open_all || t_fail "round $round: members still held after umount returned"
	left=
	for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
	if [ -n "$left" ]; then
		kill -9 $left 2>/dev/null
		t_fail "round $round: daemon(s)$left still running after umount returned"
	fi
	t_fsck 0 "${T_LOOPDEVS[@]}"
	t_mount "$T_MEMBERS" "$M"
	for r in $(seq 1 $round); do
		cmp "$T_WORK/big$r" "$M/r$r/big" || t_fail "round $round: r$r/big differs after remount"
		cmp "$T_WORK/last$r" "$M/r$r/last" || t_fail "round $round: r$r/last differs after remount"
		(cd "$M/r$r" && sha256sum -c --quiet "$T_WORK/small$r.sum") || t_fail "round $round: r$r/small* differ"
	done
	t_umount "$M"
done

t_log "the helper on other mounts: a tmpfs is unmounted as umount -i would; a path not mounted fails"
mkdir -p "$T_WORK/tmpfs"
mount -t tmpfs -o size=1M none "$T_WORK/tmpfs" || t_fail "mount tmpfs"
"$HELPER" "$T_WORK/tmpfs" || t_fail "umount.fuse of a tmpfs failed"
t_is_mounted "$T_WORK/tmpfs" && t_fail "umount.fuse left the tmpfs mounted"
"$HELPER" "$T_WORK/tmpfs" 2>/dev/null && t_fail "umount.fuse of a path that is not mounted succeeded"
t_log "PASS"
