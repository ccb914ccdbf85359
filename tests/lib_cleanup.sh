#!/bin/bash
# Description: t_lib.sh's cleanup kills the processes a test registered, and not a process
# that holds a registered pid number but started later (the number was reused).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
dir=$(cd "$(dirname "$0")" && pwd)
fail() {
	echo "[lib_cleanup] FAIL: $*"
	exit 1
}
mine= other=
trap '[ -n "$mine" ] && kill -9 "$mine" 2>/dev/null; [ -n "$other" ] && kill -9 "$other" 2>/dev/null' EXIT
sleep 300 &
mine=$!
sleep 300 &
other=$!
# A test that registers "mine" as its own and records "other" under a start time that
# process does not have, as when the registered process was reaped and "other" got its
# number; then it ends and t_cleanup runs.
bash -c '. "$1/t_lib.sh"; t_register pid "$2"; echo "pid $3 1" >>"$T_STATE"; exit 0' \
	lib_cleanup "$dir" "$mine" "$other" || fail "the test sourcing t_lib.sh exited $?"
kill -0 "$other" 2>/dev/null || fail "t_cleanup killed pid $other, which started after the recorded process"
n=100
while ! grep -q '^State:[[:space:]]*Z' "/proc/$mine/status" 2>/dev/null && kill -0 "$mine" 2>/dev/null; do
	((n-- > 0)) || fail "t_cleanup left the registered process $mine running"
	sleep 0.1
done
wait "$mine"
rc=$?
mine=
[ $rc = 137 ] || fail "the registered process ended with status $rc, expected 137 (SIGKILL)"
echo "[lib_cleanup] registered process killed; the one with a reused number left alone"
echo "[lib_cleanup] PASS"
