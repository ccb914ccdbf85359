#!/bin/bash
# Description: mount -o remount,ro and remount,rw through mount(8) and mount.fuse.dmafs,
# with no second daemon. With a file open for writing the remount to read-only is refused
# (EBUSY, as ext4 does) and nothing changes; with only read-only descriptors open it
# succeeds: they keep reading, writes, creates, mkdir, unlink, chmod and setxattr fail with
# EROFS, the kernel mount is ro in mountinfo, the daemon is the same process. Everything
# written before the remount (commit=3600, no fsync) and an atime changed by a read survive
# a kill -9 of the read-only daemon. Back to rw: writes work. A mount made with -o ro goes
# read-write (its members are reopened for writing) and what is written then persists;
# dmafs-fsck is clean. remount,noexec,nodiratime changes those flags. Another user cannot
# switch a root mount's mode (the mode ioctl and dmafs --remount fail with EPERM).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
mount --version 2>/dev/null | grep -q util-linux || t_skip "mount(8) is not util-linux's (it runs no helpers)"

# mount(8) runs /sbin/mount.fuse.dmafs for a remount of a fuse.dmafs mount (/sbin only):
# link this build's helper there for the test, unless the same one is there already.
HELPER=$(readlink -f "$T_MOUNT_HELPER")
dst=/sbin/mount.fuse.dmafs
[ -L "$dst" ] && [ ! -e "$dst" ] && rm -f "$dst" # dangling: left by an interrupted run
if [ -e "$dst" ]; then
	[ "$(readlink -f "$dst")" = "$HELPER" ] ||
		t_skip "$dst exists and is not this build's mount.dmafs (an installed dmafs, or another test run): not replacing it"
else
	ln -s "$HELPER" "$dst" 2>/dev/null || t_skip "cannot link $dst to this build's mount.dmafs"
	t_register file "$dst"
fi
# the helper finds the daemon beside its target (tests/sbin/dmafs); PATH for a run by hand
export PATH="$top_builddir/fs:$PATH"

t_workdir
chmod 0755 "$T_WORK"
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt

sbflags() { awk -v m="$1" '$5 == m { for (i = 7; $i != "-"; i++); print $(i + 3) }' /proc/self/mountinfo | tail -n 1; }
mntflags() { awk -v m="$1" '$5 == m { print $6 }' /proc/self/mountinfo | tail -n 1; }
is_ro() { case "$(sbflags "$1")," in ro,*) return 0 ;; esac; return 1; }
erofs() { # erofs DESC CMD...: CMD fails with "Read-only file system"
	local desc=$1 out
	shift
	out=$("$@" 2>&1) && t_fail "$desc succeeded on a read-only remount"
	case $out in *"Read-only file system"*) ;; *) t_fail "$desc: '$out', expected EROFS" ;; esac
}

t_mount "$T_MEMBERS" "$M" commit=3600,allow_other
pid=$(t_daemon_pids "$M")
head -c 5000000 /dev/urandom >"$T_WORK/ref" || t_fail urandom
cp "$T_WORK/ref" "$M/big" && echo small >"$M/small" && mkdir "$M/dir" || t_fail "write"
t_py -c "import os; os.setxattr('$M/small', 'user.k', b'v')" || t_fail setxattr

t_log "a file open for writing: remount,ro refused (busy), nothing changes"
exec 8>>"$M/small"
mount -o remount,ro "$M" 2>"$T_WORK/m.err" && t_fail "remount,ro with a file open for writing succeeded"
grep -q "busy" "$T_WORK/m.err" || t_fail "remount,ro refused without saying busy: $(cat "$T_WORK/m.err")"
is_ro "$M" && t_fail "the refused remount left the mount read-only"
echo more >&8 || t_fail "write after the refused remount"
exec 8>&-

t_log "read-only descriptors open: remount,ro succeeds, they keep reading"
exec 7<"$M/big"
sleep 1.1
cat "$M/small" >/dev/null # relatime: the first read after the write updates atime
atime=$(stat -c %x "$M/small")
mount -o remount,ro "$M" 2>"$T_WORK/m.err" || t_fail "mount -o remount,ro: $(cat "$T_WORK/m.err")"
is_ro "$M" || t_fail "not ro in mountinfo after remount,ro: $(sbflags "$M")"
[ "$(t_daemon_pids "$M")" = "$pid" ] || t_fail "daemon changed: $pid -> $(t_daemon_pids "$M")"
head -c 1000 <&7 | cmp - <(head -c 1000 "$T_WORK/ref") || t_fail "read from a descriptor open across the remount"
exec 7<&-
cmp "$M/big" "$T_WORK/ref" || t_fail "read after remount,ro"
erofs "write" sh -c "echo x >>'$M/small'"
erofs "create" touch "$M/new"
erofs "mkdir" mkdir "$M/d2"
erofs "unlink" rm "$M/small"
erofs "chmod" chmod 600 "$M/small"
erofs "setxattr" t_py -c "import os; os.setxattr('$M/small', 'user.k2', b'v')"
ls "$M/dir" >/dev/null || t_fail "listing a directory read-only"

