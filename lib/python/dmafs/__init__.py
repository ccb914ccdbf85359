# SPDX-License-Identifier: MIT
"""dmafs - load safetensors models from a dmafs mount into PyTorch, through libdmafs.

    import dmafs
    sd = dmafs.load_file("/mnt/models/qwen3/model.safetensors", device="cuda:0")
    sd = dmafs.load("/mnt/models/qwen2.5-7b", device="cuda:0")   # shards, index, snapshot
    print(dmafs.last_stats())        # bytes, seconds, GB/s, path used ("staged", "host", ...)

    dmafs.enable()   # transformers' from_pretrained of models on dmafs takes the same path

    # in each rank of a torch.distributed job: the drives read the model once in total
    sd = dmafs.load_distributed("/mnt/models/qwen2.5-7b")     # cuda:$LOCAL_RANK under NCCL

    dmafs.prefetch("/mnt/models/qwen2.5-7b")   # into the mount's warm tier (-o tier=SIZE)

    # training batches: many small files per request, straight into GPU memory
    for b in dmafs.batches(files, 256, sample_bytes=48 << 10, device="cuda:0"):
        step(b.data, b.lengths)                   # see dmafs.SampleReader for byte ranges

load_file() returns what safetensors.torch.load_file() returns (same keys, dtypes, shapes
and values); the daemon reads the files from the member drives with O_DIRECT and puts
them straight into the destination: shared host memory for device "cpu", the GPU
allocation itself for "cuda"/"cuda:N" (CUDA, or HIP on ROCm builds of torch).

Memory and lifetime. Every file of the model is placed whole (headers included) into
ONE allocation, and every returned tensor is a view of it:
  - The allocation lives while any of the tensors does. Dropping some of them frees
    nothing; it is freed when the last one goes. Writing into a tensor writes into it.
  - GPU: the allocation is one torch.empty() block of the caching allocator; dmafs
    registers it for the load only and the registration ends before the call returns.
  - CPU: the allocation is dmafs shared host memory (a memfd registered with the
    daemon) and stays registered while it is mapped: the mount stays busy (umount
    fails with EBUSY) until the last tensor of the load is freed.
  - A tensor whose file offset is not a multiple of its element size (allowed by the
    format, not written by the usual tools) is returned as an aligned copy instead.

Slow paths are never silent: a load that did not go through the placement channel
(the file is not on dmafs: the library's pread + copy fallback did the work; or the GPU
memory could not be registered and was filled through host memory) emits a
SlowPathWarning (a UserWarning) saying which path was used and why.

Errors are OSError(errno, text, filename): a malformed file gives EINVAL with the
library's description of what is wrong and the file named.

libdmafs is found through $DMAFS_LIBRARY, the dynamic linker, or the build tree
(lib/.libs/libdmafs.so.0 next to this package's lib/python); see dmafs._lib.
"""

import collections as _collections
import errno as _errno
import os as _os
import threading as _threading
import time as _time

from . import _lib
from ._torch import LoadStats, SlowPathWarning, last_stats, load_path as _load_path
from ._torch import place_model as _place_model, read_metadata as _read_metadata
from ._hf import disable, enable, on_dmafs
from ._dist import load_distributed
from ._samples import Batch, SampleDataset, SampleReader, batches

__all__ = ["load_file", "load", "safe_open", "last_stats", "LoadStats", "SlowPathWarning",
           "library_path", "library_version", "enable", "disable", "on_dmafs",
           "load_distributed", "prefetch", "Prefetched", "SampleReader", "Batch", "batches",
           "SampleDataset"]
__version__ = "0.7.0"

library_path = _lib.library_path


