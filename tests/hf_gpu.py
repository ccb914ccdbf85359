# SPDX-License-Identifier: MIT
"""hf_gpu.py DMAFS_MODEL... -- OFF_DMAFS_MODEL - dmafs.enable() with the real transformers:
AutoModelForCausalLM.from_pretrained of each model on dmafs, with device_map "cuda:0" and
"cpu", gives parameters and buffers bit-identical to the plain from_pretrained, placed by
dmafs (stats: every file, path not posix, on the device asked for); a model off dmafs
loads as before with a SlowPathWarning. Prints the times (information, not checked)."""
import gc
import sys
import time
import warnings

import torch
from transformers import AutoModelForCausalLM

import dmafs

args = sys.argv[1:]
cut = args.index("--")
on, off = args[:cut], args[cut + 1:]


def fail(msg):
    print(f"[hf_gpu.py] FAIL: {msg}", flush=True)
    sys.exit(1)


def bits(t):
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)


def state(m):
    return {k: v for k, v in m.state_dict().items()}


def same(a, b, what):
    if a.keys() != b.keys():
        fail(f"{what}: names differ: only routed {sorted(set(a) - set(b))[:3]}, only plain {sorted(set(b) - set(a))[:3]}")
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or x.device != y.device:
            fail(f"{what}: {k}: {x.dtype} {tuple(x.shape)} on {x.device} vs {y.dtype} {tuple(y.shape)} on {y.device}")
        if not torch.equal(bits(x), bits(y)):
            fail(f"{what}: {k}: bytes differ")


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return r, time.perf_counter() - t0


def from_pretrained(path, dm):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map=dm)


def both(path, dm):
    """(plain state, routed state, plain s, routed s, stats): the plain from_pretrained,
    then under dmafs.enable() with any SlowPathWarning an error; the models are freed."""
    plain, tp = timed(lambda: from_pretrained(path, dm))
    ref = state(plain)
    del plain
    with warnings.catch_warnings():
        warnings.simplefilter("error", dmafs.SlowPathWarning)
        with dmafs.enable():
            routed, tr = timed(lambda: from_pretrained(path, dm))
    return ref, state(routed), tp, tr, dmafs.last_stats()


torch.empty(1, device="cuda:0")
for path in on:
    for dm in ("cuda:0", "cpu"):
        ref, got, tp, tr, st = both(path, dm)
        if st is None or st.path == "posix" or not st.target.startswith(dm.split(":")[0]):
            fail(f"{path} ({dm}): not placed by dmafs onto {dm}: {st!r}")
        same(got, ref, f"{path} ({dm})")
        print(f"[hf_gpu.py] {path} device_map={dm}: {len(ref)} tensors bit-identical to the plain "
              f"from_pretrained; plain {tp:.3f} s, routed {tr:.3f} s; {st!r}", flush=True)
        del got, ref
        gc.collect()
        torch.cuda.empty_cache()

# A device_map over two GPUs: each tensor placed straight onto its module's GPU.
if torch.cuda.device_count() >= 2:
    import json
    import os
    path = on[0]
    n = json.load(open(os.path.join(path, "config.json")))["num_hidden_layers"]
    dm = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.norm": 1, "lm_head": 1}
    dm.update({f"model.layers.{i}": 0 if i < n // 2 else 1 for i in range(n)})
    ref, got, tp, tr, st = both(path, dm)
    if st is None or st.path == "posix" or "cuda:0" not in st.target or "cuda:1" not in st.target:
        fail(f"{path} (device_map over 2 GPUs): not placed by dmafs onto both GPUs: {st!r}")
    same(got, ref, f"{path} (device_map over 2 GPUs)")
    on1 = sum(1 for v in ref.values() if v.device == torch.device("cuda", 1))
    print(f"[hf_gpu.py] {path} device_map over cuda:0 and cuda:1 ({on1} of {len(ref)} tensors on "
          f"cuda:1): bit-identical; plain {tp:.3f} s, routed {tr:.3f} s; {st!r}", flush=True)
    del got, ref
    gc.collect()
    torch.cuda.empty_cache()
else:
    print("[hf_gpu.py] one GPU: the device_map over 2 GPUs is not checked here", flush=True)

for path in off:
    ref = state(from_pretrained(path, "cuda:0"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with dmafs.enable():
            got = state(from_pretrained(path, "cuda:0"))
    if not any(issubclass(x.category, dmafs.SlowPathWarning) for x in w):
        fail(f"{path} (off dmafs): no SlowPathWarning")
    same(got, ref, f"{path} (off dmafs)")
    print(f"[hf_gpu.py] {path}: off dmafs, loaded as before with a SlowPathWarning", flush=True)
print("[hf_gpu.py] PASS")
