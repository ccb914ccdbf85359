#!/bin/bash
# Description: dmafs.last_stats() tells where a load's bytes came from (tier_bytes from the
# warm tier, drive_bytes from the drives; libdmafs's dmafs_buf_tier_bytes): on a mount with
# tier=64M, the first dmafs.load() of a 20 MiB safetensors file reads everything from the
# drives; the second is served from the tier (the placement starts at the 4 KiB block of
# the first tensor, here the file's start, so it reads every chunk whole and fills it);
# after dmafs.prefetch() all of it again, and so for load_file() and a shard of it; the
# tensors equal the file's bytes each time; the repr says how much came from the tier.
# Without tier=, tier_bytes is 0. Skips (77) when the test's
# python cannot import torch (the dmafs module needs it).
# Environment: DMAFS_TEST_PYTHON (default /usr/bin/python3, Debian's, with python3-torch).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch
t_workdir
M=$T_WORK/mnt
t_images 3 1G
t_mkfs -s 256K "${T_IMGS[@]}"

t_log "a 20 MiB safetensors file of random tensors"
"$PY" - "$T_WORK/model.safetensors" <<'EOF' || t_fail "writing the test model"
import json, os, struct, sys
sizes = {"a": 7 << 20, "b": 123457 * 4, "c": 12 << 20}
hdr, off = {}, 0
for name, n in sizes.items():
    hdr[name] = {"dtype": "F32", "shape": [n // 4], "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + os.urandom(off))
EOF

# check MODE - load the file on the mount twice (MODE tier: then prefetch and a third
# load) and check last_stats()'s tier_bytes and drive_bytes
check() {
	"$PY" - "$M/model.safetensors" "$1" <<'EOF'
import os, struct, sys
import torch
import dmafs

path, mode = sys.argv[1], sys.argv[2]

def fail(msg):
    sys.exit(f"[python_tier] FAIL: {msg}")

with open(path, "rb") as f:
    data = f.read()
start = 8 + struct.unpack("<Q", data[:8])[0]  # where the tensors' bytes begin
size = len(data)
# A load places from the 4 KiB block that holds the first tensor byte to the end: here
# (a header of a few hundred bytes) the whole file, every 1 MiB chunk of the tier whole.
begin = start // 4096 * 4096
if begin != 0:
    fail(f"the test model's tensors start at {start}, past the first block")

def load(what):
    sd = dmafs.load(path, "cpu")
    s = dmafs.last_stats()
    print(f"[python_tier] {what}: {s!r}; tier_bytes {s.tier_bytes}, drive_bytes {s.drive_bytes}",
          flush=True)
    if s.bytes != size - begin:
        fail(f"{what}: {s.bytes} bytes placed, expected {size - begin}")
    if s.tier_bytes is None or s.drive_bytes != s.bytes - s.tier_bytes:
        fail(f"{what}: tier_bytes {s.tier_bytes}, drive_bytes {s.drive_bytes}")
    d = s.as_dict()
    if (d["tier_bytes"], d["drive_bytes"]) != (s.tier_bytes, s.drive_bytes):
        fail(f"{what}: as_dict has {d['tier_bytes']}, {d['drive_bytes']}")
    if ("from the warm tier" in repr(s)) != bool(s.tier_bytes):
        fail(f"{what}: repr {s!r}")
    got = b"".join(sd[k].view(torch.uint8).numpy().tobytes() for k in ("a", "b", "c"))
    if got != data[start:]:
        fail(f"{what}: the tensors differ from the file")
    return s.tier_bytes

first = load("first load")
second = load("second load")
if mode == "none":
    if (first, second) != (0, 0):
        fail(f"without a tier: tier_bytes {first}, {second}, expected 0, 0")
    sys.exit(0)
if first != 0:
    fail(f"first load: {first} bytes from the tier, expected 0 (it was empty)")
# The first load read every chunk whole (it began at offset 0, the last chunk ends with
# the file) and filled it; the tier (64 MiB) keeps them all: the second reads nothing.
if second != size:
    fail(f"second load: {second} bytes from the tier, expected all {size}")
r = dmafs.prefetch(path)
if (r.read, r.held) != (0, size):
    fail(f"the prefetch after two loads read {r.read} and found {r.held} held, expected 0, {size}")
third = load("load after dmafs.prefetch")
if third != size:
    fail(f"load after the prefetch: {third} bytes from the tier, expected all {size}")

# the other loaders say it too: load_file, and a shard (rank 0 of 2, a and c split along
# dimension 0: parts of chunks, served from the chunks the tier holds)
def all_from_tier(what, s):
    print(f"[python_tier] {what}: {s!r}", flush=True)
    if not s.bytes or s.tier_bytes != s.bytes or s.drive_bytes != 0:
        fail(f"{what}: {s.bytes} bytes, tier_bytes {s.tier_bytes}, drive_bytes "
             f"{s.drive_bytes}: expected all from the tier")

sd = dmafs.load_file(path, device="cpu")
all_from_tier("load_file", dmafs.last_stats())
if b"".join(sd[k].view(torch.uint8).numpy().tobytes() for k in ("a", "b", "c")) != data[start:]:
    fail("load_file: the tensors differ from the file")
sd = dmafs.load(path, "cpu", shard=(0, 2, {"a": 0, "c": 0}))
all_from_tier("shard (0, 2)", dmafs.last_stats())
a = data[start:start + (7 << 20)]
if sd["a"].view(torch.uint8).numpy().tobytes() != a[:len(a) // 2]:
    fail("shard (0, 2): a's first half differs from the file")
EOF
}

t_log "tier=64M: the first load from the drives, the second from the tier, and after a prefetch"
t_mount "$T_MEMBERS" "$M" tier=64M,tier_fill=now
cp "$T_WORK/model.safetensors" "$M/" || t_fail "copy in"
check tier || t_fail "tier_bytes and drive_bytes with the tier (see above)"
t_umount "$M"

t_log "without tier=: tier_bytes 0"
t_mount "$T_MEMBERS" "$M"
check none || t_fail "tier_bytes and drive_bytes without the tier (see above)"
t_umount "$M"
t_log "PASS"
