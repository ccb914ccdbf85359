#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# soak_work.py - the concurrency soak workload for tests/soak.sh (python3 stdlib only).
#
# Usage:
#   soak_work.py run MNT STATE.json SECONDS [WRITERS] [READERS] [SEED]
#       Random operations from WRITERS processes in a shared tree MNT/shared plus a
#       private directory MNT/wN per writer, READERS processes walking and reading
#       the tree, for SECONDS.  Each writer keeps an in-memory model of its private
#       directory (names, contents, hard links, symlinks, user.* xattrs) and checks
#       it with reads during the run and at the end.  The models (hashes, sizes,
#       xattrs, link groups) are saved to STATE.json, outside the mount.
#   soak_work.py verify MNT STATE.json
#       Check the private directories against STATE.json (after a remount).
# Exit 0 = all checks passed, 1 = a check failed or an unexpected errno was seen.

import errno
import hashlib
import json
import multiprocessing as mp
import os
import random
import stat
import sys
import time
import traceback
from collections import deque

NAME = "soak_work"
KIB = 1024
MIB = 1024 * KIB
MAX_WRITE = 2 * MIB          # one write is at most this
FILE_CAP = 5 * MIB // 2      # files never grow past this (keeps the fs from filling)
LOW_SPACE = 48 * MIB         # ENOSPC is accepted only with less free space than this
SYMLINK_DEAD = "/nonexistent-dmafs-soak/"
# Races between processes in the shared tree: these errnos are expected there
# (ELOOP: O_NOFOLLOW met a name that another writer has just made a symlink).
RACE_ERRNOS = {errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.ELOOP}

N_SHARED_DIRS = 4            # shared/d0..d3
N_SHARED_SUB = 3             # shared/dK/s0..s2 (moved between the dK, removed, made)
N_SHARED_NAMES = 6           # f0..f5 and l0..l2 in each directory
PRIV_SUBS = ["", "sub0", "sub1", "sub2"]
PRIV_NAMES = 4               # n0..n3 in each private directory


def say(msg):
    print(f"[{NAME}] {msg}", flush=True)


def en(e):
    return errno.errorcode.get(e, str(e))


def space_low(mnt):
    try:
        st = os.statvfs(mnt)
        return st.f_bavail * st.f_frsize < LOW_SPACE
    except OSError:
        return False


class Stats:
    def __init__(self, mnt, who):
        self.mnt = mnt
        self.who = who
        self.ops = {}
        self.races = {}
        self.enospc_full = 0
        self.unexpected = []     # (op, path, errno name)
        self.mismatch = []       # model mismatches (strings)

    def op(self, name):
        self.ops[name] = self.ops.get(name, 0) + 1

    def err(self, opname, path, e, races_ok):
        """Classify an OSError; returns nothing, records it."""
        no = e.errno
        if races_ok and no in RACE_ERRNOS:
            self.races[en(no)] = self.races.get(en(no), 0) + 1
            return
        if no == errno.ENOSPC and space_low(self.mnt):
            self.enospc_full += 1
            return
        if len(self.unexpected) < 50:
            self.unexpected.append((opname, path, en(no), str(e)))
        else:
            self.unexpected.append(None)

    def bad(self, msg):
        if len(self.mismatch) < 50:
            self.mismatch.append(msg)

    def result(self):
        return {"who": self.who, "ops": self.ops, "races": self.races,
                "enospc_full": self.enospc_full,
                "unexpected": [u for u in self.unexpected if u] ,
                "n_unexpected": len(self.unexpected),
                "mismatch": self.mismatch}


# ---------------------------------------------------------------------------
# writers

class Obj:
    __slots__ = ("oid", "data", "xattrs")

    def __init__(self, oid):
        self.oid = oid
        self.data = bytearray()
        self.xattrs = {}


