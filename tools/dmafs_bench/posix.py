# SPDX-License-Identifier: MIT
"""posix - the POSIX path: dmafs against btrfs raid0 over the same loop devices, and
against the members' raw O_DIRECT read."""

import os
import shutil
import subprocess
import time

from . import rig
from .args import Opt, gib_opt, whole
from .table import Goal, Report, Table, median, ratio

NAME = "posix"
SUMMARY = "dd, cp -a and parallel writes, and a cold read back: dmafs against btrfs raid0"
ABOUT = """
Creates N members of G GiB in /dev/shm (every page written) with a loop device over each
and measures, in one run: the raw O_DIRECT read of all members at once (fio, 1 MiB, 32 in
flight on each; left out without fio); then on dmafs and on btrfs (raid0 data, raid1
metadata; one member: single, dup), each made anew every round over the same devices,
the cases: dd bs=1M conv=fsync of one F GiB file; cp -a of a model-shaped directory (8
shards of up to 192 MiB, 200 small files, symlinks) and sync -f; 4 dd conv=fsync writers
of F/4 GiB at once; the big file read back with the page cache dropped. Sources are
random files in /dev/shm; everything written is compared with them afterwards.

Prints per case the best GB/s of the rounds and their median, and the dmafs/btrfs
ratio of the best figures against its goal.
"""
GOAL_FS = Goal("dmafs / btrfs raid0, every case (best GB/s of the rounds)", 1.00)
GOAL_RAW = Goal("dmafs read back / raw O_DIRECT read of the members", 0.70)
GOALS = (GOAL_FS, GOAL_RAW)
OPTIONS = [
    Opt("--members", "N", 4, whole(1, 16), "number of members, 1 to 16 (default 4)"),
    gib_opt("--member-gb", 4, 0.5, "size of each member in GiB (default 4, at least 0.5)"),
    gib_opt("--file-gb", 4, 0.0625, "size of the test file in GiB (default 4, at least "
            "0.0625); at most four fifths of the members' total"),
    Opt("--rounds", "R", 1, whole(1, 99), "repeat every case R times, both filesystems made "
        "anew each round (1 to 99, default 1)"),
    Opt("--dmafs-opts", "OPTS", "", None, "extra mount options for dmafs (e.g. threads=32)"),
    Opt("--keep", help="keep the /dev/shm member files and the output folder (mounts and "
        "loop devices are always removed)"),
    Opt("--out", "DIR", None, None, "write fio job files, raw results, logs and the table to "
        "DIR (kept)"),
]
CASES = ("big", "copy", "par", "read")


def check(a):
    a.member_mib, a.file_mib = int(a.member_gb * 1024), int(a.file_gb * 1024)
    # a fifth of the room for btrfs raid1 metadata, the dmafs log and slack
    if a.file_mib * 10 > a.members * a.member_mib * 8:
        rig.fail(f"posix: a {a.file_gb:g} GiB file does not fit comfortably on {a.members} x "
                 f"{a.member_gb:g} GiB members; use a smaller --file-gb or larger --member-gb")


def fio_gbs(out, job, field):
    """GB/s (10^9 B/s) of a fio job file: field 7 (read) or 48 (write) of terse v3, KiB/s
    over the job's runtime (for writes that includes end_fsync), summed over its jobs."""
    name = os.path.basename(job)[:-4]
    terse = out(f"{name}.terse")
    rig.run(["fio", "--output-format=terse", "--terse-version=3", f"--output={terse}", job],
            what=f"fio {job}")
    bw, n = 0.0, 0
    with open(terse) as f:
        for line in f:
            x = line.split(";")
            if x[0] == "3":
                bw += float(x[field - 1])
                n += 1
    if not n:
        rig.fail(f"could not read fio's result from {terse}")
    return round(bw * 1024 / 1e9, 3)


