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
small (_EXCHANGE_BELOW) is not read per row: each rank places a contiguous range of the
tensor, as many bytes as its slice holds, in one extent, into its slice's own place, and
the ranks swap the pieces with one all_to_all per tensor that writes each rank's slice
over its range (_place_shared). The drives then read such a tensor once in all, in long
runs, instead of thousands of small reads per rank; these ranges are placed first, and
each batch is exchanged while the rest of the shard is placed.

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
# The tensors exchanged go in batches whose ranges fit this, or the largest single range
# when that is larger. The rank copies a batch's pieces into a send buffer of that size
# on its device, and an evenly split batch arrives in a receive buffer of that size, so
# during the load a rank's memory is its shard plus twice this bound (freed before
# load_shard returns).
_EXCHANGE_SEND = 256 << 20


# What a plan (or _rules) says of a tensor, besides None (no pattern: whole, and with share
# placed once between the ranks): SKIP, not placed in this rank; OWN, whole, placed by this
# rank alone (the others keep other tensors, as an expert of expert parallelism); (dim,
# blocks), this rank's even slice (the same rule in every rank); (dim, start, stop), rows
# [start, stop) of that dimension, this rank's alone.
SKIP, OWN = "skip", "own"


def _rule(name, plan, path):
    """The rule of the first plan pattern matching the tensor @name (see SKIP), or None
    (placed whole). A plan value is a dimension (int), (dimension, blocks), (dimension,
    start, stop), None (not placed) or "whole" (placed whole by this rank alone)."""
    for pattern, v in plan.items():
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        return _check_rule(v, path, f"plan pattern {pattern!r}")
    return None


def _check_rule(v, path, what):
    if v is None:
        return SKIP
    if v == "whole":
        return OWN
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, 1)
    if isinstance(v, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool)
                                            for x in v):
        if len(v) == 2 and v[1] >= 1:
            return tuple(v)
        if len(v) == 3 and 0 <= v[1] <= v[2]:
            return tuple(v)
    raise ValueError(f"dmafs: {path}: {what} has value {v!r}: want a dimension, (dimension, "
                     "number of packed blocks), (dimension, start, stop), None (not placed) "
                     "or \"whole\" (placed whole by this rank alone)")


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
    if rule is None or rule == OWN:
        return shape, np.array([[t.file_offset, t.nbytes]] if t.nbytes else [],
                               dtype=np.int64).reshape(-1, 2)
    dim = rule[0]
    nd = len(shape)
    if not -nd <= dim < nd:
        raise ValueError(f"dmafs: {path}: the plan splits dimension {dim} of tensor {t.name!r}, "
                         f"which has shape {list(shape)}")
    dim %= nd
    size = shape[dim]
    if len(rule) == 3:  # rows [start, stop) of the dimension
        blocks, block = 1, size
        start, stop = rule[1], rule[2]
        if stop > size:
            raise ValueError(f"dmafs: {path}: the plan keeps [{start}, {stop}) of dimension "
                             f"{dim} of tensor {t.name!r}, which has shape {list(shape)}")
    else:
        blocks = rule[1]
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


def shard_plan(model, plan, rank, world, torch, rules=None):
    """[(info, dtype, shard shape, buffer offset, extents, whole), ...], the buffer size and
    the end of the tensors kept whole: every tensor's slice, checked before any I/O
    (extents: see _slice). The tensors every rank keeps whole come first in the buffer
    (whole: True); a tensor the rank does not keep (SKIP) is not listed. @rules: {name:
    rule} (see SKIP) instead of the plan's patterns, for every tensor (absent: None)."""
    np = _numpy()
    rule_of = _rule_of(model, plan, rules)
    items = []
    for t, dt, shape in _plan(model, torch):
        rule = rule_of(t.name)
        if rule == SKIP:
            continue
        if rule is not None and rule != OWN and t.dtype_name == "F4":
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


def _rule_of(model, plan, rules):
    """name -> rule (see SKIP): by @rules when given, else by the plan's patterns."""
    if rules is not None:
        return lambda n: rules.get(n)
    return lambda n: _rule(n, plan, model.path)


