#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_ondisk.py - what dmafs stores on its members, read from the images and from
# user.dmafs.layout: superblocks against the on-disk format, file layouts and stripes, file
# bytes read straight from the members, tree manifests compared across remounts, and an
# empty GPT written on an image; commits seen in both metadata log copies.
# Run through tests/t_helpers.py (COMMAND ARGS...); the commands are listed in COMMANDS.

import json
import os
import stat
import struct
import time

from t_check import MIB, check, read_file, say, sha, wait_for

# ---------------------------------------------------------------- layout

def parse_layout(text):
    """Parse user.dmafs.layout text; returns (header dict of ints, list of extent tuples)."""
    text = text.rstrip("\0")
    lines = [l for l in text.split("\n") if l.strip() != ""]
    check(lines, "empty layout")
    hdr = {}
    for kv in lines[0].split():
        check("=" in kv, f"layout header field {kv!r} is not key=value")
        k, v = kv.split("=", 1)
        check(v.isdigit(), f"layout header {k}={v!r} not decimal")
        hdr[k] = int(v)
    for k in ("stripe_unit", "members", "start_member", "size", "extents"):
        check(k in hdr, f"layout header lacks {k}: {lines[0]!r}")
    ext = []
    for l in lines[1:]:
        f = l.split()
        check(len(f) == 4 and all(x.isdigit() for x in f), f"bad extent line {l!r}")
        ext.append(tuple(int(x) for x in f))
    check(len(ext) == hdr["extents"], f"extents={hdr['extents']} but {len(ext)} lines")
    return hdr, ext


