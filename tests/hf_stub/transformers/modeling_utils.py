# SPDX-License-Identifier: MIT
"""Stand-in for transformers.modeling_utils: safe_open as a module global (as
`from safetensors import safe_open` makes it), and PreTrainedModel._load_pretrained_model
as a staticmethod that opens every shard with safe_open(file, framework="pt",
device="cpu", backend="mmap"), takes get_slice() of every key, then materializes each
slice with slice[...] and .to(device) (transformers 5.17's _load_pretrained_model and
core_model_loading._materialize_copy). safe_open here is a small reader of the format."""
import json
import os
import struct

import torch

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
    def __init__(self, device_map=None, dtype=None):
        self.device_map, self.dtype = device_map, dtype


class PreTrainedModel:
    @staticmethod
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, expected_keys=None):
        merged, pointers = {}, set()
        for file in checkpoint_files:
            fp = safe_open(file, framework="pt", device="cpu", backend="mmap")
            pointers.add(fp)
            for k in fp.keys():
                merged[k] = fp.get_slice(k)  # don't materialize yet
        dev = "cpu"
        if load_config.device_map:
            dev = list(load_config.device_map.values())[0]
        for k, s in merged.items():
            t = s[...]
            model[k] = t.to(device=dev, dtype=load_config.dtype) if load_config.dtype else t.to(device=dev)
        for p in pointers:
            p.__exit__(None, None, None)
        return {"loaded": len(model)}, {}
