#!/bin/bash
# Description: placement into GPU memory through a real mount (runs place_gpu); skips
# (exit 77, reason printed) when no GPU runtime or device is present.  Three fresh mounts,
# each first used by a placement (the cold start): the default options (basic cases);
# -o staging_mb=4,p2p=off, so that every placement goes through a small pinned staging
# ring (concurrency, ranges 4x-16x the ring, stripe-unit edges, killed clients); and the
# same again with 4 threads placing at once as the very first placements. The ring cases
# run with the default copy delay, then with copies at once (copy_delay_us=0) and with a
# delay far longer than a read (20 ms: every slot waits for it). Then the basic and ring
# cases with the warm tier on (tier=256M: later placements served from its pinned memory),
# pinned whole at mount (the default) and as it fills (tier_pin=fill).
# Last, -o p2p=force: the cuFile path where libcufile loads.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
PG=$top_builddir/tests/place_gpu
RING_MB=4
"$PG" probe
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || t_fail "place_gpu probe exited $rc"
t_workdir
M=$T_WORK/mnt
t_images 4 256M
t_mkfs -s 256K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M" "${DMAFS_TEST_MOUNT_OPTS:-}"
t_log "a 64 MiB + 4567 byte random file over 4 members with 256 KiB stripe units"
head -c $((64 * 1048576 + 4567)) /dev/urandom >"$T_WORK/ref" || t_fail "urandom"
cp "$T_WORK/ref" "$M/f" || t_fail "copy in"

# run MODE OPTS [ARGS] - a fresh mount with OPTS, then place_gpu MODE at once
run() {
	local mode=$1 opts=$2 rc
	shift 2
	t_umount "$M"
	t_mount "$T_MEMBERS" "$M" "$opts"
	t_log "$mode${opts:+ (-o $opts)}"
	t_timeout 1200 "$PG" "$mode" "$M/f" "$T_WORK/ref" "$@"
	rc=$?
	[ $rc = 77 ] && exit 77
	[ $rc = 0 ] || t_fail "place_gpu $mode (see above)"
	[ -n "$(t_daemon_pids "$M")" ] || t_fail "the daemon died ($mode): $(tail -n 5 "$T_DAEMON_ERR")"
	timeout 120 cmp "$T_WORK/ref" "$M/f" || t_fail "POSIX read differs from the reference after $mode"
}

PIPE_OPTS=staging_mb=$RING_MB,p2p=off${DMAFS_TEST_MOUNT_OPTS:+,$DMAFS_TEST_MOUNT_OPTS}
run basic "${DMAFS_TEST_MOUNT_OPTS:-}"
run pipe "$PIPE_OPTS" $RING_MB
run pipe "$PIPE_OPTS,copy_delay_us=0" $RING_MB
run cold "$PIPE_OPTS"
run cold "$PIPE_OPTS,copy_delay_us=20000"
# The warm tier: the same placements with tier= (the first of the file fills it; the later
# ones are served from it, copied to the GPU out of its segments, pinned as they fill)
run basic "tier=256M,tier_fill=now${DMAFS_TEST_MOUNT_OPTS:+,$DMAFS_TEST_MOUNT_OPTS}"
read -r _ t_held t_hits _ <<<"$("$top_builddir/tests/tier_place" --stats "$M")" ||
	t_fail "tier_place --stats $M"
t_log "  tier=256M: $t_held bytes held, $t_hits hits"
[ "${t_hits:-0}" -gt 0 ] || t_fail "tier=256M: no GPU placement was served from the tier ($t_held bytes held)"
grep -E "warm tier.*(cannot|failed)" "$T_DAEMON_ERR" && t_fail "tier=256M: the tier could not be pinned (above)"
run pipe "$PIPE_OPTS,tier=256M,tier_fill=now" $RING_MB
# tier_pinned: size held hits misses served filled evicted cap resident shrunk min_free pinned
tier_pinned() {
	"$top_builddir/tests/tier_place" --stats "$M" | awk '{print $12}'
}
p=$(tier_pinned)
t_log "  tier=256M (tier_pin=all): $p bytes pinned"
[ "$p" = $((256 * 1048576)) ] || t_fail "tier=256M, tier_pin=all: $p bytes of the tier pinned, not all of it"
# tier_pin=fill: segments pinned ahead of the fills as they come, never more than the tier
run pipe "$PIPE_OPTS,tier=256M,tier_fill=now,tier_pin=fill" $RING_MB
p=$(tier_pinned)
t_log "  tier=256M (tier_pin=fill): $p bytes pinned"
[ "${p:-0}" -gt 0 ] && [ "$p" -le $((256 * 1048576)) ] ||
	t_fail "tier=256M, tier_pin=fill: $p bytes of the tier pinned"
# The cuFile path: p2p=force drives it wherever libcufile loads, nvidia-fs or not (then in
# compatibility mode, a host bounce inside cuFile), so that its registration, member
# handles and reads run here and are checked byte for byte like the others.
run basic "p2p=force${DMAFS_TEST_MOUNT_OPTS:+,$DMAFS_TEST_MOUNT_OPTS}"
line=$("$top_builddir/tools/dmafs-check" "$M" 2>&1 | grep -m1 -E '^[[:space:]]*cuda[[:space:]]')
t_log "  dmafs-check with p2p=force: $(echo $line)"
# without nvidia-fs cuFile only bounces through host memory: the path says p2p-compat
case $line in
*"compatibility mode"*) [[ $line =~ ^[[:space:]]*cuda[[:space:]]+p2p-compat[[:space:]] ]] ||
	t_fail "cuFile is in compatibility mode, but dmafs-check does not say p2p-compat: $line" ;;
*"p2p: cuFile with nvidia-fs"*) [[ $line =~ ^[[:space:]]*cuda[[:space:]]+p2p[[:space:]] ]] ||
	t_fail "cuFile loads with nvidia-fs and p2p=force is on, but CUDA placements do not take the p2p path: $line" ;;
esac
out=$("$top_builddir/tools/dmafs-load" --target cuda:0 --verify "$M/f" 2>&1) || t_fail "dmafs-load --target cuda:0 with p2p=force: $out"
t_log "  dmafs-load with p2p=force: $(echo "$out" | grep '^total')"
case $line in
*"compatibility mode"*) echo "$out" | grep -q "^total .*  p2p  target" &&
	t_fail "dmafs-load reports p2p while cuFile is in compatibility mode: $out" ;;
esac
t_umount "$M"
t_log "PASS"
