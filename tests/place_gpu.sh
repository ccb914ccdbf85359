#!/bin/bash
# Description: placement into GPU memory through a real mount (runs place_gpu); skips
# (exit 77, reason printed) when no GPU runtime or device is present.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir
t_images 4 256M
t_mkfs -s 256K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt" "${DMAFS_TEST_MOUNT_OPTS:-}"
t_log "a 40 MiB + 4567 byte random file over 4 members with 256 KiB stripe units"
head -c $((40 * 1048576 + 4567)) /dev/urandom >"$T_WORK/mnt/f" || t_fail "write"
"$top_builddir/tests/place_gpu" "$T_WORK/mnt/f"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || t_fail "place_gpu (see above)"
t_umount "$T_WORK/mnt"
t_log "PASS"
