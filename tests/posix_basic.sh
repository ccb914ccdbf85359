#!/bin/bash
# Description: basic POSIX semantics on a 4-member dmafs over image files: regular files,
# dirs, symlinks (Hugging Face snapshot layout), hard links, unlink of open files, times,
# chmod/chown, truncate, sparse files, mmap, statfs/df/du, /proc/mounts entry.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
. "$(dirname "$0")/t_basic.sh"
t_require_root_fuse
t_require_python
t_workdir
t_images 4 256M
t_mkfs "${T_IMGS[@]}"
t_mount "$T_MEMBERS" "$T_WORK/mnt"
t_basic_suite "$T_WORK/mnt" "$T_MEMBERS" $((4 * 256 * 1024 * 1024))
t_log "unmount: daemon exits"
t_umount "$T_WORK/mnt"
t_log "PASS"
