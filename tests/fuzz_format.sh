#!/bin/bash
# Description: short fuzz run of the on-disk format decoders and of log replay on hostile
# records (superblock, log half header, batch header, records -> meta_apply, the snapshot
# of the replayed state replayed again) and of place_validate, through the standalone
# driver tests/fuzz_format (built-in seeds made with the fmt_*_encode functions, mutated by
# bit flips, truncations and length-field edits). Exit 0 if nothing crashed or broke an
# invariant; a failure prints the broken invariant (rerun with -k to collect the inputs).
#
# Usage: fuzz_format.sh                        (make check: ~20000 mutations, a few seconds)
#        FUZZ_N=1000000 FUZZ_SEED=7 fuzz_format.sh   a longer driver run
#
# A long run with libFuzzer and AddressSanitizer (clang; the core built with clang too):
#     clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZING -D_GNU_SOURCE \
#         -DFUSE_USE_VERSION=312 -Ifs -Ilib $(pkg-config --cflags fuse3) tests/fuzz_format.c \
#         $(ls fs/*/*.c | grep -v fs/daemon/main.c) lib/gpu.c lib/gpu-log.c lib/populate.c \
#         -luring -lxxhash -lpthread -ldl -lmount -o fuzz_fmt
#     tests/fuzz_format -c corpus              # seed corpus from the driver
#     ./fuzz_fmt -max_len=16384 -timeout=10 -rss_limit_mb=4096 -max_total_time=3600 corpus
# (FUZZ_KEEP_GOING=1 reports broken invariants without stopping the run.)
# (crashes land in crash-* files; replay one with ./fuzz_fmt crash-... or with the
# driver: tests/fuzz_format -n 0 crash-...).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
DRIVER=$top_builddir/tests/fuzz_format
[ -x "$DRIVER" ] || { echo "fuzz_format.sh: SKIP: $DRIVER not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/dmafs-fuzz-fmt.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
echo "[fuzz_format] ${FUZZ_N:-20000} mutations (seed ${FUZZ_SEED:-1})"
(cd "$dir" && "$DRIVER" -n "${FUZZ_N:-20000}" -s "${FUZZ_SEED:-1}")
rc=$?
[ $rc = 0 ] || { echo "[fuzz_format] FAIL: driver exited $rc (crash or broken invariant above)"; exit 1; }
echo "[fuzz_format] PASS"
