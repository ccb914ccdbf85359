# shellcheck shell=bash
# t_tier.sh - helpers of the warm tier's tests (tier.sh, tier_prefetch.sh, tier_pressure.sh),
# sourced after t_lib.sh once $TP (tests/tier_place), $W (the work dir) and $M (the mount)
# are set.
MiB=1048576

# stats - the tier's counters (tier_place --stats) into S_SIZE S_HELD S_HITS S_MISSES
# S_SERVED S_FILLED S_EVICTED S_CAP S_RESIDENT S_SHRUNK S_MIN_FREE S_PINNED
stats() {
	read -r S_SIZE S_HELD S_HITS S_MISSES S_SERVED S_FILLED S_EVICTED S_CAP S_RESIDENT S_SHRUNK \
		S_MIN_FREE S_PINNED <<<"$("$TP" --stats "$M")" || t_fail "tier_place --stats $M"
}
# sectors - sectors read from the members so far (the loop devices' stat)
sectors() {
	local d n=0 s
	for d in "${T_LOOPDEVS[@]}"; do
		read -r _ _ s _ <"/sys/block/${d#/dev/}/stat"
		n=$((n + s))
	done
	echo "$n"
}
# place FILE REF OFF LEN [BUFOFF] - place FILE[OFF, OFF+LEN) into host memory at BUFOFF and
# compare with the same bytes of REF
place() {
	local f=$1 ref=$2 off=$3 len=$4 boff=${5:-0}
	"$TP" "$f" "$off" "$len" "$boff" >"$W/out" || t_fail "placing $f [$off, +$len) at $boff"
	tail -c +$((off + 1)) "$ref" | head -c "$len" | cmp -s - "$W/out" ||
		t_fail "$f [$off, +$len) placed at $boff differs from the reference"
}
expect() { [ "$2" = "$3" ] || t_fail "$1 is $2, expected $3"; }
# xt FILE [NAME] - the value of the xattr NAME (user.dmafs.tier) of FILE ("none" for ENODATA)
xt() {
	t_py -c '
import errno, os, sys
try:
    print(os.getxattr(sys.argv[1], sys.argv[2]).decode())
except OSError as e:
    print("none" if e.errno == errno.ENODATA else "error " + str(e))' "$1" "${2:-user.dmafs.tier}"
}
# damage FILE OPTS - flip one byte of FILE's first block at or past 4 MiB on its member (the
# mount $M is taken down for it and mounted again with OPTS); sets BADC, the 1 MiB chunk of
# FILE that holds the damaged block
damage() {
	local foff mem moff
	read -r foff mem moff <<<"$(t_py -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.dmafs.layout").decode())' "$1" |
		awk '$1 ~ /^[0-9]+$/ && $1 >= 4194304 { print $1, $3, $4; exit }')"
	[ -n "$moff" ] || t_fail "no extent of $1 past 4 MiB"
	t_umount "$M"
	t_py - "$W/loop$mem.img" $((moff + 4096)) <<'PY' || t_fail "flipping a byte of $W/loop$mem.img"
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x5A]))
PY
	t_mount "$T_MEMBERS" "$M" "$2"
	BADC=$((foff / MiB))
}
