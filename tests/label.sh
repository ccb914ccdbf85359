#!/bin/bash
# Description: dmafs-label shows and changes the label and the UUID of an unmounted
# filesystem: refused while it is mounted ("unmount it first"), bad labels refused with
# the reason and nothing written; after -L the filesystem mounts by the new LABEL=, after
# -U (random or given) by the new UUID= and not the old one, its files intact and
# dmafs-fsck clean; a UUID change interrupted half way (member 1's old superblocks put
# back) is finished by running it again. A label another dmafs filesystem on the block
# devices has is refused by dmafs-label and mkfs.dmafs, naming that filesystem's devices,
# and taken with --force; mkfs over that filesystem's own members keeps it without fuss.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
LABELT=$top_builddir/tools/dmafs-label
[ -x "$LABELT" ] || t_skip "dmafs-label not built"
t_workdir
W=$T_WORK
M=$W/mnt
A=t-label-$$-a
B=t-label-$$-b
C=t-label-$$-c
D=t-label-$$-d

t_loops 2 128M one
ONE=("${T_LOOPDEVS[@]}")
ONEM=$T_MEMBERS
t_loops 2 128M two
TWO=("${T_LOOPDEVS[@]}")
TWOM=$T_MEMBERS
t_loops 1 128M three
FRESH=${T_LOOPDEVS[0]}
t_mkfs -L "$A" "${ONE[@]}"
t_mkfs -L "$B" "${TWO[@]}"

# ids MEMBERS... - dmafs-label's output for them
ids() { "$LABELT" "$@" 2>&1; }
uuid_of() { ids "$@" | sed -n 's/.*UUID="\([^"]*\)".*/\1/p'; }
# refused WHAT WANT CMD... - CMD must exit 1 and say WANT on stderr
refused() {
	local what=$1 want=$2 out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	[ $rc = 1 ] || t_fail "$what: '$*' exited $rc, expected 1: $out"
	case $out in
	*"$want"*) ;;
	*) t_fail "$what: the message does not say '$want': $out" ;;
	esac
}

t_log "shown: LABEL=\"$A\" UUID=\"...\""
out=$(ids "$ONEM")
U1=$(uuid_of "$ONEM")
[[ $out =~ ^LABEL=\"$A\"\ UUID=\"[0-9a-f-]{36}\"$ ]] || t_fail "dmafs-label $ONEM printed: $out"

t_mount "$ONEM" "$M"
head -c 3000000 /dev/urandom >"$M/f" && mkdir "$M/d" && echo hello >"$M/d/g" || t_fail "populate"
SUM=$(sha256sum <"$M/f")
t_log "mounted: refused, unmount it first"
refused "relabel while mounted" "unmount it first" "$LABELT" -L "$C" "$ONEM"
refused "new UUID while mounted" "unmount it first" "$LABELT" -U random "$ONEM"
t_umount "$M"

t_log "bad labels refused with the reason; nothing written"
refused "a slash" "holds '/'" "$LABELT" -L "a/b" "$ONEM"
refused "a comma" "holds ','" "$LABELT" -L "a,b" "$ONEM"
refused "65 bytes" "at most 64" "$LABELT" -L "$(printf 'x%.0s' $(seq 65))" "$ONEM"
refused "a leading space" "space" "$LABELT" -L " a" "$ONEM"
refused "a control character" "control character" "$LABELT" -L "$(printf 'a\tb')" "$ONEM"
refused "mkfs with a slash" "holds '/'" "$MKFS" -q -f -L "a/b" "${ONE[@]}"
refused "a bad UUID" "32 hex digits" "$LABELT" -U 1234 "$ONEM"
[ "$(ids "$ONEM")" = "$out" ] || t_fail "a refused change changed the filesystem: $(ids "$ONEM")"

t_log "-L $C: mounts by LABEL=$C, files intact, fsck clean"
"$LABELT" -q -L "$C" "$ONEM" || t_fail "dmafs-label -L $C failed"
[ "$(ids "$ONEM")" = "LABEL=\"$C\" UUID=\"$U1\"" ] || t_fail "after -L $C: $(ids "$ONEM")"
t_fsck 0 "$ONEM"
t_mount "LABEL=$C" "$M"
[ "$(sha256sum <"$M/f")" = "$SUM" ] && [ "$(cat "$M/d/g")" = hello ] || t_fail "files changed by the relabel"
t_umount "$M"

t_log "-U random: a new UUID, mounts by it and not by the old one"
out=$("$LABELT" -U random "$ONEM" 2>&1) || t_fail "dmafs-label -U random failed: $out"
U2=$(uuid_of "$ONEM")
[ -n "$U2" ] && [ "$U2" != "$U1" ] || t_fail "the UUID did not change: $U1 -> $U2"
case $out in *"new UUID $U2"*) ;; *) t_fail "-U random did not say the UUID it chose first: $out" ;; esac
t_fsck 0 "$ONEM"
t_expect_fail "mount by the old UUID" "$DMAFS" "UUID=$U1" "$M"
t_mount "UUID=$U2" "$M"
[ "$(sha256sum <"$M/f")" = "$SUM" ] || t_fail "data changed by the new UUID"
echo more >"$M/d/h" || t_fail "write after the UUID change"
t_umount "$M"
t_fsck 0 "$ONEM"