def _place_file(buf, model, f, arr):
    """dmafs_place() of the extents in @arr (a C-ordered int64 array of rows [file_offset,
    length, buffer_offset], the layout of struct dmafs_extent) from file @f of @model,
    through the descriptor the model holds (a file removed since the model was opened is
    still read); an older libdmafs without dmafs_model_fd: the file opened by name."""
    fn = _lib.require("place")
    filename = model.files[f]
    want = arr[:, 1].copy()
    res = _lib.Result()
    fd = model.fd(f)
    own = fd is None
    if own:
        fd = os.open(filename, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _lib.check(fn(buf.handle, fd, arr.ctypes.data_as(ctypes.POINTER(_lib.Extent)),
                      len(arr), ctypes.byref(res)), filename)
    finally:
        if own:
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


def _shard_calls(tgt, model, entries, window=None):
    """Zero-argument calls that place @entries (see _calls) into tgt."""
    return [lambda f=f, a=a: _place_file(tgt.buf, model, f, a)
            for f, a in _calls(entries, window)]


def _fallback_copy(tgt, entries, window=None):
    """A host buffer placed for a GPU that refused its memory: what @entries placed there
    (see _spans) to the device; only that, other slices may be being placed meanwhile."""
    torch = _torch()
    from ._torch import _host_tensor_view
    host = _host_tensor_view(tgt.buf, torch)
    for lo, hi in _spans(entries, window):
        tgt.base[lo:hi].copy_(host[lo:hi])
    torch.cuda.synchronize(tgt.dev)


def _place_shard(tgt, model, entries, threads, window=None):
    """Every slice into tgt (of the tensors kept whole, only the part in @window, when
    given): the files' extents in dmafs_place() calls, up to @threads (or 8) at once."""
    t0 = time.perf_counter_ns()
    pool = _Pool([_shard_calls(tgt, model, entries, window)], "dmafs-shard", threads or 8)
    try:
        err = pool.wait(0)
    finally:
        pool.close()
    if err is not None:
        raise err
    res = pool.result()
    if tgt.fallback:
        _fallback_copy(tgt, entries, window)
    res.elapsed_ns = time.perf_counter_ns() - t0
    return res


class _Pool:
    """Zero-argument calls run in up to @width threads, in the order given, in groups:
    wait(g) returns once every call of group g has ended, or once the pool has stopped at
    an error (no call starts after one failed) and no call is running."""

    def __init__(self, groups, name, width):
        self._cv = threading.Condition()
        self._calls = [(g, c) for g, calls in enumerate(groups) for c in calls]
        self._left = [len(c) for c in groups]
        self._next = self._busy = 0
        self._stop = False
        self.errors, self.results = [], []
        self.ended = [0] * len(groups)  # perf_counter_ns() when a call of the group last ended
        self._threads = []
        try:
            for _ in range(max(1, min(width, len(self._calls)))):
                t = threading.Thread(target=self._work, name=name)
                t.start()
                self._threads.append(t)
        except BaseException:
            self.close()
            raise

    def _work(self):
        while True:
            with self._cv:
                if self._stop or self.errors or self._next == len(self._calls):
                    return
                g, fn = self._calls[self._next]
                self._next += 1
                self._busy += 1
            res = err = None
            try:
                res = fn()
            except BaseException as e:  # the waiter raises it, in its own thread
                err = e
            with self._cv:
                self._busy -= 1
                if err is None:
                    self.results.append(res)
                else:
                    self.errors.append(err)
                self._left[g] -= 1
                self.ended[g] = time.perf_counter_ns()
                self._cv.notify_all()

    def wait(self, g):
        """Wait for group @g; returns the first error of any call, or None."""
        with self._cv:
            while self._left[g] and not (self.errors and not self._busy):
                self._cv.wait()
            return self.errors[0] if self.errors else None

    def close(self):
        """No call starts from now on; wait for those running."""
        from ._torch import _join
        with self._cv:
            self._stop = True
        for t in self._threads:
            _join(t)

    def result(self):
        """The calls' results added up (bytes; the slowest path taken)."""
        res = _lib.Result()
        for r in self.results:
            res.bytes += r.bytes
            res.path = _lib.slower(res.path, r.path)
        return res


class _Swap:
    """A tensor whose slices the ranks exchange (see _place_shared): its entry (index into
    shard_plan's list), viewed as bytes [outer, row]; per rank the byte columns [lo, hi)
    of its slice and the bytes [lo, hi) of the tensor it places (as many as its slice
    holds, the ranks' ranges one after the other); its slot in the send buffer."""

    __slots__ = ("entry", "outer", "row", "cols", "ranges", "slot")


def _runs(row, lo, hi, a, b):
    """[(offset from lo, rows, width), ...]: the bytes in columns [a, b) of rows of @row
    bytes among the tensor's bytes [lo, hi), in order: a partial first row, whole rows,
    a partial last row."""
    if b <= a or hi <= lo:
        return []
    r0, c0 = divmod(lo, row)
    r1, c1 = divmod(hi, row)
    if r0 == r1:
        x, y = max(c0, a), min(c1, b)
        return [(r0 * row + x - lo, 1, y - x)] if y > x else []
    out = []
    if c0:
        x = max(c0, a)
        if b > x:
            out.append((r0 * row + x - lo, 1, b - x))
        r0 += 1
    if r1 > r0:
        out.append((r0 * row + a - lo, r1 - r0, b - a))
    if c1 and min(c1, b) > a:
        out.append((r1 * row + a - lo, 1, min(c1, b) - a))
    return out


def _count(row, lo, hi, a, b):
    return sum(n * w for _off, n, w in _runs(row, lo, hi, a, b))


def _exchange_plan(model, entries, rule_of, world):
    """([[_Swap, ...], ...], send bytes): the tensors of shard_plan's @entries whose slices
    the ranks exchange rather than read per row, in batches whose send slots fit
    _EXCHANGE_SEND (or one tensor's slot, when larger), and the bytes of the largest
    batch. The same in every rank: shapes, plan and world decide, never the rank."""
    swaps = []
    for i, (t, _dt, _shape, _at, _ext, whole) in enumerate(entries):
        rule = rule_of(t.name)
        # an even slice only: a rank's own range or tensor is not the others' business
        if whole or world < 2 or rule == OWN or len(rule) != 2:
            continue
        dim, blocks = rule
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
        s.cols = [(a * inner, b * inner) for a, b in (shard_range(size, r, world)
                                                      for r in range(world))]
        ends = [0]
        for a, b in s.cols:
            ends.append(ends[-1] + outer * (b - a))
        s.ranges = list(zip(ends, ends[1:]))
        swaps.append(s)
    if not swaps:
        return [], 0
    # rank 0 has the widest slice: its range sizes the slot
    need = [-(-s.outer * (s.cols[0][1] - s.cols[0][0]) // 4096) * 4096 for s in swaps]
    bound = max(_EXCHANGE_SEND, max(need))
    batches, used, send = [], bound, 0
    for s, n in zip(swaps, need):
        if used + n > bound:
            batches.append([])
            used = 0
        s.slot = used
        used += n
        batches[-1].append(s)
        send = max(send, used)
    return batches, send


def _range_entries(entries, batch, rank):
    """shard_plan-style entries (of no dtype) placing this rank's range of each tensor of
    @batch into its own slice's place in the buffer."""
    np = _numpy()
    out = []
    for s in batch:
        t, at = entries[s.entry][0], entries[s.entry][3]
        lo, hi = s.ranges[rank]
        if hi > lo:
            out.append((t, None, None, at,
                        np.array([[t.file_offset + lo, hi - lo]], dtype=np.int64), False))
    return out


def _swap(s, at, send, tgt, rank, world, group):
    """Start the exchange of one tensor placed by _range_entries: this rank's range of the
    tensor's bytes, in its slice's place at @at, goes to the send buffer as one piece per
    rank, [that rank's columns of the range, row by row], in rank order, and
    all_to_all_single sends each piece to its rank and receives this rank's slice,
    [outer, width] row-major, over the range: the ranks' ranges follow each other in the
    tensor, so their pieces of a slice do in the slice. Returns the collective's work
    (async)."""
    import torch.distributed as dist
    lo, hi = s.ranges[rank]
    mine = tgt.base[at:at + hi - lo]
    buf = send[s.slot:s.slot + hi - lo]
    if hi > lo:
        widths = {b - a for a, b in s.cols}
        if lo % s.row == 0 and hi % s.row == 0 and len(widths) == 1:  # one copy
            w, n = widths.pop(), (hi - lo) // s.row
            buf.view(world, n, w).copy_(mine.view(n, world, w).transpose(0, 1))
        else:
            pos = 0
            for a, b in s.cols:
                for off, n, w in _runs(s.row, lo, hi, a, b):
                    buf[pos:pos + n * w].view(n, w).copy_(
                        mine.as_strided((n, w), (s.row, 1), mine.storage_offset() + off))
                    pos += n * w
    a, b = s.cols[rank]
    return dist.all_to_all_single(mine, buf, [_count(s.row, x, y, a, b) for x, y in s.ranges],
                                  [_count(s.row, lo, hi, c, d) for c, d in s.cols],
                                  group=group, async_op=True)


def _even(s, rank):
    """Whether the tensor of _Swap @s splits evenly: every rank the same columns' width and
    a range of whole rows (then its exchange can join a batch's one collective)."""
    lo, hi = s.ranges[rank]
    return len({b - a for a, b in s.cols}) == 1 and s.outer % len(s.cols) == 0 and \
        lo % s.row == 0 and hi % s.row == 0


def _swap_batch(batch, entries, send, recv, tgt, rank, world, group):
    """The exchange of a batch of evenly split tensors (_even) in one all_to_all: per
    destination rank, the pieces of every tensor, one after the other (P bytes in all),
    as [world][P] in the send buffer; what comes back, [world][P] in @recv, holds from
    each rank its piece of this rank's columns of each tensor, which the returned call
    copies into the tensor's slice once the collective is done (the ranks' ranges follow
    each other in the tensor, so their pieces of a slice do in the slice). Returns
    (work, finish)."""
    import torch.distributed as dist
    at, parts = 0, []
    for s in batch:
        lo, hi = s.ranges[rank]
        w = s.cols[0][1] - s.cols[0][0]
        n = (hi - lo) // s.row
        parts.append((entries[s.entry][3], n, w, at, hi - lo))
        at += n * w
    total = at
    base = send.storage_offset()
    for where, n, w, off, size in parts:
        if size:
            mine = tgt.base[where:where + size]
            send.as_strided((world, n, w), (total, w, 1), base + off).copy_(
                mine.view(n, world, w).transpose(0, 1))
    work = dist.all_to_all_single(recv[:world * total], send[:world * total], group=group,
                                  async_op=True)

    def finish():
        rbase = recv.storage_offset()
        for where, n, w, off, size in parts:
            if size:
                tgt.base[where:where + size].view(world, n * w).copy_(
                    recv.as_strided((world, n * w), (total, 1), rbase + off))
    return work, finish


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
                  batches=(), send=None, recv=None):
    """_place_shard() for share. One pool of @threads (or 8) places, in this order, this
    rank's range of every tensor of @batches (see _exchange_plan) into its slice's place,
    a group of calls per batch, then its other slices and its part of the tensors kept
    whole. Meanwhile this thread exchanges each batch as soon as it is placed: the ranks
    agree that every one placed its ranges (a rank that failed must not leave the others
    waiting in the exchange), and the batch is exchanged: in one collective through @recv
    when its tensors split evenly (_swap_batch), else one per tensor (_swap); the @send
    buffer is reused batch after batch. Then every rank's part of the tensors kept whole is broadcast to
    the others. Every rank issues the same collectives in the same order. Returns the
    placements' result (place time: until the last of them ended); adds the exchange's and
    the broadcasts' time to stats.exchange_seconds, and sets stats.exchange_tail_seconds."""
    torch = _torch()
    import torch.distributed as dist
    from ._dist import _global_rank, _parts
    parts = _parts(shared, world)
    swapped = {s.entry for b in batches for s in b}
    rest = [e for i, e in enumerate(entries) if i not in swapped]
    ranges = [_range_entries(entries, b, rank) for b in batches]
    groups = [_shard_calls(tgt, model, r) for r in ranges]
    groups.append(_shard_calls(tgt, model, rest, parts[rank]))
    t0 = time.perf_counter_ns()
    spent, works, finishing = 0.0, [], []
    pool = _Pool(groups, "dmafs-shard", threads or 8)
    try:
        for i, batch in enumerate(batches):
            err = pool.wait(i)
            t1 = time.perf_counter()
            if err is None and tgt.fallback:
                _fallback_copy(tgt, ranges[i])
            for w in works:  # the send buffer is reused; NCCL: this stream waits for them
                w.wait()
            works = []
            for f in finishing:  # out of the receive buffer before it is reused
                f()
            finishing = []
            _agree_or_raise(dist, group, torch, tgt.dev, err, model.path,
                            "place the rows it exchanges")
            if recv is not None and all(_even(s, r) for s in batch for r in range(world)):
                w, f = _swap_batch(batch, entries, send, recv, tgt, rank, world, group)
                works.append(w)
                finishing.append(f)
            else:
                for s in batch:
                    works.append(_swap(s, entries[s.entry][3], send, tgt, rank, world, group))
            spent += time.perf_counter() - t1
        t1 = time.perf_counter()
        for w in works:
            w.wait()
        for f in finishing:
            f()
        spent += time.perf_counter() - t1
        xend = time.perf_counter_ns()
        err = pool.wait(len(batches))
    finally:
        pool.close()  # its calls write into tgt
    ended = max([t0] + pool.ended)
    stats.exchange_tail_seconds = max(0, xend - max(t0, pool.ended[-1])) / 1e9 \
        if batches else 0.0
    _agree_or_raise(dist, group, torch, tgt.dev, err, model.path, "place its part")
    res = pool.result()
    if tgt.fallback:
        _fallback_copy(tgt, rest, parts[rank])
        ended = time.perf_counter_ns()
    res.elapsed_ns = ended - t0
    t1 = time.perf_counter()
    for r, (lo, hi) in enumerate(parts):
        if hi > lo:
            dist.broadcast(tgt.base[lo:hi], src=_global_rank(dist, group, r), group=group)
    if tgt.base.is_cuda:
        torch.cuda.synchronize(tgt.dev)
    stats.exchange_seconds = spent + time.perf_counter() - t1
    return res


def load_shard(path, device="cpu", *, rank=None, world_size=None, plan, group=None, share=None,
               threads=0, stacklevel=2, rules=None):
    """This rank's slices of a model (see dmafs.load(..., shard=...)).

    share: the tensors that every rank keeps whole are placed once between the ranks, each
    placing an equal part, and broadcast, and the narrow row slices are exchanged (see
    _exchange; a collective: every rank of @group must call this at the same time). None:
    when rank and world size are those of an initialised torch.distributed @group (always
    when they are not given); False: each rank places them all itself, the row slices one
    extent per row. @rules: {tensor name: rule} (see SKIP) instead of @plan's patterns."""
    torch = _torch()
    if rank is None or world_size is None:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("dmafs: a shard needs rank and world_size, or an initialised "
                               "torch.distributed")
        rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    if not isinstance(plan, dict):
        raise TypeError("dmafs: plan must be a dict {tensor name pattern: dimension, "
                        "(dimension, packed blocks), (dimension, start, stop), None or "
                        "\"whole\"}")
    if not (isinstance(rank, int) and isinstance(world_size, int) and 0 <= rank < world_size):
        raise ValueError(f"dmafs: rank {rank!r} of world_size {world_size!r}")
    t0 = time.perf_counter()
    with _lib.Model(path) as model:
        dev, target, index = _device(device)
        entries, size, shared = shard_plan(model, plan, rank, world_size, torch, rules)
        sharing = _share_ok(share, rank, world_size, group, dev)
        stats = new_stats(model, dev, target)
        stats.rank, stats.world_size = rank, world_size
        batches, send_size = [], 0
        if sharing:
            import torch.distributed as dist
            from ._dist import _agree, _layout_digest
            batches, send_size = _exchange_plan(model, entries, _rule_of(model, plan, rules),
                                                world_size)
            swaps = sum(len(b) for b in batches)
            same, _ = _agree(dist, group, torch, dev, [shared, _layout_digest(model), swaps,
                                                      send_size])
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
            tgt = send = recv = err = None
            try:
                tgt = Target(model, dev, target, index, max(size, 1))
                if batches:
                    # the pieces to send: memory of its own, which the tensors returned
                    # do not keep
                    send = torch.empty(send_size, dtype=torch.uint8, device=dev)
                    # a batch of evenly split tensors arrives here first (_swap_batch)
                    recv = torch.empty(send_size, dtype=torch.uint8, device=dev)
            except Exception as e:
                err = e
            try:
                if sharing:
                    _agree_or_raise(dist, group, torch, dev, err, path, "set up its placement")
                elif err is not None:
                    raise err
                if sharing:
                    res = _place_shared(tgt, model, entries, shared, rank, world_size, group,
                                        threads, stats, batches, send, recv)
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
                send = recv = None  # freed now
                if tgt is not None:
                    tgt.close()
            fallback = tgt.fallback
            tier = tgt.tier_bytes
            finish_stats(stats, res, fallback or None, t0, tier)
            warn_slow(model, res, fallback or None, tgt.why_posix, stacklevel + 1)
        else:
            for t, dt, shape, _at, _ext, _whole in entries:
                out[t.name] = torch.empty(shape, dtype=dt, device=dev)
            stats.seconds = time.perf_counter() - t0
            _state.stats = stats
        return out
