#!/bin/bash
# Description: -o noacl. A file whose ACL grants the unprivileged user read (mode 0600,
# user:U:r) is readable by U with ACLs on; mounted again with noacl, the ACL is neither
# enforced (U is refused: the mode alone decides) nor shown (getfattr of
# system.posix_acl_access fails with "Operation not supported", ls -l shows no "+"),
# setfacl fails the same way, new files get the umask from the kernel, and a cold ls -lR
# sends the daemon no request per file for ACLs (counted with the fuse tracepoint where
# perf has it). Mounted again without noacl, the ACL is back and enforced.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_acl_tools
t_workdir
chmod 0755 "$T_WORK"
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
U=65534
as_user() { setpriv --reuid=$U --regid=$U --clear-groups -- "$@"; }
umask 022

t_mount "$T_MEMBERS" "$M" allow_other
chmod 0755 "$M"
echo secret >"$M/f" && chmod 0600 "$M/f" || t_fail "writing $M/f"
setfacl -m "u:$U:r" "$M/f" || t_fail "setfacl with ACLs on"
mkdir "$M/d" && for i in $(seq 200); do : >"$M/d/n$i"; done || t_fail "making 200 files"
as_user cat "$M/f" >/dev/null 2>&1 || t_fail "ACLs on: user $U cannot read f through its ACL entry"
t_umount "$M"

t_log "mounted with noacl: the stored ACL is neither enforced nor shown"
t_mount "$T_MEMBERS" "$M" allow_other,noacl
if as_user cat "$M/f" >/dev/null 2>&1; then t_fail "noacl: user $U read f (mode 0600) through an ACL that is off"; fi
err=$(getfattr -n system.posix_acl_access "$M/f" 2>&1) && t_fail "noacl: getfattr shows the ACL: $err"
case $err in *"Operation not supported"*) ;; *) t_fail "noacl: getfattr failed, but not with EOPNOTSUPP: $err" ;; esac
# the mode's group bits hold the ACL's mask (r--), as on any filesystem with ACLs
ls -l "$M/f" | grep -q '^-rw-r-----\.\? ' || t_fail "noacl: ls -l f: $(ls -l "$M/f") (expected -rw-r----- without +)"
err=$(setfacl -m "u:$U:rw" "$M/f" 2>&1) && t_fail "noacl: setfacl succeeded"
case $err in *"Operation not supported"*) ;; *) t_fail "noacl: setfacl failed, but not with EOPNOTSUPP: $err" ;; esac
(umask 027 && : >"$M/g") || t_fail "creating g"
[ "$(stat -c %a "$M/g")" = 640 ] || t_fail "noacl: a file made with umask 027 has mode $(stat -c %a "$M/g"), expected 640"
if command -v perf >/dev/null && perf list 'fuse:*' 2>/dev/null | grep -q fuse_request_send; then
	t_umount "$M"
	t_mount "$T_MEMBERS" "$M" allow_other,noacl
	sync
	echo 3 >/proc/sys/vm/drop_caches
	perf record -q -e fuse:fuse_request_send -o "$T_WORK/perf.data" ls -lR "$M" >/dev/null 2>"$T_WORK/perf.err" ||
		t_fail "perf record of ls -lR: $(cat "$T_WORK/perf.err")"
	n=$(perf script -i "$T_WORK/perf.data" 2>/dev/null | grep -c FUSE_GETXATTR)
	t_log "noacl: cold ls -lR of 203 names sent $n GETXATTR requests"
	[ "$n" -le 4 ] || t_fail "noacl: cold ls -lR sent $n GETXATTR requests (expected a few, not one per file)"
else
	t_log "perf or its fuse tracepoint missing: the request count of ls -lR is not checked"
fi
t_umount "$M"

t_log "mounted again with ACLs: the ACL is back and enforced"
t_mount "$T_MEMBERS" "$M" allow_other
getfacl -cn "$M/f" 2>/dev/null | grep -qx "user:$U:r--" || t_fail "ACLs on again: f's ACL entry is gone: $(getfacl -cn "$M/f" 2>&1)"
as_user cat "$M/f" >/dev/null 2>&1 || t_fail "ACLs on again: user $U cannot read f through its ACL entry"
t_umount "$M"
t_log "PASS"
