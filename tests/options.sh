#!/bin/bash
# Description: daemon mount options: fstab noise accepted, fsname= shown as the source,
# readahead_kb= (default 16384) applied to the mount's bdi, max_background= (default 256)
# to the FUSE connection, threads=1 under concurrent I/O,
# the default number of worker threads (2 per CPU of the daemon's affinity, 4..16),
# attr/entry_timeout=0, no access for other users without allow_other, unknown option and
# missing mount point refused, `umount MNT` ends a -f daemon with status 0.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir
chmod 0755 "$T_WORK"
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt

# ra_is MNT KB - wait up to 3 s for the mount's bdi read_ahead_kb to become KB.
ra_is() {
	local dev f n=30
	dev=$(mountpoint -d "$1") || t_fail "mountpoint -d $1"
	f=/sys/class/bdi/$dev/read_ahead_kb
	[ -r "$f" ] || t_skip "no $f to check readahead"
	while [ "$(cat "$f")" != "$2" ]; do
		((n-- > 0)) || t_fail "read_ahead_kb of $1 ($f) is $(cat "$f"), expected $2"
		sleep 0.1
	done
}

# bg_is MNT N - the kernel keeps at most N asynchronous requests in flight to the daemon
# of MNT (the FUSE connection's max_background, which the daemon gives at its start)
bg_is() {
	local dev f
	dev=$(mountpoint -d "$1") || t_fail "mountpoint -d $1"
	f=/sys/fs/fuse/connections/${dev#*:}/max_background
	# fusectl comes with the fuse module; a machine may not have it mounted yet
	[ -r "$f" ] || mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true
	[ -r "$f" ] || t_skip "no $f (fusectl) to check max_background"
	[ "$(cat "$f")" = "$2" ] || t_fail "max_background of $1 ($f) is $(cat "$f"), expected $2"
}

t_log "fstab noise options are accepted"
t_mount "$T_MEMBERS" "$M" defaults,auto,noauto,user,nouser,nofail,_netdev,exec,suid,nosuid,dev,nodev,atime,noatime,relatime,rw,default_permissions
echo x >"$M/f" && [ "$(cat "$M/f")" = x ] || t_fail "I/O on mount with fstab noise options"
t_log "default readahead_kb is 16384, max_background 256"
ra_is "$M" 16384
bg_is "$M" 256
t_log "without allow_other another user cannot enter the mount"
if command -v setpriv >/dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups -- ls "$M" >/dev/null 2>&1 &&
		t_fail "uid 65534 can list a mount made without allow_other"
fi
t_umount "$M"

t_log "fsname=NAME is the source in /proc/mounts; readahead_kb=4096, max_background=100 applied"
t_mount "$T_MEMBERS" "$M" fsname=bigdata,readahead_kb=4096,max_background=100
src=$(awk -v m="$M" '$2 == m {print $1}' /proc/mounts | tail -n 1)
[ "$src" = bigdata ] || t_fail "fsname=bigdata: /proc/mounts source is '$src'"
ra_is "$M" 4096
bg_is "$M" 100
t_umount "$M"

# threads_are N - the daemon of the last t_mount (-o verbose) says it serves with N threads
threads_are() {
	grep -q "serving FUSE requests with $1 worker threads" "$T_DAEMON_ERR" ||
		t_fail "expected $1 worker threads; the daemon said: $(grep -i 'worker threads' "$T_DAEMON_ERR")"
}
if command -v taskset >/dev/null; then
	ncpu=$(nproc --all)
	t_log "default worker threads: 4 on 1 CPU, 6 on 3, 16 on 8 (CPU affinity)"
	mask=$(taskset -p $$ | awk '{ print $NF }')
	for c in 1 3 8; do
		((c <= ncpu)) || continue
		# the daemon inherits this shell's affinity
		taskset -p -c 0-$((c - 1)) $$ >/dev/null || t_fail "taskset -p -c 0-$((c - 1)) $$"
		t_mount "$T_MEMBERS" "$M" verbose
		taskset -p "$mask" $$ >/dev/null || t_fail "taskset -p $mask $$"
		case $c in 1) threads_are 4 ;; 3) threads_are 6 ;; 8) threads_are 16 ;; esac
		t_umount "$M"
	done
fi
t_log "threads=7 is taken as given"
t_mount "$T_MEMBERS" "$M" verbose,threads=7
threads_are 7
t_umount "$M"

t_log "threads=1, attr_timeout=0, entry_timeout=0: concurrent writers and readers finish"
t_mount "$T_MEMBERS" "$M" threads=1,attr_timeout=0,entry_timeout=0
head -c $((24 * 1024 * 1024)) /dev/urandom >"$T_WORK/ref"
pids=()
for i in 1 2 3 4; do
	timeout 120 dd if="$T_WORK/ref" of="$M/w$i" bs=64K conv=fsync status=none &
	pids+=($!)
done
for i in 1 2 3 4; do timeout 120 cat "$T_WORK/ref" >/dev/null & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || t_fail "concurrent I/O with threads=1 failed or hung"; done
for i in 1 2 3 4; do cmp "$T_WORK/ref" "$M/w$i" || t_fail "w$i differs"; done
mv "$M/w1" "$M/w1b" && [ -e "$M/w1b" ] && [ ! -e "$M/w1" ] || t_fail "rename seen at once with entry_timeout=0"
t_umount "$M"

t_log "unknown option, out-of-range values and missing mount point are refused"
if "$DMAFS" -o no_such_option_xyz "$T_MEMBERS" "$M" 2>"$T_WORK/err"; then
	t_is_mounted "$M" && fusermount3 -u "$M"
	t_fail "unknown option accepted"
fi
t_is_mounted "$M" && t_fail "mounted despite an unknown option"
grep -q "no_such_option_xyz" "$T_WORK/err" && grep -q "dmafs --help" "$T_WORK/err" ||
	t_fail "the message for an unknown option names neither it nor where to look: $(cat "$T_WORK/err")"
for bad in "copy_delay_us=100001:want 0 to 100000" "staging_mb=3:want 4 to 65536" "commit=-1:want 1 to 3600" \
	"max_background=0:want 1 to 65535" "max_background=65536:want 1 to 65535"; do
	opt=${bad%%:*}
	if "$DMAFS" -o "$opt" "$T_MEMBERS" "$M" 2>"$T_WORK/err"; then
		t_is_mounted "$M" && fusermount3 -u "$M"
		t_fail "-o $opt accepted"
	fi
	# the option as given and its own range, not a list of every option's
	grep -q "$opt: ${bad#*:}" "$T_WORK/err" && [ "$(wc -l <"$T_WORK/err")" = 1 ] ||
		t_fail "-o $opt: the message does not name the option and its range alone: $(cat "$T_WORK/err")"
done
"$DMAFS" "$T_MEMBERS" "$T_WORK/no/such/dir" 2>"$T_WORK/err" && t_fail "mount on a missing mount point succeeded"
[ -s "$T_WORK/err" ] || t_fail "no message for a missing mount point"

t_log "umount(8) of a -f daemon: it commits and exits 0"
t_mount_fg "$T_MEMBERS" "$M"
echo y >"$M/g" || t_fail write
umount "$M" || t_fail "umount $M"
wait "$T_DAEMON_PID"
rc=$?
[ $rc = 0 ] || t_fail "daemon exit status $rc after umount: $(cat "$T_DAEMON_ERR")"
t_mount "$T_MEMBERS" "$M" ro
[ "$(cat "$M/g")" = y ] || t_fail "file written before umount(8) lost"
t_umount "$M"
t_log "PASS"
