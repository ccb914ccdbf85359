#!/bin/bash
# Description: progress bars redraw a few times a second, say GB/s and the time left, end
# by clearing their line, and stay off when standard error is not a terminal:
# dmafs-fsck --scrub of a 384 MiB file, under script(1) (a terminal) and into a file.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
command -v script >/dev/null || t_skip "script(1) not installed (util-linux)"
t_workdir
M=$T_WORK/mnt
t_images 2 512M
t_mkfs "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
head -c 384M /dev/urandom >"$M/big" || t_fail "writing the file failed"
t_umount "$M"
FSCK=$top_builddir/tools/dmafs-fsck

t0=$(date +%s.%N)
script -qec "$FSCK --scrub ${T_IMGS[*]}" "$T_WORK/tty.out" >/dev/null || t_fail "dmafs-fsck --scrub under script(1) failed"
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
draws=$(tr '\r' '\n' <"$T_WORK/tty.out" | grep -c '^scrub \[')
t_log "scrub on a terminal: $draws redraws in $secs s"
[ "$draws" -ge 1 ] || t_fail "no progress bar on a terminal: $(head -c 300 "$T_WORK/tty.out")"
awk -v d="$draws" -v s="$secs" 'BEGIN { exit !(d <= 5 * s + 3) }' ||
	t_fail "$draws redraws in $secs s: more than five a second"
tr '\r' '\n' <"$T_WORK/tty.out" | grep '^scrub \[' | tail -1 | grep -q 'GB/s' ||
	t_fail "the bar does not give the rate: $(tr '\r' '\n' <"$T_WORK/tty.out" | grep '^scrub \[' | tail -1)"
"$FSCK" --scrub "${T_IMGS[@]}" >"$T_WORK/plain.out" 2>&1 || t_fail "dmafs-fsck --scrub failed"
grep -q $'\r' "$T_WORK/plain.out" && t_fail "a bar was drawn into a file: $(head -c 300 "$T_WORK/plain.out")"

# dmafs-bench's long steps (member files, file sets, shards) draw the same way: rig.Progress
cat >"$T_WORK/bar.py" <<'PY'
import sys, time
sys.path.insert(0, sys.argv[1])
from dmafs_bench import rig
bar = rig.Progress("writing x", 1000)
for i in range(0, 1001, 20):
    bar.update(i)
    time.sleep(0.02)
bar.end()
PY
script -qec "$T_PY $T_WORK/bar.py $top_srcdir/tools" "$T_WORK/bench.out" >/dev/null || t_fail "the bench's progress line under script(1) failed"
draws=$(tr '\r' '\n' <"$T_WORK/bench.out" | grep -c 'writing x: [0-9,]* of 1,000 MiB.*MiB/s.*s left')
t_log "dmafs-bench's progress line on a terminal: $draws redraws in about 1 s"
[ "$draws" -ge 2 ] && [ "$draws" -le 9 ] || t_fail "$draws redraws of the bench's line in about 1 s (want 2 to 9): $(head -c 300 "$T_WORK/bench.out")"
$T_PY "$T_WORK/bar.py" "$top_srcdir/tools" >"$T_WORK/bench.plain" 2>&1 || t_fail "the bench's progress line into a file failed"
[ -s "$T_WORK/bench.plain" ] && t_fail "the bench drew a progress line into a file: $(head -c 300 "$T_WORK/bench.plain")"
t_log "PASS"
