#!/bin/bash
# Description: fsck(8) runs fsck.dmafs (dmafs-fsck by that name) for fsck -t dmafs and for
# fstab lines of type dmafs with a pass number (fsck -A), with fsck's options and exit
# codes: a clean filesystem exits 0 with -n, -p, -a and -y; a damaged superblock is
# repaired by -p (exit 1), then clean; a damage whose repair loses changes (the current
# metadata generation) makes -p write nothing, say UNEXPECTED INCONSISTENCY and exit 4,
# and -y repair it (exit 1); a mounted filesystem exits 8 with "unmount it first"; bad
# usage exits 16. util-linux fsck looks in /sbin and then PATH: this build's fsck.dmafs is
# put first in PATH (skips when /sbin has another one).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
command -v fsck >/dev/null || t_skip "fsck(8) not installed (util-linux)"
fsck --version 2>/dev/null | grep -q util-linux || t_skip "fsck(8) is not util-linux's"
FSCKBIN=$(readlink -f "$top_builddir/tools/dmafs-fsck")
[ -x "$FSCKBIN" ] || t_skip "dmafs-fsck not built"
if [ -e /sbin/fsck.dmafs ] && [ "$(readlink -f /sbin/fsck.dmafs)" != "$FSCKBIN" ]; then
	t_skip "/sbin/fsck.dmafs is another program (an installed dmafs): fsck(8) would run it first"
fi
t_workdir
W=$T_WORK
mkdir -p "$W/bin" && ln -s "$FSCKBIN" "$W/bin/fsck.dmafs" || t_fail "linking fsck.dmafs"
export PATH=$W/bin:$PATH
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$W/mnt
t_mount "$T_MEMBERS" "$M"
head -c 2000000 /dev/urandom >"$M/f" || t_fail "write"
SUM=$(sha256sum <"$M/f")
t_log "mounted: exit 8, unmount it first"
fsck -t dmafs -n "$T_MEMBERS" >"$W/out" 2>&1
rc=$?
[ $rc = 8 ] || t_fail "fsck -t dmafs of a mounted filesystem exited $rc, expected 8: $(cat "$W/out")"
grep -q "unmount it first" "$W/out" || t_fail "fsck of a mounted filesystem does not say to unmount it: $(cat "$W/out")"
t_umount "$M"

# check WANT ARGS... - fsck ARGS (fsck's own, then the checker's) must exit WANT
check() {
	local want=$1 rc
	shift
	fsck "$@" >"$W/out" 2>&1
	rc=$?
	[ $rc = "$want" ] || t_fail "fsck $* exited $rc, expected $want: $(cat "$W/out")"
}
t_log "clean: 0 with -n, -p, -a, -y and none"
for o in -n -p -a -y ""; do
	check 0 -t dmafs $o "$T_MEMBERS"
done
grep -q "fsck.dmafs" "$W/out" && t_fail "a clean -y printed more than fsck's banner: $(cat "$W/out")"
check 0 -V -t dmafs -p "$T_MEMBERS"
grep -q "fsck.dmafs -p $T_MEMBERS" "$W/out" || t_fail "fsck -V did not show fsck.dmafs run: $(cat "$W/out")"

t_log "damaged primary superblock of member 1: -n 4, -p repairs it (1), then clean"
dd if=/dev/urandom of="${T_IMGS[1]}" bs=4096 count=1 conv=notrunc status=none
check 4 -t dmafs -n "$T_MEMBERS"
check 1 -t dmafs -p "$T_MEMBERS"
grep -q "FIXED: member 1 .*primary superblock.*rewritten" "$W/out" || t_fail "-p does not say what it fixed: $(cat "$W/out")"
check 0 -t dmafs -n "$T_MEMBERS"

t_log "the current metadata generation damaged in both log copies: -p writes nothing (4), -y recovers (1)"
t_mount "$T_MEMBERS" "$M"
t_umount "$M"
for img in "${T_IMGS[0]}" "${T_IMGS[1]}"; do
	t_py - "$img" <<'PY' || t_fail "could not damage the snapshot of $img"
import struct, sys
# 128 MiB members: log at 1 MiB, halves of 4 MiB; the active half has the higher gen
f = open(sys.argv[1], "r+b")
gens = []
for half in (0, 1):
    f.seek((1 << 20) + half * (4 << 20)); h = f.read(4096)
    gens.append(struct.unpack_from("<Q", h, 32)[0] if h[:8] == b"DMAFSLG1" else -1)
active = gens.index(max(gens))
pos = (1 << 20) + active * (4 << 20) + 4096 + 20
f.seek(pos); b = f.read(1); f.seek(pos); f.write(bytes([b[0] ^ 0xff]))
PY
done
dd if=/dev/urandom of="${T_IMGS[0]}" bs=4096 count=1 conv=notrunc status=none # and a safe one
sha0=$(sha256sum <"${T_IMGS[0]}")
check 4 -t dmafs -p "$T_MEMBERS"
grep -q "UNEXPECTED INCONSISTENCY.*by hand" "$W/out" || t_fail "-p does not say to repair by hand: $(cat "$W/out")"
grep -q "^FIXED" "$W/out" && t_fail "-p reports a fix although it wrote nothing: $(cat "$W/out")"
[ "$(sha256sum <"${T_IMGS[0]}")" = "$sha0" ] || t_fail "-p wrote to member 0 although it gave up"
check 1 -t dmafs -y "$T_MEMBERS"
check 0 -t dmafs "$T_MEMBERS"
t_mount "$T_MEMBERS" "$M"
[ "$(sha256sum <"$M/f")" = "$SUM" ] || t_fail "data changed by the repairs"
t_umount "$M"

t_log "fstab's pass number: fsck -A runs fsck.dmafs for the dmafs line"
printf '%s %s dmafs defaults,noauto 0 2\n' "$T_MEMBERS" "$M" >"$W/fstab"
LIBMOUNT_FSTAB=$W/fstab check 0 -A -V -p
grep -q "fsck.dmafs -p $T_MEMBERS" "$W/out" || t_fail "fsck -A did not run fsck.dmafs: $(cat "$W/out")"
dd if=/dev/urandom of="${T_IMGS[1]}" bs=4096 count=1 conv=notrunc status=none
LIBMOUNT_FSTAB=$W/fstab check 1 -A -p
LIBMOUNT_FSTAB=$W/fstab check 0 -A -p

t_log "bad usage: 16"
check 16 -t dmafs -Z "$T_MEMBERS"
check 16 -t dmafs -n -y "$T_MEMBERS"
"$W/bin/fsck.dmafs" >/dev/null 2>&1
rc=$?
[ $rc = 16 ] || t_fail "fsck.dmafs without members exited $rc, expected 16"
t_log "PASS"