class Writer:
    def __init__(self, mnt, idx, seed, deadline, status):
        self.mnt = mnt
        self.idx = idx
        self.rng = random.Random(seed)
        self.deadline = deadline
        self.status = status
        self.st = Stats(mnt, f"writer{idx}")
        self.history = deque(maxlen=40)   # this writer's recent operations
        self.pdir = os.path.join(mnt, f"w{idx}")
        self.shared = os.path.join(mnt, "shared")
        # private model: relative path -> ("f", Obj) | ("l", target)
        self.names = {}
        self.subdirs = set()
        self.next_oid = 0

    def set_status(self, s):
        self.history.append(s)
        self.status.value = s.encode()[:255]

    # -- helpers --------------------------------------------------------------
    def rnd_bytes(self, n):
        return self.rng.randbytes(n) if hasattr(self.rng, "randbytes") else os.urandom(n)

    def ppath(self, rel):
        return os.path.join(self.pdir, rel)

    def priv_slot(self):
        sub = self.rng.choice(PRIV_SUBS)
        if sub and sub not in self.subdirs:
            sub = ""
        name = f"n{self.rng.randrange(PRIV_NAMES)}"
        return os.path.join(sub, name) if sub else name

    def files(self):
        return [r for r, v in self.names.items() if v[0] == "f"]

    def new_obj(self):
        o = Obj(self.next_oid)
        self.next_oid += 1
        return o

    def io_span(self, cur):
        ln = self.rng.randint(1, MAX_WRITE)
        if self.rng.random() < 0.5:
            ln = self.rng.randint(1, 64 * KIB)
        ln = min(ln, FILE_CAP)
        hi = max(0, min(cur + 256 * KIB, FILE_CAP - ln))
        off = self.rng.randint(0, hi)
        return off, ln

    @staticmethod
    def apply_write(data, off, buf):
        if off > len(data):
            data.extend(b"\0" * (off - len(data)))
        data[off:off + len(buf)] = buf

    def private_op_failed(self, opname, rel, e):
        # No other process changes the private directory: every errno is unexpected,
        # except ENOSPC on a filled filesystem (the model is then unreliable for that
        # file, so it is re-read from the file system).
        n = len(self.st.unexpected)
        self.st.err(opname, self.ppath(rel), e, races_ok=False)
        if len(self.st.unexpected) > n and n < 5:
            say(f"UNEXPECTED writer{self.idx}: {opname} {self.ppath(rel)}: {e}; model of "
                f"{self.pdir}: subdirs {sorted(self.subdirs)}, names "
                f"{sorted((r, v[0], v[1].oid if v[0] == 'f' else v[1][:20]) for r, v in self.names.items())}"
                f"; this writer's last operations (private ones are the only "
                f"changes to {self.pdir}):\n    " + "\n    ".join(self.history))

    def resync(self, rel):
        """After an accepted ENOSPC, make the model match what the fs holds."""
        v = self.names.get(rel)
        if v and v[0] == "f":
            try:
                with open(self.ppath(rel), "rb") as f:
                    v[1].data = bytearray(f.read())
            except OSError as e:
                self.st.err("resync", self.ppath(rel), e, races_ok=False)

    # -- private operations (modelled) ----------------------------------------
    def p_write(self):
        rel = self.priv_slot()
        v = self.names.get(rel)
        if v and v[0] == "l":
            return self.p_unlink(rel)
        p = self.ppath(rel)
        trunc = self.rng.random() < 0.25
        obj = v[1] if v else None
        cur = 0 if (obj is None or trunc) else len(obj.data)
        off, ln = self.io_span(cur)
        buf = self.rnd_bytes(ln)
        self.set_status(f"write {p} off={off} len={ln} trunc={trunc}")
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if trunc else 0)
        try:
            fd = os.open(p, flags, 0o644)
        except OSError as e:
            return self.private_op_failed("create", rel, e)
        if obj is None:
            obj = self.new_obj()
            self.names[rel] = ("f", obj)
        if trunc:
            obj.data = bytearray()
        try:
            n = os.pwrite(fd, buf, off)
            if n != ln:
                self.st.bad(f"short pwrite {p}: {n} of {ln} at {off}")
            self.apply_write(obj.data, off, buf[:n])
        except OSError as e:
            self.private_op_failed("pwrite", rel, e)
            if e.errno == errno.ENOSPC:
                self.resync(rel)
        finally:
            os.close(fd)
        self.st.op("create/write")

    def p_append(self):
        fs = self.files()
        if not fs:
            return self.p_write()
        rel = self.rng.choice(fs)
        obj = self.names[rel][1]
        room = FILE_CAP - len(obj.data)
        if room <= 0:
            return self.p_truncate(rel)
        ln = min(room, self.rng.randint(1, 256 * KIB))
        buf = self.rnd_bytes(ln)
        p = self.ppath(rel)
        self.set_status(f"append {p} len={ln}")
        try:
            fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        except OSError as e:
            return self.private_op_failed("append-open", rel, e)
        try:
            n = os.write(fd, buf)
            if n != ln:
                self.st.bad(f"short append {p}: {n} of {ln}")
            obj.data.extend(buf[:n])
        except OSError as e:
            self.private_op_failed("append", rel, e)
            if e.errno == errno.ENOSPC:
                self.resync(rel)
        finally:
            os.close(fd)
        self.st.op("append")

    def p_truncate(self, rel=None):
        fs = self.files()
        if not fs:
            return
        rel = rel or self.rng.choice(fs)
        obj = self.names[rel][1]
        r = self.rng.random()
        if r < 0.2:
            size = 0
        elif r < 0.6:
            size = self.rng.randint(0, max(0, len(obj.data)))
        else:
            size = self.rng.randint(0, FILE_CAP)
        p = self.ppath(rel)
        self.set_status(f"truncate {p} {size}")
        try:
            os.truncate(p, size)
        except OSError as e:
            self.private_op_failed("truncate", rel, e)
            if e.errno == errno.ENOSPC:
                self.resync(rel)
            return
        if size < len(obj.data):
            del obj.data[size:]
        else:
            obj.data.extend(b"\0" * (size - len(obj.data)))
        self.st.op("truncate")

    def p_rename(self):
        if not self.names:
            return
        src = self.rng.choice(list(self.names))
        dst = self.priv_slot()
        ps, pd = self.ppath(src), self.ppath(dst)
        self.set_status(f"rename {ps} {pd}")
        try:
            os.rename(ps, pd)
        except OSError as e:
            return self.private_op_failed("rename", src, e)
        self.st.op("rename")
        if src == dst:
            return
        vs, vd = self.names[src], self.names.get(dst)
        if vd and vs[0] == "f" and vd[0] == "f" and vs[1] is vd[1]:
            return      # two links of one inode: rename does nothing
        self.names[dst] = vs
        del self.names[src]

    def p_link(self):
        fs = self.files()
        if not fs:
            return
        src = self.rng.choice(fs)
        dst = self.priv_slot()
        ps, pd = self.ppath(src), self.ppath(dst)
        self.set_status(f"link {ps} {pd}")
        try:
            os.link(ps, pd)
        except OSError as e:
            if e.errno == errno.EEXIST and dst in self.names:
                self.st.op("link-eexist")
                return
            return self.private_op_failed("link", src, e)
        if dst in self.names:
            self.st.bad(f"link {ps} {pd} succeeded over an existing name")
        self.names[dst] = self.names[src]
        self.st.op("link")

    def p_unlink(self, rel=None):
        if not self.names:
            return
        rel = rel or self.rng.choice(list(self.names))
        p = self.ppath(rel)
        self.set_status(f"unlink {p}")
        try:
            os.unlink(p)
        except OSError as e:
            return self.private_op_failed("unlink", rel, e)
        del self.names[rel]
        self.st.op("unlink")

    def p_symlink(self):
        rel = self.priv_slot()
        p = self.ppath(rel)
        target = self.rng.choice(["n0", "../n1", "sub0/n2", SYMLINK_DEAD + "x"]) + \
            "-" * self.rng.randrange(0, 200)
        self.set_status(f"symlink {target} {p}")
        try:
            os.symlink(target, p)
        except OSError as e:
            if e.errno == errno.EEXIST and rel in self.names:
                self.st.op("symlink-eexist")
                return
            return self.private_op_failed("symlink", rel, e)
        if rel in self.names:
            self.st.bad(f"symlink over existing {p} succeeded")
        self.names[rel] = ("l", target)
        self.st.op("symlink")

    def p_mkdir_rmdir(self):
        sub = self.rng.choice(PRIV_SUBS[1:])
        p = self.ppath(sub)
        if sub not in self.subdirs:
            self.set_status(f"mkdir {p}")
            try:
                os.mkdir(p)
            except OSError as e:
                return self.private_op_failed("mkdir", sub, e)
            self.subdirs.add(sub)
            self.st.op("mkdir")
            return
        inside = [r for r in self.names if r.startswith(sub + "/")]
        self.set_status(f"rmdir {p} ({len(inside)} entries in model)")
        try:
            os.rmdir(p)
        except OSError as e:
            if e.errno == errno.ENOTEMPTY and inside:
                self.st.op("rmdir-enotempty")
                return
            return self.private_op_failed("rmdir", sub, e)
        if inside:
            self.st.bad(f"rmdir {p} succeeded but the model has {inside}")
        self.subdirs.discard(sub)
        self.st.op("rmdir")

    def p_setxattr(self):
        fs = self.files()
        if not fs:
            return
        rel = self.rng.choice(fs)
        obj = self.names[rel][1]
        key = f"user.k{self.rng.randrange(4)}"
        val = self.rnd_bytes(self.rng.randint(0, 200))
        p = self.ppath(rel)
        self.set_status(f"setxattr {p} {key} len={len(val)}")
        try:
            os.setxattr(p, key, val)
        except OSError as e:
            return self.private_op_failed("setxattr", rel, e)
        obj.xattrs[key] = val
        self.st.op("setxattr")

    def p_fsync(self):
        fs = self.files()
        if not fs:
            return
        rel = self.rng.choice(fs)
        p = self.ppath(rel)
        self.set_status(f"fsync {p}")
        try:
            fd = os.open(p, os.O_RDWR)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            return self.private_op_failed("fsync", rel, e)
        self.st.op("fsync")

    def verify_one(self, rel, where):
        v = self.names[rel]
        p = self.ppath(rel)
        self.set_status(f"verify {p}")
        try:
            if v[0] == "l":
                t = os.readlink(p)
                if t != v[1]:
                    self.st.bad(f"{where}: readlink {p} = {t!r}, expected {v[1]!r}")
                return
            with open(p, "rb") as f:
                got = f.read()
            obj = v[1]
            if got != obj.data:
                self.st.bad(f"{where}: {p}: content differs: {describe_diff(got, obj.data)}")
            sz = os.stat(p).st_size
            if sz != len(obj.data):
                self.st.bad(f"{where}: {p}: st_size {sz}, expected {len(obj.data)}")
            keys = sorted(k for k in os.listxattr(p) if k.startswith("user."))
            if keys != sorted(obj.xattrs):
                self.st.bad(f"{where}: {p}: xattrs {keys}, expected {sorted(obj.xattrs)}")
            for k, val in obj.xattrs.items():
                g = os.getxattr(p, k)
                if g != val:
                    self.st.bad(f"{where}: {p}: xattr {k}: {len(g)} bytes differ from the "
                                f"{len(val)} expected")
        except OSError as e:
            self.st.err(f"verify({where})", p, e, races_ok=False)
        self.st.op("verify")

    def verify_all(self, where):
        for rel in sorted(self.names):
            self.verify_one(rel, where)
        # The directory listing must match the model exactly, and the link counts.
        try:
            for sub in [""] + sorted(self.subdirs):
                d = self.ppath(sub) if sub else self.pdir
                want = sorted([r.rsplit("/", 1)[-1] for r in self.names
                               if (r.rsplit("/", 1)[0] if "/" in r else "") == sub] +
                              ([s for s in sorted(self.subdirs)] if sub == "" else []))
                got = sorted(os.listdir(d))
                if got != want:
                    self.st.bad(f"{where}: listdir {d} = {got}, expected {want}")
            groups = {}
            for rel, v in self.names.items():
                if v[0] == "f":
                    groups.setdefault(v[1].oid, []).append(rel)
            for oid, rels in groups.items():
                inos = {os.lstat(self.ppath(r)).st_ino for r in rels}
                nl = {os.lstat(self.ppath(r)).st_nlink for r in rels}
                if len(inos) != 1 or nl != {len(rels)}:
                    self.st.bad(f"{where}: links {rels}: inodes {inos}, nlink {nl}, "
                                f"expected one inode with nlink {len(rels)}")
        except OSError as e:
            self.st.err(f"verify({where})", self.pdir, e, races_ok=False)

    # -- shared operations (racy; ENOENT/ENOTEMPTY/EEXIST accepted) -------------
    def s_dir(self):
        d = os.path.join(self.shared, f"d{self.rng.randrange(N_SHARED_DIRS)}")
        if self.rng.random() < 0.4:
            d = os.path.join(d, f"s{self.rng.randrange(N_SHARED_SUB)}")
        return d

    def s_file(self):
        return os.path.join(self.s_dir(), f"f{self.rng.randrange(N_SHARED_NAMES)}")

    def s_any(self):
        d = self.s_dir()
        if self.rng.random() < 0.25:
            return os.path.join(d, f"l{self.rng.randrange(N_SHARED_NAMES // 2)}")
        return os.path.join(d, f"f{self.rng.randrange(N_SHARED_NAMES)}")

    def shared_op(self):
        r = self.rng.random()
        p = self.s_file()
        try:
            if r < 0.22:
                opn = "create/write"
                off = self.rng.randint(0, 512 * KIB)
                ln = self.rng.randint(1, min(MAX_WRITE, FILE_CAP - off))
                self.set_status(f"shared write {p} off={off} len={ln}")
                flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                if self.rng.random() < 0.3:
                    flags |= os.O_TRUNC
                fd = os.open(p, flags, 0o644)
                try:
                    os.pwrite(fd, self.rnd_bytes(ln), off)
                finally:
                    os.close(fd)
            elif r < 0.30:
                opn = "append"
                self.set_status(f"shared append {p}")
                fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
                try:
                    if os.fstat(fd).st_size < FILE_CAP - 256 * KIB:
                        os.write(fd, self.rnd_bytes(self.rng.randint(1, 256 * KIB)))
                finally:
                    os.close(fd)
            elif r < 0.37:
                opn = "truncate"
                size = self.rng.randint(0, FILE_CAP)
                self.set_status(f"shared truncate {p} {size}")
                fd = os.open(p, os.O_WRONLY | os.O_NOFOLLOW)
                try:
                    os.ftruncate(fd, size)
                finally:
                    os.close(fd)
            elif r < 0.52:
                opn = "rename"
                a, b = self.s_any(), self.s_any()
                self.set_status(f"shared rename {a} {b}")
                os.rename(a, b)
            elif r < 0.58:
                opn = "rename-dir"
                s = f"s{self.rng.randrange(N_SHARED_SUB)}"
                a = os.path.join(self.shared, f"d{self.rng.randrange(N_SHARED_DIRS)}", s)
                b = os.path.join(self.shared, f"d{self.rng.randrange(N_SHARED_DIRS)}", s)
                self.set_status(f"shared rename dir {a} {b}")
                os.rename(a, b)
            elif r < 0.65:
                opn = "link"
                b = self.s_file()
                self.set_status(f"shared link {p} {b}")
                os.link(p, b)
            elif r < 0.75:
                opn = "unlink"
                a = self.s_any()
                self.set_status(f"shared unlink {a}")
                os.unlink(a)
            elif r < 0.81:
                opn = "mkdir/rmdir"
                s = os.path.join(self.shared, f"d{self.rng.randrange(N_SHARED_DIRS)}",
                                 f"s{self.rng.randrange(N_SHARED_SUB)}")
                self.set_status(f"shared mkdir/rmdir {s}")
                if self.rng.random() < 0.5:
                    os.mkdir(s)
                else:
                    os.rmdir(s)
            elif r < 0.87:
                opn = "symlink"
                a = os.path.join(self.s_dir(), f"l{self.rng.randrange(N_SHARED_NAMES // 2)}")
                self.set_status(f"shared symlink {a}")
                os.symlink(SYMLINK_DEAD + str(self.rng.randrange(1000)), a)
            elif r < 0.94:
                opn = "setxattr"
                self.set_status(f"shared setxattr {p}")
                os.setxattr(p, f"user.s{self.rng.randrange(3)}",
                            self.rnd_bytes(self.rng.randint(0, 100)))
            else:
                opn = "fsync"
                self.set_status(f"shared fsync {p}")
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as e:
            self.st.err("shared " + opn, p, e, races_ok=True)
            self.st.op("shared " + opn + " (raced)")
            return
        self.st.op("shared " + opn)

    # -- main loop --------------------------------------------------------------
    def run(self):
        os.makedirs(self.pdir, exist_ok=True)
        private = [(self.p_write, 20), (self.p_append, 10), (self.p_truncate, 7),
                   (self.p_rename, 10), (self.p_link, 6), (self.p_unlink, 7),
                   (self.p_mkdir_rmdir, 5), (self.p_symlink, 5), (self.p_setxattr, 7),
                   (self.p_fsync, 4)]
        fns = [f for f, w in private for _ in range(w)]
        while time.monotonic() < self.deadline:
            r = self.rng.random()
            if r < 0.45:
                self.shared_op()
            elif r < 0.92:
                self.rng.choice(fns)()
            elif self.names:
                self.verify_one(self.rng.choice(list(self.names)), "during run")
        self.set_status("final verify")
        self.verify_all("end of run")
        return self.model()

    def model(self):
        m = {"dir": self.pdir, "subdirs": sorted(self.subdirs), "names": {}}
        for rel, v in self.names.items():
            if v[0] == "l":
                m["names"][rel] = {"type": "symlink", "target": v[1]}
            else:
                o = v[1]
                m["names"][rel] = {"type": "file", "obj": o.oid, "size": len(o.data),
                                   "sha256": hashlib.sha256(o.data).hexdigest(),
                                   "xattrs": {k: x.hex() for k, x in o.xattrs.items()}}
        return m


