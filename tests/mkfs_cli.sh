#!/bin/bash
# Description: mkfs.dmafs: superblock fields on every member as the on-disk format says,
# its report, --size, suffixes, stripe unit and size limits, and refusal (exit 1, one line
# naming the member) of members holding dmafs/ext4/xfs/swap signatures unless --force.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
H="$top_srcdir/tests/t_helpers.py"
t_workdir
M=$T_WORK/mnt
MIB=$((1024 * 1024))

# mkfs_refused DESC PATTERN ARGS... - mkfs must exit 1 with one stderr line containing PATTERN.
mkfs_refused() {
	local desc=$1 pat=$2 rc err
	shift 2
	t_log "mkfs refuses: $desc"
	"$MKFS" "$@" >"$T_WORK/out" 2>"$T_WORK/err"
	rc=$?
	err=$(cat "$T_WORK/err")
	[ $rc = 1 ] || t_fail "$desc: mkfs.dmafs $* exited $rc, expected 1 (stderr: $err)"
	[ "$(grep -c . "$T_WORK/err")" = 1 ] || t_fail "$desc: expected one stderr line, got: $err"
	case $err in *"$pat"*) ;; *) t_fail "$desc: message does not name '$pat': $err" ;; esac
	t_log "  -> $err"
}

t_log "mkfs -s 256K -L lbl of 3 members: exit 0, report, superblocks"
t_images 3 200M m
out=$("$MKFS" -s 256K -L lbl "${T_IMGS[@]}" 2>&1) || t_fail "mkfs failed: $out"
sb=$(t_py "$H" sbcheck 262144 lbl "${T_IMGS[@]}") || t_fail "superblocks do not match the on-disk format: $sb"
uuid=$(echo "$sb" | tail -n 1 | t_py -c 'import json,sys; print(json.load(sys.stdin)["fs_uuid"])') ||
	t_fail "sbcheck's last line is not the superblock as JSON: $sb"
flat=$(echo "$out" | tr -d '-' | tr 'A-F' 'a-f')
case $flat in *"$uuid"*) ;; *) t_fail "mkfs output does not show the UUID $uuid: $out" ;; esac
case $out in *lbl*) ;; *) t_fail "mkfs output does not show the label: $out" ;; esac
for m in "${T_IMGS[@]}"; do
	case $out in *"$m"*) ;; *) t_fail "mkfs output does not list member $m: $out" ;; esac
done
echo "$out" | grep -Eiq '262144|256(\.0)? ?k' || t_fail "mkfs output does not show the stripe unit: $out"

t_log "df of the new filesystem matches the members' data areas"
cap=$(t_py -c "
import sys; sys.path.insert(0, '$top_srcdir/tests'); import t_helpers as t
print(sum(t.read_sb(m)['data_end'] - t.read_sb(m)['data_offset'] for m in sys.argv[1:]))" "${T_IMGS[@]}") ||
	t_fail "cannot read the members' superblocks: $cap"
t_mount "$T_MEMBERS" "$M"
tot=$(($(t_statfs "$M" f_blocks) * $(t_statfs "$M" f_frsize)))
[ "$tot" -le "$cap" ] && [ "$tot" -ge $((cap * 95 / 100)) ] ||
	t_fail "statfs total $tot bytes, members' data areas hold $cap"
t_umount "$M"

mkfs_refused "existing dmafs superblock" "${T_IMGS[1]}" "${T_IMGS[1]}"
t_log "--force overwrites it with a new filesystem"
"$MKFS" -q --force "${T_IMGS[@]}" >/dev/null 2>&1 || t_fail "mkfs --force"
out=$(t_py "$H" sbcheck 1048576 "" "${T_IMGS[@]}") ||
	t_fail "superblocks after --force (default stripe unit 1M, no label): $out"
uuid2=$(echo "$out" | tail -n 1)
case $uuid2 in *"$uuid"*) t_fail "mkfs --force kept the old UUID" ;; esac

t_images 1 64M e
mkfs.ext4 -q -F "${T_IMGS[0]}" >/dev/null 2>&1 || t_fail "mkfs.ext4"
mkfs_refused "ext4 signature" "${T_IMGS[0]}" "${T_IMGS[0]}"
"$MKFS" -q -f "${T_IMGS[0]}" >/dev/null 2>&1 || t_fail "mkfs -f over ext4"
t_mount "${T_IMGS[0]}" "$M"
echo ok >"$M/x" && t_umount "$M" || t_fail "mount after mkfs -f over ext4"

