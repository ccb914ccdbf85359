# SPDX-License-Identifier: MIT
"""loaders - the models mode's runner: times loading safetensors models into GPU (or
host) memory, cold, and writes every run as JSON; `dmafs-bench models` sets up the
mounts, runs this under PYTHON (with torch) and prints the table.

usage: python loaders.py --dmafs DIR --peer DIR --mount-state FILE --json FILE [options]
                         MODEL...

For every model (a directory below --dmafs, and of the same name below --peer) each
method runs --runs times, round by round (every method once per round, in turn), the
page cache dropped before every run:

  dmafs.load  dmafs.load(dmafs/MODEL, device): one placement of all shards
  peer        the loader a capable user writes without dmafs, from --peer: all shards'
              bytes in 16 MiB chunks handed out to --peer-threads threads; each reads its
              chunks with O_DIRECT preadv into one of its two pinned buffers and copies
              them with non_blocking copies on its own CUDA stream into one device buffer
              holding all files (an event per pinned buffer guards its reuse); tensors are
              views of that buffer. With --device cpu: O_DIRECT preadv straight into one
              page-aligned host buffer.
  st-dmafs    safetensors.torch.load_file(shard, device) per shard, from dmafs
  dmafs-load  the dmafs-load program (--dmafs-load) with --model; its own GB/s is noted
  cold, warm, ranks  in fresh processes: fresh.py

--verify compares dmafs.load's and peer's tensors with safetensors' (a plain pread of
each tensor where safetensors is not importable) once per model, outside the timing.
The dmafs mount is remounted through the state file --mount-state (rig.Dmafs).
"""

import argparse
import ctypes
import errno
import gc
import json
import mmap
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time

if __name__ == "__main__":  # run by path: its package is the folder above
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dmafs_bench.fresh import Fresh, drop_caches  # noqa: E402

METHODS = ("dmafs.load", "peer", "st-dmafs", "dmafs-load", "cold", "ranks", "warm")

# peer's unit of work, and O_DIRECT's alignment of file offsets, lengths and addresses
CHUNK = 16 << 20
ALIGN = 4096

# safetensors dtype name -> torch attribute (as dmafs/_torch.py)
TORCH_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
                "F16": "float16", "BF16": "bfloat16", "I32": "int32", "U32": "uint32",
                "F32": "float32", "F64": "float64", "I64": "int64", "U64": "uint64",
                "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def shards(path):
    """The .safetensors files of a model path: a file, or a directory's *.safetensors."""
    if os.path.isdir(path):
        return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".safetensors"))
    return [path]


