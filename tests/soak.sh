#!/bin/bash
# Description: concurrency soak: 6 writer and 2 reader processes doing random operations (write, append, truncate, rename, link, unlink, mkdir/rmdir, symlink, setxattr, fsync) for SOAK_SECONDS (default 20, 45 with DMAFS_SOAK=1) on 3 members; per-writer models match during the run, after the run and after a remount, and dmafs-fsck finds the members clean.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
FSCK=$top_builddir/tools/dmafs-fsck
[ -x "$FSCK" ] || t_skip "dmafs-fsck not built"
# 20 s in every `make check`; DMAFS_SOAK=1 asks for the longer run, SOAK_SECONDS for any length.
if [ -n "${DMAFS_SOAK:-}" ]; then
	: "${SOAK_SECONDS:=45}"
else
	: "${SOAK_SECONDS:=20}"
fi
t_workdir
t_images 3 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
STATE=$T_WORK/state/models.json   # outside the mount
mkdir -p "$T_WORK/state" || t_fail "mkdir state"
W="$top_srcdir/tests/soak_work.py"

t_mount "$T_MEMBERS" "$M"
t_log "random operations for $SOAK_SECONDS s (SOAK_SEED=${SOAK_SEED:-random})"
t_py "$W" run "$M" "$STATE" "$SOAK_SECONDS" 6 2 ${SOAK_SEED:+"$SOAK_SEED"} ||
	t_fail "soak workload (see above; daemon stderr: $(tail -5 "$T_DAEMON_ERR"))"
[ -n "$(t_daemon_pids "$M")" ] || t_fail "daemon is gone after the workload"

t_log "ls -R of the tree"
ls -R "$M" >"$T_WORK/ls.out" 2>"$T_WORK/ls.err" || t_fail "ls -R failed: $(head -5 "$T_WORK/ls.err")"
t_log "ls -R: $(wc -l <"$T_WORK/ls.out") lines"
t_umount "$M"

t_log "dmafs-fsck on the members"
"$FSCK" "${T_IMGS[@]}" >"$T_WORK/fsck.out" 2>&1
rc=$?
[ $rc = 0 ] || t_fail "dmafs-fsck exited $rc (0 = clean expected): $(head -40 "$T_WORK/fsck.out")"

t_log "remount and verify the per-writer files against the saved models"
t_mount "$T_MEMBERS" "$M"
t_py "$W" verify "$M" "$STATE" || t_fail "private files differ after the remount"
ls -R "$M" >/dev/null 2>"$T_WORK/ls.err" || t_fail "ls -R after remount failed: $(head -5 "$T_WORK/ls.err")"
t_umount "$M"
t_log "PASS"
