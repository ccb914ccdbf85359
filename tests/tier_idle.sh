#!/bin/bash
# Description: -o tier_fill=idle: a placement fills nothing and reads the members as
# without the tier; the chunks it missed are read into the tier once placements are idle
# (checksums checked), after which a placement is served whole from the tier, byte-exact;
# a write between the placement and the fill is what the tier then holds; a file removed
# while its fill waits is not kept for it: its space comes back while placements go on
# (the fill waits for them), and it is not filled; an unmount with fills waiting ends
# cleanly; what waits never spans more than the tier (of a file three times its size the
# first part is filled, the rest given up); bad values are refused; tier_fill=idle is the
# default, tier_fill=now fills in the first placement.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
TP=$top_builddir/tests/tier_place
[ -x "$TP" ] || t_skip "tests/tier_place not built"
t_workdir
W=$T_WORK
M=$W/mnt
t_loops 3 160M
t_mkfs -s 256K "${T_LOOPDEVS[@]}"
. "$top_srcdir/tests/t_tier.sh"
export TIER_PLACE_TIER_BYTES=$W/tier_bytes
tb() { cat "$TIER_PLACE_TIER_BYTES"; }
# wait_filled BYTES - poll (10 s at most) until the tier has filled BYTES in all
wait_filled() {
	local n=100
	while stats && ((S_FILLED < $1)); do
		((n-- > 0)) || t_fail "the tier filled $S_FILLED bytes in 10 s, expected $1 (tier_fill=idle)"
		sleep 0.1
	done
}

t_log "bad tier_fill= values are refused"
mkdir -p "$M"
for bad in tier_fill=soon tier_fill=; do
	"$DMAFS" -o "tier=16M,$bad" "$T_MEMBERS" "$M" 2>"$W/err" && t_fail "-o $bad accepted"
	grep -q "tier_fill=" "$W/err" || t_fail "-o $bad: no message naming tier_fill=: $(cat "$W/err")"
done

t_log "tier=64M,tier_fill=idle: a placement fills nothing; its misses fill once idle"
t_mount "$T_MEMBERS" "$M" tier=64M,tier_fill=idle
SZ=$((12 * MiB + 123))
head -c $SZ /dev/urandom >"$W/ref" || t_fail "urandom"
cp "$W/ref" "$M/a" || t_fail "copy in"
sync
s0=$(sectors)
place "$M/a" "$W/ref" 0 $SZ
expect "bytes placed from the tier by the first placement" "$(tb)" 0
wait_filled $SZ
s2=$(sectors)
# the placement read the file, and the fill read it again (when the fill starts is a matter
# of timing: only the sum is checked)
(((s2 - s0) * 512 >= 2 * SZ)) ||
	t_fail "the placement and the fill read $(((s2 - s0) * 512)) bytes of the members, less than twice the file's $SZ"
expect "user.dmafs.tier once filled" "$(xt "$M/a")" $SZ
j=$("$top_builddir/tools/dmafs-check" --json "$M") || t_fail "dmafs-check --json $M"
read -r fill waiting filled dropped <<<"$(t_py -c 'import json, sys
t = json.loads(sys.argv[1])["mount"]["tier"]
print(t.get("fill"), t.get("fill_waiting"), t.get("filled_idle"), t.get("fill_dropped"))' "$j")"
expect "dmafs-check's tier fill" "$fill" idle
expect "dmafs-check's ranges waiting" "$waiting" 0
expect "dmafs-check's bytes filled after placements" "$filled" $SZ
expect "dmafs-check's ranges given up" "$dropped" 0
place "$M/a" "$W/ref" 0 $SZ
expect "bytes placed from the tier by the placement after the fill" "$(tb)" $SZ
s3=$(sectors)
(((s3 - s2) * 512 <= 64 * 1024)) ||
	t_fail "a placement served from the tier read $(((s3 - s2) * 512)) bytes of the members"
t_log "  the placement and the fill read $(((s2 - s0) * 512)) bytes of the members, the placement from the tier $(((s3 - s2) * 512))"

t_log "a write after the placement and before the fill is what the tier holds"
head -c $SZ /dev/urandom >"$W/ref2" || t_fail "urandom"
cp "$W/ref2" "$M/b" || t_fail "copy in"
stats
f0=$S_FILLED
place "$M/b" "$W/ref2" 0 $SZ
head -c $MiB /dev/urandom >"$W/patch"
dd if="$W/patch" of="$M/b" bs=1M seek=3 count=1 conv=notrunc status=none || t_fail "overwriting b"
dd if="$W/patch" of="$W/ref2" bs=1M seek=3 count=1 conv=notrunc status=none
wait_filled $((f0 + SZ - MiB)) # the chunk written may be filled, or dropped by the write
sleep 0.3
place "$M/b" "$W/ref2" 0 $SZ

