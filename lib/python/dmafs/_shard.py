# SPDX-License-Identifier: MIT
"""_shard.py - load_shard(): a rank of a tensor-parallel job places only its slices.

For each tensor a plan names, the rank's slice along the plan's dimension is placed from
the drives into this rank's memory; every other tensor is placed whole. A slice along the
first dimension is one extent of the file; along another dimension it is one extent per
index of the dimensions before it (a row slice of a matrix: one per row). The daemon packs
such small extents into its staging slots and reads each aligned to the members' sector
(not the filesystem block) unless placements verify checksums, so the drives deliver
about the slice's bytes and no more. The rank keeps nothing it does not own.

When the ranks load together (share: see load_shard), a row slice whose piece of a row is
small (_EXCHANGE_BELOW) is not read per row: each rank places a contiguous block of whole
rows, 1/world of the tensor in one extent, into scratch, and the ranks swap the pieces
with one all_to_all per tensor that writes each rank's slice in place (_exchange). The
drives then read such a tensor once in all, in long runs, instead of thousands of small
reads per rank; the placements of everything else run meanwhile in another thread.

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
# One dmafs_place() call takes at most this many extents or bytes (the calls run in
# threads, so that a file of many small extents keeps several placements going).
_CALL_EXTENTS = 2048
_CALL_BYTES = 256 << 20
# With share, a slice along a later dimension whose piece of a row (in the rank with the
# widest slice, so that every rank decides alike) is smaller than this is exchanged: the
# rows are placed in blocks of whole rows and the pieces swapped between the ranks (see
# _exchange). Per-row reads of a few KiB go at a fraction of the drives' rate; pieces of
# a MiB and more read well as they are.
_EXCHANGE_BELOW = 1 << 20
# The tensors exchanged go in batches whose row blocks fit this, or the largest single
# row block when that is larger. The rank places a batch into a scratch buffer of that
# size on its device and copies the pieces into a send buffer of that size, so during
# the load a rank's memory is its shard plus at most twice this bound (both are freed
# before load_shard returns).
_EXCHANGE_SCRATCH = 256 << 20


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


def _numpy():
    try:
        import numpy
    except ImportError as e:
        raise ImportError("dmafs: a sharded load needs numpy (python3-numpy) for its extent "
                          "lists") from e
    return numpy


def _slice(t, shape, rule, rank, world, elsize, path, np):
    """(shape of this rank's slice, int64 array [[file_offset, length], ...] in file order)."""
    if rule is None:
        return shape, np.array([[t.file_offset, t.nbytes]] if t.nbytes else [],
                               dtype=np.int64).reshape(-1, 2)
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
    new = list(shape)
    new[dim] = (stop - start) * blocks
    width = (stop - start) * inner
    if not width or not outer:
        return tuple(new), np.empty((0, 2), dtype=np.int64)
    if stop - start == block:  # the whole dimension: the whole tensor, one extent
        return tuple(new), np.array([[t.file_offset, t.nbytes]], dtype=np.int64)
    # one extent per (index before dim, block); none touches the next
    offs = (np.arange(outer, dtype=np.int64)[:, None] * (size * inner) +
            np.arange(blocks, dtype=np.int64)[None, :] * (block * inner))
    ext = np.empty((outer * blocks, 2), dtype=np.int64)
    ext[:, 0] = offs.reshape(-1) + (t.file_offset + start * inner)
    ext[:, 1] = width
    return tuple(new), ext


def shard_plan(model, plan, rank, world, torch):
    """[(info, dtype, shard shape, buffer offset, extents, whole), ...], the buffer size and
    the end of the tensors kept whole: every tensor's slice, checked before any I/O
    (extents: see _slice). The tensors every rank keeps whole come first in the buffer."""
    np = _numpy()
    items = []
    for t, dt, shape in _plan(model, torch):
        rule = _rule(t.name, plan, model.path)
        if rule is not None and t.dtype_name == "F4":
            raise ValueError(f"dmafs: {model.path}: F4 tensor {t.name!r} packs two values in a "
                             "byte; it cannot be sliced")
        es = _lib.C.dtype_size(t.dtype)
        sshape, ext = _slice(t, shape, rule, rank, world, es, model.path, np)
        items.append((t, dt, sshape, ext, rule is None))
    out, at, shared = [], 0, 0
    for t, dt, sshape, ext, whole in sorted(items, key=lambda e: not e[4]):
        at = (at + _ALIGN - 1) // _ALIGN * _ALIGN
        out.append((t, dt, sshape, at, ext, whole))
        at += int(ext[:, 1].sum()) if len(ext) else 0
        if whole:
            shared = at
    return out, at, shared


def _run(calls, name, width):
    """Run the zero-argument @calls in @width threads, each taking the next call when done
    with one; returns their results in order, or raises the first exception one of them
    raised (in this thread; calls not yet started then are not made)."""
    out, errors, it, lock = [None] * len(calls), [], iter(range(len(calls))), threading.Lock()

    def worker():
        while not errors:
            with lock:
                i = next(it, None)
            if i is None:
                return
            try:
                out[i] = calls[i]()
            except BaseException as e:  # raised below, in the caller's thread
                errors.append(e)

    ts = [threading.Thread(target=worker, name=name) for _ in range(max(1, min(width, len(calls))))]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    if errors:
        raise errors[0]
    return out


def _place_file(buf, filename, arr):
    """dmafs_place() of the extents in @arr (a C-ordered int64 array of rows [file_offset,
    length, buffer_offset], the layout of struct dmafs_extent) from one file."""
    fn = _lib.require("place")
    want = arr[:, 1].copy()
    res = _lib.Result()
    fd = os.open(filename, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _lib.check(fn(buf.handle, fd, arr.ctypes.data_as(ctypes.POINTER(_lib.Extent)),
                      len(arr), ctypes.byref(res)), filename)
    finally:
        os.close(fd)
    short = _numpy().flatnonzero(arr[:, 1] != want)
    if len(short):
        i = int(short[0])
        raise OSError(5, f"placed {int(arr[i, 1])} of {int(want[i])} bytes at offset "
                      f"{int(arr[i, 0])} (the file shrank?)", filename)
    return res


def _calls(entries, window=None):
    """[(file index, int64 array of [file_offset, length, buffer_offset] rows), ...]: each
    file's extents in file order, cut into dmafs_place() calls (_CALL_EXTENTS, _CALL_BYTES).
    With @window (lo, hi), of the tensors kept whole only their bytes in [lo, hi) of the
    buffer."""
    np = _numpy()
    per_file = {}
    for t, _dt, _shape, at, ext, whole in entries:
        if whole and window is not None and len(ext):
            lo, hi = max(at, window[0]), min(at + int(ext[0, 1]), window[1])
            if hi <= lo:
                continue
            ext = np.array([[int(ext[0, 0]) + lo - at, hi - lo]], dtype=np.int64)
            at = lo
        if len(ext):
            a = np.empty((len(ext), 3), dtype=np.int64)
            a[:, :2] = ext
            a[:, 2] = np.cumsum(ext[:, 1]) - ext[:, 1] + at
            per_file.setdefault(t.file, []).append(a)
    out = []
    for f in sorted(per_file):
        arr = np.concatenate(per_file[f])
        arr = np.ascontiguousarray(arr[np.argsort(arr[:, 0], kind="stable")])
        before = np.cumsum(arr[:, 1]) - arr[:, 1]
        key = np.maximum(before // _CALL_BYTES, np.arange(len(arr)) // _CALL_EXTENTS)
        cuts = np.flatnonzero(np.diff(key)) + 1
        out += [(f, np.ascontiguousarray(a)) for a in np.split(arr, cuts)]
    return out


def _spans(entries, window=None):
    """[(lo, hi), ...]: the ranges of the buffer that @entries fill (of the tensors kept
    whole only the part in @window, when given), in buffer order, neighbours joined where
    only alignment padding lies between them."""
    out = []
    for _t, _dt, _shape, at, ext, whole in entries:
        lo, hi = at, at + (int(ext[:, 1].sum()) if len(ext) else 0)
        if whole and window is not None:
            lo, hi = max(lo, window[0]), min(hi, window[1])
        if hi <= lo:
            continue
        if out and out[-1][0] <= lo <= -(-out[-1][1] // _ALIGN) * _ALIGN:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _place_shard(tgt, model, entries, threads, window=None):
    """Every slice into tgt (of the tensors kept whole, only the part in @window, when
    given): the files' extents in dmafs_place() calls, up to @threads (or 8) at once."""
    torch = _torch()
    t0 = time.perf_counter_ns()
    calls = [lambda f=f, a=a: _place_file(tgt.buf, model.files[f], a)
             for f, a in _calls(entries, window)]
    res = _lib.Result()
    for r in _run(calls, "dmafs-shard", threads or 8):
        res.bytes += r.bytes
        res.path = max(res.path, r.path)
    if tgt.fallback:  # a host buffer placed for a GPU that refused its memory
        from ._torch import _host_tensor_view
        # only what was placed here: the exchange may be filling other slices meanwhile
        host = _host_tensor_view(tgt.buf, torch)
        for lo, hi in _spans(entries, window):
            tgt.base[lo:hi].copy_(host[lo:hi])
        torch.cuda.synchronize(tgt.dev)
    res.elapsed_ns = time.perf_counter_ns() - t0
    return res


class _Swap:
    """A tensor whose slices the ranks exchange (see _exchange): its entry (index into
    shard_plan's list), viewed as bytes [outer, row]; per rank its block of rows [lo, hi)
    and the byte columns [lo, hi) of its slice; its slot in the scratch and send buffers
    (a multiple of 4096, sized for the largest row block and 4096 more)."""

    __slots__ = ("entry", "outer", "row", "rows", "cols", "slot")

    def at(self, t, rank):
        """Where @rank's row block of @t goes in the scratch: in the slot, at the same
        offset modulo 4096 as in the file, so that the reads keep a whole placement's
        alignment."""
        return self.slot + (t.file_offset + self.rows[rank][0] * self.row) % 4096


def _exchange_plan(model, entries, plan, world):
    """([[_Swap, ...], ...], scratch bytes): the tensors of shard_plan's @entries whose
    slices the ranks exchange rather than read per row, in batches whose slots fit
    _EXCHANGE_SCRATCH (or one tensor's slot, when larger), and the bytes of the largest
    batch. The same in every rank: shapes, plan and world decide, never the rank."""
    swaps = []
    for i, (t, _dt, _shape, _at, _ext, whole) in enumerate(entries):
        if whole or world < 2:
            continue
        dim, blocks = _rule(t.name, plan, model.path)
        shape = t.shape  # the file's: an F4 tensor, whose torch shape differs, is never split
        dim %= len(shape)  # checked by _slice
        outer, inner = 1, _lib.C.dtype_size(t.dtype)
        for d in shape[:dim]:
            outer *= d
        for d in shape[dim + 1:]:
            inner *= d
        size = shape[dim]
        step = -(-size // world)
        # Packed blocks keep their per-row extents (a rank's slice is several pieces of
        # each row); with step >= size one rank has the whole tensor, one extent.
        if blocks != 1 or dim == 0 or outer < 2 or step >= size or not inner or \
                step * inner >= _EXCHANGE_BELOW:
            continue
        s = _Swap()
        s.entry, s.outer, s.row = i, outer, size * inner
        s.rows = [shard_range(outer, r, world) for r in range(world)]
        s.cols = [(a * inner, b * inner) for a, b in (shard_range(size, r, world)
                                                      for r in range(world))]
        swaps.append(s)
    if not swaps:
        return [], 0
    # rank 0 has the most rows: its block sizes the slot
    need = [-(-s.rows[0][1] * s.row // 4096) * 4096 + 4096 for s in swaps]
    bound = max(_EXCHANGE_SCRATCH, max(need))
    batches, used, scratch = [], bound, 0
    for s, n in zip(swaps, need):
        if used + n > bound:
            batches.append([])
            used = 0
        s.slot = used
        used += n
        batches[-1].append(s)
        scratch = max(scratch, used)
    return batches, scratch


def _swap(s, t, at, scratch, send, tgt, rank, world, group):
    """Start the exchange of one tensor: this rank's block of rows in the scratch (placed)
    goes to the send buffer as one contiguous piece per rank, [rows, that rank's columns],
    in rank order, and all_to_all_single sends each piece to its rank and receives this
    rank's slice, [outer, width] row-major, straight into tgt at @at: the rows from rank j
    are its block, which follows rank j - 1's. Returns the collective's work (async)."""
    import torch.distributed as dist
    lo, hi = s.rows[rank]
    n = hi - lo
    if n:
        p = s.at(t, rank)
        block = scratch.base[p:p + n * s.row].view(n, s.row)
        widths = {b - a for a, b in s.cols}
        if len(widths) == 1:  # an even split: one copy
            w = widths.pop()
            send[s.slot:s.slot + n * s.row].view(world, n, w).copy_(
                block.view(n, world, w).transpose(0, 1))
        else:
            for a, b in s.cols:
                if b > a:
                    send[s.slot + n * a:s.slot + n * b].view(n, b - a).copy_(block[:, a:b])
    a, b = s.cols[rank]
    out = tgt.base[at:at + s.outer * (b - a)]
    return dist.all_to_all_single(out, send[s.slot:s.slot + n * s.row],
                                  [(h - l) * (b - a) for l, h in s.rows],
                                  [n * (d - c) for c, d in s.cols], group=group, async_op=True)


def _exchange(tgt, scratch, send, model, entries, batches, rank, world, group, threads):
    """The slices of the tensors of @batches (see _exchange_plan) into tgt. Per batch: this
    rank's block of whole rows of each tensor (one extent) placed into scratch, the ranks
    agree that every one placed its blocks (a rank that failed must not leave the others
    waiting in the exchange), and each tensor is exchanged (_swap) while the next batch is
    placed. Every rank issues the same collectives in the same order. Returns (the
    placements' result, the seconds this thread spent exchanging: the previous batch's
    collectives finishing, the agreement, the copies and starting the collectives, and
    perf_counter_ns() when the last placement ended)."""
    torch = _torch()
    import torch.distributed as dist
    np = _numpy()
    res = _lib.Result()
    spent, works, copied, ended = 0.0, [], None, time.perf_counter_ns()
    for batch in batches:
        if copied is not None:
            # The daemon writes outside torch's stream order: the copies out of the scratch
            # (the previous batch's) must be done before it is placed into again.
            copied.synchronize()
        err = None
        try:
            places = []
            for s in batch:
                t = entries[s.entry][0]
                lo, hi = s.rows[rank]
                if hi > lo:
                    off = t.file_offset + lo * s.row
                    places.append((t, None, None, s.at(t, rank),
                                   np.array([[off, (hi - lo) * s.row]], dtype=np.int64), False))
            r = _place_shard(scratch, model, places, threads)
            res.bytes += r.bytes
            res.path = max(res.path, r.path)
        except Exception as e:  # every rank must learn of it before the exchange
            err = e
        ended = time.perf_counter_ns()
        t1 = time.perf_counter()
        for w in works:  # the send buffer is reused; NCCL: this stream waits for them
            w.wait()
        works = []
        _agree_or_raise(dist, group, torch, tgt.dev, err, model.path,
                        "place the rows it exchanges")
        for s in batch:
            t, at = entries[s.entry][0], entries[s.entry][3]
            works.append(_swap(s, t, at, scratch, send, tgt, rank, world, group))
        if tgt.base.is_cuda:
            copied = torch.cuda.Event()
            copied.record(torch.cuda.current_stream(tgt.dev))
        spent += time.perf_counter() - t1
    t1 = time.perf_counter()
    for w in works:
        w.wait()
    spent += time.perf_counter() - t1
    return res, spent, ended


def _share_ok(share, rank, world_size, group, dev):
    """Whether the ranks place the tensors kept whole once between them (see load_shard)."""
    if share is False or world_size == 1:
        return False
    import torch.distributed as dist
    ready = dist.is_available() and dist.is_initialized()
    if ready and (dist.get_rank(group), dist.get_world_size(group)) != (rank, world_size):
        ready = False
    if share and not ready:
        raise RuntimeError(f"dmafs: share=True needs torch.distributed initialised with this "
                           f"rank {rank} of {world_size} in the group")
    if ready and dev.type == "cpu":
        backend = str(dist.get_backend(group)).lower()
        if "nccl" in backend or "rccl" in backend:
            if share:
                raise ValueError(f"dmafs: the {backend} backend cannot exchange host memory: "
                                 "use a gloo group for a shard in cpu memory")
            return False
    return ready


def _agree_or_raise(dist, group, torch, dev, err, path, what):
    """Every rank learns whether any failed @what; raises this rank's own error first."""
    from ._dist import _agree
    ok, _ = _agree(dist, group, torch, dev, [0 if err is None else 1])
    if err is not None:
        raise err
    if not ok:
        raise RuntimeError(f"dmafs: {path}: another rank failed to {what} (its own error "
                           "says why)")


def _place_shared(tgt, model, entries, shared, rank, world, group, threads, stats,
                  batches=(), scratch=None, send=None):
    """_place_shard() for share: this rank's slices and its part of the tensors kept whole
    in another thread while this one exchanges the tensors of @batches (_exchange, with
    the @scratch Target and @send buffer), then every rank's part of the tensors kept
    whole broadcast to the others. Returns the placements' result (place time: until the
    last of them ended); adds the exchange's and the broadcasts' time to
    stats.exchange_seconds, and sets stats.exchange_tail_seconds."""
    torch = _torch()
    import torch.distributed as dist
    from ._dist import _global_rank, _parts
    from ._torch import _join
    parts = _parts(shared, world)
    swapped = {s.entry for b in batches for s in b}
    rest = [e for i, e in enumerate(entries) if i not in swapped]
    box = {}

    def place():
        try:
            box["res"] = _place_shard(tgt, model, rest, threads, parts[rank])
        except BaseException as e:  # every rank learns of it below
            box["err"] = e
        box["end"] = time.perf_counter_ns()

    t0 = time.perf_counter_ns()
    worker = threading.Thread(target=place, name="dmafs-shard")
    worker.start()
    try:
        xres, spent, ended = _exchange(tgt, scratch, send, model, entries, batches, rank,
                                       world, group, threads)
        xend = time.perf_counter_ns()
    finally:
        _join(worker)  # it writes into tgt
    stats.exchange_tail_seconds = max(0, xend - box["end"]) / 1e9 if batches else 0.0
    err, res = box.get("err"), box.get("res")
    _agree_or_raise(dist, group, torch, tgt.dev, err, model.path, "place its part")
    res.bytes += xres.bytes
    res.path = max(res.path, xres.path)
    if batches:
        res.elapsed_ns = max(res.elapsed_ns, ended - t0)
    t1 = time.perf_counter()
    for r, (lo, hi) in enumerate(parts):
        if hi > lo:
            dist.broadcast(tgt.base[lo:hi], src=_global_rank(dist, group, r), group=group)
    if tgt.base.is_cuda:
        torch.cuda.synchronize(tgt.dev)
    stats.exchange_seconds = spent + time.perf_counter() - t1
    return res


def load_shard(path, device="cpu", *, rank=None, world_size=None, plan, group=None, share=None,
               threads=0, stacklevel=2):
    """This rank's slices of a model (see dmafs.load(..., shard=...)).

    share: the tensors that every rank keeps whole are placed once between the ranks, each
    placing an equal part, and broadcast, and the narrow row slices are exchanged (see
    _exchange; a collective: every rank of @group must call this at the same time). None:
    when rank and world size are those of an initialised torch.distributed @group (always
    when they are not given); False: each rank places them all itself, the row slices one
    extent per row."""
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
        entries, size, shared = shard_plan(model, plan, rank, world_size, torch)
        sharing = _share_ok(share, rank, world_size, group, dev)
        stats = new_stats(model, dev, target)
        stats.rank, stats.world_size = rank, world_size
        batches, scratch_size = [], 0
        if sharing:
            import torch.distributed as dist
            from ._dist import _agree, _layout_digest
            batches, scratch_size = _exchange_plan(model, entries, plan, world_size)
            swaps = sum(len(b) for b in batches)
            same, _ = _agree(dist, group, torch, dev, [shared, _layout_digest(model), swaps,
                                                      scratch_size])
            if not same:
                raise RuntimeError(f"dmafs: {path}: the ranks opened different models, or "
                                   "plans that keep different tensors whole or exchange "
                                   "different ones: every rank must load the same files with "
                                   "the same plan")
            stats.exchange_seconds = 0.0
            stats.exchanged_tensors = swaps
            stats.exchange_tail_seconds = 0.0
            sharing = shared > 0 or swaps > 0  # else no collective needed
        out = {}
        if size or sharing:  # a rank with nothing of its own still sends its rows
            tgt = scratch = send = err = None
            try:
                tgt = Target(model, dev, target, index, max(size, 1))
                if batches:
                    # the rows to exchange: memory of its own, which the tensors returned
                    # do not keep
                    scratch = Target(model, dev, target, index, scratch_size)
                    send = torch.empty(scratch_size, dtype=torch.uint8, device=dev)
            except Exception as e:
                err = e
            try:
                if sharing:
                    _agree_or_raise(dist, group, torch, dev, err, path, "set up its placement")
                elif err is not None:
                    raise err
                if sharing:
                    res = _place_shared(tgt, model, entries, shared, rank, world_size, group,
                                        threads, stats, batches, scratch, send)
                else:
                    res = _place_shard(tgt, model, entries, threads)
                for t, dt, shape, at, ext, _whole in entries:
                    n = int(ext[:, 1].sum()) if len(ext) else 0
                    out[t.name] = tgt.base[at:at + n].view(dt).view(shape)
            except BaseException:
                out = None
                if tgt is not None:
                    tgt.base = None  # a host buffer unmaps now, not when the traceback goes
                raise
            finally:
                send = None
                for x in (scratch, tgt):
                    if x is not None:
                        x.close()
                if scratch is not None:
                    scratch.base = None  # the scratch goes now (host: unmapped)
            fallback = "; ".join(dict.fromkeys(
                f for f in (tgt.fallback, scratch and scratch.fallback) if f))
            tier = tgt.tier_bytes
            if scratch is not None:
                tier = None if tier is None or scratch.tier_bytes is None else \
                    tier + scratch.tier_bytes
            finish_stats(stats, res, fallback or None, t0, tier)
            warn_slow(model, res, fallback or None, tgt.why_posix, stacklevel + 1)
        else:
            for t, dt, shape, _at, _ext, _whole in entries:
                out[t.name] = torch.empty(shape, dtype=dt, device=dev)
            stats.seconds = time.perf_counter() - t0
            _state.stats = stats
        return out
