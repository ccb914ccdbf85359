#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_posix_xattr.py - extended attributes on a mounted dmafs: the user.*, trusted.* and
# security.* namespaces, user.dmafs.layout, and xattrs set before a remount and checked
# after it: the commands xattr, xattr-setup and xattr-verify of t_posix.py's COMMANDS.

import errno
import os

from t_check import GIB, MIB, check, expect_errno, rnd, say, write_file
from t_ondisk import get_layout, validate_layout


def cmd_xattr(args):
    """xattr DIR: user.* xattr semantics, other namespaces, user.dmafs.layout."""
    d = args[0]
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "xf")
    write_file(p, b"data")
    say("user.* set/get/list/replace/remove with XATTR_CREATE/REPLACE errnos")
    os.setxattr(p, "user.a", b"value-a")
    check(os.getxattr(p, "user.a") == b"value-a", "getxattr user.a")
    os.setxattr(p, "user.a", b"v2", os.XATTR_REPLACE)
    check(os.getxattr(p, "user.a") == b"v2", "XATTR_REPLACE")
    expect_errno(errno.EEXIST, os.setxattr, p, "user.a", b"x", os.XATTR_CREATE, what="XATTR_CREATE on existing")
    expect_errno(errno.ENODATA, os.setxattr, p, "user.none", b"x", os.XATTR_REPLACE, what="XATTR_REPLACE on missing")
    os.setxattr(p, "user.empty", b"")
    check(os.getxattr(p, "user.empty") == b"", "empty value")
    binv = bytes(range(256)) * 16
    os.setxattr(p, "user.bin", binv)
    check(os.getxattr(p, "user.bin") == binv, "4 KiB binary value")
    for i in range(50):
        os.setxattr(p, f"user.many{i:02d}", f"v{i}".encode())
    names = set(os.listxattr(p))
    want = {"user.a", "user.empty", "user.bin"} | {f"user.many{i:02d}" for i in range(50)}
    check(want <= names, f"listxattr lacks {want - names}")
    check("user.dmafs.layout" not in names, "listxattr lists user.dmafs.layout")
    extra = {n for n in names - want if n.startswith("user.")}
    check(not extra, f"listxattr has unexpected names {extra}")
    os.removexattr(p, "user.many07")
    expect_errno(errno.ENODATA, os.getxattr, p, "user.many07", what="getxattr after remove")
    expect_errno(errno.ENODATA, os.removexattr, p, "user.many07", what="remove missing")
    check("user.many07" not in os.listxattr(p), "removed name still listed")
    say("user.* on a dir; xattrs shared by hard links and kept by rename")
    os.setxattr(d, "user.dirattr", b"dv")
    check(os.getxattr(d, "user.dirattr") == b"dv", "dir xattr")
    os.link(p, p + ".link")
    check(os.getxattr(p + ".link", "user.a") == b"v2", "xattr via hard link")
    os.rename(p + ".link", p + ".renamed")
    check(os.getxattr(p + ".renamed", "user.bin") == binv, "xattr after rename")
    say("trusted.* and security.* kept for a root caller (also on symlinks); other namespaces EOPNOTSUPP")
    os.setxattr(p, "trusted.x", b"t1")
    os.setxattr(p, "security.x", b"s1")
    check(os.getxattr(p, "trusted.x") == b"t1", "getxattr trusted.x")
    check(os.getxattr(p, "security.x") == b"s1", "getxattr security.x")
    names = set(os.listxattr(p))
    check({"trusted.x", "security.x"} <= names, f"listxattr as root lacks trusted.x/security.x: {names}")
    os.removexattr(p, "trusted.x")
    expect_errno(errno.ENODATA, os.getxattr, p, "trusted.x", what="get removed trusted.x")
    sl = os.path.join(d, "xsym")
    os.symlink("xf", sl)
    os.setxattr(sl, "trusted.onlink", b"l", follow_symlinks=False)
    check(os.getxattr(sl, "trusted.onlink", follow_symlinks=False) == b"l", "trusted.* on a symlink")
    expect_errno(errno.EPERM, lambda: os.setxattr(sl, "user.onlink", b"l", follow_symlinks=False),
                 what="user.* on a symlink")
    expect_errno(errno.ENODATA, os.getxattr, p, "trusted.none", what="get missing trusted.none")
    expect_errno(errno.EOPNOTSUPP, os.setxattr, p, "system.x", b"1", what="set system.x")
    expect_errno(errno.EOPNOTSUPP, os.getxattr, p, "system.x", what="get system.x")
    expect_errno(errno.EOPNOTSUPP, os.setxattr, p, "other.x", b"1", what="set other.x")
    say("security.selinux: EOPNOTSUPP where a file has none (ls -l stops asking); kept where set")
    expect_errno(errno.EOPNOTSUPP, os.getxattr, p, "security.selinux", what="get an absent label")
    expect_errno(errno.EOPNOTSUPP, os.getxattr, d, "security.selinux", what="get a folder's absent label")
    os.setxattr(p, "security.selinux", b"system_u:object_r:dmafs_test_t:s0\0")
    check(os.getxattr(p, "security.selinux") == b"system_u:object_r:dmafs_test_t:s0\0",
          "a stored label is returned")
    check("security.selinux" in os.listxattr(p), "a stored label is listed")
    os.removexattr(p, "security.selinux")
    expect_errno(errno.EOPNOTSUPP, os.getxattr, p, "security.selinux", what="get a removed label")
    check("security.selinux" not in os.listxattr(p), "a removed label is still listed")
    expect_errno(errno.ENODATA, os.getxattr, p, "security.other", what="get another absent security.*")

    say("user.dmafs.layout: EPERM on set/remove, format on empty/small/multi-stripe/sparse files")
    expect_errno(errno.EPERM, os.setxattr, p, "user.dmafs.layout", b"x", what="set user.dmafs.layout")
    expect_errno(errno.EPERM, os.removexattr, p, "user.dmafs.layout", what="remove user.dmafs.layout")
    e = os.path.join(d, "empty")
    write_file(e, b"")
    hdr, ext = get_layout(e)
    check(hdr["size"] == 0 and hdr["extents"] == 0 and ext == [], f"layout of empty file {hdr} {ext}")
    for name, size in (("small", 5000), ("multi", 3 * MIB + 17), ("odd", MIB + 4096)):
        q = os.path.join(d, name)
        write_file(q, rnd(70, size))
        hdr, ext = get_layout(q)
        validate_layout(q, hdr, ext, size, dense=True)
        if size > hdr["stripe_unit"]:
            check(len({m for (_, _, m, _) in ext}) >= min(hdr["members"], 2),
                  f"{q}: {size} bytes on one member only although members={hdr['members']}")
        say(f"  {name}: {hdr['extents']} extents, stripe_unit {hdr['stripe_unit']}, members {hdr['members']}")
    s = os.path.join(d, "holey")
    fd = os.open(s, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"a" * 100, 0)
    os.pwrite(fd, b"b" * 100, 5 * MIB + 10)
    os.close(fd)
    hdr, ext = get_layout(s)
    covered = validate_layout(s, hdr, ext, 5 * MIB + 110, dense=False)
    check(covered <= 4 * 65536, f"sparse file maps {covered} bytes; its holes must have no extent")
    check(any(fo == 0 for (fo, _, _, _) in ext), "no extent for offset 0 of sparse file")
    check(any(fo <= 5 * MIB + 10 < fo + ln for (fo, ln, _, _) in ext), "no extent for data at 5 MiB")
    say("user.dmafs.layout of a file with data beyond 4 GiB")
    s2 = os.path.join(d, "far")
    fd = os.open(s2, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, rnd(71, 3 * MIB), 5 * GIB - MIB)
    os.close(fd)
    hdr, ext = get_layout(s2)
    covered = validate_layout(s2, hdr, ext, 5 * GIB + 2 * MIB, dense=False)
    check(covered == 3 * MIB and min(fo for (fo, _, _, _) in ext) == 5 * GIB - MIB,
          f"layout of 3 MiB at 5 GiB - 1 MiB: covers {covered} bytes from {min(fo for (fo, _, _, _) in ext)}")
    dl = os.path.join(d, "lnk")
    os.symlink("xf", dl)
    check(os.getxattr(dl, "user.dmafs.layout") == os.getxattr(p, "user.dmafs.layout"),
          "layout through a symlink follows it")


