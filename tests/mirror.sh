#!/bin/bash
# Description: the mirror data profile (mkfs.dmafs --data mirror) on 3 members: both copies
# written and half the capacity reported; blocks damaged at random in one copy or the
# other while mounted: every POSIX read and every verified placement returns the files'
# bytes (1000 blocks, then 200 more), each bad copy that reads take (rows of stripe
# units alternately the first and the second) is counted and rewritten (self-heal,
# logged once), dmafs-fsck --scrub reports the others and --repair rewrites them; a missing member
# refuses a plain mount (naming -o degraded) and -o degraded reads every file exactly,
# read-only, also by UUID (the block devices scanned, one missing); dmafs-replace rebuilds member 1 and then member 0 (a log member) on new
# images, after which the filesystem mounts read-write, reads exactly and scrubs clean;
# then member 2 is rebuilt while mounted degraded, a reader going on meanwhile (and an
# unprivileged user may not start a rebuild).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
[ -w /proc/sys/vm/drop_caches ] || t_skip "cannot write /proc/sys/vm/drop_caches"
command -v getfattr >/dev/null || t_skip "getfattr not installed (Debian package attr)"
command -v losetup >/dev/null || t_skip "losetup not installed (Debian package mount)"
LOAD=$top_builddir/tools/dmafs-load
REPLACE=$top_builddir/tools/dmafs-replace
BLOCKS=$top_srcdir/tests/mirror_blocks.py
t_workdir
W=$T_WORK
M=$W/mnt
t_images 3 192M
I0=${T_IMGS[0]} I1=${T_IMGS[1]} I2=${T_IMGS[2]}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
member_field() { # member_field MNT INDEX FIELD - a field of user.dmafs.members' member line
	getfattr --only-values -n user.dmafs.members "$1" 2>/dev/null |
		awk -v m="member=$2" -v f="$3=" '$1 == m { for (i = 2; i <= NF; i++) if (index($i, f) == 1) print substr($i, length(f) + 1) }'
}
check_all() { # check_all WHAT - every file's bytes as made (cold caches)
	drop_caches
	(cd "$M" && sha256sum -c --quiet "$W/sums") >"$W/sums.out" 2>&1 ||
		t_fail "$1: files differ: $(head -5 "$W/sums.out")"
}

"$MKFS" -q --data mirror "$I0" "$I1" "$I2" >"$W/mkfs.out" 2>&1 || t_fail "mkfs --data mirror: $(cat "$W/mkfs.out")"
"$MKFS" -q --data mirror --size 128M "$W/one" >"$W/one.out" 2>&1 && t_fail "mkfs --data mirror of one member succeeded"
grep -q "at least 2 members" "$W/one.out" || t_fail "mkfs --data mirror of one member: $(cat "$W/one.out")"
t_mount_fg "$I0,$I1,$I2" "$M"

