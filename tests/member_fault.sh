#!/bin/bash
# Description: member faults: member 1 is a file on faultfs (tests/faultfs), which fails
# listed byte ranges with EIO.  Reads of a file's extent on member 1 fail with EIO and the
# daemon log names member 1, other ranges and files read right, clearing the fault brings the
# right bytes back (nothing bad cached); then faultfs is killed (member disappears): reads on
# member 1 fail within 10 s without hanging, members 0 and 2 still serve, and dmafs unmounts.
# Under verify_place, a placement whose checksum reads fail on member 1 fails with EIO at
# once, and places right once the fault is cleared.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
FAULTFS=$top_builddir/tests/faultfs
[ -x "$FAULTFS" ] || t_skip "faultfs not built: $FAULTFS"
TP=$top_builddir/tests/tier_place
[ -x "$TP" ] || t_skip "tests/tier_place not built"
[ -w /proc/sys/vm/drop_caches ] || t_skip "cannot write /proc/sys/vm/drop_caches"
command -v getfattr >/dev/null || t_skip "getfattr not installed (Debian package attr)"
command -v timeout >/dev/null || t_skip "timeout(1) not installed"

t_workdir
t_images 3 256M
W=$T_WORK
M=$W/mnt
# faultfs in the foreground (background job) so that we know its pid for kill -9.
t_faultfs "${T_IMGS[1]}"
FF=$T_FF
CTL=$T_FF_CTL
FF_PID=$T_FAULTFS_PID

MEMBER1=$FF/disk
t_log "mkfs over img0, $MEMBER1 (faultfs), img2"
if ! "$MKFS" -q "${T_IMGS[0]}" "$MEMBER1" "${T_IMGS[2]}" >"$W/mkfs.out" 2>&1; then
	grep -q O_DIRECT "$W/mkfs.out" || t_fail "mkfs.dmafs failed: $(cat "$W/mkfs.out")"
	t_log "no O_DIRECT on the faultfs file; member 1 is a loop device over it"
	MEMBER1=$(losetup -f --show "$FF/disk") || t_skip "no free loop device"
	t_register loop "$MEMBER1"
	t_mkfs "${T_IMGS[0]}" "$MEMBER1" "${T_IMGS[2]}"
fi
t_mount_fg "${T_IMGS[0]},$MEMBER1,${T_IMGS[2]}" "$M" verify_place

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# rd FILE OFF LEN REF - read LEN bytes at OFF within 10 s; exit 0 if they equal REF's
# bytes there, 3 if they differ, 5 on EIO, 6 on ENOTCONN, 4 on other errors (message on
# stderr), 124 or 137 if the read did not finish in time.
rd() {
	PYTHONDONTWRITEBYTECODE=1 timeout -k 2 10 "$T_PY" - "$@" <<'EOF'
import errno, os, sys
path, off, n, ref = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
try:
    fd = os.open(path, os.O_RDONLY)
    got = b""
    while len(got) < n:
        b = os.pread(fd, n - len(got), off + len(got))
        if not b:
            break
        got += b
    os.close(fd)
except OSError as e:
    print("read %s at %d+%d: %s" % (path, off, n, e), file=sys.stderr)
    sys.exit({errno.EIO: 5, errno.ENOTCONN: 6}.get(e.errno, 4))
with open(ref, "rb") as f:
    f.seek(off)
    want = f.read(n)
if got != want:
    print("read %s at %d+%d: %d bytes, wrong data" % (path, off, n, len(got)), file=sys.stderr)
    sys.exit(3)
EOF
}

t_log "12 MiB random file f (1 MiB stripe units over 3 members) and a 3 MiB file g"
head -c $((12 * 1048576)) /dev/urandom >"$W/ref" || t_fail "urandom"
head -c $((3 * 1048576)) /dev/urandom >"$W/refg" || t_fail "urandom"
cp "$W/ref" "$M/f" && cp "$W/refg" "$M/g" || t_fail "copy in"
sync || t_fail "sync"

layout=$(getfattr --absolute-names --only-values -n user.dmafs.layout "$M/f") || t_fail "getfattr user.dmafs.layout"
# Extent lines: FILE_OFFSET LENGTH MEMBER MEMBER_OFFSET.  First extent on each member.
declare -A EOFF ELEN EMOFF
while read -r off len mem moff; do
	[[ $off =~ ^[0-9]+$ ]] || continue
	[ -n "${EOFF[$mem]:-}" ] && continue
	EOFF[$mem]=$off ELEN[$mem]=$len EMOFF[$mem]=$moff
done <<<"$layout"
for m in 0 1 2; do
	[ -n "${EOFF[$m]:-}" ] || t_fail "no extent of f on member $m in layout: $layout"
done
t_log "f: extent on member 1 at file offset ${EOFF[1]} (+${ELEN[1]}), member offset ${EMOFF[1]}"

t_log "fault member 1 bytes ${EMOFF[1]}+${ELEN[1]}: reading that extent of f fails with EIO"
echo "${EMOFF[1]} ${ELEN[1]}" >"$CTL"
drop_caches
rd "$M/f" ${EOFF[1]} ${ELEN[1]} "$W/ref"
rc=$?
[ $rc = 5 ] || t_fail "read of the faulted extent: want EIO (5), got status $rc"
# A single 4 KiB block inside the extent, too.
rd "$M/f" $((EOFF[1] + ELEN[1] / 2)) 4096 "$W/ref"
rc=$?
[ $rc = 5 ] || t_fail "4 KiB read inside the faulted extent: want EIO (5), got status $rc"

t_log "extents of f on members 0 and 2 read right bytes"
for m in 0 2; do
	rd "$M/f" ${EOFF[$m]} ${ELEN[$m]} "$W/ref" ||
		t_fail "read of f's extent on member $m failed (status $?) while member 1 is faulted"
