#!/bin/bash
# Description: a 3-member filesystem on loop devices, made with a label, mounts by LABEL= and
# UUID= (members found by scanning the block devices, in member order whatever the device
# order) through the daemon, through mount.dmafs, through mount -t dmafs dmafs:UUID= and
# through an fstab line dmafs:LABEL= (mount -T, a private fstab): the mount's source is the
# name, mount -a finds it already mounted, umount dmafs:LABEL= unmounts it. Every successful
# mount and unmount, bind mounts of a directory and of a file included (umount.dmafs and
# umount(8)), prints nothing on stdout or stderr; unmounting the daemon's own mount while a
# bind mount stays leaves the daemon serving it. The splice notice, where it applies, is in
# dmafs-check's report and not on the terminal (it is with -o verbose). Root's mounts are
# suid,dev by default, through mount(8) and fstab defaults too; nosuid, nodev, noexec given
# still apply; users (fstab) mounts noexec,nosuid,nodev. dmafs-check --list shows the
# filesystem and its members in order (text and JSON); with member 1 detached, the daemon,
# mount.dmafs, dmafs-fsck and the listing name "member 1 of 3 of dmafs filesystem 'LABEL'
# (UUID ...)"; an unknown label, a label two filesystems share and an unattached image file
# are refused with a message that says what to do.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
CHECK=$top_builddir/tools/dmafs-check
UMOUNT_HELPER=$(readlink -f "$top_builddir/tools/umount.dmafs")
MOUNT_HELPER=$(readlink -f "$T_MOUNT_HELPER")
FSCK=$top_builddir/tools/dmafs-fsck
[ -x "$CHECK" ] || t_skip "dmafs-check not built: $CHECK"
[ -x "$UMOUNT_HELPER" ] || t_skip "umount.dmafs not built: $top_builddir/tools/umount.dmafs"
[ -d /sys/class/block ] || t_skip "no /sys/class/block (sysfs not mounted): nothing to scan"
t_workdir
M=$T_WORK/mnt
B=$T_WORK/bind
BF=$T_WORK/bindfile
mkdir -p "$M" "$B" && touch "$BF" || t_fail "mkdir"
t_register mnt "$M"
t_register mnt "$B"
t_register mnt "$BF"

# mount(8) and umount(8) find helpers in /sbin only: link this build's there for the test
# unless the same programs are there, and remove the links at exit (umount_sync.sh does the
# same). Without them the checks through mount(8) are not run, and the test ends in a skip.
via_mount=1
why_not=
link_helper() {
	local name=$1 target=$2 dst=/sbin/$1
	[ -L "$dst" ] && [ ! -e "$dst" ] && rm -f "$dst" # dangling: left by an interrupted run
	if [ -e "$dst" ]; then
		[ "$(readlink -f "$dst")" = "$target" ] || cmp -s "$dst" "$target" || {
			via_mount=0
			why_not="$dst is not this build's (an installed dmafs, or another test run)"
		}
		return
	fi
	if ln -s "$target" "$dst" 2>/dev/null; then
		t_register file "$dst"
	else
		via_mount=0
		why_not="cannot link $dst"
	fi
}
if mount --version 2>/dev/null | grep -q util-linux; then
	link_helper mount.dmafs "$MOUNT_HELPER"
	link_helper umount.dmafs "$UMOUNT_HELPER"
	link_helper umount.fuse.dmafs "$UMOUNT_HELPER"
else
	via_mount=0
	why_not="mount(8) is not util-linux's"
fi

