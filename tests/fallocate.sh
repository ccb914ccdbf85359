#!/bin/bash
# Description: fallocate(2): mode 0, KEEP_SIZE and PUNCH_HOLE|KEEP_SIZE checked against a
# byte-for-byte model of the file (content, st_size and exact st_blocks after every step of
# random writes, allocations, punches and truncates, read through the page cache and
# around it); allocated blocks that reused old data read as zeros; a cached and mmap'ed
# reader sees zeros after a punch; the reserved blocks are striped and contiguous per
# member and a write right after fallocate lands in them; ENOSPC leaves df, size and data
# unchanged; a punch works on a full filesystem; errors (EINVAL, EOPNOTSUPP, EBADF,
# EFBIG, EROFS); everything persists across remount and kill -9; dmafs-fsck --scrub is
# clean; rsync --preallocate copies intact. Members: loop devices (BLKZEROOUT), image
# files on tmpfs (FALLOC_FL_PUNCH_HOLE) and a file on faultfs, which has no fallocate
# (zeroing by writes).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
command -v fallocate >/dev/null || t_skip "fallocate(1) not installed (util-linux)"
FSCK=$top_builddir/tools/dmafs-fsck
[ -x "$FSCK" ] || t_skip "dmafs-fsck not built"
MIB=$((1024 * 1024))
t_workdir
M=$T_WORK/mnt

# The model: random operations on one file, each followed by a comparison of the file with
# a bytearray of what it must hold, its st_size, and st_blocks against the set of blocks
# that must be allocated. Saves the expected content to MODEL_OUT.
cat >"$T_WORK/model.py" <<'PY'
import ctypes, errno, os, random, sys

KEEP, PUNCH = 0x01, 0x02
B = 4096
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

def falloc(fd, mode, off, n):
    if libc.fallocate(fd, mode, off, n) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))

path, seed, nops, maxsize, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
su = int(sys.argv[6])
rng = random.Random(seed)
model = bytearray()
blocks = set()  # indices of 4096-byte blocks that must be allocated
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
counts = {}

