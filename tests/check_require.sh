#!/bin/bash
# Description: dmafs-check --require p2p|staged|host on a real mount: exit 0 when that path
# or a faster one is available for at least one target, 1 when not (as the report's own
# placement paths and require_met say), for the mount point and a file on it; 1 off dmafs
# (posix never meets a requirement), also on the mount point once unmounted; 2 for a bad
# path name, no mount given, or a path that does not exist.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
CHECK=$top_builddir/tools/dmafs-check
[ -x "$CHECK" ] || t_skip "dmafs-check not built: $CHECK"
t_workdir
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
echo data >"$M/f" || t_fail "write $M/f"

# best PATH - the fastest placement path of any target in dmafs-check --json PATH
best() {
	"$CHECK" --json "$1" >"$T_WORK/check.json" || t_fail "dmafs-check --json $1 exited $?"
	t_py -c '
import json, sys
rank = {"p2p": 3, "p2p-compat": 2, "staged": 2, "host": 1}
m = json.load(open(sys.argv[1]))["mount"]
paths = [t["path"] for t in m.get("placement", {}).values()] if m.get("on_dmafs") else []
print(max([rank.get(p, 0) for p in paths] + [0]))' "$T_WORK/check.json" ||
		t_fail "dmafs-check --json $1: not the report dmafs-check(1) describes: $(cat "$T_WORK/check.json")"
}

# require WHAT PATH WANT - dmafs-check --require WHAT PATH exits WANT, and --json says
# require_met accordingly
require() {
	local what=$1 path=$2 want=$3 rc met
	"$CHECK" --require "$what" "$path" >"$T_WORK/req.out" 2>&1
	rc=$?
	[ $rc = "$want" ] || t_fail "dmafs-check --require $what $path exited $rc, expected $want: $(cat "$T_WORK/req.out")"
	"$CHECK" --json --require "$what" "$path" >"$T_WORK/req.json" 2>/dev/null
	[ $? = "$want" ] || t_fail "dmafs-check --json --require $what $path: exit status differs from without --json"
	met=$(t_py -c 'import json, sys; print(json.load(open(sys.argv[1]))["require_met"])' "$T_WORK/req.json") ||
		t_fail "dmafs-check --json --require $what $path: no require_met: $(cat "$T_WORK/req.json")"
	if [ "$want" = 0 ]; then [ "$met" = True ]; else [ "$met" = False ]; fi ||
		t_fail "dmafs-check --json --require $what $path: require_met $met with exit status $want"
	t_log "  --require $what $path: exit $rc, require_met $met"
}

b=$(best "$M")
t_log "on the mount, the fastest placement path is rank $b (3 p2p, 2 staged, 1 host)"
[ "$b" -ge 1 ] || t_fail "dmafs-check finds no placement path on a dmafs mount: $(cat "$T_WORK/check.json")"
for p in "$M" "$M/f"; do
	i=3
	for what in p2p staged host; do
		if [ "$b" -ge $i ]; then require "$what" "$p" 0; else require "$what" "$p" 1; fi
		i=$((i - 1))
	done
done

t_log "off dmafs: the posix fallback meets no requirement"
echo data >"$T_WORK/off" || t_fail "write $T_WORK/off"
for what in p2p staged host; do require "$what" "$T_WORK/off" 1; done
"$CHECK" "$T_WORK/off" >"$T_WORK/off.out" 2>&1 || t_fail "dmafs-check $T_WORK/off exited $?"
grep -q posix "$T_WORK/off.out" || t_fail "dmafs-check off dmafs does not name the posix path: $(cat "$T_WORK/off.out")"

t_log "errors: exit 2"
err() {
	local rc
	"$CHECK" "$@" >"$T_WORK/err.out" 2>&1
	rc=$?
	[ $rc = 2 ] || t_fail "dmafs-check $* exited $rc, expected 2: $(cat "$T_WORK/err.out")"
	grep -q "^dmafs-check: " "$T_WORK/err.out" || t_fail "dmafs-check $*: no message: $(cat "$T_WORK/err.out")"
	t_log "  dmafs-check $*: $(head -n 1 "$T_WORK/err.out")"
}
err --require fast "$M"
err --require host
err --require host "$T_WORK/nonexistent"

t_umount "$M"
t_log "the mount point after the unmount is off dmafs"
require host "$M" 1
t_log "PASS"
