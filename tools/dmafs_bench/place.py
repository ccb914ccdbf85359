# SPDX-License-Identifier: MIT
"""place - the placement channel: dmafs-bench-place's figures on one file of a dmafs
mount, for each member count."""

import json
import os
import subprocess

from . import rig
from .args import Bad, Opt, gib_opt, matching, number
from .table import Goal, Report, Table, ratio, times

NAME = "place"
SUMMARY = "placement into GPU or host memory against raw reads, pinned copies and pread"
ABOUT = """
For each member count, N members of G GiB in /dev/shm with loop devices, dmafs over them,
and one random file of F GiB copied in (the same bytes for every count). Then
dmafs-bench-place times on that file, each figure the best of 3, in GB/s: the raw
O_DIRECT read of the member ranges that hold it, XXH3 of its 4096-byte blocks on one
core, the pinned host-to-device copy, dmafs placement into GPU memory (and the path it
took), a naive pread from the mount with a device copy per 64 MiB, dmafs placement into
shared host memory, and a cold POSIX pread. Every placed byte is checked. The GPU rows
need a GPU of the --target kind and its driver; without one, or with --target host, they
are left out.

With --verify the same filesystem is mounted again with -o verify_place and measured
again, and the placement rates without and with checksum verification are printed side
by side.
"""
GOAL_CEIL = Goal("GPU placement / min(raw read, pinned host->device copy)", 0.92)
GOAL_HOST = Goal("GPU placement / host placement", 0.95)
GOALS = (GOAL_CEIL, GOAL_HOST)


def member_counts(v):
    try:
        n = [int(x) for x in v.split(",")]
    except ValueError:
        n = []
    if not n or min(n) < 1 or max(n) > 64 or any(not x.isdigit() for x in v.split(",")):
        raise Bad("wants member counts such as 8 or 4,8, each 1 to 64")
    return n


OPTIONS = [
    Opt("--members", "N[,N...]", [4, 8], member_counts, "the member counts to measure, one "
        "filesystem each, in turn (default 4,8)"),
    gib_opt("--member-gb", 3, 0.5, "size of each member in GiB (default 3, at least 0.5)"),
    Opt("--file-gb", "G", 2, number(what="a number of GiB"), "size of the file in GiB "
        "(default 2); at most four fifths of the members' total"),
    Opt("--target", "cuda:N|hip:N|host", "cuda:0", matching(r"(host|cuda:[0-9]+|hip:[0-9]+)",
                                            "host, cuda:N or hip:N"),
        "cuda:N, hip:N (the GPU rows' device) or host (no GPU rows); default cuda:0"),
    Opt("--verify", help="measure again mounted with -o verify_place, and print the cost "
        "of checking checksums during placement"),
    Opt("--dmafs-opts", "OPTS", "", None, "mount options for dmafs (e.g. staging_mb=1024)"),
]


def check(a):
    a.member_mib, a.file_mib = int(a.member_gb * 1024), int(a.file_gb * 1024)
    if a.file_mib < 1:
        rig.fail(f"place: --file-gb must be at least 1 MiB's worth (got '{a.file_gb:g}')")
    for n in a.members:
        if a.file_mib * 10 > n * a.member_mib * 8:
            rig.fail(f"place: a {a.file_gb:g} GiB file does not fit {n} members of "
                     f"{a.member_gb:g} GiB comfortably; use a larger --member-gb")


def measure(bench, path, loops, target):
    """dmafs-bench-place's figures (its messages go to our standard error)."""
    cmd = [bench, "--json", "--file", path, "--members", ",".join(loops), "--target", target]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if r.returncode:
        rig.fail(f"dmafs-bench-place exited {r.returncode} (its message is above)")
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        rig.fail(f"dmafs-bench-place printed no figures: {r.stdout[-400:]!r}")


