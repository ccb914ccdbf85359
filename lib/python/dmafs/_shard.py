# SPDX-License-Identifier: MIT
"""_shard.py - load_shard(): a rank of a tensor-parallel job places only its slices.

For each tensor a plan names, the rank's slice along the plan's dimension is placed from
the drives into this rank's memory; every other tensor is placed whole. A slice along the
first dimension is one extent of the file; along another dimension it is one extent per
index of the dimensions before it (a row slice of a matrix: one per row), except that row
slices narrower than _GATHER_BELOW are gathered: their whole rows go through a bounded
scratch on the rank's device and only the slice stays (the drives, reading whole blocks,
would deliver about the whole row anyway). The rank keeps nothing it does not own.

Slices follow the rule transformers' tensor parallelism uses (get_tensor_shard): along a
dimension of size D split over W ranks, rank r gets [r * ceil(D / W), + ceil(D / W))
clipped to D, so the last ranks may get less, or nothing. A "packed" entry splits a fused
tensor (gate_up, qkv) into its equal blocks first and gives each rank its slice of every
block, concatenated in block order.
"""

import ctypes
import fnmatch
import os
import threading
import time

from . import _lib
from ._torch import Target, _device, _plan, _state, _torch, finish_stats, new_stats, warn_slow

# Tensors start at multiples of this in the rank's buffer (every dtype's size divides it).
_ALIGN = 64
# A row slice narrower than this is gathered: its rows are placed whole, a scratch half at a
# time, and the slice copied out on the device. Reading whole 4 KiB blocks, the drives
# deliver about the whole row for such slices anyway, and one long read and one strided
# copy beat a read and a copy per row (thousands per tensor).
_GATHER_BELOW = 64 << 10
_SCRATCH_HALF = 32 << 20
_GATHER_THREADS = 4  # each with two scratch halves of its own


def _rule(name, plan, path):
    """(dim, blocks) for the tensor @name, from the first plan pattern matching it, or None
    (placed whole). A plan value is a dimension (int) or (dimension, blocks)."""
    for pattern, v in plan.items():
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        dim, blocks = (v, 1) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) \
            and len(v) == 2 else (None, None)
        if not isinstance(dim, int) or not isinstance(blocks, int) or blocks < 1:
            raise ValueError(f"dmafs: {path}: plan pattern {pattern!r} has value {v!r}: want a "
                             "dimension, or (dimension, number of packed blocks)")
        return dim, blocks
    return None