def pick_off():
    r = rng.random()
    lim = max(len(model), 1) + maxsize // 8
    if r < 0.3:
        return rng.randrange(0, lim // B + 1) * B            # block aligned
    if r < 0.45:
        return rng.randrange(0, lim // su + 1) * su          # stripe-unit aligned
    return rng.randrange(0, lim)

def pick_len(off):
    r = rng.random()
    room = max(1, maxsize - off)
    if r < 0.3:
        n = rng.randrange(1, 2 * B)
    elif r < 0.5:
        n = rng.randrange(1, 4) * B
    elif r < 0.6:
        n = rng.randrange(1, 3) * su
    else:
        n = rng.randrange(1, max(2, maxsize // 4))
    return max(1, min(n, room))

def brange(a, b):  # blocks touched by bytes [a, b)
    return range(a // B, (b + B - 1) // B)

def check(step, what, nocache):
    st = os.fstat(fd)
    if nocache:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    data = os.pread(fd, len(model) + 2 * B, 0)
    where = "(page cache dropped)" if nocache else "(through the page cache)"
    if st.st_size != len(model):
        sys.exit(f"step {step} {what}: st_size {st.st_size}, model {len(model)}")
    if data != model:
        n = min(len(data), len(model))
        i = next((k for k in range(n) if data[k] != model[k]), n)
        sys.exit(f"step {step} {what}: content differs from the model at byte {i} {where}: "
                 f"read {len(data)} bytes, got {data[i:i+8].hex()} expected {bytes(model[i:i+8]).hex()}")
    if st.st_blocks * 512 != len(blocks) * B:
        sys.exit(f"step {step} {what}: st_blocks {st.st_blocks} ({st.st_blocks * 512} bytes), "
                 f"model has {len(blocks)} blocks ({len(blocks) * B} bytes) allocated")

for step in range(nops):
    op = rng.choices(["write", "alloc", "keep", "punch", "trunc", "fsync"],
                     weights=[30, 18, 14, 26, 8, 4])[0]
    counts[op] = counts.get(op, 0) + 1
    off = pick_off()
    n = pick_len(off)
    if op == "write":
        data = rng.randbytes(n)
        if os.pwrite(fd, data, off) != n:
            sys.exit(f"step {step}: short write")
        if off > len(model):
            model.extend(bytes(off - len(model)))
        model[off:off + n] = data
        blocks.update(brange(off, off + n))
        what = f"pwrite {off}+{n}"
    elif op in ("alloc", "keep"):
        falloc(fd, KEEP if op == "keep" else 0, off, n)
        if op == "alloc" and off + n > len(model):
            model.extend(bytes(off + n - len(model)))
        blocks.update(brange(off, off + n))
        what = f"fallocate {'-n ' if op == 'keep' else ''}-o {off} -l {n}"
    elif op == "punch":
        if rng.random() < 0.5:  # a cached reader first: the punch must drop its pages
            os.pread(fd, n, off)
        falloc(fd, PUNCH | KEEP, off, n)
        end = min(off + n, len(model))
        if off < end:
            model[off:end] = bytes(end - off)
        blocks.difference_update(range((off + B - 1) // B, (off + n) // B))
        what = f"fallocate -p -o {off} -l {n}"
    elif op == "trunc":
        n = rng.randrange(0, maxsize)
        os.ftruncate(fd, n)
        if n < len(model):
            del model[n:]
        else:
            model.extend(bytes(n - len(model)))
        keep = (n + B - 1) // B
        blocks = {b for b in blocks if b < keep}
        what = f"ftruncate {n}"
    else:
        os.fsync(fd)
        what = "fsync"
    check(step, what, nocache=False)
    if step % 3 == 2:
        check(step, what, nocache=True)

os.fsync(fd)
os.close(fd)
with open(out, "wb") as f:
    f.write(model)
print(f"{nops} steps: " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())) +
      f"; final size {len(model)}, {len(blocks)} blocks allocated")
PY
MODEL=$T_WORK/model.py

# t_model FILE SEED STEPS MAXSIZE SU - run the model on FILE; expected content in FILE.model
t_model() {
	local out
	out=$(t_py "$MODEL" "$1" "$2" "$3" "$4" "$T_WORK/$(basename "$1").model" "$5" 2>&1) ||
		t_fail "model run on $1 (seed $2): $out"
	t_log "  $out"
}

# fill_and_free DIR MiB - write random data, delete it and commit, so that new allocations
# reuse blocks that hold old data (zeroing is then visible).
fill_and_free() {
	head -c $(($2 * MIB)) /dev/urandom >"$1/fill" || t_fail "fill $2 MiB"
	sync "$1/fill"
	rm "$1/fill" || t_fail "rm fill"
	sync -f "$1"
}

# blocks FILE - st_blocks
blocks() { stat -c %b "$1"; }

# layout FILE - the extent lines of the layout attribute
layout() { getfattr --only-values -n user.dmafs.layout "$1" 2>/dev/null | tail -n +2; }

# layout_norm FILE - the extent lines with pieces that continue each other (in the file and
# on the member, inside one stripe unit) joined, as replay joins them
layout_norm() {
	layout "$1" | awk -v su="$SU" '
		n && $1 == o + l && $3 == m && $4 == mo + l && int($1 / su) == int(o / su) { l += $2; next }
		n { print o, l, m, mo }
		{ o = $1; l = $2; m = $3; mo = $4; n = 1 }
		END { if (n) print o, l, m, mo }'
}

# contiguous FILE SU - every member's pieces of FILE follow each other on the member
contiguous() {
	layout "$1" | awk -v su="$2" '
		{ m = $3; if (m in end && $4 != end[m]) { bad = 1; print "member " m ": piece at file offset " $1 " is at " $4 ", previous ends at " end[m] }
		  end[m] = $4 + $2; n++ }
		END { exit bad || n == 0 }'
}

SU=$((64 * 1024))

#
# Part 1: loop devices (zeroing with BLKZEROOUT)
#
t_loops 4 96M
t_mkfs -s 64K "${T_LOOPDEVS[@]}"
t_mount "$T_MEMBERS" "$M" "attr_timeout=0,commit=3600"

t_log "allocated blocks on a fresh filesystem: striped, contiguous per member, zeros, st_blocks"
fallocate -l $((48 * SU)) "$M/fresh" || t_fail "fallocate -l on a fresh filesystem"
[ "$(stat -c %s "$M/fresh")" = $((48 * SU)) ] || t_fail "mode 0 did not set the size: $(stat -c %s "$M/fresh")"
[ "$(blocks "$M/fresh")" = $((48 * SU / 512)) ] || t_fail "st_blocks $(blocks "$M/fresh") after fallocate of $((48 * SU)) bytes"
contiguous "$M/fresh" $SU || t_fail "the reserved blocks are not one run per member: $(layout "$M/fresh" | head)"
ext=$(layout "$M/fresh" | wc -l)
mems=$(layout "$M/fresh" | awk '{print $3}' | sort -u | wc -l)
[ "$mems" = 4 ] || t_fail "reserved blocks on $mems members, expected all 4"
cmp -n $((48 * SU)) "$M/fresh" /dev/zero || t_fail "freshly allocated file does not read as zeros"

# fallocate(1) fsyncs after fallocate(2), which commits the reserved blocks; a program that
# writes right after posix_fallocate() (before the next commit) writes into them in place.
t_log "a write right after posix_fallocate lands in the reserved blocks"
head -c $((48 * SU)) /dev/urandom >"$T_WORK/rand" || t_fail "urandom"
t_py -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); os.posix_fallocate(fd, 0, $((48 * SU)))" \
	"$M/inplace" || t_fail "posix_fallocate"
before=$(layout "$M/inplace")
dd if="$T_WORK/rand" of="$M/inplace" bs=1M conv=notrunc status=none || t_fail "write over the reserved range"
[ "$(layout "$M/inplace")" = "$before" ] || t_fail "the write moved the data out of the reserved blocks:
before: $(echo "$before" | head -4)
after:  $(layout "$M/inplace" | head -4)"
[ "$(blocks "$M/inplace")" = $((48 * SU / 512)) ] || t_fail "st_blocks changed by writing into reserved blocks"
cmp "$M/inplace" "$T_WORK/rand" || t_fail "data written into the reserved blocks reads back wrong"
t_log "  after a commit, a write into reserved blocks is copy on write: data still right"
dd if="$T_WORK/rand" of="$M/fresh" bs=1M conv=notrunc,fsync status=none || t_fail "write over committed reserved blocks"
cmp "$M/fresh" "$T_WORK/rand" || t_fail "data written over committed reserved blocks reads back wrong"
[ "$(blocks "$M/fresh")" = $((48 * SU / 512)) ] || t_fail "st_blocks $(blocks "$M/fresh") after overwriting the reserved blocks"
contiguous "$M/fresh" $SU || t_fail "overwritten reserved file is not one run per member"
t_log "  $ext extents on 4 members"

t_log "blocks that held deleted data read as zeros once allocated"
fill_and_free "$M" 300
fallocate -l 200M "$M/reused" || t_fail "fallocate 200M over freed blocks"
cmp -n $((200 * MIB)) "$M/reused" /dev/zero || t_fail "allocated blocks that reused old data do not read as zeros"
fallocate -n -o 200M -l 40M "$M/reused" || t_fail "fallocate -n past the end"
[ "$(stat -c %s "$M/reused")" = $((200 * MIB)) ] || t_fail "KEEP_SIZE changed the size"
[ "$(blocks "$M/reused")" = $((240 * MIB / 512)) ] || t_fail "st_blocks $(blocks "$M/reused") after KEEP_SIZE past the end"
truncate -s 240M "$M/reused" || t_fail "truncate into the KEEP_SIZE blocks"
cmp -n $((240 * MIB)) "$M/reused" /dev/zero || t_fail "KEEP_SIZE blocks past the old end do not read as zeros"
rm "$M/reused"
sync -f "$M"

t_log "the model: random writes, fallocate (0, KEEP_SIZE), punches, truncates"
fill_and_free "$M" 300
t_model "$M/model1" 1 300 $((4 * MIB)) $SU
t_model "$M/model2" 2 200 $((1 * MIB)) $SU

t_log "a cached reader and an mmap'ed reader see zeros after a punch"
head -c $((2 * MIB)) /dev/urandom >"$M/mm" || t_fail "write mm"
t_py - "$M/mm" <<'PY' || t_fail "reader saw stale data after a punch"
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 2 << 20, mmap.MAP_SHARED, mmap.PROT_READ)
before = m[:]                                   # every page cached and mapped
assert os.pread(fd, 2 << 20, 0) == before
off, n = 123457, 700001
assert libc.fallocate(fd, 3, off, n) == 0, os.strerror(ctypes.get_errno())
want = before[:off] + bytes(n) + before[off + n:]
assert m[:] == want, "mmap view after the punch"
assert os.pread(fd, 2 << 20, 0) == want, "pread after the punch"
PY

t_log "errors"
t_py - "$M" <<'PY' || t_fail "fallocate error codes"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
def err(fd, mode, off, n):
    r = libc.fallocate(fd, mode, off, n)
    return 0 if r == 0 else ctypes.get_errno()
M = sys.argv[1]
fd = os.open(f"{M}/e", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 10000)
want = [
    ("len 0", 0, 0, 0, errno.EINVAL),
    ("negative offset", 0, -4096, 4096, errno.EINVAL),
    ("negative length", 0, 0, -1, errno.EINVAL),
    ("PUNCH_HOLE without KEEP_SIZE", 0x02, 0, 4096, errno.EOPNOTSUPP),
    ("COLLAPSE_RANGE", 0x08, 0, 4096, errno.EOPNOTSUPP),
    ("ZERO_RANGE with PUNCH_HOLE", 0x13, 0, 4096, errno.EOPNOTSUPP),
    ("INSERT_RANGE", 0x20, 0, 4096, errno.EOPNOTSUPP),
    ("UNSHARE_RANGE", 0x40, 0, 4096, errno.EOPNOTSUPP),
    ("past the largest file", 0, (1 << 60) - 4096, 8192, errno.EFBIG),
    ("offset + length overflows", 0, 1 << 62, 1 << 62, errno.EFBIG),
]
bad = []
for what, mode, off, n, e in want:
    got = err(fd, mode, off, n)
    if got != e:
        bad.append(f"{what}: got {errno.errorcode.get(got, got)}, expected {errno.errorcode[e]}")
st = os.fstat(fd)
if st.st_size != 10000 or os.pread(fd, 20000, 0) != b"x" * 10000:
    bad.append("a failed fallocate changed the file")
ro = os.open(f"{M}/e", os.O_RDONLY)
if err(ro, 0, 0, 4096) != errno.EBADF:
    bad.append("fallocate on an O_RDONLY descriptor is not EBADF")
d = os.open(M, os.O_RDONLY | os.O_DIRECTORY)
if err(d, 0, 0, 4096) not in (errno.EBADF, errno.EISDIR):
    bad.append("fallocate on a directory is neither EBADF nor EISDIR")
if bad:
    sys.exit("\n".join(bad))
PY

t_log "ENOSPC: too large an allocation changes nothing"
rm -f "$M/fresh" "$M/inplace" "$M/mm" "$M/e"
sync -f "$M"
head -c 3000000 /dev/urandom >"$M/keep" && sync "$M/keep" || t_fail "write keep"
sum=$(sha256sum <"$M/keep")
kb=$(blocks "$M/keep")
free0=$(t_free_bytes "$M")
bfree0=$(t_statfs "$M" f_bfree)
err=$(fallocate -l $((free0 + 64 * MIB)) "$M/big" 2>&1) && t_fail "fallocate beyond the free space succeeded"
case $err in *"No space left"*) ;; *) t_fail "too large fallocate: not ENOSPC: $err" ;; esac
[ "$(stat -c '%s %b' "$M/big")" = "0 0" ] || t_fail "failed fallocate left size/blocks $(stat -c '%s %b' "$M/big")"
err=$(fallocate -n -o 1000 -l $((free0 + 64 * MIB)) "$M/keep" 2>&1) && t_fail "KEEP_SIZE beyond the free space succeeded"
case $err in *"No space left"*) ;; *) t_fail "too large fallocate -n: not ENOSPC: $err" ;; esac
err=$(fallocate -o 4000000 -l $((free0 + 64 * MIB)) "$M/keep" 2>&1) && t_fail "mode 0 beyond the free space succeeded"
case $err in *"No space left"*) ;; *) t_fail "too large fallocate (mode 0): not ENOSPC: $err" ;; esac
[ "$(t_free_bytes "$M")" = "$free0" ] || t_fail "free space $free0 -> $(t_free_bytes "$M") after failed fallocates"
[ "$(t_statfs "$M" f_bfree)" = "$bfree0" ] || t_fail "f_bfree $bfree0 -> $(t_statfs "$M" f_bfree) after failed fallocates"
[ "$(sha256sum <"$M/keep")" = "$sum" ] && [ "$(stat -c %s "$M/keep")" = 3000000 ] &&
	[ "$(blocks "$M/keep")" = "$kb" ] || t_fail "failed fallocate changed the file it was given"