def validate_layout(path, hdr, ext, st_size, dense, sb=None):
    """Check the spec's rules; dense = file has no holes."""
    su, nm, start = hdr["stripe_unit"], hdr["members"], hdr["start_member"]
    check(hdr["size"] == st_size, f"{path}: layout size={hdr['size']} != st_size {st_size}")
    check(su > 0 and su & (su - 1) == 0, f"{path}: stripe_unit {su} not a power of two")
    check(0 <= start < nm, f"{path}: start_member {start} not < members {nm}")
    end_blk = (st_size + 4095) // 4096 * 4096
    prev = 0
    covered = 0
    for (fo, ln, mi, mo) in sorted(ext):
        where = f"{path}: extent {fo} {ln} {mi} {mo}"
        check(fo % 4096 == 0 and ln % 4096 == 0 and ln > 0, f"{where}: not 4096-aligned")
        check(mo % 4096 == 0, f"{where}: member offset not 4096-aligned")
        check(fo >= prev, f"{where}: overlaps the previous extent")
        check(fo // su == (fo + ln - 1) // su, f"{where}: crosses a stripe-unit boundary")
        check(0 <= mi < nm, f"{where}: member index out of range")
        check(mi == (start + fo // su) % nm, f"{where}: on member {mi}, rule says {(start + fo // su) % nm}")
        check(fo + ln <= end_blk, f"{where}: extends past EOF block boundary {end_blk}")
        if sb is not None:
            lo, hi = sb[mi]["data_offset"], sb[mi]["data_end"]
            check(lo <= mo and mo + ln <= hi, f"{where}: outside member data area [{lo},{hi})")
        if dense:
            check(fo == prev, f"{where}: hole at {prev} in a file written without holes")
        prev = fo + ln
        covered += ln
    if dense:
        check(covered == end_blk, f"{path}: extents cover {covered} bytes, file needs {end_blk}")
    return covered


def get_layout(path):
    return parse_layout(os.getxattr(path, "user.dmafs.layout").decode())


# ---------------------------------------------------------------- layout / superblock

SB_FMT = {"magic": (0, "8s"), "version": (8, "<I"), "flags": (12, "<I"), "fs_uuid": (16, "16s"),
          "member_index": (32, "<I"), "member_count": (36, "<I"), "stripe_unit": (40, "<I"),
          "block_size": (44, "<I"), "member_size": (48, "<Q"), "log_offset": (56, "<Q"),
          "log_half": (64, "<Q"), "data_offset": (72, "<Q"), "data_end": (80, "<Q"),
          "mkfs_time": (88, "<Q"), "label": (96, "64s"), "csum_offset": (1184, "<Q")}


def dev_size(path):
    with open(path, "rb") as f:
        return f.seek(0, os.SEEK_END)


def read_sb(path, copy=False):
    with open(path, "rb") as f:
        if copy:
            f.seek((dev_size(path) // 4096 - 1) * 4096)
        raw = f.read(4096)
    sb = {k: struct.unpack_from(fmt, raw, off)[0] for k, (off, fmt) in SB_FMT.items()}
    sb["fs_uuid"] = sb["fs_uuid"].hex()
    sb["label"] = sb["label"].rstrip(b"\0").decode(errors="replace")
    sb["member_uuids"] = [raw[160 + 16 * i:176 + 16 * i].hex() for i in range(64)]
    sb["raw"] = raw
    return sb


def cmd_sbcheck(args):
    """sbcheck STRIPE_UNIT LABEL MEMBER...: superblocks as the spec's on-disk format says."""
    su, label, members = int(args[0]), args[1], args[2:]
    say(f"superblocks of {len(members)} members: fields and copy per the on-disk format")
    sbs = [read_sb(m) for m in members]
    uuid = sbs[0]["fs_uuid"]
    check(uuid != "00" * 16, "fs_uuid is all zero")
    for i, (m, sb) in enumerate(zip(members, sbs)):
        w = f"{m}"
        check(sb["magic"] == b"DMAFSSB1", f"{w}: magic {sb['magic']!r}")
        check(sb["version"] == 4, f"{w}: version {sb['version']}")
        check(sb["fs_uuid"] == uuid, f"{w}: fs_uuid differs from member 0")
        check(sb["member_index"] == i, f"{w}: member_index {sb['member_index']} != {i}")
        check(sb["member_count"] == len(members), f"{w}: member_count {sb['member_count']}")
        check(sb["stripe_unit"] == su, f"{w}: stripe_unit {sb['stripe_unit']} != {su}")
        check(sb["block_size"] == 4096, f"{w}: block_size {sb['block_size']}")
        size = dev_size(m)
        check(sb["member_size"] in (size, size // 4096 * 4096), f"{w}: member_size {sb['member_size']} vs {size}")
        msz = sb["member_size"] // 4096 * 4096
        if i < 2:
            check(sb["log_offset"] == MIB, f"{w}: log_offset {sb['log_offset']} (member {i} holds the log)")
            want_half = min(max(sb["member_size"] // 64, 4 * MIB), 256 * MIB) // MIB * MIB
            check(sb["log_half"] == want_half, f"{w}: log_half {sb['log_half']} != {want_half}")
            check(sb["data_offset"] == MIB + 2 * want_half, f"{w}: data_offset {sb['data_offset']}")
        else:
            check(sb["log_offset"] == 0, f"{w}: log_offset {sb['log_offset']} on a member without log")
            check(sb["data_offset"] == MIB, f"{w}: data_offset {sb['data_offset']}")
        if len(members) == 1 and i == 0:
            pass
        # data blocks n and their 8-byte checksums (region rounded up to 4096) share
        # data_offset .. member_size - 1 MiB; the data region gets the largest n that fits
        room = (sb["member_size"] - MIB) // 4096 * 4096 - sb["data_offset"]
        n = room // 4104 + 1
        while n * 4096 + (8 * n + 4095) // 4096 * 4096 > room:
            n -= 1
        check(sb["data_end"] == sb["data_offset"] + n * 4096, f"{w}: data_end {sb['data_end']}, expected {sb['data_offset'] + n * 4096}")
        check(sb["csum_offset"] == sb["data_end"], f"{w}: csum_offset {sb['csum_offset']} != data_end")
        check(abs(sb["mkfs_time"] - time.time()) < 3600, f"{w}: mkfs_time {sb['mkfs_time']}")
        check(sb["label"] == label, f"{w}: label {sb['label']!r} != {label!r}")
        check(sb["member_uuids"] == sbs[0]["member_uuids"], f"{w}: member uuid table differs from member 0")
        mu = sb["member_uuids"][:len(members)]
        check(len(set(mu)) == len(members) and "00" * 16 not in mu, f"{w}: member uuids not distinct/non-zero")
        check(all(u == "00" * 16 for u in sb["member_uuids"][len(members):]), f"{w}: unused member uuid slots not zero")
        copy = read_sb(m, copy=True)
        check(copy["magic"] == b"DMAFSSB1" and copy["fs_uuid"] == uuid and copy["member_index"] == i,
              f"{w}: superblock copy in the last 4096 bytes missing or different")
    print(json.dumps({"fs_uuid": uuid}))


def cmd_layoutcheck(args):
    """layoutcheck FILE: print the layout of FILE as JSON after validating it (dense file)."""
    p = args[0]
    hdr, ext = get_layout(p)
    validate_layout(p, hdr, ext, os.stat(p).st_size, dense=True)
    print(json.dumps({"hdr": hdr, "ext": ext}))


def cmd_stripecheck(args):
    """stripecheck MEMBERS_CSV FILE[:MAXRUNS]... : layout rules (member offsets inside the data
    areas read from the members' superblocks), bytes per member within 2 stripe units, at most
    MAXRUNS contiguous runs per member, no member byte used by two files.  Saves the layouts
    as JSON to $T_LAYOUT_OUT for cmd_ondisk."""
    members = args[0].split(",")
    sbs = [read_sb(m) for m in members]
    out = {}
    used = []
    for spec in args[1:]:
        p, _, mr = spec.partition(":")
        maxruns = int(mr) if mr else 1 << 30
        hdr, ext = get_layout(p)
        st = os.stat(p)
        check(hdr["members"] == len(members), f"{p}: layout members={hdr['members']}, fs has {len(members)}")
        validate_layout(p, hdr, ext, st.st_size, dense=True, sb=sbs)
        su = hdr["stripe_unit"]
        per = [0] * len(members)
        runs = [0] * len(members)
        last_end = [None] * len(members)
        for (fo, ln, mi, mo) in sorted(ext, key=lambda e: (e[2], e[3])):
            per[mi] += ln
            if last_end[mi] != mo:
                runs[mi] += 1
            last_end[mi] = mo + ln
            used.append((mi, mo, ln, p))
        spread = max(per) - min(per)
        say(f"{os.path.basename(p)}: size {st.st_size}, stripe_unit {su}, {len(ext)} extents, "
            f"bytes per member {per}, runs per member {runs}")
        check(spread <= 2 * su, f"{p}: bytes per member {per} differ by {spread} > 2 stripe units ({2 * su})")
        check(max(runs) <= maxruns, f"{p}: member extents not contiguous: runs per member {runs} (max {maxruns})")
        out[p] = {"hdr": hdr, "ext": ext}
    used.sort()
    for a, b in zip(used, used[1:]):
        check(not (a[0] == b[0] and a[1] + a[2] > b[1]),
              f"member {a[0]} bytes [{b[1]},{a[1] + a[2]}) used by both {a[3]} and {b[3]}")
    with open(os.environ.get("T_LAYOUT_OUT", "/dev/null"), "w") as f:
        json.dump(out, f)


def cmd_layoutsave(args):
    """layoutsave MEMBERS_CSV OUT FILE...: validate the layouts of files that may have holes
    (rules, data areas, no member byte shared between files) and save them to OUT for ondisk."""
    members, outp = args[0].split(","), args[1]
    sbs = [read_sb(m) for m in members]
    out, used = {}, []
    for p in args[2:]:
        hdr, ext = get_layout(p)
        check(hdr["members"] == len(members), f"{p}: layout members={hdr['members']}, fs has {len(members)}")
        validate_layout(p, hdr, ext, os.stat(p).st_size, dense=False, sb=sbs)
        used += [(mi, mo, ln, p) for (fo, ln, mi, mo) in ext]
        out[p] = {"hdr": hdr, "ext": ext}
        say(f"{os.path.basename(p)}: size {hdr['size']}, {len(ext)} extents, layout valid")
    used.sort()
    for a, b in zip(used, used[1:]):
        check(not (a[0] == b[0] and a[1] + a[2] > b[1]),
              f"member {a[0]} bytes [{b[1]},{a[1] + a[2]}) used by both {a[3]} and {b[3]}")
    with open(outp, "w") as f:
        json.dump(out, f)


def cmd_ondisk(args):
    """ondisk LAYOUT_JSON MEMBERS_CSV FILE=REFERENCE...: after unmount, the bytes at each extent's
    member offset must equal the file content, and every block holding non-zero data must be
    mapped by an extent (the layout xattr tells the whole truth)."""
    lay = json.load(open(args[0]))
    members = args[1].split(",")
    fds = [os.open(m, os.O_RDONLY) for m in members]
    for spec in args[2:]:
        path, ref = spec.split("=", 1)
        data = read_file(ref)
        ent = lay[path]
        say(f"on-disk bytes of {os.path.basename(path)} ({len(data)} bytes, {len(ent['ext'])} extents) match the file")
        check(ent["hdr"]["size"] == len(data), f"{path}: layout size {ent['hdr']['size']} != {len(data)}")
        covered = bytearray((len(data) + 4095) // 4096)
        for (fo, ln, mi, mo) in ent["ext"]:
            want = data[fo:fo + ln]
            got = os.pread(fds[mi], len(want), mo)
            check(got == want, f"{path}: extent {fo} {ln} {mi} {mo}: member bytes differ from the file")
            covered[fo // 4096:(fo + ln) // 4096] = b"\1" * (ln // 4096)
        zero = bytes(4096)
        for blk, c in enumerate(covered):
            if not c:
                chunk = data[blk * 4096:blk * 4096 + 4096]
                check(chunk == zero[:len(chunk)],
                      f"{path}: block at {blk * 4096} holds data but no extent maps it")


# ---------------------------------------------------------------- manifest

def cmd_manifest(args):
    """manifest DIR: one line per entry (type, mode, owner, size, nlink, times, target,
    sha256, user xattrs, hard-link group) for comparing trees across remounts."""
    root = args[0]
    inos = {}
    rows = []
    # os.walk() alone yields nothing for a missing or unreadable directory: an empty
    # manifest would then compare equal to another empty one
    check(stat.S_ISDIR(os.stat(root).st_mode), f"manifest: {root} is not a directory")

    def walk_error(e):
        raise e

    for dp, dns, fns in os.walk(root, onerror=walk_error):
        dns.sort()
        for n in sorted(dns + fns):
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            row = [rel, oct(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns]
            if stat.S_ISLNK(st.st_mode):
                row += ["->", os.readlink(p)]
            elif stat.S_ISREG(st.st_mode):
                row += [st.st_size, st.st_nlink, sha(read_file(p))]
                inos.setdefault(st.st_ino, []).append(rel)
            if not stat.S_ISLNK(st.st_mode):
                xs = sorted(x for x in os.listxattr(p) if x.startswith("user."))
                row += [f"{x}={sha(os.getxattr(p, x))[:16]}" for x in xs]
            rows.append(row)
    for row in rows:
        print(" ".join(str(x) for x in row))
    for group in sorted(sorted(g) for g in inos.values() if len(g) > 1):
        print("hardlinks", " ".join(group))


# ---------------------------------------------------------------- commits

def log_copy(member):
    """Both halves of the metadata log copy on MEMBER (members 0 and 1 carry one)."""
    sb = read_sb(member)
    check(sb["log_offset"] != 0, f"{member} carries no metadata log copy")
    with open(member, "rb") as f:
        f.seek(sb["log_offset"])
        return f.read(2 * sb["log_half"])


def cmd_wait_commit(args):
    """wait-commit SECONDS NAME MEMBER0 MEMBER1: wait until the file name NAME is in both
    metadata log copies, i.e. a commit that began after NAME was created has reached both
    log members. Created after the changes a test waits for, NAME tells when the periodic
    commit (commit=) has made them durable without the test calling sync. Fails after
    SECONDS."""
    secs, name, members = float(args[0]), os.fsencode(args[1]), args[2:4]
    check(len(members) == 2, "wait-commit needs the two log members")
    t0 = time.monotonic()
    ok = wait_for(lambda: all(name in log_copy(m) for m in members), secs, step=0.05)
    check(ok, f"{args[1]} not in both metadata log copies {secs} s after it was created: "
          "no commit since")
    say(f"commit with {args[1]} on both log members after {time.monotonic() - t0:.2f} s")


# ---------------------------------------------------------------- partition tables

def cmd_gpt(args):
    """gpt IMG: write a valid empty GPT (protective MBR, primary header and entries) on IMG."""
    import uuid
    import zlib
    p = args[0]
    size = dev_size(p)
    lbas = size // 512
    mbr = bytearray(512)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\0\2\0", 0xEE, b"\xff\xff\xff", 1, min(lbas - 1, 0xFFFFFFFF))
    mbr[510:512] = b"\x55\xaa"
    entries = bytes(128 * 128)
    hdr = bytearray(struct.pack("<8sIIIIQQQQ16sQIII", b"EFI PART", 0x10000, 92, 0, 0, 1, lbas - 1, 34, lbas - 34,
                                uuid.uuid4().bytes, 2, 128, 128, zlib.crc32(entries)))
    hdr[16:20] = struct.pack("<I", zlib.crc32(bytes(hdr)))
    with open(p, "r+b") as f:
        f.write(mbr)
        f.write(bytes(hdr) + bytes(512 - len(hdr)))
        f.write(entries)


COMMANDS = {
    "sbcheck": cmd_sbcheck,
    "layoutcheck": cmd_layoutcheck,
    "stripecheck": cmd_stripecheck,
    "layoutsave": cmd_layoutsave,
    "ondisk": cmd_ondisk,
    "manifest": cmd_manifest,
    "gpt": cmd_gpt,
    "wait-commit": cmd_wait_commit,
}
