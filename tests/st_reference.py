#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""st_reference.py - reference reader for the safetensors tests: an independent reading of a
model (standard library only: json, struct) to compare libdmafs's parser against.

Usage: st_reference.py PATH   (a .safetensors file, a directory, an index .json, or a
Hugging Face cache snapshot directory)

Prints one line per tensor, sorted by name:
    NAME DTYPE SHAPE BEGIN END FILE
SHAPE is compact JSON ("[9496,64]", "[]" for a scalar); BEGIN and END are the data_offsets
(relative to the data section); FILE is the shard's file name (no directory).
"""
import json
import os
import struct
import sys

INDEX = "model.safetensors.index.json"


def files_of(path):
    if os.path.isfile(path) and path.endswith(".json"):
        with open(path) as f:
            wm = json.load(f)["weight_map"]
        d = os.path.dirname(path)
        return [os.path.join(d, n) for n in sorted(set(wm.values()))]
    if os.path.isfile(path):
        return [path]
    if os.path.isfile(os.path.join(path, INDEX)):
        return files_of(os.path.join(path, INDEX))
    return [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".safetensors")]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: st_reference.py PATH")
    rows = []
    for fp in files_of(sys.argv[1]):
        with open(fp, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        for name, t in header.items():
            b, e = t["data_offsets"]
            rows.append((name, t["dtype"], json.dumps(t["shape"], separators=(",", ":")), b, e,
                         os.path.basename(fp)))
    for r in sorted(rows):
        print("%s %s %s %d %d %s" % r)


if __name__ == "__main__":
    main()
