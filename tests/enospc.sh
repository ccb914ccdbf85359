#!/bin/bash
# Description: ENOSPC on a small 2-member filesystem: dd fills it until ENOSPC, df shows it
# full, existing files stay intact, deleting frees the space for new writes, the full
# filesystem unmounts and mounts again; creating empty files until the metadata log is
# full fails with ENOSPC (not EIO) and the filesystem still mounts afterwards.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
MIB=$((1024 * 1024))
t_workdir
t_images 2 80M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"

t_log "files written before the fill"
mkdir "$M/keep" || t_fail mkdir
for i in 1 2 3; do head -c $((i * 333333)) /dev/urandom >"$M/keep/k$i" || t_fail "write keep/k$i"; done
(cd "$M/keep" && sha256sum k*) >"$T_WORK/keep.sums"
sync -f "$M/keep/k1" 2>/dev/null
free0=$(t_free_bytes "$M")
[ "$free0" -gt $((50 * MIB)) ] || t_fail "only $free0 bytes free on a fresh 2x80 MiB filesystem"

t_log "dd until ENOSPC"
err=$(dd if=/dev/zero of="$M/fill" bs=1M conv=fsync 2>&1) && t_fail "dd filled an 80 MiB filesystem without error"
case $err in *"No space left on device"*) ;; *) t_fail "dd failed, but not with ENOSPC: $err" ;; esac
fill=$(stat -c %s "$M/fill")
t_log "  dd wrote $((fill / MIB)) MiB of the $((free0 / MIB)) MiB free"
[ "$fill" -ge $((free0 * 9 / 10)) ] || t_fail "ENOSPC after $fill bytes although $free0 were free"
free1=$(t_free_bytes "$M")
[ "$free1" -le $((4 * MIB)) ] || t_fail "df still shows $free1 bytes free after ENOSPC"
err=$(head -c $((8 * MIB)) /dev/zero 2>&1 >"$M/more") && t_fail "8 MiB write into a full filesystem succeeded"
t_py -c "
import errno, os
fd = os.open('$M/more2', os.O_WRONLY | os.O_CREAT, 0o644)
try:
    n = 0
    while n < 8 << 20:
        n += os.write(fd, bytes(1 << 20))
    os.fsync(fd)
except OSError as e:
    assert e.errno == errno.ENOSPC, f'write into full fs: {e}'
else:
    raise SystemExit('8 MiB write + fsync into a full filesystem succeeded')
" || t_fail "write into the full filesystem did not fail with ENOSPC"
rm -f "$M/more" "$M/more2"

t_log "existing files intact on the full filesystem"
(cd "$M/keep" && sha256sum -c --quiet "$T_WORK/keep.sums") || t_fail "files damaged by ENOSPC"
cmp -n "$fill" "$M/fill" /dev/zero || t_fail "the fill file does not read back as zeros"

t_log "full filesystem unmounts and mounts again"
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
(cd "$M/keep" && sha256sum -c --quiet "$T_WORK/keep.sums") || t_fail "files damaged after remount of full fs"
[ "$(stat -c %s "$M/fill")" = "$fill" ] || t_fail "fill size after remount $(stat -c %s "$M/fill") != $fill"

t_log "deleting the fill file frees its space; a 32 MiB write then succeeds"
rm "$M/fill" || t_fail "rm of the fill file on a full filesystem"
sync -f "$M" 2>/dev/null
n=0
while [ "$(t_free_bytes "$M")" -lt $((free0 - 2 * MIB)) ]; do
	((n++ < 100)) || t_fail "free space $(t_free_bytes "$M") 10 s after deleting the fill file, expected ~$free0"
	sleep 0.1
done
dd if=/dev/urandom of="$M/after" bs=1M count=32 conv=fsync status=none || t_fail "32 MiB write after freeing space"
sha_a=$(sha256sum <"$M/after")

t_log "metadata: create empty files with long names until ENOSPC (or 60000)"
read -r cnt why < <(t_py "$top_srcdir/tests/t_helpers.py" fill-files "$M/many" 60000)
t_log "  created $cnt files, stopped by: $why"
case $why in none | ENOSPC) ;; *) t_fail "creating files failed with $why after $cnt files, expected ENOSPC" ;; esac
[ "$cnt" -ge 1000 ] || t_fail "only $cnt empty files fit on the filesystem"
t_log "  an unlink right after the metadata ENOSPC succeeds (the log keeps a reserve for deletes)"
first=$(ls "$M/many" | head -n 1)
rm "$M/many/$first" || t_fail "unlink after metadata ENOSPC failed"
cnt=$((cnt - 1))
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
c=$(ls "$M/many" | wc -l)
[ "$c" = "$cnt" ] || t_fail "after remount $c files in many/, created $cnt"
[ "$(sha256sum <"$M/after")" = "$sha_a" ] || t_fail "32 MiB file changed"
rm -rf "$M/many" || t_fail "rm -rf many/"
touch "$M/newfile" || t_fail "create after freeing metadata space"
(cd "$M/keep" && sha256sum -c --quiet "$T_WORK/keep.sums") || t_fail "files damaged at the end"
t_umount "$M"
t_mount "$T_MEMBERS" "$M"
[ -e "$M/newfile" ] && [ ! -e "$M/many" ] || t_fail "state after final remount"
t_umount "$M"
t_log "PASS"
