# SPDX-License-Identifier: MIT
"""_samples.py - training samples straight into GPU (or shared host) memory: many byte
ranges of many files per request (dmafs_place_batch), and a batch iterator for training
loops.

    files = sorted(glob.glob("/mnt/data/train/*/*.jpg"))
    reader = dmafs.SampleReader(files, device="cuda:0")
    out = reader.empty((256, 48 << 10))            # registered once, reused every step
    lengths = reader.read_into(out, [3, 17, 4242])  # whole files (up to 48 KiB each) as rows
    lengths = reader.read_into(out, [(3, 0, 4096), (17, 8192, 100)])  # (file, offset, length)

    for batch in dmafs.batches(files, 256, device="cuda:0", sample_bytes=48 << 10):
        batch.data      # uint8 [256, 48 KiB] on cuda:0, rows zero-padded after each sample
        batch.lengths   # int64 [256]: bytes of each sample
        batch.index     # int64 [256]: which files

    # records of shard files: (files, offsets, lengths), one entry per record
    for batch in dmafs.batches(shards, 256, device="cuda:0", sample_bytes=3072,
                               records=(rec_files, rec_offsets, rec_lengths)):
        batch.index     # int64 [256]: which records

Files are opened once, when the reader is made: on dmafs each gets a handle (a capability
of this process, dmafs_handle_get(3)) and its descriptor is closed again; off dmafs the
descriptors stay open and every sample is a pread (SlowPathWarning says so once).
"""

import ctypes
import errno
import os
import threading
import warnings

from . import _lib
from ._torch import SlowPathWarning, _device, _host_tensor, _torch

__all__ = ["SampleReader", "Batch", "batches", "SampleDataset"]

_BATCH_MAX = 320  # samples per request to the daemon (DMAFS_BATCH_MAX); the library splits
_DEPTH_BYTES = 1 << 30  # batches(): default depth bounded by the buffers' size
_RTAB_BYTES = 256 << 20  # batches(records=...): entries of every record made once up to this


