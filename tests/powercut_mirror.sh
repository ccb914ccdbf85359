#!/bin/bash
# Description: tests/powercut.sh over the mirror data profile (mkfs.dmafs --data mirror,
# members twice the size for the same room): the same cuts, the same durability promises,
# both copies' checksums clean at every cut.
T_MKFS_DATA=mirror POWERCUT_IMG_SIZE=512M exec bash "$(dirname "$0")/powercut.sh" "$@"
