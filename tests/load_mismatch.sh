#!/bin/bash
# Description: dmafs-load --verify exits 2 when the placed bytes differ from a POSIX read
# of the file (dmafs-load(1), EXIT STATUS), naming the file and the first differing byte,
# in text and in --json ("verify": "mismatch", "mismatch_at"); 2 also when another file
# of the same run cannot be verified (2 takes precedence over 1); 0 when they agree. The difference is
# made on the reading side: an LD_PRELOAD shim (built here with cc) flips one byte of
# what pread(2) returns for the named file (or ends another's reads early), so the
# placement itself is the real one.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
LOAD=$top_builddir/tools/dmafs-load
CC=${CC:-cc}
command -v "${CC%% *}" >/dev/null || t_skip "no C compiler ($CC) for the pread shim"
t_workdir
cat >"$T_WORK/flip.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Flip byte $FLIP_AT of what a read of the file $FLIP_PATH returns; reads of the file
 * $EOF_PATH return end of file. */
static ssize_t flip(int fd, void *buf, ssize_t r, off_t off)
{
	const char *want = getenv("FLIP_PATH"), *at_s = getenv("FLIP_AT"), *eof = getenv("EOF_PATH");
	char link[64], path[4096];
	ssize_t l;
	long long at;

	if (r <= 0)
		return r;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	l = readlink(link, path, sizeof(path) - 1);
	if (l <= 0)
		return r;
	path[l] = '\0';
	if (eof && !strcmp(path, eof))
		return 0;
	if (!want || !at_s || !*at_s)
		return r;
	at = atoll(at_s);
	if (!strcmp(path, want) && at >= off && at < off + r)
		((unsigned char *)buf)[at - off] ^= 0x5a;
	return r;
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, void *, size_t, off_t);

	if (!real)
		real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
	return flip(fd, buf, real(fd, buf, n, off), off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, void *, size_t, off_t);

	if (!real)
		real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread64");
	return flip(fd, buf, real(fd, buf, n, off), off);
}
C
$CC -shared -fPIC -O1 -o "$T_WORK/flip.so" "$T_WORK/flip.c" -ldl 2>"$T_WORK/cc.err" ||
	t_fail "building the pread shim failed: $(cat "$T_WORK/cc.err")"
t_images 2 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
SIZE=$((5 * 1048576 + 4321))
head -c $SIZE /dev/urandom >"$M/f" && head -c 100000 /dev/urandom >"$M/g" || t_fail "write f, g"

# load WANT AT [ARGS...] - dmafs-load ARGS with byte AT of f flipped on reading ("" for
# none); must exit WANT. Output in $T_WORK/out, $T_WORK/err.
load() {
	local want=$1 at=$2 rc
	shift 2
	LD_PRELOAD=$T_WORK/flip.so FLIP_PATH=$M/f FLIP_AT=$at "$LOAD" "$@" >"$T_WORK/out" 2>"$T_WORK/err"
	rc=$?
	[ $rc = "$want" ] || t_fail "dmafs-load $* (byte ${at:-none} of f read flipped) exited $rc, expected $want: $(cat "$T_WORK/err" "$T_WORK/out")"
}

t_log "placed bytes and POSIX read agree: exit 0"
load 0 "" --target host --verify "$M/f" "$M/g"
grep -q "^verify  ok" "$T_WORK/out" || t_fail "no 'verify  ok' line: $(cat "$T_WORK/out")"
for at in 0 3000000 $((SIZE - 1)); do
	t_log "byte $at of f reads differently: exit 2, the mismatch named"
	load 2 "$at" --target host --verify "$M/f" "$M/g"
	grep -q "^dmafs-load: $M/f: MISMATCH at byte $at (placed $SIZE of $SIZE bytes)\$" "$T_WORK/err" ||
		t_fail "dmafs-load does not name the mismatch at byte $at of f: $(cat "$T_WORK/err")"
	grep -q "MISMATCH.*$M/g\|$M/g.*MISMATCH" "$T_WORK/err" && t_fail "g reported as a mismatch: $(cat "$T_WORK/err")"
done
t_log "--json: \"verify\": \"mismatch\" and f's mismatch_at"
load 2 77 --target host --verify --json "$M/f" "$M/g"
t_py - "$T_WORK/out" "$M/f" <<'PY' || t_fail "dmafs-load --json: $(cat "$T_WORK/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verify"] == "mismatch", d["verify"]
f = [x for x in d["files"] if x["file"] == sys.argv[2]]
assert f and f[0]["verified"] is False and f[0]["mismatch_at"] == 77, f
PY
t_log "g cannot be verified (its read ends early): exit 1; with a mismatch in f as well: 2"
EOF_PATH=$M/g load 1 "" --target host --verify "$M/f" "$M/g"
grep -q "^dmafs-load: $M/g: cannot verify: read at 0: file shrank\$" "$T_WORK/err" ||
	t_fail "dmafs-load does not say why g could not be verified: $(cat "$T_WORK/err")"
EOF_PATH=$M/g load 2 0 --target host --verify "$M/f" "$M/g"
grep -q "$M/g: cannot verify" "$T_WORK/err" && grep -q "$M/f: MISMATCH at byte 0 " "$T_WORK/err" ||
	t_fail "dmafs-load does not report both the mismatch in f and g's error: $(cat "$T_WORK/err")"
t_umount "$M"
t_log "PASS"
