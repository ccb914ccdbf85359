#!/bin/bash
# Description: host buffers through a real mount (runs the host_buffer program): a
# 384 MiB buffer from dmafs_buf_alloc_host is zero filled, resident, registered at its
# full length, usable and released; in hugetlb pages when the pool has enough free ones,
# else (and always with DMAFS_HOST_HUGETLB=0) in 4 KiB pages. Then dmafs-load --target
# host, which exits without unregistering: the daemon must free the buffer by itself.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
LOAD=$top_builddir/tools/dmafs-load
t_workdir
t_images 3 256M
t_mkfs -s 256K "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt" "${DMAFS_TEST_MOUNT_OPTS:-}"
pid=$(t_daemon_pids "$T_WORK/mnt")
[ -n "$pid" ] || t_fail "no daemon found for $T_WORK/mnt"
t_log "a 40 MiB + 7 byte random file"
head -c $((40 * 1048576 + 7)) /dev/urandom >"$T_WORK/ref" || t_fail "urandom"
cp "$T_WORK/ref" "$T_WORK/mnt/f" || t_fail "copy in"

t_log "dmafs_buf_alloc_host: huge pages if the pool has them, else the 4 KiB fallback"
"$top_builddir/tests/host_buffer" "$T_WORK/mnt/f" "$pid" || t_fail "host_buffer (see above)"
t_log "dmafs_buf_alloc_host with DMAFS_HOST_HUGETLB=0: 4 KiB pages"
DMAFS_HOST_HUGETLB=0 "$top_builddir/tests/host_buffer" "$T_WORK/mnt/f" "$pid" ||
	t_fail "host_buffer with DMAFS_HOST_HUGETLB=0 (see above)"

t_log "dmafs-load --target host --verify; the daemon frees the buffer after it exits"
"$LOAD" --target host --verify -q "$T_WORK/mnt/f" || t_fail "dmafs-load --target host --verify"
for ((i = 0; i < 100; i++)); do
	grep -q dmafs-host "/proc/$pid/maps" || break
	sleep 0.1
done
grep -q dmafs-host "/proc/$pid/maps" &&
	t_fail "the daemon still maps dmafs-load's buffer 10 s after dmafs-load exited"
cmp "$T_WORK/ref" "$T_WORK/mnt/f" || t_fail "POSIX read after the placements"
t_umount "$T_WORK/mnt"
t_log "PASS"
