# SPDX-License-Identifier: MIT
"""fresh - the models runner's methods that load in fresh processes: cold (the first load
after a remount, and the second in the same process), warm (the warm tier: a remount with
tier=, the first load, then another process's), and ranks (a torch.distributed job).
Mixed into loaders.Bench; the processes are cold_child.py and ranks_child.py."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from dmafs_bench import rig

HERE = os.path.dirname(os.path.abspath(__file__))


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


class Fresh:
    def cold_run(self, path):
        """One cold run: remount, fresh process, loads #1 and #2. Returns the child's JSON
        with "gap" (seconds from the remount's end to load #1's start) added."""
        self.release()  # no host placement of this process may keep the mount busy
        drop_caches()
        self.remount()
        mounted = time.time()
        cmd = [sys.executable, os.path.join(HERE, "cold_child.py"), path, str(self.dev), "1"]
        c = subprocess.run(cmd, capture_output=True, text=True)
        if c.stderr.strip():
            sys.stderr.write("".join(f"cold: {line}\n" for line in c.stderr.strip().splitlines()))
        if c.returncode:
            raise RuntimeError(f"the cold-start process exited {c.returncode}: "
                               f"{c.stderr.strip()[-2000:]}")
        out = json.loads(c.stdout.strip().splitlines()[-1])
        out["gap"] = out["start"] - mounted
        return out

    def ranks(self, path, info):
        a = self.a
        self.release()
        world = a.ranks
        label = f"{world}-ranks"
        with tempfile.TemporaryDirectory(prefix="dmafs-bench-ranks.") as d:
            cmd = [sys.executable, os.path.join(HERE, "ranks_child.py"), path, self.dev.type,
                   str(world), str(a.runs), "1", os.path.join(d, "store")]
            c = subprocess.run(cmd, capture_output=True, text=True)
        if c.returncode:
            return [{"model": info["model"], "method": "ranks",
                     "error": f"the {world}-rank job exited {c.returncode}: {c.stderr.strip()[-2000:]}"}]
        out = json.loads(c.stdout.strip().splitlines()[-1])
        if not out["equal"]:
            raise SystemExit(f"dmafs-bench: models: {path}: load_distributed's tensors or a "
                             "shard's differ from dmafs.load's in at least one rank")
        rows = []
        best = {k: out[k].index(min(out[k])) for k in ("1-rank", "N-ranks", "shard")}
        for key, method, note in (("1-rank", "1-rank", out["notes"]["1-rank-runs"][best["1-rank"]]),
                                  ("N-ranks", label, out["notes"]["N-ranks-runs"][best["N-ranks"]]),
                                  ("each-rank", "each-rank", f"dmafs.load in all {world} ranks"),
                                  ("shard", f"{label}-shard",
                                   out["notes"]["shard-runs"][best["shard"]])):
            t = out[key]
            rows.append(dict(info, method=method, seconds=min(t), median=statistics.median(t),
                             runs=t, note=note))
        print(f"verify  {label} {path}: load_distributed, and the shard's slices, equal to "
              "dmafs.load's in every rank", flush=True)
        return rows

    def one_load(self, path):
        """dmafs.load of @path once in a fresh process (its pages dropped first): the child's
        JSON."""
        cmd = [sys.executable, os.path.join(HERE, "cold_child.py"), path, str(self.dev), "1", "1"]
        c = subprocess.run(cmd, capture_output=True, text=True)
        if c.returncode:
            raise RuntimeError(f"the loading process exited {c.returncode}: "
                               f"{c.stderr.strip()[-2000:]}")
        return json.loads(c.stdout.strip().splitlines()[-1])

    def remount(self, extra=""):
        """Unmount the dmafs mount and mount it again (@extra: options for this mount)."""
        try:
            rig.Dmafs.load(self.a.mount_state).remount(extra)
        except rig.Fail as e:
            raise RuntimeError(f"remount{' -o ' + extra if extra else ''}: {e}") from None

    @staticmethod
    def tier_held(path):
        """Bytes of the model's files in the warm tier (their user.dmafs.tier)."""
        files = [os.path.join(path, n) for n in os.listdir(path)] if os.path.isdir(path) \
            else [path]
        held = 0
        for f in files:
            if f.endswith(".safetensors"):
                held += int(os.getxattr(f, "user.dmafs.tier").decode().strip() or 0)
        return held

    def tier_info(self, path):
        """The mount's warm tier as dmafs-check --json reports it ({} without dmafs-check)."""
        check = self.a.dmafs_check
        if not check:
            return {}
        c = subprocess.run([check, "--json", path], capture_output=True, text=True)
        try:
            return (json.loads(c.stdout).get("mount") or {}).get("tier") or {}
        except ValueError:
            return {}

    def wait_pinned(self, path, limit=120.0, stall=2.0):
        """Seconds until the tier of @path's mount is pinned whole (tier_pin=all, on a GPU
        machine), or None when it is not reported, or its pinned bytes stop growing for
        @stall seconds short of its size (tier_pin=fill, pinning failed), or @limit
        passes."""
        t0 = last = time.perf_counter()
        seen = -1
        while time.perf_counter() - t0 < limit:
            t = self.tier_info(path)
            pinned = t.get("pinned") or 0
            if not t.get("size"):
                return None
            if pinned >= t["size"]:
                return time.perf_counter() - t0
            if pinned != seen:
                seen, last = pinned, time.perf_counter()
            elif time.perf_counter() - last > stall:
                return None
            time.sleep(0.05)
        return None

    def wait_held(self, path, want, since, limit=120.0, stall=3.0):
        """(seconds, first): when the tier first held @want bytes of the model
        (tier_fill=idle fills it after the load), counted from the wall-clock time @since
        (the load's end), and whether the first look already found it full (the time is
        then an upper bound: the look came after the loading process exited). None when
        it stops growing for @stall seconds short of it."""
        t0 = last = time.perf_counter()
        seen = -1
        while time.perf_counter() - t0 < limit:
            held = self.tier_held(path)
            if held >= want:
                return time.time() - since, seen < 0
            if held != seen:
                seen, last = held, time.perf_counter()
            elif time.perf_counter() - last > stall:
                return None
            time.sleep(0.02)
        return None

    def warm(self, path, info):
        """Rows tier-fill and warm (see the module's help)."""
        size = self.a.tier or f"{(info['bytes'] * 11 // 10 >> 20) + 64}M"
        opts = f"tier={size},tier_fill={self.a.tier_fill}"
        fill, warm, shares, waits, pins, fills = [], [], [], [], [], []
        self.release()
        try:
            for _ in range(self.a.runs):
                drop_caches()
                self.remount(opts)
                if self.dev.type == "cuda":
                    waits.append(self.wait_pinned(path))
                first = self.one_load(path)["loads"][0]
                fill.append(first["seconds"])
                if self.a.tier_fill == "idle":
                    fills.append(self.wait_held(path, info["bytes"], first["end"]))
                shares.append(self.tier_held(path) / max(info["bytes"], 1))
                warm.append(self.one_load(path)["loads"][0]["seconds"])
                t = self.tier_info(path)
                pins.append((t.get("pinned") or 0, t.get("size") or 0))
            if self.a.verify:  # the bytes the tier serves, as the fill left them
                import dmafs

                def served():
                    st = dmafs.last_stats()
                    return f" ({(st.tier_bytes or 0) / max(st.bytes, 1):.1%} of its bytes from the tier)"
                self.verify_one(f"warm ({opts})", self.m_dmafs, path, served)
        except Exception as e:
            return [{"model": info["model"], "method": "warm", "error": f"{type(e).__name__}: {e}"}]
        finally:
            try:
                self.remount()  # the methods after this one run without the tier
            except Exception as e:
                print(f"dmafs-bench: models: remounting without the tier failed: {e}",
                      file=sys.stderr)
        b = warm.index(min(warm))
        waited = ""
        if waits:
            w = waits[fill.index(min(fill))]
            waited = ("; the tier was pinned whole %.2f s after the remount, before the load"
                      % w if w is not None else "; the tier was not reported pinned whole "
                      "(tier_pin=fill, or no dmafs-check): the load did not wait")
        if fills:
            f = fills[fill.index(min(fill))]
            waited += ("; tier_fill=idle: it filled nothing, the tier held the model "
                       "%s%.2f s after it ended%s" % (("at most " if f[1] else ""), f[0],
                       " (seen full at the first look, once the loading process had exited)"
                       if f[1] else "") if f is not None else
                       "; tier_fill=idle: it filled nothing, and the tier did not come to "
                       "hold the model after it")
        return [dict(info, method="tier-fill", seconds=min(fill), median=statistics.median(fill),
                     runs=fill, note=f"first load after a remount with {opts}"
                     f"{', filling it' if not fills else ''}{waited}"),
                dict(info, method="warm", seconds=min(warm), median=statistics.median(warm),
                     runs=warm, note=f"another process; the tier held {shares[b]:.1%} of the "
                     f"model's bytes before it ({opts})" +
                     (f"; {pins[b][0] / 2**30:.2f} of its {pins[b][1] / 2**30:.2f} GiB pinned "
                      "after it (dmafs-check)" if pins and pins[b][1] and
                      self.dev.type == "cuda" else ""))]

    def cold(self, path, info):
        runs = []
        try:
            for _ in range(self.a.runs):
                runs.append(self.cold_run(path))
        except Exception as e:
            return [{"model": info["model"], "method": "cold", "error": f"{type(e).__name__}: {e}"}]
        first = [r["loads"][0]["seconds"] for r in runs]
        second = [r["loads"][1]["seconds"] for r in runs]
        gaps = [r["gap"] for r in runs]
        ratio = min(first) / min(second)
        b = first.index(min(first))
        gap = f"{min(gaps):.2f}"
        if f"{max(gaps):.2f}" != gap:
            gap += f"-{max(gaps):.2f}"
        note1 = (f"1st/2nd {ratio:.2f}; load #1 began {gap} s after the remount returned; "
                 f"path {runs[b]['loads'][0]['path']}")
        note2 = f"same process, after del + empty_cache; path {runs[b]['loads'][1]['path']}"
        return [dict(info, method="cold-1st", seconds=min(first), median=statistics.median(first),
                     runs=first, note=note1, gap_seconds=gaps, ratio=ratio,
                     ratio_runs=[f / s for f, s in zip(first, second)]),
                dict(info, method="cold-2nd", seconds=min(second), median=statistics.median(second),
                     runs=second, note=note2)]
