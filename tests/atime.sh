#!/bin/bash
# Description: access times. relatime (default): the first read after a write updates
# atime (also when the written pages are still in the kernel's page cache), a second read
# does not, an atime set back two days with touch -a is updated by the next read (touch
# also moves ctime), a directory listing after a change updates the directory's atime;
# stat right after a read shows the new atime; a placement (dmafs-load) counts as a read. strictatime: every read; noatime: never;
# nodiratime: files yes, directories no. The atime survives unmount and a kill -9 after a
# commit, and is not written by the read itself (commit=3600: a kill -9 loses it).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt

at() { stat -c %x "$1"; }

# rd FILE - read FILE through a fresh open.
rd() { cat "$1" >/dev/null || t_fail "read $1"; }

# tick FILE... - wait (5 s at most) until a time the daemon gives now is later than the
# access time of every FILE, so that an update of one shows as a different atime.
ns() { local t; t=$(stat -c %.9X "$1") || t_fail "stat $1"; echo "${t/./}"; }
tick() {
	local f n=500 now
	for f in "$@"; do
		while :; do
			touch "$M/.tick" || t_fail "touch $M/.tick"
			now=$(stat -c %.9Y "$M/.tick") || t_fail "stat $M/.tick"
			((${now/./} > $(ns "$f"))) && break
			((n-- > 0)) || t_fail "the daemon's clock has not passed the atime of $f in 5 s"
			sleep 0.01
		done
	done
}

t_log "relatime (default): first read after a write updates atime, the second does not"
t_mount "$T_MEMBERS" "$M"
grep -q " $M .*relatime" /proc/self/mountinfo || t_fail "default mount does not show relatime"
echo hello >"$M/f" || t_fail "write f"
# written through the page cache (O_RDWR): the read is served without the daemon unless the
# open drops the cached pages
t_py -c "import os; fd = os.open('$M/g', os.O_RDWR | os.O_CREAT, 0o644); os.write(fd, b'x' * 10000); os.close(fd)" ||
	t_fail "write g"
a0=$(at "$M/f")
g0=$(at "$M/g")
tick "$M/f" "$M/g"
rd "$M/f"
rd "$M/g"
a1=$(at "$M/f")
[ "$a1" != "$a0" ] || t_fail "first read after the write did not update atime of f ($a0)"
[ "$(at "$M/g")" != "$g0" ] || t_fail "first read of g (cached pages) did not update its atime ($g0)"
tick "$M/f"
rd "$M/f"
[ "$(at "$M/f")" = "$a1" ] || t_fail "second read within 24 h updated atime: $a1 -> $(at "$M/f")"
t_log "an atime two days old is updated by the next read"
touch -a -d "2 days ago" "$M/f" || t_fail "touch -a -d"
old=$(at "$M/f")
rd "$M/f"
[ "$(at "$M/f")" != "$old" ] || t_fail "read after touch -a -d '2 days ago' left atime $old"
t_log "a placement is a read: the first one after a write updates atime"
echo placed >"$M/p" || t_fail "write p"
p0=$(at "$M/p")
tick "$M/p"
"$top_builddir/tools/dmafs-load" --target host -q "$M/p" >/dev/null || t_fail "dmafs-load --target host $M/p"
[ "$(at "$M/p")" != "$p0" ] || t_fail "a placement after the write did not update the atime of p ($p0)"
t_log "a directory listed after a change gets a new atime"
mkdir "$M/d" && touch "$M/d/x" || t_fail "mkdir/touch"
d0=$(at "$M/d")
tick "$M/d"
ls "$M/d" >/dev/null || t_fail "ls"
[ "$(at "$M/d")" != "$d0" ] || t_fail "listing d after a change did not update its atime"
d1=$(at "$M/d")
ls "$M/d" >/dev/null
[ "$(at "$M/d")" = "$d1" ] || t_fail "second listing of d updated its atime"
t_log "atime survives an unmount"
want=$(at "$M/f")
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
[ "$(at "$M/f")" = "$want" ] || t_fail "atime after remount $(at "$M/f"), expected $want"
t_umount "$M"

