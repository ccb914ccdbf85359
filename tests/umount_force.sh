#!/bin/bash
# Description: umount -f of a dmafs mount runs the helper (umount.dmafs, or
# umount.fuse.dmafs when the mount has no utab entry), which cuts the FUSE connection
# (MNT_FORCE) and waits for the daemon: when it returns the daemon is gone, the members
# are free, and what the daemon held (written, never synced, commit=3600) was committed.
# A daemon that no longer answers (stopped with SIGSTOP): umount -f unmounts and waits
# until the daemon can run and finish; with a request blocked on it, that request fails
# once umount -f cuts the connection, the mount stays busy (exit 32, said), the daemon
# finishes when continued and umount -l detaches the dead mount. The filesystem is clean
# and keeps every file after each.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_umount_helpers

t_workdir
t_images 2 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt

# after WHAT PIDS - right after an unmount that waited: no daemon, not mounted, no
# process holds a member image open
after() {
	local what=$1 pids=$2 p
	for p in $pids; do t_running "$p" && t_fail "$what: daemon $p still running after it returned"; done
	t_is_mounted "$M" && t_fail "$what: $M still mounted"
	for p in /proc/[0-9]*/fd/*; do
		case $(readlink "$p" 2>/dev/null) in "${T_IMGS[0]}" | "${T_IMGS[1]}") t_fail "$what: $p still holds a member" ;; esac
	done
	return 0
}

# wait_child PID SECONDS - wait for a child of this shell (failing the test after
# SECONDS) and return its exit status
wait_child() {
	local n=$(($2 * 10))
	while t_running "$1"; do
		((n-- > 0)) || t_fail "process $1 still running after $2 s"
		sleep 0.1
	done
	wait "$1"
}

# write_some TAG - files written and never synced; their sums in $T_WORK/sums.TAG
write_some() {
	mkdir "$M/$1" || t_fail "mkdir $1"
	for i in 1 2 3 4 5; do head -c $((i * 300001)) /dev/urandom >"$M/$1/f$i" || t_fail "write $1/f$i"; done
	(cd "$M/$1" && sha256sum -- *) >"$T_WORK/sums.$1" || t_fail "sha256sum $1"
}

# check_kept TAG... - remount, every file of the TAGs is there; unmount
check_kept() {
	local tag
	t_fsck 0 "${T_IMGS[@]}"
	t_mount "$T_MEMBERS" "$M"
	for tag in "$@"; do
		(cd "$M/$tag" && sha256sum -c --quiet "$T_WORK/sums.$tag") || t_fail "files written before umount -f ($tag) lost or damaged"
	done
	t_umount "$M"
}

t_log "umount -f -v through umount.dmafs (the daemon's utab entry names the helper)"
t_mount "$T_MEMBERS" "$M" commit=3600
pids=$(t_daemon_pids "$M")
grep -q "TARGET=$M .*helper=dmafs" /run/mount/utab 2>/dev/null ||
	t_fail "no helper=dmafs entry for $M in /run/mount/utab: $(cat /run/mount/utab 2>&1)"
write_some a
umount -f -v "$M" >"$T_WORK/umount.out" 2>&1 || t_fail "umount -f $M exited $?: $(cat "$T_WORK/umount.out")"
grep -q "^umount.dmafs: $M: served by dmafs daemon $pids " "$T_WORK/umount.out" ||
	t_fail "umount -f did not run umount.dmafs for daemon $pids: $(cat "$T_WORK/umount.out")"
after "umount -f" "$pids"
check_kept a

t_log "umount -f -v through umount.fuse.dmafs (no utab entry)"
t_mount "$T_MEMBERS" "$M" commit=3600
pids=$(t_daemon_pids "$M")
write_some b
umount --fake -i "$M" || t_fail "umount --fake -i (drops the utab entry)"
t_is_mounted "$M" || t_fail "umount --fake unmounted $M"
umount -f -v "$M" >"$T_WORK/umount.out" 2>&1 || t_fail "umount -f $M exited $?: $(cat "$T_WORK/umount.out")"
grep -q "^umount.fuse.dmafs: $M: served by dmafs daemon $pids " "$T_WORK/umount.out" ||
	t_fail "umount -f without the utab entry did not run umount.fuse.dmafs: $(cat "$T_WORK/umount.out")"
after "umount -f (umount.fuse.dmafs)" "$pids"
check_kept a b

t_log "a stopped daemon: umount -f unmounts and waits until it can run and finish"
t_mount "$T_MEMBERS" "$M" commit=3600
pids=$(t_daemon_pids "$M")
write_some c
t_stop $pids
umount -f -v "$M" >"$T_WORK/umount.out" 2>&1 &
upid=$!
# until the kernel mount is gone (the connection cut, the unmount done), then a while more
n=0
while t_is_mounted "$M"; do
	((n++ < 100)) || { kill -CONT $pids; t_fail "umount -f of a stopped daemon's mount: still mounted after 10 s: $(cat "$T_WORK/umount.out")"; }
	sleep 0.1
done
sleep 1
t_running "$upid" || { kill -CONT $pids; t_fail "umount -f returned while the daemon was stopped: $(cat "$T_WORK/umount.out")"; }
kill -CONT $pids || t_fail "kill -CONT $pids"
wait_child "$upid" 60 || t_fail "umount -f of the stopped daemon's mount exited $?: $(cat "$T_WORK/umount.out")"
after "umount -f of a stopped daemon" "$pids"
check_kept a b c

t_log "a request blocked on a stopped daemon: umount -f cuts the connection, the request fails, the"
t_log "  busy mount stays (exit 32, says so); the daemon finishes once continued, umount -l detaches"
t_mount "$T_MEMBERS" "$M" commit=3600
pids=$(t_daemon_pids "$M")
write_some d
t_stop $pids
# a request the stopped daemon cannot answer (a name the kernel has not looked up)
stat "$M/d/never-looked-up" >"$T_WORK/stat.out" 2>&1 &
spid=$!
n=0
# until it waits in FUSE's request path (2 s at most: blocked, or about to be, by then)
until case $(cat "/proc/$spid/wchan" 2>/dev/null) in *request* | *fuse*) true ;; *) false ;; esac; do
	((n++ < 20)) || break
	sleep 0.1
done
t_running "$spid" || { kill -CONT $pids; t_fail "stat on the stopped daemon's mount returned: $(cat "$T_WORK/stat.out")"; }
umount -f "$M" >"$T_WORK/umount.out" 2>&1
rc=$?
[ $rc = 32 ] || { kill -CONT $pids; t_fail "umount -f with a request in flight exited $rc, expected 32: $(cat "$T_WORK/umount.out")"; }
grep -q "target is busy (the daemon's connection was aborted" "$T_WORK/umount.out" ||
	{ kill -CONT $pids; t_fail "umount -f does not say the mount is busy and the connection aborted: $(cat "$T_WORK/umount.out")"; }
t_log "  umount -f: $(tail -n 1 "$T_WORK/umount.out")"
wait_child "$spid" 10 && { kill -CONT $pids; t_fail "the blocked stat succeeded: $(cat "$T_WORK/stat.out")"; }
t_log "  the blocked request: $(head -n 1 "$T_WORK/stat.out")"
kill -CONT $pids || t_fail "kill -CONT $pids"
for p in $pids; do
	n=0
	while t_running "$p"; do
		((n++ < 600)) || t_fail "daemon $p still running 60 s after its connection was aborted"
		sleep 0.1
	done
done
umount -l "$M" || t_fail "umount -l of the dead mount"
after "umount -f with a request in flight, then umount -l" "$pids"
check_kept a b c d
t_log "PASS"
