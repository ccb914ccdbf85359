# SPDX-License-Identifier: MIT
"""_torch.py - place a safetensors model with libdmafs and hand it to PyTorch.

The whole model goes into one allocation (host: a dmafs shared-memory buffer; GPU: one
torch.empty block from the caching allocator), one dmafs_model_place() fills it, and
every tensor is a view of it (base.view(dtype).as_strided(shape, ...), made while the
placement runs; a tensor at an offset its element size does not divide is a copy).

Lifetime, in one place:
  - GPU: the registration with the daemon ends before the load returns (the daemon wrote
    through a CUDA/HIP IPC handle and is done); the memory is torch's and lives while
    any returned tensor does.
  - Host: the memory is the dmafs buffer itself, so the buffer, and the session it
    belongs to, live as long as the memory is mapped: the session is closed (which
    unregisters and unmaps the buffer) by a finalizer of an owner object that the
    ctypes array under the base tensor's storage references. The storage, not the base
    tensor's Python object, is what every view keeps alive, so the memory goes only
    after the last view is gone.
"""

import ctypes
import errno
import json
import os
import struct
import threading
import time
import warnings
import weakref

from . import _lib


class SlowPathWarning(UserWarning):
    """A load did not use the dmafs placement channel (posix fallback, or a host copy)."""


# safetensors dtype name -> torch attribute. Some exist only in newer torch (uint16/32/64
# since 2.3, float8_e8m0fnu 2.7, float4_e2m1fn_x2 2.8); a missing one is refused by name.
_TORCH_DTYPES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "U16": "uint16",
    "F16": "float16",
    "BF16": "bfloat16",
    "I32": "int32",
    "U32": "uint32",
    "F32": "float32",
    "F64": "float64",
    "I64": "int64",
    "U64": "uint64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
    "F4": "float4_e2m1fn_x2",
}

# Registration refusals that leave a slower way that still works: place into host memory
# and copy. EINVAL: not inside one device allocation; ENODEV: no runtime here or the IPC
# handle could not be made (e.g. expandable segments, which are VMM memory); ENXIO: the
# daemon cannot open the allocation (other GPU, no GPU runtime in the daemon).
_GPU_FALLBACK_ERRNOS = (errno.EINVAL, errno.ENODEV, errno.ENXIO)

_state = threading.local()


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError(f"dmafs: loading tensors needs PyTorch ({e})") from e
    return torch


