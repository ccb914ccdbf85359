#!/bin/bash
# Description: DMAFS_IOC_PREFETCH and dmafs_prefetch: a range widens to whole 1 MiB chunks
# and enters the warm tier (bytes read and held reported, user.dmafs.tier, counters); a
# placement after it is served entirely from the tier (no misses, the members' read
# sectors barely move) and byte-exact; a prefetch again reads nothing; a write lets go of
# its chunk and the next prefetch reads only that one; a prefetch larger than the tier
# reads only the tier's size of it (the rest reported skipped) and never holds more; holes
# of a sparse file are not read; a damaged block fails it with EIO and
# stays out; a descriptor open write-only (or a directory) is refused with EBADF, a mount
# without tier= with EOPNOTSUPP; dmafs-load --prefetch (text, --json, --model) and its
# message without a tier.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
TP=$top_builddir/tests/tier_place
LOAD=$top_builddir/tools/dmafs-load
[ -x "$TP" ] || t_skip "tests/tier_place not built"
t_workdir
W=$T_WORK
M=$W/mnt
t_loops 3 160M
t_mkfs -s 256K "${T_LOOPDEVS[@]}"
. "$top_srcdir/tests/t_tier.sh"

# prefetch FILE OFF LEN READ HELD - dmafs_prefetch reports READ bytes read and HELD held
prefetch() {
	local out
	out=$("$TP" --prefetch "$1" "$2" "$3" 2>&1) || t_fail "prefetch of $1 [$2, +$3): $out"
	[ "$out" = "$4 $5" ] || t_fail "prefetch of $1 [$2, +$3) reported read/held '$out', expected '$4 $5'"
}

t_log "tier=16M: [1.5 MiB, +1 MiB) of a 6 MiB + 123 byte file widens to chunks 1 and 2"
t_mount "$T_MEMBERS" "$M" tier=16M,tier_fill=now
SZ=$((6 * MiB + 123))
head -c $SZ /dev/urandom >"$W/ref" || t_fail "urandom"
cp "$W/ref" "$M/f" || t_fail "copy in"
prefetch "$M/f" $((3 * MiB / 2)) $MiB $((2 * MiB)) 0
stats
expect "bytes held" "$S_HELD" $((2 * MiB))
expect "bytes filled" "$S_FILLED" $((2 * MiB))
expect "hits + misses (a prefetch counts in neither)" $((S_HITS + S_MISSES)) 0
expect "user.dmafs.tier" "$(xt "$M/f")" $((2 * MiB))

t_log "the whole file: the other 5 chunks read, 2 MiB held; then nothing more to read"
prefetch "$M/f" 0 eof $((SZ - 2 * MiB)) $((2 * MiB))
expect "user.dmafs.tier" "$(xt "$M/f")" $SZ
prefetch "$M/f" 0 eof 0 $SZ
prefetch "$M/f" $((SZ + 5)) eof 0 0
"$TP" --prefetch-ioctl rw "$M/f" 0 eof >"$W/ioc" || t_fail "DMAFS_IOC_PREFETCH on a read-write descriptor"
expect "read held skipped of the ioctl" "$(cat "$W/ioc")" "0 $SZ 0"

t_log "a placement after the prefetch comes from the tier: exact, 7 hits, no miss, members barely read"
r0=$(sectors)
place "$M/f" "$W/ref" 0 $SZ
r1=$(sectors)
stats
expect "hits" "$S_HITS" 7
expect "misses" "$S_MISSES" 0
expect "bytes served" "$S_SERVED" $SZ
(((r1 - r0) * 512 < 64 * 1024)) || t_fail "the placement read $(((r1 - r0) * 512)) bytes from the members"

t_log "a write into chunk 3 lets it go: the next prefetch reads that chunk only, the placement is exact"
printf 'NEW BYTES' | dd of="$W/ref" bs=1 seek=$((3 * MiB + 7)) conv=notrunc status=none
printf 'NEW BYTES' | dd of="$M/f" bs=1 seek=$((3 * MiB + 7)) conv=notrunc status=none || t_fail "write"
prefetch "$M/f" 0 eof $MiB $((SZ - MiB))
stats
h=$S_HITS
place "$M/f" "$W/ref" 0 $SZ
stats
expect "hits" "$S_HITS" $((h + 7))
expect "misses" "$S_MISSES" 0

