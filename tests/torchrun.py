#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torchrun.py - run by torchrun (python -m torch.distributed.run), one process per rank.

Usage: torchrun ... torchrun.py load [--loops DEV,...] [--hf-stub DIR] MODEL
       torchrun ... torchrun.py hf [--loops DEV,...] MODEL

The process group comes from torchrun's environment (env://: RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT); the backend is NCCL when every rank has a GPU of
its own, gloo otherwise.

load: dmafs.load_distributed(MODEL) with no device and no group, as a torchrun script
      would call it: the default group, the default device (cuda:LOCAL_RANK under NCCL,
      "cpu" under gloo), tensors equal to the reference reader's, the members read about
      once in all (with --loops); a plan; with --hf-stub, transformers' loader (the
      stand-in) under dmafs.enable(distributed=True).
hf:   the real transformers: AutoModelForCausalLM.from_pretrained(MODEL, device_map=
      this rank's device) plain and under dmafs.enable(distributed=True): bit-identical,
      placed in parts (the ranks' parts add up to the model), the members read about once
      for the routed load (with --loops); prints the times (information, not checked).

Exits 0 when every check of this rank passed; torchrun fails when any rank fails.
"""
import argparse
import os
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_check import check, sectors_read, raw_bytes, ref_load, same  # noqa: E402

PLAN = {"*.q_proj.weight": 0, "*.o_proj.weight": 1}


def model_bytes(path):
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
               if n.endswith(".safetensors"))


class Run:
    def __init__(self, args):
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.args = torch, dist, args
        for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            check(v in os.environ, f"{v} is not set: not started by torchrun")
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.local = int(os.environ["LOCAL_RANK"])
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        self.backend = "nccl" if gpus > self.local and dist.is_nccl_available() else "gloo"
        if self.backend == "nccl":
            torch.cuda.set_device(self.local)
            self.device = torch.device("cuda", self.local)
        else:
            self.device = torch.device("cpu")
        dist.init_process_group(self.backend)  # env://, as torchrun scripts do
        self.loops = args.loops.split(",") if args.loops else []
        self.total = model_bytes(args.model)

    def say(self, msg):
        print(f"[rank {self.rank}] {msg}", flush=True)

    def sync(self):
        if self.backend == "nccl":
            self.torch.cuda.synchronize()
        self.dist.barrier()

    def counted(self, fn):
        """fn() between barriers: (result, seconds, bytes read from the members, all ranks)."""
        self.sync()
        before = sectors_read(self.loops) if self.loops else 0
        t0 = time.perf_counter()
        r = fn()
        self.sync()
        secs = time.perf_counter() - t0
        return r, secs, (sectors_read(self.loops) - before if self.loops else None)

    def parts_add_up(self, st, what):
        part = self.torch.tensor([st.bytes], dtype=self.torch.int64, device=self.device)
        self.dist.all_reduce(part)
        check(int(part) == self.total, f"{what}: the ranks placed {int(part)} bytes in all, "
              f"the model's files hold {self.total}")
        check(st.world_size == self.world and st.rank == self.rank and 0 < st.bytes < self.total,
              f"{what}: rank {self.rank} did not place a part: {st!r}")

    def read_once(self, nbytes, what):
        if nbytes is None or self.rank != 0:
            return
        check(self.total <= nbytes <= self.total * 1.05 + (4 << 20),
              f"{what}: the members were read {nbytes} bytes for a model of {self.total}: "
              "expected about once in all")
        self.say(f"{what}: members read {nbytes} bytes for {self.total} bytes of model files")


def run_load(r):
    import dmafs

    torch, args = r.torch, r.args
    ref = ref_load(args.model)
    sd, secs, nread = r.counted(lambda: dmafs.load_distributed(args.model))
    dev = {t.device for t in sd.values()}
    check(dev == {r.device}, f"default device: tensors on {dev}, expected {r.device} "
          f"({r.backend}, LOCAL_RANK {r.local})")
    same(sd, ref, f"rank {r.rank}: load_distributed", device=str(r.device))
    st = dmafs.last_stats()
    check(st.path != "posix", f"placement channel not used: {st!r}")
    r.parts_add_up(st, "load_distributed")
    r.read_once(nread, "load_distributed")
    r.say(f"load_distributed (default group and device {r.device}): {len(sd)} tensors equal "
          f"to the reference in {secs:.3f} s")
    del sd

    sd = dmafs.load_distributed(args.model, plan=PLAN)
    split = 0
    for name, t in ref.items():
        dim = 0 if name.endswith(".q_proj.weight") else 1 if name.endswith(".o_proj.weight") else None
        want = t.chunk(r.world, dim)[r.rank] if dim is not None else t
        split += dim is not None
        check(tuple(sd[name].shape) == tuple(want.shape) and
              torch.equal(raw_bytes(sd[name]), raw_bytes(want)), f"plan: {name} differs")
    check(split >= 2, f"plan matched {split} tensors")
    r.say(f"plan: {split} tensors sliced for rank {r.rank} of {r.world}")
    del sd

    if args.hf_stub:
        sys.path.insert(0, args.hf_stub)
        import transformers.modeling_utils as mu

        files = sorted(os.path.join(args.model, n) for n in os.listdir(args.model)
                       if n.endswith(".safetensors"))
        dm = None if r.device.type == "cpu" else {"": str(r.device)}
        sd = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error", dmafs.SlowPathWarning)
            with dmafs.enable(distributed=True):
                r.counted(lambda: mu.PreTrainedModel._load_pretrained_model(
                    sd, None, files, mu.LoadStateDictConfig(device_map=dm)))
        r.parts_add_up(dmafs.last_stats(), "transformers stand-in")
        for k, t in ref.items():
            check(torch.equal(raw_bytes(sd[k]), raw_bytes(t)), f"stand-in: {k} differs")
        r.say("transformers stand-in under enable(distributed=True): placed in parts, equal")


def run_hf(r):
    import dmafs
    from transformers import AutoModelForCausalLM

    torch, args = r.torch, r.args

    def load():
        return AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16,
                                                    device_map=str(r.device))

    plain, tp, pread = r.counted(load)
    ref = dict(plain.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error", dmafs.SlowPathWarning)
        with dmafs.enable(distributed=True):
            routed, tr, rread = r.counted(load)
    st = dmafs.last_stats()
    got = dict(routed.state_dict())
    check(got.keys() == ref.keys(), "routed and plain models have different parameters")
    for k in ref:
        a, b = got[k], ref[k]
        check(a.dtype == b.dtype and a.shape == b.shape and a.device == b.device and
              torch.equal(raw_bytes(a), raw_bytes(b)), f"{k}: differs from the plain load")
    r.parts_add_up(st, "from_pretrained under enable(distributed=True)")
    r.read_once(rread, "from_pretrained under enable(distributed=True)")
    r.say(f"from_pretrained on {r.device}: {len(ref)} tensors bit-identical to the plain load; "
          f"plain {tp:.3f} s, routed {tr:.3f} s (this rank placed {st.bytes} bytes, exchange "
          f"{st.exchange_seconds:.3f} s)" + (f"; members read {pread} bytes plain, {rread} routed"
                                             if pread is not None else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("load", "hf"))
    ap.add_argument("--loops", default="")
    ap.add_argument("--hf-stub", default="")
    ap.add_argument("model")
    args = ap.parse_args()
    warnings.simplefilter("default")
    try:
        r = Run(args)
        r.say(f"rank {r.rank} of {r.world} (local {r.local}), {r.backend}, device {r.device}")
        (run_load if args.mode == "load" else run_hf)(r)
        r.sync()
        r.dist.destroy_process_group()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    print(f"[torchrun.py] rank {r.rank}: all checks passed", flush=True)


if __name__ == "__main__":
    main()