class SampleReader:
    """Reads samples of a fixed list of files into tensors (see the module docstring).

    files: paths; samples name them by index. device: "cpu", "cuda", "cuda:N", an int or
    a torch.device. A reader belongs to the process that made it (handles do not cross
    fork(2); make a reader in each process). close() (or the end of a with block) ends
    its registrations and closes what it keeps open."""

    def __init__(self, files, device="cpu"):
        torch = _torch()
        self.files = [os.fspath(f) for f in files]
        if not self.files:
            raise ValueError("dmafs: SampleReader needs at least one file")
        self.dev, self.target, self.index = _device(device)
        self._pid = os.getpid()
        self._fds = []
        self._regs = {}  # data_ptr -> (tensor, Buffer): memory from empty(), registered once
        self._pool = {}  # (shape, dtype) -> [tensor]: given back by batches(), for the next
        self._stage = None  # host Buffer for a CPU tensor not from empty() (a copy)
        self._warned_copy = self._warned_posix = False
        self._boffs = {}  # (count, stride) -> buffer offsets
        self._fits = {}  # stride -> whether every file is at most that long
        self.session = _lib.Session(os.path.dirname(os.path.abspath(self.files[0])) or "/")
        try:
            caps = self.session.caps()
            self.on_dmafs = bool(caps.on_dmafs)
            self.why_posix = None if self.on_dmafs else caps.host.why.decode("utf-8", "replace")
            get = _lib.require("handle_get")
            _lib.require("place_batch")
            words, sizes = self._take_handles(get)
            # every file's request entry (handle as signed 64-bit words; file and buffer
            # offsets 0; its size as the length, result 0): a batch gathers its rows
            # without Python loops; handles and sizes are views of it
            self._table = torch.zeros((len(words), 6), dtype=torch.int64)
            self._table[:, 0:3] = torch.tensor([[_s64(w) for w in t] for t in words],
                                               dtype=torch.int64)
            self._table[:, 5] = torch.tensor(sizes, dtype=torch.int64)
            self._handles, self.sizes = self._table[:, 0:3], self._table[:, 5]
        except BaseException:
            self.close()
            raise

    def _take_handles(self, get):
        """(handle words, sizes) of every file: opened, a handle taken and (on dmafs)
        closed again, by up to 16 threads (each file costs a few round trips to the
        daemon; the calls release the GIL)."""
        n = len(self.files)
        words, sizes, fds = [None] * n, [0] * n, [None] * n

        def one(i):
            f = self.files[i]
            h = _lib.Handle()
            # on dmafs the descriptor only gives the handle: O_DIRECT says the file's
            # data need not go to the page cache with the open (the daemon's open_fill)
            try:
                fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECT if self.on_dmafs else 0))
            except OSError as e:
                if e.errno != errno.EINVAL or not self.on_dmafs:
                    raise
                fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _lib.check(get(self.session.handle, fd, ctypes.byref(h)), f)
                sizes[i] = os.fstat(fd).st_size
            except BaseException:
                os.close(fd)
                raise
            if self.on_dmafs:
                os.close(fd)  # the handle is enough
            else:
                fds[i] = fd  # the handle is the descriptor: it stays open
            words[i] = (h.a, h.b, h.c | h.d << 32)

        try:
            if n < 64:
                for i in range(n):
                    one(i)
            else:
                from concurrent.futures import ThreadPoolExecutor
                with ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as ex:
                    for _ in ex.map(one, range(n), chunksize=256):
                        pass
        finally:
            self._fds = [fd for fd in fds if fd is not None]
        return words, sizes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return len(self.files)

    def empty(self, shape, dtype=None):
        """A contiguous tensor on the reader's device (uint8 by default), registered with
        the daemon once; the reader keeps it until close(). Fastest for read_into()."""
        torch = _torch()
        dtype = dtype or torch.uint8
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = 1
        for d in shape:
            n *= d
        nbytes = n * torch.empty((), dtype=dtype).element_size()
        if self.target == _lib.TARGET_HOST:
            session = _lib.Session(os.path.dirname(os.path.abspath(self.files[0])) or "/")
            buf = _lib.Buffer.alloc_host(session, max(nbytes, 1), self.files[0])
            base = _host_tensor(session, buf, torch)  # owns the session
            t = base[:nbytes].view(dtype).view(shape)
        else:
            with torch.cuda.device(self.index):
                t = torch.empty(shape, dtype=dtype, device=self.dev)
            torch.cuda.synchronize(self.dev)  # the daemon writes outside torch's streams
            ret = _lib.Buffer.register_gpu(self.session, self.target, t.data_ptr(),
                                           max(nbytes, 1), self.index)
            if not isinstance(ret, _lib.Buffer):
                _lib.check(ret, self.files[0], "registering GPU memory for samples")
            buf = ret
        self._regs[t.data_ptr()] = (t, buf)
        return t

    def _take(self, shape, dtype):
        """A registered tensor of shape from the pool, or a new one from empty()."""
        free = self._pool.get((shape, dtype))
        return free.pop() if free else self.empty(shape, dtype)

    def _give(self, t):
        """Back into the pool (still registered: registering costs a GPU IPC round trip)."""
        self._pool.setdefault((tuple(t.shape), t.dtype), []).append(t)

    def release(self, t):
        """End the registration of a tensor from empty() (it stays usable as a tensor)."""
        reg = self._regs.pop(t.data_ptr(), None)
        if reg is not None and reg[1].target != _lib.TARGET_HOST:
            reg[1].unregister()

    def _buffer_for(self, out, nbytes):
        """(Buffer, copy-back target or None) for placing nbytes into out."""
        reg = self._regs.get(out.data_ptr())
        if reg is not None and reg[1].size >= nbytes:
            return reg[1], None
        if not self._warned_copy:
            self._warned_copy = True
            warnings.warn(f"dmafs: read_into() of a tensor not made by SampleReader.empty(): "
                          f"samples are placed into a buffer of the reader and copied into it "
                          f"(make the tensor with reader.empty() to skip the copy)",
                          SlowPathWarning, stacklevel=3)
        if self._stage is None or self._stage.size < nbytes:
            if self._stage is not None:
                self._stage.unregister()
            self._stage = _lib.Buffer.alloc_host(self.session, max(nbytes, 1 << 20),
                                                 self.files[0])
        return self._stage, out

    def read_into(self, out, samples, *, stride=None):
        """Place samples into out (a contiguous tensor; its bytes are what is written).

        samples: a sequence of file indices (the whole file, up to stride bytes) or of
        (file index, offset, length) tuples; or a (files, offsets, lengths) triple of
        int64 tensors. stride: bytes between the starts of consecutive samples in out
        (default: out's row size when out has 2 or more dimensions, else the samples are
        packed one after another). Returns the bytes placed per sample (int64 tensor):
        less than asked only where a file ends. Raises OSError for a sample that failed
        (naming its file) after the others were placed, ValueError for samples that do
        not fit out."""
        torch = _torch()
        if not out.is_contiguous():
            raise ValueError("dmafs: read_into() needs a contiguous tensor")
        nbytes = out.numel() * out.element_size()
        if stride is None and out.dim() >= 2:
            stride = nbytes // out.shape[0]
        ent = self._whole_entries(samples, stride)
        if ent is not None:  # whole files by index, as batches() asks: a few tensor ops
            idx, ent = ent
            n = ent.shape[0]
            if n == 0:
                return torch.zeros(0, dtype=torch.int64)
            end = n * stride
            if end > nbytes:  # the last sample may end before its stride does
                end = (n - 1) * stride + int(ent[n - 1, 5])
        else:
            idx, offs, lens = self._parse(samples, stride)
            n = idx.numel()
            if n == 0:
                return torch.zeros(0, dtype=torch.int64)
            if stride is not None:
                boffs = self._offsets(n, stride)
                if int(lens.max()) > stride:
                    raise ValueError(f"dmafs: a sample is longer than the stride ({stride} bytes)")
                end = (n - 1) * stride + int(lens[n - 1])
            else:
                ends = torch.cumsum(lens, 0)
                boffs = ends - lens
                end = int(ends[n - 1])
            if any(int(v) < 0 or int(v) >= len(self.files) for v in torch.aminmax(idx)):
                raise IndexError("dmafs: a sample names a file the reader does not have")
            ent = torch.index_select(self._table, 0, idx)
            ent[:, 3] = offs
            ent[:, 4] = boffs
            ent[:, 5] = lens  # length in the low half, result 0 in the high half
        if end > nbytes:
            raise ValueError(f"dmafs: the samples need {end} bytes, the tensor has {nbytes}")
        buf, copy_to = self._buffer_for(out, end)
        got = self._submit(buf, ent, idx, 3)
        if copy_to is not None:
            flat = copy_to.view(-1).view(torch.uint8)
            from ._torch import _host_tensor_view
            flat[:end].copy_(_host_tensor_view(buf, torch)[:end])
        return got

    def _submit(self, buf, ent, idx, stacklevel, files_of=None):
        """One dmafs_place_batch of the entries ent (int64 [n, 6], contiguous; results are
        written into it) into buf; idx: each entry's file index (with files_of, an index
        into files_of, which holds the file indices). Returns the bytes placed per entry;
        raises OSError naming the file of the first entry that failed (after the others
        were placed)."""
        n = ent.shape[0]
        res = _lib.Result()
        ret = _lib.C.place_batch(buf.handle, ctypes.c_void_p(ent.data_ptr()), n,
                                 ctypes.byref(res))
        got = ent[:, 5] & 0xFFFFFFFF
        if ret < 0:
            bad = ((ent[:, 5] >> 32) != 0).nonzero()
            k = int(bad[0]) if bad.numel() else 0
            f = int(idx[k]) if files_of is None else int(files_of[int(idx[k])])
            _lib.check(ret, self.files[f] if bad.numel() else None, f"sample {k} of {n}")
        self.last_result = (res.bytes, _lib.path_name(res.path), res.elapsed_ns)
        if not self.on_dmafs and not self._warned_posix:
            self._warned_posix = True
            warnings.warn(f"dmafs: {self.files[0]} is not on dmafs ({self.why_posix}): samples "
                          "are read with pread", SlowPathWarning, stacklevel=stacklevel)
        return got

    def _offsets(self, n, stride):
        """Buffer offsets of n samples stride bytes apart (kept for the next batch)."""
        boffs = self._boffs.get((n, stride))
        if boffs is None:
            if len(self._boffs) > 8:
                self._boffs.clear()
            boffs = self._boffs[(n, stride)] = _torch().arange(n, dtype=_torch().int64) * stride
        return boffs

    def _whole_entries(self, samples, stride):
        """(indices, request entries) for whole-file samples given as an integer tensor of
        file indices with a stride: gathered from the table of every file's entry, so a
        batch costs a few tensor operations whatever its size. None for any other form of
        samples."""
        torch = _torch()
        if stride is None or stride >= 1 << 32 or not isinstance(samples, torch.Tensor) or \
                samples.is_floating_point() or samples.is_complex() or samples.dtype == torch.bool:
            return None
        idx = samples.reshape(-1)
        if idx.device.type != "cpu" or idx.dtype != torch.int64:
            idx = idx.to(device="cpu", dtype=torch.int64)
        if idx.numel() and any(int(v) < 0 or int(v) >= len(self.files) for v in torch.aminmax(idx)):
            raise IndexError("dmafs: a sample names a file the reader does not have")
        ent = torch.index_select(self._table, 0, idx)
        fits = self._fits.get(stride)  # a local: another thread may clear the dict
        if fits is None:
            if len(self._fits) > 8:
                self._fits.clear()
            fits = self._fits[stride] = bool((self.sizes <= stride).all())
        if not fits:
            ent[:, 5].clamp_(max=stride)  # the whole file, up to the stride
        ent[:, 4] = self._offsets(idx.numel(), stride)
        return idx, ent

    def _parse(self, samples, stride):
        torch = _torch()
        if isinstance(samples, tuple) and len(samples) == 3 and all(
                isinstance(x, torch.Tensor) for x in samples):
            idx, offs, lens = (x.to(torch.int64).reshape(-1) for x in samples)
            return idx, offs, lens
        if isinstance(samples, torch.Tensor):
            samples = samples.reshape(-1).tolist()
        idx, offs, lens = [], [], []
        for s in samples:
            if isinstance(s, int):
                if stride is None:
                    raise ValueError("dmafs: whole-file samples need a stride (or a 2-D tensor)")
                idx.append(s)
                offs.append(0)
                lens.append(-1)
            else:
                f, o, ln = s
                idx.append(int(f))
                offs.append(int(o))
                lens.append(int(ln))
        idx = torch.tensor(idx, dtype=torch.int64)
        offs = torch.tensor(offs, dtype=torch.int64)
        lens = torch.tensor(lens, dtype=torch.int64)
        whole = lens < 0
        if bool(whole.any()):
            lens[whole] = torch.clamp(self.sizes[idx[whole].clamp(0, len(self.files) - 1)],
                                      max=stride)
        if bool((offs < 0).any()) or bool((lens < 0).any()) or bool((lens >= 1 << 32).any()):
            raise ValueError("dmafs: sample offsets and lengths must be >= 0 (lengths < 4 GiB)")
        return idx, offs, lens

    def close(self):
        if os.getpid() != self._pid:
            return  # a child after fork: the registrations are the parent's
        for t, buf in self._regs.values():
            if buf.target != _lib.TARGET_HOST:
                buf.unregister()
        self._regs = {}
        self._pool = {}
        if self._stage is not None:
            self._stage.unregister()
            self._stage = None
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        if self.session is not None:
            self.session.close()
            self.session = None


