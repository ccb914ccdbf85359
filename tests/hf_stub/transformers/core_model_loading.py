# SPDX-License-Identifier: MIT
"""Stand-in for transformers.core_model_loading (transformers 5.17's DTensor loading path),
written for the tests from its behaviour, for a torch without DTensor:

  - DTensor: an empty parameter of a tensor-parallel model (shape, dtype, device_mesh,
    placements); is_dtensor() tells one.
  - Shard(dim), StridedShard(dim, split_factor), Replicate(): its placements on the 1-d
    mesh; only Shard and StridedShard have .dim. ListShard(dim), for the tests only: the
    rank's rows asked for with a list index.
  - DtensorShardOperation(param).shard_tensor(slice, tensor_idx=, device=, dtype=): what a
    rank takes of a checkpoint tensor, asked of the safetensors slice object with basic
    indices. tensor_idx None: every dimension a Shard cuts, its contiguous chunk (chunk =
    ceil(size / world), rank r from r * chunk, clipped); a StridedShard cuts each of its
    split_factor equal groups so, one slice call per group, concatenated. tensor_idx given
    (one expert of a tensor MergeModulelist stacks): None, reading nothing, when a Shard of
    dimension 0 gives the expert to another rank; else the parameter's dimension d > 0 cut
    as a contiguous chunk of the source's dimension d - 1 (a StridedShard too).
  - WeightRenaming / WeightConverter(source_patterns, target_patterns, operations) with
    MergeModulelist(dim) (stack one source pattern's tensors, in key order) and
    Concatenate(dim) (join the source patterns' stacks); a source pattern's '*.' matches
    any run of characters before a dot; the matched text is replaced by the first target.
  - rename_source_key(key, renamings, converters, base_model_prefix, meta): the renamings
    in turn, the first converter that matches, then the base model prefix dropped or added
    when that names a parameter; returns (name, the converter's source pattern or None).
  - dot_natural_key; convert_and_load_state_dict_in_model(model, state_dict, load_config):
    keys in natural order, renamed; a key naming no parameter is skipped; each tensor
    materialized in a pool of 4 threads by the parameter's DtensorShardOperation (tensor_idx:
    the count of tensors collected before it for the same parameter and source pattern,
    when the converter merges a module list) or slice[...]; then the converters' operations.
    As in 5.17, each key a converter renames gets a deep copy of the converter, of which the
    parameter keeps the first (param_name_to_load.setdefault); COPIES counts the copies.
    HF_DEACTIVATE_ASYNC_LOAD (is_env_variable_true) makes it read the tensors without the
    pool, when the parameters are put together; POOLS records which way each call went.
"""
import contextlib
import copy
import functools
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy

import torch

COPIES = [0]  # deep copies of weight transforms made (what the tests count)
POOLS = []  # per call of the loop: whether it read the tensors in its thread pool


def is_env_variable_true(name):
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")


class Shard:
    def __init__(self, dim):
        self.dim = dim


class StridedShard:
    def __init__(self, dim, split_factor):
        self.dim, self.split_factor = dim, split_factor


class Replicate:
    pass


class ListShard:
    """Test-only placement: the rank's rows of dimension @dim picked by a list index (a
    request dmafs cannot predict as a region: it places the tensor whole and warns)."""

    def __init__(self, dim):
        self.dim = dim


class DTensor:
    """An empty parameter of a tensor-parallel model."""

    def __init__(self, shape, dtype, device_mesh, placements):
        self.shape, self.dtype = torch.Size(shape), dtype
        self.device_mesh, self.placements = device_mesh, tuple(placements)
        self.ndim = len(self.shape)

    def dim(self):
        return self.ndim


def is_dtensor(t):
    return isinstance(t, DTensor)


