#!/bin/bash
# Description: dmafs works from its installed copy alone. make install into a DESTDIR, then,
# from / with PATH, LD_LIBRARY_PATH and PYTHONPATH naming only the installed directories
# (and the system's), nothing of the tree: dmafs --version; mkfs.dmafs on image files; the
# installed mount.dmafs mounts them with the installed daemon; dmafs-check --require host;
# the installed dmafs-synth-model writes a sharded model with its installed model JSON;
# dmafs-load --verify loads it from the mount; import dmafs takes the installed package and
# the installed libdmafs.so.0 (through the dynamic linker), and dmafs.load() of the model on
# the mount gives every tensor byte for byte as the file has it, by the host path;
# umount.dmafs unmounts and dmafs-fsck finds the members clean.
# Environment: DMAFS_TEST_PYTHON (default /usr/bin/python3, Debian's, with python3-torch).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
. "$top_builddir/tests/t_config.sh" || t_fail "no $top_builddir/tests/t_config.sh (configure makes it)"
t_require_root_fuse
PY=${DMAFS_TEST_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || t_skip "$PY not found (set DMAFS_TEST_PYTHON to a python with torch)"
out=$("$PY" -c 'import torch' 2>&1) || t_skip "'import torch' fails in $PY (Debian package python3-torch): $(echo "$out" | tail -n 1)"
[ "$PYTHON" != : ] || t_skip "configured without python3: the Python package is not installed"
command -v make >/dev/null || t_skip "make not installed"
t_workdir
D=$T_WORK/dest
V=$PACKAGE_VERSION

t_log "make install DESTDIR=$D"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$top_builddir" install DESTDIR="$D" \
	>"$T_WORK/install.log" 2>&1 || t_fail "make install DESTDIR=$D failed: $(tail -n 20 "$T_WORK/install.log")"

# inst CMD... - run CMD from / in an environment of the installed copy only.
inst() {
	(cd / && env -i HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \
		PATH="$D$bindir:$D$sbindir:/usr/sbin:/usr/bin:/sbin:/bin" \
		LD_LIBRARY_PATH="$D$libdir" PYTHONPATH="$D$pythondir" "$@")
}

t_log "the installed programs are the ones found"
for p in dmafs mkfs.dmafs mount.dmafs umount.dmafs dmafs-fsck dmafs-check dmafs-load dmafs-synth-model; do
	where=$(inst sh -c "command -v $p")
	case $where in
	"$D"/*) ;;
	*) t_fail "$p is '$where' in the installed copy's PATH, not under $D" ;;
	esac
done
out=$(inst dmafs --version 2>&1) || t_fail "dmafs --version exited $?: $out"
[[ $out == "dmafs $V "* ]] || t_fail "dmafs --version says '$out', not dmafs $V"
lib=$(inst ldd "$D$bindir/dmafs-load" | awk '$1 == "libdmafs.so.0" { print $3 }')
[ "$lib" = "$D$libdir/libdmafs.so.0" ] || t_fail "the installed dmafs-load loads libdmafs '$lib', not the installed one"

t_log "mkfs.dmafs on 3 image files, mounted by the installed mount.dmafs"
imgs=("$T_WORK/m0.img" "$T_WORK/m1.img" "$T_WORK/m2.img")
out=$(inst mkfs.dmafs -q --size 256M -s 256K "${imgs[@]}" 2>&1) || t_fail "mkfs.dmafs exited $?: $out"
members=$(IFS=,; echo "${imgs[*]}")
M=$T_WORK/mnt
mkdir "$M" && t_register mnt "$M"
inst mount.dmafs "$members" "$M" -o defaults,commit=5 2>"$T_WORK/mount.err" ||
	t_fail "mount.dmafs exited $?: $(cat "$T_WORK/mount.err")"
t_wait_mounted "$M" 30 || t_fail "mount.dmafs returned but $M is not mounted"
pids=$(t_daemon_pids "$M")
[ -n "$pids" ] || t_fail "no daemon serves $M"
for p in $pids; do
	t_register pid "$p"
	exe=$(readlink "/proc/$p/exe")
	[ "$exe" = "$D$sbindir/dmafs" ] || t_fail "the daemon of $M runs $exe, not the installed $D$sbindir/dmafs"
done

t_log "dmafs-check --require host"
out=$(inst dmafs-check --require host "$M" 2>&1) || t_fail "dmafs-check --require host $M exited $?: $out"

t_log "the installed dmafs-synth-model writes qwen3-0.6b / 16 in 2 shards; copied onto the mount"
out=$(inst dmafs-synth-model -q --model qwen3-0.6b --scale 16 --shards 2 --seed 5 "$T_WORK/src" 2>&1) ||
	t_fail "dmafs-synth-model (with the installed model JSONs) exited $?: $out"
cp -r "$T_WORK/src" "$M/model" || t_fail "copy the model onto $M"

t_log "dmafs-load --model --target host --verify"
out=$(inst dmafs-load --model --target host --verify "$M/model" 2>&1) || t_fail "dmafs-load exited $?: $out"
echo "$out"
grep -q "^model .* path host  target host  verified$" <<<"$out" || t_fail "dmafs-load: no verified model line by the host path"

t_log "import dmafs (installed) and dmafs.load() of the model, byte for byte against the files"
# The check is read from stdin, so that nothing of the tree is on sys.path.
inst "$PY" - "$T_NAME" "$M/model" "$T_WORK/src" "$D$pythondir" "$D$libdir/libdmafs.so.0" "$V" \
	<"$top_srcdir/tests/t_load_check.py" || t_fail "dmafs.load from the installed copy (see above)"

t_log "umount.dmafs unmounts and waits for the daemon; dmafs-fsck finds the members clean"
out=$(inst umount.dmafs "$M" 2>&1) || t_fail "umount.dmafs $M exited $?: $out"
t_is_mounted "$M" && t_fail "umount.dmafs returned 0 but $M is still mounted"
for p in $pids; do
	t_running "$p" && t_fail "daemon $p still runs after umount.dmafs returned"
done
out=$(inst dmafs-fsck "${imgs[@]}" 2>&1) || t_fail "dmafs-fsck exited $?: $out"
t_log "PASS"
