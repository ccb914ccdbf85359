#!/bin/bash
# Description: one filesystem mounted twice: the second dmafs (read-write or read-only,
# members as image files or as loop devices) fails without mounting, and its message says
# that a dmafs filesystem is served by one daemon, names the mount that has it and the
# bind mount to use; that bind mount then shows the same files both ways. dmafs-fsck and
# mkfs.dmafs --force on the mounted members say to unmount it first (not to bind-mount);
# all of this at once for a filesystem mounted by LABEL= too.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir

# second MEMBERS M1 OPTS - a second mount of the filesystem mounted on M1 must fail so.
second() {
	local members=$1 m1=$2 opts=$3 m2=$T_WORK/second out rc
	mkdir -p "$m2"
	out=$("$DMAFS" ${opts:+-o "$opts"} "$members" "$m2" 2>&1)
	rc=$?
	t_is_mounted "$m2" && { t_register mnt "$m2"; t_fail "a second daemon mounted $members on $m2"; }
	[ $rc != 0 ] || t_fail "second mount${opts:+ -o $opts} exited 0: $out"
	case $out in
	*"served by one daemon"*"mount --bind $m1 DIR"*) ;;
	*) t_fail "second mount${opts:+ -o $opts}: the message does not say it plainly: $out" ;;
	esac
	case $out in *flock*) t_fail "the message still speaks of flock: $out" ;; esac
	t_log "refused: $out"
}

# offline TOOL ARGS... - an offline tool on the members of the filesystem mounted on $M
# fails and says to unmount it first
offline() {
	local out rc
	out=$("$@" 2>&1)
	rc=$?
	[ $rc != 0 ] || t_fail "$* on a mounted filesystem exited 0: $out"
	case $out in
	*"mounted on $M: unmount it first (umount $M)"*) ;;
	*) t_fail "$*: the message does not say to unmount $M first: $out" ;;
	esac
	case $out in *bind*) t_fail "$*: the message speaks of a bind mount: $out" ;; esac
	t_log "refused: $out"
}

t_log "image files"
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
second "$T_MEMBERS" "$M" ""
second "$T_MEMBERS" "$M" ro
offline "$top_builddir/tools/dmafs-fsck" "$T_MEMBERS"
offline "$top_builddir/tools/dmafs-fsck" --repair "$T_MEMBERS"
offline "$MKFS" --force "${T_IMGS[@]}"
t_log "the bind mount it points to"
B=$T_WORK/bind
mkdir -p "$B"
mount --bind "$M" "$B" || t_fail "mount --bind $M $B"
t_register kmnt "$B"
echo via-bind >"$B/f" && [ "$(cat "$M/f")" = via-bind ] || t_fail "a file written through the bind mount is not in the mount"
echo via-mount >"$M/g" && [ "$(cat "$B/g")" = via-mount ] || t_fail "a file written through the mount is not in the bind mount"
umount "$B" || t_fail "umount $B"
t_umount "$M"

t_log "loop devices"
t_loops 2 128M
LABEL=mt$$
t_mkfs -L "$LABEL" "${T_LOOPDEVS[@]}"
M2=$T_WORK/mnt2
t_mount "$T_MEMBERS" "$M2"
second "$T_MEMBERS" "$M2" ""
t_umount "$M2"

t_log "mounted by LABEL=: a mount by the members, fsck and mkfs see it at once"
t_mount "LABEL=$LABEL" "$M2"
M=$M2
t0=$(date +%s%N)
second "$T_MEMBERS" "$M2" ""
offline "$top_builddir/tools/dmafs-fsck" "LABEL=$LABEL"
offline "$MKFS" --force "${T_LOOPDEVS[@]}"
ms=$((($(date +%s%N) - t0) / 1000000))
# before, each waited out 50 retries of the exclusive open (5 s) and then named no mount
((ms < 4000)) || t_fail "the three refusals took $ms ms: they waited for the members instead of finding the mount"
t_umount "$M2"
t_log "PASS"
