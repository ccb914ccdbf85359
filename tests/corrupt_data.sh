#!/bin/bash
# Description: data checksums end to end: a flipped byte in a file's data block, or in that
# block's checksum, makes reads covering the block fail with EIO (never wrong bytes) and the
# daemon log name inode, file offset and member; the rest of the file and other files read
# right; dmafs-fsck --scrub names the file and offset (exit 4, also with --repair);
# placements are unchecked by default and fail with EIO under -o verify_place; rewriting the
# whole block heals it and scrub is clean again.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
FSCK=$top_builddir/tools/dmafs-fsck
LOAD=$top_builddir/tools/dmafs-load
[ -x "$FSCK" ] || t_skip "dmafs-fsck not built"
t_images 3 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
W=$T_WORK

# rd FILE OFF LEN REF - read FILE[OFF, OFF+LEN) (continuing after short reads, as a
# short read before a damaged page is correct) and compare with REF; exit status 5 on
# EIO, 1 on a mismatch or early EOF, 0 when equal.
rd() {
	t_py - "$@" <<'PY'
import errno, os, sys
path, off, ln, ref = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fd = os.open(path, os.O_RDONLY)
got = b""
try:
    while len(got) < ln:
        b = os.pread(fd, ln - len(got), off + len(got))
        if not b:
            break
        got += b
except OSError as e:
    sys.exit(5 if e.errno == errno.EIO else 3)
with open(ref, "rb") as f:
    f.seek(off)
    sys.exit(0 if f.read(ln) == got else 1)
PY
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
# flip IMG OFFSET - XOR one byte of a member image (filesystem unmounted)
flip() {
	t_py - "$@" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x5A]))
