# SPDX-License-Identifier: MIT
"""host - the whole dmafs-load --target host command against dd of the same file."""

import os
import subprocess
import sys
import time

from . import rig
from .args import Opt, gib_opt, number, whole
from .table import Report, Table, median, ratio, times

NAME = "host"
SUMMARY = "the whole `dmafs-load --target host` command against dd of the file, both cold"
ABOUT = """
One random file of F GiB on a dmafs mount over N members in /dev/shm (every page
written; by default each big enough for the file and a quarter more, at least 1 GiB).
Untimed, the file is loaded once with --verify and read once with dd. Then, in R rounds
with the page cache dropped before each command, the wall time of the whole command
`dmafs-load --target host -q FILE` (it allocates, registers, places and exits) against
`dd if=FILE of=/dev/null bs=1M` through the mount, dd first in odd rounds. After each
load the benchmark waits until the daemon no longer maps the buffer dmafs-load left to
it, and prints how long that took ("freed").

Prints each round, the best and the median, their ratio (below 1: the load command was
faster than dd), and the file size over the median times.
"""
OPTIONS = [
    Opt("--members", "N", 4, whole(1, 16), "number of members, 1 to 16 (default 4)"),
    Opt("--member-gb", "G", None, number(what="a number of GiB"), "size of each member in "
        "GiB (default: the file and a quarter more over the members, at least 1)"),
    gib_opt("--file-gb", 2, 0.0625, "size of the file in GiB (default 2, at least 0.0625)"),
    Opt("--rounds", "R", 5, whole(1), "rounds of both commands (default 5)"),
    Opt("--dmafs-opts", "OPTS", "", None, "mount options for dmafs"),
]


def check(a):
    a.file_mib = int(a.file_gb * 1024)
    if a.member_gb is not None:
        a.member_mib = int(a.member_gb * 1024)
    else:  # room for the file and a quarter more, at least 1 GiB a member
        a.member_mib = max(1024, (a.file_mib * 5 // 4 // a.members + 255) // 256 * 256)
    if a.file_mib * 10 > a.members * a.member_mib * 8:
        rig.fail("host: the file does not fit the members comfortably; use a larger --member-gb")


def freed(pid):
    """Seconds until the daemon maps no dmafs-load buffer (fails after 10 s)."""
    t0 = time.monotonic()
    for _ in range(200):
        try:
            with open(f"/proc/{pid}/maps") as f:
                if "memfd:dmafs-host" not in f.read():
                    return time.monotonic() - t0
        except OSError:
            return time.monotonic() - t0
        time.sleep(0.05)
    rig.fail("the daemon still maps dmafs-load's buffer 10 s after it exited")


def run(a):
    rep0 = rig.reported_kib()
    rig.need_root("host", "loop devices, mount, drop_caches")
    rig.need("host", "losetup", "dd")
    rig.need_fuse("host")
    dmafs = rig.program("host", "dmafs", "fs/dmafs")
    mkfs = rig.program("host", "mkfs.dmafs", "tools/mkfs.dmafs")
    load, env = rig.program("host", "dmafs-load", "tools/dmafs-load"), None
    b = rig.builddir()
    # Time the program itself: the build tree's tools/dmafs-load is a libtool wrapper
    # script, which adds ~0.1 s to every run.
    if b and os.access(os.path.join(b, "tools/.libs/dmafs-load"), os.X_OK):
        load = os.path.join(b, "tools/.libs/dmafs-load")
        lib = os.path.join(b, "lib/.libs")
        env = dict(os.environ, LD_LIBRARY_PATH=lib + (":" + os.environ["LD_LIBRARY_PATH"]
                                                       if os.environ.get("LD_LIBRARY_PATH") else ""))
    rig.need_shm("host", a.members * a.member_mib + 256,
                 f"{a.members} members of {a.member_mib} MiB")
    out = rig.Out("host")
    mnt = os.path.join(rig.workdir("host", "dmafs"), "dmafs")
    rig.log(f"host: {a.members} members of {a.member_mib} MiB in /dev/shm")
    # every page written: no first touch of the backing memory inside a timed run
    m = rig.Members("dmafs-bench-host", a.members, a.member_mib, zero=True)
    rig.run([mkfs, "-q", *m.loops], what="mkfs.dmafs")
    fs = rig.Dmafs(dmafs, m.csv(), mnt, a.dmafs_opts, out("dmafs.log"))
    fs.mount()
    f = f"{mnt}/file"
    rig.log(f"host: a {a.file_mib} MiB random file")
    rig.write_file(f, a.file_mib, random=True)
    os.sync()
    # untimed: a placement checked byte for byte, and one read of each kind, so that no
    # first use of anything lands in round 1
    rig.log("host: dmafs-load --target host --verify (untimed)")
    if subprocess.run([load, "--target", "host", "--verify", "-q", f], stdout=sys.stderr,
                      env=env).returncode:
        rig.fail("dmafs-load --verify failed")
    rig.run(["dd", f"if={f}", "of=/dev/null", "bs=1M", "status=none"])
    freed(fs.pid)
    rows, dd_ts, ld_ts = [], [], []
    for r in range(1, a.rounds + 1):
        for first in (r % 2, 1 - r % 2):  # dd first in odd rounds
            rig.drop_caches()
            if first:
                dd_t = rig.timed(["dd", f"if={f}", "of=/dev/null", "bs=1M", "status=none"])
            else:
                ld_t = rig.timed([load, "--target", "host", "-q", f], "dmafs-load --target host",
                                 env=env)
                fr = freed(fs.pid)
        dd_t, ld_t = round(dd_t, 3), round(ld_t, 3)
        dd_ts.append(dd_t)
        ld_ts.append(ld_t)
        rows.append((str(r), f"{dd_t:.3f}", f"{ld_t:.3f}", times(ratio(ld_t, dd_t)), f"{fr:.2f}"))
        rig.log(f"host: round {r}: dd {dd_t:.3f} s, dmafs-load {ld_t:.3f} s")

    rep = Report(f"dmafs-bench host: {a.members} members x {a.member_mib} MiB (loop over "
                 f"/dev/shm), file {a.file_mib} MiB, {a.rounds} rounds")
    with open("/proc/meminfo") as f:
        huge = next((ln.split()[1] for ln in f if ln.startswith("HugePages_Free")), "?")
    try:
        with open("/sys/kernel/mm/transparent_hugepage/shmem_enabled") as f:
            thp = f.read()
        thp = thp[thp.index("[") + 1:thp.index("]")]
    except (OSError, ValueError):
        thp = "n/a"
    rep.say(f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {huge} free 2 MiB pages, "
            f"shmem THP: {thp}",
            "seconds of wall time of each whole command, page cache dropped before each;",
            "\"freed\": seconds after dmafs-load exited until the daemon had unmapped its buffer",
            "(waited for before the next command)")
    t = Table("round", "dd bs=1M", "dmafs-load", "load/dd", "freed")
    for row in rows:
        t.add(*row)
    for what, fn in (("best", min), ("median", median)):
        d, ld = fn(dd_ts), fn(ld_ts)
        t.add(what, f"{d:.3f}", f"{ld:.3f}", times(ratio(ld, d)))
    rep.table(t)
    gbs = lambda s: a.file_mib * 1048576 / s / 1e9  # noqa: E731
    rep.say("", f"file size / median time: dd {gbs(median(dd_ts)):.2f} GB/s, dmafs-load "
            f"{gbs(median(ld_ts)):.2f} GB/s")
    note = rig.vm_memory_note(rep0)
    if note:
        rep.say("", *note)
    rep.verdict()
