# SPDX-License-Identifier: MIT
"""mirror - the mirror data profile against the single one on the same members: writes,
reads and placements; a member lost in the middle of a placement; its rebuild."""

import json
import os
import shutil
import subprocess
import threading
import time

from . import rig
from .args import Opt, choice, gib_opt, number, whole
from .posix import fio_gbs
from .table import Goal, Report, Table, median, ratio

NAME = "mirror"
SUMMARY = "mkfs.dmafs --data mirror against single: writes, reads, placements, a lost member, its rebuild"
ABOUT = """
Creates N members of G GiB in /dev/shm (every page written) with a loop device over each,
and a random source file of F GiB. Measures the raw O_DIRECT write of one member (fio,
1 MiB, 32 in flight). Then in R rounds, dmafs made anew each time over the same devices,
single and mirror one after the other: dd bs=1M conv=fsync of the file onto the mount;
the file read back with dd, page cache dropped; and `dmafs-load --target T` of it, cold
(T: cuda:0 when a GPU is there, else host; --target chooses).

After the last round, on the mirror: the file is placed again (with --verify, which also
compares every placed byte with a POSIX read) and D seconds in (by default, halfway
through the placement as the last round measured it), member 1 is lost (its
backing file cut to nothing and the loop device's size set to match: every read and
write of it fails, as a pulled drive's would). The placement must finish, the file must
then read back equal to the source, and the mount must have marked member 1 failed.
Then member 1 is rebuilt while mounted onto a spare member (dmafs-replace --member 1
MOUNTPOINT SPARE), and, unmounted, once more onto its own loop device, its backing file
written anew (dmafs-replace MEMBERS...); after each the file must read back exactly.

Prints the best GB/s of the rounds and their median per case and profile, each mirror /
single ratio against its goal, the placement with the lost member against the healthy
one, and each rebuild's rate against the raw write of a member.
"""
GOAL_WRITE = Goal("mirror / single: dd conv=fsync write (two copies written)", 0.45)
GOAL_READ = Goal("mirror / single: POSIX read back, cold", 0.95)
GOAL_PLACE = Goal("mirror / single: dmafs-load placement, cold", 0.95)
GOAL_REBUILD = Goal("rebuild (dmafs-replace) / raw O_DIRECT write of one member", 0.50)
GOALS = (GOAL_WRITE, GOAL_READ, GOAL_PLACE, GOAL_REBUILD)
OPTIONS = [
    Opt("--members", "N", 4, whole(2, 16), "number of members, 2 to 16 (default 4)"),
    gib_opt("--member-gb", 4, 0.5, "size of each member in GiB (default 4, at least 0.5)"),
    gib_opt("--file-gb", 2, 0.0625, "size of the file in GiB (default 2); at most a third "
            "of the members' total (a mirror holds half)"),
    Opt("--rounds", "R", 2, whole(1, 99), "rounds of both profiles (default 2)"),
    Opt("--target", "T", None, choice("host", "cuda:0"), "where placements go: host or "
        "cuda:0 (default: cuda:0 when a GPU is there)"),
    Opt("--lose-after", "D", None, number(0.0, "a number of seconds"), "seconds into the "
        "placement command when member 1 is lost (default: its start-up and half the "
        "placement, as measured in the last mirror round)"),
    Opt("--dmafs-opts", "OPTS", "", None, "extra mount options for dmafs"),
    Opt("--out", "DIR", None, None, "write the logs and the table to DIR (kept)"),
]
CASES = ("write", "read", "place")


def check(a):
    a.member_mib, a.file_mib = int(a.member_gb * 1024), int(a.file_gb * 1024)
    if a.file_mib * 3 > a.members * a.member_mib:
        rig.fail(f"mirror: a {a.file_gb:g} GiB file does not fit a mirror of {a.members} x "
                 f"{a.member_gb:g} GiB comfortably; use a smaller --file-gb or larger --member-gb")