t_log "an allocation of nearly all the space succeeds; a punch on the full filesystem frees space"
want=$((free0 - 8 * MIB))
fallocate -l $want "$M/big" || t_fail "fallocate of $want of $free0 free bytes"
used=$(((bfree0 - $(t_statfs "$M" f_bfree)) * 4096))
[ "$used" = $(((want + 4095) / 4096 * 4096)) ] || t_fail "fallocate of $want bytes took $used bytes of free space"
sync "$M/big"
cmp -n $want "$M/big" /dev/zero || t_fail "the big allocation does not read as zeros"
dd if=/dev/zero of="$M/rest" bs=64K status=none 2>/dev/null && t_fail "filling the rest did not end in ENOSPC"
sync -f "$M"
[ "$(t_free_bytes "$M")" -lt $((1 * MIB)) ] || t_fail "filesystem not full: $(t_free_bytes "$M") bytes free"
bfull=$(t_statfs "$M" f_bfree)
# unaligned: the partial head and tail blocks are rewritten (copy on write) with the space
# the whole blocks free
poff=12345 plen=$((want - 20000))
fallocate -p -o $poff -l $plen "$M/big" || t_fail "unaligned punch on a full filesystem"
sync -f "$M"
whole=$(((poff + plen) / 4096 - (poff + 4095) / 4096))
[ "$(t_statfs "$M" f_bfree)" = $((bfull + whole)) ] ||
	t_fail "f_bfree $bfull -> $(t_statfs "$M" f_bfree) after punching $whole whole blocks"
