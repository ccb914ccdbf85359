#!/bin/bash
# Description: link(2) from a name of a file never fails with ENOENT while other names of
# it are unlinked or renamed over and other processes stat it (the kernel's cached link
# count must not reach 0 for a file that still has a name); NLINK_RACE_SECONDS per case
# (default 4).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
P=${NLINK_RACE:-$top_builddir/tests/nlink_race}
[ -x "$P" ] || t_skip "tests/nlink_race not built ($P); run make check"
: "${NLINK_RACE_SECONDS:=4}"
t_workdir
t_images 1 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
mkdir "$M/d" || t_fail "mkdir"
for how in unlink rename; do
	t_log "$how of other names, 2 readers, $NLINK_RACE_SECONDS s"
	"$P" "$M/d" "$NLINK_RACE_SECONDS" 2 "$how" ||
		t_fail "link(2) failed on a file that still has a name ($how; see above)"
done
t_umount "$M"
t_log "PASS"
