# SPDX-License-Identifier: MIT
"""hf_moe.py - dmafs.enable() under tensor-parallel and expert-parallel loads of two small
mixture-of-experts checkpoints, with the stand-in of transformers 5.17's DTensor loading
path (tests/hf_stub: core_model_loading.py), in 2 and 4 ranks on gloo (host memory).

Usage: hf_moe.py --stub DIR --work DIR --worlds 2,4 QMOE_DIR MIX_DIR

Both models are written here (on the mount), in two shard files each, with odd sizes so
that the ranks' slices and expert sets are uneven:
  - QMOE, Qwen3-MoE's layout: per-expert mlp.experts.E.{gate,up,down}_proj.weight, merged
    by weight converters into mlp.experts.gate_up_proj [E, 2I, H] and down_proj [E, H, I];
    and mlp.fused.gate_up_proj [E, 2I, H] stored fused (a strided cut: two slices asked);
  - MIX, Mixtral's: block_sparse_moe.experts.E.{w1,w3,w2}.weight, and a renaming of
    block_sparse_moe.gate to mlp.gate.
Under "tp" the merged parameters are cut as transformers' plan does (gate_up_proj strided
in two groups along dimension 1, down_proj along 2; attention colwise/rowwise; lm_head
colwise); under "ep" the experts are split between the ranks along dimension 0 and the rest
is replicated; one QMOE tensor is asked for with a list index, which dmafs cannot place as
a region. Each rank loads each model plainly (the stand-in's reader) and under
dmafs.enable(); every parameter must be equal byte for byte, one SlowPathWarning must come,
for that tensor (placed whole), and none else (dmafs predicted every slice and expert set
transformers took), the stand-in's reader must
not be used, and the bytes dmafs placed in this rank (dmafs.last_stats().bytes) must be at
most what the rank keeps + 2 % (not every expert in every rank). Last, with transformers'
renaming made to fail when dmafs asks, dmafs must say so and the load stay byte-equal (the
tp plan's rules instead). And the stand-in's loop deep-copies a weight converter per merged
key as 5.17's does: under dmafs.enable() only the copy each parameter keeps may be made
(check_copies), unless the loop is not the one dmafs knows, which it must then say. Exits 0
when every check passed in every rank.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import warnings

from python_check import end_rank

SIZE = {"F32": 4, "BF16": 2}


def qmoe_shapes():
    """{name: (dtype, shape)} of the QMOE checkpoint; and the model's parameters."""
    H, I, E, V = 12, 10, 7, 11
    ck, par = {}, {}
    for n, s in (("model.embed_tokens.weight", [V, H]), ("model.norm.weight", [H]),
                 ("lm_head.weight", [V, H]), ("model.listed.weight", [5, H])):
        ck[n] = par[n] = ("F32", s)
    for L in range(2):
        p = f"model.layers.{L}."
        for n, s in (("self_attn.q_proj.weight", [16, H]), ("self_attn.k_proj.weight", [8, H]),
                     ("self_attn.v_proj.weight", [8, H]), ("self_attn.o_proj.weight", [H, 16]),
                     ("self_attn.q_norm.weight", [4]), ("self_attn.k_norm.weight", [4]),
                     ("input_layernorm.weight", [H]), ("post_attention_layernorm.weight", [H]),
                     ("mlp.gate.weight", [E, H])):
            ck[p + n] = par[p + n] = ("F32", s)
        for e in range(E):
            ck[f"{p}mlp.experts.{e}.gate_proj.weight"] = ("BF16", [I, H])
            ck[f"{p}mlp.experts.{e}.up_proj.weight"] = ("BF16", [I, H])
            ck[f"{p}mlp.experts.{e}.down_proj.weight"] = ("BF16", [H, I])
        par[p + "mlp.experts.gate_up_proj"] = ("BF16", [E, 2 * I, H])
        par[p + "mlp.experts.down_proj"] = ("BF16", [E, H, I])
        # stored fused already (as some checkpoints are): cut in two groups under tp
        ck[p + "mlp.fused.gate_up_proj"] = par[p + "mlp.fused.gate_up_proj"] = \
            ("BF16", [E, 2 * I, H])
    return ck, par