if command -v mkfs.xfs >/dev/null; then
	t_images 1 320M x
	mkfs.xfs -q -f "${T_IMGS[0]}" >/dev/null 2>&1 || t_fail "mkfs.xfs"
	mkfs_refused "xfs signature" "${T_IMGS[0]}" "${T_IMGS[0]}"
fi
if command -v mkswap >/dev/null; then
	t_images 1 64M s
	mkswap "${T_IMGS[0]}" >/dev/null 2>&1 || t_fail "mkswap"
	mkfs_refused "swap signature" "${T_IMGS[0]}" "${T_IMGS[0]}"
fi
t_images 2 64M g
t_py "$H" gpt "${T_IMGS[1]}" || t_fail "writing a GPT"
if command -v blkid >/dev/null; then
	blkid -p -o value -s PTTYPE "${T_IMGS[1]}" | grep -qx gpt || t_fail "test bug: blkid does not see the GPT we wrote"
fi
mkfs_refused "second member with a GPT/MBR signature" "${T_IMGS[1]}" "${T_IMGS[@]}"

t_images 1 63M small
mkfs_refused "member smaller than 64 MiB" "${T_IMGS[0]}" "${T_IMGS[0]}"
t_images 1 100M su
mkfs_refused "stripe unit 3M (not a power of two)" "" -s 3M "${T_IMGS[0]}"
mkfs_refused "stripe unit 32K (below 64K)" "" -s 32K "${T_IMGS[0]}"
mkfs_refused "stripe unit 128M (above 64M)" "" -s 128M "${T_IMGS[0]}"
t_log "stripe units 64K and 64M are accepted"
"$MKFS" -q -s 64K "${T_IMGS[0]}" >/dev/null 2>&1 || t_fail "mkfs -s 64K"
t_py "$H" sbcheck 65536 "" "${T_IMGS[0]}" >/dev/null || t_fail "superblock after -s 64K"
"$MKFS" -q -f -s 64M "${T_IMGS[0]}" >/dev/null 2>&1 || t_fail "mkfs -s 64M"
t_py "$H" sbcheck $((64 * MIB)) "" "${T_IMGS[0]}" >/dev/null || t_fail "superblock after -s 64M"

mkfs_refused "missing image file without --size" "$T_WORK/absent.img" "$T_WORK/absent.img"
[ ! -e "$T_WORK/absent.img" ] || t_fail "mkfs without --size created the missing file"
t_log "--size creates a missing file, extends a short one, never shrinks a long one"
truncate -s 70M "$T_WORK/short.img"
truncate -s 300M "$T_WORK/long.img"
"$MKFS" -q --size 100M "$T_WORK/new.img" "$T_WORK/short.img" "$T_WORK/long.img" >/dev/null 2>&1 || t_fail "mkfs --size 100M"
[ "$(stat -c %s "$T_WORK/new.img")" = $((100 * MIB)) ] || t_fail "--size: new file is $(stat -c %s "$T_WORK/new.img") bytes"
[ "$(stat -c %s "$T_WORK/short.img")" = $((100 * MIB)) ] || t_fail "--size: short file not extended"
[ "$(stat -c %s "$T_WORK/long.img")" = $((300 * MIB)) ] || t_fail "--size: long file shrunk"
[ "$(($(stat -c %b "$T_WORK/new.img") * 512))" -lt $((50 * MIB)) ] || t_fail "--size: new file not sparse"
t_py "$H" sbcheck $MIB "" "$T_WORK/new.img" "$T_WORK/short.img" "$T_WORK/long.img" >/dev/null || t_fail "superblocks after --size"
rm -f "$T_WORK"/*.img

t_log "65 members are refused, 64 accepted"
args=()
for i in $(seq 0 64); do truncate -s 64M "$T_WORK/many$i" && args+=("$T_WORK/many$i"); done
"$MKFS" -q "${args[@]}" >/dev/null 2>&1 && t_fail "mkfs accepted 65 members"
"$MKFS" -q "${args[@]:0:64}" >/dev/null 2>&1 || t_fail "mkfs refused 64 members"
t_py "$H" sbcheck $MIB "" "${args[@]:0:64}" >/dev/null || t_fail "superblocks of the 64-member filesystem"
t_log "PASS"
