# SPDX-License-Identifier: MIT
# t_basic.sh - the basic POSIX suite on a mounted dmafs, shared by posix_basic.sh
# and loopdev.sh (sourced after t_lib.sh).

# t_basic_suite MNT MEMBERS RAW_BYTES - run the basic checks on MNT.
t_basic_suite() {
	local mnt=$1 members=$2 raw=$3 line src type

	t_log "mount table: type fuse.dmafs, source is the member list"
	line=$(awk -v m="$mnt" '$2 == m' /proc/mounts | tail -n 1)
	[ -n "$line" ] || t_fail "$mnt not in /proc/mounts"
	src=$(echo "$line" | awk '{print $1}')
	type=$(echo "$line" | awk '{print $3}')
	[ "$type" = fuse.dmafs ] || t_fail "/proc/mounts type is '$type', expected fuse.dmafs"
	[ "$src" = "$members" ] || t_fail "/proc/mounts source is '$src', expected '$members'"

	t_log "fresh root: empty, a directory, writable by root"
	[ -d "$mnt" ] || t_fail "mount root is not a directory"
	[ -z "$(ls -A "$mnt" | grep -v '^lost+found$')" ] || t_fail "fresh filesystem not empty: $(ls -A "$mnt")"

	t_py "$top_srcdir/tests/t_helpers.py" basic "$mnt/basic" "$raw" || t_fail "POSIX basics (see above)"

	t_log "df: sane sizes, used+avail <= size"
	local size used avail
	read -r size used avail < <(df -B1 --output=size,used,avail "$mnt" | tail -n 1)
	[ "$size" -gt 0 ] || t_fail "df size $size"
	[ $((used + avail)) -le "$size" ] || t_fail "df used $used + avail $avail > size $size"

	t_log "du of an 8 GiB sparse file with one 4 KiB block written is small"
	local du
	dd if=/dev/urandom of="$mnt/du_sparse" bs=4096 count=1 seek=$((2 * 1024 * 1024)) status=none conv=fsync ||
		t_fail "dd into sparse file"
	du=$(du -k "$mnt/du_sparse" | cut -f1)
	[ "$du" -le 1024 ] || t_fail "du of sparse file is $du KiB (> 1 MiB)"
	[ "$(stat -c %s "$mnt/du_sparse")" = $((2 * 1024 * 1024 * 4096 + 4096)) ] || t_fail "sparse file size"
	cmp -n $((8 * 1024 * 1024)) "$mnt/du_sparse" /dev/zero || t_fail "start of sparse file not zeros"

	t_log "touch -a / touch -m change only atime / only mtime (UTIME_OMIT for the other)"
	echo t >"$mnt/omit" && touch -d "2010-01-01 00:00:00 UTC" "$mnt/omit" || t_fail "touch -d"
	touch -a -d "2011-01-01 00:00:00 UTC" "$mnt/omit" || t_fail "touch -a"
	[ "$(stat -c %X:%Y "$mnt/omit")" = 1293840000:1262304000 ] ||
		t_fail "after touch -a: atime:mtime $(stat -c %X:%Y "$mnt/omit"), expected 1293840000:1262304000"
	touch -m -d "2012-01-01 00:00:00 UTC" "$mnt/omit" || t_fail "touch -m"
	[ "$(stat -c %X:%Y "$mnt/omit")" = 1293840000:1325376000 ] ||
		t_fail "after touch -m: atime:mtime $(stat -c %X:%Y "$mnt/omit"), expected 1293840000:1325376000"

	t_log "shell tools: cp, mv, ln -s, ls -l, find, tar round trip"
	mkdir -p "$mnt/sh/a/b" && echo hello >"$mnt/sh/a/b/f" && ln -s b/f "$mnt/sh/a/l" ||
		t_fail "mkdir/echo/ln -s"
	[ "$(cat "$mnt/sh/a/l")" = hello ] || t_fail "cat through symlink"
	cp -a "$mnt/sh/a" "$mnt/sh/c" && mv "$mnt/sh/c" "$mnt/sh/d" || t_fail "cp -a / mv"
	[ "$(find "$mnt/sh" | wc -l)" = 9 ] || t_fail "find count $(find "$mnt/sh" | wc -l) != 9"
	mkdir "$T_WORK/tarx" && tar -C "$mnt/sh" -cf - . | tar -C "$T_WORK/tarx" -xf - ||
		t_fail "tar out of the mount"
	diff -r --no-dereference "$mnt/sh" "$T_WORK/tarx" || t_fail "tar copy differs from the mount"
	ls -l "$mnt/sh/d" | grep -q ' l -> b/f$' || t_fail "ls -l does not show the symlink"
}
