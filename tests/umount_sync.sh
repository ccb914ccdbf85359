#!/bin/bash
# Description: umount(8) of a dmafs mount returns only when the daemon has finished, through
# umount.dmafs. Five rounds with commit=3600 (only fsync or the final commit make anything
# durable): large and small files, with and without fsync, the last write just before the
# umount; one round mounted from an fstab line (mount -T, mount.dmafs); one member's cache
# flush is slow (faultfs), so an umount that does not wait is caught every time; umount as
# users run it (plain, -v, -c as systemd does, and through the
# umount.fuse.dmafs name when the mount has no utab marker). Right after it returns: no
# daemon left (a survivor is killed with kill -9 and fails the test), every member opens
# with O_EXCL, the utab marker and the daemon's record are gone; then dmafs-fsck is clean
# and a remount has every file of every round (sha256). Also: fusermount3 -u followed by
# umount.dmafs --wait; umount -l with a file still open (returns at once, the daemon
# finishes at the close); umount after kill -9 of the daemon (exit 2, says so); a final
# commit that fails on a member (exit 2, says why); umount.dmafs on a tmpfs, a directory
# that is not mounted and a missing path (exit 32, clear message, nothing unmounted).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_umount_helpers

FAULTFS=$top_builddir/tests/faultfs
[ -x "$FAULTFS" ] || t_skip "faultfs not built: $FAULTFS"

# mount(8) finds /sbin/mount.dmafs the same way; round 2 mounts through it from an fstab
# line (mount -T) when it can be linked there too.
MOUNT_HELPER=$(readlink -f "$T_MOUNT_HELPER")
fstab_mount=0
if [ -e /sbin/mount.dmafs ]; then
	[ "$(readlink -f /sbin/mount.dmafs)" = "$MOUNT_HELPER" ] && fstab_mount=1
elif ln -s "$MOUNT_HELPER" /sbin/mount.dmafs 2>/dev/null; then
	t_register file /sbin/mount.dmafs
	fstab_mount=1
fi

t_workdir
M=$T_WORK/mnt

# ff_start IMAGE CONTROL MNT - serve IMAGE as MNT/disk through faultfs (tests/faultfs.c).
ff_start() {
	local pid
	mkdir -p "$3" && t_register mnt "$3"
	"$FAULTFS" "$1" "$2" "$3" -f 2>>"$T_WORK/faultfs.err" &
	pid=$!
	disown "$pid"
	t_register pid "$pid"
	t_wait_mounted "$3" 30 || t_fail "faultfs did not mount $3: $(cat "$T_WORK/faultfs.err")"
}

# Members: three loop devices over tmpfs images, and a fourth over an image served by
# faultfs whose fsync takes 200 ms longer: a drive with a slow cache flush. The daemon
# flushes every member when it finishes, so an umount that does not wait for it returns
# with the daemon still at work, and the checks below catch that every time.
t_loops 3 256M
truncate -s 256M "$T_WORK/slow.img" || t_fail "truncate"
echo "fsync_delay_ms 200" >"$T_WORK/slow.ctl"
ff_start "$T_WORK/slow.img" "$T_WORK/slow.ctl" "$T_WORK/slowfs"
slow=$(losetup -f --show "$T_WORK/slowfs/disk") || t_skip "no free loop device"
t_register loop "$slow"
T_LOOPDEVS+=("$slow")
T_MEMBERS="$T_MEMBERS,$slow"
t_mkfs -f "${T_LOOPDEVS[@]}"

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
    print("exclusive open failed: " + "; ".join(bad))
    sys.exit(1)
PY
}