def load_gbs(load, env, target, path, out, verify=False):
    """dmafs-load's placement: (GB/s of its own clock, wall seconds, the JSON)."""
    cmd = [load, "--target", target, "--json"] + (["--verify"] if verify else []) + [path]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    with open(out, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    if p.returncode:
        rig.fail(f"dmafs-load {path} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    d = json.loads(p.stdout)
    return d["total"]["gbps"], wall, d


def lose(member_file, loop):
    """A pulled drive: the backing file cut to nothing, the loop device's size with it."""
    os.truncate(member_file, 0)
    rig.run(["losetup", "-c", loop])


def run(a):
    rig.need_root("mirror", "it creates loop devices, runs mkfs and mounts")
    rig.need("mirror", "losetup", "wipefs", "cmp", "dd", "fio")
    rig.need_fuse("mirror")
    dmafs = rig.program("mirror", "dmafs", "fs/dmafs")
    mkfs = rig.program("mirror", "mkfs.dmafs", "tools/mkfs.dmafs")
    load = rig.program("mirror", "dmafs-load", "tools/dmafs-load")
    replace = rig.program("mirror", "dmafs-replace", "tools/dmafs-replace")
    env = rig.child_env()
    if a.target is None:
        a.target = "cuda:0" if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl") else "host"
    rig.need_shm("mirror", (a.members + 1) * a.member_mib + a.file_mib + 256,
                 f"{a.members} members of {a.member_gb:g} GiB and the source")
    a.out = rig.Out("mirror", a.out)
    work = rig.workdir("mirror", "mnt")
    mnt = os.path.join(work, "mnt")
    m = rig.Members("dmafs-bench", a.members, a.member_mib, zero=True)
    spare = rig.Members("dmafs-bench-spare", 1, a.member_mib, zero=True)
    rig.log(f"mirror: {a.members} members of {a.member_gb:g} GiB: {' '.join(m.loops)}; target {a.target}")
    job = a.out("raw-write.fio")
    with open(job, "w") as f:
        f.write("; raw: O_DIRECT sequential write of member 1\n[global]\nrw=write\ndirect=1\n"
                f"bs=1M\nioengine=io_uring\niodepth=32\nsize={a.member_mib}M\n"
                f"[member1]\nfilename={m.loops[1]}\n")
    raw_w = fio_gbs(a.out, job, 48)
    rig.log(f"raw: O_DIRECT write of member 1: {raw_w:.3f} GB/s")
    src = f"/dev/shm/dmafs-bench.{os.getpid()}.src"
    rig.on_exit(lambda rc: os.path.exists(src) and os.unlink(src))
    rig.write_file(src, a.file_mib, random=True)
    fs = rig.Dmafs(dmafs, m.csv(), mnt, a.dmafs_opts, a.out("dmafs.log"))
    size = a.file_mib << 20
    res = {}
    for r in range(1, a.rounds + 1):
        for prof in ("single", "mirror"):
            rig.log(f"round {r} of {a.rounds}: {prof}")
            rig.run(["wipefs", "-a", "-q", *m.loops])
            rig.run([mkfs, "-q", "-f", "--data", prof, *m.loops], what="mkfs.dmafs")
            fs.mount()
            rig.drop_caches()
            t = rig.timed(["dd", f"if={src}", f"of={mnt}/f", "bs=1M", "conv=fsync", "status=none"])
            res.setdefault((prof, "write"), []).append(size / t / 1e9)
            rig.drop_caches()
            t = rig.timed(["dd", f"if={mnt}/f", "of=/dev/null", "bs=1M", "status=none"])
            res.setdefault((prof, "read"), []).append(size / t / 1e9)
            rig.drop_caches()
            g, wall, d = load_gbs(load, env, a.target, f"{mnt}/f", a.out("load.log"))
            res.setdefault((prof, "place"), []).append(g)
            # the command's start-up (registration) and half its placement
            half = wall - d["total"]["seconds"] / 2

            rig.log(f"{prof}: write {res[(prof, 'write')][-1]:.2f}, read {res[(prof, 'read')][-1]:.2f}, "
                    f"place {g:.2f} GB/s")
            if prof == "single" or r < a.rounds:
                fs.umount()

    # the mirror of the last round is mounted: lose member 1 in the middle of a placement
    if a.lose_after is None:
        a.lose_after = round(half, 3)
    rig.log(f"mirror: placement with --verify, member 1 lost {a.lose_after:g} s in")
    rig.drop_caches()
    timer = threading.Timer(a.lose_after, lose, (m.imgs[1], m.loops[1]))
    timer.start()
    g_lost, wall_lost, d = load_gbs(load, env, a.target, f"{mnt}/f", a.out("load.log"), verify=True)
    timer.join()
    attr = os.getxattr(mnt, "user.dmafs.members").decode()
    state1 = next((w.split("=", 1)[1] for line in attr.splitlines() if line.startswith("member=1 ")
                   for w in line.split() if w.startswith("state=")), "?")
    rig.drop_caches()
    exact = subprocess.run(["cmp", "-s", src, f"{mnt}/f"]).returncode == 0
    rig.log(f"lost member: placement {g_lost:.2f} GB/s, verify {d['verify']}, member 1 {state1}, "
            f"read back {'equal' if exact else 'DIFFERENT'}")

    def rebuild(cmd, log):
        """dmafs-replace @cmd: (bytes copied, GB/s over its wall time)."""
        t0 = time.monotonic()
        outp = rig.run(cmd, what="dmafs-replace")
        t = time.monotonic() - t0
        a.out.write(log, outp)
        copied = 0
        for line in outp.splitlines():  # "...: 2.60 GiB to copy ..." names the size
            if "to copy" in line:
                w = line.split(":")[-1].split()
                copied = float(w[0]) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}.get(w[1], 1)
        return copied, (copied / t / 1e9 if copied else None)

    rig.log("rebuild of member 1 while mounted, onto a spare loop device")
    copied, rb_on = rebuild([replace, "-f", "--member", "1", mnt, spare.loops[0]], "replace-mounted.log")
    attr = os.getxattr(mnt, "user.dmafs.members").decode()
    state_on = next((w.split("=", 1)[1] for line in attr.splitlines() if line.startswith("member=1 ")
                     for w in line.split() if w.startswith("state=")), "?")
    rig.drop_caches()
    exact_on = state_on == "ok" and subprocess.run(["cmp", "-s", src, f"{mnt}/f"]).returncode == 0
    fs.umount()

    rig.log("rebuild of member 1 unmounted, on its loop device, its file written anew")
    rig.write_file(m.imgs[1], a.member_mib, zero=True)
    rig.run(["losetup", "-c", m.loops[1]])
    others = [lp for i, lp in enumerate(m.loops) if i != 1]
    _, rb = rebuild([replace, "-f", *others, m.loops[1]], "replace.log")
    fs.mount()
    rig.drop_caches()
    exact_after = exact_on and subprocess.run(["cmp", "-s", src, f"{mnt}/f"]).returncode == 0
    fs.umount()

    rep = Report(f"dmafs-bench mirror: {a.members} members x {a.member_gb:g} GiB (loop over "
                 f"/dev/shm), file {a.file_gb:g} GiB, {a.rounds} round(s), target {a.target}")
    rep.say("GB/s = 10^9 bytes/s, best of the rounds and their median; each profile made anew "
            "every round over the same devices",
            f"raw O_DIRECT write of member 1: {raw_w:.3f} GB/s; dmafs options: "
            f"{a.dmafs_opts or '(defaults)'}")
    t = Table("case", "single", "median", "mirror", "median", "ratio", "goal", "result")
    labels = {"write": "dd conv=fsync write", "read": "read back, cold", "place": f"dmafs-load --target {a.target}"}
    goals = {"write": GOAL_WRITE, "read": GOAL_READ, "place": GOAL_PLACE}
    for c in CASES:
        s, mm = max(res[("single", c)]), max(res[("mirror", c)])
        t.add(labels[c], f"{s:.3f}", f"{median(res[('single', c)]):.3f}", f"{mm:.3f}",
              f"{median(res[('mirror', c)]):.3f}", *rep.check(labels[c], ratio(mm, s), goals[c]))
    rep.table(t)
    rep.blank()
    t = Table("mirror, member 1 lost", "GB/s", "healthy", "ratio", "note")
    t.add(f"placement, lost {a.lose_after:g} s in", f"{g_lost:.3f}", f"{max(res[('mirror', 'place')]):.3f}",
          f"{ratio(g_lost, max(res[('mirror', 'place')])):.2f}x",
          f"verify {d['verify']}; member 1 {state1}; read back {'equal' if exact else 'DIFFERENT'}")
    rep.table(t)
    rep.blank()
    t = Table(f"rebuild, {copied / 2**30:.2f} GiB", "GB/s", "raw write", "ratio", "goal", "result")
    t.add("dmafs-replace MOUNTPOINT, mounted", "n/a" if rb_on is None else f"{rb_on:.3f}",
          f"{raw_w:.3f}", *rep.check("rebuild while mounted / raw write",
                                     ratio(rb_on, raw_w) if rb_on else None, GOAL_REBUILD))
    t.add("dmafs-replace MEMBERS, unmounted", "n/a" if rb is None else f"{rb:.3f}",
          f"{raw_w:.3f}", *rep.check("rebuild unmounted / raw write",
                                     ratio(rb, raw_w) if rb else None, GOAL_REBUILD))
    rep.table(t)
    rep.say(f"after each rebuild the file reads back {'equal to the source' if exact_after else 'DIFFERENT'}")
    if not (exact and exact_after and d["verify"] == "ok"):
        rig.fail("mirror: a file read back differs from its source (see above)")
    rep.verdict()
    a.out.write("results.txt", rep.text())