def describe_diff(got, want):
    if len(got) != len(want):
        s = f"length {len(got)}, expected {len(want)}"
    else:
        s = f"length {len(got)} ok"
    n = min(len(got), len(want))
    for i in range(0, n, 4096):
        if got[i:i + 4096] != want[i:i + 4096]:
            j = i + next(k for k in range(min(4096, n - i)) if got[i + k] != want[i + k])
            # extent of the differing run
            e = j
            while e < n and got[e] != want[e]:
                e += 1
            s += f"; first difference at byte {j} (run to about {e}); got " \
                 f"{bytes(got[j:j + 8]).hex()} expected {bytes(want[j:j + 8]).hex()}"
            zero = all(b == 0 for b in got[j:e])
            if zero:
                s += " (got zeros)"
            break
    return s


# ---------------------------------------------------------------------------
# readers

def reader_main(mnt, idx, deadline, status, out):
    st = Stats(mnt, f"reader{idx}")
    rng = random.Random(idx * 7919)

    def onerr(e):
        st.err("walk", getattr(e, "filename", "?"), e, races_ok=True)

    try:
        while time.monotonic() < deadline:
            for root, dirs, files in os.walk(mnt, onerror=onerr):
                st.op("walk-dir")
                for name in files + dirs:
                    p = os.path.join(root, name)
                    status.value = f"lstat {p}".encode()[:255]
                    try:
                        s = os.lstat(p)
                        st.op("stat")
                        if stat.S_ISLNK(s.st_mode):
                            try:
                                os.readlink(p)
                            except OSError as e:
                                # EINVAL: a writer renamed a file over the symlink
                                # between the lstat and the readlink.
                                if e.errno != errno.EINVAL:
                                    raise
                                try:
                                    if stat.S_ISLNK(os.lstat(p).st_mode):
                                        raise e
                                except FileNotFoundError:
                                    pass
                                st.races["EINVAL"] = st.races.get("EINVAL", 0) + 1
                            st.op("readlink")
                        elif stat.S_ISREG(s.st_mode):
                            status.value = f"read {p}".encode()[:255]
                            with open(p, "rb") as f:
                                while f.read(1 * MIB):
                                    pass
                            st.op("read")
                            if rng.random() < 0.2:
                                for k in os.listxattr(p):
                                    try:
                                        os.getxattr(p, k)
                                    except OSError as e:
                                        if e.errno != errno.ENODATA:
                                            raise
                                st.op("getxattr")
                    except OSError as e:
                        st.err("read", p, e, races_ok=True)
                if time.monotonic() >= deadline:
                    break
    except Exception:
        st.bad("reader exception: " + traceback.format_exc())
    with open(out, "w") as f:
        json.dump({"result": st.result()}, f)