def _s64(w):
    return w - (1 << 64) if w >= 1 << 63 else w


class Batch:
    """One batch: data (uint8 [batch, sample_bytes] on the device, each row zero-padded
    after its sample), lengths and index (int64 [batch], on the CPU)."""

    __slots__ = ("data", "lengths", "index")

    def __init__(self, data, lengths, index):
        self.data, self.lengths, self.index = data, lengths, index


def batches(files, batch_size, *, sample_bytes, device="cpu", shuffle=True, seed=None,
            drop_last=False, epochs=1, depth=None, workers=8, records=None):
    """Yield Batch objects of batch_size whole files (each up to sample_bytes) read
    through a SampleReader (files: paths, or a SampleReader made before, which is reused
    and left open; device is then the reader's). With records, a (files, offsets,
    lengths) triple of integer sequences or tensors (one entry per record, lengths at
    most sample_bytes), the samples are those byte ranges of the files instead (records
    of shard files: tar members, rows of .npy or Arrow files), and Batch.index holds
    record numbers (each record's request entry, 48 bytes, is made when the iteration
    starts, up to 256 MiB of them). workers threads each keep a request in the daemon
    (whose placement threads serve up to place_threads_user requests of one user at
    once), filling depth buffers (at least workers + 1; by default twice workers, fewer
    where that would take more than 1 GiB) in turn, so a worker may run ahead of one
    slower than it by depth - workers batches; batches come in order. A batch's data
    stays valid until depth - 1 further batches have been taken (clone() it to keep it
    longer); on a GPU, the work queued on the current stream when the next batch is
    asked for is waited for before its memory is filled again."""
    torch = _torch()
    if batch_size < 1 or sample_bytes < 1 or (depth is not None and depth < 1) or workers < 1:
        raise ValueError("dmafs: batch_size, sample_bytes, depth and workers must be >= 1")
    if sample_bytes >= 1 << 32:
        raise ValueError(f"dmafs: sample_bytes is {sample_bytes}: a sample is at most 4 GiB - 1")
    if depth is None:  # a worker may then run a batch ahead of a slower one
        depth = min(2 * workers, _DEPTH_BYTES // (batch_size * sample_bytes))
    depth = max(depth, workers + 1)
    own = not isinstance(files, SampleReader)
    reader = SampleReader(files, device) if own else files
    try:
        recs = None if records is None else _records(reader, records, sample_bytes, torch)
    except BaseException:
        if own:
            reader.close()
        raise
    n = len(reader) if recs is None else recs[0].numel()
    gen = torch.Generator()
    gen.manual_seed(seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1)
    gpu = reader.target != _lib.TARGET_HOST
    order = []
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen) if shuffle else torch.arange(n)
        stop_at = n - n % batch_size if drop_last else n
        order += [perm[i:i + batch_size] for i in range(0, stop_at, batch_size)]
    bufs = []
    # freed[k]: batch k may fill its buffer (k % depth): the consumer has moved past batch
    # k - depth (value: the event behind the work it queued on it, or None)
    freed = {k: None for k in range(depth)}
    ready = {}
    lock = threading.Lock()
    # each worker waits on its own condition (batch k is worker k % workers's), the
    # consumer on its own: a wake-up goes to the one thread it concerns
    wcond = [threading.Condition(lock) for _ in range(workers)]
    ccond = threading.Condition(lock)
    state = {"stop": False}
    cols = torch.arange(sample_bytes, device=reader.dev)

    def worker(j):
        try:
            for k in range(j, len(order), workers):
                with lock:
                    while k not in freed and not state["stop"]:
                        wcond[j].wait()
                    if state["stop"]:
                        return
                    ev = freed.pop(k)
                if ev is not None:
                    ev.synchronize()
                ix = order[k]
                n = ix.numel()
                out = bufs[k % depth][:n]
                # the request's entries, gathered from the reader's table of every file's
                # entry (checked when the reader and the records were taken in)
                files_of, eidx = None, ix  # which files the entries name (errors)
                if recs is None:
                    ent = torch.index_select(reader._table, 0, ix)
                    if not fits:
                        ent[:, 5].clamp_(max=sample_bytes)  # the whole file, up to a row
                elif rtab is not None:  # every record's entry, made once
                    ent = torch.index_select(rtab, 0, ix)
                    files_of = recs[0]
                else:
                    eidx = torch.index_select(recs[0], 0, ix)
                    ent = torch.index_select(reader._table, 0, eidx)
                    ent[:, 3] = torch.index_select(recs[1], 0, ix)
                    ent[:, 5] = torch.index_select(recs[2], 0, ix)
                ent[:, 4] = boffs[:n]
                lens = reader._submit(regs[k % depth], ent, eidx, 2, files_of)
                if bool((lens < sample_bytes).any()):  # zero what the samples did not fill
                    out.masked_fill_(cols >= lens.to(cols.device)[:, None], 0)
                with lock:
                    ready[k] = Batch(out, lens, ix)
                    ccond.notify()
        except BaseException as e:  # handed to the consumer
            with lock:
                ready.setdefault("error", e)
                ccond.notify()

    threads = []
    try:
        bufs = [reader._take((batch_size, sample_bytes), torch.uint8) for _ in range(depth)]
        regs = [reader._regs[t.data_ptr()][1] for t in bufs]
        boffs = torch.arange(batch_size, dtype=torch.int64) * sample_bytes
        fits = bool((reader.sizes <= sample_bytes).all())
        rtab = None  # records' request entries, when they take at most _RTAB_BYTES
        if recs is not None and recs[0].numel() * 48 <= _RTAB_BYTES:
            rtab = torch.index_select(reader._table, 0, recs[0])
            rtab[:, 3] = recs[1]
            rtab[:, 5] = recs[2]
        threads = [threading.Thread(target=worker, args=(j,), name=f"dmafs-batches-{j}",
                                    daemon=True) for j in range(min(workers, len(order)))]
        for t in threads:
            t.start()
        for k in range(len(order)):
            with lock:
                while k not in ready and "error" not in ready:
                    ccond.wait()
                if "error" in ready:
                    raise ready["error"]
                b = ready.pop(k)
            yield b
            # the consumer asks for the next one: this buffer may be filled again after
            # the work queued on it so far
            ev = None
            if gpu:
                ev = torch.cuda.Event()
                ev.record(torch.cuda.current_stream(reader.dev))
            with lock:
                freed[k + depth] = ev
                wcond[(k + depth) % workers].notify()
    finally:
        # stop the workers and wait for them before the memory goes
        with lock:
            state["stop"] = True
            for c in wcond:
                c.notify_all()
        for t in threads:
            t.join()
        for t in bufs:
            reader._give(t)  # a reused reader's next batches() takes them again
        if own:
            reader.close()


