#!/bin/bash
# Description: the kernel's caches of names and attributes stay exact. readdirplus hands
# the kernel a reference per name listed: after ls -lR of 2,000 files, their removal and
# a cache drop, every byte is free again (a reference counted twice would keep an unlinked
# inode and its blocks until unmount; one counted too few would free an inode the kernel
# still uses, and the stat below would fail). Names of files with one name are kept by
# the kernel: a change through the mount is seen at once by another process that cached
# the name (rename, unlink, a new file under the old name, chmod, a size change through a
# descriptor another process holds, chattr's new change time). link(2) gives a cached name
# a second one: the link count reads 2 at once through both names, and after the second
# name is removed, 1.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_workdir
M=$T_WORK/mnt
t_images 2 512M
t_mkfs "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$M"

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# --- readdirplus references ---
free0=$(t_free_bytes "$M")
mkdir "$M/set"
for d in 0 1 2 3; do
	mkdir "$M/set/d$d"
	for ((i = 0; i < 500; i++)); do
		head -c 8192 /dev/zero >"$M/set/d$d/f$i"
	done
done
drop
n=$(ls -lR "$M/set" | grep -c '^-rw')
[ "$n" = 2000 ] || t_fail "ls -lR listed $n files, expected 2000"
# stat of every name right after the listing: the references it took are valid
find "$M/set" -type f -exec stat -c '%s' {} + | sort -u | grep -qx 8192 ||
	t_fail "stat after ls -lR did not give 8192 bytes for every file"
rm -rf "$M/set"
drop
ok=0
for _ in $(seq 50); do
	[ "$(t_free_bytes "$M")" -ge "$free0" ] && { ok=1; break; }
	sleep 0.1
done
[ $ok = 1 ] || t_fail "after ls -lR, rm -rf and a cache drop, $(($free0 - $(t_free_bytes "$M"))) bytes are still in use (references from the listing not forgotten)"
t_log "readdirplus: 2000 names listed and removed, all space back"

# --- a cached name sees changes made by others at once ---
echo one >"$M/a"
stat "$M/a" >/dev/null # cached now
exec 7<>"$M/a"        # another descriptor held meanwhile
mv "$M/a" "$M/b"
[ -e "$M/a" ] && t_fail "a renamed name still exists"
[ "$(cat "$M/b")" = one ] || t_fail "the renamed file reads wrong"
echo two >"$M/a"
[ "$(cat "$M/a")" = two ] || t_fail "a new file under a cached old name reads wrong"
[ "$(stat -c %i "$M/a")" != "$(stat -c %i "$M/b")" ] || t_fail "the new name shows the old inode"
chmod 600 "$M/b"
[ "$(stat -c %a "$M/b")" = 600 ] || t_fail "chmod not seen at once: $(stat -c %a "$M/b")"
truncate -s 12345 /proc/self/fd/7 2>/dev/null || python3 -c 'import os; os.ftruncate(7, 12345)'
[ "$(stat -c %s "$M/b")" = 12345 ] || t_fail "a size change through a held descriptor not seen at once: $(stat -c %s "$M/b")"
exec 7>&-
rm "$M/b"
[ -e "$M/b" ] && t_fail "an unlinked name still exists"

# --- link(2) from a cached name ---
echo x >"$M/c"
stat "$M/c" >/dev/null
ln "$M/c" "$M/d"
[ "$(stat -c %h "$M/c")" = 2 ] || t_fail "link count through the first name is $(stat -c %h "$M/c") after ln, expected 2"
[ "$(stat -c %h "$M/d")" = 2 ] || t_fail "link count through the second name is $(stat -c %h "$M/d"), expected 2"
rm "$M/d"
[ "$(stat -c %h "$M/c")" = 1 ] || t_fail "link count is $(stat -c %h "$M/c") after removing the second name, expected 1"
ln "$M/c" "$M/e" || t_fail "link(2) from the remaining name failed"
# the daemon's own attribute changes reach the kernel's cache at once: chattr sets ctime
if command -v chattr >/dev/null; then
	echo y >"$M/g"
	c0=$(stat -c %z "$M/g")
	sleep 0.1
	chattr +a "$M/g" || t_fail "chattr +a failed"
	c1=$(stat -c %z "$M/g")
	chattr -a "$M/g"
	[ "$c0" != "$c1" ] || t_fail "stat right after chattr +a shows the old change time $c0"
fi
t_log "cached names: renames, new files, chmod, size, links seen at once"

t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