def section(rep, n, j, how=""):
    """The figures and the ratios of one measurement."""
    gpu = j["gpu"]
    rep.say("", f"{n} members{how}: file {j['bytes'] / 1e9:.2f} GB, best of {j['reps']}"
            + ("" if gpu else f"; no GPU rows ({j['why']})"))
    t = Table(f"measurement, {n} members", "GB/s", "note")
    t.add("raw O_DIRECT read of the members", f"{j['raw']:.2f}")
    t.add("XXH3 of 4096-byte blocks, one core", f"{j['hash']:.2f}")
    if gpu:
        t.add("pinned host->device copy", f"{j['h2d']:.2f}")
        t.add("dmafs placement into GPU memory", f"{j['place']:.2f}", f"path {j['path']}")
        t.add("naive pread from the mount + cudaMemcpy", f"{j['naive']:.2f}")
    t.add("dmafs placement into shared host memory", f"{j['host']:.2f}")
    t.add("POSIX pread from the mount (cold)", f"{j['posix']:.2f}")
    rep.table(t)
    r = Table(f"ratio, {n} members{how}", "value", "goal", "result")
    if gpu:
        name = f"{n} members{how}: "
        r.add("GPU placement / min(raw, h2d)",
              *rep.check(name + "GPU placement / min(raw, h2d)",
                         ratio(j["place"], min(j["raw"], j["h2d"])), GOAL_CEIL))
        r.add("GPU placement / host placement",
              *rep.check(name + "GPU placement / host placement", ratio(j["place"], j["host"]),
                         GOAL_HOST))
        r.add("GPU placement / naive", times(ratio(j["place"], j["naive"])))
    else:
        r.add("host placement / raw", times(ratio(j["host"], j["raw"])))
    r.add("host placement / POSIX read", times(ratio(j["host"], j["posix"])))
    rep.table(r)


def run(a):
    rig.need_root("place", "loop devices, mount, drop_caches")
    rig.need("place", "losetup", "cp")
    rig.need_fuse("place")
    dmafs = rig.program("place", "dmafs", "fs/dmafs")
    mkfs = rig.program("place", "mkfs.dmafs", "tools/mkfs.dmafs")
    bench = rig.program("place", "dmafs-bench-place", "tools/dmafs-bench-place")
    rig.need_shm("place", max(a.members) * a.member_mib + a.file_mib + 256,
                 f"{max(a.members)} members of {a.member_gb:g} GiB and the file")
    out = rig.Out("place")
    mnt = os.path.join(rig.workdir("place", "dmafs"), "dmafs")
    src = f"/dev/shm/dmafs-bench-src.{os.getpid()}"
    rig.on_exit(lambda rc: os.path.exists(src) and os.unlink(src))
    rig.log(f"place: a {a.file_gb:g} GiB random source file")
    rig.write_file(src, a.file_mib, random=True)
    rep = Report(f"dmafs-bench place: members of {a.member_gb:g} GiB (loop over /dev/shm), "
                 f"file {a.file_gb:g} GiB, target {a.target}; GB/s = 10^9 bytes/s")
    for n in a.members:
        rig.log(f"place: {n} members of {a.member_gb:g} GiB in /dev/shm")
        m = rig.Members("dmafs-bench-place", n, a.member_mib)
        rig.run([mkfs, "-q", *m.loops], what="mkfs.dmafs")
        fs = rig.Dmafs(dmafs, m.csv(), mnt, a.dmafs_opts, out("dmafs.log"))
        fs.mount()
        rig.run(["cp", src, f"{mnt}/file"], what="copy into dmafs")
        rig.log(f"place: {n} members: measuring")
        j1 = measure(bench, f"{mnt}/file", m.loops, a.target)
        section(rep, n, j1)
        if a.verify:
            fs.umount()
            fs.mount("verify_place")
            rig.log(f"place: {n} members, mounted with -o verify_place: measuring")
            j2 = measure(bench, f"{mnt}/file", m.loops, a.target)
            section(rep, n, j2, ", -o verify_place")
            t = Table(f"cost of verify_place, {n} members (GB/s)", "without", "with", "ratio")
            for key, label in (("place", "dmafs placement into GPU memory"),
                               ("host", "dmafs placement into shared host memory")):
                if j1[key] and j2[key]:
                    t.add(label, f"{j1[key]:.2f}", f"{j2[key]:.2f}", times(ratio(j2[key], j1[key])))
            rep.table(t)
        fs.umount()
        m.release()
    rep.verdict()