t_log "a descriptor open write-only, and a directory, are refused with EBADF"
"$TP" --prefetch-ioctl w "$M/f" 0 eof 2>"$W/err" && t_fail "DMAFS_IOC_PREFETCH on a write-only descriptor succeeded"
grep -q "EBADF" "$W/err" || t_fail "write-only: $(cat "$W/err"), expected EBADF"
mkdir "$M/d" || t_fail "mkdir"
"$TP" --prefetch-ioctl r "$M/d" 0 eof 2>"$W/err" && t_fail "DMAFS_IOC_PREFETCH on a directory succeeded"
grep -q "EBADF" "$W/err" || t_fail "directory: $(cat "$W/err"), expected EBADF"

t_log "dmafs-load --prefetch: a directory of 3 files, text and --json"
mkdir -p "$W/src/m" && for i in 1 2 3; do head -c $((i * MiB + 1000 * i)) /dev/urandom >"$W/src/m/part$i"; done
cp -a "$W/src/m" "$M/" || t_fail "copy m"
"$LOAD" --prefetch "$M/m" >"$W/load.out" 2>&1 || t_fail "dmafs-load --prefetch $M/m: $(cat "$W/load.out")"
grep -q "^total  3 files  read $((6 * MiB + 6000)) bytes  held 0 bytes .* into the warm tier$" "$W/load.out" ||
	t_fail "dmafs-load --prefetch: $(cat "$W/load.out")"
grep -q "^$M/m/part2  read $((2 * MiB + 2000)) bytes  held 0 bytes " "$W/load.out" ||
	t_fail "dmafs-load --prefetch, part2: $(cat "$W/load.out")"
