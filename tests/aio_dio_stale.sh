#!/bin/bash
# Description: with -o sync_dio, an asynchronous O_DIRECT write (io_uring) that has
# completed is seen by a buffered read of the same range, while other readers keep the
# file in the page cache (xfstests generic/451): the kernel then completes direct I/O
# before returning, where its asynchronous completion leaves such readers stale pages on
# current kernels (dmafs(8), sync_dio). AIO_DIO_SECONDS (default 6), AIO_DIO_READERS
# (default 8), AIO_DIO_OPTS (mount options, default sync_dio; AIO_DIO_OPTS= mounts with the
# defaults, where the kernel's gap shows).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
P=${AIO_DIO_STALE:-$top_builddir/tests/aio_dio_stale}
[ -x "$P" ] || t_skip "tests/aio_dio_stale not built ($P); run make check"
: "${AIO_DIO_SECONDS:=6}" "${AIO_DIO_READERS:=8}"
t_workdir
t_images 1 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M" "${AIO_DIO_OPTS-sync_dio}"
t_log "io_uring O_DIRECT writes, read back buffered, $AIO_DIO_READERS readers, $AIO_DIO_SECONDS s"
"$P" "$M/f" "$AIO_DIO_SECONDS" "$AIO_DIO_READERS"
rc=$?
[ $rc -eq 0 ] || t_fail "a buffered read after an O_DIRECT write returned old data (exit $rc; see above)"
t_umount "$M"
t_log "PASS"
