#!/bin/bash
# Description: fallocate(FALLOC_FL_ZERO_RANGE), with and without KEEP_SIZE: random writes,
# zero ranges block-aligned and with unaligned edges, inside one block, across stripe
# units, straddling and past the end of file, and truncates, each checked against a
# byte-for-byte model (content through the page cache and with it dropped, st_size, and on
# dmafs st_blocks: whole zeroed blocks are holes); a reader holding a mapping sees the
# zeros; the same operations on xfs of this kernel end with the same bytes and size; after
# a remount the content is the same and dmafs-fsck --scrub verifies every block's checksum.
# ZERO_RANGE with PUNCH_HOLE is EOPNOTSUPP, as on xfs.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
FSCK=$top_builddir/tools/dmafs-fsck
[ -x "$FSCK" ] || t_skip "dmafs-fsck not built"
t_workdir

cat >"$T_WORK/zr.py" <<'PY'
# zr.py FILE SEED OPS MAXSIZE CHECK_BLOCKS OUT - random operations, model checked after each;
# writes the final content's sha256 and size to OUT.
import ctypes, errno, hashlib, mmap, os, random, sys

KEEP, PUNCH, ZERO = 0x01, 0x02, 0x10
B = 4096
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

def falloc(fd, mode, off, n):
    if libc.fallocate(fd, mode, off, n) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))

path, seed, nops, maxsize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
check_blocks, out = sys.argv[5] == "1", sys.argv[6]
rng = random.Random(seed)
model = bytearray()
blocks = set()  # blocks that must be allocated (dmafs)
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

