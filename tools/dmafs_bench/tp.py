# SPDX-License-Identifier: MIT
"""tp - transformers' tensor-parallel from_pretrained(tp_plan="auto") under torchrun,
with and without dmafs. This module sets up and prints; tp_worker.py is each rank."""

import json
import os
import socket
import statistics

from . import rig
from .args import Opt, gib_opt, number, whole
from .table import Report, Table, times

NAME = "tp"
SUMMARY = "tensor-parallel from_pretrained(tp_plan=\"auto\") with and without dmafs, N GPUs"
ABOUT = """
2M members of G GiB in /dev/shm with loop devices: dmafs over M of them, btrfs (raid0 data,
raid1 metadata) over the other M. The model (qwen2.5-7b at --scale 2 by default, about
3.8 GB; --scale 1 is the full 15 GB and needs members of 3 GiB or more) is written into
dmafs with dmafs-synth-model and copied to btrfs. Then one torchrun job of N processes
(one GPU each, NCCL) loads AutoModelForCausalLM.from_pretrained(MODEL, tp_plan="auto",
dtype=bfloat16) in every rank, R rounds of, in turn: dmafs+enable (from the dmafs mount
under dmafs.enable(): each rank places its slices), dmafs (the same mount, plain
transformers) and btrfs (plain transformers). The page cache is dropped before every
load; each is timed from a barrier to a barrier after the last rank is done, after one
untimed load from btrfs.

Prints the best and median seconds, GB/s over the model files' bytes, "x btrfs" (btrfs's
best over the row's), the bytes each rank placed and dmafs's own part of the enabled
load. Needs N CUDA GPUs, NCCL, and PYTHON with torch and transformers.
"""
OPTIONS = [
    Opt("--gpus", "N", 2, whole(1), "ranks, one GPU each (default 2)"),
    Opt("--members", "M", 8, whole(2, 16), "members for dmafs, and as many others for btrfs "
        "raid0: 2 to 16 (default 8)"),
    gib_opt("--member-gb", 1, 0.5, "size of each member in GiB (default 1, at least 0.5)"),
    Opt("--model", "NAME|FILE.json", "qwen2.5-7b", None, "the model: a name dmafs-synth-model "
        "knows or a model JSON file (default qwen2.5-7b)"),
    Opt("--scale", "F", 2, number(1), "divide the model's dimensions above 64 by F, at "
        "least 1 (default 2)"),
    Opt("--runs", "R", 3, whole(1), "rounds (default 3)"),
    Opt("--out", "DIR", None, None, "write the times as JSON and the logs to DIR (kept)"),
]
METHODS = ("dmafs+enable", "dmafs", "btrfs")

CHECK = """
import sys, torch, transformers
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(n)
"""


def run(a):
    mode = "tp"
    rig.need_root(mode)
    rig.need(mode, "losetup", "mkfs.btrfs", "mount", "umount", "cp")
    rig.need_fuse(mode)
    py, env = rig.python(), rig.child_env(OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    rig.need_python(mode, py, "torch", "transformers", "dmafs", env=env)
    gpus = int(rig.run([py, "-c", CHECK], env=env).split()[-1])
    if gpus < a.gpus:
        rig.fail(f"tp: {a.gpus} GPUs wanted (--gpus), and torch sees {gpus} CUDA devices: this "
                 "mode needs one CUDA GPU per rank")
    dmafs = rig.program(mode, "dmafs", "fs/dmafs")
    mkfs = rig.program(mode, "mkfs.dmafs", "tools/mkfs.dmafs")
    synth = rig.script(mode, "dmafs-synth-model")
    mib = int(a.member_gb * 1024)
    rig.need_shm(mode, 2 * a.members * mib + 256, f"2 x {a.members} members of {a.member_gb:g} GiB")
    out = rig.Out(mode, a.out)
    work = rig.workdir(mode, "dmafs", "btrfs")
    dm, bm = os.path.join(work, "dmafs"), os.path.join(work, "btrfs")
    rig.log(f"tp: 2 x {a.members} members of {a.member_gb:g} GiB in /dev/shm (dmafs, then btrfs)")
    m = rig.Members("dmafs-bench-tp", 2 * a.members, mib)
    dl, bl = m.loops[:a.members], m.loops[a.members:]
    rig.log(f"tp: mkfs.dmafs over {' '.join(dl)}; mkfs.btrfs -d raid0 -m raid1 over {' '.join(bl)}")
    rig.run([mkfs, *dl], what="mkfs.dmafs", log=out("mkfs.dmafs.log"))
    rig.Dmafs(dmafs, ",".join(dl), dm, "", out("dmafs.log")).mount()
    bt = rig.Btrfs(bl, bm, out("mkfs.btrfs.log"))
    bt.make("-d", "raid0", "-m", "raid1")
    bt.mount()
    name = os.path.basename(a.model).removesuffix(".json") + \
        (f"-scale{a.scale:g}" if a.scale != 1 else "")
    rig.log(f"tp: {name}: dmafs-synth-model onto dmafs, cp -a to btrfs")
    rig.run([py, synth, "-q", "--model", a.model, "--scale", f"{a.scale:g}", f"{dm}/{name}"],
            what=f"dmafs-synth-model --model {a.model}", env=env)
    rig.run(["cp", "-a", f"{dm}/{name}", bm + "/"], what=f"copying {name} to btrfs")
    os.sync()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cmd = [py, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(a.gpus),
           "--master_addr", "127.0.0.1", "--master_port", str(port),
           os.path.join(rig.PKG_DIR, "tp_worker.py"), "--runs", str(a.runs),
           "--json", out("tp.json"), f"{dm}/{name}", f"{bm}/{name}"]
    rig.log(f"tp: torchrun of {a.gpus} ranks, {a.runs} rounds (output also in {out('torchrun.log')})")
    if rig.tee(cmd, out("torchrun.log"), env=env):
        rig.fail("tp: the torchrun job failed (its output is above)")
    with open(out("tp.json")) as f:
        out.write("table.txt", report(a, name, json.load(f)).text())


def report(a, name, j):
    """The table of the worker's figures @j (tp.json)."""
    total, tm = j["bytes"], j["times"]
    rep = Report(f"dmafs-bench tp: {name}, {a.gpus} ranks, tp_plan=\"auto\", bf16; dmafs over "
                 f"{a.members} members vs btrfs raid0 (-m raid1) over {a.members} others, "
                 f"{a.member_gb:g} GiB each (loop over /dev/shm); best of {a.runs}")
    rep.say(f"model files {total} bytes; transformers {j['transformers']}, torch {j['torch']}, "
            f"dmafs {j['dmafs']}, {j['device']}",
            "x btrfs: btrfs's best seconds over the row's (above 1 is faster)")
    t = Table("method", "best s", "median s", "GB/s", "x btrfs", "note")
    base = min(tm["btrfs"])
    for meth in METHODS:
        best = min(tm[meth])
        note = (f"ranks placed {j['placed']} of {total} bytes; dmafs's own load "
                f"{min(j['dmafs_seconds']):.3f} s (best), the rest transformers'"
                if meth == "dmafs+enable" and j["dmafs_seconds"] else "")
        t.add(meth, f"{best:.3f}", f"{statistics.median(tm[meth]):.3f}",
              f"{total / best / 1e9:.2f}", times(base / best), note)
    rep.table(t)
    rep.verdict()
    return rep
