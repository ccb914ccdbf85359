#!/bin/bash
# Description: the mount options of every Linux filesystem, taken by the daemon itself and
# by mount.dmafs: root's mounts are suid,dev by default, as a kernel filesystem's (a
# set-user-ID program runs as its owner), nosuid/nodev/noexec given apply;
# suid/dev/exec/noexec/sync/dirsync/async reach the kernel mount flags in mountinfo;
# noexec: exec fails with EACCES; nodev: a character device node cannot be opened, dev
# (root): a null device node made with mknod opens and reads nothing; nosuid: a
# set-user-ID program runs as its caller. sync: data written without fsync (through a write-only and a read-write
# descriptor) and namespace changes survive a kill -9 right after, with commit=3600 (and
# the same without sync is lost: the check is real). dirsync: create, mkdir, mknod,
# symlink, link, rename, unlink and rmdir survive a kill -9 right after. O_TMPFILE fails
# with EOPNOTSUPP (libfuse 3.14 has no tmpfile operation). mount.dmafs refuses a newline,
# tab, escape or other control character in an option, the source or the mount point
# (status 1, the string named and escaped, nothing started or mounted); user, users,
# user=NAME imply noexec,nosuid,nodev where they stand, a later exec,suid,dev wins, as
# mount(8) passes them; a remount with user=NAME in the options works; where the daemon
# takes -o user=NAME (dmafs --help lists it), user=NAME ends up in the mount's utab entry
# (what umount(8) checks for an fstab user mount), through mount(8) itself too.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt

# flags MNT - per-mount options, then superblock options, of MNT in mountinfo
flags() { awk -v m="$1" '$5 == m { for (i = 7; $i != "-"; i++); print $6 " " $(i + 3) }' /proc/self/mountinfo | tail -n 1; }
has() { case ",$1," in *,"$2",*) return 0 ;; esac; return 1; }

t_log "every option is accepted by the daemon"
for o in atime noatime nodiratime diratime relatime norelatime strictatime nostrictatime \
	lazytime nolazytime dev nodev suid nosuid exec noexec sync async dirsync; do
	t_mount "$T_MEMBERS" "$M" "$o"
	t_umount "$M"
done

t_log "default for root: suid,dev,relatime, as a kernel filesystem's"
t_mount "$T_MEMBERS" "$M" allow_other
read -r mo so <<<"$(flags "$M")"
has "$mo" relatime || t_fail "default mount flags: $mo, no relatime"
has "$mo" nosuid || has "$mo" nodev || has "$mo" noexec && t_fail "root's mount by default: $mo, expected suid,dev,exec"
# a set-user-ID copy of id(1), run by uid 65534: it runs as its owner on a suid mount, and
# the bit is ignored on a nosuid one
euid_of() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$1" -u; }
if command -v setpriv >/dev/null; then
	chmod 711 "$T_WORK"
	cp "$(command -v id)" "$M/sid" && chown 0:0 "$M/sid" && chmod 4755 "$M/sid" || t_fail "setuid copy of id"
	[ "$(euid_of "$M/sid")" = 0 ] || t_fail "suid by default: a set-user-ID program ran as $(euid_of "$M/sid"), not 0"
fi
t_umount "$M"

t_log "nosuid: in mountinfo, a set-user-ID program runs as its caller"
t_mount "$T_MEMBERS" "$M" nosuid,allow_other
read -r mo so <<<"$(flags "$M")"
has "$mo" nosuid || t_fail "nosuid not in mountinfo: $mo"
has "$mo" nodev && t_fail "nosuid alone: nodev in mountinfo: $mo"
if command -v setpriv >/dev/null; then
	[ "$(euid_of "$M/sid")" = 65534 ] || t_fail "nosuid: a set-user-ID program ran as $(euid_of "$M/sid")"
fi
t_umount "$M"

t_log "noexec,nodev: in mountinfo, exec fails with EACCES"
t_mount "$T_MEMBERS" "$M" noexec,nodev
read -r mo so <<<"$(flags "$M")"
has "$mo" noexec && has "$mo" nodev || t_fail "noexec,nodev not in mountinfo: $mo"
has "$mo" nosuid && t_fail "noexec,nodev: nosuid in mountinfo: $mo"
cp /bin/true "$M/true" && chmod 755 "$M/true" || t_fail "cp /bin/true"
err=$("$M/true" 2>&1) && t_fail "a program ran from a noexec mount"
case $err in *"Permission denied"*) ;; *) t_fail "exec on noexec: '$err', expected Permission denied" ;; esac
t_log "nodev: a character device node cannot be opened"
mknod "$M/null" c 1 3 || t_fail "mknod"
t_py -c "
import os, errno, sys
try:
    os.open('$M/null', os.O_RDONLY)
