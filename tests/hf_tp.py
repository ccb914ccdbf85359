# SPDX-License-Identifier: MIT
"""hf_tp.py - dmafs.enable() under a tensor-parallel load (tp_plan="auto") of the stand-in
of transformers 5's loader (tests/hf_stub), in 2 and 4 ranks on gloo (host memory).

Usage: hf_tp.py --stub DIR --work DIR --worlds 2,4 QWEN_DIR ODD_DIR

ODD_DIR is written here (on the mount): a one-file model of odd sizes with every tp style
the stand-in knows (colwise weight and bias, rowwise weight and bias, packed 3-d experts,
a 2-d packed weight, grouped experts, embedding, lm_head, a replicated norm, a 0-d tensor,
a key that is no parameter) and one test-only style, "colwise_next", that asks for the
next rank's rows while dmafs is told it is colwise.

Each rank loads each model twice with the stand-in's tp path: plainly (its own reader) and
under dmafs.enable(); every parameter must be equal byte for byte (and in dtype and shape),
dmafs.last_stats().bytes must be this rank's share by an independent table of what each
tensor keeps (not the whole model; all ranks together place each tensor once, a rank at
most its slices or, for the rowwise slices the ranks exchange, its block of whole rows),
some rowwise slices must have been exchanged, the stand-in's reader must not have been
used, and the SlowPathWarnings must name exactly the tensors dmafs cannot serve from its placement (the
2-d packed weight, placed whole, and the colwise_next one, read from the file). Exits 0
when every check passed in every rank.
"""
import argparse
import json
import math
import os
import struct
import sys
import warnings

from python_check import end_rank

QWEN_PLAN = {
    "model.embed_tokens": "embedding_rowwise",
    "model.layers.*.self_attn.q_proj": "colwise",
    "model.layers.*.self_attn.k_proj": "colwise",
    "model.layers.*.self_attn.v_proj": "colwise",
    "model.layers.*.self_attn.o_proj": "rowwise",
    "model.layers.*.mlp.gate_proj": "colwise",
    "model.layers.*.mlp.up_proj": "colwise",
    "model.layers.*.mlp.down_proj": "rowwise",
    "lm_head": "colwise_gather_output",
}

ODD_PLAN = {
    "model.embed_tokens": "embedding_rowwise",
    "model.layers.*.self_attn.q_proj": "colwise",
    "model.layers.*.self_attn.k_proj": "colwise_next",
    "model.layers.*.self_attn.v_proj": "colwise",
    "model.layers.*.self_attn.o_proj": "rowwise",
    "model.layers.*.mlp.experts.gate_up_proj": "packed_colwise",
    "model.layers.*.mlp.experts.down_proj": "packed_rowwise",
    "model.layers.*.mlp.fused": "packed_colwise",
    "model.layers.*.mlp.experts.w": "grouped_gemm",
    "lm_head": "colwise_gather_output",
}

# name: (dtype, shape, what this rank keeps: None whole, (dim, blocks) a slice by the rule)
ODD = {
    "model.embed_tokens.weight": ("F32", [11, 6], (0, 1)),
    "model.layers.0.self_attn.q_proj.weight": ("F32", [10, 6], (0, 1)),
    "model.layers.0.self_attn.q_proj.bias": ("F32", [10], (0, 1)),
    "model.layers.0.self_attn.k_proj.weight": ("F16", [10, 6], (0, 1)),
    "model.layers.0.self_attn.v_proj.weight": ("F32", [2, 6], (0, 1)),  # nothing for ranks 2, 3
    "model.layers.0.self_attn.o_proj.weight": ("F16", [6, 10], (1, 1)),
    "model.layers.0.self_attn.o_proj.bias": ("F16", [6], None),
    "model.layers.0.mlp.experts.gate_up_proj": ("BF16", [4, 16, 6], (1, 2)),
    "model.layers.0.mlp.experts.down_proj": ("F32", [4, 6, 8], (2, 2)),
    "model.layers.0.mlp.fused.weight": ("F32", [8, 16], None),
    "model.layers.0.mlp.experts.w": ("I32", [4, 3, 5], (0, 1)),
    "model.norm.weight": ("F32", [6], None),
    "model.scalar": ("F64", [], None),
    "lm_head.weight": ("F32", [11, 6], (0, 1)),
    "extra.unused": ("F32", [3], None),  # no parameter: transformers skips it
}
ODD_WARNED = {"model.layers.0.mlp.fused.weight", "model.layers.0.self_attn.k_proj.weight"}
SIZE = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "F64": 8}


