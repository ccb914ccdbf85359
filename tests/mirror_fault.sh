#!/bin/bash
# Description: a mirror member that fails while mounted (member 1, which also holds a copy
# of the metadata log, on faultfs, every read, write and sync of it failing with EIO): POSIX reads and host placements (default options, no
# checksum checks) of every file return its bytes from the other copies; the member is
# marked failed (user.dmafs.members, dmafs-check), logged once, and the filesystem takes
# no changes (EROFS) and cannot be remounted read-write; what was written before the
# failure and not yet committed is committed to the other log copy at unmount (a degraded
# mount, the failing device named and left out, holds every file). Then, mounted,
# dmafs-replace --member 1 MOUNTPOINT rebuilds it on a new image, which serves reads at
# once; mounted again with it, the filesystem is read-write, holds every file and scrubs
# clean.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
[ -w /proc/sys/vm/drop_caches ] || t_skip "cannot write /proc/sys/vm/drop_caches"
command -v getfattr >/dev/null || t_skip "getfattr not installed (Debian package attr)"
LOAD=$top_builddir/tools/dmafs-load
REPLACE=$top_builddir/tools/dmafs-replace
CHECK=$top_builddir/tools/dmafs-check
t_workdir
W=$T_WORK
M=$W/mnt
t_images 3 192M
t_faultfs "${T_IMGS[1]}"
I0=${T_IMGS[0]} I1=$T_FF/disk I2=${T_IMGS[2]}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
member_field() {
	getfattr --only-values -n user.dmafs.members "$1" 2>/dev/null |
		awk -v m="member=$2" -v f="$3=" '$1 == m { for (i = 2; i <= NF; i++) if (index($i, f) == 1) print substr($i, length(f) + 1) }'
}

"$MKFS" -q --data mirror "$I0" "$I1" "$I2" >"$W/mkfs.out" 2>&1 || t_fail "mkfs: $(cat "$W/mkfs.out")"
t_mount_fg "$I0,$I1,$I2" "$M"
mkdir "$M/d"
for i in $(seq 1 20); do head -c $((RANDOM * 29 % 3000000 + 1)) /dev/urandom >"$M/d/f$i"; done
head -c 40M /dev/urandom >"$M/big"
sync
# the last file's metadata is not committed yet when the member fails: it is at unmount
head -c 2M /dev/urandom >"$M/late"
(cd "$M" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$W/sums"

t_log "member 1 fails: every read, write and sync of it is an I/O error"
echo "0 $((1 << 40))" >"$T_FF_CTL"
drop_caches
"$LOAD" --target host -q "$M/big" "$M/d" >"$W/load.out" 2>&1 || t_fail "placements with member 1 failing: $(tail -3 "$W/load.out")"
(cd "$M" && sha256sum -c --quiet "$W/sums") >"$W/sums.out" 2>&1 || t_fail "files differ with member 1 failing: $(head -3 "$W/sums.out")"
st=$(member_field "$M" 1 state)
[ "$st" = failed ] || t_fail "member 1's state is '$st', not failed"
[ "$(grep -c 'member 1 (.*) failed' "$T_DAEMON_ERR")" = 1 ] || t_fail "the failure is not logged once: $(grep -c failed "$T_DAEMON_ERR") lines"
touch "$M/new" 2>"$W/touch.err" && t_fail "a new file after member 1 failed"
grep -q "Read-only" "$W/touch.err" || t_fail "a write after the failure: $(cat "$W/touch.err"), not EROFS"
mount -o remount,rw "$M" 2>"$W/remount.err" && [ -w "$M" ] && touch "$M/new2" 2>/dev/null &&
	t_fail "remounted read-write with a failed member"
"$CHECK" "$M" >"$W/check.out" 2>&1
grep -q "failed: it serves no reads" "$W/check.out" || t_fail "dmafs-check does not show the failed member: $(grep -A5 space "$W/check.out")"
drop_caches
(cd "$M" && sha256sum -c --quiet "$W/sums") >"$W/sums.out" 2>&1 || t_fail "files differ after the failure: $(head -3 "$W/sums.out")"

t_log "unmounted, what was logged before the failure is committed to member 0's log copy"
t_umount "$M"
# all three named: the failing device is left out, as a missing member
t_mount_fg "$I0,$I1,$I2" "$M" degraded
grep -q "left out" "$T_DAEMON_ERR" || t_fail "the unreadable member was not said to be left out: $(cat "$T_DAEMON_ERR")"
[ "$(member_field "$M" 1 state)" = missing ] || t_fail "member 1's state in the degraded mount: $(member_field "$M" 1 state)"
drop_caches
(cd "$M" && sha256sum -c --quiet "$W/sums") >"$W/sums.out" 2>&1 || t_fail "files lost by the unmount after the failure: $(head -3 "$W/sums.out")"

t_log "dmafs-replace --member 1 rebuilds it on a new image while mounted (degraded)"
truncate -s 192M "$W/new1"
"$REPLACE" --member 1 "$M" "$W/new1" >"$W/replace.out" 2>&1 || t_fail "dmafs-replace --member 1 MOUNTPOINT: $(cat "$W/replace.out")"
[ "$(member_field "$M" 1 state)" = ok ] || t_fail "member 1's state after the rebuild: $(member_field "$M" 1 state)"
drop_caches
(cd "$M" && sha256sum -c --quiet "$W/sums") >"$W/sums.out" 2>&1 || t_fail "files differ after the rebuild while mounted: $(head -3 "$W/sums.out")"
t_umount "$M"
t_fsck 0 --scrub "$I0" "$W/new1" "$I2"
t_mount_fg "$I0,$W/new1,$I2" "$M"
drop_caches
(cd "$M" && sha256sum -c --quiet "$W/sums") >"$W/sums.out" 2>&1 || t_fail "files differ after the rebuild: $(head -3 "$W/sums.out")"
head -c 1M /dev/urandom >"$M/after" || t_fail "no write after the rebuild"
t_umount "$M"
t_log "PASS"
