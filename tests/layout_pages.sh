#!/bin/bash
# Description: a layout too large for one extended attribute (the kernel caps values at
# 64 KiB) is served in pages: user.dmafs.layout has first/count/next, the pages chain
# through user.dmafs.layout@K, and together they list every extent exactly once.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
command -v getfattr >/dev/null || t_skip "getfattr not installed (Debian package attr)"
t_workdir
t_images 2 256M
t_mkfs -s 64K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt"
t_log "an 80 MiB file in 64 KiB stripe units: 1280 extents"
head -c $((80 * 1048576)) /dev/urandom >"$T_WORK/mnt/f" || t_fail "write"
t_py - "$T_WORK/mnt/f" <<'PY' || t_fail "layout pages (see above)"
import os, sys
path = sys.argv[1]
name, seen, total, pages = "user.dmafs.layout", [], None, 0
while name:
    text = os.getxattr(path, name).decode()
    head, *lines = text.rstrip("\n").split("\n")
    f = dict(kv.split("=", 1) for kv in head.split())
    total = int(f["extents"])
    assert int(f.get("first", 0)) == len(seen), (name, f)
    assert int(f.get("count", total)) == len(lines), (name, f, len(lines))
    seen += [tuple(map(int, l.split())) for l in lines]
    assert len(text) <= 65536
    name, pages = f.get("next"), pages + 1
assert pages > 1, "expected a paged layout"
assert len(seen) == total == 1280, (len(seen), total)
assert sum(e[1] for e in seen) == os.path.getsize(path)
offs = [e[0] for e in seen]
assert offs == sorted(offs) and len(set(offs)) == len(offs)
print("layout: %d extents in %d pages" % (total, pages))
PY
t_umount "$T_WORK/mnt"
t_log "PASS"
