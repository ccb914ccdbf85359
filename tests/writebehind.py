# SPDX-License-Identifier: MIT
"""writebehind.py MNT PHASE - checks of write-behind on a mounted dmafs (see writebehind.sh).

PHASE "live": on the mounted filesystem, before any unmount; "after": after a remount,
what "live" wrote must be there. Exits 1 with a message on the first wrong result.
"""
import errno
import hashlib
import mmap
import os
import random
import sys

MNT, PHASE = sys.argv[1], sys.argv[2]
MiB = 1 << 20
rng = random.Random(20261122)


def fail(msg):
    print(f"[writebehind.py] FAIL: {msg}")
    sys.exit(1)


def data(n, seed):
    return random.Random(seed).randbytes(n)


def direct_read(path, size):
    """Read @size bytes with O_DIRECT: past the kernel's page cache, from the daemon."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        out = bytearray()
        buf = mmap.mmap(-1, 4 * MiB)
        while len(out) < size:
            n = os.preadv(fd, [buf], len(out))
            if n <= 0:
                break
            out += buf[:n]
        return bytes(out[:size])
    finally:
        os.close(fd)


def sha(b):
    return hashlib.sha256(b).hexdigest()


if PHASE == "live":
    # 1. a sequential stream, read back with O_DIRECT before close and before any fsync
    p = f"{MNT}/stream"
    want = data(37 * MiB + 12345, 1)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(0, len(want), MiB):
        os.write(fd, want[i:i + MiB])
    st = os.stat(p)  # another path to the size than the descriptor's
    if st.st_size != len(want):
        fail(f"stat during buffered writes: size {st.st_size}, written {len(want)}")
    got = direct_read(p, len(want) + 4096)
    if got != want:
        fail(f"O_DIRECT read of unsynced buffered data differs (got {len(got)} bytes)")
    os.close(fd)

    # 2. odd-sized appends (partial blocks carried between chunks), then a read through
    # the page cache and one with O_DIRECT
    p = f"{MNT}/appends"
    parts = [data(rng.choice([1, 511, 4095, 4097, 65537, 1048577, 3000000]), 100 + i)
             for i in range(60)]
    want = b"".join(parts)
    with open(p, "wb", buffering=0) as f:
        for x in parts:
            f.write(x)
    if direct_read(p, len(want)) != want:
        fail("odd-sized appends: O_DIRECT read differs")
    with open(p, "rb") as f:
        if f.read() != want:
            fail("odd-sized appends: buffered read differs")

    # 3. random overwrites into a buffered file, against a model
    p = f"{MNT}/overwrite"
    model = bytearray(data(20 * MiB, 2))
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, model)
    for i in range(200):
        off = rng.randrange(0, len(model) + 2 * MiB)
        n = rng.choice([1, 4096, 5000, MiB, 2 * MiB + 7])
        b = data(n, 1000 + i)
        os.pwrite(fd, b, off)
        if off > len(model):
            model += bytes(off - len(model))
        model[off:off + n] = b
    if os.fstat(fd).st_size != len(model):
        fail(f"overwrites: size {os.fstat(fd).st_size}, model {len(model)}")
    if direct_read(p, len(model) + 4096) != bytes(model):
        fail("overwrites: content differs from the model")
    os.fsync(fd)
    os.close(fd)

    # 4. truncate while data is buffered (shrink, then grow with a hole)
    p = f"{MNT}/trunc"
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data(9 * MiB, 3))
    os.ftruncate(fd, MiB + 3)
    os.pwrite(fd, b"tail", 5 * MiB)
    want = data(9 * MiB, 3)[:MiB + 3] + bytes(5 * MiB - MiB - 3) + b"tail"
    if direct_read(p, len(want) + 10) != want:
        fail("truncate of buffered data: content differs")
    os.close(fd)

    # 5. times set before close (cp -a, rsync): the buffered data must not move mtime
    p = f"{MNT}/times"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o4755)
    os.fchmod(fd, 0o4755)
    os.write(fd, data(6 * MiB, 4))
    os.utime(fd, ns=(1_000_000_000_123, 946_782_245_123_456_789))
    os.close(fd)
    st = os.stat(p)
    if st.st_mtime_ns != 946_782_245_123_456_789:
        fail(f"mtime set before close became {st.st_mtime_ns}")

    # 6. an unlinked file still open takes buffered writes and reads them back
    p = f"{MNT}/unlinked"
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.unlink(p)
    want = data(8 * MiB, 5)
    os.write(fd, want)
    if os.pread(fd, len(want), 0) != want:
        fail("unlinked open file: read-back differs")
    os.close(fd)

    # 7. the free space reported drops as soon as data is accepted
    sv0 = os.statvfs(MNT)
    p = f"{MNT}/space"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data(8 * MiB, 6))
    sv1 = os.statvfs(MNT)
    used = (sv0.f_bfree - sv1.f_bfree) * sv0.f_frsize
    if used < 8 * MiB:
        fail(f"statfs: 8 MiB accepted but free space fell by {used} bytes")
    os.close(fd)

    # 8. a write-only descriptor (direct I/O to the daemon) and a reader that has the
    # file in the page cache, through read(2) and mmap: the reader sees the new bytes
    p = f"{MNT}/coherent"
    with open(p, "wb") as f:
        f.write(b"A" * 3000000)
    r = os.open(p, os.O_RDONLY)
    m = mmap.mmap(r, 0, prot=mmap.PROT_READ)
    if os.pread(r, 3000000, 0) != b"A" * 3000000 or m[:3000000] != b"A" * 3000000:
        fail("coherence: first read differs")
    w = os.open(p, os.O_WRONLY)
    os.pwrite(w, b"B" * 1000000, 500000)
    os.close(w)
    want = b"A" * 500000 + b"B" * 1000000 + b"A" * 1500000
    if os.pread(r, 3000000, 0) != want:
        fail("coherence: read(2) through a cached descriptor is stale after a write-only write")
    if m[:] != want:
        fail("coherence: an mmap of the file is stale after a write-only write")
    m.close()
    os.close(r)

    # 9. stat(2) and truncate(2) by path (no open file) racing with the last close of a
    # writer: the waiters must not outlive the file's write-behind state
    import threading
    p = f"{MNT}/race"
    stop = threading.Event()
    errors = []

    def statter():
        while not stop.is_set():
            try:
                os.stat(p)
                os.truncate(p, 4096) if rng.random() < 0.05 else None
            except FileNotFoundError:
                pass
            except OSError as e:
                errors.append(e)

    ts = [threading.Thread(target=statter) for _ in range(3)]
    for t in ts:
        t.start()
    chunk = data(3 * MiB + 5, 8)
    for i in range(150):
        with open(p, "wb") as f:
            f.write(chunk)
    stop.set()
    for t in ts:
        t.join()
    if errors:
        fail(f"stat/truncate racing with writers failed: {errors[:3]}")
    if os.path.getsize(p) not in (len(chunk), 4096):
        fail(f"race file has size {os.path.getsize(p)}")

    # 10. ENOSPC is returned by write(2) itself, and what write accepted survives
    p = f"{MNT}/fill"
    total = 0
    err = None
    h = hashlib.sha256()
    with open(p, "wb", buffering=0) as f:
        chunk = data(MiB, 7)
        while True:
            try:
                n = f.write(chunk)  # a short write is followed by the whole chunk again
            except OSError as e:
                err = e.errno
                break
            h.update(chunk[:n])
            total += n
            if total > 4 << 30:
                fail("4 GiB written into a small filesystem without ENOSPC")
        try:
            os.fsync(f.fileno())
        except OSError as e:
            fail(f"fsync after ENOSPC failed: {e}")
    if err != errno.ENOSPC:
        fail(f"filling the filesystem ended with errno {err}, not ENOSPC")
    if os.stat(p).st_size != total:
        fail(f"after ENOSPC: size {os.stat(p).st_size}, accepted {total}")
    # room for the checksum file: free some space and commit, so that it is usable
    os.unlink(f"{MNT}/race")
    os.unlink(f"{MNT}/overwrite")
    with open(f"{MNT}/stream", "rb") as f:
        os.fsync(f.fileno())
    with open(f"{MNT}/fill.sum", "w") as f:
        f.write(f"{total} {h.hexdigest()}\n")
    os.unlink(f"{MNT}/space")
    print(f"[writebehind.py] live checks passed ({total >> 20} MiB accepted before ENOSPC)")
elif PHASE == "after":
    checks = {
        "stream": data(37 * MiB + 12345, 1),
        "times": data(6 * MiB, 4),
    }
    for name, want in checks.items():
        with open(f"{MNT}/{name}", "rb") as f:
            if f.read() != want:
                fail(f"after remount: {name} differs")
    st = os.stat(f"{MNT}/times")
    if st.st_mtime_ns != 946_782_245_123_456_789:
        fail(f"after remount: mtime {st.st_mtime_ns}")
    if os.path.exists(f"{MNT}/unlinked"):
        fail("after remount: the unlinked file is back")
    total, digest = open(f"{MNT}/fill.sum").read().split()
    with open(f"{MNT}/fill", "rb") as f:
        b = f.read()
    if len(b) != int(total) or sha(b) != digest:
        fail(f"after remount: the file filled to ENOSPC differs ({len(b)} bytes, {total} accepted)")
    print("[writebehind.py] checks after remount passed")
else:
    fail(f"unknown phase {PHASE}")
