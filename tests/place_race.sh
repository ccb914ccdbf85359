#!/bin/bash
# Description: placements racing a writer never return stale or torn blocks: a writer
# rewrites blocks of an 8 MiB file (buffered and O_DIRECT, whole file and random ranges,
# each block stamped with its version) while placements of the whole file run back to
# back; every placed block is one version whole (never a mix), never older than what an
# earlier placement showed, and once the writer stops a placement equals the file. Without
# the warm tier, with one larger than the file and with one smaller (evicting while
# racing). A write(2) from a buffer that is not page-aligned reaches the daemon in requests
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

# race SECONDS aligned|unaligned - the writer against back-to-back placements for SECONDS,
# its buffered writes from page-aligned memory (every block checked whole) or from a bytes
# object (blocks may be seen half written while their write(2) goes on: the older half is
# what counts); then the final check
race() {
	t_py - "$M/f" "$TP" "$1" "$2" <<'PY' || t_fail "placements racing the writer (above)"
import mmap, os, random, struct, subprocess, sys, threading, time

path, tp, secs, aligned = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "aligned"
BS, NB = 4096, 2048
rng = random.Random(1)

def block(v, b):
    return struct.pack("<QQ", v, b) * (BS // 16)

def content(v, a, n):
    return b"".join(block(v, b) for b in range(a, a + n))

with open(path, "wb") as f:
    f.write(content(1, 0, NB))
    os.fsync(f.fileno())

stop = threading.Event()
err = []
writes = [0, 0]

def writer():
    v = 1
    fd = os.open(path, os.O_WRONLY)
    dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    m = mmap.mmap(-1, NB * BS)  # page-aligned, for O_DIRECT
    try:
        while not stop.is_set():
            v += 1
            a = rng.randrange(NB) if rng.random() < 0.8 else 0
            n = NB - a if a == 0 else rng.randint(1, min(NB - a, 300))
            data = content(v, a, n)
            if rng.random() < 0.3:
                m[:len(data)] = data
                got = os.pwritev(dfd, [memoryview(m)[:len(data)]], a * BS)
                writes[1] += 1
            elif aligned:
                m[:len(data)] = data
                got = os.pwrite(fd, memoryview(m)[:len(data)], a * BS)
                writes[0] += 1
            else:
                got = os.pwrite(fd, data, a * BS)
                writes[0] += 1
            if got != len(data):
                err.append(f"writer: a write of {len(data)} bytes at {a * BS} wrote {got}")
                break
            if rng.random() < 0.1:
                os.fsync(fd)
            time.sleep(rng.random() * 0.004)  # placements in between find chunks to hit
    except OSError as e:
        err.append(f"writer: {e}")
    finally:
        os.close(fd)
        os.close(dfd)

t = threading.Thread(target=writer)
t.start()
seen = [1] * NB
n = halves = 0
deadline = time.monotonic() + secs
try:
    while time.monotonic() < deadline and not err:
        r = subprocess.run([tp, path, "0", str(NB * BS)], capture_output=True)
        if r.returncode:
            err.append(f"tier_place: {r.stderr.decode(errors='replace').strip()}")
            break
        out = r.stdout
        if len(out) != NB * BS:
            err.append(f"placement {n}: {len(out)} bytes, expected {NB * BS}")
            break
        for b in range(NB):
            blk = out[b * BS:(b + 1) * BS]
            v, bb = struct.unpack_from("<QQ", blk)
            if not aligned and blk != block(v, b):
                recs = {struct.unpack_from("<QQ", blk, i) for i in range(0, BS, 16)}
                if len(recs) == 2 and all(rb == b for _, rb in recs):
                    halves += 1  # a write(2) going on: its older version counts
                    v = min(rv for rv, _ in recs)
                    blk = block(v, b)
            if bb != b or blk != block(v, b):
                recs = sorted({struct.unpack_from("<QQ", blk, i) for i in range(0, BS, 16)})
                where = [i * 16 for i in range(1, BS // 16)
                         if blk[i * 16:i * 16 + 16] != blk[i * 16 - 16:i * 16]]
                err.append(f"placement {n}: block {b} is not one version whole: "
                           f"(version, block) {recs[:4]} changing at bytes {where[:4]}")
                break
            if v < seen[b]:
                err.append(f"placement {n}: block {b} is version {v}, older than the "
                           f"version {seen[b]} an earlier placement showed (stale)")
                break
            seen[b] = v
        n += 1
finally:
    stop.set()
    t.join()
if err:
    sys.exit("; ".join(err))
with open(path, "rb") as f:
    want = f.read()
r = subprocess.run([tp, path, "0", str(NB * BS)], capture_output=True)
if r.returncode or r.stdout != want:
    sys.exit(f"after the writer stopped, a placement differs from the file (exit {r.returncode})")
if n < 10 or sum(writes) < 10:
    sys.exit(f"too little raced: {n} placements, {sum(writes)} writes")
print(f"{n} placements against {writes[0]} buffered and {writes[1]} O_DIRECT writes; "
      + (f"{halves} blocks seen half written; " if not aligned else "") + "final placement exact")
PY
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
t_mount "$T_MEMBERS" "$M" tier=32M
race 5 aligned
stats
((S_HITS > 0 && S_FILLED > 0)) || t_fail "the tier neither served nor filled while racing (hits $S_HITS, filled $S_FILLED)"
t_log "  tier: $S_HITS hits, $S_MISSES misses, $((S_FILLED / MiB)) MiB filled"
t_log "the same with writes from bytes objects (requests ending inside blocks)"
race 4 unaligned
t_umount "$M"

t_log "tier=4M, smaller than the file: evicting while racing"
t_mount "$T_MEMBERS" "$M" tier=4M
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