def _chunk(size, rank, world):
    step = -(-size // world)
    start = min(rank * step, size)
    return start, min(start + step, size)


class DtensorShardOperation:
    def __init__(self, param):
        self.mesh, self.placements, self.ndim = param.device_mesh, param.placements, param.ndim
        self.rank, self.world = self.mesh.get_local_rank(), self.mesh.size()
        self.own0 = (0, param.shape[0]) if self.ndim else (0, 0)
        for p in self.placements:
            if hasattr(p, "dim") and p.dim % self.ndim == 0:
                self.own0 = _chunk(param.shape[0], self.rank, self.world)

    def shard_tensor(self, source, tensor_idx=None, device=None, dtype=None):
        shape = list(source.shape) if isinstance(source, torch.Tensor) else source.get_shape()
        cuts = [p for p in self.placements if hasattr(p, "dim")]
        if tensor_idx is not None:
            if any(p.dim % self.ndim == 0 for p in cuts) and \
                    not self.own0[0] <= tensor_idx < self.own0[1]:
                return None
            index = [slice(None)] * len(shape)
            for p in cuts:
                d = p.dim % self.ndim
                if d > 0:
                    index[d - 1] = slice(*_chunk(shape[d - 1], self.rank, self.world))
            return self._finish(source[tuple(index)], device, dtype)
        if not cuts:
            return self._finish(source[...], device, dtype)
        index = [slice(None)] * len(shape)
        strided = None
        for p in cuts:
            if isinstance(p, ListShard):
                d = p.dim % self.ndim
                index[d] = list(range(*_chunk(shape[d], self.rank, self.world)))
                return self._finish(source[tuple(index)], device, dtype)
        for p in cuts:
            d = p.dim % self.ndim
            if isinstance(p, StridedShard):
                strided = (d, p.split_factor)
            else:
                index[d] = slice(*_chunk(shape[d], self.rank, self.world))
        if strided is None:
            return self._finish(source[tuple(index)], device, dtype)
        d, sf = strided
        group = math.ceil(shape[d] / sf)
        parts = []
        for g in range(sf):
            lo, hi = g * group, min((g + 1) * group, shape[d])
            a, b = _chunk(hi - lo, self.rank, self.world)
            index[d] = slice(lo + a, lo + b)
            parts.append(source[tuple(index)])
        return self._finish(torch.cat(parts, dim=d), device, dtype)

    @staticmethod
    def _finish(t, device, dtype):
        return t.to(device=device, dtype=dtype) if dtype is not None else t.to(device=device)


class MergeModulelist:
    def __init__(self, dim=0):
        self.dim = dim


class Concatenate:
    def __init__(self, dim=0):
        self.dim = dim


class WeightTransform:
    def __init__(self, source_patterns, target_patterns, operations=()):
        self.source_patterns = [source_patterns] if isinstance(source_patterns, str) \
            else list(source_patterns)
        self.target_patterns = [target_patterns] if isinstance(target_patterns, str) \
            else list(target_patterns)
        self.operations = list(operations)
        self._re = [re.compile(p.replace("*.", r".*\.")) for p in self.source_patterns]
        self.used = False
        self.collected_tensors = {}  # source pattern (or key) -> [future, ...]

    def __deepcopy__(self, memo):
        COPIES[0] += 1
        new = object.__new__(type(self))
        new.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items()})
        return new

    def rename_source_key(self, key):
        for pattern, rx in zip(self.source_patterns, self._re):
            m = rx.search(key)
            if m:
                self.used = True
                return key.replace(m.group(0), self.target_patterns[0], 1), pattern
        return key, None


class WeightRenaming(WeightTransform):
    pass


class WeightConverter(WeightTransform):
    pass


def dot_natural_key(s):
    return [(0, int(p)) if p.isdigit() else (1, p) for p in s.split(".")]


def rename_source_key(key, renamings, converters, base_model_prefix=None, meta_state_dict=None):
    for r in renamings:
        key, _ = r.rename_source_key(key)
    pattern = None
    for c in converters:
        key, pattern = c.rename_source_key(key)
        if pattern is not None:
            break
    p = base_model_prefix
    if p is not None and meta_state_dict is not None:
        if key.startswith(p) and re.sub(f"^{p}.", "", key, count=1) in meta_state_dict:
            key = re.sub(f"^{p}.", "", key, count=1)
        elif f"{p}.{key}" in meta_state_dict:
            key = f"{p}.{key}"
    return key, pattern


def convert_and_load_state_dict_in_model(model, state_dict, load_config):
    meta, prefix = model.state_dict(), model.base_model_prefix
    device = (load_config.device_map or {"": "cpu"})[""]
    dtype = load_config.dtype
    mapping = load_config.weight_mapping or []
    renamings = [e for e in mapping if isinstance(e, WeightRenaming)]
    converters = [e for e in mapping if isinstance(e, WeightConverter)]
    pattern_to_converter = {p: c for c in converters for p in c.source_patterns}
    param_name_to_load = {}
    pool = None if is_env_variable_true("HF_DEACTIVATE_ASYNC_LOAD") else \
        ThreadPoolExecutor(max_workers=4)
    POOLS.append(pool is not None)
    with pool or contextlib.nullcontext():
        for original_key, s in sorted(state_dict.items(), key=lambda kv: dot_natural_key(kv[0])):
            renamed_key, source_pattern = rename_source_key(original_key, renamings, converters,
                                                            prefix, meta)
            if renamed_key not in meta and original_key in meta:
                renamed_key, source_pattern = rename_source_key(original_key, [], [], prefix, meta)
            if renamed_key not in meta:
                continue  # unexpected key
            if source_pattern is not None:
                new_converter = deepcopy(pattern_to_converter[source_pattern])
                # each target key gets its own converter instance
                mapping = param_name_to_load.setdefault(renamed_key, new_converter)
            else:
                mapping = param_name_to_load.setdefault(
                    renamed_key, WeightRenaming(original_key, renamed_key))
                source_pattern = original_key
            lst = mapping.collected_tensors.setdefault(source_pattern, [])
            idx = len(lst) if isinstance(mapping, WeightConverter) and any(
                isinstance(o, MergeModulelist) for o in mapping.operations) else None
            empty = meta[renamed_key]
            if is_dtensor(empty):
                job = functools.partial(DtensorShardOperation(empty).shard_tensor, s,
                                        tensor_idx=idx, device=device, dtype=dtype)
            else:
                job = functools.partial(lambda s: DtensorShardOperation._finish(s[...], device,
                                                                                dtype), s)
            lst.append(pool.submit(job) if pool else job)
        for name, mapping in param_name_to_load.items():
            got = mapping.collected_tensors
            conv = isinstance(mapping, WeightConverter)
            lists = [[t for t in (f.result() if pool else f() for f in got[p]) if t is not None]
                     for p in (mapping.source_patterns if conv else got) if p in got]
            for op in (mapping.operations if conv else []):
                if isinstance(op, MergeModulelist):
                    lists = [[torch.stack(lst, dim=op.dim)] for lst in lists]
                elif isinstance(op, Concatenate):
                    lists = [[torch.cat([lst[0] for lst in lists], dim=op.dim)]]
            model[name] = lists[0][0]
    return {"loaded": len(model)}, {}