except OSError as e:
    sys.exit(0 if e.errno == errno.EACCES else 'open: %s' % e)
sys.exit('a device node opened on a nodev mount')" || t_fail "nodev"
t_umount "$M"

t_log "dev,suid,exec as root: flags cleared, the node opens, programs run"
t_mount "$T_MEMBERS" "$M" dev,suid,exec,allow_other
read -r mo so <<<"$(flags "$M")"
has "$mo" nodev || has "$mo" nosuid || has "$mo" noexec && t_fail "dev,suid,exec: mountinfo says $mo"
[ "$(head -c 10 "$M/null" | wc -c)" = 0 ] || t_fail "reading the null node"
echo discard >"$M/null" || t_fail "writing the null node"
"$M/true" || t_fail "exec without noexec"
if command -v setpriv >/dev/null; then
	[ "$(euid_of "$M/sid")" = 0 ] || t_fail "suid: the set-user-ID program ran as $(euid_of "$M/sid"), not 0"
fi
t_umount "$M"

t_log "through mount.dmafs: noexec,nodev,nosuid,nodiratime,noatime reach the mount"
PATH="$top_builddir/fs:$PATH" "$top_srcdir/tools/mount.dmafs" "$T_MEMBERS" "$M" \
	-o defaults,noexec,nodev,nosuid,noatime,nodiratime,commit=5 2>"$T_WORK/helper.err" ||
	t_fail "mount.dmafs: $(cat "$T_WORK/helper.err")"
t_wait_mounted "$M" 30 || t_fail "mount.dmafs did not mount"
for p in $(t_daemon_pids "$M"); do t_register pid "$p"; done
read -r mo so <<<"$(flags "$M")"
for f in noexec nodev nosuid noatime nodiratime; do has "$mo" "$f" || t_fail "mount.dmafs: $f not in $mo"; done
t_umount "$M"

# helper ARGS... - run mount.dmafs as mount(8) does (this build's daemon found through
# PATH); its stderr is kept in $T_WORK/helper.err
helper() { PATH="$top_builddir/fs:$PATH" "$top_srcdir/tools/mount.dmafs" "$@" 2>"$T_WORK/helper.err"; }
# helper_mount WHAT ARGS... - mount with the helper and register the daemon
helper_mount() {
	local what=$1
	shift
	helper "$@" || t_fail "$what: mount.dmafs $*: $(cat "$T_WORK/helper.err")"
	t_wait_mounted "$M" 30 || t_fail "$what: mount.dmafs did not mount"
	for p in $(t_daemon_pids "$M"); do t_register pid "$p"; done
}
# utab_opts MNT - OPTS= of the utab entry for MNT (empty if none)
utab_opts() { awk -v t="TARGET=$1" '$2 == t { for (i = 3; i <= NF; i++) if ($i ~ /^OPTS=/) print substr($i, 6) }' /run/mount/utab 2>/dev/null; }
# utab_user MNT WHAT - fail unless the utab entry of MNT has user=nobody, where the daemon
# records it
utab_user=0
"$DMAFS" --help 2>&1 | grep -q 'user=NAME' && utab_user=1
in_utab=", user=nobody in utab"
[ $utab_user = 1 ] || in_utab=" (user=nobody in utab not checked: $DMAFS --help lists no -o user=NAME)"
utab_user() {
	[ $utab_user = 1 ] || return 0
	has "$(utab_opts "$1")" user=nobody ||
		t_fail "$2: no user=nobody in the utab entry of $1: $(cat /run/mount/utab 2>&1)"
}

t_log "through mount.dmafs: a control character in an option, the source or the mount point is refused"
mkdir -p "$M"
for c in $'\n' $'\t' $'\e'; do
	case $c in
	$'\n') name=newline e='\n' ;;
	$'\t') name=tab e='\t' ;;
	*) name=escape e='\x1b' ;;
	esac
	bad=$T_WORK/mnt${c}x
	mkdir -p "$bad" || t_fail "mkdir a mount point named with $name"
	for where in option source "mount point"; do
		case $where in
		option) args=("$T_MEMBERS" "$M" -o "rw,commit=5${c}0") shown="commit=5${e}0" ;;
		source) args=("${T_IMGS[0]}$c,${T_IMGS[1]}" "$M") shown="${T_IMGS[0]}$e,${T_IMGS[1]}" ;;
		*) args=("$T_MEMBERS" "$bad") shown="$T_WORK/mnt${e}x" ;;
		esac
		helper "${args[@]}"
		rc=$?
		# not t_register'd: a newline would split the state file; undo a wrong mount here
		for m in "$M" "$bad"; do
			if [ "$(stat -c %d -- "$m" 2>&1)" != "$(stat -c %d -- "$T_WORK")" ] ||
				[ -n "$(t_daemon_pids "$m")" ]; then
				fusermount3 -u "$m"
				t_fail "$where with a $name: mount.dmafs mounted or started the daemon (status $rc)"
			fi
		done
		[ $rc = 1 ] || t_fail "$where with a $name: mount.dmafs exited $rc, expected 1"
		want="mount.dmafs: $where \"$shown\" contains a control character ($name): refused"
		[ "$(cat "$T_WORK/helper.err")" = "$want" ] ||
			t_fail "$where with a $name: mount.dmafs said '$(cat -A "$T_WORK/helper.err")', expected '$want'"
	done
