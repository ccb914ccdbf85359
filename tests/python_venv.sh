#!/bin/bash
# Description: the Python package installs with pip from lib/python/pyproject.toml. In a
# venv over /usr/bin/python3 made with --system-site-packages (Debian's torch stays
# visible), pip install --no-index --no-build-isolation of a copy of lib/python installs
# dmafs at configure's version, and pip wheel makes dmafs-VERSION-py3-none-any.whl holding
# every module of lib/python/dmafs and no other. From / with the venv's python and nothing
# of the tree on its paths, import dmafs takes the venv's copy, which finds this build's
# libdmafs.so.0 through the dynamic linker (LD_LIBRARY_PATH), and dmafs.load() of a model on
# a mount gives every tensor byte for byte as the file has it.
# Environment: DMAFS_TEST_PYTHON (default /usr/bin/python3, Debian's, with python3-torch).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
. "$top_builddir/tests/t_config.sh" || t_fail "no $top_builddir/tests/t_config.sh (configure makes it)"
t_require_root_fuse
PY=${DMAFS_TEST_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || t_skip "$PY not found (set DMAFS_TEST_PYTHON to a python with torch)"
out=$("$PY" -c 'import torch' 2>&1) || t_skip "'import torch' fails in $PY (Debian package python3-torch): $(echo "$out" | tail -n 1)"
out=$("$PY" -c 'import ensurepip, venv' 2>&1) || t_skip "no venv with pip for $PY (Debian package python3-venv): $(echo "$out" | tail -n 1)"
out=$("$PY" -c 'import wheel' 2>&1) || t_skip "pip cannot build a wheel without isolation: no wheel module in $PY (Debian package python3-wheel)"
LIB=$top_builddir/lib/.libs/libdmafs.so.0
[ -e "$LIB" ] || t_skip "libdmafs not built: $LIB"
t_workdir
V=$PACKAGE_VERSION
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH DMAFS_LIBRARY

# pip builds in the directory it is given (build/, dmafs.egg-info): a copy, not the tree.
cp -r "$top_srcdir/lib/python" "$T_WORK/pysrc" || t_fail "copy lib/python"
rm -rf "$T_WORK/pysrc/dmafs/__pycache__" "$T_WORK/pysrc/build" "$T_WORK/pysrc"/*.egg-info
chmod -R u+w "$T_WORK/pysrc"

t_log "python3 -m venv --system-site-packages"
VENV=$T_WORK/venv
out=$("$PY" -m venv --system-site-packages "$VENV" 2>&1) || t_fail "$PY -m venv exited $?: $out"
VPY=$VENV/bin/python

t_log "pip install --no-index --no-build-isolation lib/python"
out=$(cd / && "$VPY" -m pip install --no-index --no-build-isolation "$T_WORK/pysrc" 2>&1) ||
	t_fail "pip install exited $?: $out"
pv=$("$VPY" -m pip show dmafs 2>&1 | sed -n 's/^Version: //p')
[ "$pv" = "$V" ] || t_fail "pip show dmafs says version '$pv', not configure's $V"
site=$(cd / && "$VPY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))') ||
	t_fail "no purelib directory in the venv"
[ -f "$site/dmafs/__init__.py" ] || t_fail "pip install put no dmafs package in $site"

t_log "pip wheel: dmafs-$V-py3-none-any.whl with every module of lib/python/dmafs"
out=$(cd / && "$VPY" -m pip wheel --no-index --no-build-isolation --no-deps -w "$T_WORK/wheels" \
	"$T_WORK/pysrc" 2>&1) || t_fail "pip wheel exited $?: $out"
whl=$T_WORK/wheels/dmafs-$V-py3-none-any.whl
[ -f "$whl" ] || t_fail "pip wheel made $(ls "$T_WORK/wheels"), not ${whl##*/}"
"$VPY" - "$whl" "$top_srcdir/lib/python/dmafs" <<'EOF' || t_fail "the wheel's modules differ from lib/python/dmafs"
import os, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
got = sorted(n for n in names if n.endswith(".py"))
want = sorted("dmafs/" + f for f in os.listdir(sys.argv[2]) if f.endswith(".py"))
if got != want:
    print(f"wheel: {got}\nlib/python/dmafs: {want}")
    sys.exit(1)
EOF

t_log "a model on a mount, loaded from / by the venv's dmafs with this build's libdmafs"
t_images 3 256M
t_mkfs -s 256K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt"
"$PY" "$top_srcdir/tools/dmafs-synth-model" -q --model qwen3-0.6b --scale 16 --shards 2 --seed 6 \
	--models-dir "$top_srcdir/tools/models" "$T_WORK/src" || t_fail "dmafs-synth-model failed"
cp -r "$T_WORK/src" "$T_WORK/mnt/model" || t_fail "copy the model onto the mount"
(cd / && env -i HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PATH=/usr/bin:/bin \
	LD_LIBRARY_PATH="$(dirname "$LIB")" "$VPY" - "$T_NAME" "$T_WORK/mnt/model" "$T_WORK/src" "$site" \
	"$LIB" "$V" <"$top_srcdir/tests/t_load_check.py") || t_fail "dmafs.load with the venv's dmafs (see above)"
t_umount "$T_WORK/mnt"
t_log "PASS"
