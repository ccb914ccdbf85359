#!/bin/bash
# Description: a file removed during a load is still loaded, whole and exact. dmafs-load
# opens each file once and reads it through that descriptor (POSIX keeps an unlinked open
# file readable): rm of a 256 MiB file while dmafs-load --verify places it from a mount
# with a slow member (faultfs, read_delay_ms) must not fail the load or its verification,
# for a plain file and for a safetensors file (the model mode). An LD_PRELOAD shim also
# removes the file at the two moments a path used to be opened again: when the session is
# opened and when the buffer is allocated. A path that never existed is named as missing,
# not as an unknown buffer id, and dmafs_strerror keeps the two apart. A file removed while
# sample batches hold it (tests/batch --loop) gives its space back after the last one.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
LOAD=$top_builddir/tools/dmafs-load
FAULTFS=$top_builddir/tests/faultfs
[ -x "$FAULTFS" ] || t_skip "tests/faultfs not built"
CC=${CC:-cc}
command -v "${CC%% *}" >/dev/null || t_skip "no C compiler ($CC) for the unlink shim"
t_workdir
W=$T_WORK
M=$W/mnt
MiB=1048576
SIZE=$((256 * MiB))

# unlink.so: unlink $UNLINK_PATH when dmafs-load reaches $UNLINK_AT (session: just before
# dmafs_session_open of that path; alloc: just before dmafs_buf_alloc_host)
cat >"$W/unlink.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dmafs_session;
struct dmafs_buf;

static void maybe_unlink(const char *at)
{
	const char *p = getenv("UNLINK_PATH"), *w = getenv("UNLINK_AT");

	if (p && w && !strcmp(w, at))
		unlink(p);
}

int dmafs_session_open(const char *path, struct dmafs_session **out)
{
	int (*real)(const char *, struct dmafs_session **) =
		(int (*)(const char *, struct dmafs_session **))dlsym(RTLD_NEXT, "dmafs_session_open");
	const char *p = getenv("UNLINK_PATH");

	if (p && !strcmp(path, p))
		maybe_unlink("session");
	return real(path, out);
}

int dmafs_buf_alloc_host(struct dmafs_session *s, size_t size, struct dmafs_buf **out)
{
	int (*real)(struct dmafs_session *, size_t, struct dmafs_buf **) =
		(int (*)(struct dmafs_session *, size_t, struct dmafs_buf **))dlsym(RTLD_NEXT, "dmafs_buf_alloc_host");

	maybe_unlink("alloc");
	return real(s, size, out);
}
C
$CC -shared -fPIC -O1 -o "$W/unlink.so" "$W/unlink.c" -ldl 2>"$W/cc.err" ||
	t_fail "building the unlink shim failed: $(cat "$W/cc.err")"

t_images 2 768M
t_faultfs "${T_IMGS[1]}"
CTL=$T_FF_CTL
FF=$T_FF
t_mkfs "${T_IMGS[0]}" "$FF/disk"
t_mount "${T_IMGS[0]},$FF/disk" "$M"

head -c $SIZE /dev/urandom >"$W/ref" || t_fail "urandom"
# the same bytes as the data of a safetensors file with one U8 tensor
t_py - "$W/ref" "$W/ref.safetensors" <<'PY' || t_fail "writing the safetensors file"
import json, os, struct, sys
n = os.path.getsize(sys.argv[1])
h = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[2], "wb") as out, open(sys.argv[1], "rb") as src:
    out.write(struct.pack("<Q", len(h)) + h)
    while True:
        b = src.read(1 << 24)
        if not b:
            break
        out.write(b)
PY
SUM=$(sha256sum <"$W/ref" | cut -d' ' -f1)

# put NAME SRC - copy SRC to the mount as NAME, unless it is there already
put() { [ -e "$M/$1" ] || cp "$2" "$M/$1" || t_fail "copy $2 to $M/$1"; }

t_log "the file is removed just before dmafs-load opens its session, or allocates its buffer"
for at in session alloc; do
	for kind in plain model; do
		if [ $kind = plain ]; then f=big; src=$W/ref; else f=big.safetensors; src=$W/ref.safetensors; fi
		put $f "$src"
		LD_PRELOAD=$W/unlink.so UNLINK_AT=$at UNLINK_PATH=$M/$f "$LOAD" --target host --verify "$M/$f" >"$W/out" 2>"$W/err" ||
			t_fail "dmafs-load of $f removed at $at failed: $(cat "$W/out" "$W/err")"
		[ ! -e "$M/$f" ] || t_fail "the shim did not remove $M/$f at $at (test broken)"
		grep -q "^verify  ok" "$W/out" || t_fail "dmafs-load of $f removed at $at: not verified: $(cat "$W/out" "$W/err")"
		if [ $kind = plain ]; then
			grep -q "^$M/$f  $SIZE bytes .* verified\$" "$W/out" ||
				t_fail "dmafs-load of $f removed at $at: not every byte placed: $(cat "$W/out")"
		fi
	done
done