t_log "files of many shapes; capacity is half the data regions"
mkdir -p "$M/d"
for i in $(seq 1 40); do head -c $((RANDOM * 37 % 2000000 + 1)) /dev/urandom >"$M/d/f$i"; done
head -c 24M /dev/urandom >"$M/big"
: >"$M/empty"
truncate -s 8M "$M/sparse" && printf 'middle' | dd of="$M/sparse" bs=1 seek=3000000 conv=notrunc 2>/dev/null
fallocate -l 3M "$M/falloc" 2>/dev/null || head -c 3M /dev/zero >"$M/falloc"
(cd "$M" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$W/sums"
sync
data=$(member_field "$M" 0 data)
[ "$(getfattr --only-values -n user.dmafs.members "$M" | grep -c '^profile=mirror$')" = 1 ] || t_fail "user.dmafs.members does not say profile=mirror"
size=$(($(t_statfs "$M" f_blocks) * $(t_statfs "$M" f_frsize)))
[ "$size" = $((3 * data)) ] || t_fail "statfs size $size, expected 3 x $data (each member's first half)"
t_umount "$M"

t_log "the second copies are on disk: a scrub of both copies is clean"
t_fsck 0 --scrub "$I0" "$I1" "$I2"
grep -q "both copies" "$W/fsck.out" || t_fail "fsck --scrub did not scrub both copies: $(cat "$W/fsck.out")"

t_log "1000 blocks damaged in one copy each, while mounted: POSIX reads return the files' bytes"
t_mount_fg "$I0,$I1,$I2" "$M"
t_py "$BLOCKS" "$M" "$I0,$I1,$I2" 1000 1 >"$W/dmg1" || t_fail "mirror_blocks.py failed"
field() { head -1 "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
read1=$(field "$W/dmg1" read) unread1=$(field "$W/dmg1" unread)
t_log "  damaged: $(field "$W/dmg1" first) first copies, $(field "$W/dmg1" second) second; $read1 of them in the copies reads take"
check_all "reads with damaged copies"
bad=0 healed=0
for m in 0 1 2; do
	bad=$((bad + $(member_field "$M" $m bad)))
	healed=$((healed + $(member_field "$M" $m healed)))
done
# every damaged copy that reads take is found; so are those of the other copy in a range
# that was recovered (it is read then, block by block)
[ "$bad" -ge "$read1" ] && [ "$bad" -le 1000 ] || t_fail "members count $bad bad blocks, $read1 damaged copies were read (1000 damaged in all)"
[ "$healed" = "$bad" ] || t_fail "$healed of $bad bad copies found were rewritten"
grep -q "checksum mismatch at member offset .*read from the copy on member .*rewritten from it" "$T_DAEMON_ERR" ||
	t_fail "no self-heal logged: $(tail -3 "$T_DAEMON_ERR")"
[ "$(grep -c 'read from the copy on member' "$T_DAEMON_ERR")" -le 3 ] ||
	t_fail "self-heal logged more than once per member"
check_all "reads after the self-heal"
t_umount "$M"

left=$((1000 - bad))
t_log "dmafs-fsck --scrub finds the $left bad copies reads did not meet, --repair rewrites them"
if [ "$left" -gt 0 ]; then
	t_fsck 4 --scrub "$I0" "$I1" "$I2"
	n=$(grep -c "^ERROR: .* copy of .* is damaged (checksum mismatch); the copy on member [0-9]* is good" "$W/fsck.out")
	# runs of neighbouring blocks are reported together: at most one line per block
	[ "$n" -ge 1 ] && [ "$n" -le "$left" ] || t_fail "fsck reported $n bad copies for $left: $(head "$W/fsck.out")"
	[ "$n" = "$(grep -c '^ERROR' "$W/fsck.out")" ] || t_fail "fsck found other problems: $(grep -v 'is damaged (checksum mismatch); the copy on' "$W/fsck.out" | grep ERROR | head -3)"
	t_fsck 1 --scrub --repair "$I0" "$I1" "$I2"
fi
t_fsck 0 --scrub "$I0" "$I1" "$I2"

t_log "placements verify and recover too (verify_place): 200 damaged copies"
t_mount_fg "$I0,$I1,$I2" "$M" verify_place
t_py "$BLOCKS" "$M" "$I0,$I1,$I2" 200 2 >"$W/dmg2" || t_fail "mirror_blocks.py failed"
drop_caches
# placements first (their reads meet the damage), then --verify's POSIX reads
"$LOAD" --target host --verify -q "$M/big" "$M/d" "$M/sparse" "$M/falloc" >"$W/load.out" 2>&1 ||
	t_fail "dmafs-load --verify with damaged first copies: $(tail -5 "$W/load.out")"
bad=0
for m in 0 1 2; do bad=$((bad + $(member_field "$M" $m bad))); done
read2=$(field "$W/dmg2" read)
[ "$bad" -ge "$read2" ] && [ "$bad" -le 200 ] || t_fail "$bad bad blocks counted after $read2 damaged copies that placements take were placed"
check_all "after placements with damaged copies"
t_umount "$M"
"$top_builddir/tools/dmafs-fsck" --scrub --repair "$I0" "$I1" "$I2" >"$W/fsck.out" 2>&1
case $? in 0 | 1) ;; *) t_fail "dmafs-fsck --scrub --repair after the placements: $(cat "$W/fsck.out")" ;; esac
t_fsck 0 --scrub "$I0" "$I1" "$I2"

# refused SOURCE PATTERN - a plain mount of SOURCE (member 1 missing) fails, saying PATTERN
refused() {
	if "$DMAFS" "$1" "$M" 2>"$W/plain.err"; then
		t_umount "$M"
		t_fail "$1 mounted with member 1 missing and without -o degraded"
	fi
	grep -q "$2" "$W/plain.err" || t_fail "the refusal of $1 does not name the member and -o degraded: $(cat "$W/plain.err")"
}

