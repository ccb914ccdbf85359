#!/bin/bash
# Description: dmafs-check MOUNT shows the filesystem's UUID and label (those dmafs-label
# prints) and, per member, its path and the size, used and free bytes of its data region,
# in text and --json (from the daemon's user.dmafs.members): a 24 MiB file striped in
# 1 MiB units over 3 members uses 8 MiB on each; the free bytes together are what statfs
# says is free; removing the file gives the space back (within 10 s); a filesystem without a label says
# (none).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
CHECK=$top_builddir/tools/dmafs-check
LABELT=$top_builddir/tools/dmafs-label
[ -x "$CHECK" ] && [ -x "$LABELT" ] || t_skip "dmafs-check or dmafs-label not built"
t_workdir
W=$T_WORK
M=$W/mnt
L=t-space-$$
t_images 3 160M
t_mkfs -L "$L" "${T_IMGS[@]}"
UUID=$("$LABELT" "$T_MEMBERS" | sed -n 's/.*UUID="\([^"]*\)".*/\1/p')
[ -n "$UUID" ] || t_fail "no UUID from dmafs-label"
t_mount "$T_MEMBERS" "$M"

# json - dmafs-check --json of the mount, in $W/json
json() { "$CHECK" --json "$M" >"$W/json" 2>"$W/err" || t_fail "dmafs-check --json $M: $(cat "$W/err")"; }
# space FIELD - the members' FIELD (used, free, size) from $W/json, one per line
space() { t_py -c 'import json, sys
for m in json.load(open(sys.argv[1]))["mount"]["space"]: print(m[sys.argv[2]])' "$W/json" "$1"; }

t_log "text: UUID, label, a line per member"
"$CHECK" "$M" >"$W/out" 2>"$W/err" || t_fail "dmafs-check $M: $(cat "$W/err")"
grep -Eq "^ +filesystem UUID +$UUID\$" "$W/out" || t_fail "no 'filesystem UUID $UUID': $(cat "$W/out")"
grep -Eq "^ +label +$L\$" "$W/out" || t_fail "no 'label $L': $(cat "$W/out")"
for i in 0 1 2; do
	grep -Eq "^ +$i: ${T_IMGS[$i]}  size [0-9.]+ MiB  used [0-9.]+ ([KMG]i)?B  free [0-9.]+ MiB  \(member UUID [0-9a-f-]{36}\)\$" "$W/out" ||
		t_fail "no space line for member $i: $(cat "$W/out")"
done
grep -Eq "^ +all: size" "$W/out" || t_fail "no total line: $(cat "$W/out")"

json
t_py - "$W/json" "$UUID" "$L" "${T_IMGS[@]}" <<'PY' || t_fail "dmafs-check --json (see above)"
import json, sys
m = json.load(open(sys.argv[1]))["mount"]
assert m["uuid"] == sys.argv[2] and m["label"] == sys.argv[3], (m["uuid"], m["label"])
sp = m["space"]
assert [s["path"] for s in sp] == sys.argv[4:], sp
for s in sp:
    assert s["used"] + s["free"] == s["size"] and 0 < s["size"] < s["member_size"], s
PY
mapfile -t used0 < <(space used)

t_log "24 MiB in 1 MiB stripe units: 8 MiB more used on each member; free is statfs's"
head -c $((24 * 1048576)) /dev/urandom >"$M/f" || t_fail "write"
sync -f "$M/f"
json
mapfile -t used1 < <(space used)
for i in 0 1 2; do
	d=$((used1[i] - used0[i]))
	[ $d = $((8 * 1048576)) ] || t_fail "member $i: $d bytes more used after 24 MiB over 3 members, expected 8 MiB"
done
free=$(space free | paste -sd+ | bc)
sf=$(($(t_statfs "$M" f_bfree) * $(t_statfs "$M" f_frsize)))
[ "$free" = "$sf" ] || t_fail "members' free bytes add up to $free, statfs says $sf"
rm "$M/f" || t_fail "rm"
# the space comes back once the kernel forgets the inode and the deletion is committed
for ((n = 0; n < 100; n++)); do
	sync -f "$M"
	json
	mapfile -t used2 < <(space used)
	[ "${used2[*]}" = "${used0[*]}" ] && break
	sleep 0.1
done
[ "${used2[*]}" = "${used0[*]}" ] || t_fail "10 s after rm: used ${used2[*]}, before the write ${used0[*]}"
t_umount "$M"

t_log "no label: (none)"
"$LABELT" -q -L "" "$T_MEMBERS" || t_fail "dmafs-label -L ''"
t_mount "$T_MEMBERS" "$M"
"$CHECK" "$M" >"$W/out" 2>&1 || t_fail "dmafs-check $M: $(cat "$W/out")"
grep -Eq "^ +label +\(none\)\$" "$W/out" || t_fail "no 'label (none)': $(cat "$W/out")"
t_umount "$M"
t_log "PASS"
