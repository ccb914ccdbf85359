# SPDX-License-Identifier: MIT
"""tp_worker - one rank of the tp mode's torchrun job: transformers'
from_pretrained(MODEL, tp_plan="auto", dtype=bfloat16) in every rank, R rounds of, in
turn: under dmafs.enable() from the dmafs mount, plainly from the same mount, and plainly
from btrfs; the page cache dropped before every load (rank 0, between two barriers), each
load timed from a barrier before it to a barrier after the last rank is done, after one
untimed plain load from btrfs. Rank 0 writes the times as JSON.

usage: torchrun ... tp_worker.py --runs R --json FILE DMAFS_MODEL BTRFS_MODEL
"""

import argparse
import gc
import json
import os
import time


def main():
    ap = argparse.ArgumentParser(prog="tp_worker.py")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", required=True)
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

    def load(path, enabled):
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
                m = AutoModelForCausalLM.from_pretrained(path, tp_plan="auto", dtype=torch.bfloat16)
        else:
            m = AutoModelForCausalLM.from_pretrained(path, tp_plan="auto", dtype=torch.bfloat16)
        torch.cuda.synchronize()
        dist.barrier()
        secs = time.perf_counter() - t0
        st = dmafs.last_stats() if enabled else None
        del m
        gc.collect()
        torch.cuda.empty_cache()
        return secs, st

    load(args.btrfs, False)  # warm-up, untimed
    methods = (("dmafs+enable", args.dmafs, True), ("dmafs", args.dmafs, False),
               ("btrfs", args.btrfs, False))
    times, placed, own = {m: [] for m, _, _ in methods}, None, []
    for _ in range(args.runs):
        for m, path, enabled in methods:
            secs, st = load(path, enabled)
            times[m].append(secs)
            if st is not None:
                b = torch.tensor([st.bytes], dtype=torch.int64, device="cuda")
                all_b = [torch.zeros_like(b) for _ in range(world)]
                dist.all_gather(all_b, b)
                placed = [int(x) for x in all_b]
                # dmafs's own part of the load: the slowest rank's dmafs load (placement
                # and exchange); the rest of the time is transformers' own work
                s_ = torch.tensor([st.seconds], dtype=torch.float64, device="cuda")
                dist.all_reduce(s_, op=dist.ReduceOp.MAX)
                own.append(float(s_))
    if rank == 0:
        with open(args.json, "w") as f:
            json.dump({"bytes": total, "world": world, "times": times, "placed": placed,
                       "dmafs_seconds": own, "transformers": transformers.__version__,
                       "torch": torch.__version__, "dmafs": dmafs.__version__,
                       "device": torch.cuda.get_device_name()}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