def mix_shapes():
    H, I, E, V = 12, 9, 10, 11
    ck, par = {}, {}
    for n, s in (("model.embed_tokens.weight", [V, H]), ("model.norm.weight", [H]),
                 ("lm_head.weight", [V, H])):
        ck[n] = par[n] = ("F32", s)
    for L in range(2):
        p = f"model.layers.{L}."
        for n, s in (("self_attn.q_proj.weight", [16, H]), ("self_attn.k_proj.weight", [8, H]),
                     ("self_attn.v_proj.weight", [8, H]), ("self_attn.o_proj.weight", [H, 16]),
                     ("input_layernorm.weight", [H]), ("post_attention_layernorm.weight", [H])):
            ck[p + n] = par[p + n] = ("F32", s)
        ck[p + "block_sparse_moe.gate.weight"] = ("F32", [E, H])
        par[p + "mlp.gate.weight"] = ("F32", [E, H])
        for e in range(E):
            ck[f"{p}block_sparse_moe.experts.{e}.w1.weight"] = ("BF16", [I, H])
            ck[f"{p}block_sparse_moe.experts.{e}.w3.weight"] = ("BF16", [I, H])
            ck[f"{p}block_sparse_moe.experts.{e}.w2.weight"] = ("BF16", [H, I])
        par[p + "mlp.experts.gate_up_proj"] = ("BF16", [E, 2 * I, H])
        par[p + "mlp.experts.down_proj"] = ("BF16", [E, H, I])
    return ck, par


def mapping(cml, kind):
    """The weight converters transformers 5.17 registers for qwen3_moe / mixtral."""
    if kind == "qmoe":
        return [cml.WeightConverter(["mlp.experts.*.gate_proj.weight", "mlp.experts.*.up_proj.weight"],
                                    "mlp.experts.gate_up_proj",
                                    [cml.MergeModulelist(0), cml.Concatenate(1)]),
                cml.WeightConverter("mlp.experts.*.down_proj.weight", "mlp.experts.down_proj",
                                    [cml.MergeModulelist(0)])]
    return [cml.WeightRenaming(".block_sparse_moe.gate", ".mlp.gate"),
            cml.WeightConverter(["block_sparse_moe.experts.*.w1.weight",
                                 "block_sparse_moe.experts.*.w3.weight"],
                                "mlp.experts.gate_up_proj",
                                [cml.MergeModulelist(0), cml.Concatenate(1)]),
            cml.WeightConverter(["block_sparse_moe.experts.*.w2.weight"], "mlp.experts.down_proj",
                                [cml.MergeModulelist(0)])]


def placements(cml, name, mode):
    """The parameter's placements, as transformers' tp and ep plans give them; None for a
    plain (not distributed) parameter."""
    mod = name.rsplit(".", 1)[0] if name.endswith(".weight") else name
    if mod == "model.listed":
        return [cml.ListShard(0)]  # asked with a list index: placed whole, warned
    if mod.endswith(("experts.gate_up_proj", "fused.gate_up_proj")):
        return [cml.StridedShard(1, 2)] if mode == "tp" else [cml.Shard(0)]
    if mod.endswith("experts.down_proj"):
        return [cml.Shard(2)] if mode == "tp" else [cml.Shard(0)]
    if mode == "tp":
        if mod.endswith(("q_proj", "k_proj", "v_proj")) or mod == "lm_head":
            return [cml.Shard(0)]
        if mod.endswith("o_proj"):
            return [cml.Shard(1)]
    if mod.endswith(("mlp.gate", "embed_tokens", "q_proj")):
        return [cml.Replicate()]  # distributed, every rank the whole
    return None


