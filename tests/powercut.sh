#!/bin/bash
# Description: power-cut emulation. The daemon runs in the foreground (pid known) under
# the t_helpers.py crash workload (fsync'd creates, replaces, renames, unlinks, in-place
# overwrites, truncates, hard links, xattrs, symlinks, mkdirs; each op logged as durable
# once its fsync returned). N times (POWERCUT_ROUNDS, default 12; more, up to 3 N, until
# two rounds have come after the metadata log moved) at a random moment the daemon is
# frozen with SIGSTOP, every member image is copied (cp --sparse=always) and the
# workload's log is snapshotted, then SIGCONT. SIGSTOP freezes the daemon at an arbitrary
# point, between any two of its writes, so each copy is what a power cut at that moment
# would leave: the daemon writes the member images with O_DIRECT and holds nothing that an
# acknowledged fsync depends on, so every write acknowledged before the stop is in the
# images, and nothing after it is. Each copy must then pass dmafs-fsck --scrub (exit 0 or 1;
# 4 only if --repair then exits 0/1; every mapped block must match its checksum, which
# copy-on-write guarantees at any cut), mount, and hold every op the snapshot of the log says was
# durable (crash-verify: the op in flight may be all-or-nothing). From the middle round on,
# another process makes names until the metadata log has outgrown its halves and moved
# into the data region, and 10,000 more, while the cuts go on: the later copies are cut
# before, during and after the move.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
FSCK=$top_builddir/tools/dmafs-fsck
[ -x "$FSCK" ] || t_skip "dmafs-fsck not built"
command -v cp >/dev/null || t_skip "cp missing"
ROUNDS=${POWERCUT_ROUNDS:-12}
H="$top_srcdir/tests/t_helpers.py"
t_workdir
t_images 2 "${POWERCUT_IMG_SIZE:-256M}" # 512M over the mirror profile (half the capacity)
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
LOG=$T_WORK/work.log

# commit=3600: only fsync makes ops durable, so the log is the whole durability promise.
t_mount_fg "$T_MEMBERS" "$M" commit=3600
"$T_PY" "$H" crash-work "$M/w" "$LOG" 7 96 >"$T_WORK/work.out" 2>&1 &
wpid=$!
t_register pid "$wpid"
stopped=0
cont() { [ $stopped = 1 ] && kill -CONT "$T_DAEMON_PID" 2>/dev/null; stopped=0; }
trap 'rc=$?; cont; (exit $rc); t_cleanup' EXIT

ppid=
moved=0 # rounds cut since the log was seen moved
for ((r = 1; ; r++)); do
	# ROUNDS rounds, and more (up to 3 x ROUNDS) until two were cut after the move
	if [ $r -gt "$ROUNDS" ] && { [ $moved -ge 2 ] || [ $r -gt $((3 * ROUNDS)) ]; }; then
		break
	fi
	if [ $r = $((ROUNDS / 2 + 1)) ]; then
		# names until the log has moved, and 10,000 more (so that cuts fall after
		# the move too); at most 200,000 (the check after the rounds then fails)
		t_py -c '
import os, sys
d, err = sys.argv[1], sys.argv[2]
os.mkdir(d)
stop = 200000
for i in range(200000):
    if i == stop:
        break
    os.close(os.open(os.path.join(d, "name-long-enough-to-fill-the-metadata-log-%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
    if stop == 200000 and i % 1000 == 999 and "metadata log moved to two areas" in open(err, errors="replace").read():
        stop = i + 10000
' "$M/pre" "$T_DAEMON_ERR" &
		ppid=$!
		t_register pid "$ppid"
	fi
	sleep "$(t_py -c "import random; random.seed($r * 7919); print(round(random.uniform(0.2, 1.0), 2))")"
	kill -0 "$wpid" 2>/dev/null || { cat "$T_WORK/work.out"; tail -3 "$LOG"; df "$M"; df -i "$M"; grep -v splice "$T_DAEMON_ERR" | tail -5; t_fail "workload died (round $r)"; }
	stopped=1
	t_stop "$T_DAEMON_PID" # every thread stopped before the images are copied
	D=$T_WORK/round$r
	mkdir "$D" || t_fail "mkdir $D"
	for ((i = 0; i < ${#T_IMGS[@]}; i++)); do
		cp --sparse=always "${T_IMGS[$i]}" "$D/img$i" || t_fail "copy of member $i (round $r)"
	done
	# Snapshot the log while still stopped: every D line in it was written after its fsync
	# returned, i.e. before the stop; an op whose fsync returned but whose D line is not
	# written yet counts as in flight, which the verifier allows.
	cp "$LOG" "$D/log" || t_fail "copy of the log"
	cont
	n=$(grep -c "metadata log moved to two areas" "$T_DAEMON_ERR")
	[ "$n" -gt 0 ] && moved=$((moved + 1))
	t_log "round $r: power cut emulated, $(grep -c '^D' "$D/log") ops durable, $n moves of the log so far, $(df --output=pcent "$M" | tail -1 | tr -d " ") of the space used"
done
ROUNDS=$((r - 1))
wait "$ppid" || t_fail "making the names failed; $(df "$M" | tail -1); daemon: $(grep -v splice "$T_DAEMON_ERR" | tail -5)"
grep -q "metadata log moved to two areas" "$T_DAEMON_ERR" ||
	t_fail "the metadata log did not grow into the data region: $(tail -3 "$T_DAEMON_ERR")"
kill "$wpid" 2>/dev/null
wait "$wpid" 2>/dev/null
t_umount "$M"
wait "$T_DAEMON_PID" 2>/dev/null

for ((r = 1; r <= ROUNDS; r++)); do
	D=$T_WORK/round$r
	imgs=("$D"/img*)
	"$FSCK" --scrub "${imgs[@]}" >"$D/fsck.out" 2>&1
	rc=$?
	case $rc in
	0 | 1) ;;
	4)
		t_log "round $r: dmafs-fsck left errors (exit 4), trying --repair: $(head -3 "$D/fsck.out")"
		"$FSCK" --repair --scrub "${imgs[@]}" >"$D/fsck.out" 2>&1
		rc=$?
		[ $rc = 0 ] || [ $rc = 1 ] || t_fail "round $r: dmafs-fsck --repair exited $rc: $(cat "$D/fsck.out")"
		;;
	*) t_fail "round $r: dmafs-fsck exited $rc: $(cat "$D/fsck.out")" ;;
	esac
	[ "$(grep -c '^D' "$D/log")" -gt 0 ] || t_log "round $r: note: no op durable yet at the cut"
	t_mount "$(IFS=,; echo "${imgs[*]}")" "$D/mnt" commit=3600
	t_py "$H" crash-verify "$D/mnt/w" "$D/log" || t_fail "round $r: durable ops lost at the emulated power cut (see above)"
	t_umount "$D/mnt"
	rm -f "${imgs[@]}"
done
t_log "PASS"
