#!/bin/bash
# Description: user.* xattrs (set/get/list/remove, flags, persistence across remount),
# trusted.* (root only, hidden from others' listings) and security.* (file capabilities:
# setcap/getcap, dropped by a write), other namespaces refused with EOPNOTSUPP, and the
# read-only virtual user.dmafs.layout xattr in the spec's format.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
command -v setfattr >/dev/null && command -v getfattr >/dev/null ||
	t_skip "setfattr/getfattr not installed (Debian package attr)"
command -v setcap >/dev/null && command -v getcap >/dev/null ||
	t_skip "setcap/getcap not installed (Debian package libcap2-bin)"
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
t_workdir
chmod 0755 "$T_WORK" # let uid 65534 reach the mount point
t_images 3 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M" allow_other
chmod 0755 "$M"
U=65534
as_user() { setpriv --reuid=$U --regid=$U --clear-groups -- "$@"; }
t_py "$top_srcdir/tests/t_helpers.py" xattr "$M/x" || t_fail "xattr semantics (see above)"
t_py "$top_srcdir/tests/t_helpers.py" xattr-setup "$M/persist" || t_fail "xattr setup"
t_log "setfattr/getfattr tools agree"
setfattr -n user.tool -v hello "$M/persist/p0" || t_fail "setfattr user.tool"
[ "$(getfattr --absolute-names --only-values -n user.tool "$M/persist/p0")" = hello ] || t_fail "getfattr user.tool"
getfattr --absolute-names -d "$M/persist/p0" | grep -q '^user.dmafs.layout' && t_fail "getfattr -d shows user.dmafs.layout"
setfattr -x user.tool "$M/persist/p0" || t_fail "setfattr -x"

# names NAME... as seen by CMD-prefix (as_user or nothing) in getfattr -d -m - of FILE
names() { "$@" getfattr --absolute-names -h -d -m - "$F" 2>/dev/null | sed -n 's/=.*//p' | sort | tr '\n' ' '; }
F=$M/persist/trusted
echo t >"$F" && chmod 0666 "$F"
t_log "trusted.*: root sets, reads and lists it; others get EPERM, ENODATA, and no name"
setfattr -n trusted.t -v tv "$F" || t_fail "setfattr trusted.t as root"
setfattr -n user.u -v uv "$F" || t_fail "setfattr user.u as root"
[ "$(getfattr --absolute-names --only-values -n trusted.t "$F")" = tv ] || t_fail "getfattr trusted.t as root"
[ "$(names)" = "trusted.t user.u " ] || t_fail "root lists '$(names)', expected trusted.t and user.u"
[ "$(names as_user)" = "user.u " ] || t_fail "uid $U lists '$(names as_user)', expected user.u only"
# root without CAP_SYS_ADMIN is no better than anyone else
[ "$(names setpriv --bounding-set=-sys_admin --)" = "user.u " ] ||
	t_fail "root without CAP_SYS_ADMIN lists '$(names setpriv --bounding-set=-sys_admin --)'"
err=$(as_user setfattr -n trusted.u -v x "$F" 2>&1) && t_fail "uid $U set trusted.u"
case $err in *"Operation not permitted"*) ;; *) t_fail "uid $U setfattr trusted.u: $err" ;; esac
err=$(as_user getfattr -n trusted.t "$F" 2>&1) && t_fail "uid $U read trusted.t"
case $err in *"No such attribute"*) ;; *) t_fail "uid $U getfattr trusted.t: $err" ;; esac
t_expect_fail "uid $U removes trusted.t" as_user setfattr -x trusted.t "$F"
[ "$(getfattr --absolute-names --only-values -n trusted.t "$F")" = tv ] || t_fail "trusted.t changed"

t_log "security.*: root sets it; others get EPERM; setcap/getcap round trip"
setfattr -n security.test -v sv "$F" || t_fail "setfattr security.test as root"
t_expect_fail "uid $U sets security.test2" as_user setfattr -n security.test2 -v x "$F"
cp /bin/true "$M/persist/capbin" || t_fail "cp /bin/true"
C=$M/persist/capbin
setcap cap_net_raw+ep "$C" || t_fail "setcap cap_net_raw+ep"
getcap "$C" | grep -q 'cap_net_raw[=+]ep' || t_fail "getcap after setcap: '$(getcap "$C")'"
"$C" || t_fail "a binary with file capabilities does not run"
t_log "file capabilities go when uid $U writes (direct and cached writes), or at truncate and chown"
chmod 0777 "$C"
as_user sh -c "echo >> '$C'" || t_fail "uid $U cannot append to a 0777 file"
[ -z "$(getcap "$C")" ] || t_fail "capabilities kept after an appending write by uid $U: $(getcap "$C")"
getfattr --absolute-names -m - -d "$C" | grep -q security.capability && t_fail "security.capability listed after a write"
setcap cap_net_raw+ep "$C" && chmod 0777 "$C"
as_user sh -c "exec 3<>'$C'; echo x >&3" || t_fail "uid $U cannot write a 0777 file opened read-write"
[ -z "$(getcap "$C")" ] || t_fail "capabilities kept after a read-write write by uid $U: $(getcap "$C")"
setcap cap_net_raw+ep "$C" && truncate -s 100 "$C"
[ -z "$(getcap "$C")" ] || t_fail "capabilities kept after truncate"
setcap cap_net_raw+ep "$C" && chown 1:1 "$C"
[ -z "$(getcap "$C")" ] || t_fail "capabilities kept after chown"
cp /bin/true "$M/persist/capkeep" && setcap cap_net_raw+ep "$M/persist/capkeep" || t_fail "setcap capkeep"

t_log "xattrs after unmount + mount"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M" allow_other
t_py "$top_srcdir/tests/t_helpers.py" xattr-verify "$M/persist" || t_fail "xattrs lost across remount"
[ "$(names)" = "security.test trusted.t user.u " ] || t_fail "after remount root lists '$(names)'"
[ "$(names as_user)" = "security.test user.u " ] || t_fail "after remount uid $U lists '$(names as_user)'"
getcap "$M/persist/capkeep" | grep -q 'cap_net_raw[=+]ep' || t_fail "file capabilities lost across remount"
t_py "$top_srcdir/tests/t_helpers.py" layoutcheck "$M/x/multi" >/dev/null ||
	t_fail "layout after remount invalid"
t_umount "$M"
t_log "PASS"
