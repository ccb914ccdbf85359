#!/bin/bash
# Description: structure-aware fuzz run of the metadata a mount reads, under AddressSanitizer
# and UndefinedBehaviorSanitizer: tests/fuzz_meta sets fields of superblocks, log headers,
# batches and records to boundary values and to each other's values, splices, duplicates
# and reorders records, computes every checksum again so the input reaches the checks behind
# them, and puts each input through the mount sequence (members_open, journal_open replay,
# meta_cleanup, the extent check, compaction and replay again), checking its invariants. It
# first runs its regression inputs (once findings, now each expected to stop at a given
# check), then FUZZ_N mutated inputs, and prints how many passed the checksum gate, reached
# replay, were accepted, and which check rejected the rest. Exit 0 if nothing crashed, no
# sanitizer reported and no invariant broke; 77 if configure found no sanitizers.
#
# Usage: tests/fuzz_meta.sh                       make check: 3000 inputs, a few seconds
#        FUZZ_N=1000000 FUZZ_SEED=7 tests/fuzz_meta.sh   a long run: about 20 minutes
#                                                 on 2 CPUs (some 800 inputs a second);
#                                                 run other seeds side by side for more
#        FUZZ_KEEP_GOING=1 ...                    report every broken invariant, not the first
# A finding prints the command that runs its input again: tests/fuzz_meta -s SEED -i INDEX,
# with -v to describe the input and -d DIR to write its member images for dmafs-fsck.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
DRIVER=$top_builddir/tests/fuzz_meta
if [ ! -x "$DRIVER" ]; then
	echo "fuzz_meta.sh: SKIP: $DRIVER not built: configure found that the compiler does not link with -fsanitize=address,undefined and -Wl,--wrap (see config.log)"
	exit 77
fi
echo "[fuzz_meta] ${FUZZ_N:-3000} inputs (seed ${FUZZ_SEED:-1})"
"$DRIVER" ${FUZZ_KEEP_GOING:+-k} -n "${FUZZ_N:-3000}" -s "${FUZZ_SEED:-1}"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "[fuzz_meta] FAIL: driver exited $rc (crash, sanitizer report or broken invariant above)"; exit 1; }
echo "[fuzz_meta] PASS"
