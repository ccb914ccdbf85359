# SPDX-License-Identifier: MIT
"""fair - one user's loads beside another's: the small model's load time alone, beside
loads of the large one by the same user, and by another user."""

import os
import subprocess
import time

from . import rig
from .args import Opt, matching, number, whole
from .table import Goal, Report, Table, ratio, times

NAME = "fair"
SUMMARY = "a small model's load alone and beside another user's loads of a large one"
ABOUT = """
Writes Qwen2.5-7B and Qwen3-0.6B shaped models (dmafs-synth-model, divided by --scale) to
a dmafs mount (allow_other) over N members of G GiB in /dev/shm, then times R loads of
the small model with dmafs.load() into the target, in one Python process whose first
load (which sets up the target) is not counted: alone, beside a process of root's
loading the large model back to back (the same user), and beside the same process run as
nobody (another user). Prints the median of each and its ratio to the time alone. Needs
PYTHON with torch and the dmafs module.
"""
GOAL = Goal("small model's load beside another user's loads / alone", 2.50, at_most=True)
GOALS = (GOAL,)
OPTIONS = [
    Opt("--members", "N", 8, whole(1, 64), "number of members, 1 to 64 (default 8)"),
    Opt("--member-gb", "G", 4, whole(1, what="a whole number of GiB"), "size of each member "
        "in GiB, a whole number (default 4; the models at scale 1 take 16.7 GB)"),
    Opt("--target", "host|cuda:N|hip:N", "host", matching(r"(host|cuda:[0-9]+|hip:[0-9]+)", "host, cuda:N or "
                                          "hip:N"),
        "host (shared host memory; torch's CPU tensors), cuda:N or hip:N (default host)"),
    Opt("--scale", "F", 1, number(1), "divide the models' dimensions by F, at least 1 "
        "(default 1)"),
    Opt("--rounds", "R", 5, whole(1), "loads of the small model per case (default 5)"),
    Opt("--dmafs-opts", "OPTS", "", None, "mount options for dmafs (added to allow_other)"),
]

# The timed process: a load of the small model to set up the target, then R timed loads
# (tensors made and freed); prints the median seconds. argv: PATH DEVICE R
SERIES = r"""
import statistics, sys, time
import dmafs
path, dev, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
dmafs.load(path, device=dev)
t = []
for _ in range(n):
    t0 = time.perf_counter()
    sd = dmafs.load(path, device=dev)
    if dev.startswith("cuda"):
        import torch
        torch.cuda.synchronize(dev)
    t.append(time.perf_counter() - t0)
    del sd
print(statistics.median(t))
"""
# Loads of the large model back to back while the file GO exists; then writes their
# count to GO.n. argv: GO PATH DEVICE
BESIDE = r"""
import os, sys
import dmafs
go, path, dev = sys.argv[1:4]
n = 0
while os.path.exists(go):
    sd = dmafs.load(path, device=dev)
    del sd
    n += 1
open(go + ".n", "w").write(f"{n}\n")
"""


def run(a):
    rig.need_root("fair", "loop devices, mount, a second user")
    rig.need("fair", "losetup", "setpriv")
    rig.need_fuse("fair")
    dmafs = rig.program("fair", "dmafs", "fs/dmafs")
    mkfs = rig.program("fair", "mkfs.dmafs", "tools/mkfs.dmafs")
    synth = rig.script("fair", "dmafs-synth-model")
    py, env = rig.python(), rig.child_env()
    rig.need_python("fair", py, "dmafs", env=env)
    rig.need_shm("fair", a.members * (a.member_gb << 10) + 256,
                 f"{a.members} members of {a.member_gb} GiB")
    out = rig.Out("fair")
    work = rig.workdir("fair", "dmafs", "ctl")
    mnt, ctl = os.path.join(work, "dmafs"), os.path.join(work, "ctl")
    os.chmod(work, 0o755)  # nobody reaches the mount and the control files
    os.chmod(ctl, 0o1777)
    rig.log(f"fair: {a.members} members of {a.member_gb} GiB in /dev/shm")
    m = rig.Members("dmafs-bench-fair", a.members, a.member_gb << 10)
    rig.run([mkfs, "-q", *m.loops], what="mkfs.dmafs")
    fs = rig.Dmafs(dmafs, m.csv(), mnt, ",".join(o for o in ("allow_other", a.dmafs_opts) if o),
                   out("dmafs.log"))
    fs.mount()
    os.chmod(mnt, 0o755)
    rig.log(f"fair: writing the models (scale {a.scale:g}) to {a.members} members")
    for model, name in (("qwen2.5-7b", "big"), ("qwen3-0.6b", "small")):
        rig.run([py, synth, "-q", "--model", model, "--scale", f"{a.scale:g}", f"{mnt}/{name}"],
                what=f"dmafs-synth-model {model}", env=env)
        rig.run(["chmod", "-R", "a+rX", f"{mnt}/{name}"])
    dev = "cpu" if a.target == "host" else a.target
    go = os.path.join(ctl, "go")
    rig.on_exit(lambda rc: [os.unlink(f) for f in (go, go + ".n") if os.path.exists(f)])

    def series(name):
        r = subprocess.run([py, "-c", SERIES, f"{mnt}/{name}", dev, str(a.rounds)],
                           stdout=subprocess.PIPE, text=True, env=env)
        if r.returncode:
            rig.fail("fair: loading the model failed (see above)")
        return float(r.stdout.split()[-1])

    def beside(*prefix):
        open(go, "w").close()
        os.chmod(go, 0o644)
        with open(out("beside.err"), "w") as err:
            p = rig.child(subprocess.Popen([*prefix, py, "-c", BESIDE, go, f"{mnt}/big", dev],
                                           stdout=subprocess.DEVNULL, stderr=err, env=env,
                                           start_new_session=True), group=True)
        time.sleep(3)
        return p

    def stop(p):
        os.unlink(go)
        if p.wait():
            rig.fail(f"fair: a load of the large model failed: {rig.tail(out('beside.err'))}")
        with open(go + ".n") as f:
            rig.log(f"fair: {f.read().strip()} loads of the large model meanwhile")
        os.unlink(go + ".n")

    alone = series("small")
    big = series("big")
    p = beside()
    same = series("small")
    stop(p)
    p = beside("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
    other = series("small")
    stop(p)
    rep = Report(f"dmafs-bench fair: {a.members} members (loop devices over /dev/shm), target "
                 f"{a.target}, models at scale {a.scale:g}, {a.rounds} loads each")
    rep.say("seconds: the median of the loads; x alone: over the small model's load alone")
    t = Table("small model load (Qwen3-0.6B shapes)", "seconds", "x alone", "goal", "result")
    t.add("alone", f"{alone:.4f}", times(1.0))
    t.add("beside large loads by the same user", f"{same:.4f}", times(ratio(same, alone)))
    t.add("beside large loads by another user", f"{other:.4f}",
          *rep.check("beside large loads by another user", ratio(other, alone), GOAL))
    t.add("(the large model's load alone, Qwen2.5-7B shapes)", f"{big:.4f}")
    rep.table(t)
    rep.verdict()
