#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Damage blocks of a mirror filesystem's files, on its member images, for the tests.

Usage: mirror_blocks.py MOUNT IMG0,IMG1,... N SEED [first|second|both]

Picks N distinct data blocks at random among every regular file under MOUNT (their
extents from user.dmafs.layout), and overwrites one copy of each with random bytes in
the member images: the first copy (where the extent map says), the second (on the next
member, fmt_mirror_of in fs/format/format.h), or for "both" (the default) either, at
random. A block is never damaged in both copies. Prints "first=F second=S read=R
unread=U" (R: damaged copies that reads take, fs_pick_copy: rows of stripe units
alternately the first and the second copy) and one line per damaged block: "copy
member offset path file_offset".
"""
import os
import random
import struct
import sys


def superblock(img):
    with open(img, "rb") as f:
        b = f.read(4096)
    if b[:8] != b"DMAFSSB1":
        sys.exit("%s: no dmafs superblock" % img)
    flags, = struct.unpack_from("<I", b, 12)
    count, su = struct.unpack_from("<II", b, 36)
    doff, = struct.unpack_from("<Q", b, 72)
    half, = struct.unpack_from("<Q", b, 1192)
    if not flags & 1:
        sys.exit("%s: not a mirror (data profile single)" % img)
    return count, doff, half, su


def extents(path):
    name, out = "user.dmafs.layout", []
    while name:
        text = os.getxattr(path, name).decode()
        head, _, rest = text.partition("\n")
        name = None
        for w in head.split():
            if w.startswith("next="):
                name = w[5:]
        for line in rest.splitlines():
            foff, ln, member, moff = (int(x) for x in line.split())
            out.append((foff, ln, member, moff))
    return out


def main():
    mnt, imgs, n, seed = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
    which = sys.argv[5] if len(sys.argv) > 5 else "both"
    sbs = [superblock(i) for i in imgs]
    count, half, su = sbs[0][0], sbs[0][2], sbs[0][3]
    doff = [s[1] for s in sbs]
    assert count == len(imgs), "give every member image, in order"
    blocks = []
    for root, _, files in os.walk(mnt):
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                for foff, ln, m, moff in extents(p):
                    blocks += [(p, foff + k, m, moff + k) for k in range(0, ln, 4096)]
    blocks = sorted(set(blocks))
    rng = random.Random(seed)
    if n > len(blocks):
        sys.exit("only %d blocks to choose from" % len(blocks))
    picked = rng.sample(blocks, n)
    done, counts, read = [], {"first": 0, "second": 0}, 0
    fds = [os.open(i, os.O_WRONLY) for i in imgs]
    for p, foff, m, moff in picked:
        copy = which if which != "both" else rng.choice(["first", "second"])
        if copy == "second":
            m, moff = (m + 1) % count, doff[(m + 1) % count] + half + (moff - doff[m])
        os.pwrite(fds[m], rng.randbytes(4096), moff)
        counts[copy] += 1
        # the copy reads take: rows of stripe units alternately (fs_pick_copy)
        read += (copy == "second") == bool(foff // su // count % 2)
        done.append("%s %d %d %s %d" % (copy, m, moff, p, foff))
    for fd in fds:
        os.fsync(fd)
        os.close(fd)
    print("first=%d second=%d read=%d unread=%d" % (counts["first"], counts["second"], read,
                                                  n - read))
    print("\n".join(done))


if __name__ == "__main__":
    main()
