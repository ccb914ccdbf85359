#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# soak_work_writer.py - a writer process of soak_work.py: random operations in the shared
# tree and in its private directory, whose in-memory model (names, contents, hard links,
# symlinks, user.* xattrs) it checks with reads during the run and at the end.

import errno
import hashlib
import os
import random
import time
from collections import deque

from soak_work_common import (KIB, MAX_WRITE, FILE_CAP, SYMLINK_DEAD, N_SHARED_DIRS, N_SHARED_SUB,
                              N_SHARED_NAMES, PRIV_SUBS, PRIV_NAMES, Stats, say)


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