def writer_main(mnt, idx, seed, deadline, status, out):
    w = Writer(mnt, idx, seed, deadline, status)
    model = None
    try:
        model = w.run()
    except Exception:
        w.st.bad("writer exception: " + traceback.format_exc())
    with open(out, "w") as f:
        json.dump({"result": w.st.result(), "model": model}, f)


# ---------------------------------------------------------------------------
# commands

def report(results):
    """Print the counts; return True when nothing unexpected happened."""
    ok = True
    total = {}
    races = {}
    for r in results:
        for k, v in r["ops"].items():
            total[k] = total.get(k, 0) + v
        for k, v in r["races"].items():
            races[k] = races.get(k, 0) + v
        ops = sum(r["ops"].values())
        say(f"{r['who']}: {ops} operations, {r['n_unexpected']} unexpected errors, "
            f"{len(r['mismatch'])} model mismatches, ENOSPC on a full fs {r['enospc_full']}")
        for u in r["unexpected"][:10]:
            say(f"  UNEXPECTED {r['who']}: {u[0]} {u[1]}: {u[2]} ({u[3]})")
            ok = False
        if r["n_unexpected"]:
            ok = False
        for m in r["mismatch"][:10]:
            say(f"  MISMATCH {r['who']}: {m}")
            ok = False
    say("operation counts (all processes): " +
        ", ".join(f"{k}={v}" for k, v in sorted(total.items())))
    say("accepted races: " + (", ".join(f"{k}={v}" for k, v in sorted(races.items())) or "none"))
    say(f"total operations: {sum(total.values())}")
    return ok


