#!/bin/bash
# Description: persistence across unmount/mount: a generated tree (sizes around block and
# stripe boundaries, dirs, symlinks, hard links, modes, owners, times, xattrs) and a cp -a
# of a system tree compared by manifest, sha256sum and diff -r; rsync -a when installed;
# daemon exit status 0 after unmount; read-only mount; the mount.dmafs helper.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 4 512M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
H="$top_srcdir/tests/t_helpers.py"
SRC=
for d in /usr/share/doc /usr/include /etc; do
	[ -d "$d" ] && { SRC=$d; break; }
done

t_log "mount in the foreground (-f) to see the daemon's exit status"
t_mount_fg "$T_MEMBERS" "$M"

t_log "generated tree: sizes around 4 KiB / 1 MiB boundaries, links, modes, owners, times, xattrs"
mkdir -p "$M/gen/a/b/c" "$M/gen/empty" || t_fail "mkdir"
i=0
for sz in 0 1 4095 4096 4097 65536 1048575 1048576 1048577 3145735 9437184; do
	head -c "$sz" /dev/urandom >"$M/gen/a/f$sz" || t_fail "write f$sz"
	i=$((i + 1))
done
cp "$M/gen/a/f4097" "$M/gen/a/b/c/copy" || t_fail "cp"
ln "$M/gen/a/f1048577" "$M/gen/a/b/hard1" && ln "$M/gen/a/f1048577" "$M/gen/hard2" || t_fail "ln"
ln -s ../a/f4096 "$M/gen/empty/../a/b/rel" && ln -s /nonexistent/abs "$M/gen/abs" || t_fail "ln -s"
chmod 0751 "$M/gen/a/b" && chmod 4755 "$M/gen/a/f1" && chmod 0600 "$M/gen/a/f0" || t_fail "chmod"
chown 1001:2002 "$M/gen/a/f4095" && chown -h 3003:4004 "$M/gen/abs" || t_fail "chown"
touch -d "2000-01-02 03:04:05.123456789 UTC" "$M/gen/a/f65536" || t_fail "touch -d"
touch -h -d "1999-12-31 23:59:59 UTC" "$M/gen/abs" 2>/dev/null
t_py -c "import os; os.setxattr('$M/gen/a/f1', 'user.k', b'v'*300); os.setxattr('$M/gen/a/b', 'user.d', b'')" ||
	t_fail "setxattr"
dd if=/dev/urandom of="$M/gen/sparse" bs=4096 count=3 seek=5000 status=none || t_fail "sparse"

if [ -n "$SRC" ]; then
	t_log "cp -a $SRC into the mount, diff -r against the source"
	cp -a "$SRC" "$M/copy" || t_fail "cp -a $SRC $M/copy"
	diff -r --no-dereference "$SRC" "$M/copy" >"$T_WORK/diff1" 2>&1 || {
		head -20 "$T_WORK/diff1"
		t_fail "cp -a copy differs from $SRC"
	}
fi
if command -v rsync >/dev/null; then
	t_log "rsync -a into the mount, then rsync -n -c reports nothing to do"
	rsync -a "$M/gen/" "$M/rsynced/" || t_fail "rsync -a into the mount"
	rsync -a "${SRC:-/etc}/" "$M/rsynced-src/" 2>"$T_WORK/rsync.err" || t_fail "rsync -a $SRC: $(head -3 "$T_WORK/rsync.err")"
	left=$(rsync -a -n -c -i "${SRC:-/etc}/" "$M/rsynced-src/" | head -5)
	[ -z "$left" ] || t_fail "rsync -c finds differences after rsync -a: $left"
else
	t_log "rsync not installed: the rsync part is not run (this is not a pass of it)"
fi

t_log "checksums and manifest before unmount"
(cd "$M" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$T_WORK/sums" || t_fail "sha256sum"
t_py "$H" manifest "$M" >"$T_WORK/man1" || t_fail "manifest"

t_log "unmount: the -f daemon exits with status 0"
fusermount3 -u "$M" || t_fail "fusermount3 -u"
wait "$T_DAEMON_PID"
rc=$?
[ $rc = 0 ] || t_fail "daemon exited $rc after unmount: $(cat "$T_DAEMON_ERR")"

t_log "mount again (daemonized): sha256sum -c, manifest identical, diff -r $SRC"
t_mount "$T_MEMBERS" "$M"
(cd "$M" && sha256sum -c --quiet "$T_WORK/sums") || t_fail "checksums differ after remount"
t_py "$H" manifest "$M" >"$T_WORK/man2" || t_fail "manifest"
diff -u "$T_WORK/man1" "$T_WORK/man2" | head -40
cmp -s "$T_WORK/man1" "$T_WORK/man2" || t_fail "tree metadata changed across remount (diff above)"
if [ -n "$SRC" ]; then
	diff -r --no-dereference "$SRC" "$M/copy" >/dev/null 2>&1 || t_fail "copy of $SRC differs after remount"
fi

t_log "delete half, remount, the rest is intact"
rm -rf "$M/gen/a/b" "$M/gen/a/f1048576" || t_fail "rm"
t_py "$H" manifest "$M" >"$T_WORK/man3" || t_fail "manifest after deleting half"
t_umount "$M"

t_log "read-only mount: same tree, writes fail with EROFS"
t_mount "$T_MEMBERS" "$M" ro
t_py "$H" manifest "$M" >"$T_WORK/man4" || t_fail "manifest of the ro mount"
cmp -s "$T_WORK/man3" "$T_WORK/man4" || { diff -u "$T_WORK/man3" "$T_WORK/man4" | head; t_fail "tree differs on ro mount"; }
err=$(touch "$M/new" 2>&1) && t_fail "create on a ro mount succeeded"
case $err in *"Read-only file system"*) ;; *) t_fail "create on ro mount: '$err', expected EROFS" ;; esac
err=$(rm "$M/gen/hard2" 2>&1) && t_fail "unlink on a ro mount succeeded"
case $err in *"Read-only file system"*) ;; *) t_fail "unlink on ro mount: '$err', expected EROFS" ;; esac
grep " $M " /proc/mounts | grep -q ' ro[ ,]' || t_fail "ro mount not shown as ro in /proc/mounts"
t_umount "$M"

if [ -x "$top_srcdir/tools/mount.dmafs" ]; then
	t_log "mount.dmafs helper (mount(8) calling convention) mounts it with options"
	PATH="$top_builddir/fs:$PATH" "$top_srcdir/tools/mount.dmafs" "$T_MEMBERS" "$M" -o defaults,noatime,commit=2 \
		2>"$T_WORK/helper.err" || t_fail "mount.dmafs $T_MEMBERS $M -o defaults,noatime,commit=2: $(cat "$T_WORK/helper.err")"
	t_register mnt "$M"
	t_wait_mounted "$M" 30 || t_fail "mount.dmafs returned but $M is not mounted"
	t_py "$H" manifest "$M" >"$T_WORK/man5" || t_fail "manifest of the mount.dmafs mount"
	cmp -s "$T_WORK/man3" "$T_WORK/man5" || t_fail "tree differs when mounted by mount.dmafs"
	t_umount "$M"
else
	t_log "tools/mount.dmafs not present: helper part not run"
fi
t_log "PASS"
