# SPDX-License-Identifier: MIT
"""dataset - a training set's file patterns on dmafs against btrfs raid0; with --scale,
the daemon's memory per file, the mount time and ls -lR as the file count grows."""

import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time

from . import rig
from .args import Bad, Opt, number, whole
from .table import Goal, Report, Table

NAME = "dataset"
SUMMARY = "a training set's patterns (many small files, large-file reads) against btrfs raid0"
USAGE2 = ("--scale", "--members", "--member-gb", "--file-kb", "--threads", "--dmafs-opts",
          "--mkfs-opts", "--out")
ABOUT = """
2N members of G GiB in /dev/shm (default 8 of 4 GiB, twice): the raw read rate of the first
N is measured with fio (O_DIRECT, 1 MiB, one job each) after zeros are written to every
page of them (tmpfs reads pages it only allocated without copying); dmafs goes over them and btrfs
(raid0 data, raid1 metadata, nodiscard) over the other N; each gets the files the
large-file rows read (one of M MiB, eight of M/8). Then R rounds, the two in turn (the order
alternating), of these rows, the page cache dropped before each: create (N files of K KiB
in D folders by T processes, then sync), ls (ls -lR), find (find -newer), du (du -s), read
and read4 (every file whole by T and by 4T processes), dataloader (a torch DataLoader, 8
workers, batches of 256; left out without torch in PYTHON), rand4k and rand4kdio (random 4
KiB reads, through the cache and O_DIRECT, T fio jobs for S seconds), rand128k (128 KiB,
O_DIRECT), rand1m (1 MiB), readers (8 fio jobs, a file of M/8 MiB each, start to end),
reader (one job, the M MiB file), rm (rm -rf, then sync).

Prints per row the median of each filesystem and their ratio (rates: dmafs over btrfs;
times: btrfs over dmafs; above 1 is dmafs faster), then the members' raw rate with the
readers row of dmafs against it.

--scale N1,N2,...: dmafs alone; for each count in turn (growing) the files missing to
reach it are made (K KiB, default 4, 100 per folder), the filesystem is unmounted and
mounted again (timed), the caches dropped and ls -lR of everything timed; prints the
rate of creation, the daemon's resident memory and that less the empty filesystem's
daemon's per file, the mount time and the ls -lR time.
"""
GOAL_ROWS = Goal("dmafs / btrfs raid0, every row (rates; times: btrfs / dmafs)", 1.00)
GOAL_RAW = Goal("readers row of dmafs / the members' raw rate", 0.60)
GOALS = (GOAL_ROWS, GOAL_RAW)

# (key, label, unit, higher is better)
ROWS = [
    ("create", "create {files} files of {kb} KiB, {t} procs", "files/s", True),
    ("ls", "ls -lR, cold", "s", False),
    ("find", "find -newer, cold", "s", False),
    ("du", "du -s, cold", "s", False),
    ("read", "read every file whole, {t} procs", "files/s", True),
    ("read4", "read every file whole, {t4} procs", "files/s", True),
    ("dataloader", "DataLoader, 8 workers, batch 256", "samples/s", True),
    ("rand4k", "random 4 KiB reads, {t} jobs", "k IOPS", True),
    ("rand4kdio", "random 4 KiB reads, O_DIRECT, {t} jobs", "k IOPS", True),
    ("rand128k", "random 128 KiB reads, O_DIRECT, {t} jobs", "GB/s", True),
    ("rand1m", "random 1 MiB reads, {t} jobs", "GB/s", True),
    ("readers", "8 readers, a {mb8} MiB file each", "GB/s", True),
    ("reader", "1 reader, a {mb} MiB file", "GB/s", True),
    ("rm", "rm -rf of the set", "files/s", True),
]
FIO_ROWS = {"rand4k", "rand4kdio", "rand128k", "rand1m", "readers", "reader"}


def skip_rows(v):
    keys = set(v.split(",")) - {""}
    unknown = keys - {r[0] for r in ROWS}
    if unknown:
        raise Bad(f"has unknown row(s) {', '.join(sorted(unknown))}; rows: "
                  + ", ".join(r[0] for r in ROWS))
    return keys