[ "$(stat -c %s "$M/big")" = "$want" ] || t_fail "punch changed the size"
[ "$(blocks "$M/big")" = $(((want + 4095) / 4096 * 8 - whole * 8)) ] || t_fail "st_blocks $(blocks "$M/big") after the punch"
cmp -n $want "$M/big" /dev/zero || t_fail "punched file does not read as zeros"
rm "$M/big" "$M/rest"
sync -f "$M"

t_log "rsync --preallocate into the mount"
if command -v rsync >/dev/null; then
	head -c 5242883 /dev/urandom >"$T_WORK/src.bin" || t_fail "src.bin"
	rsync --preallocate "$T_WORK/src.bin" "$M/rsynced.bin" || t_fail "rsync --preallocate"
	cmp "$T_WORK/src.bin" "$M/rsynced.bin" || t_fail "rsync --preallocate copy differs"
else
	t_log "  rsync not installed: this part is not run (not a pass of it)"
fi

t_log "persistence: content, size, st_blocks and layout across remount"
for f in model1 model2 keep rsynced.bin; do
	[ -e "$M/$f" ] || continue
	stat -c "$f %s %b" "$M/$f"
	layout_norm "$M/$f" | sha256sum
done >"$T_WORK/state1"
t_umount "$M"
t_fsck 0 --scrub "$T_MEMBERS"
t_mount "$T_MEMBERS" "$M" "attr_timeout=0"
for f in model1 model2 keep rsynced.bin; do
	[ -e "$M/$f" ] || continue
	stat -c "$f %s %b" "$M/$f"
	layout_norm "$M/$f" | sha256sum
