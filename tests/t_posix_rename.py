#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_posix_rename.py - rename(2) and the renameat2 flags (RENAME_NOREPLACE, RENAME_EXCHANGE)
# on a mounted dmafs: the command rename of t_posix.py's COMMANDS.

import errno
import os
import random
import time

from t_check import (RENAME_EXCHANGE, RENAME_NOREPLACE, check, expect_errno, read_file, renameat2,
                     say, write_file)


def cmd_rename(args):
    """rename DIR: rename(2) and renameat2 flags."""
    d = args[0]
    os.makedirs(d, exist_ok=True)
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    say("rename: new name keeps inode and data; old name gone")
    write_file(a, b"AAAA")
    ino = os.stat(a).st_ino
    os.rename(a, b)
    check(not os.path.exists(a), "old name exists after rename")
    check(os.stat(b).st_ino == ino and read_file(b) == b"AAAA", "renamed file changed")

    say("rename over an existing file: target replaced atomically; open fd of old target still reads old data")
    write_file(a, b"new-content")
    ino_a = os.stat(a).st_ino
    fd = os.open(b, os.O_RDONLY)
    os.rename(a, b)
    check(read_file(b) == b"new-content" and os.stat(b).st_ino == ino_a, "target not replaced")
    check(not os.path.exists(a), "source name still exists")
    check(os.pread(fd, 100, 0) == b"AAAA", "replaced target's open fd lost its data")
    check(os.fstat(fd).st_nlink == 0, "replaced target still linked")
    os.close(fd)
    check(sorted(os.listdir(d)) == ["b"], f"dir listing after rename-over {os.listdir(d)}")

    say("rename across dirs updates both parents' mtime")
    d1, d2 = os.path.join(d, "d1"), os.path.join(d, "d2")
    os.mkdir(d1)
    os.mkdir(d2)
    write_file(os.path.join(d1, "x"), b"x")
    m1, m2 = os.stat(d1).st_mtime_ns, os.stat(d2).st_mtime_ns
    time.sleep(0.05)
    os.rename(os.path.join(d1, "x"), os.path.join(d2, "y"))
    check(os.listdir(d1) == [] and os.listdir(d2) == ["y"], "cross-dir rename listing")
    check(os.stat(d1).st_mtime_ns > m1 and os.stat(d2).st_mtime_ns > m2, "parent mtimes not updated")

    say("rename of dirs: contents follow, '..' points at the new parent")
    tree = os.path.join(d, "tree")
    os.makedirs(os.path.join(tree, "s1", "s2"))
    write_file(os.path.join(tree, "s1", "s2", "f"), b"deep")
    os.rename(tree, os.path.join(d, "tree2"))
    check(read_file(os.path.join(d, "tree2", "s1", "s2", "f")) == b"deep", "content after dir rename")
    os.rename(os.path.join(d, "tree2", "s1"), os.path.join(d2, "s1moved"))
    check(os.stat(os.path.join(d2, "s1moved", "..")).st_ino == os.stat(d2).st_ino, "'..' of moved dir")
    check(read_file(os.path.join(d2, "s1moved", "s2", "f")) == b"deep", "content after dir move")
    check(os.listdir(os.path.join(d, "tree2")) == [], "old parent still lists moved dir")

    say("rename dir over empty dir ok; over non-empty dir ENOTEMPTY; file<->dir EISDIR/ENOTDIR; into itself EINVAL")
    e1, e2, ne = os.path.join(d, "e1"), os.path.join(d, "e2"), os.path.join(d, "ne")
    os.mkdir(e1)
    os.mkdir(e2)
    os.mkdir(ne)
    write_file(os.path.join(e1, "k"), b"k")
    write_file(os.path.join(ne, "z"), b"z")
    os.rename(e1, e2)
    check(not os.path.exists(e1) and read_file(os.path.join(e2, "k")) == b"k", "dir over empty dir")
    expect_errno((errno.ENOTEMPTY, errno.EEXIST), os.rename, e2, ne, what="dir over non-empty dir")
    expect_errno(errno.EISDIR, os.rename, b, ne, what="file over dir")
    expect_errno(errno.ENOTDIR, os.rename, ne, b, what="dir over file")
    expect_errno(errno.EINVAL, os.rename, e2, os.path.join(e2, "inside"), what="dir into itself")
    expect_errno(errno.ENOENT, os.rename, os.path.join(d, "missing"), os.path.join(d, "m2"), what="missing source")

    say("rename of a name onto itself and onto another hard link of the same inode is a no-op")
    os.rename(b, b)
    check(read_file(b) == b"new-content", "rename onto itself")
    h = os.path.join(d, "hl")
    os.link(b, h)
    os.rename(b, h)
    check(os.path.exists(b) and os.path.exists(h) and os.stat(h).st_nlink == 2,
          "rename between two links of one inode must leave both names")
    os.unlink(h)

    say("RENAME_NOREPLACE: EEXIST when the target exists (both untouched); works when it does not")
    c = os.path.join(d, "c")
    write_file(c, b"ccc")
    expect_errno(errno.EEXIST, renameat2, b, c, RENAME_NOREPLACE, what="RENAME_NOREPLACE onto existing")
    check(read_file(b) == b"new-content" and read_file(c) == b"ccc", "NOREPLACE failure changed files")
    renameat2(c, os.path.join(d, "c2"), RENAME_NOREPLACE)
    check(not os.path.exists(c) and read_file(os.path.join(d, "c2")) == b"ccc", "NOREPLACE to new name")

    say("RENAME_EXCHANGE: files swap inodes; file<->dir swap; across dirs ('..' updated); missing target ENOENT")
    c2 = os.path.join(d, "c2")
    ib, ic = os.stat(b).st_ino, os.stat(c2).st_ino
    renameat2(b, c2, RENAME_EXCHANGE)
    check(read_file(b) == b"ccc" and read_file(c2) == b"new-content", "exchange contents")
    check(os.stat(b).st_ino == ic and os.stat(c2).st_ino == ib, "exchange inodes")
    renameat2(b, ne, RENAME_EXCHANGE)
    check(os.path.isdir(b) and read_file(os.path.join(b, "z")) == b"z", "exchange file<->dir: dir side")
    check(os.path.isfile(ne) and read_file(ne) == b"ccc", "exchange file<->dir: file side")
    sub = os.path.join(d2, "s1moved")
    renameat2(b, sub, RENAME_EXCHANGE)
    check(read_file(os.path.join(sub, "z")) == b"z" and read_file(os.path.join(b, "s2", "f")) == b"deep",
          "exchange dirs across parents")
    check(os.stat(os.path.join(sub, "..")).st_ino == os.stat(d2).st_ino, "'..' after exchange (1)")
    check(os.stat(os.path.join(b, "..")).st_ino == os.stat(d).st_ino, "'..' after exchange (2)")
    expect_errno(errno.ENOENT, renameat2, ne, os.path.join(d, "nothere"), RENAME_EXCHANGE,
                 what="RENAME_EXCHANGE with missing target")
    expect_errno(errno.EINVAL, renameat2, ne, c2, RENAME_EXCHANGE | RENAME_NOREPLACE,
                 what="EXCHANGE|NOREPLACE")

    say("rename stress: 2000 renames in a ring over existing names, listing stays consistent")
    ring = os.path.join(d, "ring")
    os.mkdir(ring)
    n = 50
    for i in range(n):
        write_file(os.path.join(ring, f"r{i}"), str(i).encode())
    alive = {f"r{i}": str(i).encode() for i in range(n)}
    r = random.Random(60)
    for _ in range(2000):
        src, dst = r.sample(sorted(alive), 2)
        os.rename(os.path.join(ring, src), os.path.join(ring, dst))
        alive[dst] = alive.pop(src)
        if len(alive) < 10:
            for i in range(n):
                nm = f"q{r.randrange(10**6)}"
                if nm not in alive:
                    write_file(os.path.join(ring, nm), nm.encode())
                    alive[nm] = nm.encode()
    check(set(os.listdir(ring)) == set(alive), "ring listing differs from model")
    for nm, v in alive.items():
        check(read_file(os.path.join(ring, nm)) == v, f"ring content of {nm}")