def cmd_xattr_setup(args):
    """xattr-setup DIR: xattrs to be checked after remount by xattr-verify."""
    d = args[0]
    os.makedirs(d, exist_ok=True)
    for i in range(20):
        q = os.path.join(d, f"p{i}")
        write_file(q, b"p")
        for j in range(i % 5 + 1):
            os.setxattr(q, f"user.k{j}", rnd(i * 100 + j, 10 + 200 * j))
    os.removexattr(os.path.join(d, "p19"), "user.k0")
    os.setxattr(d, "user.onthedir", b"yes")
    say("set xattrs on 20 files + dir for the remount check")


def cmd_xattr_verify(args):
    d = args[0]
    say("user.* xattrs survived the remount")
    for i in range(20):
        q = os.path.join(d, f"p{i}")
        want = {f"user.k{j}" for j in range(i % 5 + 1)} - ({"user.k0"} if i == 19 else set())
        got = {n for n in os.listxattr(q) if n.startswith("user.")}
        check(got == want, f"{q}: xattr names {sorted(got)} != {sorted(want)} after remount")
        for n in want:
            j = int(n[6:])
            check(os.getxattr(q, n) == rnd(i * 100 + j, 10 + 200 * j), f"{q}: {n} value after remount")
    check(os.getxattr(d, "user.onthedir") == b"yes", "dir xattr after remount")
