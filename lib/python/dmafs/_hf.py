# SPDX-License-Identifier: MIT
"""_hf.py - route Hugging Face transformers' safetensors reads through dmafs.

    import dmafs
    dmafs.enable()                      # or: with dmafs.enable(): ...
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16,
                                                 device_map="cuda:0")

How transformers 5 reads a checkpoint (modeling_utils.PreTrainedModel.
_load_pretrained_model): it opens every shard with safetensors' safe_open(file,
framework="pt", device="cpu"), takes get_slice(name) of every tensor, and later
materializes each slice (slice[...]) and moves it to the device its device_map gives.

enable() replaces the safe_open that modeling_utils uses, and wraps
_load_pretrained_model to learn the load's device_map. For shards on a dmafs mount:
  - the first shard opened places the WHOLE model (every shard listed in the directory's
    index, or the directory's .safetensors files) with one dmafs placement, into one
    allocation on the load's device: the GPU when the device_map puts everything on one
    GPU, host memory for "cpu";
  - a device_map that spreads the model over several devices (device_map="auto" on a
    machine with several GPUs, or a dict) places each tensor straight onto the device of
    its module: one allocation per device, the devices at once (tensors of modules the
    map does not name go to host memory, with a SlowPathWarning; "disk" is host memory);
  - every shard's get_slice()/get_tensor() then returns views of that placement, so the
    slice[...] and .to(device) that transformers does cost nothing more (a different
    dtype is converted on the device, by transformers).
Shards not on dmafs are read by safetensors as before, with a SlowPathWarning naming
them. Parameters are bit-identical to a plain from_pretrained: the bytes are the file's.

Tensor and expert parallelism (from_pretrained(path, tp_plan="auto"), or
distributed_config=DistributedConfig(tp_plan="auto", enable_expert_parallel=True), under
torchrun): transformers passes the device mesh to its loader (load_config.device_mesh),
and in transformers 5.17 the model's parameters are then DTensors whose placements say
what each rank keeps. Its loading loop takes the checkpoint keys in natural order,
renames each (load_config.weight_mapping: renamings, then at most one weight converter,
then the base model prefix), and materializes each tensor with the parameter's
DtensorShardOperation.shard_tensor(slice, tensor_idx=...), tensor_idx being an expert's
place when a converter merges per-expert tensors (MergeModulelist); shard_tensor indexes
the slice object for the rank's part, or returns None for another rank's expert.

Under such a load the first shard opened asks transformers itself what this rank will
take (_ask_transformers): the same renaming and expert counting, with transformers' own
functions, and shard_tensor run on _Probe objects that record the indices asked and read
nothing. Each checkpoint tensor gets a rule: nothing (another rank's expert, a key no
parameter takes), whole (shared by the ranks when the parameter is replicated; this
rank's own when it is sharded: an expert under expert parallelism), an even slice
transformers' way (ceil(D / W) per rank, packed blocks for strided shards), or an
explicit range. load_shard() places just that into the rank's device: for a Qwen3-MoE or
Mixtral model, each rank's part of every expert under tensor parallelism, and only its
experts under expert parallelism. slice[index] returns the placed tensor, or a view of
it, when index asks for it or a run of it; anything else still gets the right bytes,
read from the file (or indexed out of a tensor placed whole), with a SlowPathWarning
naming the tensor, as does get_tensor() of a tensor not placed whole.
dmafs.last_stats() gives the rank's bytes, and plan_seconds the time the asking took.
A transformers without DTensor parameters (the 5.x line before) is predicted from the
model's tp plan instead (_tp_rule): the styles' slicing rules, for tensors that load one
to one into a parameter of their shape, the rest placed whole. Either way the tensors
every rank keeps whole are read once between the ranks over the mesh's process group
and broadcast, and the narrow row slices read as blocks of whole rows and exchanged (see
_shard.py); enable(distributed=True) is not needed for this.

In a torch.distributed job, enable(distributed=True) makes that whole-model placement
the way dmafs.load_distributed() does it: each rank places a part, the parts are
broadcast, and the drives read the model once for all ranks (every rank must then load
the same model at the same time).

The loading loop of transformers 5.17 deep-copies a weight converter for every checkpoint
tensor it merges and throws most copies away, and hands every tensor to a thread pool to
be read; under enable() those copies are skipped, and the pool when dmafs placed every
tensor of the call (_hfloop.py: most of the loop's own time on a mixture-of-experts model).

Only module attributes are replaced (modeling_utils.safe_open,
PreTrainedModel._load_pretrained_model, and for the loop
modeling_utils.convert_and_load_state_dict_in_model, core_model_loading.rename_source_key,
.deepcopy and .is_env_variable_true, each wrapping transformers' own), and disable() (or
leaving the with block) puts them back. Thread-safe: the device of a load is kept per
thread.
"""