done
helper "$T_MEMBERS" "$M" -o $'rw,x\x7f'
[ $? = 1 ] && [ "$(cat "$T_WORK/helper.err")" = 'mount.dmafs: option "x\x7f" contains a control character (\x7f): refused' ] ||
	t_fail "DEL in an option: '$(cat -A "$T_WORK/helper.err")'"

t_log "through mount.dmafs: user, users, user=NAME, owner imply their flags where they stand (-f -v)"
# what mount(8) passes (util-linux 2.38): for a root mount -o user=NAME, rw,user=NAME,exec,suid,dev;
# for an fstab user line, rw,noexec,nosuid,nodev,user; for users,exec, rw,nosuid,nodev,users,exec
while read -r given daemon; do
	helper "$T_MEMBERS" "$M" -f -v -o "$given" || t_fail "mount.dmafs -f -v -o $given: $(cat "$T_WORK/helper.err")"
	got=$(sed -n 's/^mount\.dmafs: .*dmafs -o \([^ ]*\) .*/\1/p' "$T_WORK/helper.err")
	[ "$got" = "$daemon" ] || t_fail "-o $given: the daemon gets -o '$got', expected '$daemon'"
done <<EOF
rw,user=nobody rw,noexec,nosuid,nodev,user=nobody
rw,user=nobody,exec,suid,dev rw,user=nobody,exec,suid,dev
rw,noexec,nosuid,nodev,user rw,noexec,nosuid,nodev
rw,nosuid,nodev,users,exec rw,nosuid,nodev,exec
owner,dev nosuid,dev
noexec,user,exec,commit=5 nosuid,nodev,exec,commit=5
EOF

t_log "through mount.dmafs: -o rw,user=nobody mounts noexec,nosuid,nodev$in_utab"
helper_mount "user=nobody" "$T_MEMBERS" "$M" -o rw,user=nobody
read -r mo so <<<"$(flags "$M")"
for f in noexec nosuid nodev; do has "$mo" "$f" || t_fail "user=nobody: $f not in $mo"; done
has "$(utab_opts "$M")" helper=dmafs || t_fail "user=nobody: no helper=dmafs entry for $M in utab: $(cat /run/mount/utab 2>&1)"
utab_user "$M" "user=nobody"
t_umount "$M"
[ -z "$(utab_opts "$M")" ] || t_fail "user=nobody: utab entry of $M left after the unmount"

t_log "through mount.dmafs: as mount -o user=nobody passes it (rw,user=nobody,exec,suid,dev), remount$in_utab"
helper_mount "mount -o user=nobody" "$T_MEMBERS" "$M" -o rw,user=nobody,exec,suid,dev
read -r mo so <<<"$(flags "$M")"
for f in noexec nosuid nodev; do has "$mo" "$f" && t_fail "user=nobody,exec,suid,dev: $f in $mo"; done
utab_user "$M" "user=nobody,exec,suid,dev"
# mount -o remount,ro passes the utab options back (util-linux 2.38)
helper "$T_MEMBERS" "$M" -o ro,relatime,remount,user_id=0,group_id=0,default_permissions,helper=dmafs,user=nobody,exec,suid,dev ||
	t_fail "remount with user=nobody: $(cat "$T_WORK/helper.err")"
read -r mo so <<<"$(flags "$M")"
has "$mo" ro || t_fail "remount with user=nobody: not read-only: $mo"
utab_user "$M" "remount with user=nobody"
t_umount "$M"

