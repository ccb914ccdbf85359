# SPDX-License-Identifier: MIT
"""shard_check.py - dmafs.load(..., shard=...) in 2 and 4 ranks (gloo, host memory), or with
--device cuda in as many ranks as GPUs (NCCL, rank r into cuda:r).

Usage: shard_check.py --work DIR --loops DEV,DEV... --worlds 2,4 [--device cuda] MODEL_DIR ODD_FILE

ODD_FILE is written here (on the mount): tensors of odd sizes, a packed (fused) one, 3-d
ones split along dimension 1 and 2, one of fewer rows than ranks, one whose row pieces
are too wide to exchange in 2 ranks but not in 4, a 0-d one; beside it tiny.safetensors,
every tensor of which is split, so that some ranks of 4 have nothing of their own. Each
rank loads its shard of the models and checks every tensor against the whole tensor
(dmafs.load in the same rank) sliced by this file's own rule; the bytes dmafs reports and
the sectors the member loop devices read while the rank loads alone must be the rank's
share. With shard=plan (the ranks together) the narrow row slices must have been
exchanged (LoadStats.exchanged_tensors, counted here by this file's own rule, and the
members reading the model about once), also with a send buffer small enough for many
batches; a failure planted in one rank's placement must raise in every rank. First, the
exchange's bookkeeping alone (check_runs) on many small shapes. Exits 0 when every check
passed in every rank.
"""

import argparse
import json
import math
import os
import struct
import sys

from python_check import end_rank

# every split along the first dimension: each slice is one extent, and the members must
# read about the shard's bytes
PLAN_COL = {"*.q_proj.weight": 0, "*.k_proj.weight": 0, "*.v_proj.weight": 0,
            "*.gate_proj.weight": 0, "*.up_proj.weight": 0, "*.embed_tokens.weight": 0,
            "lm_head.weight": 0}
# transformers' kind of plan: row-wise splits too. A rank loading alone reads them one
# extent per row (the test model's rows are a few hundred bytes, so the sector at either
# end of a row is much of its reads: only correctness is checked, and the reads are
# reported); the ranks together exchange them and read the model about once (checked)
PLAN_MODEL = {"*.q_proj.weight": 0, "*.k_proj.weight": 0, "*.o_proj.weight": 1,
              "*.gate_proj.weight": 0, "*.down_proj.weight": 1, "*.q_proj.bias": 0}
PLAN_ODD = {"odd.col": 0, "odd.row": 1, "odd.gate_up": (0, 2), "odd.cube": 1,
            "odd.bias": 0, "odd.qkv": (-1, 3), "odd.cube2": -1, "odd.short": 1, "odd.wide": 1}
# every tensor split: in 4 ranks, ranks 2 and 3 have nothing but still send their rows
PLAN_TINY = {"tiny.*": -1}


def write_odd(path):
    """A safetensors file whose tensors do not divide by 2 or 4 (and tiny.safetensors
    beside it)."""
    import torch
    g = torch.Generator().manual_seed(7)
    ts = {"odd.col": torch.randn(10, 7, generator=g),
          "odd.row": torch.randn(6, 9, generator=g).to(torch.float16),
          "odd.gate_up": torch.randn(10, 3, generator=g),
          "odd.cube": torch.randint(-9, 9, (3, 5, 6), generator=g, dtype=torch.int32),
          "odd.bias": torch.randn(5, generator=g),
          "odd.qkv": torch.randn(4, 15, generator=g).to(torch.float64),
          "odd.whole": torch.randn(8, generator=g),
          "odd.scalar": torch.tensor(3.5),
          "odd.cube2": torch.randint(-9, 9, (4, 3, 7), generator=g, dtype=torch.int32),
          "odd.short": torch.randn(2, 11, generator=g),
          # a row piece of 2 ranks is 1 MiB and 12 bytes: read per row; of 4, exchanged
          "odd.wide": torch.randn(3, (1 << 19) + 5, generator=g)}
    write_st(path, ts)
    write_st(os.path.join(os.path.dirname(path), "tiny.safetensors"),
             {"tiny.row": torch.randn(2, 2, generator=g),
              "tiny.col": torch.randn(3, 5, generator=g).to(torch.float16)})


def write_st(path, ts):
    import torch
    names = {torch.float32: "F32", torch.float16: "F16", torch.int32: "I32", torch.float64: "F64"}
    header, blobs, off = {}, [], 0
    for k, t in ts.items():
        b = t.contiguous().numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
        f.flush()
        os.fsync(f.fileno())


