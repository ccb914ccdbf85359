#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""layers.py - the daemon's folders are layers, calls and includes only go down, and no
files depend on each other, in fs/, lib/ and tools/.

The tree is three groups, highest first (GROUPS): tools/ (the programs), fs/ (the daemon,
whose core library the tools link) and lib/ (libdmafs and the GPU shims, which the daemon
and the tools use). A file may call functions of, and include headers from, its own group
and the groups below it: a lib/ object never needs a symbol defined only in fs/ or tools/,
an fs/ object never one defined only in tools/.

fs/ holds one folder per layer, highest first (LAYERS). A file may call functions of, and
include headers from, its own folder and the folders below it.

In every group, no two files may depend on each other, even through others (a cycle among
files). Calls are read from the object files' symbols (nm: what each defines, what it
needs); includes from the sources. A symbol is looked up in the caller's own group first.

Objects: fs/LAYER/NAME.o; lib/.libs/*.o, the libtool objects of libdmafs and of the
convenience library libdmafsgpu (named libdmafsgpu_la-NAME.o), and lib/*.o; tools/*.o,
those built with a program's own flags named PROGRAM-NAME.o. Each counts as the source it
was built from (lib/NAME.c, tools/NAME.c); one source built twice is one file.

usage: layers.py SRCDIR [LOGICAL=OBJECT ...] [--src LOGICAL=FILE ...]
With no object arguments, the objects above under the build tree (cwd) are checked
against the sources under SRCDIR. Extra LOGICAL=OBJECT and --src LOGICAL=FILE pairs add
objects or sources as if they were at LOGICAL (fs/store/x.c, lib/x.c, tools/x.c;
tests/layers.sh plants violations that way).
Exit 0: layered; 1: a violation (each one printed); 2: usage or a tool failed.
"""
import os
import re
import subprocess
import sys

GROUPS = ["tools", "fs", "lib"]
GRANK = {name: i for i, name in enumerate(GROUPS)}
LAYERS = ["daemon", "fuse", "place", "engine", "store", "io", "format", "util"]
RANK = {name: i for i, name in enumerate(LAYERS)}
MIN_OBJS = {"fs": 10, "lib": 5, "tools": 5}


def group_of(logical):
    g = logical.split("/")[0]
    return g if g in GRANK else None


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


def find_fs_objects(srcdir):
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
                    objs[f"fs/{layer}/{name[:-2]}.c"] = [os.path.join(d, name)]
    return objs


def find_flat_objects(srcdir, folder, dirs):
    """Objects of the sources directly in @folder (lib, tools), found in @dirs of the
    build tree: NAME.o, or TARGET-NAME.o (a program's or convenience library's own
    flags), as the source folder/NAME.c. Test programs' copies (tests_*) are left out."""
    objs = {}
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith(".o") or name.startswith("tests_"):
                continue
            stem = name[:-2]
            for cand in [stem] + [stem[i + 1:] for i, c in enumerate(stem) if c == "-"]:
                if os.path.exists(os.path.join(srcdir, folder, cand + ".c")):
                    objs.setdefault(f"{folder}/{cand}.c", []).append(os.path.join(d, name))
                    break
    return objs


def find_sources(srcdir):
    srcs = {}
    for layer in LAYERS:
        d = os.path.join(srcdir, "fs", layer)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith((".c", ".h")):
                srcs[f"fs/{layer}/{name}"] = os.path.join(d, name)
    for folder in ("lib", "tools"):
        d = os.path.join(srcdir, folder)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith((".c", ".h")):
                srcs[f"{folder}/{name}"] = os.path.join(d, name)
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
        for w in sorted(edges.get(v, ())):
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


def include_group(srcdir, logical, name):
    """The group of the header @name that @logical's #include "@name" finds, the way the
    build's -I flags do (the source's own folder, then fs/, then lib/), or None."""
    own = os.path.dirname(logical)
    for base in (own, "fs", "lib"):
        rel = os.path.normpath(os.path.join(base, name))
        for root in (srcdir, "."):
            if os.path.isfile(os.path.join(root, rel)):
                return group_of(rel)
    return None


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    srcdir = argv[1]
    extra_objs, extra_srcs = {}, {}
    args = argv[2:]
    while args:
        a = args.pop(0)
        if a == "--src" and args:
            k, _, v = args.pop(0).partition("=")
            extra_srcs[k] = v
        elif "=" in a:
            k, _, v = a.partition("=")
            extra_objs[k] = [v]
        else:
            print(f"layers: bad argument {a!r}", file=sys.stderr)
            return 2
    objs = find_fs_objects(srcdir)
    objs.update(find_flat_objects(srcdir, "lib", [os.path.join("lib", ".libs"), "lib"]))
    objs.update(find_flat_objects(srcdir, "tools", ["tools"]))
    objs.update(extra_objs)
    srcs = find_sources(srcdir)
    srcs.update(extra_srcs)
    for g in GROUPS:
        n = sum(1 for k in objs if group_of(k) == g)
        if n < MIN_OBJS[g] or sum(1 for k in srcs if group_of(k) == g) < MIN_OBJS[g]:
            print(f"layers: only {n} objects of {g}/ found: run from the build tree after make",
                  file=sys.stderr)
            return 2
    bad = []
    for logical in list(objs) + list(srcs):
        g = group_of(logical)
        if g is None:
            bad.append(f"{logical}: not in {', '.join(x + '/' for x in GROUPS)}")
        elif g == "fs" and layer_of(logical) is None:
            bad.append(f"{logical}: not in a layer folder (fs/{{{','.join(LAYERS)}}}/)")
        elif g != "fs" and logical.count("/") != 1:
            bad.append(f"{logical}: not directly in {g}/")

    # calls: a symbol is looked up in the caller's own group first, then in the others
    owners, needs = {}, {}
    for logical, files in objs.items():
        needs[logical] = set()
        for obj in files:
            defined, needed = symbols(obj)
            needs[logical] |= needed
            for s in defined:
                owners.setdefault(group_of(logical), {}).setdefault(s, set()).add(logical)
    edges = {}
    for logical, needed in needs.items():
        gf = group_of(logical)
        if gf is None:
            continue
        for s in sorted(needed):
            own = owners.get(gf, {}).get(s, set()) - {logical}
            if s in owners.get(gf, {}):
                for target in sorted(own):
                    edges.setdefault(logical, set()).add(target)
                    lf, lt = layer_of(logical), layer_of(target)
                    if lf and lt and RANK[lt] < RANK[lf]:
                        bad.append(f"{logical} calls {s} of {target}: {lf} is below {lt}")
                continue
            for gt in GROUPS[:GRANK[gf]]:  # the groups above the caller's
                for target in sorted(owners.get(gt, {}).get(s, ())):
                    bad.append(f"{logical} calls {s}, defined only in {target}: "
                               f"{gf}/ is below {gt}/")

    # includes
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for logical, path in srcs.items():
        gf, lf = group_of(logical), layer_of(logical)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in inc.finditer(text):
            name = m.group(1)
            lt = name.split("/")[0] if "/" in name else None
            if gf == "fs" and lt in RANK and lf and RANK[lt] < RANK[lf]:
                bad.append(f"{logical} includes {name}: {lf} is below {lt}")
            gt = include_group(srcdir, logical, name)
            if gf and gt and GRANK[gt] < GRANK[gf]:
                bad.append(f"{logical} includes {name} of {gt}/: {gf}/ is below {gt}/")

    for comp in cycles(edges):
        bad.append("files that depend on each other (a call cycle): " + " -> ".join(comp))

    for b in bad:
        print("layers: " + b)
    if bad:
        return 1
    for g in GROUPS:
        no = sum(1 for k in objs if group_of(k) == g)
        ns = sum(1 for k in srcs if group_of(k) == g)
        ne = sum(len(v) for k, v in edges.items() if group_of(k) == g)
        print(f"layers: {g}/: {no} objects, {ns} sources, {ne} file-to-file calls: "
              "all go down, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
