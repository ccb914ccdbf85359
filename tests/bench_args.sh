#!/bin/bash
# Description: dmafs-bench refuses bad arguments of every mode (unknown options, numbers
# it cannot read or that are out of range, missing values, values a mode does not take)
# with a message naming them, before it sets anything up (a number it could not read once
# made `place` fall through to the posix benchmark), and accepts fractional member sizes
# where a file fits. `dmafs-bench --help` and each `dmafs-bench MODE --help` work, and
# each mode's options in its --help are those dmafs-bench(1) documents under "Options of
# MODE", and the other way round.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_python
t_workdir
B=$top_srcdir/tools/dmafs-bench
MAN=$top_srcdir/man/dmafs-bench.1
export DMAFS_BUILDDIR=$top_builddir
MODES="posix place models host tp fair dataset samples mirror"

# refused ARGS... MESSAGE - dmafs-bench ARGS fails, prints MESSAGE, and runs no benchmark
refused() {
	local want=${!#} rc
	timeout 30 "$B" "${@:1:$#-1}" >"$T_WORK/out" 2>&1
	rc=$?
	[ $rc != 0 ] || t_fail "dmafs-bench ${*:1:$#-1}: accepted (exit 0): $(tail -3 "$T_WORK/out")"
	[ $rc != 124 ] || t_fail "dmafs-bench ${*:1:$#-1}: still running after 30 s (a benchmark started)"
	grep -qF -- "$want" "$T_WORK/out" || t_fail "dmafs-bench ${*:1:$#-1}: no message '$want': $(cat "$T_WORK/out")"
	grep -q "^dmafs-bench: [a-z]*: .*\(members of .* in /dev/shm\|random source file\)" "$T_WORK/out" &&
		t_fail "dmafs-bench ${*:1:$#-1}: a benchmark ran: $(cat "$T_WORK/out")"
	t_log "refused: ${*:1:$#-1}"
}

t_log "--help of the program and of every mode"
"$B" --help >"$T_WORK/help" 2>&1 || t_fail "dmafs-bench --help exited $?: $(cat "$T_WORK/help")"
for m in $MODES; do
	grep -q "dmafs-bench $m \[" "$T_WORK/help" || t_fail "dmafs-bench --help has no usage of $m"
	"$B" "$m" --help >"$T_WORK/help.$m" 2>&1 || t_fail "dmafs-bench $m --help exited $?: $(cat "$T_WORK/help.$m")"
	head -1 "$T_WORK/help.$m" | grep -q "^usage: dmafs-bench $m " ||
		t_fail "dmafs-bench $m --help does not start with its usage: $(head -3 "$T_WORK/help.$m")"
	grep -q "^goals" "$T_WORK/help.$m" || t_fail "dmafs-bench $m --help says nothing of goals"
done
"$B" >"$T_WORK/out" 2>&1 && t_fail "dmafs-bench without a mode exited 0"
grep -q "^usage: dmafs-bench posix" "$T_WORK/out" || t_fail "dmafs-bench without a mode: no usage: $(cat "$T_WORK/out")"

t_log "every mode's --help options are its options in dmafs-bench(1), and the other way round"
t_py - "$MAN" "$T_WORK" $MODES <<'PY' || t_fail "dmafs-bench --help and dmafs-bench(1) disagree (see above)"
import re, sys
man = open(sys.argv[1]).read().splitlines()
bad, total = [], 0
for mode in sys.argv[3:]:
    helped = {m.group(1) for m in re.finditer(r"^  (--[a-z][a-z-]*)", open(f"{sys.argv[2]}/help.{mode}").read(), re.M)}
    helped.discard("--help")
    try:
        start = man.index(f".SS Options of {mode}")
    except ValueError:
        bad.append(f"dmafs-bench(1) has no section 'Options of {mode}'")
        continue
    end = next(i for i in range(start + 1, len(man)) if man[i].startswith((".SS", ".SH")))
    tags = [man[i + 1] for i in range(start, end) if man[i] == ".TP"]
    documented = {re.sub(r"\\f[BIRP]", "", t).replace("\\-", "-").split()[1 if t.startswith(".") else 0]
                  .split("\\")[0] for t in tags}
    total += len(documented)
    for o in sorted(helped - documented):
        bad.append(f"{mode}: {o} is in its --help but not under 'Options of {mode}' in dmafs-bench(1)")
    for o in sorted(documented - helped):
        bad.append(f"{mode}: {o} is documented in dmafs-bench(1) but not in its --help")
    if not helped:
        bad.append(f"{mode}: no option read from its --help")
for b in bad:
    print(f"[bench_args] {b}")
print(f"[bench_args] {total} options of {len(sys.argv) - 3} modes compared")
sys.exit(1 if bad else 0)
PY

refused no-such-benchmark "unknown benchmark 'no-such-benchmark'"

# posix
refused posix --no-such-option "posix: unknown option '--no-such-option'"
refused posix extra "posix: unexpected argument 'extra'"
refused posix --members 0 "posix: --members must be a whole number from 1 to 16 (got '0')"
refused posix --members 17 "posix: --members must be a whole number from 1 to 16 (got '17')"
refused posix --members=x "posix: --members must be a whole number from 1 to 16 (got 'x')"
refused posix --member-gb 1,5 "posix: --member-gb must be a number of GiB (got '1,5')"
refused posix --member-gb 0.25 "posix: --member-gb must be at least 0.5 (got '0.25')"
refused posix --file-gb 0.01 "posix: --file-gb must be at least 0.0625 (got '0.01')"
refused posix --rounds 100 "posix: --rounds must be a whole number from 1 to 99 (got '100')"
refused posix --rounds "posix: --rounds needs a value (R)"
refused posix --out --keep "posix: --out needs a value (DIR)"
refused posix --rounds= "posix: --rounds needs a value (R)"
refused posix --keep=1 "posix: --keep takes no value (got '--keep=1')"
refused posix --members 2 --member-gb 1.5 --file-gb 4 "a 4 GiB file does not fit comfortably on 2 x 1.5 GiB members"

# place
refused place --member-gb x "place: --member-gb must be a number of GiB (got 'x')"
refused place --member-gb 1,5 "place: --member-gb must be a number of GiB (got '1,5')"
refused place --file-gb -2 "place: --file-gb must be a number of GiB (got '-2')"
refused place --members 4,a "place: --members wants member counts such as 8 or 4,8"
refused place --members 0 "place: --members wants member counts such as 8 or 4,8"
refused place --members 65 "place: --members wants member counts such as 8 or 4,8, each 1 to 64 (got '65')"
refused place --member-gb 0.25 "place: --member-gb must be at least 0.5"
refused place --members 16 --member-gb 0.5 --file-gb 8 "does not fit 16 members of 0.5 GiB"
refused place --members 1 --member-gb 1.5 --file-gb 8 "does not fit 1 members of 1.5 GiB"
refused place --target gpu "place: --target must be host, cuda:N or hip:N (got 'gpu')"
refused place --file-gb "place: --file-gb needs a value (G)"
refused place --no-such-option "place: unknown option '--no-such-option'"

# models
refused models --member-gb x "models: --member-gb must be a number of GiB (got 'x')"
refused models --members 1 "models: --members must be a whole number from 2 to 16 (got '1')"
refused models --scale 0.5 "models: --scale must be at least 1 (got '0.5')"
refused models --runs 0 "models: --runs must be a whole number of at least 1 (got '0')"
refused models --peer-threads x "models: --peer-threads must be a whole number of at least 1 (got 'x')"
refused models --device gpu "models: --device must be cuda:N or cpu (got 'gpu')"
refused models --methods dmafs.load,nosuch "models: --methods wants methods separated by commas"
refused models --tier-fill later "models: --tier-fill must be now or idle (got 'later')"
refused models --out "models: --out needs a value (DIR)"
refused models --verify "models: unknown option '--verify'"

# host
refused host --member-gb x "host: --member-gb must be a number of GiB (got 'x')"
refused host --members 17 "host: --members must be a whole number from 1 to 16 (got '17')"
refused host --rounds 0 "host: --rounds must be a whole number of at least 1 (got '0')"
refused host --file-gb 0.01 "host: --file-gb must be at least 0.0625 (got '0.01')"
refused host --members 1 --member-gb 0.5 --file-gb 2 "host: the file does not fit the members comfortably"
refused host --dmafs-opts "host: --dmafs-opts needs a value (OPTS)"
refused host --no-such-option "host: unknown option '--no-such-option'"

# tp
refused tp --gpus x "tp: --gpus must be a whole number of at least 1 (got 'x')"
refused tp --gpus 0 "tp: --gpus must be a whole number of at least 1 (got '0')"
refused tp --members 1 "tp: --members must be a whole number from 2 to 16 (got '1')"
refused tp --member-gb 1e3 "tp: --member-gb must be a number of GiB (got '1e3')"
refused tp --scale 0.5 "tp: --scale must be at least 1 (got '0.5')"
refused tp --model "tp: --model needs a value (NAME|FILE.json)"
refused tp --no-such-option "tp: unknown option '--no-such-option'"
refused tp --ep=1 "tp: --ep takes no value (got '--ep=1')"
refused tp --verify=yes "tp: --verify takes no value (got '--verify=yes')"
refused tp --ep "tp: --ep wants a mixture-of-experts model, and qwen2.5-7b has no experts"
refused tp --ep --model qwen3-0.6b "tp: --ep wants a mixture-of-experts model, and qwen3-0.6b has no experts"
refused tp --ep --model mixtral-8x7b --gpus 3 "tp: --ep: the 8 experts of mixtral-8x7b do not divide over 3 ranks (--gpus)"
refused tp --ep --model qwen3-30b-a3b --gpus 6 "tp: --ep: the 128 experts of qwen3-30b-a3b do not divide over 6 ranks (--gpus)"

# fair
refused fair --members 0 "fair: --members must be a whole number from 1 to 64 (got '0')"
refused fair --member-gb 1.5 "fair: --member-gb must be a whole number of GiB, at least 1 (got '1.5')"
refused fair --target gpu "fair: --target must be host, cuda:N or hip:N (got 'gpu')"
refused fair --rounds x "fair: --rounds must be a whole number of at least 1 (got 'x')"
refused fair --scale x "fair: --scale must be a number (got 'x')"
refused fair --dmafs-opts "fair: --dmafs-opts needs a value (OPTS)"
refused fair --no-such-option "fair: unknown option '--no-such-option'"

# dataset
refused dataset --members 1 "dataset: --members must be a whole number from 2 to 16 (got '1')"
refused dataset --files 0 "dataset: --files must be a whole number of at least 1 (got '0')"
refused dataset --threads x "dataset: --threads must be a whole number of at least 1 (got 'x')"
refused dataset --big-mb 4 "dataset: --big-mb must be a whole number of at least 8 (got '4')"
refused dataset --member-gb 0.1 "dataset: --member-gb must be at least 0.5 (got '0.1')"
refused dataset --skip ls,nosuchrow "dataset: --skip has unknown row(s) nosuchrow"
refused dataset --scale 10,x "dataset: --scale wants file counts separated by commas"
refused dataset --scale 1000,10 "dataset: --scale wants growing file counts of at least 1"
refused dataset --mkfs-opts "dataset: --mkfs-opts needs a value (OPTS)"
refused dataset --no-such-option "dataset: unknown option '--no-such-option'"
# samples
refused samples --members 17 "samples: --members must be a whole number from 2 to 16 (got '17')"
refused samples --member-gb 0.2 "samples: --member-gb must be at least 0.5 (got '0.2')"
refused samples --files x "samples: --files must be a whole number of at least 1 (got 'x')"
refused samples --file-kb 0 "samples: --file-kb must be a whole number from 1 to 65536 (got '0')"
refused samples --batch 5000 "samples: --batch must be a whole number from 1 to 4096 (got '5000')"
refused samples --batches 2 "samples: --batches must be a whole number of at least 3 (got '2')"
refused samples --shards 0 "samples: --shards must be a whole number of at least 1 (got '0')"
refused samples --device gpu0 "samples: --device must be auto, cpu or cuda:N (got 'gpu0')"
refused samples --skip files,nosuchrow "samples: --skip has unknown row(s) nosuchrow"
refused samples --members 2 --member-gb 0.5 "samples: the files and shards"
refused samples --dmafs-opts "samples: --dmafs-opts needs a value (OPTS)"
refused samples --no-such-option "samples: unknown option '--no-such-option'"
t_log "PASS"
