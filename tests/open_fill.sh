#!/bin/bash
# Description: open_fill, small files' data sent to the kernel's page cache with the open.
# Mechanism: after a remount, a file of at most open_fill_kb (default 128 KiB) opened
# read-only has every page in the page cache before a byte is read (mincore of a mapping),
# one larger does not, nor with open_fill_kb=0, nor while its atime is due (relatime: the
# first read after a write must reach the daemon); after the kernel let go of the inode
# (drop_caches) the next open fills again; contents equal the files. Exactness: a writer
# rewrites a 48 KiB file (O_RDWR through the page cache, O_WRONLY past it, truncate(2) by
# path, each version stamped in every 512-byte sector) while readers open and read it and
# the kernel keeps forgetting the inode, the single member slow (faultfs, reads 20 ms) so
# that each fill lasts long: a read that starts after a version was written never shows an
# older one (a fill that sent data read before a write landed would leave it in the cache).
# dmafs-load (without --verify) and dmafs.SampleReader open with O_DIRECT: their opens
# leave nothing in the page cache.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
W=$T_WORK
M=$W/mnt
t_images 1 256M
t_faultfs "${T_IMGS[0]}"
CTL=$T_FF_CTL
t_mkfs "$T_FF/disk"

# cached FILE... - "NAME resident/pages" for each FILE opened read-only, nothing read
# (PEEK=1: opened with O_DIRECT, which dmafs does not fill)
cached() {
	t_py - "$@" <<'PY'
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
peek = os.environ.get("PEEK") == "1"  # O_DIRECT: an open that fills nothing itself
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY | (os.O_DIRECT if peek else 0))
    n = os.fstat(fd).st_size
    pages = (n + 4095) // 4096
    vec = ctypes.create_string_buffer(pages)
    addr = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)  # no page touched
    if addr in (None, ctypes.c_void_p(-1).value) or libc.mincore(addr, n, vec) != 0:
        sys.exit(f"mmap/mincore {p}: {os.strerror(ctypes.get_errno())}")
    print(f"{os.path.basename(p)} {sum(b & 1 for b in vec.raw)}/{pages}")
    libc.munmap(addr, n)
    os.close(fd)
PY
}
SIZES="1 4095 4096 49152 131072 131073"
t_mount "$T_FF/disk" "$M"
for s in $SIZES; do
	head -c "$s" /dev/urandom >"$W/ref$s" && cp "$W/ref$s" "$M/f$s" || t_fail "writing f$s"
done
t_umount "$M"

t_log "relatime, first open after the write: the atime is due, nothing sent with the open"
t_mount "$T_FF/disk" "$M"
got=$(cached $(for s in $SIZES; do echo "$M/f$s"; done)) || t_fail "mincore: $got"
for s in $SIZES; do
	echo "$got" | grep -qx "f$s 0/.*" || t_fail "f$s: pages cached at an open whose atime was due: $(echo "$got" | tr '\n' ' ')"
	cmp -s "$W/ref$s" "$M/f$s" || t_fail "f$s differs from what was written"
done
t_umount "$M"

t_log "opens that only place do not fill: dmafs-load (no --verify) and dmafs.SampleReader"
t_mount "$T_FF/disk" "$M"
LOAD=$top_builddir/tools/dmafs-load
"$LOAD" -q --target host $(for s in $SIZES; do echo "$M/f$s"; done) >"$W/load.out" 2>&1 ||
	t_fail "dmafs-load of the files: $(cat "$W/load.out")"
PY=${DMAFS_TEST_PYTHON:-/usr/bin/python3}
if [ -x "$PY" ] && "$PY" -c "import torch" 2>/dev/null; then
	DMAFS_LIBRARY=${DMAFS_LIBRARY:-$top_builddir/lib/.libs/libdmafs.so.0} PYTHONPATH="$top_srcdir/lib/python" \
		"$PY" -c 'import sys, dmafs; dmafs.SampleReader(sys.argv[1:]).close()' \
		$(for s in $SIZES; do echo "$M/f$s"; done) 2>"$W/reader.err" || t_fail "SampleReader: $(cat "$W/reader.err")"
else
	t_log "no torch in $PY: SampleReader's opens not checked"
fi
got=$(PEEK=1 cached $(for s in $SIZES; do echo "$M/f$s"; done)) || t_fail "mincore: $got"
for s in $SIZES; do
	echo "$got" | grep -qx "f$s 0/.*" || t_fail "f$s: pages cached by opens that only placed it: $(echo "$got" | tr '\n' ' ')"
