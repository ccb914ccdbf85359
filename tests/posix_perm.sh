#!/bin/bash
# Description: kernel permission checks (default_permissions) as an unprivileged user on an
# allow_other mount: file/dir mode bits, sticky directories, chmod/chown/utimes ownership
# rules, setgid directory group inheritance, ownership of files created by the user.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
t_workdir
chmod 0755 "$T_WORK" # let uid 65534 reach the mount point
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M" allow_other
chmod 0755 "$M"
U=65534
OTHER=1000

as_user() { setpriv --reuid=$U --regid=$U --clear-groups -- "$@"; }

# ok DESC CMD... - CMD run as the user must succeed.
ok() {
	local desc=$1 err
	shift
	err=$(as_user "$@" 2>&1 >/dev/null) || t_fail "$desc: '$*' as uid $U failed: $err"
}
# denied ERRTEXT DESC CMD... - CMD run as the user must fail with ERRTEXT in its message.
denied() {
	local want=$1 desc=$2 err
	shift 2
	if err=$(as_user "$@" 2>&1 >/dev/null); then t_fail "$desc: '$*' as uid $U succeeded"; fi
	case $err in *"$want"*) ;; *) t_fail "$desc: '$*' as uid $U failed, but not with '$want': $err" ;; esac
}
EACCES="Permission denied"
EPERM="Operation not permitted"

t_log "user can reach the mount root (0755 root dir) and list it"
ok "ls mount root" ls "$M"

t_log "0600 root file: user cannot read it, root can"
echo secret >"$M/secret" && chmod 0600 "$M/secret"
denied "$EACCES" "read 0600 root file" cat "$M/secret"
[ "$(cat "$M/secret")" = secret ] || t_fail "root cannot read its 0600 file"

t_log "0644 root file: user can read, cannot write, truncate, chmod, chown"
echo public >"$M/public" && chmod 0644 "$M/public"
ok "read 0644 file" cat "$M/public"
denied "$EACCES" "write 0644 root file" sh -c "echo x >> '$M/public'"
denied "$EACCES" "truncate 0644 root file" truncate -s 0 "$M/public"
denied "$EPERM" "chmod someone else's file" chmod 0666 "$M/public"
denied "$EPERM" "chown as non-root" chown $U "$M/public"
[ "$(cat "$M/public")" = public ] || t_fail "0644 file changed by denied writes"

t_log "0755 root dir: user cannot create, mkdir, unlink, rename in it"
mkdir "$M/rootdir" && chmod 0755 "$M/rootdir" && echo f >"$M/rootdir/f"
denied "$EACCES" "create in 0755 root dir" touch "$M/rootdir/new"
denied "$EACCES" "mkdir in 0755 root dir" mkdir "$M/rootdir/sub"
denied "$EACCES" "unlink in 0755 root dir" rm -f "$M/rootdir/f"
denied "$EACCES" "rename in 0755 root dir" mv "$M/rootdir/f" "$M/rootdir/g"
denied "$EACCES" "symlink in 0755 root dir" ln -s x "$M/rootdir/l"
[ -f "$M/rootdir/f" ] && [ ! -e "$M/rootdir/new" ] || t_fail "0755 dir changed by denied ops"

t_log "0700 root dir: user cannot list or look up; 0711: can open a known name but not list"
mkdir "$M/private" && echo in >"$M/private/in" && chmod 0644 "$M/private/in" && chmod 0700 "$M/private"
denied "$EACCES" "list 0700 dir" ls "$M/private"
denied "$EACCES" "stat inside 0700 dir" stat "$M/private/in"
chmod 0711 "$M/private"
denied "$EACCES" "list 0711 dir" ls "$M/private"
ok "read known name in 0711 dir" cat "$M/private/in"

t_log "0777 dir: user creates files owned by $U:$U; may delete root's file (no sticky bit)"
mkdir "$M/open" && chmod 0777 "$M/open" && echo r >"$M/open/rootfile"
ok "create in 0777 dir" sh -c "echo mine > '$M/open/mine'"
ok "mkdir in 0777 dir" mkdir "$M/open/mydir"
[ "$(stat -c %u:%g "$M/open/mine")" = "$U:$U" ] || t_fail "new file owner $(stat -c %u:%g "$M/open/mine"), expected $U:$U"
[ "$(stat -c %u:%g "$M/open/mydir")" = "$U:$U" ] || t_fail "new dir owner $(stat -c %u:%g "$M/open/mydir")"
ok "unlink root's file in non-sticky 0777 dir" rm -f "$M/open/rootfile"
[ ! -e "$M/open/rootfile" ] || t_fail "file still there after permitted unlink"