U3=0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3
t_log "-U $U3, interrupted after member 0: running it again finishes it"
# member 1's superblocks (primary and the copy in its last 4 KiB) as they are now
size=$(blockdev --getsize64 "${ONE[1]}")
dd if="${ONE[1]}" of="$W/sb1" bs=4096 count=1 status=none && dd if="${ONE[1]}" of="$W/sb1c" bs=4096 skip=$((size / 4096 - 1)) count=1 status=none ||
	t_fail "saving member 1's superblocks"
"$LABELT" -q -U "$U3" "$ONEM" || t_fail "dmafs-label -U $U3 failed"
dd if="$W/sb1" of="${ONE[1]}" bs=4096 count=1 conv=notrunc,fsync status=none &&
	dd if="$W/sb1c" of="${ONE[1]}" bs=4096 seek=$((size / 4096 - 1)) count=1 conv=notrunc,fsync status=none ||
	t_fail "putting member 1's old superblocks back"
t_fsck 8 "$ONEM"
grep -q "belongs to filesystem $U2, not $U3" "$T_WORK/fsck.out" || t_fail "the half-done change is not what dmafs-fsck sees: $(cat "$T_WORK/fsck.out")"
"$LABELT" -q -U "$U3" "$ONEM" || t_fail "dmafs-label -U $U3 did not finish the interrupted change"
[ "$(uuid_of "$ONEM")" = "$U3" ] || t_fail "after finishing: $(ids "$ONEM")"
t_fsck 0 "$ONEM"
t_mount "UUID=$U3" "$M"
[ "$(sha256sum <"$M/f")" = "$SUM" ] && [ "$(cat "$M/d/h")" = more ] || t_fail "files changed by the finished UUID change"
t_umount "$M"

t_log "a label another filesystem has ($B on ${TWO[*]}): refused, naming its devices"
refused "dmafs-label -L $B" "${TWO[0]}" "$LABELT" -L "$B" "$ONEM"
[ "$(ids "$ONEM")" = "LABEL=\"$C\" UUID=\"$U3\"" ] || t_fail "a refused relabel changed the filesystem: $(ids "$ONEM")"
refused "mkfs.dmafs -L $B" "already the label of another dmafs filesystem" "$MKFS" -q -L "$B" "$FRESH"
"$MKFS" -q -L "$B" "$FRESH" 2>&1 | grep -q "${TWO[1]}" || t_fail "mkfs does not name ${TWO[1]}"
[ -z "$(ids "$FRESH" | grep UUID)" ] || t_fail "a refused mkfs formatted $FRESH: $(ids "$FRESH")"
t_log "  --force takes it (mkfs.dmafs with a warning that names the devices)"
out=$("$MKFS" -f -L "$B" "$FRESH" 2>&1) || t_fail "mkfs.dmafs -f -L $B failed: $out"
case $out in *"warning: label '$B' is also the label of another dmafs filesystem"*"${TWO[0]}"*) ;;
*) t_fail "mkfs.dmafs -f -L $B did not warn naming ${TWO[0]}: $out" ;; esac
t_mkfs -f -L "$D" "$FRESH"
"$LABELT" -q -f -L "$B" "$ONEM" || t_fail "dmafs-label -f -L $B failed"
[ "$(ids "$ONEM")" = "LABEL=\"$B\" UUID=\"$U3\"" ] || t_fail "after -f -L $B: $(ids "$ONEM")"
t_expect_fail "LABEL= of two filesystems" "$DMAFS" "LABEL=$B" "$M"
"$LABELT" -q -L "$A" "$ONEM" || t_fail "dmafs-label -L $A (back) failed"
t_log "  mkfs over the other filesystem's own members keeps its label without fuss"
out=$("$MKFS" -f -L "$B" "${TWO[@]}" 2>&1) || t_fail "mkfs.dmafs -f -L $B over its own members failed: $out"
case $out in *warning*) t_fail "mkfs over the members that held the label warned: $out" ;; esac
t_mount "LABEL=$B" "$M"
t_umount "$M"
t_log "PASS"
