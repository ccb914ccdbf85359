#!/bin/bash
# Description: -o nolistxattr. Mounted with it, listxattr(2) fails with EOPNOTSUPP and
# only the first call reaches the daemon (counted in libfuse's request trace: the kernel
# answers the rest itself), while extended attributes keep working by name (get, set,
# remove, the user.dmafs.* names) and ls -l lists; mounted again without it, every name
# set meanwhile is listed.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
PY=${PYTHON:-python3}

t_mount "$T_MEMBERS" "$M"
mkdir "$M/d" && for i in $(seq 200); do : >"$M/d/n$i"; done || t_fail "making 200 files"
"$PY" -c 'import os, sys; os.setxattr(sys.argv[1], "user.a", b"1"); os.setxattr(sys.argv[1], "user.b", b"2")' "$M/d/n1" ||
	t_fail "setxattr user.a, user.b"
names=$("$PY" -c 'import os, sys; print(" ".join(sorted(os.listxattr(sys.argv[1]))))' "$M/d/n1")
[ "$names" = "user.a user.b" ] || t_fail "listxattr with names listed: '$names', expected 'user.a user.b'"
t_umount "$M"

t_log "mounted with nolistxattr (and libfuse's request trace)"
t_mount_fg "$T_MEMBERS" "$M" nolistxattr,debug
out=$("$PY" - "$M/d" <<'PY' 2>&1
import errno, os, sys
d = sys.argv[1]
for i in range(1, 201):
    try:
        os.listxattr(os.path.join(d, "n%d" % i))
        sys.exit("listxattr of n%d succeeded" % i)
    except OSError as e:
        if e.errno != errno.EOPNOTSUPP:
            sys.exit("listxattr of n%d: %s (expected EOPNOTSUPP)" % (i, e))
f = os.path.join(d, "n1")
if os.getxattr(f, "user.a") != b"1":
    sys.exit("getxattr user.a: %r" % os.getxattr(f, "user.a"))
os.setxattr(f, "user.c", b"3")
if os.getxattr(f, "user.c") != b"3":
    sys.exit("user.c not read back")
os.removexattr(f, "user.b")
try:
    os.getxattr(f, "user.b")
    sys.exit("user.b still there after removexattr")
except OSError as e:
    if e.errno != errno.ENODATA:
        sys.exit("getxattr of the removed user.b: %s (expected ENODATA)" % e)
if b"stripe_unit=" not in os.getxattr(f, "user.dmafs.layout"):
    sys.exit("user.dmafs.layout: %r" % os.getxattr(f, "user.dmafs.layout"))
PY
) || t_fail "nolistxattr: $out"
[ "$(ls -l "$M/d" | grep -c ' n[0-9]*$')" = 200 ] || t_fail "nolistxattr: ls -l does not list the 200 files: $(ls -l "$M/d" 2>&1 | head -3)"
n=$(grep -a -c "opcode: LISTXATTR" "$T_DAEMON_ERR")
t_log "nolistxattr: 200 listxattr calls and ls -l of 200 files sent $n LISTXATTR requests"
[ "$n" -le 1 ] || t_fail "nolistxattr: $n LISTXATTR requests reached the daemon (expected 1: the kernel answers the rest)"
t_umount "$M"

t_log "mounted again without it: the names are listed"
t_mount "$T_MEMBERS" "$M"
names=$("$PY" -c 'import os, sys; print(" ".join(sorted(os.listxattr(sys.argv[1]))))' "$M/d/n1")
[ "$names" = "user.a user.c" ] || t_fail "listed again: '$names', expected 'user.a user.c'"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
