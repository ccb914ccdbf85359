#!/bin/bash
# Description: back-to-back overwrites of a file holding a quarter of the filesystem, each
# one large O_DIRECT write, all succeed. Copy-on-write frees the old blocks only once the
# change is durable, so after three overwrites within one commit interval the space is in
# frees waiting for the commit: the write must commit and take it, not come back short (the
# kernel's asynchronous direct I/O turns a short reply into EIO). OVERWRITE_ROUNDS (8).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
: "${OVERWRITE_ROUNDS:=8}"
t_workdir
t_images 2 1G
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
command -v xfs_io >/dev/null || t_skip "xfs_io (Debian package xfsprogs) not installed"
# A descriptor open for reading and writing (a write-only one bypasses the page cache in
# another way, where the kernel retries a short write itself), 64 MiB per O_DIRECT call.
t_log "$OVERWRITE_ROUNDS overwrites of a 512 MiB file on 2 x 1 GiB members, xfs_io -d pwrite -b 64m"
for r in $(seq "$OVERWRITE_ROUNDS"); do
	xfs_io -f -d -c "pwrite -q -S 0x$((r % 10))$((r % 10)) -b 64m 0 512m" "$M/f" >"$T_WORK/io.out" 2>&1 ||
		t_fail "overwrite $r failed: $(cat "$T_WORK/io.out")"
	grep -q . "$T_WORK/io.out" && t_fail "overwrite $r: $(cat "$T_WORK/io.out")"
done
head -c $((512 << 20)) /dev/zero | tr '\0' "\\$(printf %o $((0x$((r % 10))$((r % 10)))))" >"$T_WORK/want"
cmp "$T_WORK/want" "$M/f" || t_fail "the file does not hold the last overwrite's bytes"
t_umount "$M"
t_log "PASS"
