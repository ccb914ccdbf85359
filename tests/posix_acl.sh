#!/bin/bash
# Description: POSIX ACLs: setfacl/getfacl round trip, enforcement for an unprivileged user
# (named user and group entries, the mask), the mode and the ACL kept in agreement (chmod,
# setfacl -m m::, equivalent ACLs not stored, setgid dropped as on ext4), default ACL
# inheritance by files and directories (the umask only where there is none), persistence
# across remount with a clean dmafs-fsck, and cp -a of a tree with ACLs, user.* and
# trusted.* xattrs and file capabilities from ext4 (or tmpfs) to dmafs and back.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_acl_tools
command -v setcap >/dev/null || t_skip "setcap not installed (Debian package libcap2-bin)"
t_workdir
chmod 0755 "$T_WORK" # let the test users reach the mount point
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M" allow_other
chmod 0755 "$M"
U=65534	 # the unprivileged user
G=4321	 # a group it is put in for some checks
OTHER=1000
umask 022

as_user() { setpriv --reuid=$U --regid=$U --clear-groups -- "$@"; }
as_user_in_g() { setpriv --reuid=$U --regid=$U --groups=$G -- "$@"; }
ok() {
	local desc=$1 err
	shift
	err=$("$@" 2>&1 >/dev/null) || t_fail "$desc: '$*' failed: $err"
}
denied() {
	local desc=$1 err
	shift
	if err=$("$@" 2>&1 >/dev/null); then t_fail "$desc: '$*' succeeded"; fi
	case $err in *"Permission denied"*) ;; *) t_fail "$desc: '$*' failed, but not with EACCES: $err" ;; esac
}
# acl PATH - the ACL as one line, numeric ids, no effective-rights comments
acl() { getfacl -cEna -- "$1" 2>/dev/null | grep -v '^$' | tr '\n' ',' | sed 's/,$//'; }
dacl() { getfacl -cEnd -- "$1" 2>/dev/null | grep -v '^$' | tr '\n' ',' | sed 's/,$//'; }
expect_acl() {
	local got
	got=$(acl "$1")
	[ "$got" = "$2" ] || t_fail "ACL of ${1#"$M"/}: '$got', expected '$2'"
}
expect_mode() {
	local got
	got=$(stat -c %a "$1")
	[ "$got" = "$2" ] || t_fail "mode of ${1#"$M"/}: $got, expected $2"
}
stored() { getfattr -h --absolute-names -n system.posix_acl_access "$1" >/dev/null 2>&1; }

t_log "setfacl/getfacl round trip; the mode's group bits are the mask"
echo secret >"$M/f" && chmod 0600 "$M/f"
setfacl -m u:$U:r,g:$G:rw "$M/f" || t_fail "setfacl -m on dmafs (ACLs not supported?)"
expect_acl "$M/f" "user::rw-,user:$U:r--,group::---,group:$G:rw-,mask::rw-,other::---"
expect_mode "$M/f" 660
ls -l "$M/f" | grep -q '^-rw-rw----+' || t_fail "ls -l does not show the ACL: $(ls -l "$M/f")"

t_log "enforcement: named user entry grants read, not write; the mask limits it"
ok "uid $U reads through its ACL entry" as_user cat "$M/f"
denied "uid $U writes with an r-- entry" as_user sh -c "echo x >> '$M/f'"
denied "another user has no entry" setpriv --reuid=$OTHER --regid=$OTHER --clear-groups -- cat "$M/f"
chmod 0600 "$M/f" # the mask becomes ---
expect_acl "$M/f" "user::rw-,user:$U:r--,group::---,group:$G:rw-,mask::---,other::---"
denied "uid $U reads with the mask at ---" as_user cat "$M/f"
setfacl -m m::rw "$M/f" || t_fail "setfacl -m m::rw"
expect_mode "$M/f" 660
ok "uid $U reads again with mask rw-" as_user cat "$M/f"
t_log "enforcement: named group entry, for a member of the group; a named user entry comes first"
as_other_in_g() { setpriv --reuid=$OTHER --regid=$OTHER --groups=$G -- "$@"; }
ok "uid $OTHER in group $G writes through the group entry" as_other_in_g sh -c "echo g >> '$M/f'"
denied "uid $U in group $G is held to its own entry" as_user_in_g sh -c "echo x >> '$M/f'"
setfacl -x g:$G "$M/f" || t_fail "setfacl -x g:$G"
denied "group entry removed" as_other_in_g sh -c "echo g >> '$M/f'"