done >"$T_WORK/state2"
diff "$T_WORK/state1" "$T_WORK/state2" || t_fail "size, blocks or layout changed across remount"
cmp "$M/model1" "$T_WORK/model1.model" && cmp "$M/model2" "$T_WORK/model2.model" ||
	t_fail "model files differ from the model after remount"

t_log "kill -9 after fallocate + fsync: the allocation survives"
t_py - "$M" <<'PY' || t_fail "fallocate before the crash"
import os, sys
fd = os.open(sys.argv[1] + "/crash", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"head")
os.posix_fallocate(fd, 0, 3 << 20)
os.fsync(fd)
PY
t_crash "$M"
t_fsck 0 --scrub "$T_MEMBERS"
t_mount "$T_MEMBERS" "$M" "ro"
[ "$(stat -c %s "$M/crash")" = $((3 * MIB)) ] || t_fail "size after the crash: $(stat -c %s "$M/crash")"
[ "$(blocks "$M/crash")" = $((3 * MIB / 512)) ] || t_fail "blocks after the crash: $(blocks "$M/crash")"
{ printf head; head -c $((3 * MIB - 4)) /dev/zero; } | cmp - "$M/crash" || t_fail "content after the crash"
t_log "read-only mount: EROFS"
err=$(fallocate -n -l 4096 "$M/crash" 2>&1) && t_fail "fallocate on a read-only mount succeeded"
case $err in *"Read-only"*) ;; *) t_fail "fallocate on a read-only mount: not EROFS: $err" ;; esac
t_umount "$M"

