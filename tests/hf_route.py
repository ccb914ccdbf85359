# SPDX-License-Identifier: MIT
"""hf_route.py STUBDIR DMAFS_MODEL... -- OFF_DMAFS_MODEL - dmafs.enable() against a stand-in
of transformers 5's loader (tests/hf_stub): models on dmafs are placed by dmafs (one
placement for all shards, path "host"), with tensors equal to the plain loader's; a model
off dmafs loads as before with a SlowPathWarning; disable() puts everything back."""
import glob
import json
import os
import sys
import warnings

stub = sys.argv[1]
sys.path.insert(0, stub)
args = sys.argv[2:]
cut = args.index("--")
on, off = args[:cut], args[cut + 1:]

import torch  # noqa: E402
import transformers.modeling_utils as mu  # noqa: E402  (the stand-in)

import dmafs  # noqa: E402


def fail(msg):
    print(f"[hf_route.py] FAIL: {msg}")
    sys.exit(1)


def shards(path):
    idx = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(idx):
        wm = json.load(open(idx))["weight_map"]
        return [os.path.join(path, f) for f in sorted(set(wm.values()))]
    return sorted(glob.glob(os.path.join(path, "*.safetensors")))


def load(path, device_map=None):
    sd = {}
    mu.PreTrainedModel._load_pretrained_model(sd, None, shards(path),
                                              mu.LoadStateDictConfig(device_map=device_map))
    return sd


def same(a, b, what):
    if a.keys() != b.keys():
        fail(f"{what}: names differ ({len(a)} vs {len(b)})")
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x.view(torch.uint8) if x.dim() else x, y.view(torch.uint8) if y.dim() else y):
            fail(f"{what}: tensor {k} differs ({x.dtype} {tuple(x.shape)} vs {y.dtype} {tuple(y.shape)})")


orig_open, orig_load = mu.safe_open, mu.PreTrainedModel.__dict__["_load_pretrained_model"]
for path in on:
    ref = load(path)  # plain: the stand-in's own reader
    mu.opened.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", dmafs.SlowPathWarning)
        with dmafs.enable():
            if mu.safe_open is orig_open:
                fail("enable() did not replace modeling_utils.safe_open")
            got = load(path)
            st = dmafs.last_stats()
    if mu.opened:
        fail(f"{path}: the plain reader still opened {mu.opened}")
    if st is None or st.path != "host" or st.files != len(shards(path)):
        fail(f"{path}: expected one host placement of {len(shards(path))} files, stats {st}")
    same(got, ref, path)
    if mu.safe_open is not orig_open or mu.PreTrainedModel.__dict__["_load_pretrained_model"] is not orig_load:
        fail("leaving the with block did not put transformers back")
    print(f"[hf_route.py] {path}: {len(got)} tensors placed by dmafs ({st.files} files, path {st.path}), equal to the plain load")

for path in off:
    ref = load(path)
    mu.opened.clear()
    dmafs.enable()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = load(path)
    finally:
        dmafs.disable()
    if not any(issubclass(x.category, dmafs.SlowPathWarning) and "not on a dmafs mount" in str(x.message) for x in w):
        fail(f"{path} (off dmafs): no SlowPathWarning")
    if len(mu.opened) != len(shards(path)):
        fail(f"{path} (off dmafs): the plain reader should have read it, opened {mu.opened}")
    same(got, ref, path)
    print(f"[hf_route.py] {path}: off dmafs, read as before with a SlowPathWarning")

# A device_map over several devices: the grouping by module prefix, and the per-device
# placement in layout runs (here every device is host memory: only the GPU machine has
# several; tests/hf_gpu.py loads with a map over 2 GPUs).
from dmafs import _hf, _torch as dt  # noqa: E402
from dmafs import _lib  # noqa: E402
cpu = torch.device("cpu")
if _hf._device_of(mu.LoadStateDictConfig(device_map={"model.layers.0": "cpu", "": "disk"})) != cpu:
    fail("a device_map of cpu and disk is not one host placement")
got, stray = _hf._tensor_devices(["model.layers.1.a", "model.layers.10.b", "lm_head.weight"],
                                 {"model.layers.10": "B", "model.layers.1": "A"})
if got != {"model.layers.1.a": "A", "model.layers.10.b": "B", "lm_head.weight": cpu} or stray != ["lm_head.weight"]:
    fail(f"device_map prefixes matched wrongly: {got}, stray {stray}")
path = on[0]
ref = load(path)
with _lib.Model(path) as model:
    infos = sorted(model.tensors, key=lambda t: t.buffer_offset)
    # every other tensor: one device's share of a model split by layers
    sub = infos[::2]
    runs, size, at = dt._runs(sub)
    if any(at[t.name] % 4096 != t.buffer_offset % 4096 for t in sub):
        fail("a tensor's offset in its device buffer is not congruent to its layout offset mod 4096")
    if not 1 < len(runs) < len(sub) or size >= model.nbytes:
        fail(f"{len(runs)} runs and {size} bytes for {len(sub)} of {len(infos)} tensors (layout "
             f"{model.nbytes} bytes)")
    base, res, *_ = dt.place_base(model, cpu, _lib.TARGET_HOST, None, 0, part=runs, size=size)
    plan = [p for p in dt._plan(model, torch) if p[0].name in at]
    same(dt._views(base, plan, torch, at), {t.name: ref[t.name] for t in sub}, f"{path}: runs")
    got = dt.place_spread(model, {t.name: "cpu" for t in infos}, 0, 1)
    st = dmafs.last_stats()
same(got, ref, f"{path}: place_spread")
if st.path != "host" or not sum(t.nbytes for t in infos) <= st.bytes <= sum(os.path.getsize(f) for f in shards(path)):
    fail(f"{path}: place_spread: {st!r}")
print(f"[hf_route.py] {path}: device_map prefixes; {len(sub)} tensors placed compactly in "
      f"{len(runs)} runs ({size} of {model.nbytes} bytes); place_spread equal")

if dmafs.on_dmafs("/") or not all(dmafs.on_dmafs(p) for p in on):
    fail("on_dmafs() answers wrongly")
from dmafs._hf import _unescape  # noqa: E402
if _unescape(r"/m/a\040b\011c\012d\134e") != "/m/a b\tc\nd\\e":
    fail("mountinfo escapes (space, tab, newline, backslash) are not undone")
print("[hf_route.py] PASS")
