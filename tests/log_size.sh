#!/bin/bash
# Description: the number of files is bounded by the space, not by the log mkfs made:
# mkfs.dmafs --log-size sizes each log half (refused below 4M or above a quarter of
# members 0 and 1, with the largest allowed named); 4 KiB files fill a filesystem with a
# 4M log (about 26,000 files) until its data space is gone, the log moving into areas of
# the data region (said in the daemon's log); df -i estimates within a factor 2 at first
# and shows (almost) none free at the end; a removal makes room again; everything made is
# intact after a remount and fsck; once the files are removed, the log moves back into its
# halves at the next mount and all space is free again.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
M=$T_WORK/mnt
t_images 2 160M

out=$("$MKFS" -f --log-size 3M "${T_IMGS[@]}" 2>&1) && t_fail "--log-size 3M accepted"
echo "$out" | grep -q "at least 4M" || t_fail "--log-size 3M: unexpected message: $out"
out=$("$MKFS" -f --log-size 64M "${T_IMGS[@]}" 2>&1) && t_fail "--log-size 64M on 160M members accepted"
echo "$out" | grep -q "the largest is 40.0 MiB" || t_fail "--log-size 64M: unexpected message: $out"

# fill: make 4 KiB files until ENOSPC; prints the count made
cat >"$T_WORK/fill.py" <<'PY'
import errno, os, sys
root, n = sys.argv[1], 0
os.makedirs(root, exist_ok=True)
data = b"f" * int(sys.argv[2]) if len(sys.argv) > 2 else b"f" * 4096
try:
    while True:
        d = os.path.join(root, "d%04d" % (n // 1000))
        if n % 1000 == 0:
            os.mkdir(d)
        fd = os.open(os.path.join(d, "f%07d" % n), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            if data:
                os.write(fd, data)
        finally:
            os.close(fd)
        n += 1
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
print(n)
PY

# fill.py as written removes nothing: count the files and their bytes
count_set() { find "$M/set" -type f | wc -l; }

# A 4M log half holds about 26,000 such files; the log grows past it into areas of the
# data region, so the files go on until the data space itself runs out.
out=$("$MKFS" -f --log-size 4M "${T_IMGS[@]}") || t_fail "mkfs --log-size 4M failed"
echo "$out" | grep -q "room for about" || t_fail "mkfs does not say how many files fit: $out"
t_mount_fg "$T_MEMBERS" "$M" # its log on stderr, in $T_DAEMON_ERR
ifree0=$(stat -f -c %d "$M")
free0=$(t_free_bytes "$M")
n=$("$T_PY" "$T_WORK/fill.py" "$M/set") || t_fail "filling failed"
free=$(t_free_bytes "$M")
ifree=$(stat -f -c %d "$M")
itotal=$(stat -f -c %c "$M")
t_log "log 4M: $n files of 4 KiB before ENOSPC; df -i said $ifree0 free at first, $ifree of $itotal now; $free of $free0 bytes of data space free"
[ "$n" -ge 60000 ] || t_fail "only $n files of 4 KiB fit: the log did not grow past its 4M half (about 26,000)"
grep -q "metadata log moved to two areas" "$T_DAEMON_ERR" ||
	t_fail "the daemon did not say that the log moved into the data region: $(tail -3 "$T_DAEMON_ERR")"
# dmafs-check shows where the log is, in text and JSON
log_place() { "$top_builddir/tools/dmafs-check" --json "$M" | t_py -c 'import json, sys
l = json.load(sys.stdin)["mount"]["metadata_log"]
print(l["place"], l["size"], l["snapshot"], l["inodes"])'; }
read -r place lsize lsnap linodes < <(log_place)
[ "$place" = areas ] && [ "$lsize" -gt $((4 << 20)) ] && [ "$lsnap" -gt 0 ] && [ "$linodes" -gt 1000 ] ||
	t_fail "dmafs-check --json: metadata log '$place' size $lsize snapshot $lsnap inodes $linodes"
"$top_builddir/tools/dmafs-check" "$M" | grep -Eq "^ +metadata log +grown into two areas of [0-9.]+ MiB on members 0 and 1 \(last snapshot" ||
	t_fail "dmafs-check does not show the grown log: $("$top_builddir/tools/dmafs-check" "$M")"
# ENOSPC came because the data space ran out (files and log areas), not a fixed log
[ "$free" -lt $((free0 / 10)) ] || t_fail "ENOSPC with $free of $free0 bytes still free"
# df -i counts what empty files could still take (as xfs does): on the empty filesystem
# more than these files took; now what is left of the log's room, which empty files get
e=$("$T_PY" "$T_WORK/fill.py" "$M/empty" 0) || t_fail "filling with empty files failed"
t_log "then $e empty files (df -i said $ifree free)"
[ "$ifree0" -ge "$n" ] || t_fail "df -i estimated $ifree0 free inodes on the empty filesystem, $n files of 4 KiB fit"
[ "$e" -le $((2 * ifree + 100)) ] && [ "$e" -ge $((ifree / 2)) ] ||
	t_fail "df -i said $ifree inodes free with the data space full, $e empty files fit"
c=$(grep -c "the metadata log needs two areas" "$T_DAEMON_ERR")
[ "$c" = 1 ] || t_fail "the daemon said that the log cannot grow $c times (want once): $(tail -3 "$T_DAEMON_ERR")"
c=$(grep -c "the metadata log is full" "$T_DAEMON_ERR")
[ "$c" = 1 ] || t_fail "the daemon said 'the metadata log is full' $c times (want once): $(tail -3 "$T_DAEMON_ERR")"
rm -rf "$M/empty"
# the file whose write hit ENOSPC exists (empty)
made=$(count_set)
[ "$made" -le $((n + 1)) ] || t_fail "$made files in the set, $n made"
rm -rf "$M/set/d0000"
echo again >"$M/after-rm" || t_fail "no file can be made after removing 1000"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_mount_fg "$T_MEMBERS" "$M"
have=$(count_set)
[ "$have" = $((made - 1000)) ] || t_fail "$have files after a remount, expected $((made - 1000))"
[ "$(cat "$M/after-rm")" = again ] || t_fail "the file made after the removal reads wrong"
# every file's contents
bad=$(find "$M/set" -type f -print0 | xargs -0 cat | tr -d f | wc -c)
[ "$bad" = 0 ] || t_fail "$bad bytes of the files read back wrong"
# all files removed: a compaction (while removing, at unmount or at the next mount)
# moves the log back into its halves and gives the areas' space back
rm -rf "$M/set"
t_umount "$M"
cp "$T_DAEMON_ERR" "$T_WORK/before.err"
t_mount_fg "$T_MEMBERS" "$M"
cat "$T_WORK/before.err" "$T_DAEMON_ERR" | grep -q "metadata log moved back into its log halves" ||
	t_fail "the log stayed in the data region with almost nothing in it: $(tail -3 "$T_DAEMON_ERR")"
read -r place lsize lsnap linodes < <(log_place)
[ "$place" = halves ] && [ "$lsize" = $((4 << 20)) ] || t_fail "dmafs-check --json after the move back: '$place' $lsize"
free2=$(t_free_bytes "$M")
[ "$free2" -ge $((free0 - (4 << 20))) ] || t_fail "after removing everything $free2 bytes are free, $free0 at first"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