# quiet DESC CMD... - CMD must exit 0 and print nothing on stdout or stderr
quiet() {
	local desc=$1 rc
	shift
	"$@" >"$T_WORK/out" 2>&1
	rc=$?
	[ $rc = 0 ] || t_fail "$desc: '$*' exited $rc: $(cat "$T_WORK/out")"
	[ -s "$T_WORK/out" ] && t_fail "$desc: '$*' succeeded but printed: $(cat "$T_WORK/out")"
	return 0
}
# refused DESC PATTERN CMD... - CMD must exit non-zero with PATTERN in its output, and
# mount nothing
refused() {
	local desc=$1 pat=$2 rc
	shift 2
	"$@" >"$T_WORK/out" 2>&1
	rc=$?
	if t_is_mounted "$M"; then
		t_umount "$M"
		t_fail "$desc: '$*' mounted"
	fi
	[ $rc != 0 ] || t_fail "$desc: '$*' exited 0"
	grep -qF -- "$pat" "$T_WORK/out" || t_fail "$desc: '$*' said '$(cat "$T_WORK/out")', not '$pat'"
	t_log "  -> $(head -n 1 "$T_WORK/out")"
}
# registered MNT - register the daemon serving MNT for the cleanup
registered() {
	local p
	t_wait_mounted "$1" 30 || t_fail "$1 not mounted"
	for p in $(t_daemon_pids "$1"); do t_register pid "$p"; done
}
# unmount MNT - umount.dmafs MNT, silent, and the daemon gone when it returns
unmount() {
	local pids p
	pids=$(t_daemon_pids "$1")
	quiet "unmount $1" "$UMOUNT_HELPER" "$1"
	for p in $pids; do t_running "$p" && t_fail "umount.dmafs $1 returned with daemon $p running"; done
	return 0
}
# source_of MNT - the mount's source in mountinfo (the last mount on MNT)
source_of() { awk -v m="$1" '$5 == m { for (i = 7; $i != "-"; i++); print $(i + 2) }' /proc/self/mountinfo | tail -n 1; }
# flags MNT - the per-mount options of MNT
flags() { awk -v m="$1" '$5 == m { print $6 }' /proc/self/mountinfo | tail -n 1; }
has() { case ",$1," in *,"$2",*) return 0 ;; esac; return 1; }