t_log "member 1 missing: a plain mount is refused, -o degraded reads every file, read-only"
mkdir -p "$M"
refused "$I0,$I2" "member 1 (uuid .*) missing.*-o degraded"
t_mount_fg "$I2,$I0" "$M" degraded
check_all "degraded"
[ "$(member_field "$M" 1 state)" = missing ] || t_fail "member 1's state is $(member_field "$M" 1 state), not missing"
touch "$M/new" 2>"$W/touch.err" && t_fail "a degraded mount took a new file"
grep -q "Read-only" "$W/touch.err" || t_fail "a write to a degraded mount: $(cat "$W/touch.err"), not EROFS"
t_umount "$M"

t_log "by UUID too (the block devices scanned): loop devices over members 0 and 2"
lp0=$(losetup -f --show "$I0") && t_register loop "$lp0" && lp2=$(losetup -f --show "$I2") &&
	t_register loop "$lp2" || t_fail "no free loop device for the mount by UUID"
uuid=$(t_py -c 'import sys,uuid; print(uuid.UUID(bytes=open(sys.argv[1],"rb").read(32)[16:32]))' "$I0")
refused "dmafs:UUID=$uuid" "member 1 of 3 .* not found.*-o degraded"
t_mount_fg "dmafs:UUID=$uuid" "$M" degraded
check_all "degraded, by UUID"
t_umount "$M"
losetup -d "$lp0" "$lp2"

t_log "dmafs-replace rebuilds member 1 on a new image"
truncate -s 192M "$W/new1"
"$REPLACE" "$I2" "$I0" "$W/new1" >"$W/replace.out" 2>&1 || t_fail "dmafs-replace: $(cat "$W/replace.out")"
grep -q "member 1 rebuilt" "$W/replace.out" || t_fail "dmafs-replace said: $(cat "$W/replace.out")"
t_fsck 0 --scrub "$I0" "$W/new1" "$I2"
t_mount_fg "$I0,$W/new1,$I2" "$M"
check_all "after rebuilding member 1"
head -c 3M /dev/urandom >"$M/after" || t_fail "no write after the rebuild"
(cd "$M" && sha256sum after) >>"$W/sums"
t_umount "$M"

t_log "and member 0, which holds a metadata log copy"
truncate -s 200M "$W/new0"
t_expect_fail "dmafs-replace with no member missing" "$REPLACE" "$I0" "$W/new1" "$I2" "$W/new0"
"$REPLACE" -q "$W/new1,$I2" "$W/new0" >"$W/replace.out" 2>&1 || t_fail "dmafs-replace member 0: $(cat "$W/replace.out")"
t_fsck 0 --scrub "$W/new0" "$W/new1" "$I2"
t_mount_fg "$W/new0,$W/new1,$I2" "$M"
check_all "after rebuilding member 0"
t_umount "$M"

t_log "member 2 rebuilt while mounted (degraded), a reader going on meanwhile"
t_mount_fg "$W/new0,$W/new1" "$M" degraded,allow_other
truncate -s 192M "$W/live2"
chmod o+x "$W" # nobody reaches the mount point and its own image
install -o nobody -m 600 /dev/null "$W/nobody.img" && truncate -s 192M "$W/nobody.img"
runuser -u nobody -- "$REPLACE" "$M" "$W/nobody.img" >"$W/nobody.out" 2>&1 &&
	t_fail "an unprivileged user started a rebuild: $(cat "$W/nobody.out")"
grep -q "needs root" "$W/nobody.out" || t_fail "an unprivileged rebuild: $(cat "$W/nobody.out"), not EPERM"
(while :; do cat "$M"/d/* "$M/big" >/dev/null || exit 1; done) &
rpid=$!
t_register pid "$rpid"
"$REPLACE" "$M" "$W/live2" >"$W/live.out" 2>&1 || t_fail "dmafs-replace while mounted: $(cat "$W/live.out")"
t_running "$rpid" || t_fail "the reader failed during the rebuild"
kill "$rpid" 2>/dev/null
grep -q "member 2 rebuilt on .*live2" "$W/live.out" || t_fail "dmafs-replace while mounted said: $(cat "$W/live.out")"
[ "$(member_field "$M" 2 state)" = ok ] || t_fail "member 2's state after the rebuild: $(member_field "$M" 2 state)"
check_all "after rebuilding member 2 while mounted"
mount -o remount,rw "$M" 2>"$W/rw.err" && t_fail "remounted read-write after a rebuild while mounted"
t_umount "$M"
t_fsck 0 --scrub "$W/new0" "$W/new1" "$W/live2"
t_mount_fg "$W/new0,$W/new1,$W/live2" "$M"
check_all "mounted again after the rebuild while mounted"
head -c 1M /dev/urandom >"$M/after2" || t_fail "no write after the rebuild while mounted"
t_umount "$M"
t_log "PASS"