def _records(reader, records, sample_bytes, torch):
    """The (files, offsets, lengths) int64 tensors of batches(records=...), checked once."""
    if not isinstance(records, (tuple, list)) or len(records) != 3:
        raise ValueError("dmafs: records must be a (files, offsets, lengths) triple")
    rf, ro, rl = (torch.as_tensor(x).to(dtype=torch.int64, device="cpu").reshape(-1).contiguous()
                  for x in records)
    if not rf.numel() == ro.numel() == rl.numel():
        raise ValueError(f"dmafs: records: {rf.numel()} files, {ro.numel()} offsets and "
                         f"{rl.numel()} lengths (one of each per record)")
    if rf.numel():
        lo, hi = (int(v) for v in torch.aminmax(rf))
        if lo < 0 or hi >= len(reader):
            bad = lo if lo < 0 else hi
            raise IndexError(f"dmafs: records: file {bad} is not one of the reader's "
                             f"{len(reader)} files")
        if int(ro.min()) < 0 or int(rl.min()) < 0:
            raise ValueError("dmafs: records: offsets and lengths must be >= 0")
        if int(rl.max()) > sample_bytes:
            k = int(torch.argmax(rl))
            raise ValueError(f"dmafs: records: record {k} is {int(rl[k])} bytes, longer than "
                             f"sample_bytes ({sample_bytes})")
    return rf, ro, rl


def SampleDataset(*args, **kwargs):
    """A torch.utils.data.IterableDataset over batches(files, batch_size, ...): use it with
    DataLoader(dataset, batch_size=None, num_workers=0); the reads are the daemon's, so
    worker processes are not needed."""
    torch = _torch()

    class _SampleDataset(torch.utils.data.IterableDataset):
        def __init__(self):
            super().__init__()

        def __iter__(self):
            return batches(*args, **kwargs)

    return _SampleDataset()