# The filesystem: three loop devices attached in reverse member order, so that the scan's
# order (by device) is not the member order.
LABEL=t-mount-name-$$-$RANDOM
t_loops 3 128M
DEVS=("${T_LOOPDEVS[2]}" "${T_LOOPDEVS[1]}" "${T_LOOPDEVS[0]}")
out=$("$MKFS" -L "$LABEL" "${DEVS[@]}" 2>&1) || t_fail "mkfs.dmafs -L $LABEL: $out"
UUID=$(sed -n 's/^dmafs filesystem \([0-9a-f-]*\).*/\1/p' <<<"$out")
[ ${#UUID} = 36 ] || t_fail "no UUID in the output of mkfs.dmafs: $out"
t_log "filesystem $LABEL, UUID $UUID, members ${DEVS[*]}"

t_log "dmafs-check --list shows it, members in order"
"$CHECK" --list "LABEL=$LABEL" >"$T_WORK/list" 2>"$T_WORK/list.err" ||
	t_fail "dmafs-check --list LABEL=$LABEL exited $?: $(cat "$T_WORK/list" "$T_WORK/list.err")"
grep -qF "Label: '$LABEL'  UUID: $UUID" "$T_WORK/list" || t_fail "listing: no label and UUID line: $(cat "$T_WORK/list")"
for i in 0 1 2; do
	grep -Eq "^	member +$i +${DEVS[$i]} " "$T_WORK/list" || t_fail "listing: member $i is not ${DEVS[$i]}: $(cat "$T_WORK/list")"
done
"$CHECK" --list >"$T_WORK/listall" 2>/dev/null
grep -qF "Label: '$LABEL'" "$T_WORK/listall" || t_fail "dmafs-check --list without a name does not show $LABEL"
"$CHECK" --list --json "UUID=$UUID" >"$T_WORK/list.json" 2>/dev/null || t_fail "dmafs-check --list --json UUID=$UUID exited $?"
t_py - "$T_WORK/list.json" "$LABEL" "$UUID" "${DEVS[@]}" <<'EOF' || t_fail "listing, JSON"
import json, sys
d = json.load(open(sys.argv[1]))
fs = d["filesystems"]
assert len(fs) == 1, fs
f = fs[0]
assert (f["label"], f["uuid"], f["member_count"], f["complete"]) == (sys.argv[2], sys.argv[3], 3, True), f
assert [m["path"] for m in f["members"]] == sys.argv[4:], f["members"]
EOF

# mounted_ok WHAT SOURCE - the mount on $M shows SOURCE, and the file written first is there
mounted_ok() {
	registered "$M"
	[ "$(source_of "$M")" = "$2" ] || t_fail "$1: the mount's source is '$(source_of "$M")', expected '$2'"
	cmp -s "$T_WORK/ref" "$M/ref" || t_fail "$1: the file written at the first mount is not there"
}

t_log "the daemon: dmafs LABEL=$LABEL, silent; the members are in the record, in order"
head -c 1000000 /dev/urandom >"$T_WORK/ref"
quiet "dmafs LABEL=" "$DMAFS" "LABEL=$LABEL" "$M"
registered "$M"
cp "$T_WORK/ref" "$M/ref" && mkdir "$M/dir" && echo data >"$M/file" || t_fail "writing"
mounted_ok "dmafs LABEL=" "dmafs:LABEL=$LABEL"
"$CHECK" --json "$M" >"$T_WORK/check.json" 2>"$T_WORK/check.err" || t_fail "dmafs-check $M: $(cat "$T_WORK/check.err")"
t_py - "$T_WORK/check.json" "${DEVS[@]}" <<'EOF' || t_fail "dmafs-check of a mount by label: members"
import json, sys
m = json.load(open(sys.argv[1]))["mount"]
assert [x["path"] for x in m["members"]] == sys.argv[2:], m
EOF
unmount "$M"

t_log "the daemon: dmafs UUID= (upper case), silent"
quiet "dmafs UUID=" "$DMAFS" "UUID=${UUID^^}" "$M"
mounted_ok "dmafs UUID=" "dmafs:UUID=${UUID^^}"
unmount "$M"

t_log "mount.dmafs dmafs:LABEL= and UUID=, as mount(8) runs it: silent"
helper() { PATH="$top_builddir/fs:$PATH" "$MOUNT_HELPER" "$@"; }
quiet "mount.dmafs dmafs:LABEL=" helper "dmafs:LABEL=$LABEL" "$M" -o rw
mounted_ok "mount.dmafs dmafs:LABEL=" "dmafs:LABEL=$LABEL"
unmount "$M"
quiet "mount.dmafs UUID=" helper "UUID=$UUID" "$M"
mounted_ok "mount.dmafs UUID=" "dmafs:UUID=$UUID"
unmount "$M"

t_log "the splice notice: in the daemon's record and dmafs-check, on the terminal only with -o verbose"
# the daemon notes it when no pipe of 1 MiB + 4 KiB can be made (writebehind.sh checks why)
fits=$(t_py -c 'import fcntl, os
r, w = os.pipe()
try:
    print(1 if fcntl.fcntl(r, 1031, (1 << 20) + 4096) >= (1 << 20) + 4096 else 0)
except OSError:
    print(0)') || t_fail "pipe probe failed"
"$DMAFS" -o verbose "LABEL=$LABEL" "$M" 2>"$T_WORK/verbose.err" || t_fail "dmafs -o verbose: $(cat "$T_WORK/verbose.err")"
registered "$M"
unmount "$M"
if [ "$fits" = 0 ]; then
	grep -q "copied twice" "$T_WORK/verbose.err" ||
		t_fail "dmafs -o verbose: no splice notice on stderr: $(cat "$T_WORK/verbose.err")"
	quiet "dmafs LABEL= (notice)" "$DMAFS" "LABEL=$LABEL" "$M"
	registered "$M"
	"$CHECK" --json "$M" >"$T_WORK/check.json" 2>"$T_WORK/check.err" || t_fail "dmafs-check $M: $(cat "$T_WORK/check.err")"
	t_py - "$T_WORK/check.json" <<'EOF' || t_fail "dmafs-check does not report the splice notice: $(cat "$T_WORK/check.json")"
import json, sys
m = json.load(open(sys.argv[1]))["mount"]
assert any("copied twice" in n for n in m["notices"]), m.get("notices")
EOF
	"$CHECK" "$M" 2>/dev/null | grep -q "copied twice" || t_fail "dmafs-check (text) does not show the splice notice"
	unmount "$M"
else
	t_log "  (a pipe of 1 MiB + 4 KiB can be made here: no notice to check)"
fi

t_log "bind mounts of a directory and of a file: umount.dmafs silent, the daemon goes on"
quiet "dmafs LABEL= (binds)" "$DMAFS" "LABEL=$LABEL" "$M"
registered "$M"
pid=$(t_daemon_pids "$M")
mount --bind "$M/dir" "$B" && mount --bind "$M/file" "$BF" || t_fail "mount --bind"
quiet "umount.dmafs of a directory bind" "$UMOUNT_HELPER" "$B"
quiet "umount.dmafs of a file bind" "$UMOUNT_HELPER" "$BF"
t_running "$pid" || t_fail "the daemon ended with a bind mount's unmount"
[ "$(cat "$M/file")" = data ] || t_fail "the mount does not answer after its bind mounts went"
t_log "the daemon's own mount first, a bind mount left: silent, the daemon serves the bind"
mount --bind "$M/dir" "$B" || t_fail "mount --bind"
quiet "umount.dmafs of the daemon's mount, a bind left" "$UMOUNT_HELPER" "$M"
t_running "$pid" || t_fail "the daemon ended while a bind mount of its filesystem stays"
touch "$B/x" || t_fail "the bind mount does not answer after the daemon's own mount went"
quiet "umount.dmafs of the last (bind) mount" "$UMOUNT_HELPER" "$B"
t_running "$pid" && t_fail "umount.dmafs of the last mount returned with the daemon running"

t_log "root's mounts are suid,dev; nosuid, nodev, noexec given apply (the daemon)"
quiet "dmafs (defaults)" "$DMAFS" "LABEL=$LABEL" "$M"
registered "$M"
mo=$(flags "$M")
has "$mo" nosuid || has "$mo" nodev || has "$mo" noexec && t_fail "root's mount by default: $mo, expected suid,dev,exec"
unmount "$M"
quiet "dmafs -o nosuid,nodev,noexec" "$DMAFS" -o nosuid,nodev,noexec "LABEL=$LABEL" "$M"
registered "$M"
mo=$(flags "$M")
for f in nosuid nodev noexec; do has "$mo" $f || t_fail "dmafs -o nosuid,nodev,noexec: no $f in $mo"; done
unmount "$M"

if [ $via_mount = 1 ]; then
	t_log "mount(8): mount -t dmafs LABEL= fails in mount(8) itself (libblkid knows no dmafs)"
	mount -t dmafs "LABEL=$LABEL" "$M" >"$T_WORK/out" 2>&1 && t_fail "mount -t dmafs LABEL= mounted: mount(8) passes it on now (update dmafs(8))"
	t_log "  -> $(cat "$T_WORK/out")"

	t_log "mount(8): mount -t dmafs dmafs:UUID=, silent, suid,dev; -o nosuid / nodev / noexec apply"
	quiet "mount -t dmafs dmafs:UUID=" mount -t dmafs "dmafs:UUID=$UUID" "$M"
	mounted_ok "mount -t dmafs dmafs:UUID=" "dmafs:UUID=$UUID"
	mo=$(flags "$M")
	has "$mo" nosuid || has "$mo" nodev || has "$mo" noexec && t_fail "mount -t dmafs by root: $mo, expected suid,dev,exec"
	quiet "umount (mount -t)" umount "$M"
	for f in nosuid nodev noexec; do
		quiet "mount -t dmafs -o $f" mount -t dmafs -o "$f" "dmafs:UUID=$UUID" "$M"
		registered "$M"
		mo=$(flags "$M")
		has "$mo" $f || t_fail "mount -t dmafs -o $f: no $f in $mo"
		for g in nosuid nodev noexec; do
			[ $g = $f ] || ! has "$mo" $g || t_fail "mount -t dmafs -o $f: $g in $mo too"
		done
		quiet "umount (-o $f)" umount "$M"
	done

	t_log "fstab (mount -T): dmafs:LABEL= defaults, silent, suid,dev; mount -a finds it mounted"
	M2=$T_WORK/mnt2
	M3=$T_WORK/mnt3
	mkdir -p "$M2" "$M3" || t_fail "mkdir"
	t_register mnt "$M2"
	t_register mnt "$M3"
	cat >"$T_WORK/fstab" <<EOF
dmafs:LABEL=$LABEL $M dmafs defaults 0 0
dmafs:LABEL=$LABEL $M2 dmafs nosuid,nodev,noexec,noauto 0 0
dmafs:UUID=$UUID $M3 dmafs users,noauto 0 0
EOF
	quiet "mount -T fstab $M" mount -T "$T_WORK/fstab" "$M"
	mounted_ok "fstab defaults" "dmafs:LABEL=$LABEL"
	mo=$(flags "$M")
	has "$mo" nosuid || has "$mo" nodev || has "$mo" noexec && t_fail "fstab defaults: $mo, expected suid,dev,exec"
	pid=$(t_daemon_pids "$M")
	quiet "mount -T fstab -a with the line mounted" mount -T "$T_WORK/fstab" -a
	[ "$(t_daemon_pids "$M")" = "$pid" ] || t_fail "mount -a started another daemon: $(t_daemon_pids "$M")"
	t_log "umount(8) of bind mounts (umount.fuse.dmafs): silent, the daemon goes on"
	mount --bind "$M/dir" "$B" && mount --bind "$M/file" "$BF" || t_fail "mount --bind"
	quiet "umount of a directory bind" umount "$B"
	quiet "umount of a file bind" umount "$BF"
	t_running "$pid" || t_fail "the daemon ended with a bind mount's unmount through umount(8)"
	quiet "umount dmafs:LABEL=" umount "dmafs:LABEL=$LABEL"
	t_is_mounted "$M" && t_fail "umount dmafs:LABEL= left $M mounted"
	t_running "$pid" && t_fail "umount dmafs:LABEL= returned with the daemon running"

	t_log "fstab (mount -T): nosuid,nodev,noexec apply; users mounts noexec,nosuid,nodev"
	quiet "mount -T fstab $M2" mount -T "$T_WORK/fstab" "$M2"
	registered "$M2"
	mo=$(flags "$M2")
	for f in nosuid nodev noexec; do has "$mo" $f || t_fail "fstab nosuid,nodev,noexec: no $f in $mo"; done
	quiet "umount $M2" umount "$M2"
	quiet "mount -T fstab $M3" mount -T "$T_WORK/fstab" "$M3"
	registered "$M3"
	mo=$(flags "$M3")
	for f in nosuid nodev noexec; do has "$mo" $f || t_fail "fstab users: no $f in $mo"; done
	quiet "umount $M3" umount "$M3"
fi

t_log "refused: an unknown label, a UUID that is none, dmafs: with neither"
refused "unknown label" "no dmafs filesystem with LABEL=$LABEL-none" "$DMAFS" "LABEL=$LABEL-none" "$M"
refused "bad UUID" "not a UUID" "$DMAFS" "UUID=1234" "$M"
refused "dmafs:name" "not a filesystem name" "$DMAFS" "dmafs:$LABEL" "$M"

t_log "member 1 detached: the daemon, mount.dmafs, dmafs-fsck and the listing name it"
losetup -d "${DEVS[1]}" || t_fail "losetup -d ${DEVS[1]}"
want="member 1 of 3 of dmafs filesystem '$LABEL' (UUID $UUID) not found"
refused "member 1 missing (daemon)" "$want" "$DMAFS" "LABEL=$LABEL" "$M"
[ "$(grep -c . "$T_WORK/out")" = 1 ] || t_fail "missing member: more than one line: $(cat "$T_WORK/out")"
refused "member 1 missing (mount.dmafs)" "$want" helper "dmafs:UUID=$UUID" "$M"
refused "member 1 missing (dmafs-fsck)" "$want" "$FSCK" -n "LABEL=$LABEL"
"$CHECK" --list "LABEL=$LABEL" >"$T_WORK/list" 2>/dev/null
rc=$?
[ $rc = 1 ] || t_fail "dmafs-check --list with a member missing exited $rc, expected 1"
grep -Eq "^	member +1 +MISSING" "$T_WORK/list" || t_fail "listing does not name member 1 missing: $(cat "$T_WORK/list")"
DEVS[1]=$(losetup -f --show "$T_WORK/loop1.img") || t_fail "attaching member 1 again"
t_register loop "${DEVS[1]}"
quiet "dmafs LABEL= after member 1 came back" "$DMAFS" "LABEL=$LABEL" "$M"
mounted_ok "member 1 back" "dmafs:LABEL=$LABEL"
unmount "$M"

t_log "an image file is not scanned; attached, its label is one two filesystems share"
truncate -s 96M "$T_WORK/other.img" || t_fail "truncate"
out=$("$MKFS" -L "$LABEL-img" "$T_WORK/other.img" 2>&1) || t_fail "mkfs.dmafs of an image: $out"
refused "image file" "image files are not scanned" "$DMAFS" "LABEL=$LABEL-img" "$M"
other=$(losetup -f --show "$T_WORK/other.img") || t_skip "no free loop device"
t_register loop "$other"
out=$("$MKFS" -f -L "$LABEL" "$other" 2>&1) || t_fail "mkfs.dmafs $other: $out"
refused "label of two filesystems" "LABEL=$LABEL names 2 dmafs filesystems" "$DMAFS" "LABEL=$LABEL" "$M"
quiet "dmafs UUID= with the label shared" "$DMAFS" "UUID=$UUID" "$M"
mounted_ok "UUID with the label shared" "dmafs:UUID=$UUID"
unmount "$M"

t_fsck 0 "UUID=$UUID"
[ $via_mount = 1 ] || t_skip "everything but mount(8) and fstab passed; those were not checked: $why_not"
t_log "PASS"