def header(fn):
    with open(fn, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return 8 + n, h


def align_up(n, a=ALIGN):
    return (n + a - 1) // a * a


def pread_direct(fd, mv, off, n, fn):
    """Read n bytes at file offset off into mv with O_DIRECT; returns n.

    off and mv's address must be multiples of 4096, and mv must hold n rounded up to 4096:
    O_DIRECT wants aligned lengths too, so a file's tail is asked for with the rounded-up
    length and comes back short (the kernel stops at the end of the file). Raises OSError
    on an early end of file or an unaligned short read in the middle of a file."""
    want = align_up(n)
    got = 0
    while got < n:
        r = os.preadv(fd, [mv[got:want]], off + got)
        if r <= 0:
            raise OSError(errno.EIO, f"unexpected end of file at byte {off + got} "
                          f"(wanted {n} bytes from {off})", fn)
        got += r
        if got < n and got % ALIGN:
            raise OSError(errno.EIO, f"O_DIRECT read at {off} returned {got} of {n} bytes, "
                          "not a multiple of 4096", fn)
    return n


class Bench(Fresh):
    def __init__(self, args, torch):
        self.a = args
        self.torch = torch
        self.dev = torch.device(args.device)
        self.cuda = self.dev.type == "cuda"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.dev)

    def release(self):
        """After a load's tensors are gone: give device memory back, and make sure no
        host placement of dmafs stays mapped (it would keep the mount busy)."""
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    # ---- the methods: each returns {name: tensor} on the device ----

    def m_dmafs(self, path):
        import dmafs
        return dmafs.load(path, device=self.dev)

    def m_st(self, path):
        from safetensors.torch import load_file
        out = {}
        for fn in shards(path):
            out.update(load_file(fn, device=str(self.dev)))
        return out

    def dtype(self, name, fn, tensor):
        dt = getattr(self.torch, TORCH_DTYPES.get(name, ""), None)
        if dt is None:
            raise TypeError(f"{fn}: tensor {tensor!r} has dtype {name}, which this "
                            f"torch {self.torch.__version__} cannot represent")
        return dt

    def m_naive(self, path):
        torch = self.torch
        out = {}
        for fn in shards(path):
            base, h = header(fn)
            fd = os.open(fn, os.O_RDONLY)
            try:
                for name, t in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
                    s, e = t["data_offsets"]
                    b = bytearray(e - s)
                    if e > s:
                        os.preadv(fd, [b], base + s)
                        u8 = torch.frombuffer(b, dtype=torch.uint8)
                    else:
                        u8 = torch.empty(0, dtype=torch.uint8)
                    out[name] = u8.view(self.dtype(t["dtype"], fn, name)).reshape(t["shape"]).to(self.dev)
            finally:
                os.close(fd)
        return out

    def m_peer(self, path):
        """All files of the model, whole, into one buffer on the device (4096-aligned file
        bases), read with O_DIRECT by --peer-threads threads in 16 MiB chunks."""
        torch = self.torch
        files = shards(path)
        heads = [header(fn) for fn in files]
        sizes = [os.path.getsize(fn) for fn in files]
        bases, end = [], 0
        for size in sizes:
            bases.append(end)
            end = align_up(end + size)
        # Chunk offsets are multiples of 16 MiB, so only a file's last chunk is short.
        chunks = [(i, off, min(CHUNK, size - off))
                  for i, size in enumerate(sizes) for off in range(0, size, CHUNK)]
        lock = threading.Lock()
        state = {"next": 0, "errors": []}

        def take():
            with lock:
                if state["errors"] or state["next"] >= len(chunks):
                    return None
                state["next"] += 1
                return chunks[state["next"] - 1]

        def fd_of(fds, i):
            if i not in fds:
                fds[i] = os.open(files[i], os.O_RDONLY | os.O_DIRECT)
            return fds[i]

        if self.cuda:
            dst = torch.empty(max(end, 1), dtype=torch.uint8, device=self.dev)
            # The allocator may hand back a block that work queued on this stream still
            # uses: the copy streams start after it.
            main_stream = torch.cuda.current_stream(self.dev)

            def work():
                fds = {}
                try:
                    with torch.cuda.device(self.dev):
                        stream = torch.cuda.Stream(device=self.dev)
                        stream.wait_stream(main_stream)
                        bufs = []
                        for _ in range(2):
                            # cudaHostAlloc memory is page-aligned; should the allocator
                            # hand out something else, 4096 spare bytes align the start.
                            t = torch.empty(CHUNK, dtype=torch.uint8, pin_memory=True)
                            if t.data_ptr() % ALIGN:
                                t = torch.empty(CHUNK + ALIGN, dtype=torch.uint8, pin_memory=True)
                            skip = -t.data_ptr() % ALIGN
                            arr = (ctypes.c_ubyte * CHUNK).from_address(t.data_ptr() + skip)
                            bufs.append((t, t[skip:skip + CHUNK], memoryview(arr),
                                         torch.cuda.Event(), [False]))
                        k = 0
                        while True:
                            c = take()
                            if c is None:
                                break
                            i, off, n = c
                            _, pinned, mv, done, used = bufs[k]
                            if used[0]:
                                done.synchronize()  # this buffer's previous copy is over
                            pread_direct(fd_of(fds, i), mv, off, n, files[i])
                            a = bases[i] + off
                            with torch.cuda.stream(stream):
                                dst[a:a + n].copy_(pinned[:n], non_blocking=True)
                            done.record(stream)
                            used[0] = True
                            k ^= 1
                        stream.synchronize()
                except BaseException as e:
                    with lock:
                        state["errors"].append(e)
                finally:
                    for fd in fds.values():
                        os.close(fd)
        else:
            # Anonymous mmap: page-aligned, as O_DIRECT wants; end is 4096-rounded, so the
            # last file's rounded-up tail read fits. MAP_POPULATE faults the pages in with
            # one call: O_DIRECT into untouched pages takes a fault per page, which costs
            # ten times the read on some virtual machines.
            host = mmap.mmap(-1, max(end, ALIGN), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                             | getattr(mmap, "MAP_POPULATE", 0))
            whole = memoryview(host)

            def work():
                fds = {}
                try:
                    while True:
                        c = take()
                        if c is None:
                            break
                        i, off, n = c
                        a = bases[i] + off
                        pread_direct(fd_of(fds, i), whole[a:a + align_up(n)], off, n, files[i])
                except BaseException as e:
                    with lock:
                        state["errors"].append(e)
                finally:
                    for fd in fds.values():
                        os.close(fd)

        threads = [threading.Thread(target=work, name=f"peer{t}") for t in range(self.a.peer_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if state["errors"]:
            raise state["errors"][0]
        if not self.cuda:
            dst = torch.frombuffer(host, dtype=torch.uint8)  # keeps host mapped while used
        out = {}
        esize = {}
        for fi, fn in enumerate(files):
            hlen, h = heads[fi]
            for name, t in h.items():
                dt = self.dtype(t["dtype"], fn, name)
                if dt not in esize:
                    esize[dt] = torch.empty(0, dtype=dt).element_size()
                s, e = t["data_offsets"]
                a = bases[fi] + hlen + s
                raw = dst[a:a + e - s]
                if a % esize[dt]:
                    raw = raw.clone()  # torch views only aligned data
                out[name] = raw.view(dt).reshape(t["shape"])
        return out

    def m_dmafs_load(self, path):
        if not hasattr(self, "model_flag"):
            h = subprocess.run([self.a.dmafs_load, "--help"], capture_output=True, text=True)
            self.model_flag = "--model" in h.stdout + h.stderr
            if not self.model_flag:
                print("dmafs-bench: models: this dmafs-load has no --model: it places the model's "
                      "files whole", file=sys.stderr)
        cmd = [self.a.dmafs_load] + (["--model"] if self.model_flag else [])
        cmd += ["--target", str(self.dev) if self.cuda else "host", "-q", path]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip() or r.stdout.strip()}")
        for line in r.stdout.splitlines():
            m = re.search(r"([\d.]+) s\s+([\d.]+) GB/s", line)
            if line.startswith("total") and m:
                return float(m.group(1)), float(m.group(2)), line.strip()
        raise RuntimeError(f"no total line in the output of {' '.join(cmd)}: {r.stdout!r}")

    # ---- running ----

    def timed(self, fn, path):
        drop_caches()
        self.sync()
        t0 = time.perf_counter()
        sd = fn(path)
        self.sync()
        dt = time.perf_counter() - t0
        n = len(sd)
        del sd
        self.release()
        return dt, n

    def model(self, name):
        a = self.a
        paths = {"dmafs": os.path.join(a.dmafs, name)}
        if a.peer:
            paths["peer"] = os.path.join(a.peer, name)
        files = shards(paths["dmafs"])
        nbytes = sum(os.path.getsize(f) for f in files)
        ntensors = sum(len(header(f)[1]) for f in files)
        info = {"model": name, "files": len(files), "tensors": ntensors, "bytes": nbytes}
        rows = []
        plan = [("dmafs.load", self.m_dmafs, "dmafs"), ("peer", self.m_peer, "peer"),
                ("st-dmafs", self.m_st, "dmafs")]
        # Round by round (every method once per round, in turn), so that a machine that
        # drifts during the run weighs on every method alike; paired ratios compare the
        # methods within a round.
        todo = [(meth, fn, where) for meth, fn, where in plan
                if meth in a.methods and where in paths
                and not (meth.startswith("st-") and not self.have_st)]
        times = {meth: [] for meth, _, _ in todo}
        notes = {meth: [] for meth, _, _ in todo}
        failed = {}
        for _ in range(a.runs):
            for meth, fn, where in todo:
                if meth in failed:
                    continue
                try:
                    dt, n = self.timed(fn, paths[where])
                except Exception as e:  # one failing method must not hide the others
                    failed[meth] = f"{type(e).__name__}: {e}"
                    continue
                times[meth].append(dt)
                if meth == "dmafs.load":
                    import dmafs
                    st = dmafs.last_stats()
                    notes[meth].append(f"path {st.path}, placement {st.place_gbps:.2f} GB/s")
                elif meth == "peer":
                    notes[meth].append(f"{a.peer_threads} threads, 16 MiB O_DIRECT chunks"
                                       + (", 2 pinned buffers + a stream each" if self.cuda else ""))
        for meth, _, _ in todo:
            if meth in failed:
                rows.append({"model": name, "method": meth, "error": failed[meth]})
                continue
            t = times[meth]
            note = notes[meth][t.index(min(t))] if notes[meth] else ""
            rows.append(dict(info, method=meth, seconds=min(t), median=statistics.median(t),
                             runs=t, note=note))
        if "dmafs-load" in a.methods and a.dmafs_load:
            try:
                secs = []
                for _ in range(a.runs):
                    drop_caches()
                    secs.append(self.m_dmafs_load(paths["dmafs"]))
                best = min(secs, key=lambda s: s[0])
                rows.append(dict(info, method="dmafs-load", seconds=best[0],
                                 median=statistics.median(s[0] for s in secs),
                                 runs=[s[0] for s in secs], note=f"its own: {best[1]:.2f} GB/s"))
            except Exception as e:
                rows.append({"model": name, "method": "dmafs-load", "error": str(e)})
        if a.verify:
            self.verify(paths)
        if "cold" in a.methods:
            rows += self.cold(paths["dmafs"], info)
        if "ranks" in a.methods:
            rows += self.ranks(paths["dmafs"], info)
        if "warm" in a.methods:
            rows += self.warm(paths["dmafs"], info)
        return rows

    def verify(self, paths):
        checks = [("dmafs.load", self.m_dmafs, paths["dmafs"])]
        if "peer" in paths and "peer" in self.a.methods:
            checks.append(("peer", self.m_peer, paths["peer"]))
        for label, fn, path in checks:
            self.verify_one(label, fn, path)

    def verify_one(self, label, fn, path, extra=None):
        """fn(@path)'s tensors against the reference's, bit for bit: SystemExit when any
        differs. @extra(), called right after fn, adds to the line printed."""
        torch = self.torch
        if self.have_st:
            ref, ref_name = self.m_st, "safetensors.torch.load_file"
        else:
            ref, ref_name = self.m_naive, "a plain pread of each tensor (safetensors is not importable)"
        ours = fn(path)
        said = extra() if extra else ""
        theirs = ref(path)
        bad = [k for k in theirs if k not in ours or ours[k].dtype != theirs[k].dtype
               or ours[k].shape != theirs[k].shape
               or not torch.equal(ours[k].reshape(-1).view(torch.uint8),
                                  theirs[k].contiguous().reshape(-1).view(torch.uint8))]
        if bad or set(ours) != set(theirs):
            raise SystemExit(f"dmafs-bench: models: verify {label} {path}: {len(bad)} tensors differ "
                             f"from {ref_name} ({bad[:3]}); keys equal: {set(ours) == set(theirs)}")
        print(f"verify  {label} {path}: {len(ours)} tensors bit-identical to {ref_name}{said}",
              flush=True)
        del ours, theirs
        self.release()


def main():
    p = argparse.ArgumentParser(prog="loaders.py", description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", metavar="MODEL")
    p.add_argument("--dmafs", required=True, metavar="DIR")
    p.add_argument("--peer", required=True, metavar="DIR")
    p.add_argument("--peer-threads", type=int, default=8, metavar="T")
    p.add_argument("--mount-state", required=True, metavar="FILE")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--methods", default="dmafs.load,peer,cold")
    p.add_argument("--dmafs-load", default="", metavar="PATH")
    p.add_argument("--dmafs-check", default="", metavar="PATH")
    p.add_argument("--tier", metavar="SIZE", default=None)
    p.add_argument("--tier-fill", choices=("now", "idle"), default="idle")
    p.add_argument("--ranks", type=int, default=0, metavar="N")
    p.add_argument("--verify", action="store_true")
    p.add_argument("--json", required=True, metavar="FILE")
    a = p.parse_args()
    # dmafs-bench stops this process with SIGTERM: leave by an exception, so that the
    # temporary folder of the ranks method goes too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    a.methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    for m in a.methods:
        if m not in METHODS:
            p.error(f"unknown method {m}")
    if a.peer_threads < 1 or a.runs < 1 or a.ranks < 0 or a.ranks == 1:
        p.error("--peer-threads and --runs must be at least 1, --ranks at least 2")
    if "dmafs-load" in a.methods and not a.dmafs_load:
        p.error("method dmafs-load: no dmafs-load program (build, or install dmafs)")
    import torch
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("dmafs-bench: models: torch.cuda.is_available() is False: nothing to measure "
                 f"on {a.device} (--device cpu measures host loads)")
    if "ranks" in a.methods and not a.ranks:
        a.ranks = torch.cuda.device_count() if dev.type == "cuda" else 2
        if a.ranks < 2:
            p.error(f"method ranks needs 2 GPUs; this machine has {a.ranks}")
    if "ranks" in a.methods and dev.type == "cuda" and a.ranks > torch.cuda.device_count():
        p.error(f"--ranks {a.ranks}: this machine has {torch.cuda.device_count()} CUDA devices")
    import dmafs  # fails early with the library's message
    b = Bench(a, torch)
    try:
        import safetensors.torch  # noqa: F401
        b.have_st = True
    except ImportError:
        b.have_st = False
        print("dmafs-bench: models: safetensors not importable: st-dmafs skipped"
              + ("; --verify compares with a plain pread of each tensor" if a.verify else ""),
              file=sys.stderr)
    # Create the CUDA context and warm the allocator outside the timing.
    torch.empty(1, device=b.dev)
    b.sync()
    where = torch.cuda.get_device_name(b.dev) if b.cuda else "cpu"
    print(f"torch {torch.__version__} on {where}; dmafs {dmafs.library_path}; cold (page "
          f"cache dropped before each run), best of {a.runs}", flush=True)
    rows = []
    for m in a.models:
        got = b.model(m)
        for r in got:
            print(f"{m}: {r['method']}: " + (f"FAILED: {r['error']}" if "error" in r else
                  f"{r['seconds']:.3f} s (best of {len(r['runs'])}), "
                  f"{r['bytes'] / r['seconds'] / 1e9:.2f} GB/s {r['note']}".rstrip()), flush=True)
        rows += got
    with open(a.json, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