def brange(a, b):
    return range(a // B, (b + B - 1) // B)

def check(step, what):
    st = os.fstat(fd)
    if st.st_size != len(model):
        sys.exit(f"step {step} {what}: st_size {st.st_size}, model {len(model)}")
    for cached in (True, False):
        if not cached:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        data = os.pread(fd, len(model) + B, 0)
        if data != bytes(model):
            bad = next((i for i in range(min(len(data), len(model))) if data[i] != model[i]), min(len(data), len(model)))
            sys.exit(f"step {step} {what}: content differs from byte {bad} "
                     f"({'page cache' if cached else 'cache dropped'}; {len(data)} read, {len(model)} expected)")
    if check_blocks and st.st_blocks * 512 != len(blocks) * B:
        sys.exit(f"step {step} {what}: st_blocks {st.st_blocks} ({st.st_blocks * 512} bytes), "
                 f"model {len(blocks)} blocks")

def pick(lim):
    r = rng.random()
    if r < 0.35:
        return rng.randrange(0, lim // B + 2) * B
    return rng.randrange(0, lim + 2 * B)

counts = {}
for step in range(nops):
    r = rng.random()
    size = len(model)
    lim = max(size, B) + maxsize // 16
    if r < 0.35:  # write
        off = pick(min(lim, maxsize - 1))
        n = rng.choice([1, 100, B, 3 * B + 17, rng.randrange(1, 200000)])
        n = max(1, min(n, maxsize - off))
        buf = bytes(rng.randrange(1, 256) for _ in range(min(n, 64))) * (n // 64 + 1)
        buf = buf[:n]
        if os.pwrite(fd, buf, off) != n:
            sys.exit(f"step {step}: short write")
        if off > size:
            model.extend(b"\0" * (off - size))
        model[off:off + n] = buf
        blocks.update(brange(off, off + n))
        what = f"write {off}+{n}"
    elif r < 0.85:  # zero range
        keep = rng.random() < 0.4
        off = pick(lim)
        kind = rng.random()
        if kind < 0.2:
            n = rng.randrange(1, B)                      # inside one block (or two)
        elif kind < 0.5:
            n = rng.randrange(1, 8) * B                  # whole blocks if off is aligned
        else:
            n = rng.randrange(1, 300000)                 # anything
        n = max(1, min(n, maxsize - off))
        falloc(fd, ZERO | (KEEP if keep else 0), off, n)
        end = off + n
        if not keep and end > size:
            model.extend(b"\0" * (end - size))
        zend = min(end, len(model))
        if off < zend:
            model[off:zend] = b"\0" * (zend - off)
        # whole blocks inside the range become holes; partial ones keep their state
        first, last = (off + B - 1) // B, end // B
        for k in range(first, last):
            blocks.discard(k)
        what = f"zero range {off}+{n}{' keep size' if keep else ''}"
    elif r < 0.93:  # truncate
        n = pick(lim)
        n = min(n, maxsize)
        os.ftruncate(fd, n)
        if n < size:
            del model[n:]
            blocks = {k for k in blocks if k * B < n}
        else:
            model.extend(b"\0" * (n - size))
        what = f"truncate {n}"
    else:  # a reader with the file mapped sees the zeros of a zero range at once
        if size < 2 * B:
            continue
        m = mmap.mmap(fd, size)
        m[:]  # fault it all in
        off = rng.randrange(0, size - B)
        falloc(fd, ZERO | KEEP, off, B + 1)
        model[off:min(off + B + 1, size)] = b"\0" * (min(off + B + 1, size) - off)
        if m[off:min(off + B + 1, size)] != bytes(min(off + B + 1, size) - off):
            sys.exit(f"step {step}: a mapping still shows old bytes after a zero range at {off}")
        m.close()
        first, last = (off + B - 1) // B, (off + B + 1) // B
        for k in range(first, last):
            blocks.discard(k)
        what = f"zero range {off}+{B + 1} under a mapping"
    counts[what.split()[0]] = counts.get(what.split()[0], 0) + 1
    check(step, what)
try:
    falloc(fd, ZERO | PUNCH | KEEP, 0, B)
    sys.exit("ZERO_RANGE|PUNCH_HOLE succeeded")
except OSError as e:
    if e.errno != errno.EOPNOTSUPP:
        sys.exit(f"ZERO_RANGE|PUNCH_HOLE: {e}, expected EOPNOTSUPP")
os.fsync(fd)
os.close(fd)
with open(out, "w") as f:
    f.write("%s %d\n" % (hashlib.sha256(model).hexdigest(), len(model)))
print("%d operations (%s), final size %d" % (nops, ", ".join("%s %d" % kv for kv in sorted(counts.items())), len(model)))
PY

NOPS=1500
MAX=$((6 * 1024 * 1024))
SEEDS="1 2 3"
if command -v mkfs.xfs >/dev/null && { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	t_xfs 512M "$T_WORK/xfs"
	for s in $SEEDS; do
		t_log "xfs, seed $s"
		t_py "$T_WORK/zr.py" "$T_WORK/xfs/f$s" "$s" $NOPS $MAX 0 "$T_WORK/xfs.$s" || t_fail "xfs, seed $s (see above)"
	done
else
	t_log "no xfs here: dmafs against the model only"
fi

t_images 3 256M
t_mkfs -s 64K "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
for s in $SEEDS; do
	t_log "dmafs, seed $s"
	t_py "$T_WORK/zr.py" "$M/f$s" "$s" $NOPS $MAX 1 "$T_WORK/dmafs.$s" || t_fail "dmafs, seed $s (see above)"
	if [ -f "$T_WORK/xfs.$s" ]; then
		cmp -s "$T_WORK/xfs.$s" "$T_WORK/dmafs.$s" ||
			t_fail "seed $s: dmafs ends with $(cat "$T_WORK/dmafs.$s"), xfs with $(cat "$T_WORK/xfs.$s")"
	fi
done
t_umount "$M"
t_log "dmafs-fsck --scrub: every mapped block verifies"
t_fsck 0 --scrub "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M" ro
for s in $SEEDS; do
	got="$(sha256sum <"$M/f$s" | cut -d' ' -f1) $(stat -c %s "$M/f$s")"
	[ "$got" = "$(cat "$T_WORK/dmafs.$s")" ] || t_fail "f$s after a remount: $got, expected $(cat "$T_WORK/dmafs.$s")"
done
t_umount "$M"
t_log "PASS"
