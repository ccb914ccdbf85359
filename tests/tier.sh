#!/bin/bash
# Description: the warm tier (-o tier=): a second placement of a file is byte-exact and
# served from the daemon's memory (tier counters, user.dmafs.tier, the members' read
# sectors barely move); partial hits per chunk; buffered and O_DIRECT writes, truncate
# (shrink, then grow), punch hole and zero range, unlink and rename over a cached file
# each let go of what they change; a tier smaller than the file evicts and never holds
# more than its size; concurrent placements fill each chunk once; damaged data never
# enters it (fills check checksums even without verify_place); checksums are read ahead
# (verified placements and fills read the members about as often as plain ones);
# -o verify_place; a
# remount starts empty; dmafs-check reports it; bad sizes are refused; without the
# option nothing is kept and every placement reads the members.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
TP=$top_builddir/tests/tier_place
CHECK=$top_builddir/tools/dmafs-check
[ -x "$TP" ] || t_skip "tests/tier_place not built"
t_workdir
W=$T_WORK
M=$W/mnt
t_loops 3 160M
t_mkfs -s 256K "${T_LOOPDEVS[@]}"
. "$top_srcdir/tests/t_tier.sh"

# tb - the bytes the last placement took from the tier (dmafs_buf_tier_bytes)
export TIER_PLACE_TIER_BYTES=$W/tier_bytes
tb() { cat "$TIER_PLACE_TIER_BYTES"; }
# expect NAME VALUE WANT - fail unless VALUE equals WANT
# held_at_most - the tier holds no more than its size
held_at_most() {
	stats
	((S_HELD <= S_SIZE)) || t_fail "the tier holds $S_HELD bytes, more than its size $S_SIZE"
}

t_log "bad tier= values are refused"
for bad in tier=12x tier=512K tier=91% tier=%5 tier=-1M tier=100000T; do
	mkdir -p "$M"
	"$DMAFS" -o "$bad" "${T_LOOPDEVS[0]},${T_LOOPDEVS[1]},${T_LOOPDEVS[2]}" "$M" 2>"$W/err" &&
		t_fail "-o $bad accepted"
	grep -q "tier=" "$W/err" || t_fail "-o $bad: no message naming tier=: $(cat "$W/err")"
done
for bad in tier_pin=eager tier_pin=; do
	"$DMAFS" -o "tier=16M,$bad" "${T_LOOPDEVS[0]},${T_LOOPDEVS[1]},${T_LOOPDEVS[2]}" "$M" 2>"$W/err" &&
		t_fail "-o $bad accepted"
	grep -q "tier_pin=" "$W/err" || t_fail "-o $bad: no message naming tier_pin=: $(cat "$W/err")"
done

t_log "tier=16M: a 6 MiB + 123 byte file is filled by its first placement"
t_mount "$T_MEMBERS" "$M" tier=16M,tier_fill=now
SZ=$((6 * MiB + 123))
head -c $SZ /dev/urandom >"$W/ref" || t_fail "urandom"
cp "$W/ref" "$M/f" || t_fail "copy in"
stats
expect "tier size" "$S_SIZE" $((16 * MiB))
expect "bytes held before any placement" "$S_HELD" 0
expect "user.dmafs.tier before any placement" "$(xt "$M/f")" 0
place "$M/f" "$W/ref" 0 $SZ
expect "bytes placed from the tier (dmafs_buf_tier_bytes) by the first placement" "$(tb)" 0
stats
expect "bytes filled" "$S_FILLED" $SZ
expect "bytes held" "$S_HELD" $((7 * MiB))
expect "misses" "$S_MISSES" 7
expect "hits" "$S_HITS" 0
expect "user.dmafs.tier" "$(xt "$M/f")" $SZ

t_log "the second placement comes from the tier: exact, 7 hits, members barely read"
r0=$(sectors)
place "$M/f" "$W/ref" 0 $SZ
r1=$(sectors)
expect "bytes placed from the tier by the second placement" "$(tb)" $SZ
stats
expect "hits" "$S_HITS" 7
expect "bytes served" "$S_SERVED" $SZ
expect "misses" "$S_MISSES" 7
(((r1 - r0) * 512 < 64 * 1024)) || t_fail "the second placement read $(((r1 - r0) * 512)) bytes from the members"

t_log "from the tier into a buffer at an odd offset, and a range inside chunks"
place "$M/f" "$W/ref" 0 $SZ 1
place "$M/f" "$W/ref" $((3 * MiB / 2)) $((2 * MiB)) 4096
expect "bytes placed from the tier by a range inside chunks" "$(tb)" $((2 * MiB))
place "$M/f" "$W/ref" $((6 * MiB)) 123 7
stats
expect "hits after 1 + 7 + 3 + 1 pieces" "$S_HITS" 18
expect "misses" "$S_MISSES" 7