t_log "atime changes wait for the commit: commit=3600, read, kill -9: the old atime is back"
t_mount "$T_MEMBERS" "$M" commit=3600
echo new >"$M/h" && sync "$M/h" || t_fail "write h"
h0=$(at "$M/h")
tick "$M/h"
rd "$M/h"
[ "$(at "$M/h")" != "$h0" ] || t_fail "read of h did not update atime"
t_crash "$M"
t_mount "$T_MEMBERS" "$M" commit=1
[ "$(at "$M/h")" = "$h0" ] || t_fail "an atime change was written by the read itself: $(at "$M/h"), committed $h0"
t_log "commit=1: the atime change of a read is durable after the next commit"
tick "$M/h"
rd "$M/h"
h1=$(at "$M/h")
[ "$h1" != "$h0" ] || t_fail "read of h did not update atime"
# A file created after the read: once its name is in both metadata log copies, a commit
# that began after the read is durable (no sync: it would commit by itself).
: >"$M/commit-mark-h1" || t_fail "create commit-mark-h1"
t_py "$top_srcdir/tests/t_helpers.py" wait-commit 10 commit-mark-h1 "${T_IMGS[0]}" "${T_IMGS[1]}" ||
	t_fail "no commit with commit=1 within 10 s of the read"
t_crash "$M"
t_mount "$T_MEMBERS" "$M"
[ "$(at "$M/h")" = "$h1" ] || t_fail "atime after a commit and kill -9: $(at "$M/h"), expected $h1"
t_umount "$M"

t_log "strictatime: every read"
t_mount "$T_MEMBERS" "$M" strictatime
grep " $M " /proc/self/mountinfo | grep -q "relatime\|noatime" && t_fail "strictatime mount shows relatime or noatime"
rd "$M/f"
s1=$(at "$M/f")
tick "$M/f"
rd "$M/f"
s2=$(at "$M/f")
[ "$s2" != "$s1" ] || t_fail "strictatime: second read left atime $s1"
tick "$M/d"
ls "$M/d" >/dev/null
ds=$(at "$M/d")
tick "$M/d"
ls "$M/d" >/dev/null
[ "$(at "$M/d")" != "$ds" ] || t_fail "strictatime: second listing left the directory's atime"
t_umount "$M"

t_log "noatime: never"
t_mount "$T_MEMBERS" "$M" noatime
grep -q " $M .*noatime" /proc/self/mountinfo || t_fail "noatime not in mountinfo"
echo changed >"$M/f" || t_fail "write"
n0=$(at "$M/f")
tick "$M/f"
rd "$M/f"
[ "$(at "$M/f")" = "$n0" ] || t_fail "noatime: a read updated atime"
touch "$M/d/y"
nd=$(at "$M/d")
ls "$M/d" >/dev/null
[ "$(at "$M/d")" = "$nd" ] || t_fail "noatime: a listing updated the directory's atime"
t_umount "$M"

t_log "nodiratime: files are updated, directories are not"
t_mount "$T_MEMBERS" "$M" nodiratime
grep -q " $M .*nodiratime" /proc/self/mountinfo || t_fail "nodiratime not in mountinfo"
echo again >"$M/f" && touch "$M/d/z" || t_fail "write"
f0=$(at "$M/f")
nd=$(at "$M/d")
tick "$M/f" "$M/d"
rd "$M/f"
ls "$M/d" >/dev/null
[ "$(at "$M/f")" != "$f0" ] || t_fail "nodiratime: read of a file did not update atime"
[ "$(at "$M/d")" = "$nd" ] || t_fail "nodiratime: a listing updated the directory's atime"
t_umount "$M"

t_log "lazytime, atime, diratime, norelatime, nostrictatime are accepted"
t_mount "$T_MEMBERS" "$M" lazytime,nolazytime,atime,diratime,norelatime,nostrictatime
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