def library_version():
    """Version of the libdmafs actually loaded, as "major.minor.patch"."""
    v = _lib.C.version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def load_file(filename, device="cpu", *, threads=0):
    """Load one .safetensors file; like safetensors.torch.load_file(filename, device).

    filename: the file (symlinks are followed). device: "cpu", "cuda", "cuda:N", an int
    N, or a torch.device. threads: placement threads (0: the library's default). The file
    is opened once, when its header is read, and placed through that descriptor: removing
    it during the load does not disturb the load.
    Returns {name: tensor}; all tensors are views of one allocation (see the module
    docstring for lifetime). Raises OSError (errno, text, filename) for unreadable or
    malformed files and failed placements, TypeError for a dtype this torch lacks (the
    tensor is named; nothing is read), ValueError for an unsupported device. Emits
    SlowPathWarning when the placement channel was not used. dmafs.last_stats() tells
    what the load did.
    """
    if _os.path.isdir(filename):
        raise OSError(_errno.EISDIR, "is a directory: load_file() takes one .safetensors file; "
                      "dmafs.load() takes a model directory", _os.fspath(filename))
    return _load_path(filename, device, threads, stacklevel=2)


def load(path, device="cpu", *, threads=0, shard=None):
    """Load a whole model: a .safetensors file, a directory of them (with or without
    model.safetensors.index.json), an index.json itself, or a Hugging Face cache snapshot
    (symlinks followed). Files are placed in parallel into one allocation. Returns
    {name: tensor} over all shards; names are unique across shards (checked). Same
    device, lifetime, errors, warnings and statistics as load_file().

    shard: this rank's slices only, for tensor or expert parallelism: a plan {tensor name
    pattern: dimension, or (dimension, packed blocks), or (dimension, start, stop) for
    those rows of that dimension (this rank's alone: an expert set of a stacked experts
    tensor, an uneven split), None for a tensor this rank does not keep (another rank's
    expert: not read, not returned), or "whole" for one only this rank keeps whole},
    rank and world size from torch.distributed,
    a collective: the tensors every rank keeps whole are placed once between the ranks,
    an equal part each, and broadcast; or (rank, world_size, plan), where each rank places
    everything it keeps itself. Patterns match whole tensor names with fnmatch; the first
    that matches decides. A matching tensor comes back as this rank's slice along that
    dimension: [rank * ceil(D / world), + ceil(D / world)) clipped to its size D, the rule
    of transformers' tensor parallelism; with packed blocks (a fused gate_up or qkv
    projection) the dimension is cut into that many equal blocks first and the rank gets
    its slice of each, in order. Other tensors come whole, and with shard=plan they are
    the ones placed once between the ranks (a plan's values other than a dimension or
    (dimension, blocks) may differ from rank to rank). Only the slices are read (a row
    slice is one extent per row, which the daemon packs into its staging and reads to the
    members' sector, unless the mount verifies placements: then to the 4 KiB block). With
    a plan dict, a row slice whose piece of a row is under 1 MiB (not packed) is exchanged
    instead: each rank places a contiguous range of the tensor, as many bytes as its slice
    holds, in one extent, into its slice's place, and all_to_all gives every rank its
    columns of the ranges (in batches of up to 256 MiB: a rank needs its shard plus a send
    and a receive buffer that size during the load). dmafs.last_stats() gives this rank's bytes, rank
    and world_size, and with a plan dict exchange_seconds, exchanged_tensors and
    exchange_tail_seconds.
    """
    if shard is not None:
        from ._shard import load_shard
        if isinstance(shard, dict):
            return load_shard(path, device, plan=shard, threads=threads, stacklevel=3)
        try:
            rank, world_size, plan = shard
        except (TypeError, ValueError):
            raise TypeError("dmafs: shard must be a plan dict or (rank, world_size, plan)") from None
        return load_shard(path, device, rank=rank, world_size=world_size, plan=plan,
                          share=False, threads=threads, stacklevel=3)
    return _load_path(path, device, threads, stacklevel=2)


class Prefetched(_collections.namedtuple("Prefetched", "read held files seconds")):
    """What dmafs.prefetch() did: bytes read into the warm tier now, bytes of the files it
    held already, the files, and the wall time in seconds."""
    __slots__ = ()