def cmd_run(mnt, state, seconds, nw=6, nr=2, seed=None):
    seconds, nw, nr = float(seconds), int(nw), int(nr)
    seed = int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little")
    say(f"{nw} writers, {nr} readers for {seconds:g} s in {mnt}; seed {seed}")
    shared = os.path.join(mnt, "shared")
    for i in range(N_SHARED_DIRS):
        os.makedirs(os.path.join(shared, f"d{i}"), exist_ok=True)
    outdir = os.path.dirname(os.path.abspath(state))
    ctx = mp.get_context("fork")
    deadline = time.monotonic() + seconds
    procs = []
    for i in range(nw):
        status = ctx.Array("c", 256, lock=False)
        out = os.path.join(outdir, f"soak-writer{i}.json")
        p = ctx.Process(target=writer_main,
                        args=(mnt, i, seed * 1000 + i, deadline, status, out))
        procs.append((f"writer{i}", p, status, out))
    for i in range(nr):
        status = ctx.Array("c", 256, lock=False)
        out = os.path.join(outdir, f"soak-reader{i}.json")
        p = ctx.Process(target=reader_main, args=(mnt, i, deadline, status, out))
        procs.append((f"reader{i}", p, status, out))
    for _, p, _, out in procs:
        if os.path.exists(out):
            os.unlink(out)
        p.start()
    # A hang (a request the daemon never answers) shows as a process that does not
    # finish well after the deadline; say which and what it was doing.
    hard = deadline + 120 + 10 * seconds
    hung = []
    for who, p, status, _ in procs:
        p.join(max(0.0, hard - time.monotonic()))
        if p.is_alive():
            hung.append(who)
            say(f"HANG: {who} (pid {p.pid}) still running 120 s after the deadline; "
                f"last operation: {status.value.decode(errors='replace')}")
    if hung:
        for who, p, _, _ in procs:
            if p.is_alive():
                p.kill()
        return 1
    results, models = [], []
    ok = True
    for who, p, _, out in procs:
        if p.exitcode != 0 or not os.path.exists(out):
            say(f"FAIL: {who} exited {p.exitcode} without a result")
            ok = False
            continue
        with open(out) as f:
            d = json.load(f)
        os.unlink(out)
        results.append(d["result"])
        if who.startswith("writer"):
            if d["model"] is None:
                ok = False
            else:
                models.append(d["model"])
    ok = report(results) and ok
    nfiles = sum(len(m["names"]) for m in models)
    nbytes = sum(v.get("size", 0) for m in models for v in m["names"].values())
    say(f"private models: {nfiles} names, {nbytes} bytes in {len(models)} directories")
    with open(state, "w") as f:
        json.dump({"seed": seed, "models": models}, f)
    return 0 if ok else 1


