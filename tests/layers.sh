#!/bin/sh
# SPDX-License-Identifier: MIT
# The daemon's folders are layers (tests/layers.py): calls and includes only go down, and
# no two files depend on each other. The checker must also catch what it is for: a store
# file calling the engine, an io source including an engine header, and two files of one
# folder calling each other are each planted here and must each fail the check.
set -eu
: "${top_srcdir:=.}" "${top_builddir:=.}"
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "SKIP: no python3"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: no nm (binutils)"; exit 77; }
command -v cc >/dev/null || { echo "SKIP: no C compiler for the planted objects"; exit 77; }
chk="$py $top_srcdir/tests/layers.py $top_srcdir"
cd "$top_builddir"

echo "== the tree as built"
$chk

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect_fail() { # what, then the checker's extra arguments
	what=$1; shift
	if $chk "$@" >"$tmp/out" 2>&1; then
		cat "$tmp/out"; echo "FAIL: the checker passed $what"; exit 1
	fi
	grep -q '^layers: ' "$tmp/out" || { cat "$tmp/out"; echo "FAIL: no violation named for $what"; exit 1; }
	echo "caught $what:"; grep '^layers: ' "$tmp/out" | sed 's/^/  /'
}

echo "== planted: the store calls the engine"
printf 'int fs_begin(void *, unsigned long, int);\nint plant_up(void *fs) { return fs_begin(fs, 1, 0); }\n' >"$tmp/up.c"
cc -c -o "$tmp/up.o" "$tmp/up.c"
expect_fail "a call upward" fs/store/plant.c="$tmp/up.o"

echo "== planted: an io file includes an engine header"
printf '#include "engine/engine.h"\n' >"$tmp/inc.c"
expect_fail "an include upward" --src fs/io/plant.c="$tmp/inc.c"

echo "== planted: two util files call each other"
printf 'int plant_b(int);\nint plant_a(int x) { return x ? plant_b(x - 1) : 0; }\n' >"$tmp/a.c"
printf 'int plant_a(int);\nint plant_b(int x) { return x ? plant_a(x - 1) : 1; }\n' >"$tmp/b.c"
cc -c -o "$tmp/a.o" "$tmp/a.c"
cc -c -o "$tmp/b.o" "$tmp/b.c"
expect_fail "a call cycle" fs/util/plant_a.c="$tmp/a.o" fs/util/plant_b.c="$tmp/b.o"
echo "PASS"
