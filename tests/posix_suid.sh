#!/bin/bash
# Description: set-user-ID and set-group-ID after write, O_DIRECT write, truncate(2),
# ftruncate, open(O_TRUNC), fallocate (mode 0, KEEP_SIZE, PUNCH_HOLE) and chown/chgrp,
# for modes 6666 6766 6676 2666 2766 2755 4666 4755 6755, done by root, by the owner
# outside the file's group, by the owner inside it (supplementary group) and by another
# user: every resulting mode equals xfs's on the same kernel (an xfs on a loop device,
# same commands), on a default mount and on one with writeback_cache; the modes survive a
# remount; a mapped store drops nothing, as on xfs. Without xfs, the expected modes come
# from the kernel's rule (setattr_should_drop_suidgid, Linux 6.2 and later).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
command -v fallocate >/dev/null || t_skip "fallocate (util-linux) not installed"
command -v perl >/dev/null || t_skip "perl not installed (truncate(2) by path)"
t_workdir
chmod 0755 "$T_WORK"
U=65534    # owner of every file
G=4321     # the file's group: U is not in it, except as "member"
O=65533    # another user, in no group of the file
MODES="6666 6766 6676 2666 2766 2755 4666 4755 6755"
OPS="write dwrite trunc ptrunc otrunc falloc fkeep punch chsame chown"

# as WHO CMD... - run CMD as root, the owner, the owner in group G, or another user.
as() {
	local who=$1
	shift
	case $who in
	root) "$@" ;;
	owner) setpriv --reuid=$U --regid=$U --clear-groups -- "$@" ;;
	member) setpriv --reuid=$U --regid=$U --groups=$G -- "$@" ;;
	other) setpriv --reuid=$O --regid=$O --clear-groups -- "$@" ;;
	esac
}

# The operations, as a script for sh -c OP FILE (run as the user).
opscript() {
	case $1 in
	write) echo 'dd if=/dev/zero of="$0" bs=100 count=1 conv=notrunc oflag=append status=none' ;;
	dwrite) echo 'dd if=/dev/zero of="$0" bs=4096 count=1 conv=notrunc oflag=direct status=none' ;;
	trunc) echo 'truncate -s 100 "$0"' ;; # open + ftruncate
	ptrunc) echo 'perl -e "truncate(\$ARGV[0], 5000) or die \"\$!\n\"" "$0"' ;; # truncate(2)
	otrunc) echo ': > "$0"' ;;
	falloc) echo 'fallocate -o 0 -l 16384 "$0"' ;;
	fkeep) echo 'fallocate -n -o 0 -l 65536 "$0"' ;;
	punch) echo 'fallocate -p -o 0 -l 4096 "$0"' ;;
	chsame) echo 'if [ "$(id -u)" = 0 ]; then chown '$U:$G' "$0"; else chgrp '$G' "$0"; fi' ;;
	chown) echo 'if [ "$(id -u)" = 0 ]; then chown 0:0 "$0"; else chgrp "$(id -g)" "$0"; fi' ;;
	esac
}

# matrix DIR - one line per case: "mode who op result" (result: the mode, or "error").
matrix() {
	local d=$1 m who op f n=0 res
	for m in $MODES; do
		for who in root owner member other; do
			for op in $OPS; do
				f=$d/f$n
				n=$((n + 1))
				head -c 8192 /dev/zero >"$f" && chown $U:$G "$f" && chmod "$m" "$f" ||
					t_fail "cannot prepare $f"
				if as "$who" sh -c "$(opscript "$op")" "$f" 2>/dev/null; then
					res=$(stat -c %a "$f")
				else
					res=error
				fi
				echo "$m $who $op $res"
			done
		done
	done
}

# The kernel's rule (Linux 6.2 and later), for when there is no xfs to ask.
rule() {
	local m=$((8#$1)) who=$2 op=$3 kill=0 sgid=$((8#2000)) suid=$((8#4000)) x=$((8#10))
	# without write permission (the other user and o-w modes) every operation fails,
	# and only the owner may chown
	if [ "$who" = other ] && { [ $((m & 2)) = 0 ] || [ "$op" = chsame ] || [ "$op" = chown ]; }; then
		echo error
		return
	fi
	case $op in
	chsame | chown) # chown_common(): set-user-ID always, set-group-ID as setattr_should_drop_sgid()
		kill=$suid
		if [ $((m & x)) != 0 ] || [ "$who" = owner ]; then kill=$((kill | sgid)); fi ;;
	*) # setattr_should_drop_suidgid()
		if [ "$who" != root ]; then
			kill=$suid
			if [ $((m & x)) != 0 ] || [ "$who" != member ]; then kill=$((kill | sgid)); fi
		fi ;;
	esac
	printf '%o\n' $((m & ~kill))
}

REF=$T_WORK/ref.out
if command -v mkfs.xfs >/dev/null && { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	REFNAME="xfs of $(uname -r)"
	t_log "the matrix on $REFNAME"
	t_xfs 512M "$T_WORK/xfs"
	chmod 0755 "$T_WORK/xfs"
	matrix "$T_WORK/xfs" >"$REF"
else
	REFNAME="the kernel's rule (Linux 6.2 and later)"
	t_log "no xfs here (mkfs.xfs, or xfs in the kernel): the reference is $REFNAME"
	for m in $MODES; do for who in root owner member other; do for op in $OPS; do
		echo "$m $who $op $(rule "$m" "$who" "$op")"
	done; done; done >"$REF"
fi

t_images 2 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
compare() { # LABEL FILE
	local bad
	bad=$(diff "$REF" "$2" | grep '^>' | head -n 20)
	[ -z "$bad" ] || t_fail "$1: modes differ from $REFNAME (mode who op result):
$(diff "$REF" "$2" | head -n 40)"
}
for opts in allow_other allow_other,writeback_cache; do
	t_log "the matrix on dmafs -o $opts"
	t_mount "$T_MEMBERS" "$M" "$opts"
	chmod 0755 "$M"
	mkdir "$M/m" && chmod 0755 "$M/m"
	matrix "$M/m" >"$T_WORK/dmafs.out"
	compare "dmafs -o $opts" "$T_WORK/dmafs.out"
	stat -c '%n %a' "$M"/m/* | sort >"$T_WORK/before"
	t_log "the modes survive a remount"
	t_umount "$M"
	t_mount "$T_MEMBERS" "$M" "$opts"
	stat -c '%n %a' "$M"/m/* | sort >"$T_WORK/after"
	cmp -s "$T_WORK/before" "$T_WORK/after" ||
		t_fail "modes changed across a remount: $(diff "$T_WORK/before" "$T_WORK/after" | head)"
	rm -rf "$M/m"
	t_umount "$M"
done

t_log "a store through a shared mapping by another user drops nothing (as xfs)"
t_mount "$T_MEMBERS" "$M" allow_other
chmod 0755 "$M"
head -c 8192 /dev/zero >"$M/mm" && chown $U:$G "$M/mm" && chmod 6666 "$M/mm"
if [ -x /usr/bin/python3 ]; then
	as other /usr/bin/python3 -c 'import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 4096)
m[0:1] = b"x"
m.flush()' "$M/mm" || t_fail "a store through a mapping as uid $O failed"
	[ "$(head -c 1 "$M/mm")" = x ] || t_fail "the mapped store did not reach the file"
	[ "$(stat -c %a "$M/mm")" = 6666 ] ||
		t_fail "a store through a mapping dropped bits: mode $(stat -c %a "$M/mm"), xfs keeps 6666"
else
	t_log "no /usr/bin/python3: the mapped store is not checked"
fi
t_umount "$M"
t_log "PASS"
