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
t_log "PASS"
