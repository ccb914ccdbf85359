#!/bin/bash
# Description: member set errors: missing member, member of another filesystem, members
# out of order, extra/duplicate/blank/nonexistent/already-mounted members are refused with
# exit 1 and ONE stderr line naming the member; a corrupt primary superblock mounts from the
# copy with a warning naming the member; both copies corrupt is refused naming the member;
# the metadata log mirror on member 1 replaces a destroyed log on member 0 and vice versa;
# members given as separate words mount as the comma list does.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir
M=$T_WORK/mnt
mkdir -p "$M"
t_images 3 96M a
A=("${T_IMGS[@]}")
t_images 3 96M b
B=("${T_IMGS[@]}")
t_images 1 96M z
Z=${T_IMGS[0]}
t_mkfs "${A[@]}"
t_mkfs "${B[@]}"
csv() { (IFS=,; echo "$*"); }

t_log "filesystem A gets a file to check later"
t_mount "$(csv "${A[@]}")" "$M"
head -c 5000000 /dev/urandom >"$M/data" || t_fail "write"
sum=$(sha256sum <"$M/data")
t_umount "$M"

# refused DESC MEMBERS PATTERN... - mounting MEMBERS must exit 1 with exactly one stderr
# line containing every PATTERN, and leave nothing mounted or running.
refused() {
	local desc=$1 members=$2 rc err lines p
	shift 2
	t_log "refused: $desc"
	"$DMAFS" "$members" "$M" 2>"$T_WORK/err"
	rc=$?
	err=$(cat "$T_WORK/err")
	if t_is_mounted "$M"; then
		fusermount3 -u "$M"
		t_fail "$desc: mounted (members $members), must be refused"
	fi
	[ $rc = 1 ] || t_fail "$desc: exit status $rc, expected 1 (stderr: $err)"
	lines=$(grep -c . "$T_WORK/err")
	[ "$lines" = 1 ] || t_fail "$desc: $lines lines on stderr, expected one: $err"
	for p in "$@"; do
		case $err in *"$p"*) ;; *) t_fail "$desc: message does not name '$p': $err" ;; esac
	done
	[ -z "$(t_daemon_pids "$M")" ] || t_fail "$desc: a daemon is left running"
	t_log "  -> $err"
}

refused "missing member (2 of 3 given)" "$(csv "${A[0]}" "${A[1]}")" "member 2"
refused "member of another filesystem" "$(csv "${A[0]}" "${B[1]}" "${A[2]}")" "${B[1]}"
refused "first member from another filesystem" "$(csv "${B[0]}" "${A[1]}" "${A[2]}")" "${B[0]}"
refused "members out of order (1,0,2)" "$(csv "${A[1]}" "${A[0]}" "${A[2]}")" "${A[1]}"
refused "members out of order (0,2,1)" "$(csv "${A[0]}" "${A[2]}" "${A[1]}")" "${A[2]}"
refused "extra member of another filesystem" "$(csv "${A[@]}" "${B[0]}")" "${B[0]}"
refused "same member twice" "$(csv "${A[0]}" "${A[0]}" "${A[2]}")" "${A[0]}"
refused "blank member without superblock" "$(csv "${A[0]}" "${A[1]}" "$Z")" "$Z"
refused "nonexistent member path" "$(csv "${A[0]}" "$T_WORK/nonexistent" "${A[2]}")" "$T_WORK/nonexistent"

t_log "the right members in order still mount and the data is intact"
t_mount "$(csv "${A[@]}")" "$M"
[ "$(sha256sum <"$M/data")" = "$sum" ] || t_fail "data changed"
M_KEEP=$M
M=$T_WORK/mnt2
mkdir -p "$M"
refused "filesystem already mounted elsewhere" "$(csv "${A[@]}")" "${A[0]}"
M=$M_KEEP
t_umount "$M"

t_log "members as separate words (dmafs A B C MOUNTPOINT), as mkfs.dmafs takes them"
"$DMAFS" "${A[@]}" "$M" 2>"$T_WORK/err" || t_fail "dmafs ${A[*]} $M: $(cat "$T_WORK/err")"
t_register mnt "$M"
t_wait_mounted "$M" 30 || t_fail "dmafs ${A[*]} $M exited 0 but did not mount"
[ "$(sha256sum <"$M/data")" = "$sum" ] || t_fail "data changed (members as words)"
t_umount "$M"

t_log "corrupt primary superblock of member 1: mounts from the copy, warns naming the member"
dd if=/dev/urandom of="${A[1]}" bs=4096 count=1 conv=notrunc status=none || t_fail "dd"
"$DMAFS" "$(csv "${A[@]}")" "$M" 2>"$T_WORK/err" || t_fail "mount with a corrupt primary superblock on member 1 refused: $(cat "$T_WORK/err")"
t_register mnt "$M"
t_wait_mounted "$M" 30 || t_fail "not mounted"
[ "$(sha256sum <"$M/data")" = "$sum" ] || t_fail "data changed (mounted from superblock copy)"
grep -q "${A[1]}" "$T_WORK/err" ||
	t_fail "no warning naming ${A[1]} on stderr for its corrupt primary superblock (stderr: '$(cat "$T_WORK/err")')"
