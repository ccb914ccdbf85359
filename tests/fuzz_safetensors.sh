#!/bin/bash
# Description: short fuzz run of the safetensors header and index parsers: a corpus of
# malformed headers (each refused without a crash) and a few thousand random mutations of
# valid headers, through the standalone driver tests/fuzz_safetensors. Exit 0 if nothing
# crashed or broke an invariant.
#
# Usage: fuzz_safetensors.sh                 (make check)
#        fuzz_safetensors.sh --corpus DIR    write the seed corpus to DIR and exit
#        FUZZ_N=200000 fuzz_safetensors.sh   a longer driver run (FUZZ_SEED to vary it)
#
# A long run with libFuzzer and AddressSanitizer (clang):
#     clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZING -Ilib \
#         tests/fuzz_safetensors.c lib/st-parse.c lib/st-json.c -o fuzz_st
#     tests/fuzz_safetensors.sh --corpus corpus
#     ./fuzz_st -max_len=65536 -timeout=10 -rss_limit_mb=4096 -max_total_time=3600 corpus
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
export LC_ALL=C # ${#s} counts bytes
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
DRIVER=$top_builddir/tests/fuzz_safetensors

if [ "$1" = --corpus ]; then
	[ -n "$2" ] || { echo "usage: $0 --corpus DIR"; exit 1; }
	dir=$2
	mkdir -p "$dir" || exit 1
else
	[ -x "$DRIVER" ] || { echo "fuzz_safetensors.sh: SKIP: $DRIVER not built"; exit 77; }
	dir=$(mktemp -d "${TMPDIR:-/tmp}/dmafs-fuzz-st.XXXXXX") || exit 1
	trap 'rm -rf "$dir"' EXIT
fi

# st NAME JSON [DATA_BYTES [HEADER_LEN]] - a safetensors file: 8-byte little-endian
# length (of JSON unless given), the JSON, DATA_BYTES zero bytes.
st() {
	local name=$1 json=$2 data=${3:-0} n=${4:-${#2}} i
	{
		for ((i = 0; i < 8; i++)); do
			printf "\\x$(printf %02x $(((n >> (8 * i)) & 255)))"
		done
		printf '%s' "$json"
		head -c "$data" /dev/zero
	} >"$dir/$name"
}
T='"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}'

# Valid seeds: the mutations start from these.
st ok-model '{"__metadata__":{"format":"pt"},'"$T"',"b\u00e9":{"dtype":"F4","shape":[3],"data_offsets":[12,14]},"c":{"dtype":"U8","shape":[0],"data_offsets":[14,14]},"s":{"dtype":"F32","shape":[],"data_offsets":[16,20]}}    ' 20
st ok-empty '{}      '
st ok-index '{"metadata":{"total_size":24},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}'
# Malformed: one broken rule each.
st bad-short '' 0 0
printf '\x02\x00' >"$dir/bad-tiny"
st bad-len-huge '{}' 0 104857601
st bad-len-past '{}' 0 3
st bad-array '[]'
st bad-trunc '{"a":'
st bad-trail "{$T}x"
st bad-comma "{$T,}" 12
st bad-utf8 $'{"\xff":{}}'
st bad-overlong $'{"\xc0\x80":{}}'
st bad-surrogate-raw $'{"\xed\xa0\x80":{}}'
st bad-lone-surrogate '{"\ud800":{}}'
st bad-ctrl $'{"a\tb":{}}'
st bad-escape '{"a\x":{}}'
st bad-nul '{"a\u0000":{}}'
st bad-dup "{$T,$T}" 12
st bad-dup-key '{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 1
st bad-dup-meta '{"__metadata__":{},"__metadata__":{}}'
st bad-meta-val '{"__metadata__":{"k":1}}'
st bad-dtype '{"a":{"dtype":"BF17","shape":[1],"data_offsets":[0,2]}}' 2
st bad-neg-dim '{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}'
st bad-float-dim '{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}' 1
st bad-big-dim '{"a":{"dtype":"U8","shape":[9007199254740992],"data_offsets":[0,1]}}' 1
st bad-dims '{"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}}' 1
st bad-elems '{"a":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,1]}}' 1
st bad-offsets '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}' 2
st bad-backwards '{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}' 2
st bad-outside '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}' 3
st bad-size "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,10]}}" 12
st bad-f4 '{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}' 1
st bad-overlap "{$T,\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[10,14]}}" 14
st bad-missing '{"a":{"dtype":"U8","data_offsets":[0,1]}}' 1
st bad-unknown-key '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}' 1
st bad-leading-zero '{"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}}' 1
st bad-index-abs '{"weight_map":{"a":"/etc/passwd"}}'
st bad-index-dotdot '{"weight_map":{"a":"x/../../y"}}'
st bad-index-empty '{"weight_map":{}}'
st bad-index-deep "{\"m\":$(printf '[%.0s' {1..200})$(printf ']%.0s' {1..200}),\"weight_map\":{\"a\":\"b\"}}"

[ "$1" = --corpus ] && { echo "corpus: $(ls "$dir" | wc -l) files in $dir"; exit 0; }

echo "[fuzz_safetensors] $(ls "$dir" | wc -l) corpus files, ${FUZZ_N:-5000} mutations"
"$DRIVER" -n "${FUZZ_N:-5000}" -s "${FUZZ_SEED:-1}" "$dir"/*
rc=$?
[ $rc = 0 ] || { echo "[fuzz_safetensors] FAIL: driver exited $rc (crash or broken invariant above)"; exit 1; }
echo "[fuzz_safetensors] PASS"
