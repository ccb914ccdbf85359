#!/bin/bash
# Description: user.* xattrs (set/get/list/remove, flags, persistence across remount),
# trusted.*/security.* refused with EOPNOTSUPP, and the read-only virtual
# user.dmafs.layout xattr in the spec's format.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 3 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" xattr "$M/x" || t_fail "xattr semantics (see above)"
t_py "$top_srcdir/tests/t_helpers.py" xattr-setup "$M/persist" || t_fail "xattr setup"
if command -v setfattr >/dev/null && command -v getfattr >/dev/null; then
	t_log "setfattr/getfattr tools agree; setfattr -n trusted.t fails"
	setfattr -n user.tool -v hello "$M/persist/p0" || t_fail "setfattr user.tool"
	[ "$(getfattr --absolute-names --only-values -n user.tool "$M/persist/p0")" = hello ] || t_fail "getfattr user.tool"
	getfattr --absolute-names -d "$M/persist/p0" | grep -q '^user.dmafs.layout' && t_fail "getfattr -d shows user.dmafs.layout"
	t_expect_fail "setfattr trusted.t as root" setfattr -n trusted.t -v 1 "$M/persist/p0"
	setfattr -x user.tool "$M/persist/p0" || t_fail "setfattr -x"
fi
t_log "xattrs after unmount + mount"
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
t_py "$top_srcdir/tests/t_helpers.py" xattr-verify "$M/persist" || t_fail "xattrs lost across remount"
t_py "$top_srcdir/tests/t_helpers.py" layoutcheck "$M/x/multi" >/dev/null ||
	t_fail "layout after remount invalid"
t_umount "$M"
t_log "PASS"