# after_umount WHAT PIDS - the checks right after an unmount that must have waited.
after_umount() {
	local what=$1 pids=$2 p left=
	for p in $pids; do t_running "$p" && left="$left $p"; done
	if [ -n "$left" ]; then
		kill -9 $left 2>/dev/null
		t_fail "$what: dmafs daemon(s)$left still running after it returned (killed with kill -9)"
	fi
	excl_open_all || t_fail "$what: members still held after it returned"
	t_is_mounted "$M" && t_fail "$what: $M still mounted"
	grep -q "TARGET=$M " /run/mount/utab 2>/dev/null && t_fail "$what: utab entry of $M left behind"
	for p in $pids; do
		[ -e "/run/dmafs/$p" ] && t_fail "$what: record /run/dmafs/$p left behind: $(cat "/run/dmafs/$p")"
	done
	return 0
}

# verify_rounds N - every file of rounds 1..N is there with its content.
verify_rounds() {
	local r
	for ((r = 1; r <= $1; r++)); do
		(cd "$M/r$r" && sha256sum -c --quiet "$T_WORK/sums$r") || t_fail "round $r: files differ after remount"
	done
}

for round in 1 2 3 4 5; do
	if [ $round = 2 ] && [ $fstab_mount = 1 ]; then
		# as for an /etc/fstab line: mount(8) runs mount.dmafs, which starts the daemon
		echo "$T_MEMBERS $M dmafs defaults,nofail,commit=3600 0 0" >"$T_WORK/fstab"
		mkdir -p "$M" && t_register mnt "$M"
		PATH="$top_builddir/fs:$PATH" mount -T "$T_WORK/fstab" "$M" 2>"$T_WORK/mount.err" ||
			t_fail "mount -T fstab $M: $(cat "$T_WORK/mount.err")"
		t_wait_mounted "$M" 30 || t_fail "mount -T fstab returned but $M is not mounted"
		for p in $(t_daemon_pids "$M"); do t_register pid "$p"; done
		t_log "round 2: mounted from an fstab line through mount(8) and mount.dmafs"
	else
		t_mount "$T_MEMBERS" "$M" commit=3600
	fi
	pids=$(t_daemon_pids "$M")
	[ -n "$pids" ] || t_fail "no daemon found for $M"
	grep -q "TARGET=$M .*helper=dmafs" /run/mount/utab ||
		t_fail "no helper=dmafs entry for $M in /run/mount/utab: $(cat /run/mount/utab 2>&1)"
	[ "$(sed -n 's/^state=//p' "/run/dmafs/$pids")" = serving ] || t_fail "no record /run/dmafs/$pids"
	[ $round -gt 1 ] && verify_rounds $((round - 1))

	d=$M/r$round
	mkdir "$d" || t_fail "mkdir $d"
	head -c $((20 + round * 5))M /dev/urandom >"$d/big" || t_fail "write big"
	dd if=/dev/urandom of="$d/synced" bs=1M count=$((3 + round)) conv=fsync status=none || t_fail "write synced"
	for i in $(seq 1 30); do
		head -c $((i * 997 + round)) /dev/urandom >"$d/small$i" || t_fail "write small$i"
		[ $((i % 7)) = 0 ] && sync "$d/small$i"
	done
	mv "$d/small1" "$d/renamed" || t_fail "rename"
	rm "$d/small2" || t_fail "unlink"
	[ $round -gt 1 ] && { head -c 123457 /dev/urandom >"$M/r1/big" || t_fail "overwrite r1/big"; }
	head -c $((2 * 1048576 + round * 4099)) /dev/urandom >"$d/last" || t_fail "write last"
	# the checksums come from the page cache; the last write is the one just before umount
	(cd "$d" && sha256sum -- *) >"$T_WORK/sums$round" || t_fail "sha256sum"
	[ $round -gt 1 ] && (cd "$M/r1" && sha256sum -- *) >"$T_WORK/sums1"
	head -c 777777 /dev/urandom >"$T_WORK/lastbytes" && cp "$T_WORK/lastbytes" "$d/final" || t_fail "final write"
	echo "$(sha256sum <"$T_WORK/lastbytes" | cut -d' ' -f1)  final" >>"$T_WORK/sums$round"

	case $round in
	1 | 2)
		how="umount $M"
		umount "$M" 2>"$T_WORK/umount.err" || t_fail "$how exited $?: $(cat "$T_WORK/umount.err")"
		;;
	3)
		how="umount -v $M"
		umount -v "$M" >"$T_WORK/umount.err" 2>&1 || t_fail "$how exited $?: $(cat "$T_WORK/umount.err")"
		grep -q "^umount.dmafs: $M: served by dmafs daemon $pids " "$T_WORK/umount.err" ||
			t_fail "$how did not run umount.dmafs for daemon $pids: $(cat "$T_WORK/umount.err")"
		;;
	4)
		how="umount -c -v $M (as systemd unmounts)"
		umount -c -v "$M" >"$T_WORK/umount.err" 2>&1 || t_fail "$how exited $?: $(cat "$T_WORK/umount.err")"
		grep -q "^umount.dmafs: $M: served by dmafs daemon $pids " "$T_WORK/umount.err" ||
			t_fail "$how did not run umount.dmafs: $(cat "$T_WORK/umount.err")"
		;;
	5)
		# without the utab marker umount(8) reads mountinfo (type fuse.dmafs) with -c
		how="umount -c -v $M without the utab marker"
		umount --fake -i "$M" || t_fail "umount --fake -i (drops the utab entry)"
		t_is_mounted "$M" || t_fail "umount --fake unmounted $M"
		umount -c -v "$M" >"$T_WORK/umount.err" 2>&1 || t_fail "$how exited $?: $(cat "$T_WORK/umount.err")"
		grep -q "^umount.fuse.dmafs: $M: served by dmafs daemon $pids " "$T_WORK/umount.err" ||
			t_fail "$how did not run umount.fuse.dmafs: $(cat "$T_WORK/umount.err")"
		;;
	esac
	t_log "round $round: $how returned with the daemon gone and every member free"
	after_umount "round $round: $how" "$pids"
	t_fsck 0 "${T_LOOPDEVS[@]}"
	t_mount "$T_MEMBERS" "$M" commit=3600
	verify_rounds $round
	t_umount "$M"