# umount(8) run by nobody for an fstab user line is not tried: umount(8) runs the helper
# (umount.dmafs, from helper=dmafs) with the caller's IDs, which cannot unmount a mount
# that root made.
if mount --version 2>/dev/null | grep -q util-linux; then
	# mount(8) finds helpers in /sbin only: link this one there unless one is installed
	MOUNT_HELPER=$(readlink -f "$T_MOUNT_HELPER")
	via_mount=0
	if [ -e /sbin/mount.dmafs ]; then
		[ "$(readlink -f /sbin/mount.dmafs)" = "$MOUNT_HELPER" ] && via_mount=1
	elif ln -s "$MOUNT_HELPER" /sbin/mount.dmafs 2>/dev/null; then
		t_register file /sbin/mount.dmafs
		via_mount=1
	fi
	if [ $via_mount = 1 ]; then
		t_log "through mount(8): mount -t dmafs -o user=nobody passes user=nobody on$in_utab"
		mount -v -t dmafs -o user=nobody "$T_MEMBERS" "$M" >"$T_WORK/mount.out" 2>&1 ||
			t_fail "mount -t dmafs -o user=nobody: $(cat "$T_WORK/mount.out")"
		t_wait_mounted "$M" 30 || t_fail "mount -t dmafs -o user=nobody did not mount"
		for p in $(t_daemon_pids "$M"); do t_register pid "$p"; done
		grep -q '^mount\.dmafs: .*dmafs -o [^ ]*user=nobody' "$T_WORK/mount.out" ||
			t_fail "mount(8) did not pass user=nobody through mount.dmafs: $(cat "$T_WORK/mount.out")"
		utab_user "$M" "mount -t dmafs -o user=nobody"
		[ "$(grep -c "TARGET=$M " /run/mount/utab)" = 1 ] || t_fail "mount(8): more than one utab entry for $M"
		t_umount "$M"
	else
		t_log "not checked through mount(8): /sbin/mount.dmafs is another dmafs's helper"
	fi
fi

t_log "O_TMPFILE fails with EOPNOTSUPP"
t_mount "$T_MEMBERS" "$M"
t_py -c "
import os, errno, sys
for i in range(2):
    try:
        os.open('$M', os.O_TMPFILE | os.O_RDWR, 0o600)
    except OSError as e:
        if e.errno != errno.EOPNOTSUPP:
            sys.exit('O_TMPFILE: %s' % e)
        continue
    sys.exit('O_TMPFILE opened')" || t_fail "O_TMPFILE"
t_umount "$M"

# writes MNT - data without fsync through O_WRONLY (direct) and O_RDWR (page cache)
writes() {
	head -c 3000000 /dev/urandom >"$T_WORK/ref" || t_fail "urandom"
	cp "$T_WORK/ref" "$1/wo" || t_fail "write wo"
	t_py -c "
import os
fd = os.open('$1/rw', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, open('$T_WORK/ref', 'rb').read()[:123457])
os.close(fd)" || t_fail "write rw"
	mkdir "$1/dir" && mv "$1/wo" "$1/dir/wo2" || t_fail "mkdir/mv"
}

t_log "without sync (commit=3600): a kill -9 right after loses the unsynced writes"
t_mount "$T_MEMBERS" "$M" commit=3600
writes "$M"
t_crash "$M"
t_mount "$T_MEMBERS" "$M"
[ -e "$M/dir/wo2" ] && t_fail "without sync, wo2 survived the kill -9: the sync check below would prove nothing"
rm -rf "$M/rw" "$M/dir"
t_umount "$M"

t_log "sync (commit=3600): everything written survives a kill -9 right after"
t_mount "$T_MEMBERS" "$M" sync,commit=3600
read -r mo so <<<"$(flags "$M")"
has "$so" sync || t_fail "sync not among the superblock options: $so"
writes "$M"
t_crash "$M"
t_mount "$T_MEMBERS" "$M"
cmp "$T_WORK/ref" "$M/dir/wo2" || t_fail "sync: O_WRONLY data lost by kill -9"
head -c 123457 "$T_WORK/ref" | cmp - "$M/rw" || t_fail "sync: O_RDWR data lost by kill -9"
t_umount "$M"

t_log "dirsync (commit=3600): namespace changes survive a kill -9 right after"
t_mount "$T_MEMBERS" "$M" dirsync,commit=3600
read -r mo so <<<"$(flags "$M")"
has "$so" dirsync || t_fail "dirsync not among the superblock options: $so"
mkdir "$M/ds" && touch "$M/ds/a" && mknod "$M/ds/fifo" p && ln -s a "$M/ds/sym" &&
	ln "$M/ds/a" "$M/ds/hard" && mv "$M/ds/a" "$M/ds/b" && mkdir "$M/ds/gone" &&
	rmdir "$M/ds/gone" && rm "$M/rw" || t_fail "namespace changes"
t_crash "$M"
t_mount "$T_MEMBERS" "$M"
[ -f "$M/ds/b" ] && [ -p "$M/ds/fifo" ] && [ -L "$M/ds/sym" ] && [ -f "$M/ds/hard" ] ||
	t_fail "dirsync: lost: $(ls -l "$M/ds")"
[ ! -e "$M/ds/a" ] && [ ! -e "$M/ds/gone" ] && [ ! -e "$M/rw" ] || t_fail "dirsync: a removal was lost"
[ "$(stat -c %h "$M/ds/b")" = 2 ] || t_fail "dirsync: link count of b is $(stat -c %h "$M/ds/b")"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