def exchanged(full, plan, world):
    """How many tensors of @full a load with shard=plan exchanges: split along a later
    dimension (not packed) of more than one row, not wholly one rank's, and the widest
    rank's piece of a row below dmafs._shard._EXCHANGE_BELOW bytes."""
    from dmafs import _shard
    n = 0
    for name, t in full.items():
        r = rule(name, plan)
        if r is None or r[1] != 1:
            continue
        dim = r[0] % t.dim()
        outer, size = math.prod(t.shape[:dim]), t.shape[dim]
        inner = math.prod(t.shape[dim + 1:]) * t.element_size()
        step = math.ceil(size / world)
        if dim and outer > 1 and step < size and 0 < step * inner < _shard._EXCHANGE_BELOW:
            n += 1
    return n


def rule(name, plan):
    for pat, v in plan.items():
        import fnmatch
        if fnmatch.fnmatchcase(name, pat):
            return (v, 1) if isinstance(v, int) else tuple(v)
    return None


def ref_slice(t, r, rank, world):
    """The rank's slice by the rule, written apart from the module: narrow per block."""
    import torch
    if r is None:
        return t
    dim, blocks = r
    dim %= t.dim()
    parts = t.chunk(blocks, dim) if blocks > 1 else [t]
    out = []
    for p in parts:
        size = p.shape[dim]
        step = math.ceil(size / world)
        start = min(rank * step, size)
        out.append(p.narrow(dim, start, min(start + step, size) - start))
    return torch.cat(out, dim) if len(out) > 1 else out[0]


def raw(t):
    """The bytes of t (NaN compares unequal to itself)."""
    import torch
    return t.contiguous().reshape(-1).view(torch.uint8)


def sectors_read(loops):
    n = 0
    for dev in loops:
        with open(f"/sys/block/{os.path.basename(dev)}/stat") as f:
            n += int(f.read().split()[2])
    return n


# --no-read-bounds (a mount with verify_place, which also reads a 4 KiB checksum block per
# member read): the members' reads are reported, not checked
BOUNDS = "--no-read-bounds" not in sys.argv
# where the shards go (worker: "cuda:RANK" with --device cuda); the whole tensors compared
# against are loaded into host memory
DEV = "cpu"


def compare(rank, world, path, plan, full, got, what, fails):
    """Every tensor of @got is the rank's slice of @full's, byte for byte."""
    import torch
    for name, t in full.items():
        want = ref_slice(t, rule(name, plan), rank, world)
        g = got.get(name)
        if g is not None and g.device.type != "cpu":
            if g.device != torch.device(DEV):
                fails.append(f"rank {rank}/{world} ({what}): {name} on {g.device}, want {DEV}")
            g = g.cpu()
        if g is None or g.shape != want.shape or g.dtype != want.dtype or not torch.equal(
                raw(g), raw(want)):  # bytes: random model bytes hold NaNs
            fails.append(f"rank {rank}/{world} {os.path.basename(path)} ({what}): {name}: got "
                         f"{None if g is None else (tuple(g.shape), g.dtype)}, want "
                         f"{(tuple(want.shape), want.dtype)}")
    if set(got) != set(full):
        fails.append(f"rank {rank}/{world} ({what}): tensor names differ")