def cmd_verify(mnt, state):
    with open(state) as f:
        st = json.load(f)
    bad = []
    checked = 0
    for m in st["models"]:
        # the saved paths name the mount point of the run; re-root them on MNT
        pdir = os.path.join(mnt, os.path.basename(m["dir"]))
        names = m["names"]
        subdirs = m["subdirs"]
        try:
            for sub in [""] + subdirs:
                d = os.path.join(pdir, sub) if sub else pdir
                want = sorted([r.rsplit("/", 1)[-1] for r in names
                               if (r.rsplit("/", 1)[0] if "/" in r else "") == sub] +
                              (list(subdirs) if sub == "" else []))
                got = sorted(os.listdir(d))
                if got != want:
                    bad.append(f"listdir {d} = {got}, expected {want}")
            groups = {}
            for rel, v in sorted(names.items()):
                p = os.path.join(pdir, rel)
                checked += 1
                if v["type"] == "symlink":
                    t = os.readlink(p)
                    if t != v["target"]:
                        bad.append(f"readlink {p} = {t!r}, expected {v['target']!r}")
                    continue
                groups.setdefault(v["obj"], []).append(p)
                with open(p, "rb") as f:
                    data = f.read()
                if len(data) != v["size"] or hashlib.sha256(data).hexdigest() != v["sha256"]:
                    bad.append(f"{p}: {len(data)} bytes sha256 "
                               f"{hashlib.sha256(data).hexdigest()[:16]}, expected "
                               f"{v['size']} bytes sha256 {v['sha256'][:16]}")
                keys = sorted(k for k in os.listxattr(p) if k.startswith("user."))
                if keys != sorted(v["xattrs"]):
                    bad.append(f"{p}: xattrs {keys}, expected {sorted(v['xattrs'])}")
                for k, x in v["xattrs"].items():
                    if k in keys and os.getxattr(p, k).hex() != x:
                        bad.append(f"{p}: xattr {k} differs")
            for oid, ps in groups.items():
                inos = {os.lstat(p).st_ino for p in ps}
                nl = {os.lstat(p).st_nlink for p in ps}
                if len(inos) != 1 or nl != {len(ps)}:
                    bad.append(f"links {ps}: inodes {inos}, nlink {nl}, expected one "
                               f"inode with nlink {len(ps)}")
        except OSError as e:
            bad.append(f"{pdir}: {e}")
    for b in bad[:30]:
        say(f"MISMATCH after remount: {b}")
    say(f"verified {checked} names in {len(st['models'])} private directories: "
        f"{len(bad)} mismatches")
    return 0 if not bad else 1


def main(argv):
    if len(argv) >= 4 and argv[1] == "run":
        return cmd_run(*argv[2:])
    if len(argv) == 4 and argv[1] == "verify":
        return cmd_verify(argv[2], argv[3])
    print(__doc__ if __doc__ else "usage: soak_work.py run|verify ...", file=sys.stderr)
    print("usage: soak_work.py run MNT STATE SECONDS [WRITERS] [READERS] [SEED]\n"
          "       soak_work.py verify MNT STATE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