done

t_log "fusermount3 -u returns early; umount.dmafs --wait waits for the daemon"
t_mount "$T_MEMBERS" "$M" commit=3600
pids=$(t_daemon_pids "$M")
head -c 32M /dev/urandom >"$M/w" || t_fail "write w"
sum=$(sha256sum <"$M/w")
fusermount3 -u "$M" || t_fail "fusermount3 -u"
"$HELPER" --wait "$M" 2>"$T_WORK/wait.err" || t_fail "umount.dmafs --wait exited $?: $(cat "$T_WORK/wait.err")"
after_umount "fusermount3 -u + umount.dmafs --wait" "$pids"
"$HELPER" --wait "$M" 2>"$T_WORK/wait.err" || t_fail "a second --wait (nothing left to wait for) exited $?"
t_mount "$T_MEMBERS" "$M" commit=3600
[ "$(sha256sum <"$M/w")" = "$sum" ] || t_fail "w differs after fusermount3 -u + --wait"

t_log "umount -l with a file open: returns at once, the daemon serves until the close"
pids=$(t_daemon_pids "$M")
exec 7<"$M/w"
umount -l "$M" || t_fail "umount -l exited $?"
t_is_mounted "$M" && t_fail "umount -l left $M in the mount table"
sleep 0.5
t_running "$pids" || t_fail "the daemon exited while a file of the detached mount was open"
head -c 4096 <&7 >/dev/null || t_fail "read from the open file after umount -l"
exec 7<&-
"$HELPER" --wait "$M" 2>"$T_WORK/wait.err" || t_fail "--wait after umount -l exited $?: $(cat "$T_WORK/wait.err")"
after_umount "umount -l, close, umount.dmafs --wait" "$pids"

