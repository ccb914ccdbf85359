#!/bin/bash
# Description: safetensors models through a real mount: a scaled Qwen2.5-7B (4 shards +
# index, and as a Hugging Face cache snapshot of symlinks) copied into dmafs is loaded by
# dmafs-load --model --target host --verify by the host path with every tensor checked; a
# malformed shard is refused with the file and the problem named, and the daemon keeps
# serving.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
LOAD=$top_builddir/tools/dmafs-load
SYNTH=$top_srcdir/tools/dmafs-synth-model
[ -x "$LOAD" ] || t_skip "dmafs-load not built: $LOAD"
t_workdir
t_images 3 256M
t_mkfs -s 256K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt"
M=$T_WORK/mnt

t_log "qwen2.5-7b scaled by 32, 4 shards + index, copied into the mount"
t_py "$SYNTH" -q --model qwen2.5-7b --scale 32 --shards 4 --seed 3 "$T_WORK/q25" ||
	t_fail "dmafs-synth-model failed"
cp -r "$T_WORK/q25" "$M/q25" || t_fail "copy in"

t_log "dmafs-load --model --target host --verify: 339 tensors, 4 files, path host"
out=$("$LOAD" --model --target host --verify "$M/q25" 2>&1) || t_fail "dmafs-load exited $?: $out"
echo "$out"
grep -q "^model $M/q25  339 tensors  4 files  [0-9]* bytes .* path host  target host  verified$" <<<"$out" ||
	t_fail "expected the model line with path host and verified"
grep -q "^verify  ok" <<<"$out" || t_fail "no verify ok line"
grep -q "notice" <<<"$out" && t_fail "a notice for a host placement on dmafs: $out"

t_log "the same through the index file and as JSON"
out=$("$LOAD" --json --verify "$M/q25/model.safetensors.index.json" --model 2>&1) ||
	t_fail "dmafs-load --json exited $?: $out"
t_py - "$out" <<'EOF' || t_fail "JSON output: $out"
import json, sys
d = json.loads(sys.argv[1])
m = d["models"][0]
assert d["verify"] == "ok" and d["errors"] == 0, d
assert m["path"] == "host" and m["tensors"] == 339 and len(m["files"]) == 4, m
assert m["verified"] is True and m["error"] is None, m
EOF

t_log "a Hugging Face cache snapshot (symlinks into blobs) on the mount"
if ln -s x "$M/.symlink-probe" 2>/dev/null; then
	rm -f "$M/.symlink-probe"
	t_py "$SYNTH" -q --model qwen3-0.6b --scale 16 --seed 4 --hf-cache "$M/hf" "$M/q3" ||
		t_fail "dmafs-synth-model --hf-cache failed"
	snap=$(echo "$M"/hf/models--dmafs-synth--qwen3-0.6b/snapshots/*)
	out=$("$LOAD" --model --verify "$snap" 2>&1) || t_fail "snapshot load exited $?: $out"
	echo "$out"
	grep -q "311 tensors  1 files .* path host  target host  verified" <<<"$out" ||
		t_fail "snapshot not loaded by the host path"
else
	t_log "symlinks not supported on this mount: snapshot check left out"
fi

t_log "a shard with overlapping tensors is refused, naming the file and the problem"
mkdir "$M/bad" || t_fail "mkdir"
cp "$T_WORK/q25/model-00001-of-00004.safetensors" "$M/bad/model-00001-of-00002.safetensors" ||
	t_fail "copy"
t_py - "$M/bad/model-00002-of-00002.safetensors" <<'EOF' || t_fail "writing the bad shard"
import struct, sys
h = (b'{"x.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},'
     b'"y.weight":{"dtype":"U8","shape":[4],"data_offsets":[10,14]}}')
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(16))
EOF
out=$("$LOAD" --model --target host "$M/bad" 2>&1)
rc=$?
echo "$out"
[ $rc = 1 ] || t_fail "malformed model: exit $rc, want 1"
grep -q "$M/bad/model-00002-of-00002.safetensors: tensor 'y.weight' data_offsets \[10, 14\] overlap 'x.weight' \[0, 12\]" <<<"$out" ||
	t_fail "the error does not name the shard and the overlap"

t_log "a truncated shard is refused too"
head -c 100 "$T_WORK/q25/model-00002-of-00004.safetensors" >"$M/bad/model-00002-of-00002.safetensors"
out=$("$LOAD" --model "$M/bad" 2>&1) && t_fail "truncated shard accepted: $out"
grep -q "model-00002-of-00002.safetensors: header length [0-9]* runs past the end of the file (100 bytes)" <<<"$out" ||
	t_fail "truncation not reported: $out"

t_log "the daemon is alive and serving: POSIX reads equal the originals, a second load works"
[ -n "$(t_daemon_pids "$M")" ] || t_fail "daemon of $M is gone: $(cat "$T_DAEMON_ERR")"
for f in "$T_WORK"/q25/*; do
	cmp -s "$f" "$M/q25/${f##*/}" || t_fail "POSIX read of $M/q25/${f##*/} differs"
done
out=$("$LOAD" -q --model --verify "$M/q25" 2>&1) || t_fail "second load exited $?: $out"
grep -q "^total  1 models  339 tensors  [0-9]* bytes .* path host  target host$" <<<"$out" ||
	t_fail "second load (-q: total line only) not by the host path: $out"
grep -q "^model" <<<"$out" && t_fail "-q printed more than the total line: $out"
t_umount "$M"
t_log "PASS"
