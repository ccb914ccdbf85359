#!/bin/sh
# SPDX-License-Identifier: MIT
# The daemon's folders are layers, and tools/ is above fs/ above lib/ (tests/layers.py):
# calls and includes only go down, and no two files of fs/, of lib/ or of tools/ depend on
# each other. The checker must also catch what it is for: a store file calling the engine,
# an io source including an engine header, two files of one folder calling each other, a
# lib object calling a tools function, a lib source including a tools header, and two lib
# files and two tools files calling each other are each planted here and must each fail
# the check.
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
# what, then the checker's extra arguments: it must find a violation (exit 1, not a
# failure of its own) and name the planted file in it
expect_fail() {
	what=$1; shift
	rc=0
	$chk "$@" >"$tmp/out" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || { cat "$tmp/out"; echo "FAIL: the checker passed $what"; exit 1; }
	[ "$rc" -eq 1 ] || { cat "$tmp/out"; echo "FAIL: the checker failed (exit $rc) on $what"; exit 1; }
	grep -q '^layers: .*plant' "$tmp/out" || { cat "$tmp/out"; echo "FAIL: no violation named for $what"; exit 1; }
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

echo "== planted: a lib file calls a tools function"
printf 'void tool_err(const char *, ...);\nvoid plant_lib(void) { tool_err("x"); }\n' >"$tmp/libup.c"
cc -c -o "$tmp/libup.o" "$tmp/libup.c"
expect_fail "a lib call up into tools" lib/plant.c="$tmp/libup.o"

echo "== planted: a lib file includes a tools header"
printf '#include "../tools/tool.h"\n' >"$tmp/libinc.c"
expect_fail "a lib include of tools" --src lib/plant.c="$tmp/libinc.c"

echo "== planted: two lib files call each other"
expect_fail "a lib call cycle" lib/plant_a.c="$tmp/a.o" lib/plant_b.c="$tmp/b.o"

echo "== planted: two tools files call each other"
expect_fail "a tools call cycle" tools/plant_a.c="$tmp/a.o" tools/plant_b.c="$tmp/b.o"
echo "PASS"
