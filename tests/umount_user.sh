#!/bin/bash
# Description: a user's own dmafs mount (the daemon run by that user, as mount(8) does for
# an fstab `user` line) is unmounted by that user with umount.dmafs, which the kernel
# refuses a plain umount2() for and fusermount3 does; the daemon is waited for and the
# data written before is there after a remount. Another user may not unmount it.
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
UMOUNT=$top_builddir/tools/umount.dmafs
[ -x "$UMOUNT" ] || t_skip "umount.dmafs not built"
command -v setpriv >/dev/null || t_skip "setpriv not installed (util-linux)"
[ -u "$(command -v fusermount3)" ] || t_skip "fusermount3 is not set-user-ID root: users cannot mount FUSE here"
# Users mount FUSE through /dev/fuse, 0666 on a stock Debian; a container may give 0600:
# opened for the test, its mode restored at exit.
FUSE_MODE=$(stat -c %a /dev/fuse) || t_skip "no /dev/fuse"
trap 'r=$?; chmod "$FUSE_MODE" /dev/fuse; (exit $r); t_cleanup' EXIT
chmod 0666 /dev/fuse || t_skip "cannot open /dev/fuse to users (chmod failed)"
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
AS_OTHER=(setpriv --reuid=65533 --regid=65533 --clear-groups --)

t_workdir
chmod 0755 "$T_WORK"
# A user's daemon keeps its mount record in /run/user/UID/dmafs, which a login session
# provides; nobody has none here, so one is made for the test.
if [ ! -d /run/user/65534 ]; then
	mkdir -p /run/user/65534 && chown 65534:65534 /run/user/65534 && chmod 0700 /run/user/65534 ||
		t_fail "cannot make /run/user/65534"
	t_register dir /run/user/65534
fi
t_images 2 256M
chown 65534:65534 "${T_IMGS[@]}"
"${AS_NOBODY[@]}" "$MKFS" -q "${T_IMGS[@]}" || t_fail "mkfs.dmafs as nobody failed"
M=$T_WORK/mnt
mkdir "$M" && chown 65534:65534 "$M"
t_register mnt "$M"

t_log "nobody mounts its own images and writes a file"
"${AS_NOBODY[@]}" "$DMAFS" "$T_MEMBERS" "$M" 2>"$T_WORK/err" || t_fail "dmafs as nobody: $(cat "$T_WORK/err")"
t_wait_mounted "$M" 30 || t_fail "$M not mounted"
"${AS_NOBODY[@]}" sh -c "echo kept >'$M/f' && sync -f '$M/f'" || t_fail "nobody cannot write on its mount"
grep -q "user_id=65534" <(grep " $M " /proc/self/mountinfo) || t_fail "the mount is not nobody's: $(grep " $M " /proc/self/mountinfo)"

t_log "another user may not unmount it"
"${AS_OTHER[@]}" "$UMOUNT" "$M" >"$T_WORK/other.out" 2>&1 && t_fail "uid 65533 unmounted nobody's mount"
t_is_mounted "$M" || t_fail "the mount is gone after another user's refused unmount"
grep -q "must be superuser to unmount, or the user who mounted it" "$T_WORK/other.out" ||
	t_fail "the refusal does not say who may unmount: $(cat "$T_WORK/other.out")"

t_log "nobody unmounts it with umount.dmafs, silently, and the daemon is gone when it returns"
pids=$(t_daemon_pids "$M")
[ -n "$pids" ] || t_fail "no daemon found for $M"
"${AS_NOBODY[@]}" "$UMOUNT" "$M" >"$T_WORK/own.out" 2>&1 || t_fail "umount.dmafs as nobody failed: $(cat "$T_WORK/own.out")"
[ -s "$T_WORK/own.out" ] && t_fail "a successful unmount printed: $(cat "$T_WORK/own.out")"
t_is_mounted "$M" && t_fail "$M still mounted after nobody's umount.dmafs"
for p in $pids; do t_running "$p" && t_fail "daemon $p still running after umount.dmafs returned"; done

t_log "the file is there after a remount"
"${AS_NOBODY[@]}" "$DMAFS" "$T_MEMBERS" "$M" 2>"$T_WORK/err" || t_fail "dmafs as nobody again: $(cat "$T_WORK/err")"
t_wait_mounted "$M" 30 || t_fail "$M not mounted again"
[ "$("${AS_NOBODY[@]}" cat "$M/f")" = kept ] || t_fail "the file written before the unmount is not there"
"${AS_NOBODY[@]}" "$UMOUNT" "$M" || t_fail "second umount.dmafs as nobody failed"
t_log PASS
