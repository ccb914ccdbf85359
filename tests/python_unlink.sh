#!/bin/bash
# Description: dmafs.load_file() of a safetensors file removed during the load returns the
# original tensor, byte for byte (sha256). The file is removed at the two moments the
# module used to open it again by name (before the session is opened on it, before the
# buffer is allocated), and by rm while the load places it from a mount with a slow
# member (faultfs, read_delay_ms). Skips (77) when the test's python cannot import torch.
# Environment: DMAFS_TEST_PYTHON (default /usr/bin/python3, Debian's, with python3-torch).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch
FAULTFS=$top_builddir/tests/faultfs
[ -x "$FAULTFS" ] || t_skip "tests/faultfs not built"
t_workdir
W=$T_WORK
M=$W/mnt
SIZE=$((128 * 1048576))

t_images 2 512M
t_faultfs "${T_IMGS[1]}"
CTL=$T_FF_CTL
FF=$T_FF
t_mkfs "${T_IMGS[0]}" "$FF/disk"
t_mount "${T_IMGS[0]},$FF/disk" "$M"

# one U8 tensor "w" of SIZE random bytes; its sha256 in $W/sum
"$PY" - "$W/ref.safetensors" "$SIZE" "$W/sum" <<'PY' || t_fail "writing the safetensors file"
import hashlib, json, os, struct, sys
n = int(sys.argv[2])
data = os.urandom(n)
h = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
open(sys.argv[3], "w").write(hashlib.sha256(data).hexdigest())
PY
SUM=$(cat "$W/sum")

# load.py FILE [session|alloc] - dmafs.load_file(FILE) (FILE removed at that moment, when
# given); prints the sha256 of tensor w and the path the load took
cat >"$W/load.py" <<'PY'
import ctypes, hashlib, os, sys
import dmafs
from dmafs import _lib
path = sys.argv[1]
at = sys.argv[2] if len(sys.argv) > 2 else None


def removing(fn):
    def call(*a, **kw):
        if os.path.exists(path):
            os.unlink(path)
        return fn(*a, **kw)
    return call


if at == "session":
    _lib.Session.__init__ = removing(_lib.Session.__init__)
elif at == "alloc":
    _lib.Buffer.alloc_host = classmethod(removing(_lib.Buffer.alloc_host.__func__))
sd = dmafs.load_file(path)
if at:
    assert not os.path.exists(path), f"{path} was not removed at {at} (test broken)"
w = sd["w"]
print(hashlib.sha256(ctypes.string_at(w.data_ptr(), w.numel())).hexdigest(), dmafs.last_stats().path)
PY

for at in session alloc; do
	t_log "load_file() of a file removed just before its $at"
	cp "$W/ref.safetensors" "$M/m.safetensors" || t_fail "copy in"
	out=$("$PY" "$W/load.py" "$M/m.safetensors" $at 2>&1) || t_fail "load_file() of a file removed before its $at: $out"
	[ "$out" = "$SUM host" ] || t_fail "load_file() of a file removed before its $at: '$out', expected '$SUM host'"
done

t_log "rm of the file while load_file() places it from a slow member"
cp "$W/ref.safetensors" "$M/m.safetensors" || t_fail "copy in"
# mounted again: nothing of the file in the page cache
t_umount "$M"
t_mount "${T_IMGS[0]},$FF/disk" "$M"
echo "read_delay_ms 300" >"$CTL"
"$PY" "$W/load.py" "$M/m.safetensors" >"$W/out" 2>&1 &
pid=$!
# the buffer's shared memory is mapped once the header is read: the placement comes next
for ((n = 0; n < 3000; n++)); do
	grep -q "memfd:dmafs-host" "/proc/$pid/maps" 2>/dev/null && break
	t_running $pid || break
	sleep 0.01
done
rm "$M/m.safetensors" || t_fail "rm"
t_running $pid || t_fail "load_file() had ended before rm (the slow member is not slow enough): $(cat "$W/out")"
sleep 0.3
t_running $pid || t_fail "load_file() ended within 0.3 s of rm: the rm did not land during the placement: $(cat "$W/out")"
: >"$CTL"
wait $pid || t_fail "load_file() of a file removed during the load failed: $(cat "$W/out")"
[ "$(cat "$W/out")" = "$SUM host" ] || t_fail "load_file() of a file removed during the load: '$(cat "$W/out")', expected '$SUM host'"
t_umount "$M"
t_log "PASS"
