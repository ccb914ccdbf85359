# SPDX-License-Identifier: MIT
"""Helper of place_race.sh: a writer changes an 8 MiB file while placements of the whole
file (tests/tier_place, one process each) run back to back; every block of every
placement is checked, and once the writer stops a placement must equal the file.

Usage: place_race.py FILE TIER_PLACE SECONDS MODE
  aligned    writes (buffered from page-aligned memory, and O_DIRECT) of whole blocks,
             each block stamped (version, block number): every placed block must be one
             version whole, never older than what an earlier placement showed
  unaligned  the same with buffered writes from bytes objects: the kernel's requests then
             end inside blocks, and a block may be seen half written while its write(2)
             goes on (its older half is the version that counts)
  rename     whole new files renamed over FILE: each placement (which opens FILE anew) is
             one file's version, never older than the one before
  cut        writes, truncates and punched holes: a block is a whole version or zeros
             (cut off, or punched), and never older than an earlier placement's
Exit 0 with a summary line, or 1 with the reason."""
import ctypes
import mmap
import os
import random
import struct
import subprocess
import sys
import threading
import time

path, tp, secs, mode = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
BS, NB = 4096, 2048
ZERO = bytes(BS)
rng = random.Random(1)
stop = threading.Event()
err = []
ops = {}
mem = mmap.mmap(-1, NB * BS)  # page-aligned: buffered writes from it end on block edges


def block(v, b):
    return struct.pack("<QQ", v, b) * (BS // 16)


def content(v, a, n):
    return b"".join(block(v, b) for b in range(a, a + n))


def count(op):
    ops[op] = ops.get(op, 0) + 1


def write_blocks(fd, dfd, v):
    """Version v of a random range of blocks (or the whole file), by a random way."""
    a = rng.randrange(NB) if rng.random() < 0.8 else 0
    n = NB - a if a == 0 else rng.randint(1, min(NB - a, 300))
    data = content(v, a, n)
    if rng.random() < 0.3:
        mem[:len(data)] = data
        got = os.pwritev(dfd, [memoryview(mem)[:len(data)]], a * BS)
        count("O_DIRECT writes")
    elif mode != "unaligned":
        mem[:len(data)] = data
        got = os.pwrite(fd, memoryview(mem)[:len(data)], a * BS)
        count("buffered writes")
    else:
        got = os.pwrite(fd, data, a * BS)
        count("buffered writes")
    if got != len(data):
        raise OSError(f"a write of {len(data)} bytes at {a * BS} wrote {got}")


def punch(fd):
    a = rng.randrange(NB)
    n = rng.randint(1, min(NB - a, 400))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    if libc.fallocate(fd, 3, a * BS, n * BS):  # FALLOC_FL_PUNCH_HOLE | KEEP_SIZE
        raise OSError(ctypes.get_errno(), "fallocate(PUNCH_HOLE)")
    count("holes punched")


def renamed(v):
    tmp = f"{path}.{v}"
    mem[:] = content(v, 0, NB)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, mem)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    count("renames over it")


def writer():
    v = 1
    fd = os.open(path, os.O_RDWR)
    dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    try:
        while not stop.is_set():
            v += 1
            r = rng.random()
            if mode == "rename":
                renamed(v)
            elif mode == "cut" and r < 0.15:
                os.ftruncate(fd, rng.randrange(NB) * BS)
                count("truncates")
            elif mode == "cut" and r < 0.3:
                punch(fd)
            else:
                write_blocks(fd, dfd, v)
            if rng.random() < 0.1:
                os.fsync(fd)
            time.sleep(rng.random() * 0.004)  # placements in between find chunks to hit
    except OSError as e:
        err.append(f"writer: {e}")
    finally:
        os.close(fd)
        os.close(dfd)


def check(n, out, seen):
    """Check placement n against the versions seen so far; None or what is wrong."""
    versions = set()
    for b in range(NB):
        blk = out[b * BS:(b + 1) * BS]
        if blk == ZERO and mode == "cut":
            continue  # cut off, or a hole
        v, bb = struct.unpack_from("<QQ", blk)
        if mode == "unaligned" and blk != block(v, b):
            recs = {struct.unpack_from("<QQ", blk, i) for i in range(0, BS, 16)}
            if len(recs) == 2 and all(rb == b for _, rb in recs):
                check.halves += 1  # a write(2) going on: its older version counts
                v = min(rv for rv, _ in recs)
                blk = block(v, b)
        if bb != b or blk != block(v, b):
            recs = sorted({struct.unpack_from("<QQ", blk, i) for i in range(0, BS, 16)})
            where = [i * 16 for i in range(1, BS // 16)
                     if blk[i * 16:i * 16 + 16] != blk[i * 16 - 16:i * 16]]
            return (f"placement {n}: block {b} is not one version whole: (version, block) "
                    f"{recs[:4]} changing at bytes {where[:4]}")
        if v < seen[b]:
            return (f"placement {n}: block {b} is version {v}, older than the version "
                    f"{seen[b]} an earlier placement showed (stale)")
        seen[b] = v
        versions.add(v)
    if mode == "rename" and len(versions) != 1:
        return f"placement {n}: blocks of versions {sorted(versions)[:4]}, not one file's"
    return None


check.halves = 0


def place(size):
    r = subprocess.run([tp, path, "0", str(size)], capture_output=True)
    if r.returncode:
        raise OSError(f"tier_place: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout


def main():
    with open(path, "wb") as f:
        mem[:] = content(1, 0, NB)
        f.write(mem)
        os.fsync(f.fileno())
    t = threading.Thread(target=writer)
    t.start()
    seen = [1] * NB
    n = 0
    deadline = time.monotonic() + secs
    try:
        while time.monotonic() < deadline and not err:
            out = place(NB * BS)
            # a placement stops at the end of the file: the rest reads as cut off
            why = check(n, out + bytes(NB * BS - len(out)), seen)
            if why:
                err.append(why)
            n += 1
    except OSError as e:
        err.append(str(e))
    finally:
        stop.set()
        t.join()
    if err:
        sys.exit("; ".join(err))
    with open(path, "rb") as f:
        want = f.read()
    if want and place(len(want))[:len(want)] != want:
        sys.exit("after the writer stopped, a placement differs from the file")
    if n < 10 or sum(ops.values()) < 10:
        sys.exit(f"too little raced: {n} placements, {sum(ops.values())} changes")
    print(f"{n} placements against " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items()))
          + (f"; {check.halves} blocks seen half written" if mode == "unaligned" else "")
          + "; final placement exact")


main()