t_log "umount after kill -9 of the daemon: unmounts, exit status 2, says the daemon did not finish"
t_mount "$T_MEMBERS" "$M"
pids=$(t_daemon_pids "$M")
kill -9 $pids
while t_running "$pids"; do sleep 0.05; done
umount "$M" 2>"$T_WORK/umount.err"
rc=$?
[ $rc = 2 ] || t_fail "umount after kill -9 exited $rc, expected 2: $(cat "$T_WORK/umount.err")"
grep -q "unmounted, but dmafs daemon $pids had exited without finishing" "$T_WORK/umount.err" || t_fail "umount after kill -9 says: $(cat "$T_WORK/umount.err")"
t_is_mounted "$M" && t_fail "umount after kill -9 left $M mounted"
t_mount "$T_MEMBERS" "$M"
verify_rounds 5
t_umount "$M"

t_log "umount.dmafs on what is not a dmafs mount: exit 32, a clear message, nothing unmounted"
mkdir -p "$T_WORK/tmpfs" "$T_WORK/plain"
mount -t tmpfs -o size=1M none "$T_WORK/tmpfs" || t_fail "mount tmpfs"
t_register mnt "$T_WORK/tmpfs"
"$HELPER" "$T_WORK/tmpfs" 2>"$T_WORK/h.err"
rc=$?
[ $rc = 32 ] || t_fail "umount.dmafs on a tmpfs exited $rc, expected 32"
grep -q "not a dmafs mount (type tmpfs)" "$T_WORK/h.err" || t_fail "umount.dmafs on a tmpfs says: $(cat "$T_WORK/h.err")"
t_is_mounted "$T_WORK/tmpfs" || t_fail "umount.dmafs unmounted a tmpfs"
umount "$T_WORK/tmpfs" || t_fail "umount tmpfs"
for p in "$T_WORK/plain" "$T_WORK/missing"; do
	"$HELPER" "$p" 2>"$T_WORK/h.err"
	rc=$?
	[ $rc = 32 ] || t_fail "umount.dmafs $p exited $rc, expected 32"
	grep -q "not mounted\|No such file" "$T_WORK/h.err" || t_fail "umount.dmafs $p says: $(cat "$T_WORK/h.err")"
done
"$HELPER" >/dev/null 2>&1 && t_fail "umount.dmafs without arguments succeeded"

t_log "a final commit that fails on a member: umount exits 2 and says why"
F=$T_WORK/ff
CTL=$T_WORK/ctl
: >"$CTL"
truncate -s 256M "$T_WORK/fimg0" "$T_WORK/fimg1" || t_fail "images"
FM1=$(losetup -f --show "$T_WORK/fimg1") || t_skip "no free loop device"
t_register loop "$FM1"
ff_start "$T_WORK/fimg0" "$CTL" "$F"
FM0=$(losetup -f --show "$F/disk") || t_skip "no free loop device"
t_register loop "$FM0"
t_mkfs -f "$FM0" "$FM1"
FMNT=$T_WORK/fmnt
t_mount "$FM0,$FM1" "$FMNT" commit=3600
pids=$(t_daemon_pids "$FMNT")
head -c 5M /dev/urandom >"$FMNT/unsynced" || t_fail "write on the faulty filesystem"
echo "0 $((256 * 1048576))" >"$CTL" # member 0 (a metadata log copy) now fails every I/O
umount "$FMNT" 2>"$T_WORK/umount.err"
rc=$?
[ $rc = 2 ] || t_fail "umount with a failing final commit exited $rc, expected 2: $(cat "$T_WORK/umount.err")"
grep -q "unmounted, but dmafs daemon $pids failed to finish: .*Input/output error" "$T_WORK/umount.err" ||
	t_fail "umount with a failing final commit says: $(cat "$T_WORK/umount.err")"
t_log "  it said: $(cat "$T_WORK/umount.err")"
for p in $pids; do t_running "$p" && t_fail "daemon $p still running after the failed unmount"; done
t_is_mounted "$FMNT" && t_fail "$FMNT still mounted"
grep -q "TARGET=$FMNT " /run/mount/utab 2>/dev/null && t_fail "utab entry of $FMNT left behind"
t_log "PASS"
