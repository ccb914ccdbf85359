# SPDX-License-Identifier: MIT
"""ranks_child - the models mode's ranks method: a torch.distributed job of WORLD processes
(one GPU each, NCCL; gloo and host memory for cpu) that times, RUNS times, dmafs.load in
rank 0 alone (1-rank), dmafs.load_distributed (N-ranks), dmafs.load in every rank
(each-rank) and dmafs.load with a tensor-parallel shard plan (shard), each from a barrier
to a barrier. Rank 0 prints one JSON line.

usage: python ranks_child.py PATH DEVTYPE WORLD RUNS DROP(0|1) STOREFILE
"""
import hashlib, json, os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

PLAN = {"*.q_proj.weight": 0, "*.k_proj.weight": 0, "*.v_proj.weight": 0, "*.q_proj.bias": 0,
        "*.k_proj.bias": 0, "*.v_proj.bias": 0, "*.o_proj.weight": 1, "*.gate_proj.weight": 0,
        "*.up_proj.weight": 0, "*.down_proj.weight": 1}

def job(rank, path, devtype, world, runs, drop, store):
    import dmafs
    from dmafs._shard import _rule, shard_range
    if devtype == "cuda":
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    else:
        dev = torch.device("cpu")
    dist.init_process_group("nccl" if devtype == "cuda" else "gloo",
                            init_method="file://" + store, rank=rank, world_size=world)
    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
    def drop_caches():
        if drop and rank == 0:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
    def digest(sd):
        h = hashlib.sha256()
        for k in sorted(sd):
            h.update(k.encode())
            h.update(sd[k].reshape(-1).view(torch.uint8).cpu().numpy().tobytes())
        return h.hexdigest()
    # Communicators and buffers warmed up outside the timing, as in a serving engine.
    warm = torch.ones(16 << 20, dtype=torch.uint8, device=dev)
    dist.all_reduce(warm)
    for r in range(world):
        dist.broadcast(warm, src=r)
    sync()
    del warm
    def timed(fn):
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        drop_caches()
        dist.barrier()
        t0 = time.perf_counter()
        sd = fn()
        sync()
        dist.barrier()
        dt = time.perf_counter() - t0
        st = dmafs.last_stats()
        del sd
        return dt, st
    # Correctness once: every rank's load_distributed equals its own dmafs.load.
    a = digest(dmafs.load_distributed(path, dev))
    b = digest(dmafs.load(path, dev))
    # and every rank's shard equals its slices of dmafs.load's tensors
    full, part = dmafs.load(path, dev), dmafs.load(path, dev, shard=PLAN)
    same = set(full) == set(part)
    for name, t in full.items():
        r = _rule(name, PLAN, path)
        if r is not None:
            d = r[0] % t.dim()
            lo, hi = shard_range(t.shape[d], rank, world)
            t = t.narrow(d, lo, hi - lo)
        g = part.get(name)
        same = same and g is not None and g.shape == t.shape and torch.equal(
            g.reshape(-1).view(torch.uint8), t.contiguous().reshape(-1).view(torch.uint8))
    del full, part
    ok = torch.tensor([int(a == b and same)], device=dev)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    out = {"1-rank": [], "N-ranks": [], "each-rank": [], "shard": [], "equal": bool(ok.item()),
           "notes": {}}
    for _ in range(runs):
        dt, st = timed(lambda: dmafs.load(path, dev) if rank == 0 else {})
        out["1-rank"].append(dt)
        if rank == 0:
            out["notes"].setdefault("1-rank-runs", []).append(
                f"path {st.path}, placement {st.place_seconds:.3f} s = {st.place_gbps:.2f} GB/s")
        dt, st = timed(lambda: dmafs.load_distributed(path, dev))
        out["N-ranks"].append(dt)
        # every rank's placement and exchange seconds, for the note of the best run
        mine = torch.zeros(2 * world, dtype=torch.float64, device=dev)
        mine[2 * rank], mine[2 * rank + 1] = st.place_seconds, st.exchange_seconds
        dist.all_reduce(mine)
        per = mine.tolist()
        note = ("placement " + "/".join(f"{per[2 * r]:.3f}" for r in range(world))
                + " s, exchange after it "
                + "/".join(f"{per[2 * r + 1]:.3f}" for r in range(world))
                + f" s (ranks 0..{world - 1}), {st.bytes / 1e9:.2f} GB each")
        out["notes"].setdefault("N-ranks-runs", []).append(note)
        dt, st = timed(lambda: dmafs.load(path, dev))
        out["each-rank"].append(dt)
        dt, st = timed(lambda: dmafs.load(path, dev, shard=PLAN))
        out["shard"].append(dt)
        b = torch.tensor([st.bytes], dtype=torch.int64, device=dev)
        dist.all_reduce(b)
        out["notes"].setdefault("shard-runs", []).append(
            f"{st.bytes / 1e9:.2f} GB placed by rank 0, {int(b) / 1e9:.2f} GB by all; "
            f"exchange {st.exchange_seconds:.3f} s ({st.exchanged_tensors} tensors, "
            f"{st.exchange_tail_seconds or 0:.3f} s of it after the other placements)")
    if rank == 0:
        print(json.dumps(out), flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    world = int(sys.argv[3])
    mp.start_processes(job, args=(sys.argv[1], sys.argv[2], world, int(sys.argv[4]),
                                  sys.argv[5] == "1", sys.argv[6]),
                       nprocs=world, join=True, start_method="spawn")
