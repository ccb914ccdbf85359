#!/bin/bash
# Description: dmafs-fsck: a clean filesystem checks clean (exit 0); a damaged superblock
# and a damaged metadata log copy are reported (exit 4 with -n), repaired (exit 1) and
# clean afterwards (exit 0); after kill -9 of the daemon mid-workload the members check
# clean and the tree mounts; --scrub reads every block; bad usage exits 8.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir
FSCK=$top_builddir/tools/dmafs-fsck
[ -x "$FSCK" ] || t_skip "dmafs-fsck not built"
t_images 3 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_log "fresh filesystem: clean"
t_fsck 0 "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
head -c 20000000 /dev/urandom >"$M/data" && mkdir "$M/d" && echo hi >"$M/d/x" || t_fail "populate"
sum=$(sha256sum <"$M/data")
t_umount "$M"
t_fsck 0 --scrub "$T_MEMBERS"
grep -q "scrub: reading" "$T_WORK/fsck.out" || t_fail "scrub did not run"
t_log "damaged primary superblock of member 1: -n reports (4), --repair fixes (1), then clean (0)"
dd if=/dev/urandom of="${T_IMGS[1]}" bs=4096 count=1 conv=notrunc status=none
t_fsck 4 -n "${T_IMGS[@]}"
grep -q "member 1 .*primary superblock" "$T_WORK/fsck.out" || t_fail "report does not name member 1: $(cat "$T_WORK/fsck.out")"
t_fsck 1 --repair "${T_IMGS[@]}"
t_fsck 0 "${T_IMGS[@]}"
t_log "metadata log copy on member 1 destroyed: reported, repaired from member 0's copy"
dd if=/dev/zero of="${T_IMGS[1]}" bs=1M count=8 seek=1 conv=notrunc status=none  # both log halves (4 MiB each on 128 MiB members)
t_fsck 4 "${T_IMGS[@]}"
grep -q "log copy on member 1" "$T_WORK/fsck.out" || t_fail "log damage not reported: $(cat "$T_WORK/fsck.out")"
t_fsck 1 -y "${T_IMGS[@]}"
t_fsck 0 "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
[ "$(sha256sum <"$M/data")" = "$sum" ] || t_fail "data changed by the repairs"
t_log "kill -9 during a workload, then the members check clean"
( for i in $(seq 1 200); do echo "$i" >"$M/d/f$i"; mv "$M/d/f$i" "$M/d/g$i"; [ $((i % 3)) = 0 ] && rm "$M/d/g$i"; done ) &
wl=$!
sleep 0.5
t_crash "$M"
wait $wl 2>/dev/null
"$FSCK" "${T_IMGS[@]}" >"$T_WORK/fsck.out" 2>&1
rc=$?
[ $rc = 0 ] || t_fail "after kill -9: dmafs-fsck exited $rc: $(cat "$T_WORK/fsck.out")"
t_mount "$T_MEMBERS" "$M"
[ "$(sha256sum <"$M/data")" = "$sum" ] || t_fail "data changed after the crash"
t_umount "$M"
t_log "current metadata snapshot damaged in both log copies: --repair recovers the previous generation"
t_mount "$T_MEMBERS" "$M"
echo "kept" >"$M/kept" || t_fail "write kept"
sync "$M/kept" || t_fail "fsync kept"
t_crash "$M"                # not a clean unmount: the next mount compacts
t_mount "$T_MEMBERS" "$M"   # this mount's compaction puts 'kept' into a new snapshot
t_umount "$M"
for img in "${T_IMGS[0]}" "${T_IMGS[1]}"; do
	t_py - "$img" <<'PY' || t_fail "could not damage the snapshot of $img"
import struct, sys
# 128 MiB members: log at 1 MiB, halves of 4 MiB; the active half has the higher gen
f = open(sys.argv[1], "r+b")
gens = []
for half in (0, 1):
    f.seek((1 << 20) + half * (4 << 20)); h = f.read(4096)
    gens.append(struct.unpack_from("<Q", h, 32)[0] if h[:8] == b"DMAFSLG1" else -1)
active = gens.index(max(gens))
pos = (1 << 20) + active * (4 << 20) + 4096 + 20
f.seek(pos); b = f.read(1); f.seek(pos); f.write(bytes([b[0] ^ 0xff]))
PY
done
t_fsck 4 -n "${T_IMGS[@]}"
t_fsck 1 --repair "${T_IMGS[@]}"
grep -q "recovered the previous generation" "$T_WORK/fsck.out" || t_fail "no recovery message: $(cat "$T_WORK/fsck.out")"
t_fsck 0 "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
[ "$(cat "$M/kept")" = kept ] || t_fail "file committed before the damaged generation lost"
[ "$(sha256sum <"$M/data")" = "$sum" ] || t_fail "data changed by the generation recovery"
t_umount "$M"
t_log "operational errors exit 8"
t_fsck 8
t_fsck 8 "$T_WORK/nonexistent.img"
t_log "PASS"
