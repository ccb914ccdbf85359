#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# soak_work.py - the concurrency soak workload for tests/soak.sh (python3 stdlib only).
#
# Usage:
#   soak_work.py run MNT STATE.json SECONDS [WRITERS] [READERS] [SEED]
#       Random operations from WRITERS processes in a shared tree MNT/shared plus a
#       private directory MNT/wN per writer, READERS processes walking and reading
#       the tree, for SECONDS.  Each writer keeps an in-memory model of its private
#       directory (names, contents, hard links, symlinks, user.* xattrs) and checks
#       it with reads during the run and at the end.  The models (hashes, sizes,
#       xattrs, link groups) are saved to STATE.json, outside the mount.
#   soak_work.py verify MNT STATE.json
#       Check the private directories against STATE.json (after a remount).
# Exit 0 = all checks passed, 1 = a check failed or an unexpected errno was seen.
# The limits and Stats that the processes share are in soak_work_common.py, the writers in
# soak_work_writer.py (in this directory).

import errno
import hashlib
import json
import multiprocessing as mp
import os
import random
import stat
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from soak_work_common import MIB, N_SHARED_DIRS, Stats, say  # noqa: E402
from soak_work_writer import Writer  # noqa: E402


# ---------------------------------------------------------------------------
# readers

def reader_main(mnt, idx, deadline, status, out):
    st = Stats(mnt, f"reader{idx}")
    rng = random.Random(idx * 7919)

    def onerr(e):
        st.err("walk", getattr(e, "filename", "?"), e, races_ok=True)

    try:
        while time.monotonic() < deadline:
            for root, dirs, files in os.walk(mnt, onerror=onerr):
                st.op("walk-dir")
                for name in files + dirs:
                    p = os.path.join(root, name)
                    status.value = f"lstat {p}".encode()[:255]
                    try:
                        s = os.lstat(p)
                        st.op("stat")
                        if stat.S_ISLNK(s.st_mode):
                            try:
                                os.readlink(p)
                            except OSError as e:
                                # EINVAL: a writer renamed a file over the symlink
                                # between the lstat and the readlink.
                                if e.errno != errno.EINVAL:
                                    raise
                                try:
                                    if stat.S_ISLNK(os.lstat(p).st_mode):
                                        raise e
                                except FileNotFoundError:
                                    pass
                                st.races["EINVAL"] = st.races.get("EINVAL", 0) + 1
                            st.op("readlink")
                        elif stat.S_ISREG(s.st_mode):
                            status.value = f"read {p}".encode()[:255]
                            with open(p, "rb") as f:
                                while f.read(1 * MIB):
                                    pass
                            st.op("read")
                            if rng.random() < 0.2:
                                for k in os.listxattr(p):
                                    try:
                                        os.getxattr(p, k)
                                    except OSError as e:
                                        if e.errno != errno.ENODATA:
                                            raise
                                st.op("getxattr")
                    except OSError as e:
                        st.err("read", p, e, races_ok=True)
                if time.monotonic() >= deadline:
                    break
    except Exception:
        st.bad("reader exception: " + traceback.format_exc())
    with open(out, "w") as f:
        json.dump({"result": st.result()}, f)


def writer_main(mnt, idx, seed, deadline, status, out):
    w = Writer(mnt, idx, seed, deadline, status)
    model = None
    try:
        model = w.run()
    except Exception:
        w.st.bad("writer exception: " + traceback.format_exc())
    with open(out, "w") as f:
        json.dump({"result": w.st.result(), "model": model}, f)


# ---------------------------------------------------------------------------
# commands

def report(results):
    """Print the counts; return True when nothing unexpected happened."""
    ok = True
    total = {}
    races = {}
    for r in results:
        for k, v in r["ops"].items():
            total[k] = total.get(k, 0) + v
        for k, v in r["races"].items():
            races[k] = races.get(k, 0) + v
        ops = sum(r["ops"].values())
        say(f"{r['who']}: {ops} operations, {r['n_unexpected']} unexpected errors, "
            f"{len(r['mismatch'])} model mismatches, ENOSPC on a full fs {r['enospc_full']}")
        for u in r["unexpected"][:10]:
            say(f"  UNEXPECTED {r['who']}: {u[0]} {u[1]}: {u[2]} ({u[3]})")
            ok = False
        if r["n_unexpected"]:
            ok = False
        for m in r["mismatch"][:10]:
            say(f"  MISMATCH {r['who']}: {m}")
            ok = False
    say("operation counts (all processes): " +
        ", ".join(f"{k}={v}" for k, v in sorted(total.items())))
    say("accepted races: " + (", ".join(f"{k}={v}" for k, v in sorted(races.items())) or "none"))
    say(f"total operations: {sum(total.values())}")
    return ok


