# SPDX-License-Identifier: MIT
"""models - cold loads of safetensors models: dmafs.load from dmafs against peer, a good
O_DIRECT loader reading btrfs raid0 over as many other members, and the first load after
a fresh mount. This module sets up and prints; the runner (loaders.py, under PYTHON with
torch) measures."""

import json
import os
import statistics
import subprocess
import time

from . import rig
from .args import Bad, Opt, choice, gib_opt, matching, number, whole
from .table import Goal, Report, Table, times

NAME = "models"
SUMMARY = "dmafs.load of safetensors models against a good loader reading btrfs raid0"
ABOUT = """
2N members of G GiB in /dev/shm with loop devices: dmafs on the first N, btrfs (raid0 data,
raid1 metadata) on the other N. Each model (dmafs-synth-model's names or model JSON files;
--scale F divides its dimensions above 64 by F) is written once into dmafs and copied to
btrfs with cp -a. Then, for each model, with the page cache dropped before every run and
the methods taken round by round, best of R:

dmafs.load: dmafs.load(model, device) from dmafs. peer: T threads reading 16 MiB chunks
with O_DIRECT into two pinned buffers each and copying them on a CUDA stream of their own
into one device buffer (with --device cpu, straight into one page-aligned host buffer),
from btrfs. cold: the first and second load after a fresh mount, in a fresh process
(cold-1st, cold-2nd). st-dmafs (safetensors.torch.load_file from dmafs), dmafs-load (the
program), ranks (a torch.distributed job: 1-rank, N-ranks, each-rank, N-ranks-shard) and
warm (the warm tier: tier-fill, warm) may be added to --methods.

Unless --no-verify, dmafs.load's and peer's tensors are compared bit for bit with
safetensors' once per model, outside the timing. Prints per model and method the seconds,
GB/s, the ratio to the first method, "x peer" (peer's seconds over the row's) and the
milliseconds per tensor, then the goals. PYTHON names the python with torch.
"""
GOAL_7B = Goal("peer's seconds / dmafs.load's, qwen2.5-7b models (7B class)", 1.25)
GOAL_06B = Goal("peer's seconds / dmafs.load's, qwen3-0.6b models (0.6B class)", 2.00)
GOAL_COLD = Goal("cold-1st's seconds / cold-2nd's", 1.15, at_most=True)
GOAL_RANKS = Goal("N-ranks' seconds / 1-rank's", 0.60, at_most=True)
GOAL_SHARD = Goal("N-ranks-shard's seconds / each-rank's", 0.55, at_most=True)
GOAL_TIER = Goal("cold-1st's seconds / tier-fill's (dmafs.load's without cold)", 0.97)
GOALS = (GOAL_7B, GOAL_06B, GOAL_COLD, GOAL_RANKS, GOAL_SHARD, GOAL_TIER)
PEER_GOALS = (("qwen2.5-7b", "7B class", GOAL_7B), ("qwen3-0.6b", "0.6B class", GOAL_06B))
METHODS = ("dmafs.load", "peer", "st-dmafs", "dmafs-load", "cold", "ranks", "warm")


def method_list(v):
    ms = [m.strip() for m in v.split(",") if m.strip()]
    bad = [m for m in ms if m not in METHODS]
    if not ms or bad:
        raise Bad("wants methods separated by commas, of " + ", ".join(METHODS))
    return ms


