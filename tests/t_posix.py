#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_posix.py - POSIX semantics checks on a mounted dmafs that need syscalls the
# shell cannot make: files, directories, links, times, truncate, sparse files, mmap, statfs,
# rename and renameat2, xattrs, a big directory, concurrent processes, space of unlinked
# open files and a metadata log filled with names.
# Run through tests/t_helpers.py (COMMAND ARGS...); the commands are listed in COMMANDS.
# The basics and a few helpers for the shell are here; rename is in t_posix_rename.py,
# xattrs in t_posix_xattr.py, the big directory and concurrent processes in t_posix_many.py.

import errno
import mmap
import os
import random
import stat
import time

from t_check import (GIB, MIB, check, expect_errno, free_bytes, fsync_dir, read_file, renameat2,
                     rnd, say, sha, wait_for, write_file)
from t_posix_many import cmd_bigdir, cmd_bigdir_verify, cmd_concurrency
from t_posix_rename import cmd_rename
from t_posix_xattr import cmd_xattr, cmd_xattr_setup, cmd_xattr_verify

# ---------------------------------------------------------------- basic POSIX

def t_files(d):
    say("regular files: create/O_EXCL/write/pwrite/O_APPEND/read back")
    p = os.path.join(d, "f1")
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"hello ")
    os.write(fd, b"world")
    os.pwrite(fd, b"W", 6)
    os.close(fd)
    check(read_file(p) == b"hello World", f"content of {p} is {read_file(p)!r}")
    check(os.stat(p).st_size == 11, "size after writes")
    expect_errno(errno.EEXIST, os.open, p, os.O_RDWR | os.O_CREAT | os.O_EXCL, what="O_EXCL on existing file")
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"!!")
    os.close(fd)
    check(read_file(p) == b"hello World!!", "O_APPEND write")
    fd = os.open(p, os.O_RDONLY)
    check(os.pread(fd, 100, 50) == b"", "read past EOF returns 0 bytes")
    check(os.pread(fd, 5, 10) == b"d!!", "short read at EOF")
    os.close(fd)
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    check(os.stat(p).st_size == 0, "O_TRUNC empties the file")

    say("regular files: 9 MiB+ written in odd-sized chunks, read back in other chunks")
    data = rnd(1, 9 * MIB + 12345)
    p = os.path.join(d, "big")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    off = 0
    while off < len(data):
        n = os.write(fd, data[off:off + 123457])
        off += n
    os.fsync(fd)
    os.close(fd)
    check(os.stat(p).st_size == len(data), "size of 9 MiB file")
    fd = os.open(p, os.O_RDONLY)
    got = bytearray()
    while True:
        b = os.read(fd, 65521)
        if not b:
            break
        got += b
    os.close(fd)
    check(bytes(got) == data, "9 MiB file content mismatch")
    say("regular files: overwrite across a 1 MiB stripe-unit boundary")
    fd = os.open(p, os.O_RDWR)
    patch = rnd(2, 300000)
    os.pwrite(fd, patch, MIB - 150000)
    os.close(fd)
    want = data[:MIB - 150000] + patch + data[MIB - 150000 + len(patch):]
    check(read_file(p) == want, "overwrite across stripe unit boundary")
    say("regular files: block-internal gap between two small writes reads as zeros")
    p = os.path.join(d, "gap")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"A" * 10, 0)
    os.pwrite(fd, b"B" * 10, 3000)
    os.close(fd)
    check(read_file(p) == b"A" * 10 + bytes(2990) + b"B" * 10, "gap inside a block not zero")

    say("umask: new file 0644 and dir 0755 under umask 022, owned by root")
    old = os.umask(0o022)
    try:
        p = os.path.join(d, "modef")
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o666))
        st = os.stat(p)
        check(stat.S_IMODE(st.st_mode) == 0o644 and stat.S_ISREG(st.st_mode),
              f"new file mode {oct(st.st_mode)}")
        check(st.st_uid == 0 and st.st_gid == 0, f"new file owner {st.st_uid}:{st.st_gid}")
        os.mkdir(os.path.join(d, "moded"), 0o777)
        st = os.stat(os.path.join(d, "moded"))
        check(stat.S_IMODE(st.st_mode) == 0o755 and stat.S_ISDIR(st.st_mode),
              f"new dir mode {oct(st.st_mode)}")
    finally:
        os.umask(old)