done
t_umount "$M"

t_log "mounted again (atime no longer due): files of at most 128 KiB are in the page cache after the open"
for opts in "" open_fill_kb=0; do
	t_mount "$T_FF/disk" "$M" "$opts"
	got=$(cached $(for s in $SIZES; do echo "$M/f$s"; done)) || t_fail "mincore: $got"
	for s in $SIZES; do
		pages=$(((s + 4095) / 4096))
		if [ -z "$opts" ] && [ "$s" -le 131072 ]; then want="$pages/$pages"; else want="0/$pages"; fi
		echo "$got" | grep -qx "f$s $want" ||
			t_fail "${opts:-default}: f$s: $(echo "$got" | grep "^f$s ") of its pages cached after an open, expected $want"
		cmp -s "$W/ref$s" "$M/f$s" || t_fail "${opts:-default}: f$s differs from what was written"
	done
	t_log "${opts:-default}: $(echo "$got" | tr '\n' ' ')"
	if [ -z "$opts" ]; then
		# the kernel forgets the inodes: the next open fills again
		sync
		echo 2 >/proc/sys/vm/drop_caches
		got=$(cached "$M/f49152") || t_fail "mincore: $got"
		[ "$got" = "f49152 12/12" ] || t_fail "after drop_caches the open did not fill f49152 again: $got"
	fi
	t_umount "$M"
done

t_log "a writer rewrites 16 files of 48 KiB while readers open and read them, fills slowed to 20 ms"
t_mount "$T_FF/disk" "$M" noatime
echo "read_delay_ms 20" >"$CTL"
t_py - "$M/race" <<'PY' || t_fail "a reader saw an older version than one already written (above)"
import os, random, struct, sys, threading, time
base = sys.argv[1]
SIZE, SEC, NF = 48 << 10, 512, 16

def content(v):
    return b"".join(struct.pack("<QQ", v, k) + bytes(SEC - 16) for k in range(SIZE // SEC))

paths = [f"{base}{i}" for i in range(NF)]
for p in paths:
    with open(p, "wb") as f:
        f.write(content(1))
done = [1] * NF
stop = time.monotonic() + 12
errors, reads, zeros = [], [0], [0]

def writer():
    v = 1
    while time.monotonic() < stop and not errors:
        v += 1
        i = v % NF
        if v % 3 == 2:  # truncate by path, then the new version through the page cache
            os.truncate(paths[i], 0)
            done[i] = v  # no older version may be read from now on (only zeros or v)
        fd = os.open(paths[i], os.O_WRONLY if v % 3 == 1 else os.O_RDWR)
        os.pwrite(fd, content(v), 0)
        os.close(fd)
        done[i] = v
        time.sleep(0.002)

def reader(seed):
    rng = random.Random(seed)
    while time.monotonic() < stop and not errors:
        i = rng.randrange(NF)
        d = done[i]
        with open(paths[i], "rb") as f:
            b = f.read()
        reads[0] += 1
        for k in range(0, len(b) - SEC + 1, SEC):
            v, idx = struct.unpack_from("<QQ", b, k)
            if v == 0 and idx == 0 and not any(b[k:k + SEC]):
                # FUSE's own: a read racing truncate(2) and the write after it can get a
                # short reply where the kernel already has the larger size, and the kernel
                # fills the rest with zeros (with open_fill_kb=0 as well); no old data
                zeros[0] += 1
                continue
            if idx != k // SEC or v < d:
                errors.append(f"file {i} sector {k // SEC}: version {v} (index {idx}) read "
                              f"after version {d} was written")
                break

def forget():  # the kernel lets go of the inodes not in use: their next open fills again
    while time.monotonic() < stop and not errors:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        time.sleep(0.005)

th = [threading.Thread(target=writer), threading.Thread(target=forget)] + \
    [threading.Thread(target=reader, args=(s,)) for s in range(3)]
for t in th:
    t.start()
for t in th:
    t.join()
if errors:
    sys.exit("[open_fill] " + errors[0])
print(f"[open_fill] {max(done) - 1} versions written to {NF} files, {reads[0]} reads, none older "
      f"than what was written before it ({zeros[0]} zero sectors read during truncates)")
PY
: >"$CTL"
t_umount "$M"
t_log "PASS"
