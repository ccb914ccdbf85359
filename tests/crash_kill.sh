#!/bin/bash
# Description: kill -9 of the daemon during fsync'd creates/replaces/renames/unlinks/
# overwrites/truncates, then remount: every op logged as durable (after its fsync returned)
# is intact, the op in flight is all-or-nothing; periodic commit= makes unsynced writes
# durable; a file unlinked while open at the crash is deleted at the next mount; kill -9
# while mounting (replay/compaction) loses nothing. After every crash of the workload
# rounds, dmafs-fsck --scrub finds the members clean (metadata and data checksums).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
ROUNDS=${CRASH_ROUNDS:-4}
t_workdir
t_images 2 512M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
H="$top_srcdir/tests/t_helpers.py"

verify_all() {
	local k
	for ((k = 1; k <= $1; k++)); do
		t_py "$H" crash-verify "$M/round$k" "$T_WORK/log$k" || t_fail "round $k: durable ops lost after kill -9 (see above)"
	done
}

for ((r = 1; r <= ROUNDS; r++)); do
	# commit=3600: only fsync may make these ops durable.
	t_mount "$T_MEMBERS" "$M" commit=3600
	[ $r -gt 1 ] && verify_all $((r - 1))
	"$T_PY" "$H" crash-work "$M/round$r" "$T_WORK/log$r" "$r" &
	wpid=$!
	t_register pid "$wpid"
	# The kill comes once the workload has made a number of ops durable (seeded, 50 to
	# 600): poll its log for that, 60 s at most.
	want=$(t_py -c "import random; random.seed($r); print(random.randint(50, 600))")
	n=0
	while done=$(grep -c '^D' "$T_WORK/log$r" 2>/dev/null); [ "${done:-0}" -lt "$want" ]; do
		t_running "$wpid" || { tail -3 "$T_WORK/log$r"; t_fail "workload died before the kill"; }
		((n++ < 600)) || t_fail "round $r: the workload made fewer than $want ops durable in 60 s"
		sleep 0.1
	done
	t_log "round $r: kill -9 the daemon during the workload ($(grep -c '^D' "$T_WORK/log$r") ops durable so far)"
	t_crash "$M"
	wait "$wpid"
	[ "$(grep -c '^D' "$T_WORK/log$r")" -gt 5 ] || t_fail "round $r: workload completed too few ops to test anything"
	# Metadata and every block's checksum as the crash left them. The one finding a kill
	# may leave is a log copy without the batch being written when the daemon died (both
	# copies are written at once, and the batch counts only once both are durable): the
	# next mount brings that copy up to date, which the check after this round's unmount
	# proves.
	"$top_builddir/tools/dmafs-fsck" --scrub "${T_IMGS[@]}" >"$T_WORK/fsck.out" 2>&1
	rc=$?
	if [ $rc != 0 ]; then
		[ $rc = 4 ] && [ "$(grep -c '^ERROR' "$T_WORK/fsck.out")" = 1 ] &&
			grep -q '^ERROR: metadata log copy on member [0-9]* (.*) is behind the other copy$' "$T_WORK/fsck.out" &&
			grep -q '^dmafs-fsck: 1 problem found, 0 fixed$' "$T_WORK/fsck.out" ||
			t_fail "round $r: dmafs-fsck --scrub after the kill exited $rc: $(cat "$T_WORK/fsck.out")"
		t_log "round $r: the kill came during a commit: one log copy lacks its last batch"
	fi
	t_mount "$T_MEMBERS" "$M" commit=3600
	verify_all $r
	t_log "round $r: filesystem usable after recovery (write, fsync, delete)"
	head -c 1000000 /dev/urandom >"$T_WORK/after" || t_fail "urandom"
	cp "$T_WORK/after" "$M/after$r" || t_fail "round $r: write after recovery"
	sync -f "$M/after$r" || t_fail "round $r: fsync after recovery"
	cmp "$T_WORK/after" "$M/after$r" || t_fail "round $r: file written after recovery reads back different"
	rm "$M/after$r" || t_fail "rm after recovery"
	t_umount "$M"
	t_fsck 0 "${T_IMGS[@]}"   # both log copies agree again after a mount and unmount
done

t_log "periodic commit: unsynced files written with commit=1 survive kill -9 after the next commit"
t_mount "$T_MEMBERS" "$M" commit=1
mkdir "$M/periodic" || t_fail "mkdir"
for i in $(seq 1 20); do head -c $((i * 7777)) /dev/urandom >"$M/periodic/p$i" || t_fail "write p$i"; done
(cd "$M/periodic" && sha256sum p*) >"$T_WORK/periodic.sums" || t_fail "sha256sum of the periodic files"
# A file created after them: once its name is in both metadata log copies, a commit that
# began after the last write is durable (no sync: the periodic commit alone must do it).
: >"$M/commit-mark" || t_fail "create commit-mark"
t_py "$H" wait-commit 10 commit-mark "${T_IMGS[0]}" "${T_IMGS[1]}" ||
	t_fail "no commit with commit=1 within 10 s of the writes"
t_crash "$M"
t_mount "$T_MEMBERS" "$M" commit=1
(cd "$M/periodic" && sha256sum -c --quiet "$T_WORK/periodic.sums") ||
	t_fail "files written 4 s before kill -9 with commit=1 lost or damaged"

t_log "unlinked-while-open file at kill -9 is deleted at the next mount (space comes back)"
sync -f "$M" 2>/dev/null
free0=$(t_free_bytes "$M")
"$T_PY" "$H" hold-unlinked "$M/held" $((64 * 1024 * 1024)) "$T_WORK/held.ready" &
hpid=$!
t_register pid "$hpid"
n=0
while [ ! -e "$T_WORK/held.ready" ]; do
	kill -0 $hpid 2>/dev/null || t_fail "hold-unlinked helper died"
	((n++ < 300)) || t_fail "hold-unlinked helper not ready after 30 s"
	sleep 0.1
done
[ ! -e "$M/held" ] || t_fail "unlinked name still visible"
free1=$(t_free_bytes "$M")
[ "$free1" -le $((free0 - 60 * 1024 * 1024)) ] || t_fail "64 MiB open unlinked file does not use space ($free0 -> $free1)"
t_crash "$M"
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null
t_mount "$T_MEMBERS" "$M" commit=1
n=0
while [ "$(t_free_bytes "$M")" -lt $((free0 - 2 * 1024 * 1024)) ]; do
	((n++ < 100)) || t_fail "space of the unlinked-open file not reclaimed at mount: free $free0 before, $(t_free_bytes "$M") now"
	sleep 0.1
done
verify_all "$ROUNDS"
t_umount "$M"

t_log "kill -9 during mount (log replay / compaction into the other half), 30 times, 0.3..9 ms after start"
early=0
for i in $(seq 1 30); do
	"$DMAFS" -f "$T_MEMBERS" "$M" 2>/dev/null &
	dpid=$!
	t_register pid "$dpid"
	# The mount itself takes milliseconds: aim the kills inside it.
	sleep "$(printf '0.%04d' $((i * 3)))"
	kill -9 "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null
	if t_is_mounted "$M"; then
		fusermount3 -u -z "$M" 2>/dev/null || umount -l "$M"
	else
		early=$((early + 1))
	fi
done
t_log "  $early of 30 kills landed before the mount was up"
t_mount "$T_MEMBERS" "$M"
verify_all "$ROUNDS"
(cd "$M/periodic" && sha256sum -c --quiet "$T_WORK/periodic.sums") || t_fail "periodic files after mount-time kills"
t_umount "$M"
t_log "PASS"