expect "user.dmafs.tier of part3" "$(xt "$M/m/part3")" $((3 * MiB + 3000))
"$LOAD" --prefetch --json "$M/m" >"$W/load.json" || t_fail "dmafs-load --prefetch --json"
t_py - "$W/load.json" $((6 * MiB + 6000)) <<'EOF' || t_fail "dmafs-load --prefetch --json: $(cat "$W/load.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["prefetch"] is True and d["errors"] == 0, d
assert d["total"]["read"] == 0 and d["total"]["held"] == int(sys.argv[2]), d["total"]
assert [f["held"] for f in d["files"]] == [f["size"] for f in d["files"]], d["files"]
EOF
"$LOAD" --prefetch --target host "$M/m" 2>"$W/err" && t_fail "dmafs-load --prefetch --target accepted"
grep -q "does not go with --prefetch" "$W/err" || t_fail "--prefetch --target: $(cat "$W/err")"
if [ -x "$top_srcdir/tools/dmafs-synth-model" ]; then
	t_log "dmafs-load --prefetch --model: a 3-shard model's files (index and headers read)"
	"$top_srcdir/tools/dmafs-synth-model" -q --model qwen3-0.6b --scale 16 --shards 3 "$W/src/q" ||
		t_fail "dmafs-synth-model"
	cp -a "$W/src/q" "$M/" || t_fail "copy q"
	total=$(cat "$W"/src/q/*.safetensors | wc -c)
	"$LOAD" --prefetch --model -q "$M/q" >"$W/load.out" 2>&1 || t_fail "dmafs-load --prefetch --model: $(cat "$W/load.out")"
	grep -q "^total  3 files  read $total bytes  held 0 bytes " "$W/load.out" ||
		t_fail "dmafs-load --prefetch --model: $(cat "$W/load.out") (model files: $total bytes)"
fi
t_umount "$M"

t_log "tier=4M and a 12 MiB file: a prefetch reads at most the tier's size (the rest skipped), holds at most 4 MiB"
t_mount "$T_MEMBERS" "$M" tier=4M,tier_fill=now
head -c $((12 * MiB)) /dev/urandom >"$W/refb"
cp "$W/refb" "$M/b" || t_fail "copy b"
"$TP" --prefetch-ioctl r "$M/b" 0 eof >"$W/pf" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
	stats
	((S_HELD <= S_SIZE)) || t_fail "the tier holds $S_HELD bytes, more than its size $S_SIZE"
done
wait $pid || t_fail "prefetch of b: $(cat "$W/pf")"
expect "read held skipped" "$(cat "$W/pf")" "$((4 * MiB)) 0 $((8 * MiB))"
stats
expect "bytes held" "$S_HELD" $((4 * MiB))
expect "chunks evicted" "$S_EVICTED" 0
expect "user.dmafs.tier of b" "$(xt "$M/b")" $((4 * MiB))
# the first 4 chunks are what it kept
place "$M/b" "$W/refb" 0 $((4 * MiB))
stats
expect "hits of the first 4 chunks" "$S_HITS" 4
expect "misses of the first 4 chunks" "$S_MISSES" 0
t_log "  a prefetch from 8 MiB takes the last 4 chunks, evicting the first"
expect "read held skipped from 8 MiB" "$("$TP" --prefetch-ioctl r "$M/b" $((8 * MiB)) eof)" "$((4 * MiB)) 0 0"
stats
expect "chunks evicted" "$S_EVICTED" 4
place "$M/b" "$W/refb" $((11 * MiB)) $MiB
stats
expect "hits of the last chunk" "$S_HITS" 5
t_umount "$M"

t_log "a sparse file of 2^50 bytes: holes are not read, the prefetch ends at once"
t_mount "$T_MEMBERS" "$M" tier=4M,tier_fill=now
truncate -s $((1 << 50)) "$M/sparse" || t_fail "truncate $M/sparse"
head -c $MiB "$W/refb" | dd of="$M/sparse" bs=1M seek=$((1 << 29)) conv=notrunc status=none ||
	t_fail "writing 1 MiB into $M/sparse at 512 TiB"
t0=$(date +%s%N)
expect "read held skipped of the sparse file" "$("$TP" --prefetch-ioctl r "$M/sparse" 0 eof)" "0 0 $((1 << 50))"
expect "read held skipped from 512 TiB" "$("$TP" --prefetch-ioctl r "$M/sparse" $((1 << 49)) eof)" "$MiB 0 $(((1 << 49) - MiB))"
t1=$(date +%s%N)
t_log "  both prefetches: $(((t1 - t0) / 1000000)) ms"
t_umount "$M"

t_log "a damaged block: the prefetch fails with EIO and its chunk stays out of the tier"
t_mount "$T_MEMBERS" "$M" tier=16M,tier_fill=now
damage "$M/b" tier=16M,tier_fill=now
"$TP" --prefetch "$M/b" 0 eof >/dev/null 2>"$W/err" && t_fail "prefetch of b with a damaged block in chunk $BADC succeeded"
grep -q "(EIO)" "$W/err" || t_fail "damaged block: $(cat "$W/err"), expected EIO"
"$TP" --prefetch "$M/b" $((BADC * MiB)) 1 >/dev/null 2>&1 && t_fail "prefetch of the damaged chunk $BADC succeeded"
"$TP" "$M/b" $((BADC * MiB)) $MiB >/dev/null 2>&1 && t_fail "the damaged chunk $BADC placed (it entered the tier)"
t_umount "$M"

t_log "without tier=: EOPNOTSUPP, and dmafs-load --prefetch says the mount has no warm tier"
t_mount "$T_MEMBERS" "$M"
"$TP" --prefetch "$M/f" 0 eof >/dev/null 2>"$W/err" && t_fail "prefetch without a tier succeeded"
grep -q "(EOPNOTSUPP)" "$W/err" || t_fail "prefetch without a tier: $(cat "$W/err"), expected EOPNOTSUPP"
grep -q "tier=SIZE" "$W/err" || t_fail "dmafs_strerror(-EOPNOTSUPP) does not name tier=: $(cat "$W/err")"
"$LOAD" --prefetch "$M/f" >"$W/out" 2>"$W/err"
rc=$?
expect "dmafs-load --prefetch's exit status without a tier" $rc 1
grep -q "its mount has no warm tier.*-o tier=SIZE" "$W/err" ||
	t_fail "dmafs-load --prefetch without a tier said: $(cat "$W/err")"
t_umount "$M"

t_log "off dmafs: ENOTTY"
"$TP" --prefetch "$W/ref" 0 eof >/dev/null 2>"$W/err" && t_fail "prefetch of a file on /dev/shm succeeded"
grep -q "(ENOTTY)" "$W/err" || t_fail "off dmafs: $(cat "$W/err"), expected ENOTTY"
t_log "PASS"