OPTIONS = [
    Opt("--members", "N", 4, whole(2, 16), "members for dmafs, and as many others for btrfs "
        "raid0: 2 to 16 (default 4)"),
    gib_opt("--member-gb", 6, 0.5, "size of each member in GiB (default 6, at least 0.5)"),
    Opt("--models", "M[,M...]", "qwen3-0.6b,qwen2.5-7b", None, "models to write and load: "
        "names dmafs-synth-model knows or model JSON files (default qwen3-0.6b,qwen2.5-7b)"),
    Opt("--scale", "F", None, number(1), "divide every dimension above 64 by F, at least 1 "
        "(the bytes shrink by about F x F; --scale 16 makes qwen3-0.6b about 250 times "
        "smaller); the models are then named MODEL-scaleF"),
    Opt("--runs", "R", 3, whole(1), "runs of each method; the table gives the best "
        "(default 3)"),
    Opt("--device", "cuda:N|cpu", "cuda:0", matching(r"(cpu|cuda(:[0-9]+)?)", "cuda:N or cpu"),
        "cuda:N or cpu: where the tensors go (default cuda:0)"),
    Opt("--dmafs-opts", "OPTS", "", None, "mount options for dmafs, for every mount and "
        "remount"),
    Opt("--methods", "LIST", ["dmafs.load", "peer", "cold"], method_list, "comma list of "
        + ", ".join(METHODS) + " (default dmafs.load,peer,cold)"),
    Opt("--peer-threads", "T", 8, whole(1), "threads of the peer loader (default 8)"),
    Opt("--tier-fill", "now|idle", "idle", choice("now", "idle"), "tier_fill= of the warm "
        "method's mounts (default idle, the mount's)"),
    Opt("--no-verify", help="do not compare the tensors with safetensors'"),
    Opt("--out", "DIR", None, None, "write the table, every run as JSON, the runner's output, "
        "the logs and a description of the machine to DIR (kept)"),
]


