# SPDX-License-Identifier: MIT
"""samples - training batches into GPU or host memory: dmafs sample batches
(dmafs.batches, SampleReader) against a PyTorch DataLoader reading btrfs raid0."""

import json
import os
import subprocess

from . import rig
from .args import Bad, Opt, number, whole
from .dataset import create_set, names
from .table import Goal, Report, Table

NAME = "samples"
SUMMARY = "training batches of many small files into a GPU against a DataLoader from btrfs raid0"
ABOUT = """
2N members of G GiB in /dev/shm (default 8 of 4 GiB, twice): the random O_DIRECT read rate of
the first N is measured with fio (64 KiB and K KiB reads, io_uring, queue depth 32, one job
per member) after zeros are written to every page of them (tmpfs answers reads of pages
only allocated without copying anything, about 1.8 times as fast: not what reading files
costs); dmafs goes over them and btrfs (raid0 data, raid1 metadata) over the other N.
Each gets N files of K KiB (default 40,000 of 48 KiB, 100 per folder) and S shard files of M
MiB (default 16 of 1024). Then, on DEV (cuda:0 when PYTHON's torch sees a GPU, else cpu) and
on cpu, the page cache dropped before each row (rows by their --skip names): files, one
shuffled epoch of dmafs.batches() (batches of B whole files, its default eight requests in the daemon)
and, with loader, a DataLoader (8 workers, batches of B, pin_memory, .to(DEV,
non_blocking=True)) over the same files on btrfs and on dmafs (its POSIX path); shards, NB
batches of B random K KiB records of the shards by dmafs.batches(records=...) (in order)
and, with loader, the DataLoader reading the same records from btrfs; threads, batches of B
random files by 1, 2, 4 and 8 threads (a buffer each, 2 s each) through read_into() and
through dmafs_place_batch() on entries built before the clock (the rate the daemon serves
without Python per request); overhead, the library time of one request of 1 and of 320
samples of 512 bytes. Rates count from each loop's
first batch (start-up is once per run, for both), in a process of PYTHON.
"""
GOAL_LOADER = Goal("files into the device: dmafs.batches() / DataLoader from btrfs", 3.00)
GOAL_RAW64 = Goal("files into the device: GB/s / the members' random 64 KiB rate", 0.70)
GOAL_RAWK = Goal("shards into the device: GB/s / the members' random K KiB rate", 0.80)
GOALS = (GOAL_LOADER, GOAL_RAW64, GOAL_RAWK)
ROWS = ("files", "shards", "loader", "threads", "overhead")
THREADS = (1, 2, 4, 8)  # the threads row's counts, 2 seconds each


def skip_rows(v):
    keys = set(v.split(",")) - {""}
    if keys - set(ROWS):
        raise Bad(f"has unknown row(s) {', '.join(sorted(keys - set(ROWS)))}; rows: "
                  + ", ".join(ROWS))
    return keys


def device(v):
    if v != "auto" and v != "cpu" and not (v.startswith("cuda:") and v[5:].isdigit()):
        raise Bad("must be auto, cpu or cuda:N")
    return v


OPTIONS = [
    Opt("--members", "N", 8, whole(2, 16), "members for dmafs, and as many others for btrfs "
        "raid0: 2 to 16 (default 8)"),
    Opt("--member-gb", "G", 4, number(0.5, "a number of GiB"), "size of each member in GiB "
        "(default 4, at least 0.5)"),
    Opt("--files", "N", 40000, whole(1), "files in the set (default 40000)"),
    Opt("--file-kb", "K", 48, whole(1, 65536), "size of each file and record in KiB (default 48)"),
    Opt("--shards", "S", 16, whole(1), "shard files (default 16)"),
    Opt("--shard-mb", "M", 1024, whole(1), "size of each shard in MiB (default 1024)"),
    Opt("--batch", "B", 256, whole(1, 4096), "samples per batch (default 256)"),
    Opt("--batches", "NB", 200, whole(3), "batches of shard records (default 200, at least 3)"),
    Opt("--device", "DEV", "auto", device, "cuda:N, cpu, or auto (default: cuda:0 when torch "
        "sees a GPU)"),
    Opt("--skip", "ROWS", set(), skip_rows, "rows left out: files, shards, loader, threads, overhead"),
    Opt("--dmafs-opts", "OPTS", "", None, "mount options for dmafs"),
    Opt("--out", "DIR", None, None, "write fio's output and the daemon's log to DIR (kept)"),
]


def check(a):
    need = a.files * a.file_kb / 1024 + (0 if "shards" in a.skip else a.shards * a.shard_mb)
    if need > a.members * a.member_gb * 1024 * 0.85:
        rig.fail(f"samples: the files and shards ({need:.0f} MiB) do not fit {a.members} members "
                 f"of {a.member_gb:g} GiB: use more or larger members, or fewer or smaller shards")
    if (a.shard_mb << 10) < a.file_kb:
        rig.fail("samples: a shard must hold at least one record (--shard-mb, --file-kb)")


