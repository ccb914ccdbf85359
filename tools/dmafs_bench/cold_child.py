# SPDX-License-Identifier: MIT
"""cold_child - one fresh process of the models mode's cold and warm methods: imports
torch and dmafs, sets up the device untimed, then times dmafs.load of the model LOADS
times (default 2), the model's pages dropped before each. Prints one JSON line.

usage: python cold_child.py PATH DEVICE DROP(0|1) [LOADS]
"""
import json, os, sys, time
import torch
import dmafs
path, dev, drop = sys.argv[1], torch.device(sys.argv[2]), sys.argv[3] == "1"

def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)

def drop_model_pages():
    # The model's files only. A global drop_caches here would also evict the pages of
    # torch's and Python's own libraries that this process has not touched yet, and load
    # #1 would pay for reading them back (40-80 ms on an H100 machine, against 50 ms for
    # the whole load of a 1.5 GB model): no part of what a first load after a mount costs.
    if drop:
        for name in os.listdir(path) if os.path.isdir(path) else [path]:
            fn = os.path.join(path, name) if os.path.isdir(path) else path
            if os.path.isfile(fn):
                fd = os.open(fn, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)

# The device's context and the allocator's first block, outside the timing.
torch.empty(1, device=dev)
sync()
out = {"loads": []}
for i in range(int(sys.argv[4]) if len(sys.argv) > 4 else 2):
    drop_model_pages()
    if i == 0:
        out["start"] = time.time()  # wall clock: the parent compares it with the remount's end
    t0 = time.perf_counter()
    sd = dmafs.load(path, device=dev)
    sync()
    dt = time.perf_counter() - t0
    end = time.time()  # wall clock: the parent times the idle fill from here
    st = dmafs.last_stats()
    out["loads"].append({"seconds": dt, "tensors": len(sd), "path": st.path,
                         "place_seconds": st.place_seconds, "end": end})
    del sd
    if dev.type == "cuda":
        torch.cuda.empty_cache()
print(json.dumps(out), flush=True)