t_log "a buffered write into chunk 2: only that chunk goes; the next placement has 6 hits, 1 miss and the new bytes"
printf 'NEW BYTES' | dd of="$W/ref" bs=1 seek=$((2 * MiB + 5)) conv=notrunc status=none
printf 'NEW BYTES' | dd of="$M/f" bs=1 seek=$((2 * MiB + 5)) conv=notrunc status=none || t_fail "write"
expect "user.dmafs.tier after the write" "$(xt "$M/f")" $((SZ - MiB))
stats
h=$S_HITS m=$S_MISSES
place "$M/f" "$W/ref" 0 $SZ
expect "bytes placed from the tier with chunk 2 read again" "$(tb)" $((SZ - MiB))
stats
expect "hits" "$S_HITS" $((h + 6))
expect "misses" "$S_MISSES" $((m + 1))
expect "user.dmafs.tier" "$(xt "$M/f")" $SZ

t_log "an O_DIRECT write into chunk 4"
head -c 8192 /dev/urandom >"$W/blk"
dd if="$W/blk" of="$W/ref" bs=4096 seek=$((4 * 256 + 3)) conv=notrunc status=none
dd if="$W/blk" of="$M/f" bs=4096 seek=$((4 * 256 + 3)) oflag=direct conv=notrunc status=none ||
	t_fail "O_DIRECT write"
expect "user.dmafs.tier after the O_DIRECT write" "$(xt "$M/f")" $((SZ - MiB))
place "$M/f" "$W/ref" 0 $SZ

t_log "truncate to 3 MiB + 100, then grow to 5 MiB: the old bytes past 3 MiB + 100 are zeros"
truncate -s $((3 * MiB + 100)) "$M/f" "$W/ref" || t_fail "truncate down"
expect "user.dmafs.tier after the shrink" "$(xt "$M/f")" $((3 * MiB))
place "$M/f" "$W/ref" 0 $((3 * MiB + 100))
truncate -s $((5 * MiB)) "$M/f" "$W/ref" || t_fail "truncate up"
place "$M/f" "$W/ref" 0 $((5 * MiB))
place "$M/f" "$W/ref" 0 $((5 * MiB))
expect "user.dmafs.tier after the grow and two placements" "$(xt "$M/f")" $((5 * MiB))

t_log "punch hole in chunk 1 and zero range in chunk 3"
fallocate -p -o $((MiB + 4096)) -l 8192 "$M/f" || t_fail "punch hole"
dd if=/dev/zero of="$W/ref" bs=4096 seek=$((256 + 1)) count=2 conv=notrunc status=none
expect "user.dmafs.tier after the punch" "$(xt "$M/f")" $((4 * MiB))
place "$M/f" "$W/ref" 0 $((5 * MiB))
fallocate -z -o $((3 * MiB + 100)) -l 5000 "$M/f" || t_fail "zero range"
dd if=/dev/zero of="$W/ref" bs=1 seek=$((3 * MiB + 100)) count=5000 conv=notrunc status=none
place "$M/f" "$W/ref" 0 $((5 * MiB))
t_log "collapse range is refused and changes nothing"
fallocate -c -o $MiB -l $MiB "$M/f" 2>/dev/null && t_fail "collapse range accepted"
place "$M/f" "$W/ref" 0 $((5 * MiB))

# wait_held BYTES - the tier comes down to BYTES within 10 s (the kernel forgets an
# unlinked inode a little after the unlink returns)
wait_held() {
	local n=100
	while stats && ((S_HELD != $1)); do
		((n-- > 0)) || t_fail "the tier holds $S_HELD bytes, expected $1"
		sleep 0.1
	done
}
t_log "unlink of a cached file gives its chunks back; a new file of that name is placed right"
head -c $((2 * MiB)) /dev/urandom >"$W/refg"
cp "$W/refg" "$M/g" || t_fail "copy g"
place "$M/g" "$W/refg" 0 $((2 * MiB))
stats
before=$S_HELD
rm "$M/g" || t_fail "rm g"
wait_held $((before - 2 * MiB))
head -c $((2 * MiB)) /dev/urandom >"$W/refg"
cp "$W/refg" "$M/g" || t_fail "copy g again"
place "$M/g" "$W/refg" 0 $((2 * MiB))

