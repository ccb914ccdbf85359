#!/bin/bash
# Description: striping: a 256 MiB file over 4 members is spread evenly (bytes per member
# within 2 stripe units, from user.dmafs.layout), each member's part contiguous or nearly
# (run count reported), extents follow the stripe rule and stay in the data areas, two
# concurrently written files never share member space, and after unmount the members'
# bytes at the reported offsets ARE the file data; same with -s 64K over 3 members.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
H="$top_srcdir/tests/t_helpers.py"
MIB=$((1024 * 1024))
t_workdir
M=$T_WORK/mnt
mkdir "$T_WORK/ref"

t_log "4 members x 192 MiB, stripe unit 1M: 256 MiB file plus two 32 MiB files written concurrently"
t_images 4 192M s
t_mkfs "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
head -c $((256 * MIB)) /dev/urandom >"$T_WORK/ref/big" || t_fail "reference file"
dd if="$T_WORK/ref/big" of="$M/big" bs=1M conv=fsync status=none || t_fail "dd 256 MiB into the mount"
head -c $((32 * MIB + 12345)) /dev/urandom >"$T_WORK/ref/c1"
head -c $((32 * MIB - 777)) /dev/urandom >"$T_WORK/ref/c2"
dd if="$T_WORK/ref/c1" of="$M/c1" bs=128K conv=fsync status=none &
p1=$!
dd if="$T_WORK/ref/c2" of="$M/c2" bs=192K conv=fsync status=none &
p2=$!
wait $p1 || t_fail "concurrent write c1"
wait $p2 || t_fail "concurrent write c2"
for f in big c1 c2; do cmp "$T_WORK/ref/$f" "$M/$f" || t_fail "$f reads back wrong"; done
T_LAYOUT_OUT=$T_WORK/layout1.json t_py "$H" stripecheck "$T_MEMBERS" "$M/big:8" "$M/c1" "$M/c2" ||
	t_fail "striping of the 256 MiB file (see above)"
t_umount "$M"
t_log "after unmount, member bytes at the layout's offsets equal the file data"
t_py "$H" ondisk "$T_WORK/layout1.json" "$T_MEMBERS" "$M/big=$T_WORK/ref/big" "$M/c1=$T_WORK/ref/c1" "$M/c2=$T_WORK/ref/c2" ||
	t_fail "layout does not describe where the data is (see above)"
rm -f "${T_IMGS[@]}"

t_log "3 members x 100 MiB, stripe unit 64K: 10 MiB + 123 bytes file, then overwritten in the middle"
t_images 3 100M k
t_mkfs -s 64K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
head -c $((10 * MIB + 123)) /dev/urandom >"$T_WORK/ref/k" || t_fail "reference"
cp "$T_WORK/ref/k" "$M/k" && sync -f "$M/k" || t_fail "cp"
head -c 200000 /dev/urandom >"$T_WORK/ref/patch"
dd if="$T_WORK/ref/patch" of="$T_WORK/ref/k" bs=1 seek=3333333 conv=notrunc status=none
dd if="$T_WORK/ref/patch" of="$M/k" bs=100000 seek=3333333 oflag=seek_bytes conv=notrunc,fsync status=none ||
	t_fail "patch write"
cmp "$T_WORK/ref/k" "$M/k" || t_fail "patched file reads back wrong"
T_LAYOUT_OUT=$T_WORK/layout2.json t_py "$H" stripecheck "$T_MEMBERS" "$M/k:8" || t_fail "striping with 64K stripe unit"
t_py -c "
import json, sys
h = json.load(open('$T_WORK/layout2.json'))['$M/k']['hdr']
sys.exit(0 if (h['stripe_unit'], h['members']) == (65536, 3) else f'layout header {h}, expected stripe_unit=65536 members=3')
" || t_fail "layout header of the 64K filesystem"
t_umount "$M"
t_py "$H" ondisk "$T_WORK/layout2.json" "$T_MEMBERS" "$M/k=$T_WORK/ref/k" || t_fail "64K layout vs member bytes"
t_log "PASS"
