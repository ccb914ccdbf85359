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

if dmafs.on_dmafs("/") or not all(dmafs.on_dmafs(p) for p in on):
    fail("on_dmafs() answers wrongly")
from dmafs._hf import _unescape  # noqa: E402
if _unescape(r"/m/a\040b\011c\012d\134e") != "/m/a b\tc\nd\\e":
    fail("mountinfo escapes (space, tab, newline, backslash) are not undone")
print("[hf_route.py] PASS")
