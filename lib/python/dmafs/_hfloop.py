# SPDX-License-Identifier: MIT
"""_hfloop.py - the per-tensor costs of transformers' loading loop under dmafs.enable().

transformers 5.17's convert_and_load_state_dict_in_model takes the checkpoint keys one by
one, and two of its costs per key remain when dmafs has already placed every tensor:

  1. For a key that a weight converter renames (the per-expert tensors that
     MergeModulelist stacks into one parameter: 18,432 of Qwen3-30B-A3B's 18,867 tensors)
     it does

         new_converter = deepcopy(pattern_to_converter[source_pattern])
         mapping = param_name_to_load.setdefault(renamed_key, new_converter)

     deep-copying the converter for every such key and keeping only the first copy made
     for each parameter. A deep copy costs about 0.1 ms.
  2. It hands every tensor to a pool of 4 threads to be read (materialized), unless the
     environment sets HF_DEACTIVATE_ASYNC_LOAD; the tensors are then made when the
     parameter is put together. For a tensor dmafs has placed, reading is taking a view,
     and the pool's hand-over costs more than that.

On an H200, Qwen3-30B-A3B shapes at a quarter of their dimensions (18,867 tensors, 3.6
GB) loaded with device_map="cuda:0" under dmafs.enable() in 5.5-6.0 s with both, 3.1-4.1 s
without the thrown-away copies, 2.1-2.5 s without the pool either (one run, alternating;
a second run, this module against the build before it: 4.7-5.8 s, 2.4-2.9 s;
docs/benchmarks.md).

install() (from _hf.enable()) wraps four attributes so that the calls of the loop made
under dmafs.enable() skip both, every other call being transformers' own:
  - modeling_utils.convert_and_load_state_dict_in_model: each call of the loop gets its
    own record in the calling thread (the loop renames, copies and checks the environment
    in the thread that loads); the record says whether every tensor handed in is one
    dmafs placed (@placed);
  - core_model_loading.rename_source_key notes the name it returns;
  - core_model_loading.deepcopy, asked for a copy of one of the load's own converters
    (load_config.weight_mapping, by identity) right after the renaming of a key whose
    parameter already got a copy in this call, returns the converter itself (setdefault
    then returns the copy the parameter has, and the loop uses that); anything else is
    copied as before;
  - core_model_loading.is_env_variable_true answers "HF_DEACTIVATE_ASYNC_LOAD" as set in
    a call whose tensors dmafs placed, every one: transformers' own switch, for that call
    only (a load with shards off dmafs keeps the pool for them).
This is done only when the loop's source has exactly those two statements one after the
other (comments between them allowed), and the switch only when it reads it so;
otherwise nothing is replaced and the first load of a model with weight converters warns
once (SlowPathWarning) that the copies stay. Parameters are the same either way: the
copies skipped are never used, and without the pool the same operation makes each tensor.
"""

import inspect
import threading
import warnings

_tls = threading.local()
_COPY = "new_converter = deepcopy(pattern_to_converter[source_pattern])"
_KEEP = "mapping = param_name_to_load.setdefault(renamed_key, new_converter)"
_SYNC = 'is_env_variable_true("HF_DEACTIVATE_ASYNC_LOAD")'
_saved = {}
_said = []  # the reason the copies stay, once warned


def loop_shape(cml):
    """None when transformers' loading loop (@cml: transformers.core_model_loading) throws
    away converter copies the way this module skips; else why not (a sentence)."""
    fn = getattr(cml, "convert_and_load_state_dict_in_model", None)
    for name in ("deepcopy", "rename_source_key", "WeightConverter"):
        if not hasattr(cml, name):
            return f"core_model_loading has no {name}"
    try:
        src = inspect.getsource(fn)
    except (TypeError, OSError) as e:
        return f"the source of its loading loop cannot be read ({e})"
    at = src.find(_COPY)
    if at < 0 or src.count(_COPY) != 1 or src.count("deepcopy(") != 1:
        return "its loading loop does not copy converters as transformers 5.17 does"
    rest = src[at + len(_COPY):]
    between = rest[:rest.find(_KEEP)] if _KEEP in rest else None
    if between is None or any(ln.strip() and not ln.strip().startswith("#")
                              for ln in between.splitlines()):
        return "its loading loop does not keep the first converter copy as transformers 5.17 does"
    return None