class LoadStats:
    """What one load did. seconds is the wall time of the whole call (allocation,
    registration, placement, views); place_seconds only dmafs_model_place(). For
    load_distributed(): bytes and place_seconds are this rank's part (from its first chunk's
    start to its last chunk's end, broadcasts of earlier chunks running meanwhile),
    exchange_seconds the broadcasting left after that until every part had arrived, rank
    and world_size the process group's; None otherwise.

    For dmafs.load(..., shard=plan) (the ranks together): bytes are what this rank placed
    (its slices, its part of the tensors kept whole, and for the exchanged tensors its
    block of whole rows instead of its slice), place_seconds from the first placement's
    start to the last one's end; exchange_seconds the time the loading thread spent in the
    exchange of the narrow row slices (copying the pieces out of the rows, the agreement
    before each batch, starting the all_to_all collectives and waiting for them; the
    other placements run meanwhile) plus the broadcasts of the tensors kept whole after
    the placements; exchanged_tensors how many tensors' slices were exchanged that way
    rather than read one extent per row (the same in every rank); exchange_tail_seconds
    how long that exchange went on after this rank's other placements had ended (0 when
    it ended first: the time the exchange adds to the load, before the broadcasts).
    exchanged_tensors and exchange_tail_seconds are None for other loads,
    shard=(rank, world_size, plan) included.

    tier_bytes: of bytes, those the daemon placed from the mount's warm tier (mount option
    tier=) with no drive read; drive_bytes: the rest (bytes - tier_bytes), read from the
    drives (or, on the posix path, through the page cache). Both None when libdmafs is
    older than dmafs_buf_tier_bytes (0.5); tier_bytes is 0 without a tier, on the posix
    path, and from a daemon older than 0.5. A piece comes from the tier only when the tier
    holds its whole 1 MiB chunk, filled by an earlier placement or dmafs.prefetch().

    plan_seconds: under dmafs.enable(), in a tensor- or expert-parallel from_pretrained,
    the time spent before the load asking transformers what this rank takes of each tensor
    (not in seconds); None otherwise.

    copies_skipped: under dmafs.enable(), the deep copies of weight converters that
    transformers' loading loop would have made and thrown away (one per checkpoint tensor
    merged into a parameter whose converter was already copied), which dmafs skipped;
    loop_pool_off: whether that loop made the tensors without its thread pool (every
    tensor was placed by dmafs); both None otherwise (see _hfloop.py)."""

    __slots__ = ("model", "files", "tensors", "bytes", "seconds", "place_seconds", "path",
                 "target", "fallback", "rank", "world_size", "exchange_seconds", "tier_bytes",
                 "drive_bytes", "exchanged_tensors", "exchange_tail_seconds", "plan_seconds",
                 "copies_skipped", "loop_pool_off")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    @property
    def gbps(self):
        return self.bytes / self.seconds / 1e9 if self.seconds else 0.0

    @property
    def place_gbps(self):
        return self.bytes / self.place_seconds / 1e9 if self.place_seconds else 0.0

    def as_dict(self):
        d = {k: getattr(self, k) for k in self.__slots__}
        d.update(gbps=self.gbps, place_gbps=self.place_gbps)
        return d

    def __repr__(self):
        return (f"LoadStats({self.model!r}: {self.files} files, {self.tensors} tensors, "
                f"{self.bytes} bytes in {self.seconds:.3f} s = {self.gbps:.2f} GB/s "
                f"(placement {self.place_seconds:.4f} s), path {self.path}, "
                f"target {self.target}" + (f", fallback: {self.fallback}" if self.fallback else "")
                + (f", rank {self.rank} of {self.world_size}" if self.world_size else "")
                + (f", exchange {self.exchange_seconds:.4f} s"
                   if self.exchange_seconds is not None else "")
                + (f" ({self.exchanged_tensors} tensors exchanged"
                   + (f", {self.exchange_tail_seconds:.4f} s of it after the other placements"
                      if self.exchange_tail_seconds is not None else "") + ")"
                   if self.exchanged_tensors else "")
                + (f", {self.tier_bytes / 1e9:.2f} GB from the warm tier"
                   if self.tier_bytes else "")
                + ")")


def last_stats():
    """LoadStats of the last load in this thread (load_file, load, or a safe_open's first
    get_tensor), or None before the first one."""
    return getattr(_state, "stats", None)


def _device(device):
    """(torch.device, target, ordinal) for "cpu", "cuda", "cuda:N", N or a torch.device."""
    torch = _torch()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"dmafs: invalid device {device!r}: {e}") from None
    if dev.type == "cpu":
        return dev, _lib.TARGET_HOST, None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"dmafs: device {device!r} asked for, but torch.cuda.is_available() "
                               "is False")
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        # ROCm builds of torch call their devices "cuda" too; their memory is hipMalloc'd.
        target = _lib.TARGET_HIP if getattr(torch.version, "hip", None) else _lib.TARGET_CUDA
        return torch.device("cuda", index), target, index
    raise ValueError(f"dmafs: device {device!r}: only cpu and cuda (CUDA or ROCm) devices are "
                     "supported")


