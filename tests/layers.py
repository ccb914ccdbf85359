#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""layers.py - the daemon's folders are layers, and calls and includes only go down.

fs/ holds one folder per layer, highest first (LAYERS). A file may call functions of, and
include headers from, its own folder and the folders below it; and no two files may depend
on each other, even through others (a cycle among files). Calls are read from the object
files' symbols (nm: what each defines, what it needs); includes from the sources.

usage: layers.py SRCDIR [LOGICAL=OBJECT ...] [--src LOGICAL=FILE ...]
With no object arguments, every fs/**/*.o under the build tree (cwd) is checked against
the sources under SRCDIR. Extra LOGICAL=OBJECT and --src LOGICAL=FILE pairs add objects or
sources as if they were at fs/LOGICAL (tests/layers.sh plants violations that way).
Exit 0: layered; 1: a violation (each one printed); 2: usage or a tool failed.
"""
import os
import re
import subprocess
import sys

LAYERS = ["daemon", "fuse", "place", "engine", "store", "io", "format", "util"]
RANK = {name: i for i, name in enumerate(LAYERS)}


def layer_of(logical):
    parts = logical.split("/")
    if len(parts) != 3 or parts[0] != "fs" or parts[1] not in RANK:
        return None
    return parts[1]


def symbols(obj):
    try:
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"layers: cannot read symbols of {obj}: {e}", file=sys.stderr)
        sys.exit(2)
    defined, needed = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "U":
            needed.add(f[1])
        elif len(f) == 3 and f[1] in "TDBRCV":  # global definitions only
            defined.add(f[2])
    return defined, needed


def find_objects(srcdir):
    objs = {}
    for layer in LAYERS:
        d = os.path.join("fs", layer)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            # objects of fs/ files built for tests carry a target prefix (tests_x-meta.o)
            # and have no source of their name
            if name.endswith(".o"):
                src = os.path.join(srcdir, d, name[:-2] + ".c")
                if os.path.exists(src):
                    objs[f"fs/{layer}/{name[:-2]}.c"] = os.path.join(d, name)
    return objs


def find_sources(srcdir):
    srcs = {}
    for layer in LAYERS:
        d = os.path.join(srcdir, "fs", layer)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith((".c", ".h")):
                srcs[f"fs/{layer}/{name}"] = os.path.join(d, name)
    return srcs


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(edges) | {t for ts in edges.values() for t in ts}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    srcdir, objs, srcs = argv[1], None, None
    extra_objs, extra_srcs = {}, {}
    args = argv[2:]
    while args:
        a = args.pop(0)
        if a == "--src" and args:
            k, _, v = args.pop(0).partition("=")
            extra_srcs[k] = v
        elif "=" in a:
            k, _, v = a.partition("=")
            extra_objs[k] = v
        else:
            print(f"layers: bad argument {a!r}", file=sys.stderr)
            return 2
    objs = find_objects(srcdir)
    objs.update(extra_objs)
    srcs = find_sources(srcdir)
    srcs.update(extra_srcs)
    if len(objs) < 10 or len(srcs) < 10:
        print(f"layers: only {len(objs)} objects and {len(srcs)} sources found: run from the build tree after make", file=sys.stderr)
        return 2
    bad = []
    for logical in list(objs) + list(srcs):
        if layer_of(logical) is None:
            bad.append(f"{logical}: not in a layer folder (fs/{{{','.join(LAYERS)}}}/)")

    # calls
    owner, needs = {}, {}
    for logical, obj in objs.items():
        defined, needed = symbols(obj)
        needs[logical] = needed
        for s in defined:
            owner[s] = logical
    edges = {}
    for logical, needed in needs.items():
        for s in sorted(needed):
            target = owner.get(s)
            if not target or target == logical:
                continue
            edges.setdefault(logical, set()).add(target)
            lf, lt = layer_of(logical), layer_of(target)
            if lf and lt and RANK[lt] < RANK[lf]:
                bad.append(f"{logical} calls {s} of {target}: {lf} is below {lt}")

    # includes
    inc = re.compile(r'^\s*#\s*include\s+"([a-z]+)/([^"]+)"', re.M)
    for logical, path in srcs.items():
        lf = layer_of(logical)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in inc.finditer(text):
            lt = m.group(1)
            if lt in RANK and lf and RANK[lt] < RANK[lf]:
                bad.append(f"{logical} includes {m.group(1)}/{m.group(2)}: {lf} is below {lt}")

    for comp in cycles(edges):
        bad.append("files that depend on each other (a call cycle): " + " -> ".join(comp))

    for b in bad:
        print("layers: " + b)
    if bad:
        return 1
    print(f"layers: {len(objs)} objects, {len(srcs)} sources, {sum(len(v) for v in edges.values())} file-to-file calls: all go down, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