def scale_steps(v):
    try:
        steps = [int(x) for x in v.split(",")]
    except ValueError:
        raise Bad("wants file counts separated by commas, such as 200000,1000000") from None
    if steps != sorted(steps) or steps[0] < 1:
        raise Bad("wants growing file counts of at least 1")
    return steps


OPTIONS = [
    Opt("--members", "N", 8, whole(2, 16), "members for dmafs, and as many others for btrfs "
        "raid0: 2 to 16 (default 8)"),
    Opt("--member-gb", "G", 4, number(0.5, "a number of GiB"), "size of each member in GiB "
        "(default 4, at least 0.5)"),
    Opt("--files", "N", 40000, whole(1), "files in the set (default 40000)"),
    Opt("--file-kb", "K", None, whole(1), "size of each file in KiB (default 48; 4 with --scale)"),
    Opt("--dirs", "D", None, whole(1), "folders the set is spread over (default one per 100 "
        "files)"),
    Opt("--threads", "T", 16, whole(1), "processes and fio jobs (default 16)"),
    Opt("--big-mb", "M", 4096, whole(8), "size of the large file in MiB, at least 8 (default "
        "4096)"),
    Opt("--seconds", "S", 5, whole(1), "length of each random-read row (default 5)"),
    Opt("--rounds", "R", 3, whole(1), "rounds (default 3)"),
    Opt("--skip", "ROWS", set(), skip_rows, "rows left out, by the names above, separated by "
        "commas"),
    Opt("--dmafs-opts", "OPTS", "", None, "mount options for dmafs"),
    Opt("--mkfs-opts", "OPTS", "", None, "options for mkfs.dmafs, split at spaces (such as "
        "'--log-size 256M', which spares a large --scale the log's moves)"),
    Opt("--scale", "N1,N2,...", None, scale_steps, "measure growth with the file count "
        "instead (see above)"),
    Opt("--out", "DIR", None, None, "write fio's output and the daemon's log to DIR (kept)"),
]


def check(a):
    if a.file_kb is None:
        a.file_kb = 4 if a.scale else 48
    a.dirs = a.dirs or max(1, a.files // 100)


# ---- the file set ----

def names(root, nfiles, ndirs):
    return [os.path.join(root, f"d{i % ndirs:05d}", f"f{i:08d}") for i in range(nfiles)]


def in_procs(fn, items, nproc, what=None):
    """fn(list) in nproc forked processes, items dealt round-robin; fails on a failure.
    With @what, a progress line counts the items done (fn calls tick() after each)."""
    global _count
    nproc = max(1, min(nproc, len(items)))
    ctx = multiprocessing.get_context("fork")
    _count = ctx.Value("q", 0, lock=False)
    procs = [ctx.Process(target=fn, args=(items[k::nproc],)) for k in range(nproc)]
    bar = rig.Progress(what, len(items), "files") if what else None
    try:
        for p in procs:
            p.start()
        bad = 0
        for p in procs:
            while bar and p.is_alive():
                p.join(0.2)
                bar.update(_count.value)
            p.join()
            bad += p.exitcode != 0
        if bar:
            bar.end()
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    if bad:
        rig.fail(f"dataset: {bad} of {nproc} worker processes failed (see above)")


_count = None  # items done by in_procs' workers (a shared counter; races only undercount)


def tick():
    _count.value += 1


def create_set(root, nfiles, ndirs, kib, nproc):
    for d in range(min(ndirs, nfiles)):
        os.makedirs(os.path.join(root, f"d{d:05d}"), exist_ok=True)
    data = os.urandom(kib << 10)

    def work(paths):
        try:
            for p in paths:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, data)
                os.close(fd)
                tick()
        except OSError as e:
            print(f"dmafs-bench: dataset: creating {e.filename}: {e.strerror}", file=sys.stderr)
            os._exit(1)
    in_procs(work, names(root, nfiles, ndirs), nproc, f"creating {nfiles:,} files")