t_log "sticky 1777 dir: user cannot unlink/rename another user's file, can its own; root can all"
mkdir "$M/tmp" && chmod 1777 "$M/tmp"
echo o >"$M/tmp/others" && chown $OTHER:$OTHER "$M/tmp/others" && chmod 0666 "$M/tmp/others"
ok "create in sticky dir" touch "$M/tmp/own"
denied "$EPERM" "unlink another user's file in sticky dir" rm -f "$M/tmp/others"
denied "$EPERM" "rename another user's file in sticky dir" mv "$M/tmp/others" "$M/tmp/stolen"
denied "$EPERM" "rename over another user's file in sticky dir" mv "$M/tmp/own" "$M/tmp/others"
ok "write to another user's 0666 file in sticky dir" sh -c "echo w >> '$M/tmp/others'"
ok "unlink own file in sticky dir" rm "$M/tmp/own"
[ -f "$M/tmp/others" ] || t_fail "other user's file gone from sticky dir"
rm "$M/tmp/others" || t_fail "root cannot unlink in sticky dir"
mkdir "$M/tmp/owned" && chown $U "$M/tmp/owned" && chmod 1777 "$M/tmp/owned"
echo x >"$M/tmp/owned/f" && chown $OTHER "$M/tmp/owned/f"
ok "sticky dir owner unlinks another user's file" rm -f "$M/tmp/owned/f"

t_log "ownership rules: owner chmods; non-owner cannot utime to a given time; writer may touch to now"
ok "owner chmod" chmod 0640 "$M/open/mine"
[ "$(stat -c %a "$M/open/mine")" = 640 ] || t_fail "chmod by owner: mode $(stat -c %a "$M/open/mine")"
denied "$EPERM" "chgrp to a group the user is not in" chgrp 0 "$M/open/mine"
echo w >"$M/open/shared" && chmod 0666 "$M/open/shared"
ok "touch (to now) a 0666 file of another user" touch "$M/open/shared"
denied "$EPERM" "set explicit times on another user's file" touch -d "2001-01-01" "$M/open/shared"
touch -d "2001-01-01" "$M/open/mine" 2>/dev/null
as_user touch -d "2002-02-02 00:00:00 UTC" "$M/open/mine" || t_fail "owner cannot set explicit times"
[ "$(stat -c %Y "$M/open/mine")" = 1012608000 ] || t_fail "owner's explicit mtime not set"

t_log "0444 own file: user cannot write it; root can"
as_user sh -c "echo ro > '$M/open/ro' && chmod 0444 '$M/open/ro'" || t_fail "create ro file"
denied "$EACCES" "write own 0444 file" sh -c "echo x >> '$M/open/ro'"
echo root >>"$M/open/ro" || t_fail "root cannot write a 0444 file"

t_log "exec bit: 0644 script not executable by the user, 0755 is"
printf '#!/bin/sh\necho ran\n' >"$M/script" && chmod 0644 "$M/script"
denied "$EACCES" "exec 0644 script" "$M/script"
chmod 0755 "$M/script"
[ "$(as_user "$M/script")" = ran ] || t_fail "exec 0755 script as user"

t_log "setgid dir: new files inherit the dir's group, new subdirs inherit setgid"
mkdir "$M/sgid" && chown 0:4321 "$M/sgid" && chmod 2777 "$M/sgid"
ok "create in setgid dir" touch "$M/sgid/f"
ok "mkdir in setgid dir" mkdir "$M/sgid/d"
[ "$(stat -c %g "$M/sgid/f")" = 4321 ] || t_fail "file in setgid dir has gid $(stat -c %g "$M/sgid/f"), expected 4321"
[ "$(stat -c %g "$M/sgid/d")" = 4321 ] || t_fail "dir in setgid dir has gid $(stat -c %g "$M/sgid/d")"
[ $((0$(stat -c %a "$M/sgid/d") & 02000)) != 0 ] || t_fail "subdir of setgid dir lacks setgid: $(stat -c %a "$M/sgid/d")"

t_log "permissions survive remount"
echo o >"$M/tmp/others2" && chown $OTHER "$M/tmp/others2"
t_umount "$M"
t_mount "$T_MEMBERS" "$M" allow_other
denied "$EACCES" "read 0600 root file after remount" cat "$M/secret"
denied "$EPERM" "unlink another user's file in sticky dir after remount" rm -f "$M/tmp/others2"
[ "$(stat -c %u:%g:%a "$M/open/mine")" = "$U:$U:640" ] || t_fail "owner/mode after remount: $(stat -c %u:%g:%a "$M/open/mine")"
t_umount "$M"
t_log "PASS"
