#!/bin/bash
# Description: make install (into a DESTDIR) installs every file a user needs, the
# expected files being found in the tree, not in the *.am lists that install them: every
# module of lib/python/dmafs and every module the package imports, and no other; every
# manual page, and the target of each .so link; for each page of sections 1 and 8 its
# program (bindir, sbindir); every script of tools/ but quickstart; the model JSONs of
# dmafs-synth-model; every module of dmafs-bench (tools/dmafs_bench), where the installed
# dmafs-bench looks for them, and no other; dmafs.h and the headers it includes, which
# compile; dmafs.pc, with
# which a program links the installed libdmafs.so.0 and runs with its version; the links
# that mount(8), umount(8) and fsck(8) run. make uninstall then leaves no file behind.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
. "$top_builddir/tests/t_config.sh" || t_fail "no $top_builddir/tests/t_config.sh (configure makes it)"
t_require_python
command -v make >/dev/null || t_skip "make not installed"
[ "$PYTHON" != : ] || t_skip "configured without python3: the Python package is not installed"
t_workdir
D=$T_WORK/dest
errors=0
bad() {
	echo "[$T_NAME] $*"
	errors=$((errors + 1))
}
# need FILE WHY - FILE (under $D) must exist.
need() { [ -e "$1" ] || bad "not installed: ${1#"$D"} ($2)"; }

t_log "make install DESTDIR=$D"
# A make of its own: the make check that runs this passes its flags and job server.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$top_builddir" install DESTDIR="$D" \
	>"$T_WORK/install.log" 2>&1 || t_fail "make install DESTDIR=$D failed: $(tail -n 20 "$T_WORK/install.log")"

t_log "the Python package: every module of lib/python/dmafs and every module it imports"
src=$top_srcdir/lib/python/dmafs
pkg=$D$pythondir/dmafs
[ -d "$pkg" ] || t_fail "no Python package at ${pkg#"$D"} (pythondir)"
for f in "$src"/*.py; do need "$pkg/${f##*/}" "a module of lib/python/dmafs"; done
for f in "$pkg"/*.py; do
	[ -e "$src/${f##*/}" ] || bad "installed ${f#"$D"}, which lib/python/dmafs does not have"
done
# Relative imports (from .x import y; from . import x, unless x is a name that __init__.py
# defines) of every module, found by parsing.
t_py - "$src" >"$T_WORK/imports" <<'EOF' || t_fail "parsing the package's imports failed"
import ast, os, sys
def parse(name):
    return ast.parse(open(os.path.join(sys.argv[1], name)).read(), name)
defined = set()
for node in parse("__init__.py").body:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        defined.add(node.name)
    elif isinstance(node, ast.Assign):
        defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
for name in sorted(os.listdir(sys.argv[1])):
    if name.endswith(".py"):
        for node in ast.walk(parse(name)):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    print(name, node.module.split(".")[0])
                else:
                    for alias in node.names:
                        if alias.name not in defined:
                            print(name, alias.name)
EOF
[ -s "$T_WORK/imports" ] || bad "no relative import found in lib/python/dmafs (parse error?)"
while read -r by mod; do
	need "$pkg/$mod.py" "$by imports it"
done <"$T_WORK/imports"

t_log "manual pages, .so link targets, and a program for each page of sections 1 and 8"
for page in "$top_srcdir"/man/*.[1-8]; do
	name=${page##*/} sec=${page##*.}
	need "$D$mandir/man$sec/$name" "man/$name"
	so=$(sed -n '1s/^\.so //p' "$page")
	[ -z "$so" ] || need "$D$mandir/$so" "the target of man/$name"
	case $sec in
	1) prog=$D$bindir/${name%.1} ;;
	8) prog=$D$sbindir/${name%.8} ;;
	*) continue ;;
	esac
	[ -f "$prog" ] && [ -x "$prog" ] || bad "not installed: ${prog#"$D"}, the program of man/$name"
done

t_log "every script of tools/ (but quickstart) and the model JSONs"
for f in "$top_srcdir"/tools/*; do
	[ -f "$f" ] && [ "$(head -c 2 "$f")" = '#!' ] || continue
	name=${f##*/}
	[ "$name" = quickstart ] && continue
	[ -x "$D$bindir/$name" ] || [ -x "$D$sbindir/$name" ] ||
		bad "not installed: tools/$name (in ${bindir} or ${sbindir})"
done
[ -x "$D$sbindir/mount.dmafs" ] || bad "mount.dmafs is not in sbindir (${sbindir}), beside the daemon"
for f in "$top_srcdir"/tools/models/*.json; do
	need "$D$pkgdatadir/models/${f##*/}" "a model of dmafs-synth-model"
done
# dmafs-bench finds its modules in ../share/dmafs/dmafs_bench from its own folder
bench=$D$bindir/../share/dmafs/dmafs_bench
for f in "$top_srcdir"/tools/dmafs_bench/*.py; do
	need "$bench/${f##*/}" "a module of dmafs-bench"
done
for f in "$bench"/*.py; do
	[ -e "$top_srcdir/tools/dmafs_bench/${f##*/}" ] ||
		bad "installed ${f#"$D"}, which tools/dmafs_bench does not have"