def _plan(model, torch):
    """Per tensor: (info, torch dtype, torch shape). Refuses before any I/O a dtype this
    torch lacks, naming the tensor."""
    plan = []
    for t in model.tensors:
        attr = _TORCH_DTYPES.get(t.dtype_name)
        dt = getattr(torch, attr, None) if attr else None
        if dt is None:
            need = f"torch.{attr}" if attr else "a matching dtype"
            raise TypeError(f"dmafs: {model.path}: tensor {t.name!r} has dtype {t.dtype_name}, "
                            f"which this PyTorch ({torch.__version__}) cannot represent "
                            f"(needs {need})")
        shape = t.shape
        if t.dtype_name == "F4":
            # float4_e2m1fn_x2 holds two values per element: the innermost dimension halves.
            if not shape or shape[-1] % 2:
                raise ValueError(f"dmafs: {model.path}: F4 tensor {t.name!r} of shape "
                                 f"{list(shape)} has no even innermost dimension to pack in "
                                 "pairs")
            shape = shape[:-1] + (shape[-1] // 2,)
        plan.append((t, dt, shape))
    return plan


def _contiguous_strides(shape):
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= max(d, 1)
    return tuple(reversed(strides))


def _aligned_views(base, plan, torch, at=None):
    """({name: tensor}, rest): views of base for the tensors whose offset their element
    size divides; a tensor starts at at[name] when given, else at its layout offset. rest
    lists the plan entries left out (see _unaligned_copies). Views need no placed bytes:
    they can be made while the placement runs. One as_strided per tensor on a view of base
    per dtype (a third of the time of slice, view and reshape)."""
    out, rest, typed = {}, [], {}
    n = base.numel()
    for entry in plan:
        t, dt, shape = entry
        typed_base = typed.get(dt)
        if typed_base is None:
            es = torch.empty(0, dtype=dt).element_size()
            # base starts at its storage's start (torch.empty, frombuffer); should it not,
            # every tensor of this dtype goes the way of the unaligned ones.
            tb = base[:n - n % es].view(dt) if base.storage_offset() % es == 0 else None
            typed_base = typed[dt] = (tb, es)
        tb, es = typed_base
        off = t.buffer_offset if at is None else at[t.name]
        if tb is None or off % es:
            rest.append(entry)
            continue
        out[t.name] = tb.as_strided(shape, _contiguous_strides(shape),
                                    tb.storage_offset() + off // es)
    return out, rest


def _unaligned_copies(base, rest, torch, out, at=None):
    """Add to out the tensors _aligned_views left out, once their bytes are placed: the file
    puts each at an offset its element size does not divide, and torch views only aligned
    data, so each is a copy (aligned) instead."""
    for t, dt, shape in rest:
        off = t.buffer_offset if at is None else at[t.name]
        out[t.name] = base[off:off + t.nbytes].clone().view(dt).reshape(shape)


def _views(base, plan, torch, at=None):
    """{name: tensor}: the tensors of plan in base, which holds the placed bytes (views,
    copies where unaligned); a tensor starts at at[name] when given, else at its layout
    offset."""
    out, rest = _aligned_views(base, plan, torch, at)
    _unaligned_copies(base, rest, torch, out, at)
    return out


def _join(thread):
    """Wait for thread to end, even through KeyboardInterrupt (raised afterwards): a
    placement still running may be writing into the memory the caller would free."""
    interrupted = None
    while thread.is_alive():
        try:
            thread.join()
        except BaseException as e:
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted


class _HostMemory:
    """Owner of a host placement: referenced from the ctypes array that the base tensor's
    storage keeps alive; its finalizer closes the session, which unregisters and unmaps."""

    __slots__ = ("__weakref__",)


def _close_in_owner(session, pid):
    # A child made by fork() shares the mapping but not the registration (-EPERM there):
    # leave both to the parent.
    if os.getpid() == pid:
        session.close()


def _host_tensor(session, buf, torch):
    """uint8 tensor over a host Buffer, owning it (see the module docstring)."""
    owner = _HostMemory()
    fin = weakref.finalize(owner, _close_in_owner, session, os.getpid())
    # At interpreter exit tensors may still be used by other atexit code; the process
    # ending frees the memory and ends the registration anyway.
    fin.atexit = False
    arr = (ctypes.c_ubyte * buf.size).from_address(buf.ptr)
    arr._dmafs_owner = owner
    # frombuffer keeps arr referenced from the storage until the storage is freed.
    return torch.frombuffer(arr, dtype=torch.uint8)


def _place(model, buf, threads, part):
    """Place the whole model into buf; or only layout bytes part = (begin, end), where the
    whole placement puts them; or part = [(begin, end, offset), ...]: each layout range
    compactly at its buffer offset (one result for all: bytes summed, the slowest path)."""
    if part is None:
        return model.place(buf, 0, threads)
    if isinstance(part, tuple):
        return model.place_part(buf, part[0], part[1], 0, threads)
    total = _lib.Result()
    for begin, end, off in part:
        r = model.place_range(buf, begin, end, off, threads)
        total.bytes += r.bytes
        total.elapsed_ns += r.elapsed_ns
        total.path = _lib.slower(total.path, r.path)
    return total


class Target:
    """Where a model's placements land: base, a uint8 tensor of size bytes on dev, and the
    Buffer the daemon writes. For the host that is base's own memory (a dmafs buffer that
    base owns); for a GPU, base's memory registered with the daemon or, when the daemon
    cannot take it, a host Buffer whose placed ranges place() copies into base (fallback
    then says why). why_posix says why the placement channel is not used (None when it
    is). place() may run in several threads at once; close() ends the registration and
    the session (a host base keeps its memory until its last view is gone)."""

    def __init__(self, model, dev, target, index, size):
        torch = _torch()
        self.path, self.dev, self.size = model.path, dev, size
        self.fallback = self.why_posix = self.buf = self.tier_bytes = None
        self.session = model.session()
        try:
            caps = self.session.caps()
            if not caps.on_dmafs:
                self.why_posix = caps.target(target).why.decode("utf-8", "replace") or \
                    caps.host.why.decode("utf-8", "replace")
            if target == _lib.TARGET_HOST:
                self.buf = _lib.Buffer.alloc_host(self.session, size, model.path)
                self.base = _host_tensor(self.session, self.buf, torch)
                self.session = None  # base's owner closes it
                return
            with torch.cuda.device(index):
                self.base = torch.empty(size, dtype=torch.uint8, device=dev)
            # The caching allocator may hand back a block that queued kernels still use;
            # the daemon writes outside torch's stream order, so let them finish first.
            torch.cuda.synchronize(dev)
            ret = _lib.Buffer.register_gpu(self.session, target, self.base.data_ptr(), size,
                                           index)
            if isinstance(ret, _lib.Buffer):
                self.buf = ret
                return
            if -ret not in _GPU_FALLBACK_ERRNOS:
                _lib.check(ret, model.path)
            kind = "HIP" if target == _lib.TARGET_HIP else "CUDA"
            why = (f"dmafs_buf_register_{kind.lower()} refused the {kind} memory of {dev} "
                   f"({_lib.strerror(ret)})")
            if "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF",
                                                            "").replace(" ", ""):
                why += ("; PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True, whose "
                        "memory has no IPC handle")
            self.buf = _lib.Buffer.alloc_host(self.session, size, model.path)
            self.fallback = why + ": placed into host memory and copied"
        except BaseException:
            self.close()
            raise

    def place(self, model, part, threads):
        """Place part (see _place) and return its result; the bytes are in base when it
        returns."""
        res = _place(model, self.buf, threads, part)
        if self.fallback:
            torch = _torch()
            t0 = time.perf_counter_ns()
            lo, hi = part if isinstance(part, tuple) else (0, self.size)
            self.base[lo:hi].copy_(_host_tensor_view(self.buf, torch)[lo:hi])
            torch.cuda.synchronize(self.dev)
            res.elapsed_ns += time.perf_counter_ns() - t0
        return res

    def close(self):
        # The bytes placed from the warm tier, read while the buffer is there: a host
        # buffer lives as long as base, ours until the unregistration below.
        if self.buf is not None and self.buf.handle and getattr(self, "base", None) is not None:
            self.tier_bytes = self.buf.tier_bytes
        if self.session is not None:
            if self.buf is not None:
                self.buf.unregister()
            self.session.close()
            self.session = None


def _host_tensor_view(buf, torch):
    """uint8 tensor over a host Buffer that does not own it (caller keeps buf registered)."""
    arr = (ctypes.c_ubyte * buf.size).from_address(buf.ptr)
    return torch.frombuffer(arr, dtype=torch.uint8)


def place_base(model, dev, target, index, threads, part=None, size=None):
    """Allocate the model's buffer on dev (or one of size bytes) and place it (or only
    part: see _place). Returns (base uint8 tensor, result, GPU fallback reason or None,
    why the placement channel is not used or None, bytes placed from the warm tier or
    None)."""
    t = Target(model, dev, target, index, size or model.nbytes)
    try:
        res = t.place(model, part, threads)
    except BaseException:
        t.base = None  # a host base unmaps now, not when the traceback goes
        raise
    finally:
        t.close()
    return t.base, res, t.fallback, t.why_posix, t.tier_bytes


def new_stats(model, dev, target):
    stats = LoadStats(model=os.fspath(model.path), files=len(model.files),
                      tensors=len(model.tensors), bytes=0, seconds=0.0, place_seconds=0.0,
                      path=_lib.path_name(_lib.PATH_NONE), target=str(dev), fallback=None)
    if _lib.C.buf_tier_bytes is not None:  # else unknown: None
        stats.tier_bytes = stats.drive_bytes = 0
    if target == _lib.TARGET_HIP:
        stats.target = f"{dev} (HIP)"
    return stats


def finish_stats(stats, res, fallback, t0, tier_bytes=None):
    """Fill stats from a placement's result and the bytes of it placed from the warm tier
    (None: unknown); seconds since t0; it becomes last_stats()."""
    stats.bytes = res.bytes
    stats.tier_bytes = tier_bytes
    stats.drive_bytes = None if tier_bytes is None else res.bytes - tier_bytes
    stats.place_seconds = res.elapsed_ns / 1e9
    stats.path = _lib.path_name(res.path)
    stats.fallback = fallback
    stats.seconds = time.perf_counter() - t0
    _state.stats = stats


def warn_slow(model, res, fallback, why_posix, stacklevel):
    """SlowPathWarning when the placement did not use the channel or went through host memory."""
    if res.path == _lib.PATH_POSIX:
        warnings.warn(f"dmafs: {model.path} was loaded through the posix path (pread + copy in "
                      f"this process, not the dmafs placement channel): {why_posix}"
                      + (f"; and {fallback}" if fallback else ""),
                      SlowPathWarning, stacklevel=stacklevel + 1)
    elif fallback:
        warnings.warn(f"dmafs: {model.path}: {fallback} (path {_lib.path_name(res.path)})",
                      SlowPathWarning, stacklevel=stacklevel + 1)


def place_model(model, device, threads, stacklevel):
    """Place an open _lib.Model onto device; returns {name: tensor} and sets last_stats()."""
    torch = _torch()
    t0 = time.perf_counter()
    dev, target, index = _device(device)
    plan = _plan(model, torch)
    stats = new_stats(model, dev, target)
    if not model.files or not model.nbytes:
        _state.stats = stats
        return {}
    # The views are made while the placement runs (it releases the GIL): only the copies
    # of unaligned tensors wait for the bytes.
    tgt = Target(model, dev, target, index, model.nbytes)
    box = {}

    def place():
        try:
            box["res"] = tgt.place(model, None, threads)
        except BaseException as e:  # raised below, in the caller's thread
            box["err"] = e

    try:
        worker = threading.Thread(target=place, name="dmafs-place")
        worker.start()
        try:
            tensors, rest = _aligned_views(tgt.base, plan, torch)
        finally:
            _join(worker)
        if "err" in box:
            raise box["err"]
        _unaligned_copies(tgt.base, rest, torch, tensors)
    except BaseException:
        tensors = tgt.base = None  # a host base unmaps now, not when the traceback goes
        raise
    finally:
        tgt.close()
    res, fallback, why_posix = box["res"], tgt.fallback, tgt.why_posix
    finish_stats(stats, res, fallback, t0, tgt.tier_bytes)
    warn_slow(model, res, fallback, why_posix, stacklevel + 1)
    return tensors


# Tensors of one device less than this apart in the layout are placed in one run (the gap
# is read and kept too): fewer, longer placements against a little memory.
_RUN_GAP = 64 << 10


def _runs(infos):
    """Layout runs of tensors (sorted by offset): ([(begin, end, offset)], size, {name:
    offset in the device's buffer}). A run starts at the same offset modulo 4096 as in
    the layout, so reads stay aligned as they would in a whole placement."""
    runs, at, size = [], {}, 0
    for t in infos:
        lo, hi = t.buffer_offset, t.buffer_offset + t.nbytes
        if runs and lo <= runs[-1][1] + _RUN_GAP:
            b, e, off = runs[-1]
            runs[-1] = (b, max(e, hi), off)
        else:
            off = (size + 4095) // 4096 * 4096 + lo % 4096
            runs.append((lo, hi, off))
        b, e, off = runs[-1]
        at[t.name] = off + (lo - b)
        size = off + (runs[-1][1] - b)
    return runs, max(size, 1), at


def place_spread(model, device_of, threads, stacklevel):
    """Place each tensor onto its own device (device_of: {name: device}): one buffer per
    device holding that device's tensors, placed in layout runs with
    dmafs_model_place_range, the devices at once. Returns {name: tensor} and sets
    last_stats() (bytes: all devices; place_seconds: the slowest device)."""
    torch = _torch()
    t0 = time.perf_counter()
    plan = _plan(model, torch)
    groups = {}
    for p in plan:
        d = _device(device_of[p[0].name])
        groups.setdefault(d[0], (d, []))[1].append(p)
    stats = new_stats(model, ", ".join(str(d) for d in groups) or "cpu", None)
    if not model.files or not model.nbytes:
        _state.stats = stats
        return {}
    results, errors = {}, []

    def one(key):
        (dev, target, index), items = groups[key]
        try:
            runs, size, at = _runs(sorted((p[0] for p in items), key=lambda t: t.buffer_offset))
            base, res, fallback, why_posix, tier = place_base(model, dev, target, index,
                                                              threads, part=runs, size=size)
            results[key] = (_views(base, items, torch, at), res, fallback, why_posix, tier)
        except BaseException as e:  # raised in the caller's thread below
            errors.append(e)

    workers = [threading.Thread(target=one, args=(k,), name=f"dmafs-place-{k}")
               for k in list(groups)[1:]]
    for w in workers:
        w.start()
    if groups:
        one(next(iter(groups)))
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    out, total = {}, _lib.Result()
    fallbacks, tier = [], 0
    for key, (views, res, fallback, why_posix, t) in results.items():
        out.update(views)
        tier = None if tier is None or t is None else tier + t
        total.bytes += res.bytes
        total.elapsed_ns = max(total.elapsed_ns, res.elapsed_ns)
        total.path = _lib.slower(total.path, res.path)
        if fallback:
            fallbacks.append(f"{key}: {fallback}")
        warn_slow(model, res, fallback, why_posix, stacklevel + 1)
    finish_stats(stats, total, "; ".join(fallbacks) or None, t0, tier)
    return out


def load_path(path, device, threads, stacklevel):
    with _lib.Model(path) as model:
        return place_model(model, device, threads, stacklevel + 1)


def read_metadata(filename):
    """The __metadata__ of one safetensors file's header, or None (safetensors' answer)."""
    with open(filename, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise OSError(errno.EINVAL, "not a safetensors file (shorter than 8 bytes)", filename)
        (n,) = struct.unpack("<Q", head)
        if n > 100_000_000:
            raise OSError(errno.EINVAL, f"safetensors header length {n} is too large", filename)
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise OSError(errno.EINVAL, f"safetensors header is not JSON ({e})", filename) from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return dict(meta) if isinstance(meta, dict) else None
