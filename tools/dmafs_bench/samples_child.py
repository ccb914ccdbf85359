# SPDX-License-Identifier: MIT
"""samples_child - one row of the samples mode, under PYTHON (with torch and dmafs).
Prints one JSON line: samples counted ("n") over seconds ("s") from the loop's first batch
on, and for files-dmafs the seconds the reader's handles took ("setup"); for overhead, "one"
and "per" (microseconds).

usage: python samples_child.py ROW DEVICE LIST BATCH FILE_KB [BATCHES RECORDS | COUNTS SECONDS]
ROW: files-dmafs, files-loader, shards-dmafs, shards-loader, overhead, threads (then
THREAD_COUNTS SECONDS: "py" and "c" samples/s by thread count). LIST: a file naming the
files (or shards), one per line.
"""

import json
import os
import random
import statistics
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader

from dataloader_child import FileSamples as Files  # beside this script: the dataset row's


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class Records:
    def __init__(self, shards, recs, size):
        self.shards, self.recs, self.size, self.fds = shards, recs, size, None

    def __len__(self):
        return len(self.recs)

    def __getitem__(self, i):
        if self.fds is None:  # in the worker
            self.fds = [os.open(p, os.O_RDONLY) for p in self.shards]
        s, off = self.recs[i]
        return torch.frombuffer(bytearray(os.pread(self.fds[s], self.size, off)), dtype=torch.uint8)


def pad(items):
    m = max(x.numel() for x in items)
    out = torch.zeros((len(items), m), dtype=torch.uint8)
    for r, x in enumerate(items):
        out[r, :x.numel()] = x
    return out


def loader(ds, batch, dev):
    g = torch.Generator()
    g.manual_seed(1)
    dl = DataLoader(ds, batch_size=batch, num_workers=8, shuffle=True, generator=g,
                    pin_memory=dev.type == "cuda", collate_fn=pad)
    n, t = 0, None
    for x in dl:
        x = x.to(dev, non_blocking=True)
        if t is None:
            t = time.monotonic()  # from the first batch on: the workers' start is not counted
        else:
            n += x.shape[0]
    sync(dev)
    return {"n": n, "s": time.monotonic() - t}


def threads(dmafs, paths, devname, batch, size, counts, secs):
    """Batches of random whole files by T threads, each with a buffer of its own, for
    secs seconds per T: by read_into() (index tensors), and by dmafs_place_batch() on
    entries built before the clock (what the daemon serves without Python per request;
    ctypes lets go of the GIL during the call). {"py": {T: samples/s}, "c": {...}}."""
    import ctypes
    from dmafs import _lib
    reader = dmafs.SampleReader(paths, device=devname)
    res = {"py": {}, "c": {}}
    for T in counts:
        outs = [reader.empty((batch, size)) for _ in range(T)]
        bufs = [reader._buffer_for(o, o.numel())[0] for o in outs]
        g = torch.Generator()
        g.manual_seed(T)
        idxs = [torch.randint(0, len(paths), (batch,), generator=g) for _ in range(64)]
        ents = [reader._whole_entries(ix, size)[1].clone() for ix in idxs]
        for kind in ("py", "c"):
            counts_done, err = [0] * T, []
            stop = time.monotonic() + secs

            def work(k):
                try:
                    r, j = _lib.Result(), k
                    while time.monotonic() < stop:
                        if kind == "py":
                            reader.read_into(outs[k], idxs[j % 64])
                        else:
                            e = ents[j % 64]
                            ret = _lib.C.place_batch(bufs[k].handle, ctypes.c_void_p(e.data_ptr()),
                                                     batch, ctypes.byref(r))
                            if ret < 0:
                                raise OSError(-ret, "dmafs_place_batch")
                        j += T
                        counts_done[k] += 1
                except BaseException as e:
                    err.append(e)

            th = [threading.Thread(target=work, args=(k,)) for k in range(T)]
            t = time.monotonic()
            for x in th:
                x.start()
            for x in th:
                x.join()
            if err:
                raise err[0]
            res[kind][T] = sum(counts_done) * batch / (time.monotonic() - t)
        for o in outs:
            reader.release(o)
    reader.close()
    return res


def main():
    import dmafs
    row, devname, lst, batch, kib = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    dev = torch.device(devname)
    paths = open(lst).read().split()
    size = kib << 10
    if row == "files-dmafs":
        t0 = time.monotonic()
        reader = dmafs.SampleReader(paths, device=devname)
        setup = time.monotonic() - t0
        n, t = 0, None
        for b in dmafs.batches(reader, batch, sample_bytes=size, seed=1):
            if t is None:
                t = time.monotonic()
            else:
                n += b.index.numel()
        sync(dev)
        res = {"n": n, "s": time.monotonic() - t, "setup": setup}
        reader.close()
    elif row == "files-loader":
        res = loader(Files(paths), batch, dev)
    elif row in ("shards-dmafs", "shards-loader"):
        nb, per = int(sys.argv[6]), int(sys.argv[7])
        rng = random.Random(1)
        recs = [(rng.randrange(len(paths)), rng.randrange(per) * size) for _ in range(nb * batch)]
        if row == "shards-loader":
            res = loader(Records(paths, recs, size), batch, dev)
        else:
            idx = torch.tensor([s for s, _ in recs], dtype=torch.int64)
            offs = torch.tensor([o for _, o in recs], dtype=torch.int64)
            lens = torch.full((len(recs),), size, dtype=torch.int64)
            reader = dmafs.SampleReader(paths, device=devname)
            n, t = 0, None  # batches() over the records, in their (random) order
            for b in dmafs.batches(reader, batch, sample_bytes=size, shuffle=False,
                                   records=(idx, offs, lens)):
                if int(b.lengths.sum()) != b.index.numel() * size:
                    raise RuntimeError("a batch of records came back short")
                if t is None:
                    t = time.monotonic()
                else:
                    n += b.index.numel()
            sync(dev)
            res = {"n": n, "s": time.monotonic() - t}
            reader.close()
    elif row == "threads":
        res = threads(dmafs, paths, devname, batch, size, [int(x) for x in sys.argv[6].split(",")],
                      float(sys.argv[7]))
    elif row == "overhead":
        reader = dmafs.SampleReader(paths[:1], device="cpu")
        out = reader.empty(320 * 512)
        fsize = os.path.getsize(paths[0])
        med = {}
        for n in (1, 320):
            ts = []
            for k in range(50):
                spec = [(0, ((k * 320 + j) * 7919 % max(1, fsize // 4096)) * 4096, 512) for j in range(n)]
                reader.read_into(out, spec)
                ts.append(reader.last_result[2] / 1e3)
            med[n] = statistics.median(ts)
        reader.close()
        res = {"one": med[1], "per": (med[320] - med[1]) / 319}
    else:
        sys.exit(f"samples_child: unknown row {row}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
