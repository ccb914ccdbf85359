#!/bin/bash
# Description: the placement paths agree everywhere: every DMAFS_PATH_* of lib/dmafs.h has
# the same value in lib/dmafs-proto.h and in the Python module (dmafs._lib.PATH_*), and is
# listed in dmafs-ioctl(7); dmafs_path_name() of the built libdmafs names each ("p2p",
# "p2p-compat", "staged", "host", "posix", "none" for NONE and unknown values); and the
# Python module's slower() ranks them as dmafs.h says (p2p, p2p-compat, staged, host,
# posix; none never wins). No mount and no GPU needed.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_python
SO=$top_builddir/lib/.libs/libdmafs.so.0
[ -e "$SO" ] || t_skip "libdmafs not built: $SO"
DMAFS_LIBRARY=$SO PYTHONPATH=$top_srcdir/lib/python t_py - "$top_srcdir" "$SO" <<'PY' || t_fail "placement paths disagree (see above)"
import ctypes, re, sys
src, so = sys.argv[1], sys.argv[2]
bad = []


def consts(path):
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"#define DMAFS_PATH_([A-Z0-9_]+) (\d+)", open(path).read())}


h = consts(f"{src}/lib/dmafs.h")
p = consts(f"{src}/lib/dmafs-proto.h")
if h != p:
    bad.append(f"dmafs.h {h} and dmafs-proto.h {p} differ")
if "P2P_COMPAT" not in h:
    bad.append("no DMAFS_PATH_P2P_COMPAT in dmafs.h")
if sorted(h.values()) != list(range(len(h))):
    bad.append(f"the path values are not 0..{len(h) - 1}: {h}")
ioctl7 = open(f"{src}/man/dmafs-ioctl.7").read()
for name, v in h.items():
    if not re.search(rf"DMAFS_PATH_{name} \" \({v}\)", ioctl7):
        bad.append(f"dmafs-ioctl(7) does not list DMAFS_PATH_{name} ({v})")

from dmafs import _lib
for name, v in h.items():
    if getattr(_lib, f"PATH_{name}", None) != v:
        bad.append(f"dmafs._lib.PATH_{name} is {getattr(_lib, f'PATH_{name}', None)}, dmafs.h says {v}")

lib = ctypes.CDLL(so)
lib.dmafs_path_name.restype = ctypes.c_char_p
want = {"NONE": "none", "P2P": "p2p", "P2P_COMPAT": "p2p-compat", "STAGED": "staged",
        "HOST": "host", "POSIX": "posix"}
for name, v in h.items():
    got = lib.dmafs_path_name(v).decode()
    if got != want.get(name):
        bad.append(f"dmafs_path_name(DMAFS_PATH_{name}) is {got!r}, want {want.get(name)!r}")
if lib.dmafs_path_name(len(h)).decode() != "none":
    bad.append("dmafs_path_name of an unknown value is not 'none'")

order = [h["P2P"], h["P2P_COMPAT"], h["STAGED"], h["HOST"], h["POSIX"]]
for i, a in enumerate(order):
    if _lib.slower(a, h["NONE"]) != a or _lib.slower(h["NONE"], a) != a:
        bad.append(f"slower() lets NONE win over {a}")
    for b in order[i + 1:]:
        if _lib.slower(a, b) != b or _lib.slower(b, a) != b:
            bad.append(f"slower({a}, {b}) is not {b}")
for b in bad:
    print(f"[path_names] {b}")
sys.exit(1 if bad else 0)
PY
t_log "PASS"
