#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_crash.py - the crash workload (fsync'd creates, replaces, renames, unlinks,
# overwrites, truncates, xattrs, symlinks, directories, logged as they become durable) and
# its check after a kill -9 or a power cut: every durable op is intact, the op in flight
# is all-or-nothing.
# Run through tests/t_helpers.py (COMMAND ARGS...); the commands are listed in COMMANDS.

import errno
import os
import random
import sys

from t_check import check, content, fsync_dir, read_file, say, sha, write_file

# ---------------------------------------------------------------- crash workload

class FObj:
    """A regular file (inode) of the crash model: shared by its hard links."""
    __slots__ = ("data", "xattrs")

    def __init__(self, data):
        self.data = bytearray(data)
        self.xattrs = {}

    def copy(self):
        c = FObj(self.data)
        c.xattrs = dict(self.xattrs)
        return c


def cmd_crash_work(args):
    """crash-work DIR LOG SEED [MAX_MIB]: run fsync'd creates, replaces (rename over), renames into a
    subdir, unlinks, in-place overwrites (fdatasync), truncates, hard links, xattrs, symlinks
    and mkdirs forever, logging 'B op' before and 'D op' after each op is durable (its fsync
    returned).  With MAX_MIB, once the files it keeps hold more than that many MiB it
    unlinks instead of adding, so a faster machine does not fill the filesystem.  Exits when
    the filesystem goes away (ENOTCONN...)."""
    d, log, seed = args[0], args[1], int(args[2])
    cap = int(args[3]) << 20 if len(args) > 3 else None
    live = 0
    r = random.Random(seed)
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    fsync_dir(d)
    lfd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    files = {}          # name -> [size]; hard links share the list
    seq = 0

    def L(tag, *f):
        os.write(lfd, (tag + " " + " ".join(str(x) for x in f) + "\n").encode())

    try:
        while True:
            seq += 1
            s = seed * 1000000 + seq
            names = sorted(n for n in files if not n.startswith("sub/"))
            op = r.choices("WRMUPTLXSKN", weights=[30, 15, 10, 10, 15, 10, 8, 8, 4, 3, 10])[0]
            if cap is not None:
                if seq % 16 == 0:   # hard links share one size list: count each list once
                    live = sum(v[0] for v in {id(v): v for v in files.values()}.values())
                if live > cap and names and r.random() < 0.5:   # still a mix of ops
                    op = "U"
            if op in "RMUPTLX" and not names:
                op = "W"
            if op == "W":
                nm, size = f"f{seq}", r.choice([0, 100, 4096, 5000, 70000, 300000, 1100000])
                L("B", "W", nm, s, size)
                write_file(os.path.join(d, nm), content(s, size))
                fsync_dir(d)
                files[nm] = [size]
                L("D", "W", nm, s, size)
            elif op == "R":      # write tmp, fsync, rename over an existing file
                tgt = r.choice(names)
                tmp, size = f"t{seq}", r.choice([10, 8192, 200000])
                L("B", "R", tmp, tgt, s, size)
                write_file(os.path.join(d, tmp), content(s, size))
                os.rename(os.path.join(d, tmp), os.path.join(d, tgt))
                fsync_dir(d)
                files[tgt] = [size]
                L("D", "R", tmp, tgt, s, size)
            elif op == "M":      # move into sub/
                src = r.choice(names)
                dst = f"sub/g{seq}"
                L("B", "M", src, dst)
                os.rename(os.path.join(d, src), os.path.join(d, dst))
                fsync_dir(d)
                fsync_dir(os.path.join(d, "sub"))
                files[dst] = files.pop(src)
                L("D", "M", src, dst)
            elif op == "U":
                nm = r.choice(names)
                L("B", "U", nm)
                os.unlink(os.path.join(d, nm))
                fsync_dir(d)
                del files[nm]
                L("D", "U", nm)
            elif op == "P":      # overwrite a range in place, fdatasync
                nm = r.choice(names)
                size = files[nm][0]
                if size == 0:
                    continue
                off = r.randrange(size)
                ln = min(r.randrange(1, 100000), size - off)
                L("B", "P", nm, off, ln, s)
                fd = os.open(os.path.join(d, nm), os.O_WRONLY)
                os.pwrite(fd, content(s, ln), off)
                os.fdatasync(fd)
                os.close(fd)
                L("D", "P", nm, off, ln, s)
            elif op == "T":      # truncate down, fsync
                nm = r.choice(names)
                size = files[nm][0]
                new = r.randrange(size + 1) if size else 0
                L("B", "T", nm, new)
                fd = os.open(os.path.join(d, nm), os.O_WRONLY)
                os.ftruncate(fd, new)
                os.fsync(fd)
                os.close(fd)
                files[nm][0] = new
                L("D", "T", nm, new)
            elif op == "L":      # hard link, fsync dir
                src = r.choice(names)
                dst = f"h{seq}"
                L("B", "L", src, dst)
                os.link(os.path.join(d, src), os.path.join(d, dst))
                fsync_dir(d)
                files[dst] = files[src]
                L("D", "L", src, dst)
            elif op == "X":      # set a user xattr, fsync the file
                nm = r.choice(names)
                key = f"user.k{r.randrange(3)}"
                L("B", "X", nm, key, s)
                os.setxattr(os.path.join(d, nm), key, content(s, 1 + s % 300))
                fd = os.open(os.path.join(d, nm), os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
                L("D", "X", nm, key, s)
            elif op == "S":      # symlink, fsync dir
                nm = f"s{seq}"
                tgt = f"../blobs/{sha(content(s, 8))}"
                L("B", "S", nm, tgt)
                os.symlink(tgt, os.path.join(d, nm))
                fsync_dir(d)
                L("D", "S", nm, tgt)
            elif op == "K":      # mkdir with a file in it, fsync both
                nm = f"d{seq}"
                L("B", "K", nm, s)
                os.mkdir(os.path.join(d, nm))
                write_file(os.path.join(d, nm, "in"), content(s, 999))
                fsync_dir(os.path.join(d, nm))
                fsync_dir(d)
                L("D", "K", nm, s)
            else:                # not fsync'd: may or may not survive, never checked
                nm = f"n{seq}"
                with open(os.path.join(d, nm), "wb") as f:
                    f.write(content(s, 3000))
    except OSError as e:
        L("E", errno.errorcode.get(e.errno, e.errno))
        sys.exit(0)


class CrashState:
    def __init__(self):
        self.files = {}     # name -> FObj (hard links share one)
        self.links = {}     # symlink name -> target
        self.dirs = {}      # dir name -> seed of its file "in"

    def copy(self):
        c = CrashState()
        objs = {}
        for n, o in self.files.items():
            c.files[n] = objs.setdefault(id(o), o.copy())
        c.links = dict(self.links)
        c.dirs = dict(self.dirs)
        return c


def apply_op(st, op, rest):
    f = st.files
    if op == "W":
        f[rest[0]] = FObj(content(int(rest[1]), int(rest[2])))
    elif op == "R":
        f[rest[1]] = FObj(content(int(rest[2]), int(rest[3])))
    elif op == "M":
        f[rest[1]] = f.pop(rest[0])
    elif op == "U":
        del f[rest[0]]
    elif op == "P":
        off, ln = int(rest[1]), int(rest[2])
        f[rest[0]].data[off:off + ln] = content(int(rest[3]), ln)
    elif op == "T":
        del f[rest[0]].data[int(rest[1]):]
    elif op == "L":
        f[rest[1]] = f[rest[0]]
    elif op == "X":
        s = int(rest[2])
        f[rest[0]].xattrs[rest[1]] = content(s, 1 + s % 300)
    elif op == "S":
        st.links[rest[0]] = rest[1]
    elif op == "K":
        st.dirs[rest[0]] = int(rest[1])


def crash_model(log):
    """Replay a crash-work log -> (state after all D ops, pending op or None)."""
    st = CrashState()
    pending = None
    for line in open(log):
        f = line.split()
        if not f or f[0] == "E":
            continue
        tag, op, rest = f[0], f[1], f[2:]
        if tag == "B":
            pending = (op, rest)
            continue
        check(pending == (op, rest), f"log corrupt: D without matching B: {line!r}")
        pending = None
        apply_op(st, op, rest)
    return st, pending


def actual(d, nm):
    try:
        return read_file(os.path.join(d, nm))
    except FileNotFoundError:
        return None


def user_xattrs(p):
    return {k: os.getxattr(p, k) for k in os.listxattr(p) if k.startswith("user.")}


def cmd_crash_verify(args):
    """crash-verify DIR LOG: every op logged as durable is there; the op in flight is all or
    nothing where the spec makes it atomic."""
    d, log = args[0], args[1]
    st, pending = crash_model(log)
    ndone = sum(1 for l in open(log) if l.startswith("D "))
    say(f"{os.path.basename(d)}: {ndone} fsync'd ops logged, {len(st.files)} files expected, "
        f"in flight at kill: {pending[0] + ' ' + ' '.join(pending[1]) if pending else 'none'}")
    involved = set()
    if pending:
        op, rest = pending
        after = st.copy()
        apply_op(after, op, rest)
        if op == "W":
            involved = {rest[0]}           # content unknown until fsync'd
        elif op == "R":
            tmp, tgt = rest[0], rest[1]
            involved = {tmp, tgt}
            a_tmp, a_tgt = actual(d, tmp), actual(d, tgt)
            before_ok = a_tgt == (bytes(st.files[tgt].data) if tgt in st.files else None)
            after_ok = a_tmp is None and a_tgt == bytes(after.files[tgt].data)
            check(before_ok or after_ok,
                  f"in-flight replace {tmp} -> {tgt}: target is neither old nor new content "
                  f"(target {'missing' if a_tgt is None else len(a_tgt)} bytes)")
        elif op in ("M", "L"):
            src, dst = rest
            involved = {src, dst}
            a_src, a_dst = actual(d, src), actual(d, dst)
            want = bytes(st.files[src].data)
            if op == "M":
                check((a_src == want and a_dst is None) or (a_src is None and a_dst == want),
                      f"in-flight rename {src} -> {dst}: not exactly one of the names holds the file")
            else:
                check(a_src == want and a_dst in (None, want), f"in-flight link {src} -> {dst}: wrong state")
        elif op == "U":
            involved = {rest[0]}
            a = actual(d, rest[0])
            check(a is None or a == bytes(st.files[rest[0]].data), f"in-flight unlink {rest[0]}: content changed")
        elif op == "P":
            involved = {rest[0]}
            nm, off, ln = rest[0], int(rest[1]), int(rest[2])
            a = actual(d, nm)
            old = bytes(st.files[nm].data)
            check(a is not None and len(a) == len(old), f"in-flight overwrite of {nm}: file missing or resized")
            check(a[:off] == old[:off] and a[off + ln:] == old[off + ln:],
                  f"in-flight overwrite of {nm} changed bytes outside [{off},{off + ln})")
        elif op == "T":
            involved = {rest[0]}
            nm, new = rest[0], int(rest[1])
            a = actual(d, nm)
            old = bytes(st.files[nm].data)
            check(a == old or a == old[:new], f"in-flight truncate of {nm}: neither old nor new")
        elif op == "X":
            involved = {rest[0]}
            nm = rest[0]
            got = user_xattrs(os.path.join(d, nm))
            check(got in (st.files[nm].xattrs, after.files[nm].xattrs), f"in-flight setxattr on {nm}: neither old nor new")
        elif op in ("S", "K"):
            involved = {rest[0]}
        # Hard links of an involved file are involved too.
        objs = {id(st.files[n]) for n in involved if n in st.files}
        involved |= {n for n, o in st.files.items() if id(o) in objs}
    nlinks = {}
    for o in st.files.values():
        nlinks[id(o)] = nlinks.get(id(o), 0) + 1
    for nm, o in sorted(st.files.items()):
        if nm in involved:
            continue
        p = os.path.join(d, nm)
        a = actual(d, nm)
        check(a is not None, f"{p}: fsync'd file missing after crash")
        check(a == bytes(o.data), f"{p}: fsync'd content differs after crash ({len(a)} bytes, expected {len(o.data)})")
        check(user_xattrs(p) == o.xattrs, f"{p}: fsync'd xattrs differ after crash: {sorted(user_xattrs(p))} vs {sorted(o.xattrs)}")
        check(os.stat(p).st_nlink == nlinks[id(o)], f"{p}: st_nlink {os.stat(p).st_nlink}, expected {nlinks[id(o)]}")
    for nm, tgt in st.links.items():
        if nm not in involved:
            check(os.readlink(os.path.join(d, nm)) == tgt, f"{d}/{nm}: fsync'd symlink lost or wrong")
    for nm, s in st.dirs.items():
        if nm not in involved:
            check(actual(os.path.join(d, nm), "in") == content(s, 999), f"{d}/{nm}/in: fsync'd dir/file lost")
    # Nothing that was durably removed may come back.
    present = set(os.listdir(d)) | {"sub/" + n for n in os.listdir(os.path.join(d, "sub"))}
    for line in open(log):
        f = line.split()
        if len(f) >= 3 and f[0] == "D" and f[1] in ("U", "M"):
            nm = f[2]
            if nm not in st.files and nm not in involved:
                check(nm not in present, f"{d}/{nm}: removed/renamed away (fsync'd) but back after crash")
        if len(f) >= 3 and f[0] == "D" and f[1] == "R":
            check(f[2] not in present, f"{d}/{f[2]}: temp name of a durable rename back after crash")
    say(f"  ok: {len(set(st.files) - involved)} files, {len(st.links)} symlinks, {len(st.dirs)} dirs verified")


COMMANDS = {
    "crash-work": cmd_crash_work,
    "crash-verify": cmd_crash_verify,
}