def prefetch(path):
    """Read a model's files into the warm tier of their dmafs mount (mount option tier=),
    so that a later load of them, by this process or any other, copies from the daemon's
    memory instead of reading the drives. Nothing is placed and no memory of this process
    is used; the tier's size bounds what stays (of a model larger than the tier, chunks
    near the end of its last files stay; each file is read at most up to the tier's size).

    path: a file, or what load() accepts (a directory of .safetensors files, an index.json,
    a Hugging Face cache snapshot); a plain file is prefetched whole whatever it holds.
    Returns Prefetched(read, held, files, seconds). Raises OSError: EOPNOTSUPP when the
    mount has no warm tier, ENOTTY when a file is not on dmafs (or its daemon predates
    prefetch), EINVAL for a malformed model, and as load() for unreadable files;
    ImportError when libdmafs predates dmafs_prefetch.
    """
    _lib.require("prefetch")
    t0 = _time.monotonic()
    if _os.path.isfile(path) and not _os.fspath(path).endswith(".json"):
        files = [_os.fspath(path)]
    else:
        with _lib.Model(path) as m:
            files = list(m.files)
    read = held = 0
    for f in files:
        fd = _os.open(f, _os.O_RDONLY | _os.O_CLOEXEC)
        try:
            r, h = _lib.prefetch_fd(fd, filename=f)
        finally:
            _os.close(fd)
        read += r
        held += h
    return Prefetched(read, held, files, _time.monotonic() - t0)


class _Slice:
    """safetensors' PySafeSlice over a placed tensor: get_shape(), get_dtype(), [...]"""

    def __init__(self, tensor, dtype_name):
        self._t = tensor
        self._dtype = dtype_name

    def get_shape(self):
        return list(self._t.shape)

    def get_dtype(self):
        return self._dtype

    def __getitem__(self, index):
        return self._t[index]


class safe_open:
    """Like safetensors.safe_open(filename, framework="pt", device=...).

    keys(), offset_keys() and metadata() read only the headers. The first get_tensor()
    or get_slice() places the WHOLE model (for a single file: that file) with one
    dmafs placement, as load() does, and later calls return views of that placement;
    the views outlive the context (same lifetime as load()). metadata() is the
    __metadata__ of the first file (None when it has none). Also accepts what load()
    accepts (directories, index.json, snapshots).
    """

    def __init__(self, filename, framework="pt", device="cpu", *, threads=0):
        if framework not in ("pt", "torch", "pytorch"):
            raise ValueError(f"dmafs.safe_open: framework {framework!r} is not supported "
                             "(only \"pt\")")
        self._device = device
        self._threads = threads
        self._model = _lib.Model(filename)
        self._infos = {t.name: t for t in self._model.tensors}
        self._tensors = None
        self._lock = _threading.Lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._model.close()

    def keys(self):
        """Tensor names, sorted (as safetensors)."""
        return sorted(self._infos)

    def offset_keys(self):
        """Tensor names in file and offset order."""
        return [t.name for t in self._model.tensors]

    def metadata(self):
        if not self._model.files:
            return None
        return _read_metadata(self._model.files[0])

    def _placed(self):
        with self._lock:  # one placement even when several threads ask at once
            if self._tensors is None:
                if not self._model.handle:
                    raise ValueError("dmafs.safe_open: the file is closed")
                self._tensors = _place_model(self._model, self._device, self._threads,
                                             stacklevel=3)
            return self._tensors

    def get_tensor(self, name):
        if name not in self._infos:
            raise KeyError(f"{self._model.path} does not contain tensor {name!r}")
        return self._placed()[name]

    def get_slice(self, name):
        if name not in self._infos:
            raise KeyError(f"{self._model.path} does not contain tensor {name!r}")
        return _Slice(self._placed()[name], self._infos[name].dtype_name)