def read_set(paths, nproc, size):
    def work(ps):
        try:
            for p in ps:
                fd = os.open(p, os.O_RDONLY)
                while os.read(fd, size + 1):  # to EOF, as a sample reader does
                    pass
                os.close(fd)
        except OSError as e:
            print(f"dmafs-bench: dataset: reading {e.filename}: {e.strerror}", file=sys.stderr)
            os._exit(1)
    in_procs(work, paths, nproc)


def fio(name, args, out, jobs=None):
    """Run fio; (IOPS, GB/s) of the reads summed over its jobs."""
    path = out(f"{name}.json")
    rig.run(["fio", "--output-format=json", f"--output={path}", "--ioengine=psync",
             "--group_reporting"] + (jobs or [f"--name={name}"] + args), what=f"fio {name}")
    with open(path) as f:
        rd = json.load(f)["jobs"][0]["read"]
    return rd["iops"], rd["bw_bytes"] / 1e9


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def one_round(fs, mnt, a, out, res):
    """Every row on the filesystem at @mnt; res[key] gets this round's value appended."""
    root = os.path.join(mnt, "set")
    paths = names(root, a.files, a.dirs)
    skip = a.skip

    def put(key, v):
        res.setdefault(key, []).append(v)

    if os.path.exists(root):
        shutil.rmtree(root)
    rig.drop_caches()

    def create():
        create_set(root, a.files, a.dirs, a.file_kb, a.threads)
        os.sync()
    dt = timed(create)
    if "create" not in skip:
        put("create", a.files / dt)
    for key, cmd in (("ls", ["ls", "-lR", root]), ("find", ["find", root, "-newer", paths[0]]),
                     ("du", ["du", "-s", root])):
        if key not in skip:
            rig.drop_caches()
            put(key, rig.timed(cmd, f"{fs}: {' '.join(cmd)}"))
    for key, n in (("read", a.threads), ("read4", 4 * a.threads)):
        if key not in skip:
            rig.drop_caches()
            put(key, a.files / timed(lambda: read_set(paths, n, a.file_kb << 10)))
    if "dataloader" not in skip and a.torch:
        rig.drop_caches()
        s = rig.run([a.py, os.path.join(rig.PKG_DIR, "dataloader_child.py"), root, a.files,
                     a.dirs], what=f"{fs}: the DataLoader", env=a.env)
        put("dataloader", a.files / float(s.split()[-1]))
    big, t = os.path.join(mnt, "big"), str(a.threads)
    for key, args in (
            ("rand4k", ["--rw=randread", "--bs=4k", f"--numjobs={t}", "--direct=0"]),
            ("rand4kdio", ["--rw=randread", "--bs=4k", f"--numjobs={t}", "--direct=1"]),
            ("rand128k", ["--rw=randread", "--bs=128k", f"--numjobs={t}", "--direct=1"]),
            ("rand1m", ["--rw=randread", "--bs=1m", f"--numjobs={t}", "--direct=0"])):
        if key not in skip:
            rig.drop_caches()
            iops, gbs = fio(f"{fs}-{key}", [f"--filename={big}", "--thread", "--time_based",
                                            f"--runtime={a.seconds}", "--norandommap",
                                            "--randrepeat=0"] + args, out)
            put(key, iops / 1000 if key.startswith("rand4k") else gbs)
    if "readers" not in skip:
        rig.drop_caches()
        # one file per job: fio's filename_format with $jobnum
        put("readers", fio(f"{fs}-readers", [f"--directory={mnt}", "--filename_format=part$jobnum",
                                             "--rw=read", "--bs=1m", "--numjobs=8", "--thread",
                                             f"--size={a.big_mb // 8}m"], out)[1])
    if "reader" not in skip:
        rig.drop_caches()
        put("reader", fio(f"{fs}-reader", [f"--filename={big}", "--rw=read", "--bs=1m",
                                           f"--size={a.big_mb}m"], out)[1])
    if "rm" not in skip:
        rig.drop_caches()

        def rm():
            rig.run(["rm", "-rf", root])
            os.sync()
        put("rm", a.files / timed(rm))