def fio_rand(loops, kib, out):
    """Random O_DIRECT reads over the raw members, one io_uring job each at depth 32 (32
    psync threads each where fio lacks io_uring); GB/s."""
    jobs = []
    for i, lp in enumerate(loops):
        jobs += [f"--name=m{i}", f"--filename={lp}", "--rw=randread", f"--bs={kib}k", "--direct=1",
                 "--time_based", "--runtime=3", "--thread"]
    path = out(f"raw{kib}k.json")
    err = ""
    for engine in (["--ioengine=io_uring", "--iodepth=32"], ["--ioengine=psync", "--numjobs=32"]):
        r = subprocess.run(["fio", "--output-format=json", f"--output={path}", "--group_reporting"]
                           + engine + jobs, capture_output=True, text=True)
        if r.returncode == 0:
            with open(path) as f:
                return json.load(f)["jobs"][0]["read"]["bw_bytes"] / 1e9
        err = r.stderr.strip()[-400:]
    rig.fail(f"samples: fio random reads over the raw members failed: {err}")


def make_shards(root, n, mb):
    os.makedirs(root, exist_ok=True)
    chunk = os.urandom(8 << 20)
    paths = []
    bar = rig.Progress(f"writing {n} shards", n * mb)
    for i in range(n):
        bar.update(i * mb)
        p = os.path.join(root, f"shard-{i:05d}.bin")
        with open(p, "wb") as f:
            left = mb << 20
            k = 0
            while left:
                piece = (chunk[k % 7:] + chunk[:k % 7])[:min(left, len(chunk))]
                f.write(piece)
                left -= len(piece)
                k += 1
        paths.append(p)
    bar.end()
    os.sync()
    return paths


def child(a, row, dev, lists, extra=()):
    """One row in samples_child.py under PYTHON: its JSON."""
    s = rig.run([a.py, os.path.join(rig.PKG_DIR, "samples_child.py"), row, dev, lists,
                 str(a.batch), str(a.file_kb), *map(str, extra)],
                what=f"samples: the {row} row into {dev}", env=a.env)
    return json.loads(s.strip().splitlines()[-1])