def write_odd(d):
    """ODD as one safetensors file (random bytes), in the reference writer's layout."""
    import random
    rnd = random.Random(5)
    os.makedirs(d, exist_ok=True)
    header, blobs, off = {}, [], 0
    for k in sorted(ODD):
        dt, shape, _ = ODD[k]
        n = math.prod(shape) * SIZE[dt]
        header[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        blobs.append(bytes(rnd.getrandbits(8) for _ in range(n)))
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
        f.flush()
        os.fsync(f.fileno())


def qwen_keep(name, shape):
    """What a rank keeps of a tensor of the Qwen model under QWEN_PLAN (written from the
    plan by hand: colwise and embedding dim 0, rowwise weights the last dim)."""
    mod = name.rsplit(".", 1)[0]
    if mod.endswith(("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")) or mod in (
            "model.embed_tokens", "lm_head"):
        return (0, 1)
    if mod.endswith(("o_proj", "down_proj")) and len(shape) == 2:
        return (1, 1)
    return None


def share(shape, keep, rank, world, esize):
    """Bytes of the rank's slice of a tensor, by the rule: ceil(D / W) per rank, clipped."""
    n = math.prod(shape) * esize
    if keep is None or not shape:
        return n
    dim, blocks = keep
    size = shape[dim] // blocks
    step = -(-size // world)
    start = min(rank * step, size)
    return n // shape[dim] * (min(start + step, size) - start) * blocks


def placed_most(shape, keep, rank, world, esize):
    """The most bytes a rank places for a tensor: its slice, or, for a slice along a later
    dimension that the ranks exchange, its block of whole rows (ceil(R / W) of the R rows
    before that dimension) when that is more."""
    n = share(shape, keep, rank, world, esize)
    if keep is None or not shape or keep[0] % len(shape) == 0 or keep[1] != 1:
        return n
    rows = math.prod(shape[:keep[0] % len(shape)])
    step = -(-rows // world)
    start = min(rank * step, rows)
    return max(n, (min(start + step, rows) - start) * (math.prod(shape) * esize // rows))


def headers(path):
    """{name: (dtype, shape)} of every .safetensors file of a model directory."""
    out = {}
    for f in sorted(os.listdir(path)):
        if f.endswith(".safetensors"):
            with open(os.path.join(path, f), "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                h = json.loads(fh.read(n))
            out.update({k: (v["dtype"], v["shape"]) for k, v in h.items() if k != "__metadata__"})
    return out


def files(path):
    return [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]


def raw(t):
    import torch
    return t.contiguous().reshape(-1).view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)


def compare_loads(load, meta, what, fails):
    """@load() plainly (the stand-in's reader) and under dmafs.enable(): the stand-in's
    reader must not be used then, and every parameter of @meta must come byte-equal (and in
    dtype and shape). Returns (plain, routed, dmafs.last_stats(), the warnings recorded)."""
    import torch
    import transformers.modeling_utils as mu

    import dmafs

    ref = load()
    mu.opened.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with dmafs.enable():
            got = load()
            st = dmafs.last_stats()
    if mu.opened:
        fails.append(f"{what}: the stand-in's reader opened {mu.opened}")
    if set(got) != set(ref) or set(got) != set(meta):
        fails.append(f"{what}: parameters differ: {sorted(set(got) ^ set(ref))}")
    for k in ref:
        a, b = got.get(k), ref[k]
        if a is None or a.dtype != b.dtype or a.shape != b.shape or not torch.equal(raw(a), raw(b)):
            fails.append(f"{what}: {k}: got {None if a is None else (a.dtype, tuple(a.shape))}, "
                         f"the plain load has {(b.dtype, tuple(b.shape))}"
                         f"{'' if a is None or a.shape != b.shape else ' with other bytes'}")
    return ref, got, st, w


def check_model(rank, world, path, plan, keep_of, warned, dtype, fails):
    import torch
    import transformers.modeling_utils as mu

    import dmafs

    tdt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "I32": torch.int32, "F64": torch.float64}
    hdr = headers(path)
    meta = {k: torch.empty(s, dtype=tdt[d], device="meta") for k, (d, s) in hdr.items()
            if not k.startswith("extra.")}
    mesh = mu.DeviceMesh(world, rank)

    def load():
        model = mu.TPModel(meta, plan)
        cfg = mu.LoadStateDictConfig(device_map={"": "cpu"}, dtype=dtype, device_mesh=mesh)
        mu.PreTrainedModel._load_pretrained_model(model, None, files(path), cfg)
        return model

    what = f"rank {rank}/{world} {os.path.basename(path)}{f' as {dtype}' if dtype else ''}"
    _ref, _got, st, w = compare_loads(load, meta, what, fails)
    want = sum(share(s, keep_of(k, s), rank, world, SIZE[d]) for k, (d, s) in hdr.items())
    most = sum(placed_most(s, keep_of(k, s), rank, world, SIZE[d]) for k, (d, s) in hdr.items())
    whole = sum(math.prod(s) * SIZE[d] for d, s in hdr.values())
    # the tensors every rank keeps whole are placed once between the ranks (and broadcast)
    kept = sum(math.prod(s) * SIZE[d] for k, (d, s) in hdr.items() if keep_of(k, s) is None)
    t = torch.tensor([st.bytes if st else -1, want - kept], dtype=torch.int64)
    torch.distributed.all_reduce(t)
    # the rowwise weights' slices are exchanged (blocks of whole rows read, the pieces
    # swapped between the ranks), so a rank may place a little more than its share
    if st is None or int(t[0]) != int(t[1]) + kept or st.bytes > most or st.rank != rank or \
            st.world_size != world or st.exchange_seconds is None or not st.exchanged_tensors:
        fails.append(f"{what}: last_stats {st!r}: the ranks placed {int(t[0])} bytes together, "
                     f"want {int(t[1]) + kept} (their slices, and {kept} bytes kept whole once), "
                     f"this rank at most {most} (its share {want} of {whole}, with blocks of "
                     f"rows for slices exchanged), rank {rank} of {world}, the rowwise slices "
                     "exchanged")
    slow = [str(x.message) for x in w if issubclass(x.category, dmafs.SlowPathWarning)]
    named = {k for k in hdr if any(repr(k) in m for m in slow)}
    if named != warned or len(slow) != len(warned):
        fails.append(f"{what}: SlowPathWarnings for {sorted(named)}, want {sorted(warned)}: {slow}")
    return want, whole


def worker(rank, args, world):
    sys.path.insert(0, args.stub)
    import torch.distributed as dist

    from dmafs import _hf
    dist.init_process_group("gloo", init_method=f"file://{args.work}/store{world}",
                            rank=rank, world_size=world)
    # dmafs is told that colwise_next is colwise; the stand-in asks for the next rank's rows
    _hf._TP_STYLES["colwise_next"] = "col"
    fails = []
    import torch
    for path, plan, keep_of, warned, dtype in (
            (args.qwen, QWEN_PLAN, qwen_keep, set(), None),
            (args.qwen, QWEN_PLAN, qwen_keep, set(), torch.float32),
            (args.odd, ODD_PLAN, lambda k, s: ODD[k][2], ODD_WARNED, None)):
        want, whole = check_model(rank, world, path, plan, keep_of, warned, dtype, fails)
        print(f"  rank {rank}/{world} {os.path.basename(path)}: placed {want} of {whole} bytes",
              flush=True)
    end_rank(fails)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stub", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("qwen")
    ap.add_argument("odd")
    args = ap.parse_args()
    write_odd(args.odd)
    import torch.multiprocessing as mp
    for world in (int(w) for w in args.worlds.split(",")):
        mp.spawn(worker, args=(args, world), nprocs=world, join=True)
        print(f"hf_tp: {world} ranks: every parameter equal to the plain tp load, only slices "
              "placed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
