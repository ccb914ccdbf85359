#!/bin/bash
# Description: tests/crash_kill.sh over the mirror data profile (mkfs.dmafs --data mirror): the
# same crashes, the same durability promises, every copy's checksums clean after each.
T_MKFS_DATA=mirror exec bash "$(dirname "$0")/crash_kill.sh" "$@"
