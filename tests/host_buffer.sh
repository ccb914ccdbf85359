#!/bin/bash
# Description: host buffers through a real mount (runs the host_buffer program): a
# 384 MiB buffer from dmafs_buf_alloc_host is zero filled, resident, registered at its
# full length, usable and released; in hugetlb pages from a pool the test reserves (it
# writes vm.nr_hugepages and puts the old value back at exit; that part is not run, and
# says so, when the kernel cannot give the pages), in 4 KiB pages from the pool as it was
# when that is too small, and with DMAFS_HOST_HUGETLB=0. Then dmafs-load --target
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

# hb WANT [ENV...] - run host_buffer (with ENV); its plan must say it expects WANT pages
# ("2 MiB hugetlb" or "4 KiB").
hb() {
	local want=$1 rc
	shift
	env "$@" "$top_builddir/tests/host_buffer" "$T_WORK/mnt/f" "$pid" | tee "$T_WORK/hb.out"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || t_fail "host_buffer $* (see above)"
	grep -q "expecting $want pages" "$T_WORK/hb.out" || t_fail "host_buffer $* did not expect $want pages"
}

# 2 MiB pages for the 384 MiB buffer (193) and the raw hugetlbfs registrations (4), on top
# of what the pool has; the old size comes back at exit.
HP=/proc/sys/vm/nr_hugepages
hp_free() { awk '$1 == "HugePages_Free:" { print $2 }' /proc/meminfo; }
free0=$(hp_free)
hp0=$(cat "$HP")
t_sysctl "$HP" $((hp0 + 200))
if [ "$(hp_free)" -ge $((free0 + 197)) ]; then
	t_log "dmafs_buf_alloc_host with $(hp_free) free 2 MiB pages reserved: hugetlb pages, raw hugetlbfs registrations"
	hb "2 MiB hugetlb"
	grep -q "raw hugetlbfs registrations not checked" "$T_WORK/hb.out" && t_fail "raw hugetlbfs registrations not checked"
else
	t_log "huge pages NOT tested: the kernel gave $(($(hp_free) - free0)) of 200 more 2 MiB pages (memory too fragmented, or hugetlb limited)"
fi
t_sysctl "$HP" "$hp0"
if [ "$(hp_free)" -lt 193 ]; then
	t_log "dmafs_buf_alloc_host with $(hp_free) free 2 MiB pages: the 4 KiB fallback"
	hb "4 KiB"
fi
t_log "dmafs_buf_alloc_host with DMAFS_HOST_HUGETLB=0: 4 KiB pages"
hb "4 KiB" DMAFS_HOST_HUGETLB=0

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