t_log "rename over a cached file: its chunks go, the name places the new data"
head -c $((MiB + 17)) /dev/urandom >"$W/refh"
cp "$W/refh" "$M/h" || t_fail "copy h"
place "$M/h" "$W/refh" 0 $((MiB + 17))
stats
before=$S_HELD
mv "$M/h" "$M/g" || t_fail "rename h over g"
wait_held $((before - 2 * MiB))
place "$M/g" "$W/refh" 0 $((MiB + 17))
place "$M/g" "$W/refh" 0 $((MiB + 17))
expect "user.dmafs.tier of the renamed file" "$(xt "$M/g")" $((MiB + 17))
t_umount "$M"

t_log "a remount starts empty and places right"
t_mount "$T_MEMBERS" "$M" tier=16M,tier_fill=now
stats
expect "bytes held after the remount" "$S_HELD" 0
expect "hits after the remount" "$S_HITS" 0
expect "user.dmafs.tier after the remount" "$(xt "$M/f")" 0
place "$M/f" "$W/ref" 0 $((5 * MiB))
place "$M/f" "$W/ref" 0 $((5 * MiB))
stats
expect "hits" "$S_HITS" 5

t_log "dmafs-check shows the tier"
"$CHECK" --json "$M" >"$W/check.json" || t_fail "dmafs-check --json $M"
t_py - "$W/check.json" $((16 * MiB)) <<'EOF' || t_fail "dmafs-check's tier: $(cat "$W/check.json")"
import json, sys
t = json.load(open(sys.argv[1]))["mount"]["tier"]
assert t["size"] == int(sys.argv[2]) and t["held"] == 5 * 1048576, t
assert t["hits"] == 5 and t["misses"] == 5 and t["served"] == 5 * 1048576, t
EOF
"$CHECK" "$M" | grep -q "bytes held  *$((5 * MiB))$" || t_fail "dmafs-check: no bytes held line: $("$CHECK" "$M")"
t_umount "$M"

t_log "tier=4M and a 12 MiB file: chunks are evicted, never more than 4 MiB held"
t_mount "$T_MEMBERS" "$M" tier=4M,tier_fill=now
head -c $((12 * MiB)) /dev/urandom >"$W/refb"
cp "$W/refb" "$M/b" || t_fail "copy b"
# place_watched ... - place, checking the tier's size all along
place_watched() {
	place "$@" &
	local pid=$!
	while kill -0 $pid 2>/dev/null; do held_at_most; done
	wait $pid || t_fail "placement of $1"
	held_at_most
}
# fills are taken when a piece is set up: the first four fill it while they are in flight
place_watched "$M/b" "$W/refb" 0 $((12 * MiB))
expect "bytes held" "$S_HELD" $((4 * MiB))
expect "bytes filled" "$S_FILLED" $((4 * MiB))
# then in three placements of 4 MiB: a chunk that a placement still copies from is not
# evicted, so within one 12 MiB placement the four may all be in use; between placements
# none is, and the least recently used make room
for off in 0 4 8; do
	place_watched "$M/b" "$W/refb" $((off * MiB)) $((4 * MiB))
done
expect "bytes held" "$S_HELD" $((4 * MiB))
((S_EVICTED >= 1)) || t_fail "no chunk evicted to fill others"
place_watched "$M/b" "$W/refb" $((11 * MiB)) $MiB
place_watched "$M/b" "$W/refb" $((5 * MiB / 2)) $((7 * MiB))
t_umount "$M"

t_log "4 placements of a 24 MiB file started together fill each chunk once"
# room for every chunk and every fill in flight: no eviction, so each chunk enters once
t_mount "$T_MEMBERS" "$M" tier=128M,tier_fill=now
head -c $((24 * MiB)) /dev/urandom >"$W/refc"
cp "$W/refc" "$M/c" || t_fail "copy c"
pids=()
rm -f "$W/go"
for i in 1 2 3 4; do
	(TIER_PLACE_READY=$W/ready$i TIER_PLACE_GO=$W/go "$TP" "$M/c" 0 $((24 * MiB)) $((i * 512)) >"$W/out$i") &
	pids+=($!)
done
n=300
while ! [ -e "$W/ready1" ] || ! [ -e "$W/ready2" ] || ! [ -e "$W/ready3" ] || ! [ -e "$W/ready4" ]; do
	((n-- > 0)) || t_fail "the concurrent placements did not get ready"
	sleep 0.1
done
touch "$W/go"
for i in 1 2 3 4; do
	wait "${pids[$((i - 1))]}" || t_fail "concurrent placement $i"
	cmp -s "$W/refc" "$W/out$i" || t_fail "concurrent placement $i differs"
