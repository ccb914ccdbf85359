#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tp_gpu.py - run by torchrun, one process per GPU: the real transformers'
AutoModelForCausalLM.from_pretrained(MODEL, tp_plan="auto", dtype=bfloat16) plainly and
under dmafs.enable(), in each rank.

Usage: torchrun --nproc-per-node 2 tp_gpu.py [--loops DEV,...] [--allow-slow] [--ep] [--cpu] MODEL

--ep: expert parallelism instead (distributed_config=DistributedConfig(tp_plan="auto",
enable_expert_parallel=True)); --cpu: gloo and host memory (CUDA hidden), for a machine
without GPUs.

Checks, in each rank: the two models have the same parameters, and each parameter's local
shard (DTensor: .to_local()) is equal byte for byte, in dtype, shape and device; dmafs
placed slices (dmafs.last_stats(): this rank and world size, fewer bytes than the model's
files, the ranks' bytes together at least the model's, this rank's at most what it keeps,
its parameters' and buffers' local bytes, + 2 %); no SlowPathWarning (transformers
asked every tensor for exactly what dmafs placed; --allow-slow reports them instead). Prints
the transformers version, the times and, with --loops, the bytes the member devices read.
Exits 0 when every check passed; torchrun fails when any rank fails.
"""
import argparse
import os
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_check import check, raw_bytes, sectors_read  # noqa: E402


def model_bytes(path):
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
               if n.endswith(".safetensors"))


def local(t):
    t = t.detach()
    return t.to_local() if hasattr(t, "to_local") else t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loops", default="")
    ap.add_argument("--allow-slow", action="store_true")
    ap.add_argument("--ep", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("model")
    args = ap.parse_args()
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch
    import torch.distributed as dist
    import transformers
    from transformers import AutoModelForCausalLM

    import dmafs

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    lrank = int(os.environ["LOCAL_RANK"])
    if args.cpu:
        dist.init_process_group("gloo")
        dev = "cpu"
    else:
        torch.cuda.set_device(lrank)
        dist.init_process_group("nccl")
        dev = "cuda"

    def sync():
        if not args.cpu:
            torch.cuda.synchronize()
    loops = args.loops.split(",") if args.loops else []
    total = model_bytes(args.model)

    def say(msg):
        print(f"[rank {rank}] {msg}", flush=True)

    def timed(fn):
        sync()
        dist.barrier()
        before = sectors_read(loops) if loops else 0
        t0 = time.perf_counter()
        r = fn()
        sync()
        dist.barrier()
        return r, time.perf_counter() - t0, (sectors_read(loops) - before) if loops else None

    def load():
        if args.ep:
            from transformers.distributed import DistributedConfig
            return AutoModelForCausalLM.from_pretrained(
                args.model, dtype=torch.bfloat16,
                distributed_config=DistributedConfig(tp_plan="auto", enable_expert_parallel=True))
        return AutoModelForCausalLM.from_pretrained(args.model, tp_plan="auto", dtype=torch.bfloat16)

    say(f"transformers {transformers.__version__}, torch {torch.__version__}, "
        f"dmafs {dmafs.__version__}, rank {rank} of {world}, "
        f"{'cpu' if args.cpu else f'cuda:{lrank}'}{', expert parallel' if args.ep else ''}")
    plain, tp, pread = timed(load)
    ref = {n: local(p) for n, p in plain.named_parameters()}
    ref.update({n: local(b) for n, b in plain.named_buffers()})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with dmafs.enable():
            routed, tr, rread = timed(load)
    st = dmafs.last_stats()
    got = {n: local(p) for n, p in routed.named_parameters()}
    got.update({n: local(b) for n, b in routed.named_buffers()})
    check(got.keys() == ref.keys(), f"parameters differ: {sorted(set(got) ^ set(ref))[:8]}")
    for k in ref:
        a, b = got[k], ref[k]
        check(a.dtype == b.dtype and a.shape == b.shape and a.device == b.device and
              torch.equal(raw_bytes(a), raw_bytes(b)),
              f"{k}: {a.dtype} {tuple(a.shape)} on {a.device} differs from the plain tp load's "
              f"{b.dtype} {tuple(b.shape)} on {b.device}")
    slow = [str(x.message) for x in w if issubclass(x.category, dmafs.SlowPathWarning)]
    for m in slow[:5]:
        say(f"SlowPathWarning: {m}")
    check(args.allow_slow or not slow, f"{len(slow)} SlowPathWarnings (see above): transformers "
          "asked for parts dmafs did not place (--allow-slow to only report them)")
    check(st is not None and st.rank == rank and st.world_size == world and 0 < st.bytes < total,
          f"dmafs did not place this rank's slices: {st!r} (model files: {total} bytes)")
    kept = sum(t.numel() * t.element_size() for t in ref.values())
    check(st.bytes <= kept * 1.02, f"this rank placed {st.bytes} bytes, it keeps {kept} "
          "(+2 % allowed)")
    part = torch.tensor([st.bytes], dtype=torch.int64, device=dev)
    dist.all_reduce(part)
    check(int(part) >= total * 0.9, f"the ranks placed {int(part)} bytes in all, the model "
          f"has {total}: some tensors were not placed?")
    say(f"{len(ref)} parameters and buffers equal to the plain load; this rank placed {st.bytes} of {total} bytes, keeps {kept}; plain {tp:.3f} s, "
        f"dmafs {tr:.3f} s; {len(slow)} SlowPathWarnings"
        + (f"; members read {pread} bytes plain, {rread} with dmafs" if loops else ""))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    print("[tp_gpu.py] all checks passed", flush=True)