def run(a):
    mode = "models"
    a.member_mib = int(a.member_gb * 1024)
    rig.need_root(mode)
    rig.need(mode, "losetup", "mount", "umount", "cp")
    rig.need(mode, "mkfs.btrfs")
    v = subprocess.run(["mkfs.btrfs", "--version"], capture_output=True, text=True)
    if v.returncode:
        rig.fail(f"{mode}: mkfs.btrfs does not run (missing libraries? set LD_LIBRARY_PATH): "
                 f"{(v.stderr or v.stdout).strip()}")
    rig.need_fuse(mode)
    py, env = rig.python(), rig.child_env(PYTHONUNBUFFERED="1")
    rig.need_python(mode, py, "torch", env=env)
    dmafs = rig.program(mode, "dmafs", "fs/dmafs")
    mkfs = rig.program(mode, "mkfs.dmafs", "tools/mkfs.dmafs")
    synth = rig.script(mode, "dmafs-synth-model")
    tools = {}
    for name in ("dmafs-load", "dmafs-check"):  # optional: the runner says what it misses
        try:
            tools[name] = rig.program(mode, name, f"tools/{name}")
        except rig.Fail:
            tools[name] = ""
    if "dmafs-load" in a.methods and not tools["dmafs-load"]:
        rig.fail("models: method dmafs-load: dmafs-load not found (build it, or install dmafs)")
    need = 2 * a.members * a.member_mib + 256
    rig.need_shm(mode, need, f"2 x {a.members} members of {a.member_gb:g} GiB")
    out = rig.Out(mode, a.out)
    work = rig.workdir(mode, "dmafs", "btrfs")
    dm_mnt, bt_mnt = os.path.join(work, "dmafs"), os.path.join(work, "btrfs")

    rig.log(f"models: 2 x {a.members} members of {a.member_gb:g} GiB in /dev/shm (dmafs, then btrfs)")
    m = rig.Members("dmafs-bench-models", 2 * a.members, a.member_mib)
    dl, bl = m.loops[:a.members], m.loops[a.members:]
    rig.log(f"models: mkfs.dmafs over {' '.join(dl)}")
    rig.run([mkfs, *dl], what="mkfs.dmafs", log=out("mkfs.dmafs.log"))
    state = os.path.join(work, "dmafs-mount.json")
    fs = rig.Dmafs(dmafs, ",".join(dl), dm_mnt, a.dmafs_opts, out("dmafs.log"), state=state)
    fs.mount()
    rig.log(f"models: mkfs.btrfs -f -d raid0 -m raid1 over {' '.join(bl)}")
    bt = rig.Btrfs(bl, bt_mnt, out("mkfs.btrfs.log"))
    bt.make("-d", "raid0", "-m", "raid1")
    bt.mount()
    names = []
    sc = f"{a.scale:g}" if a.scale is not None else None
    for model in [x for x in a.models.split(",") if x]:
        name = os.path.basename(model).removesuffix(".json") + (f"-scale{sc}" if sc else "")
        rig.log(f"models: {name}: dmafs-synth-model --model {model}"
                + (f" --scale {sc}" if sc else "") + " into dmafs, cp -a to btrfs")
        rig.run([py, synth, "--model", model, *(["--scale", sc] if sc else []), "-q",
                 f"{dm_mnt}/{name}"], env=env,
                what=f"dmafs-synth-model --model {model} (room on {a.members} x "
                f"{a.member_gb:g} GiB?)")
        rig.run(["cp", "-a", f"{dm_mnt}/{name}", bt_mnt + "/"], what=f"copying {name} to btrfs")
        names.append(name)
    if not names:
        rig.fail("models: --models names no model")
    os.sync()
    pyv = subprocess.run([py, "-c", "import sys, torch; print(sys.version.split()[0], 'torch', "
                          "torch.__version__)"], capture_output=True, text=True, env=env)
    out.write("environment.txt", "".join(f"{k}: {v}\n" for k, v in (
        ("date", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        ("kernel", os.uname().release), ("cpus", os.cpu_count()),
        ("python", f"{py} ({(pyv.stdout or pyv.stderr).strip()})"),
        ("mkfs.btrfs", v.stdout.splitlines()[0] if v.stdout else "?"), ("dmafs", dmafs),
        ("dmafs options", a.dmafs_opts or "(none)"),
        ("dmafs members", f"{' '.join(dl)}; btrfs members: {' '.join(bl)} ({a.members} x "
         f"{a.member_gb:g} GiB each, loop over /dev/shm)"), ("models", " ".join(names)))))

    rig.log(f"models: measuring (output also in {out('bench-models.log')})")
    cmd = [py, os.path.join(rig.PKG_DIR, "loaders.py"), "--dmafs", dm_mnt, "--peer", bt_mnt,
           "--peer-threads", str(a.peer_threads), "--mount-state", state, "--device", a.device,
           "--runs", str(a.runs), "--methods", ",".join(a.methods), "--tier-fill", a.tier_fill,
           "--dmafs-load", tools["dmafs-load"], "--dmafs-check", tools["dmafs-check"],
           "--json", out("models.json"), *(["--verify"] if not a.no_verify else []), *names]
    rc = rig.tee(cmd, out("bench-models.log"), env=env)
    if rc:
        rig.fail(f"models: the measuring process failed (its output is above and in "
                 f"{out('bench-models.log')})")
    with open(out("models.json")) as f:
        rows = json.load(f)
    rep = Report(f"dmafs-bench models: dmafs over {a.members} members vs btrfs raid0 (-m raid1) "
                 f"over {a.members} others, {a.member_gb:g} GiB each (loop over /dev/shm); "
                 f"device {a.device}; best of {a.runs}")
    rep.say("seconds: the best run (median in models.json); speedup: over the model's first "
            "method; x peer: peer's seconds over the row's (above 1 is faster than peer)")
    rep.table(table(rows))
    rep.blank()
    rep.say("goals: the values measured on this run, not adjusted"
            + ("" if a.device.startswith("cuda") else
               f"; device {a.device}: the goals are set for GPU loads"))
    rep.table(goals(rep, rows))
    rep.verdict()
    out.write("table.txt", rep.text())


def table(rows):
    base, peer = {}, {}
    for r in rows:
        if "error" not in r:
            base.setdefault(r["model"], r["seconds"])
            if r["method"] == "peer":
                peer[r["model"]] = r["seconds"]
    t = Table("model", "method", "files", "tensors", "GB", "seconds", "GB/s", "speedup",
              "x peer", "ms/tensor", "note", left=("method",))
    for r in rows:
        if "error" in r:
            t.add(r["model"], r["method"], *[""] * 8, f"FAILED: {r['error']}")
            continue
        gb, s = r["bytes"] / 1e9, r["seconds"]
        t.add(r["model"], r["method"], r["files"], r["tensors"], f"{gb:.2f}", f"{s:.3f}",
              f"{gb / s:.2f}", times(base[r["model"]] / s),
              times(peer[r["model"]] / s) if r["model"] in peer else "-",
              f"{1e3 * s / r['tensors']:.3f}", r["note"])
    return t


def goals(rep, rows):
    """The goals table: the measured values as they are (information)."""
    ok = {(r["model"], r["method"]): r for r in rows if "error" not in r}
    t = Table("model", "measure", "ratio", "goal", "result", "note", left=("measure",))

    def line(model, what, value, goal, note=""):
        t.add(model, what, *rep.check(f"{model} {what}", value, goal), note)

    for m in dict.fromkeys(r["model"] for r in rows):
        short = os.path.basename(m.rstrip("/"))
        for prefix, cls, goal in PEER_GOALS:
            if not short.startswith(prefix):
                continue
            d, p = ok.get((m, "dmafs.load")), ok.get((m, "peer"))
            value = p["seconds"] / d["seconds"] if d and p else None
            note = "" if short == prefix else "(a scaled-down model; the goal is set for the full one)"
            if d and p and len(d["runs"]) == len(p["runs"]) > 1:
                pairs = [y / x for x, y in zip(d["runs"], p["runs"])]
                note = (f"(round by round: median {statistics.median(pairs):.2f}x, "
                        f"{min(pairs):.2f}-{max(pairs):.2f}) " + note).strip()
            line(m, f"dmafs.load vs peer ({cls})", value, goal, note)
        c1, c2 = ok.get((m, "cold-1st")), ok.get((m, "cold-2nd"))
        if c1 and c2:
            # cold-2nd is a handful of loads in as many processes; the warm dmafs.load rows
            # of this run are a second yardstick against which a slow cold-2nd shows
            d = ok.get((m, "dmafs.load"))
            warm = (f"; cold-1st {c1['seconds'] / d['seconds']:.2f}x dmafs.load's best of this "
                    "run" if d else "")
            line(m, "cold-1st vs cold-2nd", c1["seconds"] / c2["seconds"], GOAL_COLD,
                 f"(load #1 began {min(c1['gap_seconds']):.2f} s after the remount returned{warm})")
        elif any(r["model"] == m and r["method"].startswith("cold") for r in rows):
            line(m, "cold-1st vs cold-2nd", None, GOAL_COLD)
        # tier-fill is a fresh process's first load after a remount: cold-1st (the same,
        # without the tier) is its yardstick when it ran; else the warm dmafs.load rows
        fill = ok.get((m, "tier-fill"))
        base = ok.get((m, "cold-1st")) or ok.get((m, "dmafs.load"))
        if fill and base:
            line(m, f"tier-fill vs {base['method']} (rate)", base["seconds"] / fill["seconds"],
                 GOAL_TIER, "(the first load after a remount, with the tier, against one without "
                 "it)" if base["method"] == "cold-1st" else "(the first load after a remount, "
                 "with the tier, against loads without it in a warm process and mount: add the "
                 "cold method for like against like)")
        one = ok.get((m, "1-rank"))
        many = [r for r in rows if r["model"] == m and "error" not in r
                and r["method"].endswith("-ranks")]
        if one and many:
            line(m, f"{many[0]['method']} vs 1-rank", many[0]["seconds"] / one["seconds"],
                 GOAL_RANKS)
        each = ok.get((m, "each-rank"))
        shard = [r for r in rows if r["model"] == m and "error" not in r
                 and r["method"].endswith("-ranks-shard")]
        if each and shard:
            line(m, f"{shard[0]['method']} vs each-rank", shard[0]["seconds"] / each["seconds"],
                 GOAL_SHARD)
    return t
