#!/bin/bash
# Description: placements racing a writer never return stale or torn blocks: a writer
# rewrites blocks of an 8 MiB file (buffered and O_DIRECT, whole file and random ranges,
# each block stamped with its version) while placements of the whole file run back to
# back; every placed block is one version whole (never a mix), never older than what an
# earlier placement showed, and once the writer stops a placement equals the file. Without
# the warm tier, with one larger than the file and with one smaller (evicting while
# racing); with the tier also against whole files renamed over it (each placement one
# file's) and against truncates and punched holes (blocks whole or zeros). A write(2) from a buffer that is not page-aligned reaches the daemon in requests
# that end inside blocks: write-behind joins them (no member read, no block written half
# new); placements racing such writes may see a block half written only while its write(2)
# is still going on, and never an older version than before.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
TP=$top_builddir/tests/tier_place
[ -x "$TP" ] || t_skip "tests/tier_place not built"
t_workdir
W=$T_WORK
M=$W/mnt
t_loops 2 96M
t_mkfs -s 128K "${T_LOOPDEVS[@]}"
. "$top_srcdir/tests/t_tier.sh"

# race SECONDS MODE - a writer (MODE: aligned, unaligned, rename or cut; see
# tests/place_race.py) against back-to-back placements for SECONDS; then the final check
race() {
	t_py "$top_srcdir/tests/place_race.py" "$M/f" "$TP" "$1" "$2" ||
		t_fail "placements racing the writer ($2; above)"
}

t_log "a write(2) of 8 MiB from a bytes object (not page-aligned) reads the members no more than one from a page-aligned buffer"
t_mount "$T_MEMBERS" "$M"
# write8 FILE aligned|unaligned - 8 MiB (kept in $W/FILE) written and fsynced; prints the
# members' sectors read meanwhile
write8() {
	local r0 r1
	r0=$(sectors)
	t_py - "$M/$1" "$W/$1" "$2" <<'PY' || t_fail "writing $M/$1"
import mmap, os, sys
data = os.urandom(1 << 20) * 8
if sys.argv[3] == "aligned":
    m = mmap.mmap(-1, len(data))
    m[:] = data
    data = memoryview(m)
with open(sys.argv[2], "wb") as f:
    f.write(data)
with open(sys.argv[1], "wb") as f:
    f.write(data)
    os.fsync(f.fileno())
PY
	r1=$(sectors)
	cmp -s "$M/$1" "$W/$1" || t_fail "$M/$1 ($2 buffer) differs from what was written"
	echo $((r1 - r0))
}
ra=$(write8 ga aligned)
ru=$(write8 gu unaligned)
# the kernel's requests of the unaligned write end inside blocks 7 times: merging each
# block's halves would read it from the members
((ru <= ra)) || t_fail "writing 8 MiB from an unaligned buffer read $((ru / 2)) KiB from the members, from an aligned one $((ra / 2)) KiB (blocks merged)"

t_log "without the warm tier: placements racing writes from page-aligned buffers"
race 3 aligned
t_umount "$M"

t_log "tier=32M, larger than the file: writes let go of their chunks while placements fill them"
t_mount "$T_MEMBERS" "$M" tier=32M,tier_fill=now
race 5 aligned
stats
h0=$S_HITS
t_log "  tier while racing: $S_HITS hits, $S_MISSES misses, $((S_FILLED / MiB)) MiB filled"
# quiet now: the last placement (the final check) filled the tier, so this one is served
# from it whole, and exact
place "$M/f" "$M/f" 0 $((8 * MiB))
stats
((S_HITS - h0 == 8)) || t_fail "a placement of the quiet file after the race had $((S_HITS - h0)) hits, expected all 8 chunks"
t_log "the same with writes from bytes objects (requests ending inside blocks)"
race 4 unaligned
t_log "whole files renamed over it"
race 3 rename
t_log "writes, truncates and holes punched"
race 4 cut
t_umount "$M"

t_log "tier=4M, smaller than the file: evicting while racing"
t_mount "$T_MEMBERS" "$M" tier=4M,tier_fill=now
race 4 aligned
# quiet now: the file's two halves, one after the other, fill the tier and then evict
for half in 0 $((4 * MiB)); do
	"$TP" "$M/f" $half $((4 * MiB)) >/dev/null || t_fail "placing $M/f from $half"
done
stats
((S_HELD <= S_SIZE)) || t_fail "the tier holds $S_HELD bytes, more than its size $S_SIZE"
((S_EVICTED > 0)) || t_fail "a 4 MiB tier evicted nothing for an 8 MiB file"
t_umount "$M"
t_fsck 0 "${T_LOOPDEVS[@]}"
t_log "PASS"
