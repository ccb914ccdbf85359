#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dist_load.py - checks of dmafs.load_distributed() with WORLD processes.

Usage: dist_load.py --backend gloo|nccl --world N --work DIR [--loops DEV,DEV...]
                    [--hf-stub DIR] MODEL OTHER OFF TINY

MODEL and OTHER are two different models on dmafs, OFF a copy of MODEL off dmafs, TINY a
model smaller than one part per rank. With --loops (the member loop devices), the
sectors read from the members are counted around a distributed load and around a plain
dmafs.load() in every rank, in the same run.

gloo places into host memory ("cpu"), nccl into cuda:RANK. Exits 0 when every check of
every rank passed.
"""
import argparse
import os
import sys
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_check import check, sectors_read, expect_warning, raw_bytes, ref_load, same  # noqa: E402

PLAN = {"*.q_proj.weight": 0, "*.o_proj.weight": 1, "*.nope.weight": 0}


def file_bytes(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
                   if n.endswith(".safetensors"))
    return os.path.getsize(path)


def say(rank, msg):
    print(f"[rank {rank}] {msg}", flush=True)


def worker(rank, args):
    import torch
    import torch.distributed as dist
    import dmafs
    import dmafs._dist as ddist

    world = args.world
    dist.init_process_group(args.backend, init_method=f"file://{args.work}/store",
                            rank=rank, world_size=world)
    device = "cpu" if args.backend == "gloo" else f"cuda:{rank}"
    if device != "cpu":
        torch.cuda.set_device(rank)
    loops = args.loops.split(",") if args.loops else []
    try:
        ref = ref_load(args.model)

        # 1. The whole model in every rank; the drives read about once.
        dist.barrier()
        before = sectors_read(loops) if rank == 0 and loops else 0
        sd = dmafs.load_distributed(args.model, device)
        dist.barrier()
        dist_read = sectors_read(loops) - before if rank == 0 and loops else 0
        st = dmafs.last_stats()
        same(sd, ref, f"rank {rank}: load_distributed", device=device)
        check(st.rank == rank and st.world_size == world, f"stats rank/world: {st!r}")
        check(st.path != "posix", f"rank {rank}: placement channel not used: {st!r}")
        part = torch.tensor([st.bytes], dtype=torch.int64, device=device)
        dist.all_reduce(part)
        total = file_bytes(args.model)
        check(int(part) == total, f"the ranks placed {int(part)} bytes in all, the model's files "
              f"hold {total}: each byte must be placed by exactly one rank")
        check(0 < st.bytes < total, f"rank {rank} placed {st.bytes} of {total} bytes: "
              "not a part")
        say(rank, f"whole model: {len(sd)} tensors equal to the reference; placed {st.bytes} "
            f"of {total} bytes, exchange {st.exchange_seconds:.3f} s")
        del sd
        if loops:
            dist.barrier()
            before = sectors_read(loops) if rank == 0 else 0
            sd = dmafs.load(args.model, device)
            dist.barrier()
            plain_read = sectors_read(loops) - before if rank == 0 else 0
            del sd
            if rank == 0:
                say(rank, f"member bytes read: load_distributed {dist_read}, dmafs.load in "
                    f"each of {world} ranks {plain_read}, model files {total}")
                check(total <= dist_read <= total * 1.05 + (4 << 20),
                      f"load_distributed read {dist_read} bytes from the members for a model "
                      f"of {total}: expected about once")
                check(plain_read >= world * total,
                      f"the plain loads read {plain_read} bytes, fewer than {world} x {total}: "
                      "the read counter does not see the placements")

        # 2. A tensor-parallel plan: slices of the named tensors, the rest whole.
        sd = dmafs.load_distributed(args.model, device, plan=PLAN)
        check(set(sd) == set(ref), f"rank {rank}: plan: keys differ")
        split = 0
        for name, r in ref.items():
            dim = 0 if name.endswith(".q_proj.weight") else 1 if name.endswith(".o_proj.weight") else None
            want = r.chunk(world, dim)[rank] if dim is not None else r
            split += dim is not None
            g = sd[name]
            check(tuple(g.shape) == tuple(want.shape), f"plan: {name}: shape {tuple(g.shape)}, "
                  f"expected {tuple(want.shape)}")
            check(torch.equal(raw_bytes(g), raw_bytes(want)), f"plan: {name}: bytes differ")
            check(g.untyped_storage().nbytes() == g.numel() * g.element_size()
                  if hasattr(g, "untyped_storage") else g.storage().nbytes() == g.numel() * g.element_size(),
                  f"plan: {name}: still a view of the whole model's buffer")
        check(split >= 2, f"plan matched only {split} tensors: the model has no q_proj/o_proj")
        say(rank, f"plan: {split} tensors sliced, the rest whole, each in its own memory")
        del sd

        # 3. A plan that cannot split evenly: refused on every rank before any I/O. The
        # first tensor with a dimension that WORLD does not divide, in MODEL or else in TINY
        # (scaled down to dimensions of 1 and odd vocabularies); one of them has it.
        if world > 1:
            uneven = None
            for m in (args.model, args.tiny):
                r = ref if m == args.model else ref_load(m)
                uneven = next(((m, n, d) for n in sorted(r) for d, size in enumerate(r[n].shape)
                               if size % world), None)
                if uneven:
                    break
            check(uneven is not None, f"no tensor of {args.model} or {args.tiny} has a dimension "
                  f"that {world} ranks cannot split evenly: the uneven plan is not tested")
            m, name, dim = uneven
            try:
                dmafs.load_distributed(m, device, plan={"*.q_proj.weight": 0, name: dim})
                check(False, f"an uneven plan was accepted: {name} dimension {dim} of "
                      f"{list(ref_load(m)[name].shape)} in {world} parts")
            except ValueError as e:
                check("equal parts" in str(e), f"uneven plan: {e}")
            say(rank, f"uneven plan refused: {os.path.basename(m)}'s {name} "
                f"{list(ref_load(m)[name].shape)}, dimension {dim} in {world} parts")
        try:
            dmafs.load_distributed(args.model, device, plan={"*.q_proj.weight": 7})
            check(False, "a plan with dimension 7 was accepted")
        except ValueError as e:
            check("dimension" in str(e), f"bad dimension: {e}")
        say(rank, "bad plans refused")

        # 4. Ranks that open different models: refused on every rank.
        try:
            dmafs.load_distributed(args.model if rank == 0 else args.other, device)
            check(world == 1, "different models in different ranks were accepted")
        except RuntimeError as e:
            check("different models" in str(e), f"different models: {e}")
        say(rank, "different models refused")

        # 5. One rank fails, before its placement (setting up its buffer) or in the middle
        # of it (its third chunk, after two rounds were broadcast): it raises its own
        # error, the others a RuntimeError; a load afterwards works.
        real = ddist.Target

        class FailingTarget(real):
            def place(self, model, part, threads):
                self.calls = getattr(self, "calls", 0) + 1
                if self.calls == 3:
                    raise OSError(5, "injected failure of chunk 3", args.model)
                return super().place(model, part, threads)

        def failing(*a, **kw):
            raise OSError(5, "injected setup failure", args.model)
        with dmafs._lib.Model(args.model) as m:
            last = ddist._parts(m.nbytes, world)[-1]
        check(sum(hi > lo for lo, hi in ddist._chunks(*last)) >= 3,
              f"the last rank's part {last} has fewer than 3 chunks: the failure in the "
              "middle of a placement cannot be injected")
        for case, fake, msg in (("setup", failing, "injected setup failure"),
                                ("chunk 3", FailingTarget, "injected failure of chunk 3")):
            if rank == world - 1:
                ddist.Target = fake
            try:
                dmafs.load_distributed(args.model, device)
                check(False, f"a failed {case} in one rank went unnoticed")
            except OSError as e:
                check(rank == world - 1 and msg in str(e), f"rank {rank}: {case}: {e!r}")
            except RuntimeError as e:
                check(rank != world - 1 and "another rank failed" in str(e),
                      f"rank {rank}: {case}: {e!r}")
            finally:
                ddist.Target = real
        sd = dmafs.load_distributed(args.model, device)
        same(sd, ref, f"rank {rank}: load_distributed after the failures", device=device)
        del sd
        say(rank, "a rank failing at setup or at its third chunk is reported on every rank; "
            "the next load is whole")

        # 6. Off dmafs: the same tensors, with a SlowPathWarning.
        sd, w = expect_warning(lambda: dmafs.load_distributed(args.off, device),
                               dmafs.SlowPathWarning, 1)
        check("posix path" in str(w[0].message), f"off dmafs: warning {w[0].message}")
        same(sd, ref_load(args.off), f"rank {rank}: off dmafs", device=device)
        check(dmafs.last_stats().path == "posix", f"off dmafs: {dmafs.last_stats()!r}")
        say(rank, "off dmafs: equal, with SlowPathWarning")
        del sd

        # 7. transformers' loader (the stand-in in tests/hf_stub) with
        # dmafs.enable(distributed=True): one placement made in parts, equal tensors.
        if args.hf_stub:
            sys.path.insert(0, args.hf_stub)
            import transformers.modeling_utils as mu
            files = sorted(os.path.join(args.model, n) for n in os.listdir(args.model)
                           if n.endswith(".safetensors"))
            dm = None if device == "cpu" else {"": device}
            for distributed in (True, False):
                sd = {}
                with warnings.catch_warnings():
                    warnings.simplefilter("error", dmafs.SlowPathWarning)
                    with dmafs.enable(distributed=distributed):
                        mu.PreTrainedModel._load_pretrained_model(
                            sd, None, files, mu.LoadStateDictConfig(device_map=dm))
                st = dmafs.last_stats()
                check(set(sd) == set(ref), f"hf distributed={distributed}: keys differ")
                for k, r in ref.items():
                    check(torch.equal(raw_bytes(sd[k]), raw_bytes(r)),
                          f"hf distributed={distributed}: {k} differs")
                if distributed:
                    check(st.world_size == world and 0 < st.bytes < total,
                          f"hf distributed: not placed in parts: {st!r}")
                else:
                    check(st.world_size is None and st.bytes == total,
                          f"hf plain: not one whole placement: {st!r}")
                del sd
            say(rank, "transformers loader with enable(distributed=True): placed in parts, "
                "equal; without it: whole")

        # 8. A model smaller than one part: the last ranks place nothing.
        sd = dmafs.load_distributed(args.tiny, device)
        same(sd, ref_load(args.tiny), f"rank {rank}: tiny model", device=device)
        say(rank, f"tiny model: equal (this rank placed {dmafs.last_stats().bytes} bytes)")
        del sd
        dist.barrier()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--work", required=True)
    ap.add_argument("--loops", default="")
    ap.add_argument("--hf-stub", default="", help="tests/hf_stub: check dmafs.enable(distributed=True)")
    ap.add_argument("model")
    ap.add_argument("other")
    ap.add_argument("off")
    ap.add_argument("tiny")
    args = ap.parse_args()
    warnings.simplefilter("default")
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(args,), nprocs=args.world, join=True)
    print(f"dist_load: all checks passed in {args.world} ranks ({args.backend})")


if __name__ == "__main__":
    main()