t_log "rm of the file while dmafs-load --verify places it from a slow member"
# rm_during NAME - start dmafs-load --verify of NAME, rm it once the load has mapped its
# buffer, check that the load was still running then and 0.3 s later (placing 256 MiB with each
# read of the slow member taking 300 ms takes seconds), then let the member be fast again
# (the verifying reads would take minutes); the load's status is left in $rc
rm_during() {
	local f=$M/$1 pid n
	"$LOAD" --target host --verify "$f" >"$W/out" 2>"$W/err" &
	pid=$!
	# the buffer's shared memory is mapped once the file is open (and its header read):
	# the placement comes next
	for ((n = 0; n < 3000; n++)); do
		grep -q "memfd:dmafs-host" "/proc/$pid/maps" 2>/dev/null && break
		t_running $pid || break
		sleep 0.01
	done
	rm "$f" || t_fail "rm $f"
	t_running $pid || t_fail "dmafs-load of $1 had ended before rm (the slow member is not slow enough): $(cat "$W/out" "$W/err")"
	sleep 0.3
	t_running $pid || t_fail "dmafs-load of $1 ended within 0.3 s of rm: the rm did not land during the placement: $(cat "$W/out" "$W/err")"
	: >"$CTL"
	wait $pid
	rc=$?
}
for kind in plain model; do
	if [ $kind = plain ]; then f=big; src=$W/ref; else f=big.safetensors; src=$W/ref.safetensors; fi
	put $f "$src"
	# mounted again: nothing of the file in the page cache, every read from the members
	t_umount "$M"
	t_mount "${T_IMGS[0]},$FF/disk" "$M"
	echo "read_delay_ms 300" >"$CTL"
	rm_during $f
	[ $rc = 0 ] || t_fail "dmafs-load --verify of $f removed during the load exited $rc: $(cat "$W/out" "$W/err")"
	grep -q "^verify  ok" "$W/out" || t_fail "dmafs-load of $f removed during the load: not verified: $(cat "$W/out" "$W/err")"
	if [ $kind = plain ]; then
		grep -q "^$M/$f  $SIZE bytes .* verified\$" "$W/out" ||
			t_fail "dmafs-load of $f removed during the load: not every byte placed: $(cat "$W/out")"
	fi
	t_log "  $kind: placed and verified after rm: $(grep '^total' "$W/out")"
done
# the bytes verified above are those of the removed file: they are the original's
cp "$W/ref" "$M/check" && [ "$(sha256sum <"$M/check" | cut -d' ' -f1)" = "$SUM" ] || t_fail "checksum of a copy"

# sample batches hold the files they read as an open does: a file removed while one
# holds it gives its space back when the last batch lets go (with no open left)
BATCH=$top_builddir/tests/batch
if [ -x "$BATCH" ]; then
	t_log "a file removed while sample batches hold it: its space comes back after them"
	head -c $((64 * MiB)) /dev/urandom >"$M/held" || t_fail "write held"
	t_umount "$M"
	t_mount "${T_IMGS[0]},$FF/disk" "$M"
	bs=$(stat -f -c %S "$M")
	want=$(($(stat -f -c %f "$M") + 64 * MiB / bs)) # free blocks once the file is gone
	echo "read_delay_ms 300" >"$CTL"
	"$BATCH" --loop "$M/held" 30 >"$W/loop.out" 2>&1 &
	lp=$!
	sleep 0.5 # the first batch waits for the slow member now
	rm "$M/held"
	wait $lp || t_fail "batches of a file removed meanwhile: $(cat "$W/loop.out")"
	: >"$CTL"
	grep -q "^[1-9][0-9]* batches placed it, then it was gone" "$W/loop.out" ||
		t_fail "the batches did not place the file, then see it go: $(cat "$W/loop.out")"
	for i in $(seq 100); do
		sync
		[ "$(stat -f -c %f "$M")" -ge "$want" ] && break
		sleep 0.1
	done
	free1=$(stat -f -c %f "$M")
	[ "$free1" -ge "$want" ] || t_fail "a file removed during sample batches kept its space: $free1 blocks of $bs bytes free, $want expected"
	t_log "  $(cat "$W/loop.out"); $free1 blocks free again"
fi

t_log "a path that never existed is named as missing, not as an unknown buffer id"
"$LOAD" --target host "$M/nonexistent" >"$W/out" 2>"$W/err" && t_fail "dmafs-load of a missing file succeeded"
grep -q "$M/nonexistent: No such file or directory" "$W/err" || t_fail "dmafs-load of a missing file: $(cat "$W/err")"
grep -qi "buffer" "$W/err" && t_fail "dmafs-load of a missing file speaks of buffers: $(cat "$W/err")"
t_py - "$top_builddir/lib/.libs/libdmafs.so.0" <<'PY' || t_fail "dmafs_strerror of ENOENT and EIDRM (see above)"
import ctypes, errno, sys
lib = ctypes.CDLL(sys.argv[1])
lib.dmafs_strerror.restype = ctypes.c_char_p
noent = lib.dmafs_strerror(-errno.ENOENT).decode()
idrm = lib.dmafs_strerror(-errno.EIDRM).decode()
assert "does not exist" in noent and "buffer" not in noent, noent
assert "unknown buffer id" in idrm, idrm
PY
t_umount "$M"
t_log "PASS"
