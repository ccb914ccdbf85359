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

In a torch.distributed job, enable(distributed=True) makes that whole-model placement
the way dmafs.load_distributed() does it: each rank places a part, the parts are
broadcast, and the drives read the model once for all ranks (every rank must then load
the same model at the same time).

Only the module attributes are replaced (nothing else of transformers is changed), and
disable() (or leaving the with block) puts them back. Thread-safe: the device of a load
is kept per thread.
"""

import contextlib
import os
import re
import threading
import warnings

from . import _lib
from ._dist import distributed_ready, place_distributed
from ._torch import SlowPathWarning, place_model, place_spread, read_metadata

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


class _Model:
    """One placement of a whole model, shared by the shards that transformers opens."""

    def __init__(self, path, files, device, dist=None):
        with _lib.Model(path) as model:
            mine = {os.path.abspath(f) for f in model.files}
            missing = [f for f in files if os.path.abspath(f) not in mine]
            if missing:
                raise LookupError(missing)
            self.file_of = {t.name: os.path.abspath(model.files[t.file])
                            for t in model.tensors}
            self.infos = {t.name: t for t in model.tensors}
            if isinstance(device, dict):
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
        return self._m.tensors[name]

    def get_tensor(self, name):
        return self._get(name)

    def get_slice(self, name):
        from . import _Slice

        return _Slice(self._get(name), self._m.infos[name].dtype_name)


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
            load["models"][d] = _Model(d, files, load["device"], load["dist"])
        except LookupError:  # the directory's model is not these shards: each on its own
            load["models"][d] = None
    m = load["models"][d]
    if m is None or os.path.abspath(path) not in m.file_of.values():
        m = _Model(path, [path], load["device"])
    return _Shard(m, path)


def _wrap_load(orig_load):
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args, **kw):
        prev = getattr(_tls, "load", None)
        _tls.load = {"device": _device_of(load_config), "files": list(checkpoint_files or []),
                     "models": {}, "dist": _dist}
        try:
            return orig_load(model, state_dict, checkpoint_files, load_config, *args, **kw)
        finally:
            _tls.load = prev

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
