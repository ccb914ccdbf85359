#!/bin/bash
# Description: the warm tier under memory pressure (-o tier_min_free=): with the line
# above the machine's RAM the tier holds nothing, placements stay byte-exact and the
# daemon logs why; with tier_min_free=0 it fills as before; a filled tier whose line is
# raised on a running mount (user.dmafs.tier_min_free, root only) gives its memory back
# (the daemon's VmRSS drops to near its level before the fills), refuses fills while
# memory is short, and fills again once the line is lowered; bad values are refused.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
TP=$top_builddir/tests/tier_place
[ -x "$TP" ] || t_skip "tests/tier_place not built"
t_workdir
W=$T_WORK
M=$W/mnt
t_loops 3 160M
t_mkfs -s 256K "${T_LOOPDEVS[@]}"
. "$top_srcdir/tests/t_tier.sh"
MEMTOTAL=$(($(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 1024))
ABOVE=$((MEMTOTAL + 1024 * MiB)) # a line the machine is always under

# set_min_free VALUE - set user.dmafs.tier_min_free on the mount's root (as root)
set_min_free() {
	t_py -c 'import os, sys; os.setxattr(sys.argv[1], "user.dmafs.tier_min_free", sys.argv[2].encode())' \
		"$M" "$1" || t_fail "setting user.dmafs.tier_min_free to $1"
}
# wait_stat VAR VALUE WHAT - S_VAR reaches VALUE within 10 s
wait_stat() {
	local n=100 v
	while stats; v=S_$1; [ "${!v}" != "$2" ]; do
		((n-- > 0)) || t_fail "$3: $1 is ${!v}, expected $2"
		sleep 0.1
	done
}
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$T_DAEMON_PID/status"; }

t_log "bad tier_min_free= values are refused"
for bad in tier_min_free=12x tier_min_free=101% tier_min_free=%5 tier_min_free=-1M tier_min_free=; do
	mkdir -p "$M"
	"$DMAFS" -o "tier=16M,$bad" "$T_MEMBERS" "$M" 2>"$W/err" && t_fail "-o $bad accepted"
	grep -q "tier_min_free=" "$W/err" || t_fail "-o $bad: no message naming tier_min_free=: $(cat "$W/err")"
done

SZ=$((6 * MiB + 123))
head -c $SZ /dev/urandom >"$W/ref" || t_fail "urandom"
head -c $((48 * MiB)) /dev/urandom >"$W/refb" || t_fail "urandom"

t_log "tier_min_free above the RAM: placements are exact, the tier holds nothing, the daemon says why"
t_mount_fg "$T_MEMBERS" "$M" "tier=64M,tier_fill=now,tier_min_free=$ABOVE"
cp "$W/ref" "$M/f" || t_fail "copy in"
place "$M/f" "$W/ref" 0 $SZ
place "$M/f" "$W/ref" 0 $SZ 5
stats
expect "bytes held" "$S_HELD" 0
expect "bytes filled" "$S_FILLED" 0
expect "hits" "$S_HITS" 0
expect "misses (2 placements of 7 pieces)" "$S_MISSES" 14
expect "cap while memory is short" "$S_CAP" 0
expect "min_free" "$S_MIN_FREE" $ABOVE
expect "min_free through the xattr" "$(xt "$M" user.dmafs.tier_min_free)" $ABOVE
expect "user.dmafs.tier" "$(xt "$M/f" user.dmafs.tier)" 0
grep -q "warm tier: memory is short" "$T_DAEMON_ERR" ||
	t_fail "the daemon did not log the shortage: $(cat "$T_DAEMON_ERR")"
t_umount "$M"

t_log "tier_min_free=0: the tier fills as before, and the second placement comes from it"
t_mount_fg "$T_MEMBERS" "$M" "tier=64M,tier_fill=now,tier_min_free=0,allow_other"
cp "$W/refb" "$M/b" || t_fail "copy b"
# a placement that fills nothing (a part of a chunk) sets up what placements use
place "$M/f" "$W/ref" 100 4000 7
stats
expect "bytes held after a partial placement" "$S_HELD" 0
expect "min_free" "$S_MIN_FREE" 0
sleep 0.5
R0=$(rss)
place "$M/f" "$W/ref" 0 $SZ
place "$M/f" "$W/ref" 0 $SZ
stats
expect "bytes held" "$S_HELD" $((7 * MiB))
expect "hits" "$S_HITS" 7
expect "cap" "$S_CAP" $((64 * MiB))
expect "resident" "$S_RESIDENT" $((64 * MiB))
grep -q "warm tier: memory is short" "$T_DAEMON_ERR" && t_fail "memory short with tier_min_free=0"

t_log "48 MiB more filled: the daemon's resident memory grows by about that"
place "$M/b" "$W/refb" 0 $((48 * MiB))
stats
expect "bytes held" "$S_HELD" $((55 * MiB))
R1=$(rss)
((R1 >= R0 + 48 * MiB)) || t_fail "VmRSS grew by $(((R1 - R0) / MiB)) MiB for 55 MiB filled"

t_log "only root may move the line, on the root, to a size"
chmod 0777 "$M" || t_fail "chmod the root" # not sticky: the kernel would refuse first
# the root opened first: the work directory above it is not for other users
t_py -c '
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
try:
    os.setxattr(fd, "user.dmafs.tier_min_free", b"1G")
except OSError as e:
    sys.exit(0 if e.errno == errno.EPERM else "errno %d" % e.errno)
sys.exit("set by uid 65534")' "$M" || t_fail "user.dmafs.tier_min_free set by a user other than root"
t_py -c '
import errno, os, sys
for path, val, want in ((sys.argv[1], b"12x", errno.EINVAL), (sys.argv[1], b"101%", errno.EINVAL),
                        (sys.argv[1] + "/f", b"1G", errno.EPERM)):
    try:
        os.setxattr(path, "user.dmafs.tier_min_free", val)
    except OSError as e:
        if e.errno != want:
            sys.exit("%s %s: errno %d, not %d" % (path, val, e.errno, want))
    else:
        sys.exit("%s %s: accepted" % (path, val))' "$M" || t_fail "a bad user.dmafs.tier_min_free"
stats
expect "min_free after the refused values" "$S_MIN_FREE" 0

t_log "the line raised above the RAM: the tier gives its memory back, VmRSS drops"
set_min_free $ABOVE
# the chunks leave (held 0) before their memory is counted as given back (tier_shrink
# unpublishes them, then releases the segments): wait for the count, then check the rest
wait_stat SHRUNK $((64 * MiB)) "bytes given back after the line was raised"
expect "bytes held" "$S_HELD" 0
expect "resident" "$S_RESIDENT" 0
expect "cap" "$S_CAP" 0
expect "user.dmafs.tier of b" "$(xt "$M/b" user.dmafs.tier)" 0
sleep 0.5
R2=$(rss)
((R2 <= R0 + 12 * MiB)) ||
	t_fail "VmRSS is $((R2 / MiB)) MiB after the shrink: $((R0 / MiB)) MiB before the fills, $((R1 / MiB)) MiB after"
grep -q "warm tier: memory is short.*gave back 64 MiB" "$T_DAEMON_ERR" ||
	t_fail "the daemon did not log what it gave back: $(cat "$T_DAEMON_ERR")"

t_log "while memory is short, placements are exact and fill nothing"
stats
f0=$S_FILLED
place "$M/b" "$W/refb" 0 $((48 * MiB))
stats
expect "bytes filled while short" "$S_FILLED" "$f0"
expect "bytes held while short" "$S_HELD" 0

t_log "the line lowered again: the tier fills again"
set_min_free 0
n=100
until grep -q "warm tier: MemAvailable .* above tier_min_free (0 MiB) again" "$T_DAEMON_ERR"; do
	((n-- > 0)) || t_fail "the daemon did not log that the tier fills again: $(cat "$T_DAEMON_ERR")"
	sleep 0.1
done
place "$M/b" "$W/refb" 0 $((48 * MiB))
place "$M/b" "$W/refb" 0 $((48 * MiB)) 3
stats
expect "bytes held after the line went down" "$S_HELD" $((48 * MiB))
expect "cap" "$S_CAP" $((64 * MiB))
t_umount "$M"
t_log "PASS"
