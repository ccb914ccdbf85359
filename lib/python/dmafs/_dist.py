# SPDX-License-Identifier: MIT
"""_dist.py - load_distributed(): the ranks of a torch.distributed job read a model once.

Each rank places a disjoint, contiguous part of the model's buffer layout (the layout
dmafs.load() uses: every file whole, 4096-aligned, in file order) from the drives into
its own full-size buffer with dmafs_model_place_part(), and every part is broadcast from
the rank that read it to all others, in place, over the process group (NCCL between
GPUs, gloo between CPUs). The drives deliver the model once in total instead of once per
rank. The parts go in _ROUNDS rounds of chunks: while round k is broadcast, each rank's
placing thread is already at round k + 1, so only the last round's broadcasts add to the
time.

With a tensor-parallel plan, each rank then keeps only its slice of the tensors the plan
names (and a copy of the others) and the full buffer is freed.
"""

import fnmatch
import os
import threading
import time
import zlib

from . import _lib
from ._torch import (Target, _device, _plan, _state, _torch, _views, finish_stats, new_stats,
                     warn_slow)

# Parts start at multiples of this: the daemon's reads stay whole stripe-sized runs.
_PART_ALIGN = 2 << 20


def _parts(nbytes, world):
    """world contiguous [begin, end) ranges covering [0, nbytes), aligned to _PART_ALIGN
    (the last ones may be empty for a model smaller than world aligned pieces)."""
    per = -(-nbytes // world)
    per = -(-per // _PART_ALIGN) * _PART_ALIGN
    return [(min(r * per, nbytes), min((r + 1) * per, nbytes)) for r in range(world)]


# Each rank's part is placed and broadcast in this many chunks (rounds): only the last
# round's broadcasts add to the time of a load.
_ROUNDS = 8


def _chunks(lo, hi):
    """[lo, hi) in _ROUNDS contiguous ranges, aligned to _PART_ALIGN (the last ones may be
    empty)."""
    per = -(-(hi - lo) // _ROUNDS)
    per = -(-per // _PART_ALIGN) * _PART_ALIGN
    return [(min(lo + k * per, hi), min(lo + (k + 1) * per, hi)) for k in range(_ROUNDS)]


class _Placer:
    """Places chunks [(begin, end), ...] of a model into a Target one after another in a
    thread of its own (the placement calls release the GIL), while the caller broadcasts
    the chunks already placed. wait(k) returns chunk k's result or raises its error;
    ended is the time the latest chunk ended; after an error or stop() no further chunk
    starts."""

    def __init__(self, model, tgt, chunks, threads):
        self.model, self.tgt, self.chunks, self.threads = model, tgt, chunks, threads
        self.res = [None] * len(chunks)
        self.err = [None] * len(chunks)
        self.done = [threading.Event() for _ in chunks]
        self.ended = None
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="dmafs-place", daemon=True)
        self.thread.start()

    def _run(self):
        for k, part in enumerate(self.chunks):
            if self.stopped:
                return
            try:
                self.res[k] = self.tgt.place(self.model, part, self.threads)
            except BaseException as e:  # handed to the caller by wait()
                self.err[k] = e
                self.stopped = True
            self.ended = time.perf_counter()
            self.done[k].set()

    def wait(self, k):
        self.done[k].wait()
        if self.err[k] is not None:
            raise self.err[k]
        return self.res[k]

    def stop(self):
        self.stopped = True
        self.thread.join()


def _global_rank(dist, group, r):
    if group is None:
        return r
    fn = getattr(dist, "get_global_rank", None)
    if fn is None:  # torch < 2.0
        from torch.distributed import distributed_c10d as c10d
        fn = c10d._get_global_rank
    return fn(group, r)


def _default_device(dist, group, torch):
    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend or "rccl" in backend:
        local = os.environ.get("LOCAL_RANK")
        return f"cuda:{int(local)}" if local is not None else f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def _layout_digest(model):
    """A number that differs between ranks that opened different models (or files)."""
    h = zlib.crc32(str(model.nbytes).encode())
    for t in model.tensors:
        h = zlib.crc32(f"{t.name}\0{t.buffer_offset}\0{t.nbytes}\0{t.dtype_name}".encode(), h)
    return h


def _agree(dist, group, torch, dev, values):
    """All ranks' values equal? One collective that every rank enters."""
    t = torch.tensor(list(values) + [-v for v in values], dtype=torch.int64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    n = len(values)
    return all(int(t[i]) == -int(t[n + i]) for i in range(n)), [int(x) for x in t[:n]]


def _split_plan(plan, tensors, world, path):
    """{tensor name: dim} for the tensors the plan names, checked before any I/O."""
    out = {}
    if not plan:
        return out
    for t, _dt, shape in tensors:
        for pattern, dim in plan.items():
            if not fnmatch.fnmatchcase(t.name, pattern):
                continue
            nd = len(shape)
            if not isinstance(dim, int) or not -nd <= dim < nd:
                raise ValueError(f"dmafs: {path}: plan pattern {pattern!r} splits dimension "
                                 f"{dim!r} of tensor {t.name!r}, which has shape {list(shape)}")
            dim %= nd
            if shape[dim] % world:
                raise ValueError(f"dmafs: {path}: tensor {t.name!r} of shape {list(shape)} "
                                 f"cannot be split in {world} equal parts along dimension "
                                 f"{dim} (plan pattern {pattern!r})")
            out[t.name] = dim
            break
    return out


def load_distributed(path, device=None, *, group=None, plan=None, threads=0):
    """Load a model in every rank of a torch.distributed job, reading it from the drives
    once in total.

    Every rank of the process group (default: the world) must call this with the same
    model. Each rank places a disjoint contiguous 1/world part of the model from the
    drives into a buffer on its device, in 8 chunks, and every chunk is broadcast over
    the group in place (NCCL: GPU to GPU; gloo: host memory) while the next one is
    placed, so every rank ends with the whole model while the drives were read about once.

    path: as dmafs.load() (file, directory, index, HF cache snapshot), on a dmafs mount
    visible to every rank (one machine). device: where this rank's tensors go; default
    "cuda:$LOCAL_RANK" (or the current CUDA device) for an NCCL group, "cpu" otherwise.
    plan: optional tensor-parallel plan {glob pattern: dimension}, matched against tensor
    names with fnmatch (first matching pattern wins), e.g. {"*.q_proj.weight": 0,
    "*.o_proj.weight": 1}: a matching tensor is returned as this rank's slice
    tensor.chunk(world, dim)[rank] (the dimension must divide evenly; checked before any
    I/O); every other tensor whole.

    Returns {name: tensor} like dmafs.load(). Without a plan every tensor is a view of one
    buffer of the whole model on this rank (same lifetime rules as dmafs.load()). With a
    plan every tensor is copied out of that buffer into its own memory and the buffer is
    freed before returning: peak memory is the whole model plus this rank's result.
    dmafs.last_stats() tells this rank's part (bytes, place_seconds), the broadcasting
    left after this rank's placement ended (exchange_seconds), rank and world_size.

    Raises RuntimeError when torch.distributed is not initialised or the ranks opened
    different models (checked with one collective before any I/O), and on every rank
    when one rank failed to place a chunk of its part (that rank raises the OSError
    itself; the ranks agree on this with one small collective per chunk). Emits
    SlowPathWarning like dmafs.load() when the placement channel was not used.
    """
    with _lib.Model(path) as model:
        return place_distributed(model, device, group, plan, threads, 2)


def distributed_ready(group=None):
    """True when torch.distributed is initialised with more than one rank in group."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def place_distributed(model, device, group, plan, threads, stacklevel):
    """load_distributed() of an open _lib.Model (warnings attributed stacklevel up)."""
    torch = _torch()
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("dmafs.load_distributed: torch.distributed is not initialised "
                           "(call torch.distributed.init_process_group() first, e.g. under "
                           "torchrun); a single process uses dmafs.load()")
    t0 = time.perf_counter()
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if device is None:
        device = _default_device(dist, group, torch)
    dev, target, index = _device(device)
    backend = str(dist.get_backend(group)).lower()
    if dev.type == "cpu" and ("nccl" in backend or "rccl" in backend):
        raise ValueError(f"dmafs.load_distributed: device {device!r} is host memory, which the "
                         f"{backend} backend cannot exchange: use a gloo group for cpu")
    tensors_plan = _plan(model, torch)
    split = _split_plan(plan, tensors_plan, world, model.path)
    stats = new_stats(model, dev, target)
    stats.rank, stats.world_size, stats.exchange_seconds = rank, world, 0.0
    same, _ = _agree(dist, group, torch, dev, [model.nbytes, _layout_digest(model)])
    if not same:
        raise RuntimeError(f"dmafs.load_distributed: {model.path}: the ranks opened "
                           "different models (layout size or tensor table differ): every "
                           "rank must load the same files")
    if not model.files or not model.nbytes:
        _state.stats = stats
        return {}
    parts = _parts(model.nbytes, world)
    chunks = [_chunks(lo, hi) for lo, hi in parts]
    # An empty part is placed anyway: it reports the path a placement takes.
    mine = [c for c in chunks[rank] if c[1] > c[0]] or [parts[rank]]
    err = tgt = None
    try:
        tgt = Target(model, dev, target, index, model.nbytes)
    except Exception as e:  # every rank must learn of it, or the others hang
        err = e
    ok, _ = _agree(dist, group, torch, dev, [0 if err is None else 1])
    if err is not None:
        raise err
    if not ok:
        if tgt is not None:
            tgt.close()
        raise RuntimeError(f"dmafs.load_distributed: {model.path}: another rank failed to "
                           "set up its placement (its own error says why)")
    base = tgt.base
    t1 = time.perf_counter()
    placer = _Placer(model, tgt, mine, threads)
    res = _lib.Result()
    res.path = _lib.PATH_NONE
    try:
        for k in range(_ROUNDS):
            err = None
            if k < len(mine):
                try:
                    got = placer.wait(k)
                    res.bytes += got.bytes
                    res.path = _lib.slower(res.path, got.path)
                except Exception as e:
                    err = e
            # Every rank learns of a failed chunk before the broadcasts that need it.
            ok, _ = _agree(dist, group, torch, dev, [0 if err is None else 1])
            if err is not None:
                raise err
            if not ok:
                raise RuntimeError(f"dmafs.load_distributed: {model.path}: another rank "
                                   "failed to place its part of the model (its own error "
                                   "says why)")
            for r, rc in enumerate(chunks):
                lo, hi = rc[k]
                if hi > lo:
                    dist.broadcast(base[lo:hi], src=_global_rank(dist, group, r), group=group)
        if base.is_cuda:
            torch.cuda.synchronize(dev)
    except BaseException:
        base = tgt.base = None  # a host buffer unmaps now, not when the traceback goes
        raise
    finally:
        placer.stop()
        tgt.close()
    t_end = time.perf_counter()
    res.elapsed_ns = int((placer.ended - t1) * 1e9)
    stats.exchange_seconds = t_end - placer.ended
    fallback, why_posix = tgt.fallback, tgt.why_posix
    out = _views(base, tensors_plan, torch)
    if split:
        out = {name: (t.chunk(world, split[name])[rank] if name in split else t).clone()
               for name, t in out.items()}
        del base
    finish_stats(stats, res, fallback, t0, tgt.tier_bytes)
    warn_slow(model, res, fallback, why_posix, stacklevel + 1)
    return out