done
stats
expect "bytes filled" "$S_FILLED" $((24 * MiB))
expect "bytes held" "$S_HELD" $((24 * MiB))
expect "hits + misses" $((S_HITS + S_MISSES)) 96
((S_MISSES > 24)) || t_log "note: the placements did not overlap ($S_MISSES misses)"
place "$M/c" "$W/refc" 0 $((24 * MiB))
stats
expect "hits + misses after one more" $((S_HITS + S_MISSES)) 120
t_umount "$M"

t_log "a damaged block never enters the tier: fills check checksums without verify_place"
t_mount "$T_MEMBERS" "$M" tier=64M,tier_fill=now
damage "$M/c" tier=64M,tier_fill=now
"$TP" "$M/c" 0 $((24 * MiB)) >/dev/null 2>&1 && t_fail "placing c with a damaged block (chunk $BADC) succeeded"
# had the damaged chunk entered the tier, placing it again would succeed from there
"$TP" "$M/c" $((BADC * MiB)) $MiB >/dev/null 2>&1 && t_fail "the damaged chunk $BADC placed"
"$TP" "$M/c" $((BADC * MiB)) $MiB 512 >/dev/null 2>&1 && t_fail "the damaged chunk $BADC placed at an odd offset"
place "$M/c" "$W/refc" 0 $((BADC * MiB))
x=$(xt "$M/c")
((x >= BADC * MiB && x <= 23 * MiB)) || t_fail "user.dmafs.tier of c is $x: not the chunks before $BADC without it"
t_umount "$M"

t_log "checksums are read ahead: a verified placement or a fill reads the members about as often as a plain placement"
# reads - read requests the members completed so far (the loop devices' stat)
reads() {
	local d n=0 r
	for d in "${T_LOOPDEVS[@]}"; do
		read -r r _ <"/sys/block/${d#/dev/}/stat"
		n=$((n + r))
	done
	echo "$n"
}
# reads_of OPTS - member reads of placing f [0, 5 MiB) on a fresh mount with OPTS
reads_of() {
	local a
	t_mount "$T_MEMBERS" "$M" "$1"
	a=$(reads)
	place "$M/f" "$W/ref" 0 $((5 * MiB))
	echo $(($(reads) - a))
	t_umount "$M"
}
plain=$(reads_of rw)
ver=$(reads_of verify_place)
fill=$(reads_of tier=16M,tier_fill=now)
t_log "  member reads: plain $plain, verify_place $ver, tier fill $fill"
for n in "verify_place $ver" "tier fill $fill"; do
	# one checksum read per data read would double them; read ahead, a few per member
	((${n##* } <= plain + 2 * ${#T_LOOPDEVS[@]})) ||
		t_fail "${n% *}: ${n##* } member reads against $plain for the same placement without checksums"
done

t_log "-o verify_place: the second placement comes from the tier"
t_mount "$T_MEMBERS" "$M" tier=16M,tier_fill=now,verify_place,tier_pin=fill
place "$M/f" "$W/ref" 0 $((5 * MiB)) 3
place "$M/f" "$W/ref" 0 $((5 * MiB))
stats
expect "hits with verify_place" "$S_HITS" 5
expect "misses with verify_place" "$S_MISSES" 5
t_umount "$M"

t_log "without tier=: nothing is kept, every placement reads the members"
t_mount "$T_MEMBERS" "$M"
stats
expect "tier size without the option" "$S_SIZE" 0
expect "user.dmafs.tier without the option" "$(xt "$M/f")" none
place "$M/f" "$W/ref" 0 $((5 * MiB))
place "$M/b" "$W/refb" 0 $((12 * MiB))
r0=$(sectors)
place "$M/b" "$W/refb" 0 $((12 * MiB))
r1=$(sectors)
(((r1 - r0) * 512 >= 12 * MiB)) || t_fail "a placement without the tier read only $(((r1 - r0) * 512)) bytes from the members"
expect "bytes placed from the tier without the option" "$(tb)" 0
stats
expect "hits without the option" "$S_HITS" 0
"$CHECK" "$M" | grep -q "warm tier  *off" || t_fail "dmafs-check does not say the tier is off"
t_umount "$M"

t_log "tier=1% is taken as a share of the RAM"
t_mount "$T_MEMBERS" "$M" tier=1%,tier_fill=now
stats
ram=$(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE)))
expect "tier size of 1%" "$S_SIZE" $((ram / 100 / MiB * MiB))
t_umount "$M"
t_log "PASS"
