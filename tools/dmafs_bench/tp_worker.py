# SPDX-License-Identifier: MIT
"""tp_worker - one rank of the tp mode's torchrun job: transformers'
from_pretrained(MODEL, tp_plan="auto", dtype=bfloat16) in every rank (with --ep,
distributed_config=DistributedConfig(tp_plan="auto", enable_expert_parallel=True)
instead of tp_plan), R rounds of, in turn: under dmafs.enable() from the dmafs mount,
plainly from the same mount, and plainly from btrfs; the page cache dropped before every
load (rank 0, between two barriers), each load timed from a barrier before it to a
barrier after the last rank is done, after one untimed plain load from btrfs. That first
load gives the bytes each rank keeps: its local part (a DTensor's to_local()) of every
parameter and buffer. With --verify, after the rounds, one more plain load from btrfs and
one under dmafs.enable() from the dmafs mount are compared parameter by parameter
(torch.equal of the local parts). Rank 0 writes the times, each rank's kept and placed
bytes, the count of differing parameters and what rank 0's loading loop skipped under
dmafs.enable() (LoadStats.copies_skipped, loop_pool_off) as JSON.

usage: torchrun ... tp_worker.py [--ep] [--verify] --runs R --json FILE DMAFS_MODEL BTRFS_MODEL
"""

import argparse
import gc
import json
import os
import itertools
import time


def local(t):
    """The rank's own part of a parameter or buffer: a DTensor's local tensor, else the
    tensor."""
    return t.to_local() if hasattr(t, "to_local") else t


def raw(t):
    """The tensor's bytes, as a flat uint8 tensor."""
    import torch
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)


def main():
    ap = argparse.ArgumentParser(prog="tp_worker.py")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", required=True)
    ap.add_argument("--ep", action="store_true", help="expert parallelism too")
    ap.add_argument("--verify", action="store_true", help="compare the parameters")
    ap.add_argument("dmafs")
    ap.add_argument("btrfs")
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    import transformers
    from transformers import AutoModelForCausalLM

    import dmafs

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    total = sum(os.path.getsize(os.path.join(args.dmafs, n)) for n in os.listdir(args.dmafs)
                if n.endswith(".safetensors"))

    if args.ep:
        from transformers.distributed import DistributedConfig
        try:
            # transformers 5.17 refuses tp_plan= beside distributed_config=: the plan goes in it
            how = {"distributed_config": DistributedConfig(tp_plan="auto",
                                                           enable_expert_parallel=True)}
        except TypeError:
            # a DistributedConfig without tp_plan (earlier transformers): both keywords
            how = {"tp_plan": "auto",
                   "distributed_config": DistributedConfig(enable_expert_parallel=True)}
    else:
        how = {"tp_plan": "auto"}

    def gather(x, dtype=torch.int64):
        """x of every rank, in rank order."""
        t = torch.tensor([x], dtype=dtype, device="cuda")
        out = [torch.zeros_like(t) for _ in range(world)]
        dist.all_gather(out, t)
        return [o.item() for o in out]

    def load(path, enabled, keep=False):
        torch.cuda.synchronize()
        dist.barrier()
        if rank == 0:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        dist.barrier()
        t0 = time.perf_counter()
        if enabled:
            with dmafs.enable():
                m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, **how)
        else:
            m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, **how)
        torch.cuda.synchronize()
        dist.barrier()
        secs = time.perf_counter() - t0
        st = dmafs.last_stats() if enabled else None
        if keep:
            return secs, st, m
        del m
        gc.collect()
        torch.cuda.empty_cache()
        return secs, st

    # warm-up, untimed: what this rank keeps of the model
    _, _, m = load(args.btrfs, False, keep=True)
    kept = gather(sum(local(t).numel() * local(t).element_size()
                      for t in itertools.chain(m.parameters(), m.buffers())))
    del m
    gc.collect()
    torch.cuda.empty_cache()
    methods = (("dmafs+enable", args.dmafs, True), ("dmafs", args.dmafs, False),
               ("btrfs", args.btrfs, False))
    times, placed, own, asking = {m: [] for m, _, _ in methods}, None, [], []
    loop = None  # rank 0's transformers loop under dmafs.enable(): copies skipped, pool off
    for _ in range(args.runs):
        for m, path, enabled in methods:
            secs, st = load(path, enabled)
            times[m].append(secs)
            if st is not None:
                placed = [int(x) for x in gather(st.bytes)]
                # dmafs's own part of the load: the slowest rank's dmafs load (asking
                # transformers what the rank takes, placement and exchange); the rest of
                # the time is transformers' own work
                s_ = torch.tensor([st.seconds + (getattr(st, "plan_seconds", None) or 0.0),
                                   getattr(st, "plan_seconds", None) or 0.0],
                                  dtype=torch.float64, device="cuda")
                dist.all_reduce(s_, op=dist.ReduceOp.MAX)
                own.append(float(s_[0]))
                asking.append(float(s_[1]))
                loop = [getattr(st, "copies_skipped", None), getattr(st, "loop_pool_off", None)]
    verify = None
    if args.verify:
        # the plain load from btrfs against the load under dmafs.enable(), every parameter
        _, _, ref = load(args.btrfs, False, keep=True)
        _, _, got = load(args.dmafs, True, keep=True)
        want = dict(ref.named_parameters())
        have = dict(got.named_parameters())
        differ = 0
        for name in sorted(set(want) | set(have)):
            a, b = want.get(name), have.get(name)
            # bit for bit (random bytes make NaNs, which torch.equal calls unequal)
            if a is None or b is None or not torch.equal(raw(local(a)), raw(local(b))):
                differ += 1
                if differ <= 5:
                    print(f"tp_worker: rank {rank}: parameter {name} differs", flush=True)
        verify = {"parameters": gather(len(want)), "differ": gather(differ)}
        del ref, got, want, have
        gc.collect()
        torch.cuda.empty_cache()
    if rank == 0:
        with open(args.json, "w") as f:
            json.dump({"bytes": total, "world": world, "ep": args.ep, "times": times,
                       "placed": placed, "kept": kept, "verify": verify,
                       "dmafs_seconds": own, "plan_seconds": asking, "loop": loop,
                       "transformers": transformers.__version__,
                       "torch": torch.__version__, "dmafs": dmafs.__version__,
                       "device": torch.cuda.get_device_name()}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