def t_dirs(d):
    say("dirs: nested mkdir, listing, errors (EEXIST, ENOTEMPTY, ENOTDIR, EISDIR, ENOENT, ENAMETOOLONG)")
    deep = d
    for i in range(20):
        deep = os.path.join(deep, f"lvl{i}")
        os.mkdir(deep)
    write_file(os.path.join(deep, "leaf"), b"leaf")
    check(read_file(os.path.join(deep, "leaf")) == b"leaf", "file 20 levels deep")
    base = os.path.join(d, "dirs")
    os.mkdir(base)
    names = {f"n{i:03d}" for i in range(200)}
    for n in names:
        if n.endswith("7"):
            os.mkdir(os.path.join(base, n))
        else:
            write_file(os.path.join(base, n), n.encode())
    check(set(os.listdir(base)) == names, "listing of 200-entry dir differs")
    for e in os.scandir(base):
        check(e.is_dir() == e.name.endswith("7"), f"d_type/is_dir wrong for {e.name}")
    expect_errno(errno.EEXIST, os.mkdir, base, what="mkdir existing")
    expect_errno(errno.ENOTEMPTY, os.rmdir, base, what="rmdir non-empty")
    expect_errno(errno.ENOTDIR, os.rmdir, os.path.join(base, "n001"), what="rmdir of a file")
    expect_errno(errno.EISDIR, os.unlink, os.path.join(base, "n007"), what="unlink of a dir")
    expect_errno(errno.EISDIR, os.open, os.path.join(base, "n007"), os.O_WRONLY, what="open dir for write")
    expect_errno(errno.ENOENT, os.open, os.path.join(base, "nope"), os.O_RDONLY, what="open missing")
    expect_errno(errno.ENOTDIR, os.stat, os.path.join(base, "n001", "x"), what="path through a file")
    long255 = "L" * 255
    write_file(os.path.join(base, long255), b"x")
    check(long255 in os.listdir(base), "255-byte name not listed")
    expect_errno(errno.ENAMETOOLONG, os.open, os.path.join(base, "L" * 256),
                 os.O_WRONLY | os.O_CREAT, 0o644, what="256-byte name")
    utf = "d\u00e9j\u00e0-\u4e2d\u6587-\U0001F600"
    write_file(os.path.join(base, utf), b"utf")
    check(read_file(os.path.join(base, utf)) == b"utf", "UTF-8 name")
    os.rmdir(os.path.join(base, "n007"))
    check("n007" not in os.listdir(base), "rmdir'd dir still listed")
    expect_errno(errno.ENOENT, os.stat, os.path.join(base, "n007"), what="stat after rmdir")
    for n in os.listdir(base):
        p = os.path.join(base, n)
        (os.rmdir if os.path.isdir(p) and not os.path.islink(p) else os.unlink)(p)
    os.rmdir(base)
    check(not os.path.exists(base), "dir still exists after rmdir")


