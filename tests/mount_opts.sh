#!/bin/bash
# Description: the mount options of every Linux filesystem, taken by the daemon itself and
# by mount.dmafs: nosuid/nodev by default, suid/dev/exec/noexec/sync/dirsync/async reach
# the kernel mount flags in mountinfo; noexec: exec fails with EACCES; nodev: a character
# device node cannot be opened, dev (root): a null device node made with mknod opens and
# reads nothing; a set-user-ID program runs as its owner only with suid. sync: data written without fsync (through a write-only and a read-write
# descriptor) and namespace changes survive a kill -9 right after, with commit=3600 (and
# the same without sync is lost: the check is real). dirsync: create, mkdir, mknod,
# symlink, link, rename, unlink and rmdir survive a kill -9 right after. O_TMPFILE fails
# with EOPNOTSUPP (libfuse 3.14 has no tmpfile operation).
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

t_log "default: nosuid,nodev,relatime"
t_mount "$T_MEMBERS" "$M" allow_other
read -r mo so <<<"$(flags "$M")"
has "$mo" nosuid && has "$mo" nodev && has "$mo" relatime || t_fail "default mount flags: $mo"
has "$mo" noexec && t_fail "noexec without asking: $mo"
# a set-user-ID copy of id(1), run by uid 65534: the bit is ignored on a nosuid mount
euid_of() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$1" -u; }
if command -v setpriv >/dev/null; then
	chmod 711 "$T_WORK"
	cp "$(command -v id)" "$M/sid" && chown 0:0 "$M/sid" && chmod 4755 "$M/sid" || t_fail "setuid copy of id"
	[ "$(euid_of "$M/sid")" = 65534 ] || t_fail "nosuid: a set-user-ID program ran as $(euid_of "$M/sid")"
fi
t_umount "$M"

t_log "noexec: in mountinfo, exec fails with EACCES"
t_mount "$T_MEMBERS" "$M" noexec
read -r mo so <<<"$(flags "$M")"
has "$mo" noexec || t_fail "noexec not in mountinfo: $mo"
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