def make_sources(a, src, srcdir):
    """A random file of the test size, and a model repository: 8 weight shards (192 MiB
    each, less for a small file), 200 small files of 1-64 KiB in two folders, symlinks."""
    rig.write_file(src, a.file_mib, random=True)
    a.shard_mib = max(1, min(a.file_mib // 8, 192))
    os.makedirs(os.path.join(srcdir, "tokenizer"))
    os.makedirs(os.path.join(srcdir, "extra", "cfg"))
    for i in range(8):
        rig.write_file(os.path.join(srcdir, f"model-0000{i}-of-00008.safetensors"),
                       a.shard_mib, random=True)
    for i in range(200):
        d = os.path.join(srcdir, "extra/cfg" if i % 2 else "tokenizer")
        with open(os.path.join(d, f"f{i}.json"), "wb") as f:
            f.write(os.urandom((int.from_bytes(os.urandom(2), "little") % 64 + 1) * 1024))
    os.symlink("model-00000-of-00008.safetensors", os.path.join(srcdir, "model.safetensors"))
    os.symlink("tokenizer/f0.json", os.path.join(srcdir, "tokenizer.json"))
    os.symlink("extra", os.path.join(srcdir, "more"))
    du = rig.run(["du", "-sb", "--apparent-size", srcdir])
    return int(du.split()[0])


def dd(*args):
    return ["dd", *args, "status=none"]


def run_cases(a, tag, mnt, src, srcdir, copy_bytes, results):
    """Every case once on the filesystem at @mnt; results[(tag, case)] gets GB/s."""
    gbs = lambda n, s: round(n / s / 1e9, 3)  # noqa: E731
    size = a.file_mib << 20
    q = a.file_mib // 4
    # an untimed warm-up write: on some virtual machines the first large write after a
    # while is several times slower, whatever the filesystem
    rig.run(dd(f"if={src}", f"of={mnt}/warmup", "bs=1M", "count=256", "conv=fsync"))
    os.unlink(f"{mnt}/warmup")
    for c in ("big", "read", "copy", "par"):
        if c != "read":
            rig.drop_caches()
        if c == "big":  # dd of one file, fsync at the end
            v = gbs(size, rig.timed(dd(f"if={src}", f"of={mnt}/big", "bs=1M", "conv=fsync")))
        elif c == "read":  # the big file back, page cache dropped
            rig.drop_caches()
            v = gbs(size, rig.timed(dd(f"if={mnt}/big", "of=/dev/null", "bs=1M")))
        elif c == "copy":  # cp -a of a model directory, then sync of that filesystem
            t0 = time.monotonic()
            rig.run(["cp", "-a", srcdir, f"{mnt}/model"])
            rig.run(["sync", "-f", mnt])
            v = gbs(copy_bytes, time.monotonic() - t0)
        else:  # 4 writers at once, each a quarter of the file, fsync each
            t0 = time.monotonic()
            ps = [rig.child(subprocess.Popen(dd(f"if={src}", f"of={mnt}/par{k}", "bs=1M",
                                                f"count={q}", f"skip={k * q}", "conv=fsync")))
                  for k in range(4)]
            bad = sum(p.wait() != 0 for p in ps)
            if bad:
                rig.fail(f"{tag}: {bad} of the 4 parallel writers failed")
            v = gbs(4 * q << 20, time.monotonic() - t0)
        rig.log(f"{tag}: {c} {v:.3f} GB/s")
        results.setdefault((tag, c), []).append(v)
    if tag == "dmafs":
        try:
            with open(a.out("dmafs-layout.txt"), "wb") as f:
                f.write(os.getxattr(f"{mnt}/big", "user.dmafs.layout"))
        except OSError:
            pass
    if subprocess.run(["cmp", "-s", src, f"{mnt}/big"]).returncode:
        rig.fail(f"{tag}: the file read back differs from what was written")
    for k in range(4):
        if subprocess.run(["cmp", "-s", "-n", str(q << 20), "-i", f"{q * k << 20}:0", src,
                           f"{mnt}/par{k}"]).returncode:
            rig.fail(f"{tag}: parallel writer {k}'s file differs from its source")
    if subprocess.run(["diff", "-r", "--no-dereference", srcdir, f"{mnt}/model"],
                      stdout=subprocess.DEVNULL).returncode:
        rig.fail(f"{tag}: the copied model directory differs from its source")


def run(a):
    rig.need_root("posix", "it creates loop devices, runs mkfs and mounts")
    have_fio = bool(shutil.which("fio"))
    if not have_fio:
        rig.log("fio not found (Debian package fio): the raw member read is not measured")
    rig.need("posix", "mkfs.btrfs", "losetup", "wipefs", "fusermount3", "cmp", "diff", "du")
    rig.need_fuse("posix")
    dmafs = rig.program("posix", "dmafs", "fs/dmafs")
    mkfs = rig.program("posix", "mkfs.dmafs", "tools/mkfs.dmafs")
    # the members, the random source file and the model directory (8 shards + ~7 MiB)
    rig.need_shm("posix", a.members * a.member_mib + 2 * a.file_mib + 256,
                 f"{a.members} members of {a.member_gb:g} GiB and the sources")
    a.out = rig.Out("posix", a.out, keep=a.keep)
    work = rig.workdir("posix", "dmafs", "btrfs")
    dm_mnt, bt_mnt = os.path.join(work, "dmafs"), os.path.join(work, "btrfs")
    rep0 = rig.reported_kib()

    rig.log(f"posix: {a.members} members of {a.member_gb:g} GiB in /dev/shm")
    m = rig.Members("dmafs-bench", a.members, a.member_mib, zero=True, keep=a.keep)
    rig.log(f"members: {' '.join(m.loops)}")
    fio_v = rig.run(["fio", "--version"]).strip() if have_fio else "none"
    btrfs_v = rig.run(["mkfs.btrfs", "--version"]).splitlines()[0]
    a.out.write("environment.txt", "".join(f"{k}: {v}\n" for k, v in (
        ("date", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        ("kernel", os.uname().release), ("cpus", os.cpu_count()), ("fio", fio_v),
        ("mkfs.btrfs", btrfs_v), ("dmafs", dmafs), ("mkfs.dmafs", mkfs),
        ("dmafs options", a.dmafs_opts or "(none)"),
        ("members", f"{a.members} x {a.member_gb:g} GiB (loop over /dev/shm): {' '.join(m.loops)}"),
        ("file", f"{a.file_gb:g} GiB"))))

    job = a.out("raw-read.fio")
    with open(job, "w") as f:
        f.write("; raw: O_DIRECT sequential read of every member at once, one job each\n"
                "[global]\nrw=read\ndirect=1\nbs=1M\nioengine=libaio\niodepth=32\n"
                "group_reporting=1\n")
        f.write("".join(f"[member{i}]\nfilename={lp}\n" for i, lp in enumerate(m.loops)))
    raw = None
    if have_fio:
        rig.log(f"raw: O_DIRECT read of all {a.members} members (libaio, bs=1M, iodepth 32)")
        raw = fio_gbs(a.out, job, 7)
        rig.log(f"raw: read {raw:.3f} GB/s")

    # random (incompressible) sources in /dev/shm, so that reading them costs little and
    # neither filesystem gets data it could treat specially
    src = f"/dev/shm/dmafs-bench.{os.getpid()}.src"
    srcdir = f"/dev/shm/dmafs-bench.{os.getpid()}.model"
    rig.on_exit(lambda rc: (shutil.rmtree(srcdir, ignore_errors=True),
                            os.path.exists(src) and os.unlink(src)))
    rig.log(f"sources: a {a.file_gb:g} GiB random file and a model-shaped directory in /dev/shm")
    copy_bytes = make_sources(a, src, srcdir)

    if a.members >= 2:
        profile, label = ("-d", "raid0", "-m", "raid1"), "btrfs raid0"
    else:
        profile, label = ("-d", "single", "-m", "dup"), "btrfs single"
    fs = rig.Dmafs(dmafs, m.csv(), dm_mnt, a.dmafs_opts, a.out("dmafs.log"))
    bt = rig.Btrfs(m.loops, bt_mnt, a.out("mkfs.btrfs.log"), nodiscard=True)
    results = {}
    for r in range(1, a.rounds + 1):
        rig.log(f"round {r} of {a.rounds}: dmafs (mkfs.dmafs, mount)")
        rig.run(["wipefs", "-a", "-q", *m.loops])
        open(a.out("mkfs.dmafs.log"), "w").close()
        rig.run([mkfs, *m.loops], what="mkfs.dmafs", log=a.out("mkfs.dmafs.log"))
        fs.mount()
        run_cases(a, "dmafs", dm_mnt, src, srcdir, copy_bytes, results)
        fs.umount()
        rig.log(f"round {r} of {a.rounds}: {label} (mkfs.btrfs -f -K {' '.join(profile)}, mount)")
        rig.run(["wipefs", "-a", "-q", *m.loops])
        open(a.out("mkfs.btrfs.log"), "w").close()
        bt.make("-K", *profile)
        bt.mount()
        run_cases(a, "btrfs", bt_mnt, src, srcdir, copy_bytes, results)
        bt.umount()

    rep = Report(f"dmafs-bench posix: {a.members} members x {a.member_gb:g} GiB (loop over "
                 f"/dev/shm), file {a.file_gb:g} GiB, {a.rounds} round(s)")
    rep.say(f"GB/s = 10^9 bytes/s, best of the rounds and their median; model dir: 8 x "
            f"{a.shard_mib} MiB + 200 small files",
            f"raw O_DIRECT read of all members: {'n/a' if raw is None else f'{raw:.3f}'} GB/s; "
            f"dmafs options: {a.dmafs_opts or '(defaults)'}")
    labels = {"big": f"dd bs=1M conv=fsync, {a.file_gb:g} GiB", "copy": "cp -a model dir + sync",
              "par": "4 writers, dd conv=fsync", "read": "read back, cache dropped"}
    t = Table("case", "dmafs", "median", label, "median", "ratio", "goal", "result")
    tsv = [("raw_read", raw)]
    for c in CASES:
        d, b = max(results[("dmafs", c)]), max(results[("btrfs", c)])
        dm, bm = median(results[("dmafs", c)]), median(results[("btrfs", c)])
        t.add(labels[c], f"{d:.3f}", f"{dm:.3f}", f"{b:.3f}", f"{bm:.3f}",
              *rep.check(labels[c], ratio(d, b), GOAL_FS))
        tsv += [(f"dmafs_{c}", d), (f"dmafs_{c}_median", dm), (f"btrfs_{c}", b),
                (f"btrfs_{c}_median", bm)]
    if raw is not None:
        d = max(results[("dmafs", "read")])
        t.add("dmafs read back / raw read", f"{d:.3f}", "", f"{raw:.3f}", "",
              *rep.check("dmafs read back / raw read", ratio(d, raw), GOAL_RAW))
    rep.table(t)
    note = rig.vm_memory_note(rep0)
    if note:
        rep.blank()
        rep.say(*note)
    rep.verdict()
    a.out.write("results.txt", rep.text())
    a.out.write("results.tsv", "".join(f"{k}\t{'' if v is None else v}\n" for k, v in tsv))
    with open(a.out("cases.txt"), "w") as f:
        for (tag, c), vs in results.items():
            f.write("".join(f"{tag} {c} {v:.3f}\n" for v in vs))
