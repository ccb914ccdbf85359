#!/bin/bash
# Description: dmafs.prefetch() of the Python module reads a model into the mount's warm
# tier through libdmafs's dmafs_prefetch: one file, a directory of shards, its index.json
# and a Hugging Face snapshot of symlinks, each reporting the bytes read and already held;
# a dmafs.load() after it is served from the tier (no miss) and equals the files' bytes;
# a mount without tier= raises OSError EOPNOTSUPP naming tier=. Skips (77) when the test's
# python cannot import torch (the dmafs module needs it).
# Environment: DMAFS_TEST_PYTHON (default /usr/bin/python3, Debian's, with python3-torch).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch
TP=$top_builddir/tests/tier_place
[ -x "$TP" ] || t_skip "tests/tier_place not built"
t_workdir
M=$T_WORK/mnt
t_images 3 1G
t_mkfs -s 256K "${T_IMGS[@]}"

t_log "test models: one file, 3 shards + index, an HF snapshot (tests/python_check.py gen)"
"$PY" "$top_srcdir/tests/python_check.py" gen "$T_WORK/src" >/dev/null || t_fail "python_check.py gen"
t_mount "$T_MEMBERS" "$M" tier=64M,tier_fill=now
cp -a "$T_WORK/src/mixed" "$T_WORK/src/sharded" "$T_WORK/src/hf" "$M/" || t_fail "copy the models in"

"$PY" - "$M" "$TP" <<'EOF' || t_fail "dmafs.prefetch checks failed (see above)"
import glob, os, subprocess, sys
import dmafs
from dmafs import _lib

mnt, tp = sys.argv[1], sys.argv[2]

def say(msg):
    print(f"[python_prefetch] {msg}", flush=True)

def stats():
    size, held, hits, misses, served, filled, evicted = map(int, subprocess.check_output([tp, "--stats", mnt]).split()[:7])
    return dict(held=held, hits=hits, misses=misses, filled=filled)

def expect(what, got, want):
    if got != want:
        sys.exit(f"[python_prefetch] FAIL: {what}: {got!r}, expected {want!r}")

size = lambda files: sum(os.path.getsize(f) for f in files)

say("one file: read whole, then held")
one = os.path.join(mnt, "mixed", "model.safetensors")
r = dmafs.prefetch(one)
expect("first prefetch of one file (read, held, files)", (r.read, r.held, r.files), (size([one]), 0, [one]))
r = dmafs.prefetch(one)
expect("second prefetch of one file (read, held)", (r.read, r.held), (0, size([one])))

say("a directory of 3 shards, then its index.json: read once, then held")
shards = sorted(glob.glob(os.path.join(mnt, "sharded", "*.safetensors")))
r = dmafs.prefetch(os.path.join(mnt, "sharded"))
expect("prefetch of the shard directory (read, held)", (r.read, r.held), (size(shards), 0))
expect("its files", sorted(r.files), shards)
r = dmafs.prefetch(os.path.join(mnt, "sharded", "model.safetensors.index.json"))
expect("prefetch of the index (read, held)", (r.read, r.held), (0, size(shards)))

say("a Hugging Face snapshot of symlinks to blobs")
snap = glob.glob(os.path.join(mnt, "hf", "models--dmafs--tiny", "snapshots", "*"))[0]
r = dmafs.prefetch(snap)
st_files = sorted(glob.glob(os.path.join(snap, "*.safetensors")))
expect("prefetch of the snapshot (read, held)", (r.read, r.held), (size(st_files), 0))
expect("user.dmafs.tier of a snapshot file", int(os.getxattr(st_files[0], "user.dmafs.tier")),
       size(st_files[:1]))

say("dmafs.load after the prefetch: served from the tier, equal to the files' bytes")
before = stats()
sd = dmafs.load(os.path.join(mnt, "sharded"))
after = stats()
expect("misses of the load", after["misses"] - before["misses"], 0)
if after["hits"] <= before["hits"]:
    sys.exit("[python_prefetch] FAIL: the load had no tier hits")
with _lib.Model(os.path.join(mnt, "sharded")) as m:
    for t in m.tensors:
        with open(m.files[t.file], "rb") as f:
            f.seek(t.file_offset)
            want = f.read(t.nbytes)
        got = sd[t.name].contiguous().view(-1).view(__import__("torch").uint8).numpy().tobytes() if t.nbytes else b""
        expect(f"bytes of {t.name}", got == want, True)
say(f"{len(sd)} tensors equal the files' bytes")
EOF
t_umount "$M"

t_log "without tier=: OSError EOPNOTSUPP naming tier="
t_mount "$T_MEMBERS" "$M"
"$PY" - "$M/mixed/model.safetensors" <<'EOF' || t_fail "dmafs.prefetch without a tier did not raise EOPNOTSUPP (see above)"
import errno, sys
import dmafs
try:
    dmafs.prefetch(sys.argv[1])
except OSError as e:
    if e.errno != errno.EOPNOTSUPP or "tier=" not in str(e):
        sys.exit(f"[python_prefetch] FAIL: raised {e!r}")
    print(f"[python_prefetch] raised: {e}")
else:
    sys.exit("[python_prefetch] FAIL: no error without a tier")
EOF
t_umount "$M"
t_log "PASS"
