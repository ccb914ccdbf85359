#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Description: shared check of the tests that use an installed dmafs Python package
# (install_use.sh, python_venv.sh): import dmafs must come from PKGDIR with libdmafs
# mapped from LIBFILE, both of version VERSION; dmafs.load(MODEL, "cpu") must return every
# tensor of the safetensors files in SRCDIR (the same model outside dmafs) with its dtype,
# shape and bytes, by the host path.
#
# Usage: t_load_check.py NAME MODEL SRCDIR PKGDIR LIBFILE VERSION
# Exit: 0 all equal, 1 a difference (printed).

import gc
import json
import os
import struct
import sys

DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64",
          "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64", "U8": "uint8",
          "BOOL": "bool"}


def reference(src):
    """{name: (dtype, shape, bytes)} of every .safetensors file in src, read directly."""
    ref = {}
    for name in sorted(os.listdir(src)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(src, name), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for key, info in header.items():
            if key != "__metadata__":
                a, b = info["data_offsets"]
                ref[key] = (info["dtype"], info["shape"], data[a:b])
    return ref


def main():
    name, model, src, pkgdir, libfile, version = sys.argv[1:]
    import torch
    import dmafs
    where = os.path.dirname(os.path.abspath(dmafs.__file__))
    errors = []
    if where != os.path.join(pkgdir, "dmafs"):
        errors.append(f"dmafs imported from {where}, not {pkgdir}")
    if dmafs.__version__ != version:
        errors.append(f"dmafs.__version__ is {dmafs.__version__}, not {version}")
    if dmafs.library_version() != version:
        errors.append(f"the loaded libdmafs is {dmafs.library_version()}, not {version}")
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "libdmafs.so" in line}
    if libs != {os.path.realpath(libfile)}:
        errors.append(f"libdmafs mapped from {sorted(libs)}, not {os.path.realpath(libfile)}")

    ref = reference(src)
    if not ref:
        errors.append(f"no tensors in {src}")
    sd = dmafs.load(model, device="cpu")
    stats = dmafs.last_stats()
    if set(sd) != set(ref):
        errors.append(f"keys differ: {sorted(set(sd) ^ set(ref))[:5]}")
    total = 0
    for key in sorted(set(sd) & set(ref)):
        dtype, shape, raw = ref[key]
        t = sd[key]
        if t.dtype != getattr(torch, DTYPES[dtype]):
            errors.append(f"{key}: dtype {t.dtype}, the file says {dtype}")
        elif list(t.shape) != shape:
            errors.append(f"{key}: shape {list(t.shape)}, the file says {shape}")
        elif not torch.equal(t.contiguous().reshape(-1).view(torch.uint8),
                             torch.frombuffer(bytearray(raw), dtype=torch.uint8)):
            errors.append(f"{key}: bytes differ from the file's")
        total += len(raw)
    if stats.path != "host":
        errors.append(f"dmafs.load took the {stats.path} path, not host")
    del sd
    gc.collect()
    for e in errors:
        print(f"[{name}] {e}")
    if errors:
        return 1
    print(f"[{name}] {len(ref)} tensors, {total} bytes equal to the files, path {stats.path}; "
          f"dmafs {dmafs.__version__} from {where}, libdmafs {dmafs.library_version()} "
          f"from {libs.pop()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
