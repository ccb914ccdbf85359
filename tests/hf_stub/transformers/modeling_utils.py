# SPDX-License-Identifier: MIT
"""Stand-in for transformers.modeling_utils: safe_open as a module global (as
`from safetensors import safe_open` makes it), and PreTrainedModel._load_pretrained_model
as a staticmethod that opens every shard with safe_open(file, framework="pt",
device="cpu", backend="mmap"), takes get_slice() of every key, then materializes each
slice with slice[...] and .to(device) (transformers 5.17's _load_pretrained_model and
core_model_loading._materialize_copy). With load_config.device_mesh (a tensor-parallel
load, tp_plan="auto"), the model is a TPModel and each tensor goes through _load_tp: the
per-rank sharding of tensor_parallel.py (the style objects of the 5.x line before DTensor
parameters); when the model's parameters are DTensors (core_model_loading.py, the 5.17
path, with weight converters), through convert_and_load_state_dict_in_model, as is a load
without a mesh whose load_config has a weight mapping (a model with converters). safe_open
here is a small reader of the format."""
import json
import os
import struct

import torch

from .core_model_loading import convert_and_load_state_dict_in_model, is_dtensor

_DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
       "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
       "U8": torch.uint8, "BOOL": torch.bool}
opened = []  # files the reader below opened (what the test checks routing with)


class _Slice:
    def __init__(self, t, dt):
        self._t, self._dt = t, dt

    def get_shape(self):
        return list(self._t.shape)

    def get_dtype(self):
        return self._dt

    def __getitem__(self, idx):
        return self._t[idx]


class _Reader:
    def __init__(self, filename):
        opened.append(os.fspath(filename))
        with open(filename, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            self._h = json.loads(f.read(n))
            self._data = f.read()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return sorted(k for k in self._h if k != "__metadata__")

    def metadata(self):
        return self._h.get("__metadata__")

    def get_slice(self, k):
        e = self._h[k]
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(self._data[b:end]) or bytearray(1), dtype=torch.uint8)[:end - b]
        t = t.view(_DT[e["dtype"]]).reshape(e["shape"])
        return _Slice(t, e["dtype"])

    def get_tensor(self, k):
        return self.get_slice(k)[...]


def safe_open(filename, framework="pt", device="cpu", backend=None):
    return _Reader(filename)


class LoadStateDictConfig:
    def __init__(self, device_map=None, dtype=None, device_mesh=None, weight_mapping=None):
        self.device_map, self.dtype, self.device_mesh = device_map, dtype, device_mesh
        self.weight_mapping, self.hf_quantizer = weight_mapping, None


class DeviceMesh:
    """The 1-d tp mesh of a tensor-parallel load (torch's DeviceMesh: size(), get_local_rank())."""

    def __init__(self, world, rank, device_type="cpu"):
        self._world, self._rank, self.device_type = world, rank, device_type

    def size(self):
        return self._world

    def get_local_rank(self):
        return self._rank


class TPModel(dict):
    """The model of a tensor-parallel load: its parameters' empty (meta) tensors by name
    (state_dict()), base_model_prefix and tp_plan ({glob of module names: style}); the loaded
    tensors land in the dict itself."""

    def __init__(self, meta, tp_plan, base_model_prefix="model"):
        super().__init__()
        self._meta, self.tp_plan, self.base_model_prefix = meta, tp_plan, base_model_prefix

    def state_dict(self):
        return dict(self._meta)


def _dot_natural_key(s):
    return [(0, int(p)) if p.isdigit() else (1, p) for p in s.split(".")]


def _load_tp(model, merged, load_config):
    """transformers 5's convert_and_load_state_dict_in_model under a tp device mesh (no
    weight converters): checkpoint keys in natural order, the base model prefix dropped or
    added, the plan's globs as one alternation ('*' -> '.*') searched in the name; a match
    is materialized by its style's shard_tensor(slice, tensor_idx=, device=, dtype=), the
    rest by slice[...] and .to(device, dtype); 4 worker threads."""
    import re
    from concurrent.futures import ThreadPoolExecutor

    from .tensor_parallel import ALL_PARALLEL_STYLES

    mesh, device = load_config.device_mesh, load_config.device_map[""]
    meta, prefix, plan = model.state_dict(), model.base_model_prefix, model.tp_plan
    keys = list(plan)
    alt = re.compile("|".join(f"(?P<g{i}>{k.replace('*', '.*')})" for i, k in enumerate(keys)))
    jobs = {}
    with ThreadPoolExecutor(max_workers=4) as pool:
        for k, s in sorted(merged.items(), key=lambda kv: _dot_natural_key(kv[0])):
            name = k
            if name.startswith(prefix) and re.sub(f"^{prefix}.", "", name, count=1) in meta:
                name = re.sub(f"^{prefix}.", "", name, count=1)
            elif f"{prefix}.{name}" in meta:
                name = f"{prefix}.{name}"
            if name not in meta:
                continue  # unexpected key
            m = alt.search(name) if keys else None
            if m is not None:
                style = ALL_PARALLEL_STYLES[plan[keys[int(m.lastgroup[1:])]]]
                layer = style(mesh.size(), mesh.get_local_rank(), meta[name].clone())
                jobs[name] = pool.submit(layer.shard_tensor, s, tensor_idx=0, device=device,
                                         dtype=load_config.dtype)
            else:
                jobs[name] = pool.submit(
                    lambda s=s: s[...].to(device=device, dtype=load_config.dtype)
                    if load_config.dtype else s[...].to(device=device))
        for name, f in jobs.items():
            model[name] = f.result()
    return {"loaded": len(model)}, {}


class PreTrainedModel:
    @staticmethod
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, expected_keys=None):
        merged, pointers = {}, set()
        for file in checkpoint_files:
            fp = safe_open(file, framework="pt", device="cpu", backend="mmap")
            pointers.add(fp)
            for k in fp.keys():
                merged[k] = fp.get_slice(k)  # don't materialize yet
        if load_config.device_mesh is not None:
            try:
                if any(is_dtensor(v) for v in model.state_dict().values()):
                    return convert_and_load_state_dict_in_model(model, merged, load_config)
                return _load_tp(model, merged, load_config)
            finally:
                for p in pointers:
                    p.__exit__(None, None, None)
        if load_config.weight_mapping and hasattr(model, "state_dict"):  # 5.17: converters
            try:
                return convert_and_load_state_dict_in_model(model, merged, load_config)
            finally:
                for p in pointers:
                    p.__exit__(None, None, None)
        dev = "cpu"
        if load_config.device_map:
            dev = list(load_config.device_map.values())[0]
        for k, s in merged.items():
            t = s[...]
            model[k] = t.to(device=dev, dtype=load_config.dtype) if load_config.dtype else t.to(device=dev)
        for p in pointers:
            p.__exit__(None, None, None)
        return {"loaded": len(model)}, {}