def make_big(mnt, a):
    """The files the fio rows read: one of big_mb, eight of big_mb/8 (part0..part7), each
    one random MiB over and over."""
    chunk = os.urandom(1 << 20)
    for name, mb in [("big", a.big_mb)] + [(f"part{i}", a.big_mb // 8) for i in range(8)]:
        with open(os.path.join(mnt, name), "wb") as f:
            for _ in range(mb):
                f.write(chunk)
    os.sync()


def raw_rate(loops, out):
    args = ["--rw=read", "--bs=1m", "--direct=1", "--thread", "--time_based", "--runtime=3"]
    jobs = []
    for i, lp in enumerate(loops):
        jobs += [f"--name=m{i}", f"--filename={lp}"] + args
    return fio("raw", [], out, jobs)[1]


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    return 0


def fmt(v):
    return f"{v:.3f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def run(a):
    rig.need_root("dataset")
    rig.need("dataset", "losetup", "fio", "mount", "umount", "fallocate",
             *(() if a.scale else ("mkfs.btrfs",)))
    rig.need_fuse("dataset")
    mkfs = rig.program("dataset", "mkfs.dmafs", "tools/mkfs.dmafs")
    dmafs = rig.program("dataset", "dmafs", "fs/dmafs")
    nfs, mib = 1 if a.scale else 2, int(a.member_gb * 1024)
    rig.need_shm("dataset", nfs * a.members * mib + 256,
                 f"{nfs} x {a.members} members of {a.member_gb:g} GiB")
    a.out = rig.Out("dataset", a.out)
    (scale if a.scale else bench)(a, dmafs, mkfs, mib)


def bench(a, dmafs, mkfs, mib):
    a.py, a.env = rig.python(), rig.child_env()
    a.torch = subprocess.run([a.py, "-c", "import torch"], capture_output=True,
                             env=a.env).returncode == 0
    if not a.torch and "dataloader" not in a.skip:
        rig.log(f"dataset: {a.py} cannot import torch: the DataLoader row is skipped")
    work = rig.workdir("dataset", "dmafs", "btrfs")
    dm, bm = os.path.join(work, "dmafs"), os.path.join(work, "btrfs")
    rig.log(f"dataset: 2 x {a.members} members of {a.member_gb:g} GiB in /dev/shm (dmafs, then btrfs)")
    # the members fio measures are written through, as the files read later are (pages
    # tmpfs only allocated read without a copy, about twice as fast)
    md = rig.Members("dmafs-bench-dataset-d", a.members, mib, zero=True)
    mb = rig.Members("dmafs-bench-dataset-b", a.members, mib)
    dl, bl = md.loops, mb.loops
    rig.log(f"dataset: raw read rate of the {a.members} dmafs members (fio, O_DIRECT 1 MiB, "
            "one job each)")
    raw = raw_rate(dl, a.out)
    rig.log(f"dataset: mkfs.dmafs over {' '.join(dl)}; mkfs.btrfs -d raid0 -m raid1 over "
            f"{' '.join(bl)}")
    rig.run([mkfs, *a.mkfs_opts.split(), *dl], what="mkfs.dmafs")
    rig.Dmafs(dmafs, ",".join(dl), dm, a.dmafs_opts, a.out("dmafs.log")).mount()
    bt = rig.Btrfs(bl, bm, a.out("mkfs.btrfs.log"), nodiscard=True)
    bt.make("-d", "raid0", "-m", "raid1")
    bt.mount()
    fss = [("dmafs", dm), ("btrfs", bm)]
    if not a.skip >= FIO_ROWS:
        for fs, mnt in fss:
            rig.log(f"dataset: {fs}: writing the files the fio rows read ({a.big_mb} MiB + 8 x "
                    f"{a.big_mb // 8} MiB)")
            make_big(mnt, a)
    res = {"dmafs": {}, "btrfs": {}}
    for r in range(a.rounds):
        for fs, mnt in (fss if r % 2 == 0 else fss[::-1]):
            rig.log(f"dataset: round {r + 1} of {a.rounds}: {fs}")
            one_round(fs, mnt, a, a.out, res[fs])
    fill = {"files": f"{a.files:,}", "kb": a.file_kb, "t": a.threads, "t4": 4 * a.threads,
            "mb": a.big_mb, "mb8": a.big_mb // 8}
    rep = Report(f"dmafs-bench dataset: dmafs over {a.members} members vs btrfs raid0 (-m raid1) "
                 f"over {a.members} others, {a.member_gb:g} GiB each (loop over /dev/shm); "
                 f"{a.files:,} files of {a.file_kb} KiB in {a.dirs} folders; median of "
                 f"{a.rounds} rounds, caches dropped before every row; {os.cpu_count()} CPUs")
    rep.say("ratio: dmafs's rate over btrfs's (times: btrfs's over dmafs's); above 1 is dmafs "
            "faster" + ("" if a.out.temp else f"; raw output in {a.out.path}"))
    t = Table("pattern", "unit", "dmafs", "btrfs", "ratio", "goal", "result")
    for key, label, unit, higher in ROWS:
        d, b = res["dmafs"].get(key), res["btrfs"].get(key)
        if not d or not b:
            continue
        dv, bv = statistics.median(d), statistics.median(b)
        value = (dv / bv if higher else bv / dv) if dv and bv else 0
        lab = label.format(**fill)
        t.add(lab, unit, fmt(dv), fmt(bv), *rep.check(lab, value, GOAL_ROWS))
    t.add(f"members raw, {a.members} jobs O_DIRECT 1 MiB", "GB/s", fmt(raw))
    if res["dmafs"].get("readers"):
        f = statistics.median(res["dmafs"]["readers"]) / raw
        t.add("8 readers on dmafs / members raw", "", "", "",
              *rep.check("8 readers on dmafs / members raw", f, GOAL_RAW))
    rep.table(t)
    rep.verdict()


def scale(a, dmafs, mkfs, mib):
    mnt = os.path.join(rig.workdir("dataset", "dmafs"), "dmafs")
    rig.log(f"dataset: {a.members} members of {a.member_gb:g} GiB in /dev/shm")
    m = rig.Members("dmafs-bench-dataset", a.members, mib)
    rig.run([mkfs, *a.mkfs_opts.split(), *m.loops], what="mkfs.dmafs")
    fs = rig.Dmafs(dmafs, m.csv(), mnt, a.dmafs_opts, a.out("dmafs.log"))
    fs.mount()
    # the empty filesystem's daemon in the state of each step's figure: after a fresh
    # mount and a cold ls -lR (right after the mount it may not have finished starting)
    rig.drop_caches()
    rig.timed(["ls", "-lR", mnt], "ls -lR")
    base, have = rss_bytes(fs.pid), 0
    rep = Report(f"dmafs-bench dataset --scale: dmafs over {a.members} members of "
                 f"{a.member_gb:g} GiB (loop over /dev/shm); files of {a.file_kb} KiB, 100 per "
                 f"folder; {os.cpu_count()} CPUs")
    rep.say(f"B/file: the resident memory after a fresh mount and ls -lR, less that of the "
            f"empty filesystem's daemon ({base / 1e6:.1f} MB), over the files", "")
    t = Table("files", "create/s", "RSS MB", "B/file", "mount s", "ls -lR s",
              widths=(10, 9, 8, 7, 8, 9))  # fixed: each row is printed as it is measured
    rep.say(t.header())
    for n in a.scale:
        root = os.path.join(mnt, f"s{n}")
        rig.log(f"dataset: {n:,} files: creating {n - have:,} more")
        t0 = time.monotonic()
        create_set(root, n - have, max(1, (n - have) // 100), a.file_kb, a.threads)
        os.sync()
        rate = (n - have) / (time.monotonic() - t0)
        have = n
        fs.umount()
        t0 = time.monotonic()
        fs.mount()
        mount_s = time.monotonic() - t0
        rig.drop_caches()
        ls_s = rig.timed(["ls", "-lR", mnt], "ls -lR")
        rss = rss_bytes(fs.pid)
        rep.say(t.line(f"{n:,}", f"{rate:.0f}", f"{rss / 1e6:.1f}", f"{(rss - base) / n:.0f}",
                       f"{mount_s:.2f}", f"{ls_s:.2f}"))
    rep.verdict()