def write(d, ck, seed):
    """The checkpoint as two safetensors files, random bytes, the keys alternating."""
    rnd = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    names = sorted(ck)
    for i in range(2):
        header, blobs, off = {}, [], 0
        for k in names[i::2]:
            dt, shape = ck[k]
            n = math.prod(shape) * SIZE[dt]
            header[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
            blobs.append(rnd.randbytes(n))
            off += n
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(d, f"model-{i + 1:05d}-of-00002.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
            f.flush()
            os.fsync(f.fileno())


def setup(rank, world, path, kind, mode, files=None):
    """(the model's empty parameters, a call that loads the checkpoint at @path (or the
    shard @files) into a fresh model with the stand-in) for rank @rank of @world under
    @mode."""
    import torch
    import transformers.core_model_loading as cml
    import transformers.modeling_utils as mu

    tdt = {"F32": torch.float32, "BF16": torch.bfloat16}
    _ck, par = qmoe_shapes() if kind == "qmoe" else mix_shapes()
    mesh = mu.DeviceMesh(world, rank)
    meta = {}
    for k, (d, s) in par.items():
        pl = placements(cml, k, mode)
        meta[k] = torch.empty(s, dtype=tdt[d], device="meta") if pl is None else \
            cml.DTensor(s, tdt[d], mesh, pl)
    files = files or [os.path.join(path, f) for f in sorted(os.listdir(path))
                      if f.endswith(".safetensors")]

    def load():
        model = mu.TPModel(meta, {})
        cfg = mu.LoadStateDictConfig(device_map={"": "cpu"}, device_mesh=mesh,
                                     weight_mapping=mapping(cml, kind))
        mu.PreTrainedModel._load_pretrained_model(model, None, files, cfg)
        return model
    return meta, load


def check(rank, world, path, kind, mode, fails):
    import dmafs
    from hf_tp import compare_loads

    _ck, par = qmoe_shapes() if kind == "qmoe" else mix_shapes()
    meta, load = setup(rank, world, path, kind, mode)
    what = f"rank {rank}/{world} {kind} {mode}"
    ref, got, st, w = compare_loads(load, meta, what, fails)
    kept = sum(t.numel() * t.element_size() for t in ref.values())
    whole = sum(math.prod(s) * SIZE[d] for d, s in par.values())
    slow = [str(x.message) for x in w if issubclass(x.category, dmafs.SlowPathWarning)]
    # only the tensor asked for with a list index (QMOE's model.listed) is placed whole and
    # warned about
    want = 1 if kind == "qmoe" else 0
    if len(slow) != want or (want and "'model.listed.weight'" not in slow[0]):
        fails.append(f"{what}: SlowPathWarnings {slow}, want {want} naming model.listed.weight")
    if st is None or st.plan_seconds is None:
        fails.append(f"{what}: last_stats() has no plan_seconds (the prediction's time): {st!r}")
    if kind == "qmoe":  # the listed tensor is placed whole, its rows not kept
        kept += (5 * 12 - got["model.listed.weight"].numel()) * 4
    if st is None or st.bytes > kept * 1.02:
        fails.append(f"{what}: dmafs placed {st.bytes if st else None} bytes in this rank, it "
                     f"keeps {kept} (+2 % allowed) of the model's {whole}")
    return kept, whole, st.bytes if st else -1


def check_broken(rank, world, path, fails):
    """A transformers whose renaming fails when dmafs asks: dmafs says so (one
    SlowPathWarning), falls back to the tp plan's rules (here: the experts placed whole),
    and every parameter is still byte-equal to the plain load."""
    import transformers.core_model_loading as cml

    import dmafs
    from dmafs import _hf
    from hf_tp import compare_loads

    meta, load = setup(rank, world, path, "qmoe", "tp")
    real = cml.rename_source_key

    def broken(*a, **kw):
        if any(f.f_code is _hf._ask_transformers.__code__ for f in _frames()):
            raise RuntimeError("a renaming of another shape")
        return real(*a, **kw)
    what = f"rank {rank}/{world} qmoe tp, renaming broken"
    cml.rename_source_key = broken
    try:
        _ref, _got, _st, w = compare_loads(load, meta, what, fails)
    finally:
        cml.rename_source_key = real
    slow = [str(x.message) for x in w if issubclass(x.category, dmafs.SlowPathWarning)]
    if not any("could not ask transformers" in m for m in slow):
        fails.append(f"{what}: no warning that dmafs could not ask transformers: {slow[:3]}")


def check_copies(rank, world, path, kind, mode, fails, other_loop=False):
    """The stand-in's loop deep-copies a converter for every key it merges and keeps the
    first copy per parameter (as transformers 5.17 does). Under dmafs.enable() only those
    first copies may be made, last_stats().copies_skipped counting the rest, with every
    parameter still byte-equal to the plain load (check() compares). With @other_loop (a
    loop whose source is not the one dmafs knows) nothing is skipped and dmafs says so once."""
    import transformers.core_model_loading as cml
    import transformers.modeling_utils as mu

    import dmafs
    from hf_tp import compare_loads

    meta, load = setup(rank, world, path, kind, mode)
    ck, _par = qmoe_shapes() if kind == "qmoe" else mix_shapes()
    conv = [t for t in mapping(cml, kind) if isinstance(t, cml.WeightConverter)]
    ren = [t for t in mapping(cml, kind) if isinstance(t, cml.WeightRenaming)]
    merged = [n for n, p in (cml.rename_source_key(k, ren, conv, "model", meta) for k in ck)
              if p is not None and n in meta]
    what = f"rank {rank}/{world} {kind} {mode}{', a loop of another shape' if other_loop else ''}"
    real = mu.convert_and_load_state_dict_in_model

    def other(*a, **kw):
        return real(*a, **kw)
    if other_loop:
        cml.convert_and_load_state_dict_in_model = mu.convert_and_load_state_dict_in_model = other
    try:
        cml.COPIES[0] = 0
        _ref, _got, st, w = compare_loads(load, meta, what, fails)
        made = cml.COPIES[0]
    finally:
        cml.convert_and_load_state_dict_in_model = mu.convert_and_load_state_dict_in_model = real
    plain = len(merged)  # the plain load copies once per merged key
    want = plain if other_loop else len(set(merged))
    asking = len(mapping(cml, kind))  # dmafs's own copy of the mapping, to ask transformers
    skipped = getattr(st, "copies_skipped", None)
    if made - plain != want + asking or skipped != plain - want or not merged:
        fails.append(f"{what}: {made - plain} copies of weight transforms under dmafs.enable() "
                     f"(want {want + asking}: {'one per merged key' if other_loop else 'one per merged parameter'} "
                     f"and {asking} to ask transformers), copies_skipped {skipped} (want "
                     f"{plain - want}), {plain} merged keys")
    slow = [str(x.message) for x in w if issubclass(x.category, dmafs.SlowPathWarning)
            and "deep-copies a weight converter" in str(x.message)]
    if len(slow) != (1 if other_loop else 0):
        fails.append(f"{what}: warnings about the converter copies: {slow}")
    # every tensor placed by dmafs: the loop needs no thread pool (unless it is another loop)
    if getattr(st, "loop_pool_off", None) is other_loop or cml.POOLS[-2:] != [True, other_loop]:
        fails.append(f"{what}: loop_pool_off {getattr(st, 'loop_pool_off', None)}, thread pools "
                     f"of the plain and the dmafs load {cml.POOLS[-2:]}, want [True, {other_loop}]")


def check_mixed(rank, world, path, work, fails):
    """One shard of the model off dmafs: its tensors are read by the stand-in's reader, so the
    loop keeps its thread pool (converter copies are skipped all the same), and every
    parameter equals the plain load's."""
    import shutil

    import torch
    import transformers.core_model_loading as cml

    import dmafs
    from hf_tp import raw

    shards = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    off = os.path.join(work, f"off-{world}-{rank}")
    os.makedirs(off, exist_ok=True)
    shutil.copy(os.path.join(path, shards[1]), off)
    files = [os.path.join(path, shards[0]), os.path.join(off, shards[1])]
    meta, load = setup(rank, world, path, "qmoe", "tp", files)
    what = f"rank {rank}/{world} qmoe tp, {shards[1]} off dmafs"
    ref = load()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with dmafs.enable():
            got = load()
            st = dmafs.last_stats()
    for k in ref:
        if k not in got or not torch.equal(raw(got[k]), raw(ref[k])):
            fails.append(f"{what}: {k} differs from the plain load")
    if not any(off in str(x.message) for x in w):
        fails.append(f"{what}: no warning names the shard off dmafs")
    if getattr(st, "loop_pool_off", None) is not False or cml.POOLS[-1] is not True or \
            not getattr(st, "copies_skipped", 0):
        fails.append(f"{what}: loop_pool_off {getattr(st, 'loop_pool_off', None)} (want False), "
                     f"pool used {cml.POOLS[-1]}, copies_skipped {getattr(st, 'copies_skipped', None)}")


def _frames():
    f = sys._getframe(1)
    while f is not None:
        yield f
        f = f.f_back


def worker(rank, args, world):
    sys.path.insert(0, args.stub)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{args.work}/moe-store{world}",
                            rank=rank, world_size=world)
    fails = []
    for path, kind in ((args.qmoe, "qmoe"), (args.mix, "mix")):
        for mode in ("tp", "ep"):
            kept, whole, placed = check(rank, world, path, kind, mode, fails)
            print(f"  rank {rank}/{world} {kind} {mode}: placed {placed}, keeps {kept} of "
                  f"{whole} bytes", flush=True)
    check_broken(rank, world, args.qmoe, fails)
    check_copies(rank, world, args.mix, "mix", "ep", fails)
    check_copies(rank, world, args.qmoe, "qmoe", "tp", fails)
    check_copies(rank, world, args.qmoe, "qmoe", "tp", fails, other_loop=True)
    check_mixed(rank, world, args.qmoe, args.work, fails)
    end_rank(fails)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stub", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("qmoe")
    ap.add_argument("mix")
    args = ap.parse_args()
    write(args.qmoe, qmoe_shapes()[0], 1)
    write(args.mix, mix_shapes()[0], 2)
    import torch.multiprocessing as mp
    for world in (int(w) for w in args.worlds.split(",")):
        mp.spawn(worker, args=(args, world), nprocs=world, join=True)
        print(f"hf_moe: {world} ranks: every parameter equal to the plain load under tp and "
              "ep, each rank placed no more than it keeps", flush=True)


if __name__ == "__main__":
    sys.exit(main())
