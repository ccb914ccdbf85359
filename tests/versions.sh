#!/bin/bash
# Description: dmafs has one version, configure.ac's: the built header's DMAFS_VERSION_*,
# dmafs_version() of the built libdmafs, dmafs --version, dmafs.pc, the Python package's
# __version__ (which lib/python/pyproject.toml takes for pip) and the title line of every
# manual page all say it.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
. "$top_builddir/tests/t_config.sh" || t_fail "no $top_builddir/tests/t_config.sh (configure makes it)"
t_require_python
V=$PACKAGE_VERSION
errors=0
bad() {
	echo "[$T_NAME] $*"
	errors=$((errors + 1))
}
t_log "configure.ac's version: $V"

h=$top_builddir/lib/dmafs-version.h
hv=$(for part in MAJOR MINOR PATCH; do sed -n "s/^#define DMAFS_VERSION_$part \([0-9]*\)$/\1/p" "$h"; done | paste -sd.)
[ "$hv" = "$V" ] || bad "$h says $hv"

so=$top_builddir/lib/.libs/libdmafs.so.0
lv=$(t_py -c 'import ctypes, sys
v = ctypes.CDLL(sys.argv[1]).dmafs_version()
print(f"{v // 10000}.{v // 100 % 100}.{v % 100}")' "$so" 2>&1)
[ "$lv" = "$V" ] || bad "dmafs_version() of $so says $lv"

dv=$("$top_builddir/fs/dmafs" --version 2>&1 | head -n 1)
[[ $dv == "dmafs $V "* ]] || bad "dmafs --version says '$dv'"

pv=$(sed -n 's/^Version: //p' "$top_builddir/lib/dmafs.pc")
[ "$pv" = "$V" ] || bad "lib/dmafs.pc says Version: $pv"

init=$top_srcdir/lib/python/dmafs/__init__.py
yv=$(t_py -c 'import ast, sys
for node in ast.parse(open(sys.argv[1]).read()).body:
    if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__version__"]:
        print(node.value.value)' "$init" 2>&1)
[ "$yv" = "$V" ] || bad "$init says __version__ = '$yv'"
grep -qx 'version = {attr = "dmafs.__version__"}' "$top_srcdir/lib/python/pyproject.toml" ||
	bad "lib/python/pyproject.toml does not take its version from dmafs.__version__"

n=0
for page in "$top_srcdir"/man/*.[1-8]; do
	th=$(grep -m 1 '^\.TH ' "$page") || continue # a .so link to another page
	n=$((n + 1))
	[[ $th == *" \"dmafs $V\" "* ]] || bad "${page#"$top_srcdir"/}: $th"
done
((n > 0)) || bad "no manual page with a .TH line in $top_srcdir/man"

[ $errors = 0 ] || t_fail "$errors copies of the version differ from configure.ac's $V (see above)"
t_log "header, library, daemon, dmafs.pc, Python package and $n manual pages say $V"
t_log "PASS"