t_log "  -> $(cat "$T_WORK/err")"
echo more >"$M/more" || t_fail "write on fs mounted from a superblock copy"
t_umount "$M"
t_log "it mounts again after that"
t_mount "$(csv "${A[@]}")" "$M"
[ "$(cat "$M/more")" = more ] || t_fail "file written while mounted from the copy lost"
t_umount "$M"

t_log "corrupt superblock copy (last 4096 bytes) of member 2 only: mounts"
size=$(stat -c %s "${A[2]}")
dd if=/dev/urandom of="${A[2]}" bs=4096 count=1 seek=$((size / 4096 - 1)) conv=notrunc status=none || t_fail dd
t_mount "$(csv "${A[@]}")" "$M"
[ "$(sha256sum <"$M/data")" = "$sum" ] || t_fail "data changed"
t_umount "$M"

t_log "metadata log mirror: member 0's log destroyed -> mounts from member 1's copy, warning names member 0"
t_images 2 128M c
C=("${T_IMGS[@]}")
t_mkfs "${C[@]}"
t_mount "$(csv "${C[@]}")" "$M"
# A private reference tree: the source tree may change while tests run (make check -j).
mkdir -p "$T_WORK/treeref/d1/d2" || t_fail mkdir
for i in $(seq 1 40); do
	dirs=("" d1/ d1/d2/)
	head -c $((i * i * 997)) /dev/urandom >"$T_WORK/treeref/${dirs[i % 3]}f$i" || t_fail "reference tree"
done
ln -s d1/d2 "$T_WORK/treeref/link"
mkdir -p "$M/tree" && cp -a "$T_WORK/treeref/." "$M/tree/" || t_fail "cp into C"
t_umount "$M"
# The log area of members 0 and 1 starts at 1 MiB; log_half is 4 MiB for 128 MiB members.
dd if=/dev/urandom of="${C[0]}" bs=1M seek=1 count=8 conv=notrunc status=none || t_fail dd
"$DMAFS" "$(csv "${C[@]}")" "$M" 2>"$T_WORK/err" || t_fail "mount with member 0's log destroyed refused: $(cat "$T_WORK/err")"
t_register mnt "$M"
t_wait_mounted "$M" 30 || t_fail "not mounted"
diff -r "$T_WORK/treeref" "$M/tree" >/dev/null || t_fail "tree differs after mounting from the log mirror"
grep -q "${C[0]}" "$T_WORK/err" || t_fail "no warning naming ${C[0]} for its damaged log (stderr: '$(cat "$T_WORK/err")')"
t_log "  -> $(cat "$T_WORK/err")"
t_umount "$M"
t_log "the mount rewrote both copies: now member 1's log destroyed -> mounts from member 0's"
dd if=/dev/urandom of="${C[1]}" bs=1M seek=1 count=8 conv=notrunc status=none || t_fail dd
"$DMAFS" "$(csv "${C[@]}")" "$M" 2>"$T_WORK/err" || t_fail "mount with member 1's log destroyed refused: $(cat "$T_WORK/err")"
t_wait_mounted "$M" 30 || t_fail "not mounted"
diff -r "$T_WORK/treeref" "$M/tree" >/dev/null || t_fail "tree differs after mounting from member 0's log"
t_umount "$M"
dd if=/dev/urandom of="${C[0]}" bs=1M seek=1 count=8 conv=notrunc status=none || t_fail dd
dd if=/dev/urandom of="${C[1]}" bs=1M seek=1 count=8 conv=notrunc status=none || t_fail dd
"$DMAFS" "$(csv "${C[@]}")" "$M" 2>"$T_WORK/err"
rc=$?
t_is_mounted "$M" && { fusermount3 -u "$M"; t_fail "mounted with both log copies destroyed"; }
[ $rc = 1 ] || t_fail "both log copies destroyed: exit $rc, expected 1"
t_log "  both log copies destroyed -> refused: $(tail -n 1 "$T_WORK/err")"

dd if=/dev/urandom of="${A[2]}" bs=4096 count=1 conv=notrunc status=none || t_fail dd
size=$(stat -c %s "${A[2]}")
dd if=/dev/urandom of="${A[2]}" bs=4096 count=1 seek=$((size / 4096 - 1)) conv=notrunc status=none || t_fail dd
refused "both superblock copies of member 2 corrupt" "$(csv "${A[@]}")" "${A[2]}"
t_log "PASS"