def t_symlinks(d):
    say("symlinks: Hugging Face cache layout snapshots/<rev>/... -> ../../blobs/<sha256>")
    repo = os.path.join(d, "models--org--name")
    os.makedirs(os.path.join(repo, "blobs"))
    rev = "0123456789abcdef0123456789abcdef01234567"
    files = {"config.json": rnd(10, 517), "model.safetensors": rnd(11, 3 * MIB + 7),
             "tokenizer/vocab.txt": rnd(12, 70000)}
    for rel, data in files.items():
        h = sha(data)
        write_file(os.path.join(repo, "blobs", h), data)
        link = os.path.join(repo, "snapshots", rev, rel)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        target = "../" * (rel.count("/") + 2) + "blobs/" + h
        os.symlink(target, link)
    for rel, data in files.items():
        link = os.path.join(repo, "snapshots", rev, rel)
        h = sha(data)
        target = "../" * (rel.count("/") + 2) + "blobs/" + h
        check(os.readlink(link) == target, f"readlink {rel}: {os.readlink(link)!r} != {target!r}")
        lst = os.lstat(link)
        check(stat.S_ISLNK(lst.st_mode), f"lstat {rel} not a symlink")
        check(lst.st_size == len(target), f"symlink st_size {lst.st_size} != {len(target)}")
        check(os.stat(link).st_size == len(data), f"stat through link {rel}")
        check(read_file(link) == data, f"read through link {rel}")
        check(os.path.realpath(link) == os.path.realpath(os.path.join(repo, "blobs", h)),
              f"realpath of {rel}")
    say("symlinks: dangling link, link to dir, 1 KiB and 4095-byte targets, EEXIST")
    dl = os.path.join(d, "dangling")
    os.symlink("does/not/exist", dl)
    check(os.readlink(dl) == "does/not/exist", "dangling readlink")
    expect_errno(errno.ENOENT, os.stat, dl, what="stat dangling link")
    os.symlink(os.path.join(repo, "snapshots"), os.path.join(d, "dirlink"))
    check(os.listdir(os.path.join(d, "dirlink")) == [rev], "listing through a dir symlink")
    for n in (1024, 4095):
        t = ("x" * 200 + "/") * (n // 201) + "y" * (n - 201 * (n // 201))
        check(len(t) == n, "test bug: target length")
        p = os.path.join(d, f"long{n}")
        os.symlink(t, p)
        check(os.readlink(p) == t, f"{n}-byte symlink target round trip")
    expect_errno(errno.EEXIST, os.symlink, "x", dl, what="symlink over existing name")


def t_hardlinks(d):
    say("hard links: st_nlink, same inode, shared data, unlink one name")
    a = os.path.join(d, "hl_a")
    write_file(a, b"original")
    os.mkdir(os.path.join(d, "hl_sub"))
    b = os.path.join(d, "hl_sub", "hl_b")
    c = os.path.join(d, "hl_c")
    ct0 = os.stat(a).st_ctime_ns
    time.sleep(0.05)
    os.link(a, b)
    os.link(b, c)
    sa, sb, sc = os.stat(a), os.stat(b), os.stat(c)
    check(sa.st_ino == sb.st_ino == sc.st_ino, "hard links have different st_ino")
    check(sa.st_nlink == sb.st_nlink == sc.st_nlink == 3, f"st_nlink {sa.st_nlink}/{sb.st_nlink}/{sc.st_nlink} != 3")
    check(sa.st_ctime_ns > ct0, "link() did not update ctime")
    with open(b, "r+b") as f:
        f.write(b"CHANGED!")
    check(read_file(a) == b"CHANGED!" and read_file(c) == b"CHANGED!", "write via one link not seen via others")
    os.unlink(a)
    check(os.stat(b).st_nlink == 2 and os.stat(c).st_nlink == 2, "nlink after unlinking one name")
    check(read_file(b) == b"CHANGED!", "data after unlinking one name")
    expect_errno(errno.EEXIST, os.link, b, c, what="link onto an existing name")
    expect_errno(errno.EPERM, os.link, os.path.join(d, "hl_sub"), os.path.join(d, "hl_dir"),
                 what="hard link to a directory")
    expect_errno(errno.ENOENT, os.link, a, os.path.join(d, "hl_x"), what="link from missing name")


def t_unlink_open(d):
    say("unlink of an open file: data readable and writable until close, then space freed")
    p = os.path.join(d, "openunlinked")
    fsync_dir(d)
    free0 = free_bytes(d)
    data = rnd(20, 48 * MIB)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    check(wait_for(lambda: free_bytes(d) <= free0 - 40 * MIB, 8),
          f"free space did not drop by >= 40 MiB after writing 48 MiB ({free0} -> {free_bytes(d)})")
    os.unlink(p)
    fsync_dir(d)
    check(not os.path.exists(p) and "openunlinked" not in os.listdir(d), "unlinked name still visible")
    expect_errno(errno.ENOENT, os.stat, p, what="stat unlinked name")
    check(os.fstat(fd).st_nlink == 0, f"fstat nlink of unlinked open file {os.fstat(fd).st_nlink}")
    check(os.pread(fd, len(data), 0) == data, "data of unlinked open file changed")
    os.pwrite(fd, b"tail", len(data))
    check(os.pread(fd, 4, len(data)) == b"tail", "write to unlinked open file")
    check(free_bytes(d) <= free0 - 40 * MIB, "space freed while the unlinked file is still open")
    os.close(fd)
    check(wait_for(lambda: free_bytes(d) >= free0 - 2 * MIB, 10),
          f"space not freed after close of unlinked file ({free0} before, {free_bytes(d)} 10 s after close)")


def t_times(d):
    say("times: write/chmod/chown/utimens/link update mtime/ctime as POSIX says; relatime: a read updates an atime older than mtime, once")
    p = os.path.join(d, "times")
    write_file(p, b"x" * 100)
    s0 = os.stat(p)
    time.sleep(0.05)
    with open(p, "r+b") as f:
        f.write(b"y")
    s1 = os.stat(p)
    check(s1.st_mtime_ns > s0.st_mtime_ns, "write did not update mtime")
    check(s1.st_ctime_ns > s0.st_ctime_ns, "write did not update ctime")
    time.sleep(0.05)
    os.chmod(p, 0o600)
    s2 = os.stat(p)
    check(stat.S_IMODE(s2.st_mode) == 0o600, f"chmod: mode {oct(s2.st_mode)}")
    check(s2.st_ctime_ns > s1.st_ctime_ns, "chmod did not update ctime")
    check(s2.st_mtime_ns == s1.st_mtime_ns, "chmod changed mtime")
    time.sleep(0.05)
    os.chown(p, 1234, 5678)
    s3 = os.stat(p)
    check((s3.st_uid, s3.st_gid) == (1234, 5678), f"chown: {s3.st_uid}:{s3.st_gid}")
    check(s3.st_ctime_ns > s2.st_ctime_ns, "chown did not update ctime")
    os.chown(p, -1, 42)
    check((os.stat(p).st_uid, os.stat(p).st_gid) == (1234, 42), "chown -1 keeps uid")
    time.sleep(0.05)
    at, mt = 1000000000 * 10**9 + 123456789, 1100000000 * 10**9 + 987654321
    os.utime(p, ns=(at, mt))
    s4 = os.stat(p)
    check(s4.st_atime_ns // 10**9 == at // 10**9, f"utimens atime {s4.st_atime_ns} != {at}")
    check(s4.st_mtime_ns // 10**9 == mt // 10**9, f"utimens mtime {s4.st_mtime_ns} != {mt}")
    if (s4.st_atime_ns, s4.st_mtime_ns) != (at, mt):
        say(f"note: sub-second times not kept exactly ({s4.st_atime_ns}, {s4.st_mtime_ns})")
    check(s4.st_ctime_ns > s3.st_ctime_ns, "utimens did not update ctime")
    read_file(p)
    s5 = os.stat(p)
    # relatime (the default): the atime set above is older than mtime, so a read updates it
    check(s5.st_atime_ns > s4.st_atime_ns and abs(s5.st_atime - time.time()) < 5,
          f"relatime: read left atime {s4.st_atime_ns}, older than mtime {s4.st_mtime_ns}")
    check(s5.st_ctime_ns == s4.st_ctime_ns, "a read changed ctime")
    with open(p, "rb") as f:
        f.read()
    check(os.stat(p).st_atime_ns == s5.st_atime_ns, "relatime: a second read updated atime again")
    now = time.time()
    os.utime(p, None)
    s6 = os.stat(p)
    check(abs(s6.st_mtime - now) < 5 and abs(s6.st_atime - now) < 5, "utimens(NULL) sets now")
    say("times: dir mtime/ctime change on create and unlink inside it")
    sub = os.path.join(d, "tdir")
    os.mkdir(sub)
    d0 = os.stat(sub)
    time.sleep(0.05)
    write_file(os.path.join(sub, "c"), b"c")
    d1 = os.stat(sub)
    check(d1.st_mtime_ns > d0.st_mtime_ns and d1.st_ctime_ns > d0.st_ctime_ns, "create did not update dir times")
    time.sleep(0.05)
    os.unlink(os.path.join(sub, "c"))
    d2 = os.stat(sub)
    check(d2.st_mtime_ns > d1.st_mtime_ns and d2.st_ctime_ns > d1.st_ctime_ns, "unlink did not update dir times")


def t_truncate(d):
    say("truncate: down then up reads zeros beyond the old cut; partial-block tail zeroed")
    p = os.path.join(d, "trunc")
    data = rnd(30, 3 * MIB + 555)
    write_file(p, data)
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, 100000)
    check(os.fstat(fd).st_size == 100000, "size after truncate down")
    check(os.pread(fd, 4 * MIB, 0) == data[:100000], "content after truncate down")
    os.ftruncate(fd, 3 * MIB)
    check(os.fstat(fd).st_size == 3 * MIB, "size after truncate up")
    got = os.pread(fd, 4 * MIB, 0)
    check(got[:100000] == data[:100000], "prefix changed by truncate up")
    check(got[100000:] == bytes(3 * MIB - 100000), "old data visible after truncate down+up (must be zeros)")
    os.close(fd)
    for cut in (4097, 4096, MIB + 1, MIB - 1, 2 * MIB + 4095):
        write_file(p, b"\xff" * (2 * MIB + 8192))
        os.truncate(p, cut)
        os.truncate(p, 2 * MIB + 8192)
        got = read_file(p)
        check(got[:cut] == b"\xff" * cut, f"truncate at {cut}: prefix damaged")
        bad = got[cut:].find(b"\xff")
        check(bad < 0, f"truncate down to {cut} then up: byte {cut + bad} still 0xff, must be 0")
    say("truncate: to 0 and regrow")
    os.truncate(p, 0)
    check(os.stat(p).st_size == 0 and read_file(p) == b"", "truncate to 0")
    os.truncate(p, 5000)
    check(read_file(p) == bytes(5000), "regrow after truncate 0 not zeros")
    say("truncate: space freed by truncate down")
    q = os.path.join(d, "trunc_space")
    write_file(q, rnd(31, 32 * MIB))
    fsync_dir(d)
    f0 = free_bytes(d)
    fd = os.open(q, os.O_RDWR)
    os.ftruncate(fd, MIB)
    os.fsync(fd)
    os.close(fd)
    check(wait_for(lambda: free_bytes(d) >= f0 + 28 * MIB, 10),
          f"truncate 32->1 MiB freed {(free_bytes(d) - f0) // MIB} MiB, expected >= 28")
    os.unlink(q)


def t_sparse(d):
    say("sparse: write 1 byte at 8 GiB (beyond fs size): small st_blocks, holes read as zeros")
    p = os.path.join(d, "sparse")
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, b"S", 8 * GIB)
    os.pwrite(fd, b"head", 0)
    os.pwrite(fd, b"mid", 3 * MIB + 123)
    os.fsync(fd)
    st = os.fstat(fd)
    check(st.st_size == 8 * GIB + 1, f"sparse size {st.st_size}")
    check(st.st_blocks * 512 <= 1 * MIB, f"sparse file uses {st.st_blocks * 512} bytes (st_blocks), expected <= 1 MiB")
    check(os.pread(fd, 4, 0) == b"head", "sparse head")
    check(os.pread(fd, 3 * MIB + 122, 4) == bytes(3 * MIB + 119) + b"mid", "hole before 'mid' not zeros")
    check(os.pread(fd, MIB, 4 * GIB) == bytes(MIB), "hole at 4 GiB not zeros")
    got = os.pread(fd, 2 * MIB, 8 * GIB - 2 * MIB + 1)
    check(got == bytes(2 * MIB - 1) + b"S", "tail of sparse file")
    say("sparse: 1 MiB of data straddling the 4 GiB offset (32-bit overflow), truncate across it")
    big = rnd(45, MIB)
    os.pwrite(fd, big, 4 * GIB - MIB // 2 - 5)
    check(os.pread(fd, MIB + 20, 4 * GIB - MIB // 2 - 15) == bytes(10) + big + bytes(10), "data across 4 GiB")
    check(os.pread(fd, 100, 5) == bytes(100) and os.pread(fd, 4, 0) == b"head", "data at 0 after writing at 4 GiB")
    os.ftruncate(fd, 4 * GIB + 7)
    check(os.fstat(fd).st_size == 4 * GIB + 7, "size after truncate to 4 GiB + 7")
    os.ftruncate(fd, 6 * GIB)
    check(os.pread(fd, MIB, 4 * GIB - MIB // 2 - 5) == big[:MIB // 2 + 12] + bytes(MIB // 2 - 12),
          "truncate to 4 GiB + 7 then up: wrong data around 4 GiB")
    os.close(fd)


def t_mmap(d):
    say("mmap: MAP_SHARED read matches read(); sees later write(); MAP_SHARED write + msync visible to read()")
    p = os.path.join(d, "mm")
    data = rnd(40, 3 * MIB + 123)
    write_file(p, data)
    with open(p, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        check(len(m) == len(data), "mmap length")
        check(m[:] == data, "mmap content differs from file")
        r = random.Random(41)
        for _ in range(200):
            o = r.randrange(len(data))
            n = r.randrange(1, 70000)
            check(m[o:o + n] == data[o:o + n], f"mmap slice at {o}+{n}")
        with open(p, "r+b") as g:
            g.seek(MIB + 5)
            g.write(b"NEWDATA")
        check(m[MIB + 5:MIB + 12] == b"NEWDATA", "mapping does not see a later write()")
        m.close()
    with open(p, "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
        m[2 * MIB - 3:2 * MIB + 3] = b"mapwri"
        m[0:4] = b"MMAP"
        m.flush()
        m.close()
    got = read_file(p)
    want = bytearray(data)
    want[MIB + 5:MIB + 12] = b"NEWDATA"
    want[2 * MIB - 3:2 * MIB + 3] = b"mapwri"
    want[0:4] = b"MMAP"
    check(got == bytes(want), "read() after MAP_SHARED write + msync differs")


def t_statfs(d, raw_bytes):
    say("statfs: sane numbers; free space drops after a 64 MiB write and comes back after delete")
    st = os.statvfs(d)
    check(st.f_bsize > 0 and st.f_frsize > 0, "f_bsize/f_frsize zero")
    check(st.f_blocks > 0, "f_blocks zero")
    check(st.f_bfree <= st.f_blocks and st.f_bavail <= st.f_bfree, f"free > total: {st}")
    check(st.f_namemax >= 255, f"f_namemax {st.f_namemax}")
    total = st.f_blocks * st.f_frsize
    if raw_bytes:
        check(raw_bytes * 0.5 <= total <= raw_bytes,
              f"f_blocks*f_frsize = {total} not within 50%..100% of the members' {raw_bytes} bytes")
    fsync_dir(d)
    f0 = free_bytes(d)
    p = os.path.join(d, "statfs_fill")
    write_file(p, rnd(50, 64 * MIB))
    check(wait_for(lambda: free_bytes(d) <= f0 - 60 * MIB, 8),
          f"free space {f0} -> {free_bytes(d)} after writing 64 MiB")
    f1 = free_bytes(d)
    check(f1 >= f0 - 72 * MIB, f"free space dropped by {(f0 - f1) // MIB} MiB for a 64 MiB file")
    os.unlink(p)
    fsync_dir(d)
    check(wait_for(lambda: free_bytes(d) >= f1 + 60 * MIB, 10),
          f"free space {f1} -> {free_bytes(d)} 10 s after deleting 64 MiB")


def cmd_basic(args):
    """basic DIR [RAW_BYTES]: the POSIX basics on a fresh dir in the mount."""
    d = args[0]
    raw = int(args[1]) if len(args) > 1 else 0
    os.makedirs(d, exist_ok=True)
    for fn in (t_files, t_dirs, t_symlinks, t_hardlinks, t_times, t_truncate, t_sparse, t_mmap):
        sub = os.path.join(d, fn.__name__)
        os.mkdir(sub)
        fn(sub)
    t_unlink_open(d)
    t_statfs(d, raw)


# ---------------------------------------------------------------- misc

def cmd_renameat2(args):
    """renameat2 OLD NEW FLAGS"""
    renameat2(args[0], args[1], int(args[2]))


def cmd_hold_unlinked(args):
    """hold-unlinked FILE SIZE READY: create FILE of SIZE bytes, fsync, unlink, fsync dir,
    touch READY, then sleep holding the fd until killed."""
    p, size, ready = args[0], int(args[1]), args[2]
    write_file(p, rnd(90, size))
    fd = os.open(p, os.O_RDONLY)
    os.unlink(p)
    fsync_dir(os.path.dirname(p))
    open(ready, "w").close()
    while True:
        time.sleep(1)


def cmd_fill_files(args):
    """fill-files DIR MAX: create empty files with 248-byte names (to fill the metadata log
    quickly) until ENOSPC or MAX; print count and errno."""
    d, mx = args[0], int(args[1])
    os.makedirs(d, exist_ok=True)
    i = 0
    err = "none"
    try:
        while i < mx:
            os.close(os.open(os.path.join(d, f"e{i:07d}" + "x" * 240), os.O_WRONLY | os.O_CREAT, 0o644))
            i += 1
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    print(i, err)


COMMANDS = {
    "basic": cmd_basic,
    "rename": cmd_rename,
    "xattr": cmd_xattr,
    "xattr-setup": cmd_xattr_setup,
    "xattr-verify": cmd_xattr_verify,
    "bigdir": cmd_bigdir,
    "bigdir-verify": cmd_bigdir_verify,
    "concurrency": cmd_concurrency,
    "renameat2": cmd_renameat2,
    "hold-unlinked": cmd_hold_unlinked,
    "fill-files": cmd_fill_files,
}