def install(mu, cml, placed):
    """Wrap the attributes (see the module docstring) when the loop has the shape; returns
    None when done, else the reason it was not. @placed(value) tells a tensor of the state
    dict that dmafs placed."""
    why = loop_shape(cml)
    if why is not None:
        return why
    if getattr(mu, "convert_and_load_state_dict_in_model", None) is not \
            cml.convert_and_load_state_dict_in_model:
        return "modeling_utils does not call core_model_loading's convert_and_load_state_dict_in_model"
    src = inspect.getsource(cml.convert_and_load_state_dict_in_model)
    sync = _SYNC in src and callable(getattr(cml, "is_env_variable_true", None))
    convert, rename, copy = (mu.convert_and_load_state_dict_in_model, cml.rename_source_key,
                             cml.deepcopy)
    _saved.update(convert=convert, rename=rename, copy=copy, mu=mu, cml=cml)

    def convert_and_load_state_dict_in_model(model, state_dict, load_config, *a, **kw):
        prev = getattr(_tls, "call", None)
        mapping = getattr(load_config, "weight_mapping", None) or []
        values = state_dict.values() if hasattr(state_dict, "values") else ()
        _tls.call = {"last": None, "made": set(), "skipped": 0,
                     "own": {id(t) for t in mapping if isinstance(t, cml.WeightConverter)},
                     "sync": sync and bool(values) and all(placed(v) for v in values)}
        try:
            return convert(model, state_dict, load_config, *a, **kw)
        finally:
            _tls.skipped = getattr(_tls, "skipped", 0) + _tls.call["skipped"]
            _tls.sync = getattr(_tls, "sync", 0) + int(_tls.call["sync"])
            _tls.call = prev

    def rename_source_key(*a, **kw):
        got = rename(*a, **kw)
        call = getattr(_tls, "call", None)
        if call is not None:
            call["last"] = got[0] if isinstance(got, tuple) and got else None
        return got

    def deepcopy(x, memo=None, *a):
        call = getattr(_tls, "call", None)
        if call is not None and id(x) in call["own"]:
            key, call["last"] = call["last"], None  # one copy per renaming
            if key is not None:
                if key in call["made"]:
                    call["skipped"] += 1
                    return x  # setdefault keeps the parameter's copy and drops this
                call["made"].add(key)
        return copy(x, memo, *a)

    convert_and_load_state_dict_in_model.__wrapped__ = convert
    mu.convert_and_load_state_dict_in_model = convert_and_load_state_dict_in_model
    cml.rename_source_key = rename_source_key
    cml.deepcopy = deepcopy
    if sync:
        env = cml.is_env_variable_true
        _saved["env"] = env

        def is_env_variable_true(name, *a, **kw):
            call = getattr(_tls, "call", None)
            if name == "HF_DEACTIVATE_ASYNC_LOAD" and call is not None and call["sync"]:
                return True
            return env(name, *a, **kw)
        cml.is_env_variable_true = is_env_variable_true
    return None


def uninstall():
    """Put the attributes back (after install())."""
    if not _saved:
        return
    _saved["mu"].convert_and_load_state_dict_in_model = _saved["convert"]
    _saved["cml"].rename_source_key = _saved["rename"]
    _saved["cml"].deepcopy = _saved["copy"]
    if "env" in _saved:
        _saved["cml"].is_env_variable_true = _saved["env"]
    _saved.clear()


def start():
    """Count what the loads of this thread skip from now on."""
    _tls.skipped = _tls.sync = 0


def skipped():
    """(converter copies skipped, calls of the loop made without the thread pool) since
    start() in this thread."""
    return getattr(_tls, "skipped", 0), getattr(_tls, "sync", 0)


def warn_kept(why, load_config, category, stacklevel):
    """Once per process: a load with weight converters keeps transformers' copies."""
    if why is None or _said:
        return
    mapping = getattr(load_config, "weight_mapping", None) or []
    if not any(type(t).__name__ == "WeightConverter" for t in mapping):
        return
    _said.append(why)
    warnings.warn(f"dmafs: transformers' loading loop deep-copies a weight converter for every "
                  f"checkpoint tensor it merges, and dmafs cannot skip the copies it throws "
                  f"away here ({why}): about 0.1 ms per merged tensor stays in the load",
                  category, stacklevel=stacklevel)