import contextlib
import glob
import os
import re
import threading
import time
import warnings

from . import _hfloop, _lib
from ._dist import distributed_ready, place_distributed
from ._torch import SlowPathWarning, last_stats as _lib_stats, place_model, place_spread, \
    read_metadata

_lock = threading.Lock()
_saved = {}  # what enable() replaced: {"safe_open": f, "load": staticmethod}
_depth = 0
_dist = None  # enable(distributed=True): {"group": process group or None}
_tls = threading.local()


def _unescape(field):
    """A mountinfo field with its \\ooo escapes (space, tab, newline, backslash) undone."""
    return re.sub(r"\\([0-3][0-7]{2})", lambda m: chr(int(m.group(1), 8)), field)


def _dmafs_mounts():
    """Mount points of dmafs filesystems, longest first."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rfields = left.split(), right.split()
                if len(fields) >= 5 and rfields and rfields[0] == "fuse.dmafs":
                    out.append(_unescape(fields[4]))
    except OSError:
        pass
    return sorted(out, key=len, reverse=True)


def on_dmafs(path):
    """True when the data of @path (symlinks followed) is on a dmafs mount."""
    real = os.path.realpath(os.fspath(path))
    for m in _dmafs_mounts():
        if real == m or real.startswith(m.rstrip("/") + "/"):
            return True
    return False


def _as_device(v):
    """A device_map value as a torch.device: cuda devices and cpu; anything else ("disk",
    "meta", ...) is host memory here (transformers does the rest)."""
    import torch

    try:
        d = torch.device("cuda", v) if isinstance(v, int) else torch.device(v)
    except (RuntimeError, TypeError):
        return torch.device("cpu")
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d if d.type in ("cuda", "cpu") else torch.device("cpu")


def _device_of(load_config):
    """Where a load's device_map puts the model: one torch.device, or, when it spreads the
    model over several devices, {module prefix: torch.device} (longest prefix first)."""
    import torch

    dm = getattr(load_config, "device_map", None)
    if not dm:
        return torch.device("cpu")
    if not isinstance(dm, dict):
        dm = {"": dm}
    devs = {k: _as_device(v) for k, v in dm.items()}
    if len(set(devs.values())) == 1:
        return next(iter(devs.values()))
    return dict(sorted(devs.items(), key=lambda kv: len(kv[0]), reverse=True))


def _tensor_devices(names, prefixes):
    """{tensor name: device} by the longest device_map prefix that names its module;
    tensors under none go to host memory (transformers moves them). Returns (map, list of
    the unmatched)."""
    import torch

    out, stray = {}, []
    for n in names:
        for k, d in prefixes.items():
            if k == "" or n == k or n.startswith(k + "."):
                out[n] = d
                break
        else:
            out[n] = torch.device("cpu")
            stray.append(n)
    return out, stray


# transformers' tensor-parallel styles -> what its shard_tensor() keeps of a parameter (see
# _tp_rule); any other style (replicate, sequence_parallel, ep_router, ...) keeps it whole.
_TP_STYLES = {
    "colwise": "col", "colwise_gather_output": "col", "colwise_rep": "col", "local_colwise": "col",
    "rowwise": "row", "rowwise_split_input": "row", "rowwise_rep": "row", "local_rowwise": "row",
    "packed_colwise": "packed_col", "packed_rowwise": "packed_row",
    "local_packed_rowwise": "packed_row", "embedding_rowwise": "embedding",
    "grouped_gemm": "experts",
}


def _tp_context(model, load_config, kw):
    """What a tensor-parallel load needs, or None when the load is not one: transformers
    passes the tp device mesh in load_config.device_mesh (or as a keyword), and the model
    carries the plan (model.tp_plan: {glob of module names: style})."""
    mesh = getattr(load_config, "device_mesh", None) or kw.get("device_mesh")
    if mesh is None:
        return None
    plan = getattr(model, "tp_plan", None)
    if not isinstance(plan, dict):
        plan = getattr(model, "_tp_plan", None)
    plan = dict(plan) if isinstance(plan, dict) else {}
    keys = list(plan)
    # the matching transformers does: one alternation of the plan's globs ('*' -> '.*',
    # nothing else escaped), searched in the parameter name; the first branch that matches
    alt = re.compile("|".join(f"(?P<g{i}>{k.replace('*', '.*')})" for i, k in enumerate(keys))) \
        if keys else None
    meta, state = {}, {}
    try:
        state = model.state_dict()
        meta = {k: tuple(v.shape) for k, v in state.items()}
    except Exception:  # no state_dict(): no parameter is known, every tensor is placed whole
        pass
    try:  # the mesh's process group: the ranks share what they all keep whole over it
        group = mesh.get_group()
    except Exception:
        group = None
    return {"rank": int(mesh.get_local_rank()), "world": int(mesh.size()), "plan": plan,
            "group": group,
            "keys": keys, "alt": alt, "prefix": getattr(model, "base_model_prefix", "") or "",
            "meta": meta, "state": state, "load_config": load_config,
            "base_model_prefix": getattr(model, "base_model_prefix", None)}


def _param_name(name, tp):
    """The model parameter a checkpoint tensor loads into, by transformers' prefix rule:
    the base model prefix is dropped, or added, when that names a parameter."""
    prefix, meta = tp["prefix"], tp["meta"]
    if not prefix:
        return name
    if name.startswith(prefix) and re.sub(f"^{prefix}.", "", name, count=1) in meta:
        return re.sub(f"^{prefix}.", "", name, count=1)
    if f"{prefix}.{name}" in meta:
        return f"{prefix}.{name}"
    return name


def _tp_rule(info, tp):
    """(dim, packed blocks) of the slice this rank keeps of the checkpoint tensor @info, by
    the model's tp plan and the way transformers 5's styles shard (get_tensor_shard along
    dimension -2 for colwise weights and -1 for their 1-d biases, -1 for rowwise weights
    and nothing of their biases, 0 for embedding_rowwise, packed halves for packed_*), or
    None to place it whole: no plan entry, a style that replicates, or a tensor that does
    not load one to one into a parameter of its shape (renamed, fused, split by transformers'
    weight converters)."""
    shape, world = tuple(info.shape), tp["world"]
    key = _param_name(info.name, tp)
    if tp["alt"] is None or not shape or info.dtype_name == "F4" or tp["meta"].get(key) != shape:
        return None
    m = tp["alt"].search(key)
    if m is None:
        return None
    kind = _TP_STYLES.get(tp["plan"][tp["keys"][int(m.lastgroup[1:])]])
    nd = len(shape)
    if kind == "col":
        return (0 if nd == 1 else nd - 2, 1)
    if kind == "row":
        return None if nd == 1 else (nd - 1, 1)
    if kind == "embedding":
        return (0, 1)
    if kind == "experts":
        return (0, 1) if shape[0] % world == 0 else None
    if kind == "packed_col":
        if nd == 1:
            return (0, 1)
        # get_packed_weights indexes dimension 1 for -2: right for 3-d expert weights only
        return (1, 2) if nd == 3 and shape[1] % (2 * world) == 0 else None
    if kind == "packed_row":
        return None if nd == 1 else (nd - 1, 2) if shape[-1] % (2 * world) == 0 else None
    return None


class _Unasked(Exception):
    """What transformers asked of a tensor is not a region dmafs can place."""


class _Probe:
    """A safetensors slice that reads nothing: it records each index asked of it and
    returns an empty meta tensor of that region's shape, so that transformers' own
    shard-on-read operation, run on it, tells what it would take of the tensor."""

    def __init__(self, info, torch):
        self._shape, self._dtype, self._torch = list(info.shape), info.dtype_name, torch
        self.asked = []

    def get_shape(self):
        return list(self._shape)

    def get_dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._torch.Size(self._shape)

    def __getitem__(self, index):
        region = _region(index, self._shape)
        if region is None or any(isinstance(r, tuple) for r in region):
            raise _Unasked(index)
        self.asked.append(region)
        return self._torch.empty([len(r) for r in region], device="meta")


def _ask_transformers(tp, infos):
    """{checkpoint tensor name: rule} (see _shard.SKIP): what this rank's transformers will
    take of each tensor, found by running transformers' own renaming, weight converters
    and shard-on-read operation (core_model_loading: rename_source_key, the converters'
    MergeModulelist expert index, DtensorShardOperation on the parameter's DTensor) on
    _Probe objects, in the order and with the rules of its loading loop. None when this
    transformers does not load that way (no DTensor parameters: the plan's rules apply).
    A tensor transformers takes whole is None (kept whole by every rank) when its
    parameter is replicated, and OWN (whole, this rank's alone: an expert under expert
    parallelism) when the parameter is sharded; one it does not take at all (another
    rank's expert, a key the model has no parameter for) is SKIP; a slice is the even
    rule (dim, blocks) when it is that, else (dim, start, stop); what is none of these
    (several dimensions cut, indices) is placed whole and warned about when asked for."""
    import copy

    import torch
    from ._shard import OWN, SKIP, shard_range

    try:
        from transformers import core_model_loading as cml
        need = (cml.rename_source_key, cml.dot_natural_key, cml.is_dtensor,
                cml.DtensorShardOperation, cml.WeightConverter, cml.WeightRenaming,
                cml.MergeModulelist)
    except (ImportError, AttributeError):
        return None
    del need
    lc, state, prefix = tp["load_config"], tp["state"], tp["base_model_prefix"]
    if not any(cml.is_dtensor(v) for v in state.values()):
        return None
    if getattr(lc, "hf_quantizer", None) is not None:
        return None  # quantizers add operations of their own: the plan's rules
    # copies: rename_source_key marks a transform used, which transformers keeps for saving
    mapping = copy.deepcopy(list(getattr(lc, "weight_mapping", None) or []))
    renamings = [e for e in mapping if isinstance(e, cml.WeightRenaming)]
    converters = [e for e in mapping if isinstance(e, cml.WeightConverter)]
    by_pattern = {k: c for c in converters for k in c.source_patterns}
    world, rank = tp["world"], tp["rank"]
    seen, rules, ops = {}, {}, {}
    for name in sorted(infos, key=cml.dot_natural_key):
        info = infos[name]
        key, pattern = cml.rename_source_key(name, renamings, converters, prefix, state)
        if key not in state and name in state:
            key, pattern = cml.rename_source_key(name, [], [], prefix, state)
        if key not in state:
            rules[name] = SKIP  # transformers reports it unexpected and reads nothing
            continue
        param = state[key]
        idx = None
        if pattern is not None and any(isinstance(op, cml.MergeModulelist)
                                       for op in by_pattern[pattern].operations):
            idx = seen.get((key, pattern), 0)  # the expert's place in the merged tensor
            seen[(key, pattern)] = idx + 1
        if not cml.is_dtensor(param):
            rules[name] = None
            continue
        shape = list(info.shape)
        probe = _Probe(info, torch)
        op = ops.get(key)
        if op is None:  # made from the parameter alone: one per parameter, not per tensor
            op = ops[key] = cml.DtensorShardOperation(param)
        try:
            got = op.shard_tensor(probe, tensor_idx=idx, device="meta", dtype=None)
        except _Unasked:
            rules[name] = OWN
            continue
        if got is None and not probe.asked:
            rules[name] = SKIP
            continue
        full = [range(n) for n in shape]
        cut = [[d for d, r in enumerate(a) if r != full[d]] for a in probe.asked]
        if len(probe.asked) == 1 and not cut[0]:
            sharded = any(hasattr(p, "dim") for p in getattr(param, "placements", ()))
            rules[name] = OWN if sharded else None
            continue
        dims = {d for c in cut for d in c}
        if len(dims) != 1 or any(len(c) != 1 for c in cut):
            rules[name] = OWN
            continue
        d = dims.pop()
        runs = [a[d] for a in probe.asked]
        blocks = len(runs)
        rule = OWN
        if shape[d] % blocks == 0:
            b = shape[d] // blocks
            s, e = shard_range(b, rank, world)
            if all(r == range(k * b + s, k * b + e) for k, r in enumerate(runs)):
                rule = (d, blocks)
        if rule == OWN and blocks == 1:
            rule = (d, runs[0].start, runs[0].stop)
        rules[name] = rule
    return rules


def _shard_plan(rules, names, rule_of):
    """A load_shard() plan that gives every tensor of @names its rule in @rules (None:
    whole): one pattern per layer-generic name (the layer numbers as '*') where that
    resolves every name right, checked with @rule_of (load_shard's own matching), else one
    pattern per tensor."""
    by_generic = {}
    for n, r in rules.items():
        by_generic.setdefault(re.sub(r"\.\d+(?=\.|$)", ".*", n), set()).add(r)
    plan = {"*".join(glob.escape(p) for p in g.split("*")): next(iter(rs))
            for g, rs in by_generic.items() if len(rs) == 1}
    if all(rule_of(n, plan) == rules.get(n) for n in names):
        return plan
    return {glob.escape(n): r for n, r in rules.items()}


def _region(index, shape):
    """What a basic index asks of a tensor of @shape: per dimension a range, or a tuple
    of indices (a list index); None for anything else (steps, ints, None, tensors, masks)."""
    if not isinstance(index, tuple):
        index = (index,)
    ell = [i for i, x in enumerate(index) if x is Ellipsis]
    if len(ell) > 1 or len(index) - len(ell) > len(shape):
        return None
    fill = (slice(None),) * (len(shape) - (len(index) - len(ell)))
    index = index[:ell[0]] + fill + index[ell[0] + 1:] if ell else index + fill
    out = []
    for x, size in zip(index, shape):
        if isinstance(x, slice):
            start, stop, step = x.indices(size)
            if step != 1:
                return None
            out.append(range(start, max(start, stop)))
        elif isinstance(x, (list, tuple)) and all(type(v) is int and 0 <= v < size for v in x):
            out.append(tuple(x))
        else:
            return None
    return out


def _placed_region(shape, rule, rank, world):
    """The region of the whole tensor that load_shard placed for @rule (per dimension)."""
    from ._shard import shard_range

    out = [range(n) for n in shape]
    if len(rule) == 3:
        out[rule[0] % len(shape)] = range(rule[1], rule[2])
        return out
    dim, blocks = rule
    block = shape[dim] // blocks
    s, e = shard_range(block, rank, world)
    out[dim] = range(s, e) if blocks == 1 else \
        tuple(i for b in range(blocks) for i in range(b * block + s, b * block + e))
    return out


def _same_region(a, b):
    return len(a) == len(b) and all(x == y if type(x) is type(y) else tuple(x) == tuple(y)
                                    for x, y in zip(a, b))


def _describe(index):
    def one(x):
        if isinstance(x, slice):
            return f"{'' if x.start is None else x.start}:{'' if x.stop is None else x.stop}" + \
                ("" if x.step is None else f":{x.step}")
        if x is Ellipsis:
            return "..."
        if isinstance(x, (list, tuple)) and len(x) > 4:
            return f"[{x[0]}, {x[1]}, ..., {x[-1]}] ({len(x)} indices)"
        return repr(x)
    return "[" + ", ".join(one(x) for x in (index if isinstance(index, tuple) else (index,))) + "]"


def _read_tensor(model, name):
    """The tensor @name read from its file with pread (a host tensor, as safetensors gives)."""
    import torch
    from ._torch import _TORCH_DTYPES

    info, path = model.infos[name], model.file_of[name]
    dt = getattr(torch, _TORCH_DTYPES.get(info.dtype_name, ""), None)
    if dt is None:
        raise TypeError(f"dmafs: {path}: tensor {name!r} has dtype {info.dtype_name}, which "
                        f"this PyTorch ({torch.__version__}) cannot represent")
    buf = bytearray(info.nbytes)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        view, done = memoryview(buf), 0
        while done < info.nbytes:
            n = os.preadv(fd, [view[done:]], info.file_offset + done)
            if n <= 0:
                raise OSError(5, f"tensor {name!r}: short read at offset {info.file_offset + done}",
                              path)
            done += n
    finally:
        os.close(fd)
    if not info.nbytes:
        return torch.empty(info.shape, dtype=dt)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dt).reshape(info.shape)


class _TPSlice:
    """safetensors' PySafeSlice for one tensor of a tensor-parallel load: get_shape() and
    get_dtype() are the whole tensor's; [index] gives the slice placed for this rank when
    the index asks exactly for it, and otherwise the bytes asked for, read from the file
    (a SlowPathWarning names the tensor)."""

    def __init__(self, model, name):
        self._m, self._name = model, name
        self._info = model.infos[name]

    def get_shape(self):
        return list(self._info.shape)

    def get_dtype(self):
        return self._info.dtype_name

    def __getitem__(self, index):
        from ._shard import OWN, SKIP

        m, name, shape = self._m, self._name, tuple(self._info.shape)
        rule, placed = m.rules.get(name), m.tensors.get(name)
        region = _region(index, shape)
        tp = m.tp
        if rule is None or rule == OWN:
            if region is not None and _same_region(region, [range(n) for n in shape]):
                return placed
            warnings.warn(f"dmafs: {m.file_of[name]}: tensor {name!r} was placed whole (what "
                          f"this rank was predicted to take), but transformers took "
                          f"{_describe(index)} of it: the whole tensor stays in this rank's "
                          "memory while the part is used", SlowPathWarning, stacklevel=2)
            return placed[index]
        if rule != SKIP and region is not None:
            mine = _placed_region(shape, rule, tp["rank"], tp["world"])
            part = placed if _same_region(region, mine) else _part_of(placed, region, mine)
            if part is not None:
                return part
        what = "nothing (another rank's, or not a parameter here)" if rule == SKIP else \
            f"dimension {rule[0]} " + (f"[{rule[1]}, {rule[2]})" if len(rule) == 3 else
                                       f"in {rule[1]} packed blocks" if rule[1] > 1 else "evenly")
        warnings.warn(f"dmafs: {m.file_of[name]}: tensor {name!r}: transformers asked for "
                      f"{_describe(index)}, not what was placed for rank {tp['rank']} of "
                      f"{tp['world']} ({what}): read from the file instead", SlowPathWarning,
                      stacklevel=2)
        return _read_tensor(m, name)[index].clone()


def _part_of(placed, region, mine):
    """The view of @placed (the region @mine of a tensor, as _placed_region gives it) that
    is the region @region, when @region differs from @mine along one dimension at most,
    and there is one run of @mine's indices; else None."""
    cut = None
    for d, (r, p) in enumerate(zip(region, mine)):
        if isinstance(r, tuple):
            return None
        if (r == p) if isinstance(p, range) else (len(r) == len(p) and tuple(r) == p):
            continue
        if cut is not None:
            return None
        cut = d
    if cut is None:
        return placed
    r, idx = region[cut], mine[cut]
    if not len(r):
        return placed.narrow(cut, 0, 0)
    try:
        at = idx.index(r.start)
    except ValueError:
        return None
    if tuple(idx[at:at + len(r)]) != tuple(r):
        return None
    return placed.narrow(cut, at, len(r))


class _Model:
    """One placement of a whole model, shared by the shards that transformers opens; with
    @tp (a tensor-parallel load: see _tp_context), this rank's slices of it."""

    def __init__(self, path, files, device, dist=None, tp=None):
        self.rules = {}  # tensor parallelism: name -> (dim, blocks) of the placed slice
        self.tp = None
        with _lib.Model(path) as model:
            mine = {os.path.abspath(f) for f in model.files}
            missing = [f for f in files if os.path.abspath(f) not in mine]
            if missing:
                raise LookupError(missing)
            self.file_of = {t.name: os.path.abspath(model.files[t.file])
                            for t in model.tensors}
            self.infos = {t.name: t for t in model.tensors}
            if tp is not None:
                self._place_tp(path, model, device, tp)
            elif isinstance(device, dict):
                where, stray = _tensor_devices(self.infos, device)
                if stray and any(d.type != "cpu" for d in device.values()):
                    warnings.warn(f"dmafs: {path}: {len(stray)} tensors (e.g. {stray[0]!r}) are "
                                  "under no module of the device_map: placed into host memory, "
                                  "transformers copies them", SlowPathWarning, stacklevel=4)
                self.tensors = place_spread(model, where, 0, stacklevel=4)
            elif dist is not None and distributed_ready(dist["group"]):
                self.tensors = place_distributed(model, device, dist["group"], None, 0, 4)
            else:
                self.tensors = place_model(model, device, 0, stacklevel=4)

    def _place_tp(self, path, model, device, tp):
        from ._shard import _rule, load_shard

        if isinstance(device, dict):  # transformers gives one device to a TP rank
            device = next(iter(device.values()))
        self.tp = tp
        t0 = time.perf_counter()
        try:
            asked = _ask_transformers(tp, self.infos)
        except Exception as e:  # a loader of another shape than the one this was written for
            asked = None
            warnings.warn(f"dmafs: {path}: could not ask transformers what this rank takes of "
                          f"each tensor ({e!r}): the tp plan's rules decide, and what they do "
                          "not predict is read whole", SlowPathWarning, stacklevel=5)
        if asked is not None:
            self.rules = {n: r for n, r in asked.items() if r is not None}
            spent = time.perf_counter() - t0
            self.tensors = load_shard(path, device, rank=tp["rank"], world_size=tp["world"],
                                      plan={}, rules=asked, group=tp.get("group"),
                                      stacklevel=5)
            st = _lib_stats()
            if st is not None:
                st.plan_seconds = spent
            return
        self.rules = {t.name: r for t in model.tensors
                      if (r := _tp_rule(t, tp)) is not None}
        plan = _shard_plan(self.rules, [t.name for t in model.tensors],
                           lambda n, p: _rule(n, p, path))
        self.tensors = load_shard(path, device, rank=tp["rank"], world_size=tp["world"],
                                  plan=plan, group=tp.get("group"), stacklevel=5)


class _Shard:
    """safetensors' safe_open object for one shard, over a _Model."""

    def __init__(self, model, filename):
        self._m = model
        self._file = os.path.abspath(filename)
        self._keys = sorted(k for k, f in model.file_of.items() if f == self._file)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return list(self._keys)

    def offset_keys(self):
        return sorted(self._keys, key=lambda k: self._m.infos[k].buffer_offset)

    def metadata(self):
        return read_metadata(self._file)

    def _get(self, name):
        if name not in self._keys:
            raise KeyError(f"{self._file} does not contain tensor {name!r}")
        return self._m.tensors.get(name)

    def get_tensor(self, name):
        from ._shard import OWN

        t = self._get(name)
        if self._m.rules.get(name, OWN) != OWN:  # only this rank's slice is placed, or none
            warnings.warn(f"dmafs: {self._file}: get_tensor({name!r}) of a tensor-parallel load: "
                          "only this rank's part of it is placed; the whole tensor is read from "
                          "the file", SlowPathWarning, stacklevel=2)
            return _read_tensor(self._m, name)
        return t

    def get_slice(self, name):
        from . import _Slice

        t = self._get(name)
        if self._m.tp is not None:
            return _TPSlice(self._m, name)
        return _Slice(t, self._m.infos[name].dtype_name)


def _routed_safe_open(filename, framework="pt", device="cpu", *args, **kwargs):
    path = os.fspath(filename)
    orig = _saved["safe_open"]
    if framework not in ("pt", "torch", "pytorch") or not path.endswith(".safetensors"):
        return orig(filename, framework, device, *args, **kwargs)
    if not on_dmafs(path):
        warnings.warn(f"dmafs: {path} is not on a dmafs mount: transformers reads it through "
                      "safetensors as before (no placement)", SlowPathWarning, stacklevel=2)
        return orig(filename, framework, device, *args, **kwargs)
    load = getattr(_tls, "load", None)
    if load is None:  # a safe_open outside from_pretrained's loading: this file alone
        return _Shard(_Model(path, [path], device), path)
    d = os.path.dirname(os.path.abspath(path))
    if d not in load["models"]:
        files = [f for f in load["files"] if os.path.dirname(os.path.abspath(f)) == d] or [path]
        try:
            load["models"][d] = _Model(d, files, load["device"], load["dist"], load["tp"])
        except LookupError:  # the directory's model is not these shards: each on its own
            load["models"][d] = None
    m = load["models"][d]
    if m is None or os.path.abspath(path) not in m.file_of.values():
        m = _Model(path, [path], load["device"], tp=load["tp"])
    return _Shard(m, path)


def _wrap_load(orig_load):
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args, **kw):
        prev = getattr(_tls, "load", None)
        try:
            tp = _tp_context(model, load_config, kw)
        except Exception as e:  # a loader of another shape: the whole model, as without tp
            tp = None
            warnings.warn(f"dmafs: this tensor-parallel load could not be read ({e!r}): every "
                          "rank places the whole model", SlowPathWarning, stacklevel=3)
        _tls.load = load = {"device": _device_of(load_config),
                            "files": list(checkpoint_files or []), "models": {}, "dist": _dist,
                            "tp": tp}
        _hfloop.start()
        try:
            got = orig_load(model, state_dict, checkpoint_files, load_config, *args, **kw)
        finally:
            _tls.load = prev
        if any(m is not None for m in load["models"].values()):  # dmafs placed this load
            st = _lib_stats()
            if st is not None:
                st.copies_skipped, pool_off = _hfloop.skipped()
                st.loop_pool_off = bool(pool_off)
            _hfloop.warn_kept(_saved.get("copies"), load_config, SlowPathWarning, 3)
        return got

    _load_pretrained_model.__wrapped__ = orig_load
    return staticmethod(_load_pretrained_model)


class _Enabled(contextlib.AbstractContextManager):
    def __exit__(self, *exc):
        disable()
        return False


def enable(distributed=False, group=None):
    """Route transformers' safetensors reads of models on dmafs through dmafs placement
    (see the module docstring). Returns a context manager that calls disable() on exit;
    calls nest. Raises ImportError when transformers (5.x) is not installed, and
    RuntimeError when its loader does not have the shape this was written against.

    distributed=True, in a torch.distributed job of more than one rank (group: the
    process group, default the world): the whole-model placement of each from_pretrained
    is made as dmafs.load_distributed() makes it, each rank placing a part and the parts
    broadcast, so the drives read the model once for all ranks. Every rank of the group
    must then call from_pretrained of the same model at the same time (it is a collective,
    as loading under torchrun usually is); each rank's device_map still decides its
    device. Later enable() calls while enabled set the distributed choice anew."""
    global _depth, _dist
    import transformers.modeling_utils as mu

    with _lock:
        _dist = {"group": group} if distributed else None
        if _depth == 0:
            cls = mu.PreTrainedModel
            raw = cls.__dict__.get("_load_pretrained_model")
            if not hasattr(mu, "safe_open") or not isinstance(raw, staticmethod):
                raise RuntimeError(
                    f"dmafs.enable: transformers {getattr(__import__('transformers'), '__version__', '?')}"
                    " does not load checkpoints through modeling_utils.safe_open and a static "
                    "PreTrainedModel._load_pretrained_model (written for transformers 5); use "
                    "dmafs.load() and load_state_dict(assign=True) instead")
            _saved["safe_open"] = mu.safe_open
            _saved["load"] = raw
            mu.safe_open = _routed_safe_open
            cls._load_pretrained_model = _wrap_load(raw.__func__)
            try:  # the converter copies its loop throws away, its pool (_hfloop.py)
                import transformers.core_model_loading as cml
                from . import _Slice
                _saved["copies"] = _hfloop.install(
                    mu, cml, lambda v: isinstance(v, (_Slice, _TPSlice)))
            except ImportError as e:
                _saved["copies"] = f"transformers has no core_model_loading ({e})"
        _depth += 1
    return _Enabled()


def disable():
    """Undo one enable(); the last one puts transformers back as it was."""
    global _depth, _dist
    import transformers.modeling_utils as mu

    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        if _depth == 0:
            _dist = None
            mu.safe_open = _saved.pop("safe_open")
            mu.PreTrainedModel._load_pretrained_model = _saved.pop("load")
            _hfloop.uninstall()
            _saved.pop("copies", None)