def check_model(rank, world, path, plan, loops, fails):
    """Each rank alone with shard=(rank, world, plan), then all at once with shard=plan
    (the tensors kept whole placed once between the ranks and broadcast). Returns this
    rank's shard bytes, the members' reads while it loaded alone, the bytes all ranks
    placed together with shard=plan and the members' reads then."""
    import torch
    import torch.distributed as dist
    import dmafs
    full = dmafs.load(path, "cpu")
    want_bytes = sliced = whole = 0
    for name, t in full.items():
        n = ref_slice(t, rule(name, plan), rank, world).numel() * t.element_size()
        want_bytes += n
        if rule(name, plan) is None:
            whole += n
        else:
            sliced += n
    # every rank loads alone, so that the members' sector counts are its own
    got, before, after = None, 0, 0
    for r in range(world):
        dist.barrier()
        if r == rank:
            before = sectors_read(loops)
            got = dmafs.load(path, DEV, shard=(rank, world, plan))
            after = sectors_read(loops)
            st = dmafs.last_stats()
    dist.barrier()
    compare(rank, world, path, plan, full, got, "alone", fails)
    if st.bytes != want_bytes or st.rank != rank or st.world_size != world or \
            st.exchanged_tensors is not None or st.exchange_tail_seconds is not None:
        fails.append(f"rank {rank}/{world}: last_stats bytes {st.bytes} rank {st.rank} "
                     f"world {st.world_size} exchanged {st.exchanged_tensors} (tail "
                     f"{st.exchange_tail_seconds}), want {want_bytes} {rank} {world} None")
    read = (after - before) * 512
    # sector-granular reads at either end of an extent and the headers; the other plans'
    # extents are too small for their reads to tell (reported only)
    slack = max(want_bytes // 50, 1 << 20)
    if BOUNDS and loops and plan is PLAN_COL and not want_bytes <= read <= want_bytes + slack:
        fails.append(f"rank {rank}/{world} {os.path.basename(path)}: the members read {read} "
                     f"bytes for a shard of {want_bytes}")
    del got
    # all at once: the ranks together place the slices and the whole tensors once, and
    # exchange the narrow row slices
    swaps = exchanged(full, plan, world)
    if plan is not PLAN_COL and not swaps:
        fails.append(f"rank {rank}/{world} {os.path.basename(path)}: the plan has nothing "
                     "to exchange (the test would not test the exchange)")
    from dmafs import _shard
    plans, plan_of = [], _shard._exchange_plan

    def spy(*a):
        plans.append(plan_of(*a))
        return plans[-1]
    if DEV != "cpu":  # the GPU memory the load takes: its shard, and the send and receive
        # buffers meanwhile
        torch.cuda.synchronize(DEV)
        mem0 = torch.cuda.memory_allocated(DEV)
        torch.cuda.reset_peak_memory_stats(DEV)
    dist.barrier()
    before = sectors_read(loops)
    _shard._exchange_plan = spy
    try:
        got = dmafs.load(path, DEV, shard=plan)
    finally:
        _shard._exchange_plan = plan_of
    st = dmafs.last_stats()
    dist.barrier()
    after = sectors_read(loops)
    if DEV != "cpu":
        # each tensor starts at a multiple of 64 bytes; the allocator rounds up to 2 MiB
        # blocks; the ranks' agreements take a few small tensors
        slack = 64 * len(full) + (4 << 20)
        send = plans[0][1] if plans else 0
        peak = torch.cuda.max_memory_allocated(DEV) - mem0
        kept = torch.cuda.memory_allocated(DEV) - mem0
        if not want_bytes <= peak <= want_bytes + 2 * send + slack or \
                not want_bytes <= kept <= want_bytes + slack:
            fails.append(f"rank {rank}/{world} {os.path.basename(path)}: with shard=plan the "
                         f"load took {peak} bytes of GPU memory at most and kept {kept}, for a "
                         f"shard of {want_bytes} and send and receive buffers of {send}")
        elif rank == 0:
            print(f"  {os.path.basename(path)}: GPU memory at most {peak} bytes, kept {kept}, "
                  f"for a shard of {want_bytes} and send and receive buffers of {send}",
                  flush=True)
    compare(rank, world, path, plan, full, got, "shared", fails)
    del got
    t = torch.tensor([st.bytes, sliced], dtype=torch.int64, device=DEV)
    dist.all_reduce(t)
    placed, want_all = int(t[0]), int(t[1]) + whole
    if placed != want_all or st.exchange_seconds is None or st.exchanged_tensors != swaps:
        fails.append(f"rank {rank}/{world} {os.path.basename(path)}: with shard=plan the ranks "
                     f"placed {placed} bytes together, want {want_all} (the slices and the "
                     f"whole tensors once); exchange {st.exchange_seconds}; "
                     f"{st.exchanged_tensors} tensors exchanged, want {swaps}")
    tail = st.exchange_tail_seconds
    if tail is None or not 0 <= tail <= st.seconds or (not swaps and tail) or \
            (swaps and "s of it after the other placements" not in repr(st)):
        fails.append(f"rank {rank}/{world} {os.path.basename(path)}: with shard=plan the "
                     f"exchange went on {tail} s after the other placements, in a load of "
                     f"{st.seconds} s ({swaps} tensors exchanged); repr {st!r}")
    read_all = (after - before) * 512
    # the row slices exchanged are read as blocks of whole rows: about the model once too
    # (read one extent per row they cost a sector or more per row: 1.2 to 1.4 times)
    if BOUNDS and loops and plan in (PLAN_COL, PLAN_MODEL) and not \
            want_all <= read_all <= want_all + max(want_all // 50, world << 20):
        fails.append(f"rank {rank}/{world} {os.path.basename(path)}: with shard=plan the "
                     f"members read {read_all} bytes for {want_all}")
    if swaps:
        # again with a send buffer of 64 KiB: one or a few tensors per batch
        from dmafs import _shard
        plans, saved, plan_of = [], _shard._EXCHANGE_SEND, _shard._exchange_plan

        def spy(*a):
            plans.append(plan_of(*a))
            return plans[-1]
        _shard._EXCHANGE_SEND, _shard._exchange_plan = 64 << 10, spy
        try:
            got = dmafs.load(path, DEV, shard=plan)
        finally:
            _shard._EXCHANGE_SEND, _shard._exchange_plan = saved, plan_of
        st = dmafs.last_stats()
        compare(rank, world, path, plan, full, got, "shared, small send buffer", fails)
        del got
        batches, send = plans[0]
        # a slot: the widest slice (rank 0's) rounded up to 4 KiB
        slots = [-(-s.outer * (s.cols[0][1] - s.cols[0][0]) // 4096) * 4096
                 for b in batches for s in b]
        bound = max([64 << 10] + slots)
        if st.exchanged_tensors != swaps or len(slots) != swaps or send > bound or \
                len(batches) < -(-sum(slots) // bound):
            fails.append(f"rank {rank}/{world} {os.path.basename(path)}: with a small send "
                         f"buffer {st.exchanged_tensors} tensors exchanged in {len(batches)} "
                         f"batches (send {send}, slots {slots}), want {swaps}")
    return want_bytes, read, want_all, read_all


def check_failure(rank, world, path, plan, fails):
    """The last rank fails to place, once the rows it exchanges and once its other slices:
    it raises its own error, every other rank a RuntimeError saying so, none hangs in a
    collective, and a load after that works."""
    import torch.distributed as dist
    import dmafs
    from dmafs import _shard
    calls = _shard._shard_calls
    for what in ("rows", "slices"):
        def planted(tgt, model, entries, *a, **kw):
            # the ranges to exchange are entries of no dtype
            out = calls(tgt, model, entries, *a, **kw)
            if rank == world - 1 and entries and (entries[0][1] is None) == (what == "rows"):
                def fail():
                    raise OSError(5, f"planted failure placing {what}")
                out = out[:len(out) // 2] + [fail] + out[len(out) // 2:]
            return out
        _shard._shard_calls = planted
        dist.barrier()
        try:
            dmafs.load(path, DEV, shard=plan)
            err = None
        except (OSError, RuntimeError) as e:
            err = e
        finally:
            _shard._shard_calls = calls
        want = OSError if rank == world - 1 else RuntimeError
        if not isinstance(err, want) or (want is RuntimeError and "another rank" not in str(err)):
            fails.append(f"rank {rank}/{world} {os.path.basename(path)}: a failure placing "
                         f"{what} in rank {world - 1} raised {err!r} here, want {want.__name__}")
    dist.barrier()
    got = dmafs.load(path, DEV, shard=plan)
    if set(got) != set(dmafs.load(path, "cpu")):
        fails.append(f"rank {rank}/{world}: no load after the planted failures")


def check_forms(rank, world, path, fails):
    """Plan values that differ between the ranks: None (not placed), "whole" (placed whole
    by this rank alone) and (dimension, start, stop) (those rows of the dimension), beside
    an even split the same in every rank; each rank alone (shard=(rank, world, plan)) and
    all at once (shard=plan: only what no pattern names is shared). Every tensor must be
    its part of the whole one, a tensor not placed absent, the rank's bytes alone exactly
    its parts, and values out of range refused."""
    import torch.distributed as dist
    import dmafs
    full = dmafs.load(path, "cpu")
    cube = (0, rank % 3, min(3, rank % 3 + 2))  # odd.cube is [3, 5, 6]
    plan = {"odd.col": None if rank % 2 else "whole", "odd.row": (1, rank, min(9, rank + 4)),
            "odd.cube": cube, "odd.qkv": 1, "odd.wide": None}
    want = {}
    for name, t in full.items():
        v = plan.get(name, "shared")
        if v is None:
            continue
        if isinstance(v, tuple) and len(v) == 3:
            want[name] = t.narrow(v[0], v[1], v[2] - v[1])
        elif isinstance(v, int):
            want[name] = ref_slice(t, (v, 1), rank, world)
        else:
            want[name] = t
    for shard, what in (((rank, world, plan), "alone"), (plan, "together")):
        dist.barrier()
        got = dmafs.load(path, DEV, shard=shard)
        st = dmafs.last_stats()
        if set(got) != set(want):
            fails.append(f"rank {rank}/{world} plan forms ({what}): tensors {sorted(got)}, "
                         f"want {sorted(want)}")
        for name, w in want.items():
            g = got.get(name)
            g = g.cpu() if g is not None else None
            if g is None or g.shape != w.shape or not torch_equal(g, w):
                fails.append(f"rank {rank}/{world} plan forms ({what}): {name}: got "
                             f"{None if g is None else tuple(g.shape)}, want {tuple(w.shape)}")
        mine = sum(w.numel() * w.element_size() for w in want.values())
        if what == "alone" and (st is None or st.bytes != mine):
            fails.append(f"rank {rank}/{world} plan forms (alone): placed "
                         f"{st.bytes if st else None} bytes, its parts are {mine}")
    for bad in ({"odd.col": (0, 5, 3)}, {"odd.col": (0, 0, 11)}, {"odd.col": "half"},
                {"odd.col": (0, 0)}):
        try:
            dmafs.load(path, DEV, shard=(rank, world, bad))
            fails.append(f"rank {rank}/{world}: plan {bad} was taken")
        except ValueError:
            pass


def torch_equal(a, b):
    import torch
    return a.dtype == b.dtype and torch.equal(raw(a), raw(b))


def check_runs():
    """The exchange's bookkeeping alone, on many small shapes and world sizes: each rank's
    range, cut into pieces per destination (dmafs._shard._runs), gathered in rank order,
    is every destination's slice, row-major. Returns the failures."""
    import random
    from dmafs import _shard
    rnd, fails = random.Random(1), []
    for _ in range(2000):
        world, outer = rnd.randint(2, 7), rnd.randint(1, 9)
        size, inner = rnd.randint(1, 13), rnd.choice([1, 2, 6])
        row = size * inner
        cols = [(a * inner, b * inner) for a, b in (_shard.shard_range(size, r, world)
                                                    for r in range(world))]
        ends = [0]
        for a, b in cols:
            ends.append(ends[-1] + outer * (b - a))
        got = [[] for _ in range(world)]
        for lo, hi in zip(ends, ends[1:]):
            for j, (a, b) in enumerate(cols):
                n = 0
                for off, rows, w in _shard._runs(row, lo, hi, a, b):
                    for k in range(rows):
                        got[j] += range(lo + off + k * row, lo + off + k * row + w)
                        n += w
                if n != _shard._count(row, lo, hi, a, b):
                    fails.append(f"_count({row}, {lo}, {hi}, {a}, {b}) is not {n}")
        for j, (a, b) in enumerate(cols):
            want = [r * row + c for r in range(outer) for c in range(a, b)]
            if got[j] != want:
                i = next((i for i, (x, y) in enumerate(zip(got[j], want)) if x != y),
                         min(len(got[j]), len(want)))
                fails.append(f"outer {outer} size {size} inner {inner} world {world}: rank "
                             f"{j} would get {len(got[j])} bytes, want {len(want)}; the first "
                             f"wrong one at {i}")
    return fails[:5]


def worker(rank, args, world):
    global DEV
    import torch.distributed as dist
    backend = "gloo"
    if args.device == "cuda":
        import torch
        torch.cuda.set_device(rank)
        DEV, backend = f"cuda:{rank}", "nccl"
    dist.init_process_group(backend, init_method=f"file://{args.work}/store{world}",
                            rank=rank, world_size=world)
    fails = []
    loops = args.loops.split(",") if args.loops else []
    tiny = os.path.join(os.path.dirname(args.odd), "tiny.safetensors")
    for path, plan, what in ((args.odd, PLAN_ODD, "odd sizes, packed"),
                             (tiny, PLAN_TINY, "every tensor split"),
                             (args.model, PLAN_COL, "column-wise"),
                             (args.model, PLAN_MODEL, "column- and row-wise")):
        want, read, want_all, read_all = check_model(rank, world, path, plan, loops, fails)
        print(f"  rank {rank}/{world} {os.path.basename(path)} ({what}): shard {want} bytes, "
              f"members read {read} ({read / max(want, 1):.2f}x); all ranks with the whole "
              f"tensors shared: {want_all} bytes, members read {read_all} "
              f"({read_all / max(want_all, 1):.2f}x)", flush=True)
    check_failure(rank, world, args.odd, PLAN_ODD, fails)
    check_forms(rank, world, args.odd, fails)
    end_rank(fails)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--loops", default="")
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--no-read-bounds", action="store_true")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("model")
    ap.add_argument("odd")
    args = ap.parse_args()
    fails = check_runs()
    for f in fails:
        print("FAIL " + f, flush=True)
    if fails:
        return 1
    write_odd(args.odd)
    import torch.multiprocessing as mp
    for world in (int(w) for w in args.worlds.split(",")):
        mp.spawn(worker, args=(args, world), nprocs=world, join=True)
        print(f"shard_check: {world} ranks: every slice equal to the whole tensor's", flush=True)


if __name__ == "__main__":
    sys.exit(main())
