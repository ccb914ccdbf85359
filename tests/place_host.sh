#!/bin/bash
# Description: placement channel into shared host memory through a real mount (runs the
# place_host program: exactness, refusals, foreign and dead clients, concurrency, fuzzing),
# and the daemon keeps serving POSIX reads afterwards.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir
t_images 3 256M
t_mkfs -s 256K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt" "${DMAFS_TEST_MOUNT_OPTS:-}"
t_log "a 24 MiB + 123 byte random file over 3 members with 256 KiB stripe units"
head -c $((24 * 1048576 + 123)) /dev/urandom >"$T_WORK/ref" || t_fail "urandom"
cp "$T_WORK/ref" "$T_WORK/mnt/f" || t_fail "copy in"
"$top_builddir/tests/place_host" "$T_WORK/mnt/f" || t_fail "place_host (see above)"
t_log "daemon alive and serving: POSIX read equals the reference"
cmp "$T_WORK/ref" "$T_WORK/mnt/f" || t_fail "POSIX read after placement tests"
t_umount "$T_WORK/mnt"
grep -q "placement pipeline:" "$T_DAEMON_ERR" && t_fail "pipeline statistics logged without -o verbose"

t_log "-o verbose: each placement logs what its pipeline did"
t_mount_fg "$T_MEMBERS" "$T_WORK/mnt" verbose
"$top_builddir/tools/dmafs-load" --target host "$T_WORK/mnt/f" >/dev/null || t_fail "dmafs-load --target host"
t_umount "$T_WORK/mnt"
# 24 MiB + 123 bytes: 24 whole 1 MiB windows read straight into the client's pages (4
# stripe units each) and the 123-byte tail through a bounce slot (one 4 KiB block)
line=$(grep "placement pipeline:" "$T_DAEMON_ERR") || t_fail "no pipeline statistics with -o verbose: $(cat "$T_DAEMON_ERR")"
[ "$(printf '%s\n' "$line" | wc -l)" = 1 ] || t_fail "one placement, several statistics lines: $line"
case $line in
*", 25 pieces (97 member reads), 24.0 MiB in "*) ;;
*) t_fail "pipeline statistics: want 25 pieces, 97 member reads, 24.0 MiB: $line" ;;
esac
t_log "PASS"