done

t_log "mount(8), umount(8) and fsck(8) helper links"
for pair in mount.fuse.dmafs:mount.dmafs umount.fuse.dmafs:umount.dmafs fsck.dmafs:dmafs-fsck; do
	link=$D$sbindir/${pair%%:*}
	if [ ! -L "$link" ]; then
		bad "not installed: ${link#"$D"}, a link to ${pair#*:}"
	elif [ "$(readlink "$link")" != "${pair#*:}" ]; then
		bad "${link#"$D"} links to $(readlink "$link"), not ${pair#*:}"
	fi
done

t_log "headers, dmafs.pc, and a program built with them against the installed libdmafs"
need "$D$includedir/dmafs.h" "the libdmafs header"
need "$D$includedir/dmafs-proto.h" "the ioctl protocol (dmafs-ioctl(7))"
for h in "$D$includedir"/dmafs*.h; do
	for inc in $(sed -n 's/^#include "\(.*\)"/\1/p' "$h"); do
		need "$D$includedir/$inc" "${h##*/} includes it"
	done
done
need "$D$pkgconfigdir/dmafs.pc" "pkg-config file"
need "$D$libdir/libdmafs.so.0" "the library's soname"
need "$D$libdir/libdmafs.so" "the link the linker uses for -ldmafs"
pv=$(sed -n 's/^Version: //p' "$D$pkgconfigdir/dmafs.pc" 2>/dev/null)
[ "$pv" = "$PACKAGE_VERSION" ] || bad "dmafs.pc says Version: $pv, not $PACKAGE_VERSION"
if ! command -v pkg-config >/dev/null; then
	bad "pkg-config not installed (Debian package pkg-config): the program was not built"
elif ! flags=$(PKG_CONFIG_PATH="$D$pkgconfigdir" pkg-config \
	--define-variable=includedir="$D$includedir" --define-variable=libdir="$D$libdir" \
	--cflags --libs dmafs 2>&1); then
	bad "pkg-config --cflags --libs dmafs: $flags"
else
	cat >"$T_WORK/v.c" <<'EOF'
#include <dmafs.h>
#include <stdio.h>
int main(void)
{
	printf("%d %d\n", DMAFS_VERSION_NUM, dmafs_version());
	return 0;
}
EOF
	# shellcheck disable=SC2086 # pkg-config's words
	if ! out=$(${CC:-cc} -Wall -Werror -o "$T_WORK/v" "$T_WORK/v.c" $flags 2>&1); then
		bad "cc with pkg-config's flags for the installed dmafs failed: $out"
	else
		IFS=. read -r ma mi pa <<<"$PACKAGE_VERSION"
		want="$((ma * 10000 + mi * 100 + pa)) $((ma * 10000 + mi * 100 + pa))"
		got=$(LD_LIBRARY_PATH="$D$libdir" "$T_WORK/v" 2>&1)
		[ "$got" = "$want" ] || bad "a program built against the installed dmafs printed '$got', expected '$want'"
		lib=$(LD_LIBRARY_PATH="$D$libdir" ldd "$T_WORK/v" | awk '$1 == "libdmafs.so.0" { print $3 }')
		[ "$lib" = "$D$libdir/libdmafs.so.0" ] || bad "the program ran with libdmafs '$lib', not ${libdir}'s"
	fi
fi

[ $errors = 0 ] || t_fail "$errors problem(s) with the installed files (see above)"

# the installed module run once, as a user would: Python writes its __pycache__ there
if [ -n "${pythondir:-}" ] && [ -d "$D$pythondir/dmafs" ] && [ -x "${PYTHON:-}" ]; then
	PYTHONPATH=$D$pythondir "$PYTHON" -c 'import dmafs' 2>/dev/null
	[ -d "$D$pythondir/dmafs/__pycache__" ] || t_log "  (no __pycache__ written by $PYTHON)"
fi
# and the installed dmafs-bench, which finds its modules there (no benchmark is run)
if [ -x "${PYTHON:-}" ]; then
	"$PYTHON" "$D$bindir/dmafs-bench" models --help >"$T_WORK/bench.help" 2>&1 ||
		t_fail "the installed dmafs-bench models --help failed: $(tail -n 5 "$T_WORK/bench.help")"
	grep -q "^usage: dmafs-bench models" "$T_WORK/bench.help" ||
		t_fail "the installed dmafs-bench printed no usage: $(head -n 5 "$T_WORK/bench.help")"
fi
t_log "make uninstall DESTDIR=$D leaves no file, and no folder of dmafs's"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$top_builddir" uninstall DESTDIR="$D" \
	>"$T_WORK/uninstall.log" 2>&1 || t_fail "make uninstall failed: $(tail -n 20 "$T_WORK/uninstall.log")"
left=$(cd "$D" && find . ! -type d | sort)
[ -z "$left" ] || t_fail "make uninstall left: $(echo $left)"
left=$(cd "$D" && find . -type d \( -name dmafs -o -name models -o -name dmafs_bench -o -name __pycache__ \) | sort)
[ -z "$left" ] || t_fail "make uninstall left folders: $(echo $left)"
t_log "PASS"
