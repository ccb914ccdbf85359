#!/bin/bash
# Description: file handles (name_to_handle_at / open_by_handle_at, what NFS export,
# fanotify and backup tools use) with the kernel's caches dropped before every open: a
# file, a file with a hard link whose first name is removed, a renamed file, a directory
# (reconnected to its parent by a lookup of ".."), a file unlinked while still open (valid
# until closed, then ESTALE), an unlinked file and a removed directory (ESTALE), and all of
# it again after a remount; results equal xfs's on the same kernel. Then the generation
# number: a handle of a file whose creation a crash lost stays stale when its inode number
# is handed out again.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
FH=$top_builddir/tests/fhandle
[ -x "$FH" ] || t_skip "tests/fhandle not built"
[ -w /proc/sys/vm/drop_caches ] || t_skip "/proc/sys/vm/drop_caches not writable"
t_workdir

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# open_as WHAT... - open the handles in $W/h.* (one file per name) on mount $P; prints
# "NAME RESULT" with RESULT ok (the inode expected, $W/ino.NAME), wrong-inode, or the error.
open_as() {
	local name got want
	for name in "$@"; do
		got=$("$FH" open "$P" "$W/h.$name") || t_fail "fhandle open $name failed"
		want=$(cat "$W/ino.$name")
		case $got in
		"ok $want" | "ok $want parent "*)
			# a directory: its parent must be the one it was made in
			if [ -f "$W/parent.$name" ] && [ "$got" != "ok $want parent $(cat "$W/parent.$name")" ]; then
				got="wrong-parent ($got)"
			else
				got=ok
			fi ;;
		ok*) got="wrong-inode ($got, want $want)" ;;
		esac
		echo "$name $got"
	done
}

# enc NAME PATH - encode PATH's handle as NAME, remember its inode (and a directory's parent).
enc() {
	rm -f "$W/h.$1"
	"$FH" encode "$W/h.$1" "$2" || t_fail "name_to_handle_at $2 failed"
	stat -c %i "$2" >"$W/ino.$1"
	[ -d "$2" ] && stat -c %i "$2/.." >"$W/parent.$1"
	return 0
}

# scenario P REMOUNT - the steps on the filesystem mounted at P; REMOUNT is a command that
# unmounts and mounts it again. Prints the results.
scenario() {
	P=$1
	local remount=$2 D=$1/fh
	W=$T_WORK/w.$(basename "$P")
	mkdir -p "$W" "$D/sub/deeper" "$D/gone" || t_fail "mkdir under $P"
	for i in 0 1 2 3 4; do echo "data $i" >"$D/f$i"; done
	enc file "$D/f0"
	enc linked "$D/f1"
	enc renamed "$D/f2"
	enc unlinked "$D/f3"
	enc open "$D/f4"
	enc dir "$D/sub"
	enc deep "$D/sub/deeper"
	enc rmdir "$D/gone"
	ln "$D/f1" "$D/l1" && rm "$D/f1"
	mv "$D/f2" "$D/sub/g2"
	rm "$D/f3"
	rmdir "$D/gone"
	exec 7<"$D/f4"
	rm "$D/f4"
	drop
	echo "-- cold caches"
	open_as file linked renamed unlinked open dir deep rmdir
	exec 7<&-
	drop
	echo "-- after the last close"
	open_as open
	$remount
	echo "-- after a remount"
	open_as file linked renamed unlinked open dir deep rmdir
}

t_log "xfs of $(uname -r)"
REF=$T_WORK/xfs.out
if command -v mkfs.xfs >/dev/null && { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	t_xfs 512M "$T_WORK/xfs"
	XDEV=$(findmnt -n -o SOURCE "$T_WORK/xfs")
	scenario "$T_WORK/xfs" "eval umount $T_WORK/xfs && mount $XDEV $T_WORK/xfs" >"$REF"
	cat "$REF"
	REFNAME="xfs"
else
	t_log "no xfs here: the reference is what the kernel's own filesystems do"
	REFNAME="the expected results"
	cat >"$REF" <<'EOF'
-- cold caches
file ok
linked ok
renamed ok
unlinked ESTALE
open ok
dir ok
deep ok
rmdir ESTALE
-- after the last close
open ESTALE
-- after a remount
file ok
linked ok
renamed ok
unlinked ESTALE
open ESTALE
dir ok
deep ok
rmdir ESTALE
EOF
fi

t_images 2 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
t_log "dmafs"
scenario "$M" "eval t_umount $M && t_mount $T_MEMBERS $M" >"$T_WORK/dmafs.out"
cat "$T_WORK/dmafs.out"
diff "$REF" "$T_WORK/dmafs.out" >/dev/null ||
	t_fail "file handles on dmafs differ from $REFNAME: $(diff "$REF" "$T_WORK/dmafs.out")"

t_log "a handle of a file whose creation a crash lost stays stale when its inode number comes back"
W=$T_WORK/w.gen
P=$M
mkdir -p "$W"
sync "$M" # everything so far committed; the next creation is not
echo lost >"$M/lost"
enc lost "$M/lost"
t_crash "$M"
t_mount "$T_MEMBERS" "$M"
[ ! -e "$M/lost" ] || t_fail "$M/lost survived the crash: its creation was committed (commit interval too short?)"
echo new >"$M/new"
if [ "$(stat -c %i "$M/new")" = "$(cat "$W/ino.lost")" ]; then
	got=$("$FH" open "$M" "$W/h.lost")
	[ "$got" = ESTALE ] || t_fail "the lost file's handle opened the new file with the same inode number: $got"
	t_log "inode $(cat "$W/ino.lost") again, other generation: ESTALE"
else
	t_log "note: inode number $(cat "$W/ino.lost") was not handed out again (got $(stat -c %i "$M/new")); generation not exercised"
	got=$("$FH" open "$M" "$W/h.lost")
	[ "$got" = ESTALE ] || t_fail "the lost file's handle opens: $got"
fi
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