t_log "another user cannot switch the mode"
if command -v setpriv >/dev/null; then
	nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
	nobody "$top_builddir/fs/dmafs" --remount -o rw "$M" 2>"$T_WORK/u.err" &&
		t_fail "uid 65534 remounted read-write"
	grep -q "only root\|Operation not permitted\|Permission denied" "$T_WORK/u.err" ||
		t_fail "uid 65534 remount says: $(cat "$T_WORK/u.err")"
	nobody "$T_PY" - "$M" <<'PY' || t_fail "mode ioctl as uid 65534"
import errno, fcntl, os, struct, sys
cmd = (3 << 30) | (272 << 16) | (0xD7 << 8) | 16  # DMAFS_IOC_MODE
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
buf = bytearray(struct.pack("IIiI", 0, 0, 0, 0) + bytes(256))  # read-write
try:
    fcntl.ioctl(fd, cmd, buf)
except OSError as e:
    sys.exit(0 if e.errno == errno.EPERM else "ioctl: %s" % e)
sys.exit("the mode ioctl succeeded for uid 65534")
PY
	erofs "write after the refused switch" sh -c "echo x >>'$M/small'"
fi

t_log "kill -9 of the read-only daemon: everything written before the remount is there"
t_crash "$M"
t_mount "$T_MEMBERS" "$M" commit=3600,allow_other
cmp "$M/big" "$T_WORK/ref" || t_fail "big lost"
[ "$(cat "$M/small")" = "$(printf 'small\nmore')" ] || t_fail "small is '$(cat "$M/small")'"
[ -d "$M/dir" ] || t_fail "dir lost"
[ "$(stat -c %x "$M/small")" = "$atime" ] || t_fail "atime $(stat -c %x "$M/small"), expected $atime (changed before the remount)"

t_log "remount,ro then remount,rw: writes work again, same daemon"
pid=$(t_daemon_pids "$M")
mount -o remount,ro "$M" || t_fail "remount,ro"
erofs "write" sh -c "echo x >'$M/w'"
mount -o remount,rw "$M" 2>"$T_WORK/m.err" || t_fail "mount -o remount,rw: $(cat "$T_WORK/m.err")"
is_ro "$M" && t_fail "still ro after remount,rw"
[ "$(t_daemon_pids "$M")" = "$pid" ] || t_fail "daemon changed on remount,rw"
echo w >"$M/w" && mkdir "$M/d3" && rm "$M/small" || t_fail "changes after remount,rw"

t_log "remount,noexec,nodiratime: the flags change"
mount -o remount,noexec,nodiratime "$M" || t_fail "remount,noexec,nodiratime"
case ",$(mntflags "$M")," in *,noexec,*nodiratime,* | *,nodiratime,*noexec,*) ;; *) t_fail "flags: $(mntflags "$M")" ;; esac
touch "$M/dir/x"
d0=$(stat -c %x "$M/dir")
sleep 1.1
ls "$M/dir" >/dev/null
[ "$(stat -c %x "$M/dir")" = "$d0" ] || t_fail "nodiratime after remount: directory atime changed"
t_umount "$M"

t_log "a mount made with -o ro goes read-write"
t_mount "$T_MEMBERS" "$M" ro
erofs "write on -o ro" sh -c "echo x >'$M/x'"
mount -o remount,rw "$M" 2>"$T_WORK/m.err" || t_fail "remount,rw of a -o ro mount: $(cat "$T_WORK/m.err")"
echo fromro >"$M/x" && head -c 2000000 "$T_WORK/ref" >"$M/y" || t_fail "write after remount,rw"
mount -o remount,ro "$M" || t_fail "remount,ro again"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"
[ "$(cat "$M/x")" = fromro ] && head -c 2000000 "$T_WORK/ref" | cmp - "$M/y" || t_fail "data written after remount,rw of a -o ro mount"
[ "$(cat "$M/w")" = w ] || t_fail "w"
t_umount "$M"
t_log "PASS"
