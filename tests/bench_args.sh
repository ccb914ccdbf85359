#!/bin/bash
# Description: dmafs-bench refuses bad arguments with a message naming them, before it
# sets anything up (a number it could not read once made `place` fall through to the
# posix benchmark), and accepts fractional member sizes where a file fits.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_workdir
B=$top_srcdir/tools/dmafs-bench
export DMAFS_BUILDDIR=$top_builddir

# refused ARGS... MESSAGE - dmafs-bench ARGS fails, prints MESSAGE, and runs no benchmark
refused() {
	local want=${!#} rc
	timeout 30 "$B" "${@:1:$#-1}" >"$T_WORK/out" 2>&1
	rc=$?
	[ $rc != 0 ] || t_fail "dmafs-bench ${*:1:$#-1}: accepted (exit 0): $(tail -3 "$T_WORK/out")"
	[ $rc != 124 ] || t_fail "dmafs-bench ${*:1:$#-1}: still running after 30 s (a benchmark started)"
	grep -q -- "$want" "$T_WORK/out" || t_fail "dmafs-bench ${*:1:$#-1}: no message '$want': $(cat "$T_WORK/out")"
	grep -q "^dmafs-bench posix: \|^dmafs-bench: place: a \|^dmafs-bench: fair: writing" "$T_WORK/out" &&
		t_fail "dmafs-bench ${*:1:$#-1}: a benchmark ran: $(cat "$T_WORK/out")"
	t_log "refused: ${*:1:$#-1}"
}

refused place --member-gb x "place: --member-gb must be a number of GiB (got 'x')"
refused place --member-gb 1,5 "place: --member-gb must be a number of GiB (got '1,5')"
refused place --file-gb -2 "place: --file-gb must be a number of GiB (got '-2')"
refused place --members 4,a "place: --members wants member counts"
refused place --members 0 "place: --members wants member counts"
refused place --member-gb 0.25 "place: --member-gb must be at least 0.5"
refused place --members 16 --member-gb 0.5 --file-gb 8 "does not fit 16 members of 0.5 GiB"
refused place --members 1 --member-gb 1.5 --file-gb 8 "does not fit 1 members of 1.5 GiB"
refused place --no-such-option "place: unknown option '--no-such-option'"
refused models --member-gb x "models: --member-gb must be a number of GiB (got 'x')"
refused tp --gpus x "argument --gpus: invalid int value"
refused tp --no-such-option "unrecognized arguments: --no-such-option"
refused host --member-gb x "host: --member-gb must be a number of GiB"
refused fair --members 0 "fair: --members wants a positive number (got '0')"
refused fair --member-gb 1.5 "fair: --member-gb wants a whole number of GiB (got '1.5')"
refused fair --target gpu "fair: --target must be host, cuda:N or hip:N (got 'gpu')"
refused fair --rounds x "fair: --rounds wants a positive number (got 'x')"
refused fair --no-such-option "fair: unknown option '--no-such-option'"
refused dataset --members 1 "dmafs-bench-dataset: --members must be from 2 to 16"
refused dataset --files 0 "dmafs-bench-dataset: --files must be at least 1"
refused dataset --skip ls,nosuchrow "unknown row(s) nosuchrow"
refused dataset --scale 10,x "want file counts separated by commas"
refused dataset --no-such-option "unrecognized arguments: --no-such-option"
refused no-such-benchmark "unknown benchmark 'no-such-benchmark'"
t_log "PASS"
