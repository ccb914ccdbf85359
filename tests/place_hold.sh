#!/bin/bash
# Description: no user holds the placement service, and kill means stop. On a mount with a
# slow member (faultfs, read_delay_ms) and place_threads=2, an unprivileged user (nobody)
# runs 2 x place_threads requests without pause: prefetches to EOF of a sparse file of
# 2^60 bytes (holes are not read: each ends at once), back-to-back placements of a
# 192 MiB file (each takes seconds) and back-to-back sample batches of it (320 samples
# each). Another user's 16 MiB placement still finishes (its
# time alone and beside them printed; they may hold at most place_threads - 1 threads);
# SIGKILL of every attacker frees them all (their requests stop within a piece), and then
# the daemon goes idle. The figures are printed, the bounds asserted are generous:
# liveness, not speed.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
TP=$top_builddir/tests/tier_place
FAULTFS=$top_builddir/tests/faultfs
BATCH=$top_builddir/tests/batch
[ -x "$TP" ] || t_skip "tests/tier_place not built"
[ -x "$BATCH" ] || t_skip "tests/batch not built"
[ -x "$FAULTFS" ] || t_skip "tests/faultfs not built"
t_workdir
W=$T_WORK
M=$W/mnt
MiB=1048576
AU=65534 # the attacker: nobody
AS_A=(setpriv --reuid=$AU --regid=$AU --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs --)
"${AS_A[@]}" true || t_fail "setpriv cannot run a command as uid $AU"
APIDS=()

# a request the daemon never answers keeps its process in D state even after SIGKILL:
# at the end, abort the connection so that cleanup can go on (the test has failed then)
hold_cleanup() {
	local p alive=0
	for p in "${APIDS[@]}"; do kill -9 -- "-$p" 2>/dev/null; done
	for _ in $(seq 30); do
		alive=0
		for p in "${APIDS[@]}"; do [ -n "$(pgrep -g "$p" 2>/dev/null)" ] && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	if [ $alive = 1 ] && t_is_mounted "$M"; then
		local c
		c=$(awk -v m="$M" '$5 == m { split($3, d, ":"); print d[1] * 1048576 + d[2] }' /proc/self/mountinfo | tail -n 1)
		[ -n "$c" ] && echo 1 >"/sys/fs/fuse/connections/$c/abort" 2>/dev/null
	fi
}
trap 'rc=$?; hold_cleanup; (exit $rc); t_cleanup' EXIT
if ! awk '$2 == "/sys/fs/fuse/connections" { f = 1 } END { exit !f }' /proc/self/mounts; then
	mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null
fi

t_images 3 384M
t_faultfs "${T_IMGS[1]}"
CTL=$T_FF_CTL
FF=$T_FF
t_mkfs "${T_IMGS[0]}" "$FF/disk" "${T_IMGS[2]}"
t_mount "${T_IMGS[0]},$FF/disk,${T_IMGS[2]}" "$M" allow_other,tier=64M,tier_fill=now,place_threads=2
DPID=$(t_daemon_pids "$M" | head -n 1)

head -c $((192 * MiB)) /dev/urandom >"$M/big" || t_fail "writing $M/big"
for v in 1 2 3 4 5 6 7 8 9; do
	head -c $((16 * MiB)) /dev/urandom >"$M/small$v" || t_fail "writing $M/small$v"
done
chmod 644 "$M"/big "$M"/small?
chmod 755 "$W" # nobody reaches the mount and $W/go through it
mkdir "$M/a" && chown $AU:$AU "$M/a" || t_fail "mkdir $M/a"
"${AS_A[@]}" truncate -s $((1 << 60)) "$M/a/sparse" || t_fail "nobody: truncate -s 2^60 $M/a/sparse"
# mounted again: the tier holds nothing of what was just written
t_umount "$M"
t_mount "${T_IMGS[0]},$FF/disk,${T_IMGS[2]}" "$M" allow_other,tier=64M,tier_fill=now,place_threads=2
DPID=$(t_daemon_pids "$M" | head -n 1)
echo "read_delay_ms 5" >"$CTL"