def shard_range(size, rank, world):
    """[start, stop) of @rank's slice of a dimension of @size over @world ranks."""
    step = -(-size // world)
    start = min(rank * step, size)
    return start, min(start + step, size)


def _slice(t, shape, rule, rank, world, elsize, path):
    """(shape of this rank's slice, [(file_offset, length), ...] in file order, and
    (rows, row bytes, slice offset in a row, slice width) when the slice is to be gathered)."""
    if rule is None:
        return shape, [(t.file_offset, t.nbytes)] if t.nbytes else [], None
    dim, blocks = rule
    nd = len(shape)
    if not -nd <= dim < nd:
        raise ValueError(f"dmafs: {path}: the plan splits dimension {dim} of tensor {t.name!r}, "
                         f"which has shape {list(shape)}")
    dim %= nd
    size = shape[dim]
    if size % blocks:
        raise ValueError(f"dmafs: {path}: tensor {t.name!r} of shape {list(shape)} does not "
                         f"split into {blocks} packed blocks along dimension {dim}")
    block = size // blocks
    start, stop = shard_range(block, rank, world)
    outer = 1
    for d in shape[:dim]:
        outer *= d
    inner = elsize
    for d in shape[dim + 1:]:
        inner *= d
    out = []
    for i in range(outer):
        for b in range(blocks):
            off = t.file_offset + ((i * size) + b * block + start) * inner
            n = (stop - start) * inner
            if not n:
                continue
            if out and out[-1][0] + out[-1][1] == off:
                out[-1] = (out[-1][0], out[-1][1] + n)  # contiguous: one extent
            else:
                out.append((off, n))
    new = list(shape)
    new[dim] = (stop - start) * blocks
    width, row = (stop - start) * inner, size * inner
    gather = None
    if blocks == 1 and outer > 1 and 0 < width < _GATHER_BELOW and row <= _SCRATCH_HALF:
        gather = (outer, row, start * inner, width)  # rows, row bytes, slice offset, width
    return tuple(new), out, gather


def shard_plan(model, plan, rank, world, torch):
    """[(info, dtype, shard shape, buffer offset, [(file_offset, length), ...], gather), ...]
    and the buffer size (with the scratch for gathers at its end, when any): every tensor's
    slice, checked before any I/O."""
    out, at = [], 0
    for t, dt, shape in _plan(model, torch):
        rule = _rule(t.name, plan, model.path)
        if rule is not None and t.dtype_name == "F4":
            raise ValueError(f"dmafs: {model.path}: F4 tensor {t.name!r} packs two values in a "
                             "byte; it cannot be sliced")
        es = _lib.C.dtype_size(t.dtype)
        sshape, ext, gather = _slice(t, shape, rule, rank, world, es, model.path)
        at = (at + _ALIGN - 1) // _ALIGN * _ALIGN
        out.append((t, dt, sshape, at, ext, gather))
        at += sum(n for _o, n in ext)
    if any(e[5] for e in out):
        at = (at + 4095) // 4096 * 4096 + 2 * _SCRATCH_HALF * _GATHER_THREADS
    return out, at


def _run(calls, name, width):
    """Run the zero-argument @calls in threads, @width at a time; returns their results in
    order, or raises the first exception one of them raised (in this thread)."""
    out, errors = [None] * len(calls), []

    def one(i):
        try:
            out[i] = calls[i]()
        except BaseException as e:  # raised below, in the caller's thread
            errors.append(e)

    for k in range(0, len(calls), max(1, width)):
        ts = [threading.Thread(target=one, args=(i,), name=name)
              for i in range(k, min(k + width, len(calls)))]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    if errors:
        raise errors[0]
    return out


def _place_file(buf, filename, extents):
    """dmafs_place() of [(file_offset, length, buffer_offset), ...] from one file."""
    fn = _lib.require("place")
    arr = (_lib.Extent * len(extents))(*[_lib.Extent(f, n, b) for f, n, b in extents])
    res = _lib.Result()
    fd = os.open(filename, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _lib.check(fn(buf.handle, fd, arr, len(extents), ctypes.byref(res)), filename)
    finally:
        os.close(fd)
    for e, (_f, n, _b) in zip(arr, extents):
        if e.length != n:
            raise OSError(5, f"placed {e.length} of {n} bytes at offset {_f} (the file shrank?)",
                          filename)
    return res


def _place_all(tgt, model, entries, threads, gathering):
    """Place every file's extents into tgt (one thread per file, up to @threads or 8); the
    tensors to be gathered too unless @gathering."""
    per_file = {}
    for t, _dt, _shape, at, ext, gather in entries:
        if gather and gathering:
            continue
        pos = at
        for off, n in ext:
            per_file.setdefault(t.file, []).append((off, n, pos))
            pos += n
    total = _lib.Result()
    files = sorted(per_file)
    t0 = time.perf_counter_ns()
    calls = [lambda i=i: _place_file(tgt.buf, model.files[i], per_file[i]) for i in files]
    for r in _run(calls, "dmafs-shard", min(len(files), threads or 8)):
        total.bytes += r.bytes
        total.path = max(total.path, r.path)
    total.elapsed_ns = time.perf_counter_ns() - t0
    return total


def _gather(tgt, model, entries, scratch, torch):
    """Place the rows of every tensor to be gathered whole into scratch, and copy each
    rank's slice out of it on the device: _GATHER_THREADS threads, the tensors dealt out in
    turn. Returns (slice bytes, the slowest path the placements took)."""
    todo = [e for e in entries if e[5]]
    n = min(_GATHER_THREADS, len(todo))
    if not n:
        return 0, _lib.PATH_NONE
    calls = [lambda k=k: _gather_some(tgt, model, todo[k::n], scratch + 2 * _SCRATCH_HALF * k,
                                      torch) for k in range(n)]
    out = _run(calls, "dmafs-gather", n)
    return sum(b for b, _p in out), max(p for _b, p in out)


def _gather_some(tgt, model, entries, scratch, torch):
    """_gather() of @entries through the two scratch halves at @scratch, in turn."""
    cuda = tgt.dev.type == "cuda"
    done = [None, None]  # per half: the event of the last copy that read it
    h, total, path = 0, 0, _lib.PATH_NONE
    for t, _dt, _shape, at, _ext, gather in entries:
        if not gather:
            continue
        rows, row, lo, width = gather
        per = max(1, _SCRATCH_HALF // row)
        for r0 in range(0, rows, per):
            n = min(per, rows - r0)
            s_at = scratch + h * _SCRATCH_HALF
            if done[h] is not None:
                done[h].synchronize()  # the daemon must not overwrite what is being copied
            r = _place_file(tgt.buf, model.files[t.file], [(t.file_offset + r0 * row, n * row, s_at)])
            path = max(path, r.path)
            src = tgt.base[s_at:s_at + n * row].view(n, row)[:, lo:lo + width]
            tgt.base[at + r0 * width:at + (r0 + n) * width].view(n, width).copy_(src)
            if cuda:
                done[h] = torch.cuda.Event()
                done[h].record(torch.cuda.current_stream(tgt.dev))
            h ^= 1
        total += rows * width
    if cuda:
        torch.cuda.synchronize(tgt.dev)
    return total, path


def _place_shard(tgt, model, entries, scratch, threads):
    """Every slice into tgt: extents in threads, gathers beside them in this thread."""
    torch = _torch()
    t0 = time.perf_counter_ns()
    gathering = bool(scratch) and not tgt.fallback
    box = {}

    def extents():
        try:
            box["res"] = _place_all(tgt, model, entries, threads, gathering)
        except BaseException as e:  # raised below, in the caller's thread
            box["err"] = e

    worker = threading.Thread(target=extents, name="dmafs-shard")
    worker.start()
    try:
        gathered, gpath = _gather(tgt, model, entries, scratch, torch) if gathering else \
            (0, _lib.PATH_NONE)
    finally:
        worker.join()
    if "err" in box:
        raise box["err"]
    res = box["res"]
    res.bytes += gathered
    res.path = max(res.path, gpath)
    if tgt.fallback:  # a host buffer placed for a GPU that refused its memory
        from ._torch import _host_tensor_view
        tgt.base.copy_(_host_tensor_view(tgt.buf, torch)[:tgt.size])
        torch.cuda.synchronize(tgt.dev)
    res.elapsed_ns = time.perf_counter_ns() - t0
    return res


def load_shard(path, device="cpu", *, rank=None, world_size=None, plan, group=None, threads=0,
               stacklevel=2):
    """This rank's slices of a model (see dmafs.load(..., shard=...))."""
    torch = _torch()
    if rank is None or world_size is None:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("dmafs: a shard needs rank and world_size, or an initialised "
                               "torch.distributed")
        rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    if not isinstance(plan, dict):
        raise TypeError("dmafs: plan must be a dict {tensor name pattern: dimension or "
                        "(dimension, packed blocks)}")
    if not (isinstance(rank, int) and isinstance(world_size, int) and 0 <= rank < world_size):
        raise ValueError(f"dmafs: rank {rank!r} of world_size {world_size!r}")
    t0 = time.perf_counter()
    with _lib.Model(path) as model:
        dev, target, index = _device(device)
        entries, size = shard_plan(model, plan, rank, world_size, torch)
        scratch = size - 2 * _SCRATCH_HALF * _GATHER_THREADS if any(e[5] for e in entries) else 0
        stats = new_stats(model, dev, target)
        stats.rank, stats.world_size = rank, world_size
        out = {}
        if size:
            tgt = Target(model, dev, target, index, size)
            try:
                res = _place_shard(tgt, model, entries, scratch, threads)
                for t, dt, shape, at, ext, _gather_ in entries:
                    n = sum(x[1] for x in ext)
                    out[t.name] = tgt.base[at:at + n].view(dt).view(shape)
            except BaseException:
                out = tgt.base = None
                raise
            finally:
                tgt.close()
            finish_stats(stats, res, tgt.fallback, t0)
            warn_slow(model, res, tgt.fallback, tgt.why_posix, stacklevel + 1)
        else:
            for t, dt, shape, _at, _ext, _gather_ in entries:
                out[t.name] = torch.empty(shape, dtype=dt, device=dev)
            stats.seconds = time.perf_counter() - t0
            _state.stats = stats
        return out
