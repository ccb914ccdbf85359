#!/bin/bash
# Description: the mounted tests did run. As root with /dev/fuse, a make check in which a
# test skipped because it could not mount (no root, no /dev/fuse, no fusermount3, daemon
# or mkfs not built: t_require_root_fuse's reasons) fails here, so that a suite whose
# mounted tests all skip is not reported as passing. make check runs this after every
# other test of the run (tests/tests.am); run alone, it skips.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
NAME=mounted_ran
say() { echo "[$NAME] $*"; }
[ "$(id -u)" = 0 ] || { say "SKIP: not root: the mounted tests are meant to skip"; exit 77; }
[ -c /dev/fuse ] || { say "SKIP: no /dev/fuse: the mounted tests are meant to skip"; exit 77; }

# The tests of this run: make check's harness passes their logs in TEST_LOGS (set on
# its inner make's command line, so in the environment of every test); it removes their
# old results before running them, and runs this one after the others.
trs=()
for log in ${TEST_LOGS:-}; do
	[ "${log##*/}" = "$NAME.log" ] || trs+=("$top_builddir/${log%.log}.trs")
done
[ ${#trs[@]} -gt 0 ] || { say "SKIP: no other test ran in this make check (run alone?)"; exit 77; }

# A mounted test is a script that asks for a mount (t_require_root_fuse, or
# t_require_torch, which calls it).
bad=() mounted=0 ran=0
for t in "${trs[@]}"; do
	log=${t%.trs}.log
	sh=$top_srcdir/tests/$(basename "$t" .trs).sh
	grep -Eq 't_require_(root_fuse|torch)' "$sh" 2>/dev/null || continue
	mounted=$((mounted + 1))
	[ -f "$t" ] || { bad+=("${log##*/}: no result"); continue; }
	if grep -Eq '^\[[A-Za-z0-9_]+\] SKIP: (needs root|no /dev/fuse|fusermount3 not installed|daemon not built|mkfs not built)' "$log"; then
		bad+=("${log##*/}: $(grep -Em1 '^\[[A-Za-z0-9_]+\] SKIP: ' "$log")")
	elif grep -q '^:test-result: PASS' "$t"; then
		ran=$((ran + 1))
	fi
done
if [ ${#bad[@]} -gt 0 ]; then
	say "FAIL: running as root with /dev/fuse, ${#bad[@]} mounted test(s) skipped for want of a mount:"
	printf '  %s\n' "${bad[@]}"
	exit 1
fi
if [ "$mounted" -gt 0 ] && [ "$ran" = 0 ]; then
	say "FAIL: none of the $mounted mounted tests of this run passed (they all skipped or failed)"
	exit 1
fi
say "$ran of $mounted mounted tests passed in this run; none skipped for want of root, /dev/fuse, fusermount3 or the binaries"
say "PASS"