# victim N - place the 16 MiB of smallN as root (a file the tier does not hold yet: read
# from the members); prints milliseconds
victim() {
	local t0 t1
	t0=$(date +%s%N)
	timeout -k 1 30 "$TP" "$M/small$1" 0 $((16 * MiB)) >/dev/null || return 1
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
for v in 1 2 3 4 5; do
	t=$(victim $v) || t_fail "a 16 MiB placement alone failed"
	[ -z "$alone" ] || ((t < alone)) && alone=$t
done
t_log "a 16 MiB placement alone: $alone ms (best of 5; member 1 reads take 5 ms more each)"
ratio() { awk -v a="$alone" -v b="$1" 'BEGIN { printf "%.2f", b / a }'; }
touch "$W/go"
chmod 644 "$W/go"
# attack KIND N - N attacker process groups of KIND (prefetch: DMAFS_IOC_PREFETCH to EOF of
# the sparse file, again and again; place: placements of the 192 MiB file back to back;
# batch: sample batches of it back to back, 320 samples of 16 KiB each)
attack() {
	local i
	for ((i = 0; i < $2; i++)); do
		if [ "$1" = prefetch ]; then
			setsid "${AS_A[@]}" bash -c 'while [ -e "$3" ]; do "$1" --prefetch-ioctl r "$2" 0 eof >/dev/null || exit 1; done' \
				_ "$TP" "$M/a/sparse" "$W/go" 2>>"$W/attack.err" &
		elif [ "$1" = batch ]; then
			setsid "${AS_A[@]}" "$BATCH" --loop "$M/big" 600 320 16384 >/dev/null 2>>"$W/attack.err" &
		else
			setsid env TIER_PLACE_WHILE="$W/go" "${AS_A[@]}" "$TP" "$M/big" 0 $((192 * MiB)) >/dev/null 2>>"$W/attack.err" &
		fi
		APIDS+=($!)
		disown $!
	done
	sleep 1
	for p in "${APIDS[@]}"; do
		kill -0 "$p" 2>/dev/null || t_fail "an attacker ended early: $(cat "$W/attack.err")"
	done
}
# beside WHAT VICTIM - the victim's placement beside the attackers running now
beside() {
	local t
	t=$(victim "$2") || t_fail "a 16 MiB placement beside $1 failed or took over 30 s (alone: $alone ms)"
	t_log "  the same placement beside $1: $t ms ($(ratio "$t") x alone)"
	# liveness: before, one user's prefetches of a sparse file held every thread for hours
	((t <= 20 * alone + 10000)) || t_fail "the victim's placement took $t ms beside $1, $alone ms alone"
}

t_log "nobody: 4 (2 x place_threads) prefetch loops of a 2^60-byte sparse file"
attack prefetch 4
beside "4 sparse prefetch loops" 6
t_log "nobody: and a loop placing 192 MiB (one large placement beside the small one)"
attack place 1
beside "them and a large placement" 7
t_log "nobody: and another loop placing 192 MiB"
attack place 1
beside "them and 2 large placements" 8
t_log "nobody: and 2 loops of sample batches of it"
attack batch 2
beside "them and 2 sample batch loops" 9

t_log "SIGKILL of every attacker: all gone, and the daemon idle"
t0=$(date +%s%N)
for p in "${APIDS[@]}"; do kill -9 -- "-$p" 2>/dev/null; done
gone=
for _ in $(seq 500); do
	alive=0
	# zombies (not yet reaped by this shell) are gone: only live states count
	for p in "${APIDS[@]}"; do pgrep -g "$p" -r D,R,S,T >/dev/null 2>&1 && alive=1; done
	if [ $alive = 0 ]; then
		gone=$(( ($(date +%s%N) - t0) / 1000000 ))
		break
	fi
	sleep 0.01
done
[ -n "$gone" ] || t_fail "attackers still alive 5 s after SIGKILL (stuck in requests the daemon goes on with)"
# their requests stop before their next piece; the member reads in flight (5 ms each on
# the slow member, queued there) finish first
((gone <= 1000)) || t_fail "the attackers were gone only $gone ms after SIGKILL"
t_log "  all attackers gone $gone ms after SIGKILL"
APIDS=()
sleep 1
ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
c0=$(ticks)
sleep 1
c1=$(ticks)
hz=$(getconf CLK_TCK)
t_log "  daemon CPU in the second after: $(((c1 - c0) * 1000 / hz)) ms"
(((c1 - c0) * 1000 / hz <= 200)) || t_fail "the daemon used $(((c1 - c0) * 1000 / hz)) ms of CPU in the second after the attackers were killed"
: >"$CTL"
cmp <("$TP" "$M/small1" 0 $((16 * MiB))) "$M/small1" || t_fail "a placement after the attack differs from the file"
t_umount "$M"
t_fsck 0 "${T_IMGS[0]}" "$FF/disk" "${T_IMGS[2]}"
t_log "PASS"
