# SPDX-License-Identifier: MIT
"""_dist.py - load_distributed(): the ranks of a torch.distributed job read a model once.

Each rank places a disjoint, contiguous part of the model's buffer layout (the layout
dmafs.load() uses: every file whole, 4096-aligned, in file order) from the drives into
its own full-size buffer with dmafs_model_place_part(), then every part is broadcast
from the rank that read it to all others, in place, over the process group (NCCL between
GPUs, gloo between CPUs). The drives deliver the model once in total instead of once per
rank; the exchange runs at the interconnect's rate.

With a tensor-parallel plan, each rank then keeps only its slice of the tensors the plan
names (and a copy of the others) and the full buffer is freed.
"""

import fnmatch
import os
import time
import zlib

from . import _lib
from ._torch import (_device, _plan, _state, _torch, _views, finish_stats, new_stats, place_base,
                     warn_slow)

# Parts start at multiples of this: the daemon's reads stay whole stripe-sized runs.
_PART_ALIGN = 2 << 20


def _parts(nbytes, world):
    """world contiguous [begin, end) ranges covering [0, nbytes), aligned to _PART_ALIGN
    (the last ones may be empty for a model smaller than world aligned pieces)."""
    per = -(-nbytes // world)
    per = -(-per // _PART_ALIGN) * _PART_ALIGN
    return [(min(r * per, nbytes), min((r + 1) * per, nbytes)) for r in range(world)]


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
    drives into a buffer on its device, then the parts are broadcast over the group in
    place (NCCL: GPU to GPU; gloo: host memory), so every rank ends with the whole model
    while the drives were read about once.

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
    dmafs.last_stats() tells this rank's part (bytes, place_seconds), the broadcast time
    (exchange_seconds), rank and world_size.

    Raises RuntimeError when torch.distributed is not initialised or the ranks opened
    different models (checked with one collective before any I/O), and on every rank
    when one rank failed to place its part (that rank raises the OSError itself). Emits
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
    err = None
    try:
        base, res, fallback, why_posix = place_base(model, dev, target, index, threads,
                                                    part=parts[rank])
    except Exception as e:  # every rank must learn of it, or the others hang
        err = e
    ok, _ = _agree(dist, group, torch, dev, [0 if err is None else 1])
    if err is not None:
        raise err
    if not ok:
        raise RuntimeError(f"dmafs.load_distributed: {model.path}: another rank failed to "
                           "place its part of the model (its own error says why)")
    t1 = time.perf_counter()
    for r, (lo, hi) in enumerate(parts):
        if hi > lo:
            dist.broadcast(base[lo:hi], src=_global_rank(dist, group, r), group=group)
    if base.is_cuda:
        torch.cuda.synchronize(dev)
    stats.exchange_seconds = time.perf_counter() - t1
    out = _views(base, tensors_plan, torch)
    if split:
        out = {name: (t.chunk(world, split[name])[rank] if name in split else t).clone()
               for name, t in out.items()}
        del base
    finish_stats(stats, res, fallback, t0)
    warn_slow(model, res, fallback, why_posix, stacklevel + 1)
    return out
