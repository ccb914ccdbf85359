# SPDX-License-Identifier: MIT
"""tp - transformers' tensor-parallel from_pretrained(tp_plan="auto") under torchrun,
with and without dmafs. This module sets up and prints; tp_worker.py is each rank."""

import json
import os
import re
import socket
import statistics

from . import rig
from .args import Opt, gib_opt, number, whole
from .table import Goal, Report, Table, times

NAME = "tp"
SUMMARY = "tensor- (and expert-) parallel from_pretrained with and without dmafs, N GPUs"
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
untimed load from btrfs, which gives the bytes each rank keeps (its local part of every
parameter and buffer). With --ep, the loads are from_pretrained(MODEL,
distributed_config=DistributedConfig(tp_plan="auto", enable_expert_parallel=True),
dtype=bfloat16): experts split over the ranks too (a mixture-of-experts model, such as
qwen3-30b-a3b or mixtral-8x7b, whose experts the ranks divide). With --verify, one more
load from btrfs and one under dmafs.enable() are compared parameter by parameter, bit
for bit (each rank's local parts).

Prints the best and median seconds, GB/s over the model files' bytes, "x btrfs" (btrfs's
best over the row's), dmafs's own part of the enabled load and what transformers' loading
loop skipped under it (converter copies, its thread pool), and per rank the bytes it
kept, the bytes dmafs placed for it and their ratio; with --verify the parameters that
differ. Needs N CUDA GPUs, NCCL, and PYTHON with torch and transformers.
"""
GOAL_MOE = Goal("btrfs's best seconds / dmafs+enable's, mixture-of-experts models", 5.00)
GOAL_BYTES = Goal("bytes dmafs placed for a rank / the bytes the rank keeps, each rank (less "
                  "is better: what every rank keeps whole is read once between the ranks and "
                  "broadcast)", 1.02, at_most=True)
GOAL_VERIFY = Goal("parameters that differ between dmafs+enable's load and btrfs's (--verify)",
                   0, at_most=True, count=True)
GOALS = (GOAL_MOE, GOAL_BYTES, GOAL_VERIFY)
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
    Opt("--ep", help="expert parallelism as well: distributed_config=DistributedConfig("
        "tp_plan=\"auto\", enable_expert_parallel=True) instead of tp_plan=\"auto\"; the "
        "model must have experts, a number that --gpus divides"),
    Opt("--verify", help="after the rounds, compare every parameter of a load under "
        "dmafs.enable() with a plain load from btrfs (two models in GPU memory at once)"),
    Opt("--out", "DIR", None, None, "write the times as JSON and the logs to DIR (kept)"),
]
METHODS = ("dmafs+enable", "dmafs", "btrfs")

CHECK = """
import sys, torch, transformers
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(n)
"""


def model_json(model):
    """The model JSON dmafs-synth-model would use for --model @model (a file, or NAME.json
    in models/ beside the program or in ../share/dmafs/models), or None."""
    if model.endswith(".json") or os.sep in model:
        return model if os.path.isfile(model) else None
    for d in (os.path.join(rig.BIN_DIR, "models"),
              os.path.join(rig.BIN_DIR, "..", "share", "dmafs", "models")):
        p = os.path.join(d, model + ".json")
        if os.path.isfile(p):
            return p
    return None


def experts(model):
    """The experts of layer 0 of @model's JSON: 0 for a dense model, None when the JSON is
    not found or not read (dmafs-synth-model says so later)."""
    p = model_json(model)
    if p is None:
        return None
    try:
        with open(p) as f:
            names = json.load(f)["tensors"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return len({m.group(1) for m in (re.match(r"model\.layers\.0\..*\.experts\.(\d+)\.", n)
                                     for n in names) if m})


def check(a):
    if not a.ep:
        return
    n = experts(a.model)
    if n == 0:
        rig.fail(f"tp: --ep wants a mixture-of-experts model, and {a.model} has no experts "
                 "(qwen3-30b-a3b and mixtral-8x7b have)")
    if n and n % a.gpus:
        rig.fail(f"tp: --ep: the {n} experts of {a.model} do not divide over {a.gpus} ranks "
                 "(--gpus)")


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
    with open(f"{dm}/{name}/config.json") as f:
        cfg = json.load(f)
    moe = bool(cfg.get("num_experts") or cfg.get("num_local_experts"))
    os.sync()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cmd = [py, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(a.gpus),
           "--master_addr", "127.0.0.1", "--master_port", str(port),
           os.path.join(rig.PKG_DIR, "tp_worker.py"), "--runs", str(a.runs),
           *(["--ep"] if a.ep else []), *(["--verify"] if a.verify else []),
           "--json", out("tp.json"), f"{dm}/{name}", f"{bm}/{name}"]
    rig.log(f"tp: torchrun of {a.gpus} ranks, {a.runs} rounds (output also in {out('torchrun.log')})")
    if rig.tee(cmd, out("torchrun.log"), env=env):
        rig.fail("tp: the torchrun job failed (its output is above)")
    with open(out("tp.json")) as f:
        out.write("table.txt", report(a, name, json.load(f), moe).text())


def report(a, name, j, moe):
    """The tables of the worker's figures @j (tp.json); @moe: a mixture-of-experts model
    (its time goal)."""
    total, tm = j["bytes"], j["times"]
    how = ("tp_plan=\"auto\" and expert parallelism" if a.ep else "tp_plan=\"auto\"")
    rep = Report(f"dmafs-bench tp: {name}, {a.gpus} ranks, {how}, bf16; dmafs over "
                 f"{a.members} members vs btrfs raid0 (-m raid1) over {a.members} others, "
                 f"{a.member_gb:g} GiB each (loop over /dev/shm); best of {a.runs}")
    rep.say(f"model files {total} bytes; transformers {j['transformers']}, torch {j['torch']}, "
            f"dmafs {j['dmafs']}, {j['device']}",
            "x btrfs: btrfs's best seconds over the row's (above 1 is faster)"
            + ("; the time goal is set for mixture-of-experts models" if moe else
               "; a dense model: no time goal"))
    t = Table("method", "best s", "median s", "GB/s", "x btrfs", "goal", "result", "note")
    base = min(tm["btrfs"])

    def loop_note(loop):
        """What transformers' loop skipped under dmafs.enable() (rank 0), said either way."""
        if not loop or loop[0] is None:
            return "; transformers' loop: no report (a dmafs without it)"
        copies, pool_off = loop
        return (f"; transformers' loop: {copies} converter copies skipped, " +
                ("thread pool off" if pool_off else "its thread pool KEPT (a tensor not placed "
                 "by dmafs, or a loop dmafs does not know)"))
    for meth in METHODS:
        best = min(tm[meth])
        asked = j.get("plan_seconds") or []
        note = (f"dmafs's own load {min(j['dmafs_seconds']):.3f} s (best"
                + (f"; of it {min(asked):.3f} s asking transformers what each rank takes"
                   if asked and max(asked) > 0 else "")
                + "), the rest transformers'" + loop_note(j.get("loop"))
                if meth == "dmafs+enable" and j["dmafs_seconds"] else "")
        if meth == "dmafs+enable" and moe:
            ratio, goal, result = rep.check(f"{name} dmafs+enable vs btrfs", base / best,
                                            GOAL_MOE)
        else:
            ratio, goal, result = times(base / best), "", ""
        t.add(meth, f"{best:.3f}", f"{statistics.median(tm[meth]):.3f}",
              f"{total / best / 1e9:.2f}", ratio, goal, result, note)
    rep.table(t)
    rep.table(ranks(rep, j))
    v = j.get("verify")
    if v:
        t = Table("check", "parameters", "differ", "goal", "result")
        shown, goal, result = rep.check("parameters that differ", sum(v["differ"]), GOAL_VERIFY)
        t.add("dmafs+enable vs btrfs, bit for bit (all ranks)", sum(v["parameters"]), shown,
              goal, result)
        rep.table(t)
    rep.verdict()
    return rep


def ranks(rep, j):
    """Per rank: the bytes it keeps of the model, the bytes dmafs placed for it (the last
    round's dmafs+enable load), their ratio against GOAL_BYTES."""
    kept, placed = j.get("kept") or [], j.get("placed") or []
    t = Table("rank", "bytes kept", "bytes placed", "placed / kept", "goal", "result")
    for r in range(j["world"]):
        k = kept[r] if r < len(kept) else None
        p = placed[r] if r < len(placed) else None
        ratio = p / k if k and p is not None else None
        t.add(r, "" if k is None else k, "" if p is None else p,
              *rep.check(f"rank {r} placed / kept", ratio, GOAL_BYTES))
    return t
