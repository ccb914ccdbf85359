#!/bin/bash
# Description: sample batches place what pread(2) reads, and only that (tests/batch.c):
# random samples of 200 files of many shapes (sparse, empty, past the end) into a host
# buffer, more than one request's worth in a call, every byte of the buffer compared;
# with and without verify_place; removed files, handles of another process, write-only
# descriptors and malformed requests; another user (nobody) presenting a root handle,
# forged ones, and a guessed one; and the same program off dmafs (the POSIX path).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
B=$top_builddir/tests/batch
[ -x "$B" ] || t_skip "tests/batch not built"
t_workdir
M=$T_WORK/mnt
AS_N=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs --)
"${AS_N[@]}" true || t_fail "setpriv cannot run a command as nobody"
t_images 3 256M
t_mkfs "${T_IMGS[@]}"

for opts in allow_other allow_other,verify_place; do
	t_log "-o $opts"
	t_mount "$T_MEMBERS" "$M" "$opts"
	mkdir -p "$M/d" && chmod 755 "$M/d" || t_fail "mkdir"
	out=$("$B" "$M/d" 200 20 "$T_WORK/handle" 2>&1) || t_fail "$opts: $out"
	echo "$out" | sed "s/^/[$T_NAME]   /"
	grep -q "path host" <<<"$out" || t_fail "$opts: the batch did not take the host path: $out"
	chmod 644 "$T_WORK/handle"
	chmod 711 "$T_WORK"
	out=$("${AS_N[@]}" "$B" --forge "$M/d" "$T_WORK/handle" 2>&1) || t_fail "nobody: $out"
	t_log "  nobody: $out"
	t_umount "$M"
done
t_fsck 0 "${T_IMGS[@]}"

t_log "off dmafs (POSIX path)"
mkdir -p "$T_WORK/posix"
out=$("$B" "$T_WORK/posix" 60 8 2>&1) || t_fail "posix: $out"
echo "$out" | sed "s/^/[$T_NAME]   /"
grep -q "path posix" <<<"$out" || t_fail "off dmafs, the path is not posix: $out"
t_log "PASS"