def run(a):
    rig.need_root("samples")
    rig.need("samples", "losetup", "fio", "mount", "umount", "mkfs.btrfs")
    rig.need_fuse("samples")
    a.py, a.env = rig.python(), rig.child_env()
    rig.need_python("samples", a.py, "torch", "dmafs", env=a.env)
    mkfs = rig.program("samples", "mkfs.dmafs", "tools/mkfs.dmafs")
    dmafs = rig.program("samples", "dmafs", "fs/dmafs")
    mib = int(a.member_gb * 1024)
    rig.need_shm("samples", 2 * a.members * mib + 256, f"2 x {a.members} members of {a.member_gb:g} GiB")
    out = a.out = rig.Out("samples", a.out)
    if a.device == "auto":
        gpu = rig.run([a.py, "-c", "import torch; print(torch.cuda.is_available())"],
                      what="asking torch for a GPU", env=a.env).strip() == "True"
        a.device = "cuda:0" if gpu else "cpu"
    devs = [a.device] + (["cpu"] if a.device != "cpu" else [])
    work = rig.workdir("samples", "dmafs", "btrfs")
    dm, bm = os.path.join(work, "dmafs"), os.path.join(work, "btrfs")
    rig.log(f"samples: 2 x {a.members} members of {a.member_gb:g} GiB in /dev/shm")
    # the members fio measures are written through: reads of their pages then copy, as
    # reads of files do (pages only allocated read as zeros without a copy)
    md = rig.Members("dmafs-bench-samples-d", a.members, mib, zero=True)
    mb = rig.Members("dmafs-bench-samples-b", a.members, mib)
    dl, bl = md.loops, mb.loops
    rig.log(f"samples: random O_DIRECT reads of the {a.members} dmafs members (fio)")
    raw64 = fio_rand(dl, 64, out)
    rawk = raw64 if a.file_kb == 64 else fio_rand(dl, a.file_kb, out)
    rig.run([mkfs, *dl], what="mkfs.dmafs")
    rig.Dmafs(dmafs, ",".join(dl), dm, a.dmafs_opts, out("dmafs.log")).mount()
    bt = rig.Btrfs(bl, bm, out("mkfs.btrfs.log"), nodiscard=True)
    bt.make("-d", "raid0", "-m", "raid1")
    bt.mount()
    lists = {}
    ndirs = max(1, a.files // 100)
    for fs, mnt in (("dmafs", dm), ("btrfs", bm)):
        rig.log(f"samples: {fs}: {a.files:,} files of {a.file_kb} KiB"
                + ("" if "shards" in a.skip else f", {a.shards} shards of {a.shard_mb} MiB"))
        root = os.path.join(mnt, "set")
        create_set(root, a.files, ndirs, a.file_kb, 16)
        os.sync()
        shards = [] if "shards" in a.skip else make_shards(os.path.join(mnt, "shards"), a.shards,
                                                           a.shard_mb)
        for kind, paths in (("files", names(root, a.files, ndirs)), ("shards", shards)):
            lists[fs, kind] = out(f"{fs}-{kind}.txt")
            out.write(f"{fs}-{kind}.txt", "\n".join(paths) + "\n")
    rows, notes, thr = [], [], {}
    nrec = (a.shard_mb << 10) // a.file_kb
    for d in devs:
        if "files" not in a.skip:
            rig.drop_caches()
            rig.log(f"samples: files: dmafs.batches() into {d}")
            r = child(a, "files-dmafs", d, lists["dmafs", "files"])
            rows.append(("files: dmafs.batches()", d, r))
            notes.append(f"handles of {a.files:,} files for {d}: {r['setup']:.2f} s (once per "
                         "run, not in the rate)")
            if "loader" not in a.skip:
                for fs in ("btrfs", "dmafs"):
                    rig.drop_caches()
                    rig.log(f"samples: files: DataLoader from {fs} into {d}")
                    rows.append((f"files: DataLoader from {fs}", d,
                                 child(a, "files-loader", d, lists[fs, "files"])))
        if "threads" not in a.skip:
            rig.drop_caches()
            rig.log(f"samples: threads: batches by {', '.join(map(str, THREADS))} threads into {d}")
            thr[d] = child(a, "threads", d, lists["dmafs", "files"], (",".join(map(str, THREADS)), 2))
        if "shards" not in a.skip:
            rig.drop_caches()
            rig.log(f"samples: shards: dmafs.batches(records=...) into {d}")
            rows.append(("shards: dmafs.batches(records)", d,
                         child(a, "shards-dmafs", d, lists["dmafs", "shards"], (a.batches, nrec))))
            if "loader" not in a.skip:
                rig.drop_caches()
                rig.log(f"samples: shards: DataLoader from btrfs into {d}")
                rows.append(("shards: DataLoader from btrfs", d,
                             child(a, "shards-loader", d, lists["btrfs", "shards"],
                                   (a.batches, nrec))))
    ov = None
    if "overhead" not in a.skip:
        ov = child(a, "overhead", "cpu", lists["dmafs", "shards" if "shards" not in a.skip else "files"])
    report(a, rows, raw64, rawk, ov, notes, thr)


def report(a, rows, raw64, rawk, ov, notes, thr=None):
    size = a.file_kb << 10
    rep = Report(f"dmafs-bench samples: dmafs{' -o ' + a.dmafs_opts if a.dmafs_opts else ''} over "
                 f"{a.members} members vs btrfs raid0 (-m raid1) over {a.members} others, "
                 f"{a.member_gb:g} GiB each (loop over /dev/shm); batches of {a.batch}; "
                 f"{a.files:,} files of {a.file_kb} KiB; {a.shards} shards of {a.shard_mb} MiB; "
                 f"{os.cpu_count()} CPUs; caches dropped before every row")
    rep.say(f"members' random O_DIRECT reads (fio): 64 KiB {raw64:.2f} GB/s, {a.file_kb} KiB "
            f"{rawk:.2f} GB/s", *notes)
    t = Table("pattern", "into", "samples/s", "GB/s")
    rate = {}
    for label, d, r in rows:
        sps = r["n"] / r["s"]
        rate[label, d] = sps
        t.add(label, d, f"{sps:.0f}", f"{sps * size / 1e9:.2f}")
    rep.table(t)
    g = Table("goal", "ratio", "goal", "result")
    for d in dict.fromkeys(d for _, d, _ in rows):
        f, lo = rate.get(("files: dmafs.batches()", d)), rate.get(("files: DataLoader from btrfs", d))
        s = rate.get(("shards: dmafs.batches(records)", d))
        if f and lo:
            g.add(f"files into {d}: dmafs / DataLoader from btrfs",
                  *rep.check(f"files into {d} / DataLoader", f / lo, GOAL_LOADER))
        if f:
            g.add(f"files into {d}: GB/s / members' random 64 KiB",
                  *rep.check(f"files into {d} / raw 64 KiB", f * size / 1e9 / raw64, GOAL_RAW64))
        if s:
            g.add(f"shards into {d}: GB/s / members' random {a.file_kb} KiB",
                  *rep.check(f"shards into {d} / raw {a.file_kb} KiB", s * size / 1e9 / rawk,
                             GOAL_RAWK))
    if thr:
        th = Table("threads", "into", "read_into samples/s", "dmafs_place_batch samples/s", "GB/s")
        for d, r in thr.items():
            for n in THREADS:
                py, c = r["py"][str(n)], r["c"][str(n)]
                th.add(str(n), d, f"{py:.0f}", f"{c:.0f}", f"{py * size / 1e9:.2f} / {c * size / 1e9:.2f}")
        rep.table(th)
    if g.rows:
        rep.table(g)
    if ov:
        rep.say("", f"request overhead (library wall time, 512-byte samples read from the members): "
                f"{ov['one']:.0f} us per request of 1 sample, {ov['per']:.2f} us per further sample")
    rep.verdict()