PY
}
# csum_pos IMG MOFF - where the checksum of the block at member offset MOFF lives
csum_pos() {
	t_py - "$@" <<'PY'
import struct, sys
with open(sys.argv[1], "rb") as f:
    raw = f.read(4096)
data_offset, = struct.unpack_from("<Q", raw, 72)
csum_offset, = struct.unpack_from("<Q", raw, 1184)
print(csum_offset + (int(sys.argv[2]) - data_offset) // 4096 * 8)
PY
}

t_log "12 MiB random file f and 3 MiB file g over 3 members (1 MiB stripe units)"
t_mount_fg "$T_MEMBERS" "$M"
head -c $((12 * 1048576)) /dev/urandom >"$W/ref" || t_fail "urandom"
head -c $((3 * 1048576)) /dev/urandom >"$W/refg" || t_fail "urandom"
cp "$W/ref" "$M/f" && cp "$W/refg" "$M/g" && sync || t_fail "copy in"
ext() { # ext FILE MEMBER - "FILE_OFFSET MEMBER_OFFSET" of FILE's first extent on MEMBER
	t_py -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.dmafs.layout").decode())' "$1" |
		awk -v m="$2" '$1 ~ /^[0-9]+$/ && $3 == m { print $1, $4; exit }'
}
read -r FOFF MOFF <<<"$(ext "$M/f" 1)"
read -r GOFF GMOFF <<<"$(ext "$M/g" 2)"
[ -n "$MOFF" ] && [ -n "$GMOFF" ] || t_fail "no extents of f on member 1 / g on member 2"
BAD=$((FOFF + 8192))            # third block of f's first run on member 1
GBAD=$((GOFF + 4096))
t_umount "$M"
t_fsck 0 --scrub "${T_IMGS[@]}"

t_log "flip one byte of f's block at file offset $BAD (member 1 offset $((MOFF + 8192)))"
flip "${T_IMGS[1]}" $((MOFF + 8192 + 1000))
t_mount_fg "$T_MEMBERS" "$M"
drop_caches
rd "$M/f" "$BAD" 4096 "$W/ref"; rc=$?
[ $rc = 5 ] || t_fail "read of the damaged block: want EIO (status 5), got $rc"
rd "$M/f" 0 $((12 * 1048576)) "$W/ref"; rc=$?
[ $rc = 5 ] || t_fail "read of the whole file: want EIO (status 5), got $rc"
cat "$M/f" >/dev/null 2>"$W/cat.err" && t_fail "cat of the damaged file succeeded"
grep -q "Input/output error" "$W/cat.err" || t_fail "cat: $(cat "$W/cat.err")"
t_log "  the block before and after it, the rest of f and all of g read right"
rd "$M/f" 0 "$BAD" "$W/ref" || t_fail "f before the damaged block (status $?)"
rd "$M/f" $((BAD + 4096)) $((12 * 1048576 - BAD - 4096)) "$W/ref" || t_fail "f after the damaged block (status $?)"
cmp -s "$W/refg" "$M/g" || t_fail "g differs or fails"
grep -q "checksum mismatch: inode [0-9]* file offset $BAD (member 1 " "$T_DAEMON_ERR" ||
	t_fail "daemon log does not name file offset $BAD on member 1: $(cat "$T_DAEMON_ERR")"

t_log "placement: unchecked by default (returns the damaged bytes), EIO with -o verify_place"
if [ -x "$LOAD" ]; then
	"$LOAD" -q "$M/f" >"$W/load.out" 2>&1 || t_fail "host placement without verify_place failed: $(cat "$W/load.out")"
	# The placement copies the damaged bytes; the POSIX read that --verify compares them
	# with stops with EIO exactly at the damaged block (a read never returns wrong bytes;
	# the checksum mismatch is in the daemon log, checked above): dmafs-load says it
	# cannot verify f at that offset and exits 1 (an error), not 2 (placed bytes that
	# differ from what a read returns) and not 0.
	"$LOAD" -q --verify "$M/f" >"$W/load.out" 2>&1
	rc=$?
	[ $rc = 1 ] || t_fail "dmafs-load --verify over a damaged block exited $rc, expected 1: $(cat "$W/load.out")"
	grep -q "^dmafs-load: $M/f: cannot verify: read at $BAD: Input/output error\$" "$W/load.out" ||
		t_fail "dmafs-load --verify does not report the failed read of f: $(cat "$W/load.out")"
	t_umount "$M"
	t_mount_fg "$T_MEMBERS" "$M" verify_place
	"$LOAD" -q "$M/f" >"$W/load.out" 2>&1
	rc=$?
	[ $rc = 1 ] || t_fail "host placement under verify_place over a damaged block exited $rc, expected 1: $(cat "$W/load.out")"
	grep -q "I/O error" "$W/load.out" || t_fail "dmafs-load did not report EIO: $(cat "$W/load.out")"
	"$LOAD" -q "$M/g" >"$W/load.out" 2>&1 || t_fail "placement of the intact g under verify_place failed: $(cat "$W/load.out")"
	# GPU staged path, where a CUDA GPU answers (the checksums are checked in staging)
	if "$LOAD" -q --target cuda:0 "$M/g" >"$W/gpu.out" 2>&1; then
		t_log "  CUDA GPU: staged placement under verify_place: g places, f fails with EIO"
		grep -q "staged" "$W/gpu.out" || t_fail "GPU placement under verify_place did not take the staged path: $(cat "$W/gpu.out")"
		"$LOAD" -q --target cuda:0 "$M/f" >"$W/load.out" 2>&1 && t_fail "GPU placement under verify_place succeeded over a damaged block"
		grep -q "I/O error" "$W/load.out" || t_fail "dmafs-load (GPU) did not report EIO: $(cat "$W/load.out")"
	else
		t_log "  no CUDA GPU here ($(tail -n 1 "$W/gpu.out")): the GPU part of this check is not run"
	fi
fi
t_umount "$M"

t_log "dmafs-fsck --scrub names /f and the offset; exit 4, and 4 with --repair (data cannot be repaired)"
t_fsck 4 --scrub "${T_IMGS[@]}"
grep -q "^ERROR: /f: damaged data (checksum mismatch) at file offset $BAD (+4096 bytes) on member 1" "$T_WORK/fsck.out" ||
	t_fail "scrub report: $(cat "$T_WORK/fsck.out")"
t_fsck 4 --repair --scrub "${T_IMGS[@]}"
t_fsck 0 "${T_IMGS[@]}"   # without --scrub the metadata is clean

t_log "flip a byte of the checksum of g's block at file offset $GBAD: EIO there, scrub names /g"
flip "${T_IMGS[2]}" "$(csum_pos "${T_IMGS[2]}" $((GMOFF + 4096)))"
t_mount_fg "$T_MEMBERS" "$M"
rd "$M/g" "$GBAD" 4096 "$W/refg"; rc=$?
[ $rc = 5 ] || t_fail "read of g's block with a damaged checksum: want EIO (status 5), got $rc"
rd "$M/g" 0 "$GBAD" "$W/refg" || t_fail "g before the block (status $?)"
t_umount "$M"
t_fsck 4 --scrub "${T_IMGS[@]}"
grep -q "^ERROR: /g: damaged data (checksum mismatch) at file offset $GBAD (+4096 bytes) on member 2" "$T_WORK/fsck.out" ||
	t_fail "scrub report: $(cat "$T_WORK/fsck.out")"
t_mount_fg "$T_MEMBERS" "$M"

t_log "rewriting the whole damaged blocks heals them; the files read right and scrub is clean"
dd if="$W/ref" of="$M/f" bs=4096 skip=$((BAD / 4096)) seek=$((BAD / 4096)) count=1 conv=notrunc status=none ||
	t_fail "rewrite f's block"
dd if="$W/refg" of="$M/g" bs=4096 skip=$((GBAD / 4096)) seek=$((GBAD / 4096)) count=1 conv=notrunc status=none ||
	t_fail "rewrite g's block"
drop_caches
cmp -s "$W/ref" "$M/f" || t_fail "f differs after the rewrite"
cmp -s "$W/refg" "$M/g" || t_fail "g differs after the rewrite"
t_umount "$M"
t_fsck 0 --scrub "${T_IMGS[@]}"
t_log "PASS"