t_log "directories: an entry lets a user list, and create only with w"
mkdir "$M/d" && chmod 0700 "$M/d"
denied "uid $U lists a 0700 dir" as_user ls "$M/d"
setfacl -m u:$U:rx "$M/d"
ok "uid $U lists with u:$U:r-x" as_user ls "$M/d"
denied "uid $U creates with u:$U:r-x" as_user touch "$M/d/new"
setfacl -m u:$U:rwx "$M/d"
ok "uid $U creates with u:$U:rwx" as_user touch "$M/d/new"
[ "$(stat -c %u "$M/d/new")" = $U ] || t_fail "file created by uid $U is owned by $(stat -c %u "$M/d/new")"

t_log "an ACL the mode can say is not stored; setfacl -b leaves the base entries"
echo x >"$M/plain"
setfacl -m u::rwx,g::r-x,o::- "$M/plain"
expect_mode "$M/plain" 750
stored "$M/plain" && t_fail "an ACL equivalent to the mode was stored"
setfacl -m u:$U:rwx "$M/plain" && stored "$M/plain" || t_fail "extended ACL not stored"
setfacl -b "$M/plain"
stored "$M/plain" && t_fail "setfacl -b left an access ACL"
expect_acl "$M/plain" "user::rwx,group::r-x,other::---"
expect_mode "$M/plain" 750

t_log "setgid: an ACL change by an owner outside the file's group drops it, inside keeps it"
echo s >"$M/sg" && chown $U:$G "$M/sg" && chmod 2770 "$M/sg"
ok "owner sets an ACL" as_user setfacl -m u:$OTHER:r "$M/sg"
expect_mode "$M/sg" 770
chmod 2770 "$M/sg"
ok "owner in the group sets an ACL" as_user_in_g setfacl -m u:$OTHER:rw "$M/sg"
expect_mode "$M/sg" 2770

t_log "default ACLs: files and directories inherit, the umask does not apply, the mode limits"
mkdir "$M/inh"
setfacl -d -m u:$U:rwx,g::rx,o::- "$M/inh"
[ "$(dacl "$M/inh")" = "user::rwx,user:$U:rwx,group::r-x,mask::rwx,other::---" ] ||
	t_fail "default ACL of inh: '$(dacl "$M/inh")'"
umask 077
touch "$M/inh/file"	 # open(0666)
mkdir "$M/inh/sub"	 # mkdir(0777)
mknod "$M/inh/fifo" p	 # mknod(0666)
ln -s file "$M/inh/link"
umask 022
expect_acl "$M/inh/file" "user::rw-,user:$U:rwx,group::r-x,mask::rw-,other::---"
expect_mode "$M/inh/file" 660
expect_acl "$M/inh/sub" "user::rwx,user:$U:rwx,group::r-x,mask::rwx,other::---"
expect_mode "$M/inh/sub" 770
expect_acl "$M/inh/fifo" "user::rw-,user:$U:rwx,group::r-x,mask::rw-,other::---"
[ "$(dacl "$M/inh/sub")" = "$(dacl "$M/inh")" ] || t_fail "subdirectory default ACL '$(dacl "$M/inh/sub")'"
[ -z "$(dacl "$M/inh/file")" ] || t_fail "a file got a default ACL"
[ "$(stat -c %a "$M/inh/link")" = 777 ] || t_fail "symlink mode $(stat -c %a "$M/inh/link")"
ok "uid $U writes the inherited file" as_user sh -c "echo u >> '$M/inh/file'"
as_user sh -c "umask 077; mkdir '$M/inh/sub/byuser'; echo >'$M/inh/sub/byuser/f'" ||
	t_fail "uid $U creates below the inheriting directory"