#
# Part 2: image files on tmpfs (zeroing with FALLOC_FL_PUNCH_HOLE)
#
t_log "image files on tmpfs"
t_images 3 96M
t_mkfs "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M" "attr_timeout=0"
fill_and_free "$M" 200
fallocate -l 150M "$M/z" || t_fail "fallocate on image members"
cmp -n $((150 * MIB)) "$M/z" /dev/zero || t_fail "allocated blocks on image members do not read as zeros"
rm "$M/z"
t_model "$M/model3" 3 120 $((3 * MIB)) $((1024 * 1024))
t_umount "$M"
t_fsck 0 --scrub "$T_MEMBERS"

#
# Part 3: a member on faultfs (tests/faultfs), which has no fallocate: zeroing by writes
#
FAULTFS=$top_builddir/tests/faultfs
if [ -x "$FAULTFS" ]; then
	t_log "a member without BLKZEROOUT or fallocate (faultfs): zeroing falls back to writes"
	t_images 2 128M ff
	t_faultfs "${T_IMGS[1]}"
	FF=$T_FF
	t_mkfs "${T_IMGS[0]}" "$FF/disk"
	t_mount_fg "${T_IMGS[0]},$FF/disk" "$M" "attr_timeout=0"
	fill_and_free "$M" 100
	fallocate -l 60M "$M/z" || t_fail "fallocate with a faultfs member"
	cmp -n $((60 * MIB)) "$M/z" /dev/zero || t_fail "blocks zeroed by writes do not read as zeros"
	grep -q "member 1 .*fallocate zeroes its blocks by writing zeros" "$T_DAEMON_ERR" ||
		t_fail "no notice of the fallback to zero writes for member 1: $(cat "$T_DAEMON_ERR")"
	grep -q "member 0 .*writing zeros" "$T_DAEMON_ERR" && t_fail "member 0 (on tmpfs) fell back to writes too"
	rm "$M/z"
	t_model "$M/model4" 4 60 $((2 * MIB)) $((1024 * 1024))
	t_umount "$M"
	wait "$T_DAEMON_PID" || t_fail "daemon exit status $?"
	t_fsck 0 --scrub "${T_IMGS[0]},$FF/disk"
else
	t_log "faultfs not built: the zero-write fallback is not run (not a pass of it)"
fi
t_log "PASS"
