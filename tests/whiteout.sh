#!/bin/bash
# Description: renameat2(RENAME_WHITEOUT): the old name becomes a whiteout (character
# device 0:0, mode 0000) in the same change as the move, for a file, over an existing
# target, for a directory, with RENAME_NOREPLACE, by an unprivileged user (owned by
# them); EXCHANGE with it is EINVAL; whiteouts survive a remount. Then overlayfs with dmafs as
# upper and lower layer, and with dmafs as lower under a tmpfs upper: deletions, renames,
# opaque directories, copy-up of data and of a set-user-ID file, new files; the merged
# view and the upper layer (types, modes, sizes, device numbers, overlay xattrs) equal
# the same steps on xfs of this kernel, and stay so after the overlay and dmafs are
# mounted again. dmafs is mounted with no_handles for the overlays: with file handles,
# the kernel's FUSE module (6.15 and later) takes the dentry of a lower file found by
# handle for stale, and a copied-up file fails with ESTALE once caches are cold
# (dmafs(8), Overlayfs).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
command -v getfattr >/dev/null || t_skip "getfattr (Debian package attr) not installed"
t_workdir
chmod 0755 "$T_WORK"

cat >"$T_WORK/rename2.py" <<'PY'
# rename2.py OLD NEW FLAGS... - renameat2(2); prints "ok" or the errno name.
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
bits = {"noreplace": 1, "exchange": 2, "whiteout": 4}
flags = sum(bits[f] for f in sys.argv[3:])
r = libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), flags)
print("ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
PY
r2() { t_py "$T_WORK/rename2.py" "$@"; }
desc() { # PATH... - type, device numbers, mode, owner, links and a file's size (or "missing")
	local p
	for p in "$@"; do
		if [ -f "$p" ]; then
			stat -c "${p##*/} %F %t:%T %a %u:%g %h %s" "$p"
		elif [ -e "$p" ] || [ -L "$p" ]; then
			stat -c "${p##*/} %F %t:%T %a %u:%g %h" "$p"
		else
			echo "${p##*/} missing"
		fi
	done
}

# direct D - the renameat2 cases in directory D.
direct() {
	local d=$1
	mkdir "$d" && chmod 0777 "$d"
	echo one >"$d/a" && echo two >"$d/b" && echo three >"$d/c" && mkdir "$d/dir"
	echo "whiteout, new name: $(r2 "$d/a" "$d/a2" whiteout)"
	desc "$d/a" "$d/a2"
	echo "whiteout over an existing file: $(r2 "$d/b" "$d/c" whiteout)"
	desc "$d/b" "$d/c"
	echo "content moved: $(cat "$d/c")"
	echo "whiteout of a directory: $(r2 "$d/dir" "$d/dir2" whiteout)"
	desc "$d/dir" "$d/dir2"
	echo x >"$d/e" && echo y >"$d/f"
	echo "whiteout|noreplace onto an existing name: $(r2 "$d/e" "$d/f" whiteout noreplace)"
	echo "whiteout|noreplace onto a new name: $(r2 "$d/e" "$d/e2" whiteout noreplace)"
	desc "$d/e" "$d/e2"
	echo "whiteout|exchange: $(r2 "$d/f" "$d/e2" whiteout exchange)"
	echo z >"$d/g"
	chmod 0666 "$d/g"
	echo "whiteout by another user (no privilege needed since Linux 5.8): $(setpriv --reuid=65534 --regid=65534 --clear-groups \
		/usr/bin/python3 "$T_WORK/rename2.py" "$d/g" "$d/g2" whiteout 2>&1)"
	desc "$d/g" "$d/g2"
}

# ovl_steps MERGED - what a container does to an image on an overlay.
ovl_steps() {
	local m=$1
	rm "$m/del"                                   # a whiteout
	mv "$m/ren" "$m/ren2"                         # copy-up, whiteout at the old name
	rm -r "$m/dir" && mkdir "$m/dir" && echo n >"$m/dir/new" # an opaque directory
	echo more >>"$m/data"                         # copy-up of data
	chmod 4755 "$m/suid" && echo w >>"$m/suid"    # copy-up of a set-user-ID file, written by root
	mkdir -p "$m/newdir/sub" && echo f >"$m/newdir/sub/f"
	mv "$m/keepdir" "$m/keepdir2" 2>/dev/null || cp -a "$m/keepdir" "$m/keepdir2.copy"
}
ovl_lower() { # DIR - the lower layer's contents
	mkdir -p "$1/dir/sub" "$1/keepdir"
	echo d >"$1/del" && echo r >"$1/ren" && echo data >"$1/data" && echo s >"$1/suid"
	chmod 4755 "$1/suid"
	echo in >"$1/dir/sub/in" && echo k >"$1/keepdir/k"
}
# ovl_show MERGED UPPER - the merged view and the upper layer, as comparable text.
ovl_show() {
	echo "merged:"
	(cd "$1" && find . -mindepth 1 -printf '%P %y %m %s\n' | sed 's/\( d [0-7]*\) [0-9]*$/\1/' | sort)
	echo "upper:"
	(cd "$2" && find . -mindepth 1 -printf '%P %y %m %s\n' | sed 's/\( d [0-7]*\) [0-9]*$/\1/' | sort)
	(cd "$2" && find . -mindepth 1 -type c -printf '%P ' -exec stat -c '%t:%T' {} \; | sort)
	(cd "$2" && find . -mindepth 1 -exec getfattr -h --absolute-names -m '^trusted\.overlay\.(opaque|redirect)$' -d {} + 2>/dev/null |
		grep -v '^$' | sed 's/^# file: \.\//# file: /' | sort)
}
# overlay TAG LOWER UPPER WORK MERGED REMOUNT - mount, run the steps, show; remount, show.
overlay() {
	local tag=$1 lower=$2 upper=$3 work=$4 m=$5 remount=$6
	mkdir -p "$lower" "$upper" "$work" "$m"
	ovl_lower "$lower"
	if ! mount -t overlay "ovl-$tag" -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$m" 2>"$T_WORK/ovl.err"; then
		echo "mount failed: $(cat "$T_WORK/ovl.err") $(dmesg | grep overlayfs | tail -n 3 | tr '\n' ' ')"
		return 1
	fi
	t_register kmnt "$m"
	ovl_steps "$m"
	ovl_show "$m" "$upper"
	umount "$m" || t_fail "umount $m"
	$remount
	mount -t overlay "ovl-$tag" -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$m" ||
		t_fail "$tag: the overlay does not mount again"
	echo "after mounting again:"
	ovl_show "$m" "$upper"
	umount "$m" || t_fail "umount $m"
}

HAVE_OVL=1
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || HAVE_OVL=0
HAVE_XFS=0
if command -v mkfs.xfs >/dev/null && { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	HAVE_XFS=1
	X=$T_WORK/xfs
	t_xfs 512M "$X"
	XDEV=$(findmnt -n -o SOURCE "$X")
	chmod 0777 "$X"
	direct "$X/direct" >"$T_WORK/direct.xfs"
	if [ $HAVE_OVL = 1 ]; then
		overlay xfs "$X/lower" "$X/upper" "$X/work" "$T_WORK/merged" "true" >"$T_WORK/ovl.xfs"
		TMP=$T_WORK/tmpfs
		mkdir -p "$TMP" && mount -t tmpfs tmpfs "$TMP" && t_register kmnt "$TMP"
		overlay xfslower "$X/lower2" "$TMP/upper" "$TMP/work" "$T_WORK/merged" "true" >"$T_WORK/ovl2.xfs"
		umount "$TMP"
	fi
fi

t_images 2 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M" allow_other
chmod 0777 "$M"
t_log "renameat2 with RENAME_WHITEOUT on dmafs"
direct "$M/direct" >"$T_WORK/direct.dmafs"
cat "$T_WORK/direct.dmafs"
if [ $HAVE_XFS = 1 ]; then
	diff "$T_WORK/direct.xfs" "$T_WORK/direct.dmafs" >/dev/null ||
		t_fail "renameat2 differs from xfs:
$(diff "$T_WORK/direct.xfs" "$T_WORK/direct.dmafs")"
	t_log "the same as on xfs"
else
	grep -q '^a2 regular file' "$T_WORK/direct.dmafs" && grep -q '^a character special file 0:0 0 0:0 1$' "$T_WORK/direct.dmafs" ||
		t_fail "no whiteout left by RENAME_WHITEOUT"
fi
t_umount "$M"
t_mount "$T_MEMBERS" "$M" allow_other
desc "$M/direct/a" "$M/direct/b" "$M/direct/dir" "$M/direct/e" >"$T_WORK/after"
grep -q '^a character special file 0:0 0 0:0 1$' "$T_WORK/after" && grep -q '^dir character special file 0:0 0 0:0 1$' "$T_WORK/after" ||
	t_fail "whiteouts after a remount: $(cat "$T_WORK/after")"
t_log "whiteouts survive a remount"

[ $HAVE_OVL = 1 ] || t_skip "overlayfs is not available in this kernel: the renameat2 part passed, the overlay part was not run"
t_log "overlayfs with dmafs as upper and lower layer"
remount_dmafs() { t_umount "$M" && t_mount "$T_MEMBERS" "$M" allow_other,no_handles; }
remount_dmafs
overlay dmafs "$M/lower" "$M/upper" "$M/work" "$T_WORK/merged" remount_dmafs >"$T_WORK/ovl.dmafs" ||
	t_fail "overlayfs does not take dmafs as upper layer: $(cat "$T_WORK/ovl.dmafs")"
cat "$T_WORK/ovl.dmafs"
t_log "overlayfs with dmafs as lower layer under a tmpfs upper"
TMP=$T_WORK/tmpfs
mkdir -p "$TMP" && mount -t tmpfs tmpfs "$TMP" && t_register kmnt "$TMP"
overlay dmafslower "$M/lower2" "$TMP/upper" "$TMP/work" "$T_WORK/merged" remount_dmafs >"$T_WORK/ovl2.dmafs" ||
	t_fail "overlayfs does not take dmafs as lower layer: $(cat "$T_WORK/ovl2.dmafs")"
umount "$TMP"
if [ $HAVE_XFS = 1 ]; then
	diff "$T_WORK/ovl.xfs" "$T_WORK/ovl.dmafs" >/dev/null ||
		t_fail "overlay on dmafs differs from overlay on xfs:
$(diff "$T_WORK/ovl.xfs" "$T_WORK/ovl.dmafs")"
	diff "$T_WORK/ovl2.xfs" "$T_WORK/ovl2.dmafs" >/dev/null ||
		t_fail "overlay over a dmafs lower differs from one over xfs:
$(diff "$T_WORK/ovl2.xfs" "$T_WORK/ovl2.dmafs")"
	t_log "both overlays the same as on xfs"
else
	grep -q '^del c ' "$T_WORK/ovl.dmafs" || t_fail "no whiteout for a deleted lower file in the upper layer"
fi
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
