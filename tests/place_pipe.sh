#!/bin/bash
# Description: host placements through a small staging ring (-o staging_mb=4, 4 members,
# 256 KiB stripe units; runs place_pipe): concurrent placements into one buffer, several
# buffers and from several processes; misaligned single ranges 4x-16x the ring; unaligned
# ranges around stripe-unit boundaries and to EOF with the bytes around them untouched;
# clients killed mid-placement, after which big placements still complete; the daemon
# keeps serving POSIX reads; under -o verify_place a flipped byte fails every placement
# covering its block with EIO while placements around it stay byte-exact.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
PP=$top_builddir/tests/place_pipe
[ -x "$PP" ] || t_skip "not built: $PP"
RING_MB=4
t_workdir
M=$T_WORK/mnt
t_images 4 256M
t_mkfs -s 256K "${T_IMGS[@]}"
OPTS=staging_mb=$RING_MB${DMAFS_TEST_MOUNT_OPTS:+,$DMAFS_TEST_MOUNT_OPTS}
t_mount "$T_MEMBERS" "$M" "$OPTS"
SIZE=$((64 * 1048576 + 12345))
t_log "a 64 MiB + 12345 byte random file over 4 members with 256 KiB stripe units, -o $OPTS"
head -c $SIZE /dev/urandom >"$T_WORK/ref" || t_fail "urandom"
cp "$T_WORK/ref" "$M/f" || t_fail "copy in"

alive() { # alive WHAT - the daemon still runs and serves POSIX reads of the whole file
	[ -n "$(t_daemon_pids "$M")" ] || t_fail "the daemon died ($1): $(tail -n 5 "$T_DAEMON_ERR")"
	timeout 120 cmp "$T_WORK/ref" "$M/f" || t_fail "POSIX read differs from the reference ($1)"
}

for mode in concurrent big edges kill; do
	t_log "$mode"
	t_timeout 600 "$PP" $mode "$M/f" "$T_WORK/ref" $RING_MB || t_fail "place_pipe $mode (see above)"
	alive "after $mode"
done

t_log "verify_place: flip one byte of f on member 1, remount with -o verify_place,$OPTS"
read -r BLK MEMBER MOFF <<<"$("$PP" where "$M/f")"
[ -n "$MOFF" ] || t_fail "no block of f found to damage"
t_umount "$M"
"$PP" flip "${T_IMGS[$MEMBER]}" $((MOFF + 1000)) || t_fail "flip"
t_mount "$T_MEMBERS" "$M" "verify_place,$OPTS"
t_timeout 600 "$PP" verify "$M/f" "$T_WORK/ref" $RING_MB $((BLK + 1000)) ||
	t_fail "place_pipe verify (see above)"
[ -n "$(t_daemon_pids "$M")" ] || t_fail "the daemon died under verify_place"
timeout 120 cmp -n "$BLK" "$T_WORK/ref" "$M/f" || t_fail "POSIX read before the damaged block differs"
t_umount "$M"
t_log "PASS"