def cmd_run(mnt, state, seconds, nw=6, nr=2, seed=None):
    seconds, nw, nr = float(seconds), int(nw), int(nr)
    seed = int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little")
    say(f"{nw} writers, {nr} readers for {seconds:g} s in {mnt}; seed {seed}")
    shared = os.path.join(mnt, "shared")
    for i in range(N_SHARED_DIRS):
        os.makedirs(os.path.join(shared, f"d{i}"), exist_ok=True)
    outdir = os.path.dirname(os.path.abspath(state))
    ctx = mp.get_context("fork")
    deadline = time.monotonic() + seconds
    procs = []
    for i in range(nw):
        status = ctx.Array("c", 256, lock=False)
        out = os.path.join(outdir, f"soak-writer{i}.json")
        p = ctx.Process(target=writer_main,
                        args=(mnt, i, seed * 1000 + i, deadline, status, out))
        procs.append((f"writer{i}", p, status, out))
    for i in range(nr):
        status = ctx.Array("c", 256, lock=False)
        out = os.path.join(outdir, f"soak-reader{i}.json")
        p = ctx.Process(target=reader_main, args=(mnt, i, deadline, status, out))
        procs.append((f"reader{i}", p, status, out))
    for _, p, _, out in procs:
        if os.path.exists(out):
            os.unlink(out)
        p.start()
    # A hang (a request the daemon never answers) shows as a process that does not
    # finish well after the deadline; say which and what it was doing.
    hard = deadline + 120 + 10 * seconds
    hung = []
    for who, p, status, _ in procs:
        p.join(max(0.0, hard - time.monotonic()))
        if p.is_alive():
            hung.append(who)
            say(f"HANG: {who} (pid {p.pid}) still running 120 s after the deadline; "
                f"last operation: {status.value.decode(errors='replace')}")
    if hung:
        for who, p, _, _ in procs:
            if p.is_alive():
                p.kill()
        return 1
    results, models = [], []
    ok = True
    for who, p, _, out in procs:
        if p.exitcode != 0 or not os.path.exists(out):
            say(f"FAIL: {who} exited {p.exitcode} without a result")
            ok = False
            continue
        with open(out) as f:
            d = json.load(f)
        os.unlink(out)
        results.append(d["result"])
        if who.startswith("writer"):
            if d["model"] is None:
                ok = False
            else:
                models.append(d["model"])
    ok = report(results) and ok
    nfiles = sum(len(m["names"]) for m in models)
    nbytes = sum(v.get("size", 0) for m in models for v in m["names"].values())
    say(f"private models: {nfiles} names, {nbytes} bytes in {len(models)} directories")
    with open(state, "w") as f:
        json.dump({"seed": seed, "models": models}, f)
    return 0 if ok else 1


def cmd_verify(mnt, state):
    with open(state) as f:
        st = json.load(f)
    bad = []
    checked = 0
    for m in st["models"]:
        # the saved paths name the mount point of the run; re-root them on MNT
        pdir = os.path.join(mnt, os.path.basename(m["dir"]))
        names = m["names"]
        subdirs = m["subdirs"]
        try:
            for sub in [""] + subdirs:
                d = os.path.join(pdir, sub) if sub else pdir
                want = sorted([r.rsplit("/", 1)[-1] for r in names
                               if (r.rsplit("/", 1)[0] if "/" in r else "") == sub] +
                              (list(subdirs) if sub == "" else []))
                got = sorted(os.listdir(d))
                if got != want:
                    bad.append(f"listdir {d} = {got}, expected {want}")
            groups = {}
            for rel, v in sorted(names.items()):
                p = os.path.join(pdir, rel)
                checked += 1
                if v["type"] == "symlink":
                    t = os.readlink(p)
                    if t != v["target"]:
                        bad.append(f"readlink {p} = {t!r}, expected {v['target']!r}")
                    continue
                groups.setdefault(v["obj"], []).append(p)
                with open(p, "rb") as f:
                    data = f.read()
                if len(data) != v["size"] or hashlib.sha256(data).hexdigest() != v["sha256"]:
                    bad.append(f"{p}: {len(data)} bytes sha256 "
                               f"{hashlib.sha256(data).hexdigest()[:16]}, expected "
                               f"{v['size']} bytes sha256 {v['sha256'][:16]}")
                keys = sorted(k for k in os.listxattr(p) if k.startswith("user."))
                if keys != sorted(v["xattrs"]):
                    bad.append(f"{p}: xattrs {keys}, expected {sorted(v['xattrs'])}")
                for k, x in v["xattrs"].items():
                    if k in keys and os.getxattr(p, k).hex() != x:
                        bad.append(f"{p}: xattr {k} differs")
            for oid, ps in groups.items():
                inos = {os.lstat(p).st_ino for p in ps}
                nl = {os.lstat(p).st_nlink for p in ps}
                if len(inos) != 1 or nl != {len(ps)}:
                    bad.append(f"links {ps}: inodes {inos}, nlink {nl}, expected one "
                               f"inode with nlink {len(ps)}")
        except OSError as e:
            bad.append(f"{pdir}: {e}")
    for b in bad[:30]:
        say(f"MISMATCH after remount: {b}")
    say(f"verified {checked} names in {len(st['models'])} private directories: "
        f"{len(bad)} mismatches")
    return 0 if not bad else 1


def main(argv):
    if len(argv) >= 4 and argv[1] == "run":
        return cmd_run(*argv[2:])
    if len(argv) == 4 and argv[1] == "verify":
        return cmd_verify(argv[2], argv[3])
    print(__doc__ if __doc__ else "usage: soak_work.py run|verify ...", file=sys.stderr)
    print("usage: soak_work.py run MNT STATE SECONDS [WRITERS] [READERS] [SEED]\n"
          "       soak_work.py verify MNT STATE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