t_log "a file removed while its fill waits: its space comes back while placements go on"
df0=$(stat -f -c %a "$M")
head -c $((24 * MiB)) /dev/urandom >"$W/ref3"
cp "$W/ref3" "$M/c" || t_fail "copy in"
sync
stats
f0=$S_FILLED
# placements of a (from the tier) back to back keep the queued fill of c waiting, until
# c's space is back (freed blocks come back a commit or two after the last holder lets
# go: about 5 s, with or without the tier)
touch "$W/busy"
busy=()
for k in 1 2; do # two processes, each placing back to back: one is running at every moment
	TIER_PLACE_WHILE=$W/busy "$TP" "$M/a" 0 $SZ >/dev/null &
	busy+=($!)
done
sleep 0.2
"$TP" "$M/c" 0 $((24 * MiB)) >/dev/null || t_fail "placing c"
rm "$M/c" || t_fail "rm c"
n=200
while sync -f "$M" && [ "$(stat -f -c %a "$M")" -lt "$df0" ]; do
	((n-- > 0)) || { rm -f "$W/busy"; t_fail "free blocks $(stat -f -c %a "$M") 20 s after removing a file whose fill waits (placements going on), $df0 before it was written"; }
	sleep 0.1
done
rm -f "$W/busy"
for k in "${busy[@]}"; do wait "$k" || t_fail "placing a back to back"; done
sleep 0.5 # idle: the queue gets to c, which is gone
stats
((S_FILLED < f0 + 24 * MiB)) || t_fail "the removed file was filled into the tier ($((S_FILLED - f0)) bytes)"

t_log "an unmount with fills waiting ends cleanly"
cp "$W/ref3" "$M/d" || t_fail "copy in"
"$TP" "$M/d" 0 $((24 * MiB)) >/dev/null || t_fail "placing d"
t_umount "$M"
grep -iE "assert|abort|segfault|double free" "$T_DAEMON_ERR" && t_fail "the daemon complained at unmount (above)"

t_log "tier=4M and a 12 MiB file: the fill reads its first 4 MiB only, the rest is given up"
t_mount "$T_MEMBERS" "$M" tier=4M,tier_fill=idle
s0=$(sectors)
place "$M/a" "$W/ref" 0 $SZ
wait_filled $((4 * MiB))
sleep 0.3 # anything more would be read by now
stats
expect "bytes filled of a file three times the tier" "$S_FILLED" $((4 * MiB))
s2=$(sectors)
(((s2 - s0) * 512 <= SZ + 5 * MiB)) ||
	t_fail "the placement and the fill read $(((s2 - s0) * 512)) bytes of the members: the fill read more than the tier holds (4 MiB)"
expect "dmafs-check's ranges given up, tier smaller than the file" "$("$top_builddir/tools/dmafs-check" --json "$M" | t_py -c 'import json, sys; print(json.load(sys.stdin)["mount"]["tier"].get("fill_dropped"))')" 1
place "$M/a" "$W/ref" 0 $((4 * MiB))
expect "bytes placed from the tier of the first 4 MiB" "$(tb)" $((4 * MiB))
t_umount "$M"

fillmode() { "$top_builddir/tools/dmafs-check" --json "$M" | t_py -c 'import json, sys; print(json.load(sys.stdin)["mount"]["tier"].get("fill"))'; }
t_log "tier_fill=now: the first placement fills"
t_mount "$T_MEMBERS" "$M" tier=64M,tier_fill=now
place "$M/a" "$W/ref" 0 $SZ
stats
expect "bytes filled by the first placement with tier_fill=now" "$S_FILLED" $SZ
expect "dmafs-check's tier fill with tier_fill=now" "$(fillmode)" now
t_umount "$M"

t_log "tier_fill=idle is the default: the first placement fills nothing, the idle fill does"
t_mount "$T_MEMBERS" "$M" tier=64M
expect "dmafs-check's tier fill without tier_fill=" "$(fillmode)" idle
place "$M/a" "$W/ref" 0 $SZ
expect "bytes placed from the tier by the first placement (default)" "$(tb)" 0
wait_filled $SZ
place "$M/a" "$W/ref" 0 $SZ
expect "bytes placed from the tier after the idle fill (default)" "$(tb)" $SZ
t_umount "$M"
t_log "PASS"
