#!/bin/bash
# Description: the metadata log limits the number of files, and that is visible and
# chosen: mkfs.dmafs --log-size sizes each log half (refused below 4M or above a quarter
# of members 0 and 1, with the largest allowed named); df -i estimates the free inodes
# from the log's room; filling a 4M log with 4 KiB files ends in ENOSPC while data space
# is free, the daemon says once why, df -i shows (almost) no free inodes, a removal makes
# room again, and everything made is intact after a remount and fsck. A 16M log holds
# about four times as many files.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
M=$T_WORK/mnt
t_images 2 512M

out=$("$MKFS" -f --log-size 3M "${T_IMGS[@]}" 2>&1) && t_fail "--log-size 3M accepted"
echo "$out" | grep -q "at least 4M" || t_fail "--log-size 3M: unexpected message: $out"
out=$("$MKFS" -f --log-size 200M "${T_IMGS[@]}" 2>&1) && t_fail "--log-size 200M on 512M members accepted"
echo "$out" | grep -q "the largest is 128.0 MiB" || t_fail "--log-size 200M: unexpected message: $out"

# fill: make 4 KiB files until ENOSPC; prints the count made
cat >"$T_WORK/fill.py" <<'PY'
import errno, os, sys
root, n = sys.argv[1], 0
os.makedirs(root, exist_ok=True)
data = b"f" * 4096
try:
    while True:
        d = os.path.join(root, "d%04d" % (n // 1000))
        if n % 1000 == 0:
            os.mkdir(d)
        fd = os.open(os.path.join(d, "f%07d" % n), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        n += 1
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
print(n)
PY

made=()
for ls in 4M 16M; do
	out=$("$MKFS" -f --log-size $ls "${T_IMGS[@]}") || t_fail "mkfs --log-size $ls failed"
	echo "$out" | grep -q "room for about" || t_fail "mkfs does not say how many files fit: $out"
	t_mount_fg "$T_MEMBERS" "$M" # its log on stderr, in $T_DAEMON_ERR
	ifree0=$(stat -f -c %d "$M")
	n=$("$T_PY" "$T_WORK/fill.py" "$M/set") || t_fail "log $ls: filling failed"
	free=$(t_free_bytes "$M")
	ifree=$(stat -f -c %d "$M")
	itotal=$(stat -f -c %c "$M")
	t_log "log $ls: $n files of 4 KiB before ENOSPC; df -i said $ifree0 free at first, $ifree of $itotal now; $free bytes of data space free"
	[ "$free" -gt $((64 << 20)) ] || t_fail "log $ls: data space ran out first ($free bytes free): the test does not fill the log"
	[ "$ifree" -le $((itotal / 20)) ] || t_fail "log $ls: df -i shows $ifree of $itotal inodes free with the log full"
	# the estimate at mkfs time is within a factor 2 of what fit
	[ "$ifree0" -le $((2 * n)) ] && [ "$ifree0" -ge $((n / 2)) ] ||
		t_fail "log $ls: df -i estimated $ifree0 free inodes on the empty filesystem, $n fit"
	c=$(grep -c "the metadata log is full" "$T_DAEMON_ERR")
	[ "$c" = 1 ] || t_fail "log $ls: the daemon said 'the metadata log is full' $c times (want once): $(tail -3 "$T_DAEMON_ERR")"
	rm -rf "$M/set/d0000"
	echo again >"$M/after-rm" || t_fail "log $ls: no file can be made after removing 1000"
	made+=("$n")
	t_umount "$M"
	t_mount "$T_MEMBERS" "$M"
	have=$(find "$M/set" -type f | wc -l)
	[ "$have" = $((n - 1000)) ] || t_fail "log $ls: $have files after a remount, expected $((n - 1000))"
	[ "$(cat "$M/after-rm")" = again ] || t_fail "log $ls: the file made after the removal reads wrong"
	t_umount "$M"
	t_fsck 0 "${T_IMGS[@]}"
done
[ "${made[1]}" -ge $((3 * ${made[0]})) ] ||
	t_fail "a 16M log took ${made[1]} files, a 4M log ${made[0]}: expected about four times as many"
t_log "PASS"