expect_acl "$M/inh/sub/byuser/f" "user::rw-,user:$U:rwx,group::r-x,mask::rw-,other::---"
[ "$(stat -c %u "$M/inh/sub/byuser/f")" = $U ] || t_fail "owner of a file created by uid $U"
t_log "a minimal default ACL: plain mode bits, no access ACL stored"
mkdir "$M/min" && setfacl -d -m u::rwx,g::r,o::- "$M/min"
touch "$M/min/f" && mkdir "$M/min/d"
expect_mode "$M/min/f" 640
expect_mode "$M/min/d" 740
stored "$M/min/f" && t_fail "an access ACL stored for a minimal default ACL"
t_log "without a default ACL the umask applies"
umask 027
touch "$M/um" && mkdir "$M/umd"
umask 022
expect_mode "$M/um" 640
expect_mode "$M/umd" 750
setfacl -k "$M/inh"
touch "$M/inh/after"
expect_mode "$M/inh/after" 644
stored "$M/inh/after" && t_fail "a file created after setfacl -k got an access ACL"

t_log "ACLs survive unmount + mount; dmafs-fsck finds nothing to fix"
dump() { (cd "$1" && find . -path ./lost+found -prune -o -print | LC_ALL=C sort | while read -r p; do
	echo "== $p $(stat -c %a "$p")"
	getfacl -cEnP -- "$p" 2>/dev/null
	getfattr -h -d -m - -- "$p" 2>/dev/null | grep -v '^#'
done); }
dump "$M" >"$T_WORK/before"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M" allow_other
dump "$M" >"$T_WORK/after"
diff "$T_WORK/before" "$T_WORK/after" >&2 || t_fail "ACLs or modes differ after remount (diff above)"
ok "uid $U still reads through its ACL entry" as_user cat "$M/f"
denied "another user still has no entry after remount" setpriv --reuid=$OTHER --regid=$OTHER --clear-groups -- cat "$M/f"

t_log "cp -a keeps ACLs, user.*, trusted.* and file capabilities, from another filesystem and back"
E=$T_WORK/other
mkdir -p "$E"
if command -v mkfs.ext4 >/dev/null && command -v losetup >/dev/null; then
	truncate -s 64M "$T_WORK/ext4.img" && mkfs.ext4 -q -F "$T_WORK/ext4.img" >/dev/null 2>&1 ||
		t_fail "mkfs.ext4"
	dev=$(losetup -f --show "$T_WORK/ext4.img") || t_skip "no free loop device"
	t_register loop "$dev"
	mount "$dev" "$E" || t_fail "mount ext4 $dev"
	ETYPE=ext4
else
	mount -t tmpfs -o size=64m tmpfs "$E" || t_fail "mount tmpfs"
	ETYPE=tmpfs
fi
t_register mnt "$E"
t_log "  the other filesystem is $ETYPE"
S=$E/src
mkdir -p "$S/dir/sub" && echo a >"$S/dir/file" && echo b >"$S/plain"
setfacl -m u:$U:rw,g:$G:r "$S/dir/file"
setfacl -d -m u:$U:rwx,g:$G:rx "$S/dir"
setfacl -m u:$OTHER:rx "$S/dir/sub"
setfattr -n user.colour -v blue "$S/dir/file" && setfattr -n user.d -v 1 "$S/dir/sub"
setfattr -n trusted.origin -v "$ETYPE" "$S/dir/file"
cp /bin/true "$S/capbin" && setcap cap_net_raw+ep "$S/capbin"
ln -s dir/file "$S/link"
dump "$S" >"$T_WORK/src.dump"
cp -a "$S" "$M/copy" || t_fail "cp -a $ETYPE -> dmafs"
dump "$M/copy" >"$T_WORK/copy.dump"
diff "$T_WORK/src.dump" "$T_WORK/copy.dump" >&2 || t_fail "cp -a to dmafs lost something (diff above)"
grep -q 'trusted.origin' "$T_WORK/copy.dump" && grep -q 'security.capability' "$T_WORK/copy.dump" &&
	grep -q 'user.colour' "$T_WORK/copy.dump" || t_fail "the copy's dump lacks the xattrs it should show"
cp --preserve=all -r "$M/copy" "$E/back" || t_fail "cp --preserve=all dmafs -> $ETYPE"
dump "$E/back" >"$T_WORK/back.dump"
diff "$T_WORK/src.dump" "$T_WORK/back.dump" >&2 || t_fail "copy back to $ETYPE differs (diff above)"
umount "$E" || t_fail "umount $E"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