done
t_log "other file g reads fine"
timeout 30 cmp "$W/refg" "$M/g" || t_fail "g differs or fails while member 1 is faulted"
t_log "daemon log names member 1"
grep -q "member 1\b" "$T_DAEMON_ERR" || t_fail "daemon log does not name member 1: $(cat "$T_DAEMON_ERR")"
grep "member 1\b" "$T_DAEMON_ERR" | head -n 2

t_log "fault cleared: the same extent reads right (no bad data cached), whole f equals ref"
: >"$CTL"
drop_caches
rd "$M/f" ${EOFF[1]} ${ELEN[1]} "$W/ref" ||
	t_fail "read of the extent on member 1 after clearing the fault: status $?"
timeout 30 cmp "$W/ref" "$M/f" || t_fail "f differs from ref after clearing the fault"

t_log "verify_place: checksum reads that fail on member 1 fail the placement with EIO, at once"
# everything on member 1 but f's extent: its checksums among it, its data readable
echo "0 ${EMOFF[1]}
$((EMOFF[1] + ELEN[1])) $(($(stat -c %s "${T_IMGS[1]}") - EMOFF[1] - ELEN[1]))" >"$CTL"
drop_caches
timeout -k 2 30 "$TP" "$M/f" "${EOFF[1]}" "${ELEN[1]}" >"$W/out" 2>"$W/tp.err"
rc=$?
case $rc in
0) t_fail "a placement succeeded although its checksums could not be read" ;;
124 | 137) t_fail "a placement whose checksum reads fail did not end in 30 s" ;;
esac
grep -qiE "I/O error|input/output" "$W/tp.err" || t_fail "the failed placement: want EIO, got: $(cat "$W/tp.err")"
: >"$CTL"
drop_caches
t_log "fault cleared: the same placement is byte-exact"
timeout -k 2 30 "$TP" "$M/f" "${EOFF[1]}" "${ELEN[1]}" >"$W/out" ||
	t_fail "the placement after clearing the fault failed (status $?)"
tail -c +$((EOFF[1] + 1)) "$W/ref" | head -c "${ELEN[1]}" | cmp -s - "$W/out" ||
	t_fail "the placement after clearing the fault differs from the reference"

t_log "write-behind: writes that fail on member 1 in the background fail close(2) and fsync(2) with EIO"
# everything on member 1 past f's extent (new data, and the checksums of new data) fails
echo "$((EMOFF[1] + ELEN[1])) $(($(stat -c %s "${T_IMGS[1]}") - EMOFF[1] - ELEN[1] - 4194304))" >"$CTL"
PYTHONDONTWRITEBYTECODE=1 timeout -k 2 60 "$T_PY" - "$M" <<'PY' || t_fail "a failed background write was not reported (see above)"
import errno, os, sys
m = sys.argv[1]
data = os.urandom(8 << 20)  # 8 stripe units: some land on member 1
for how in ("close", "fsync"):
    fd = os.open(f"{m}/wb-{how}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)  # accepted into write-behind
    except OSError as e:
        print(f"write itself failed ({e}); expected it to be buffered")
        sys.exit(1)
    try:
        if how == "fsync":
            os.fsync(fd)
        os.close(fd)
        fd = None
    except OSError as e:
        if e.errno != errno.EIO:
            print(f"{how}: {e}, expected EIO")
            sys.exit(1)
        print(f"{how} failed with EIO, as expected")
        if fd is not None and how == "fsync":
            os.close(fd)  # the error was reported once
        continue
    print(f"{how} succeeded although member 1 refused the data")
    sys.exit(1)
PY
grep -q "buffered bytes at offset" "$T_DAEMON_ERR" ||
	t_fail "the daemon did not log the failed background write: $(tail -5 "$T_DAEMON_ERR")"
: >"$CTL"

t_log "member 1 disappears: kill -9 faultfs, detach its mount"
kill -9 "$FF_PID" || t_fail "kill faultfs"
n=100
while kill -0 "$FF_PID" 2>/dev/null; do
	((n-- > 0)) || t_fail "faultfs $FF_PID alive 10 s after kill -9"
	sleep 0.1
done
fusermount3 -u -z "$FF" 2>/dev/null || umount -l "$FF" 2>/dev/null
t_is_mounted "$FF" && t_fail "cannot detach $FF after killing faultfs"
drop_caches
t_log "reading f's extent on member 1 fails (EIO or ENOTCONN) within 10 s"
rd "$M/f" ${EOFF[1]} ${ELEN[1]} "$W/ref"
rc=$?
case $rc in
5 | 6) ;;
124 | 137) t_fail "read on the dead member 1 hangs (no answer in 10 s)" ;;
0) t_fail "read on the dead member 1 succeeded" ;;
*) t_fail "read on the dead member 1: want EIO or ENOTCONN, got status $rc" ;;
esac
t_log "mount still answers stat; extents on members 0 and 2 read right bytes"
timeout 10 stat "$M/f" >/dev/null || t_fail "stat $M/f after member 1 died"
timeout 10 stat "$M" >/dev/null || t_fail "stat $M after member 1 died"
for m in 0 2; do
	rd "$M/f" ${EOFF[$m]} ${ELEN[$m]} "$W/ref" ||
		t_fail "read of f's extent on member $m after member 1 died: status $?"
done
kill -0 "$T_DAEMON_PID" 2>/dev/null || t_fail "dmafs daemon died: $(tail -n 5 "$T_DAEMON_ERR")"
t_log "unmount dmafs"
t_umount "$M"
wait "$T_DAEMON_PID"
t_log "dmafs exited with status $? (member 1 gone); its last log lines:"
tail -n 3 "$T_DAEMON_ERR"
t_log "PASS"
