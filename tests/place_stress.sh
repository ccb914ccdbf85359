#!/bin/bash
# Description: placed bytes are file bytes: placements (host buffers filled with 0xEE
# before each call) and a prefetcher race a writer that rewrites a 4 MiB file, truncates
# it to 0 first now and then, rewrites ranges and punches holes, with write-behind on
# (the default); every sector of every placement's reported bytes must be a stamp of that
# sector whole, or zeros. Without the warm tier, and with tier=256M (prefetches and
# placements filling it). PLACE_STRESS_SECONDS (default 8) is each round's length.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
PS=$top_builddir/tests/place_stress
[ -x "$PS" ] || t_skip "tests/place_stress not built"
secs=${PLACE_STRESS_SECONDS:-8}
t_workdir
M=$T_WORK/mnt
t_images 3 256M
t_mkfs "${T_IMGS[@]}"

for opts in "" tier=256M; do
	t_log "${opts:-no tier}: 2 placers and a prefetcher against a rewriting writer for $secs s"
	t_mount "$T_MEMBERS" "$M" $opts
	out=$("$PS" "$M/f" "$secs" 2 2>&1) || t_fail "${opts:-no tier}: $out"
	t_log "  $out"
	t_umount "$M"
done
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
