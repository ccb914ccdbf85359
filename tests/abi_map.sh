#!/bin/bash
# Description: libdmafs exports exactly the calls lib/libdmafs.map names, each in the
# version node that names it (nm -D of the built lib/.libs/libdmafs.so.0): a symbol missing
# from the map, or named there but not exported, fails. The map names every symbol (no
# patterns; only "local: *;"), each once, in nodes DMAFS_<major>.<minor> that each inherit
# the one before, the newest no later than the header's DMAFS_VERSION_*; every call
# declared in lib/dmafs.h is in it and every call in it is declared; the soname is
# libdmafs.so.0, and the age of -version-info is the number of nodes after DMAFS_0.1.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
MAP=$top_srcdir/lib/libdmafs.map
HDR=$top_srcdir/lib/dmafs.h
VHDR=$top_builddir/lib/dmafs-version.h
SO=$top_builddir/lib/.libs/libdmafs.so.0
for tool in nm readelf; do
	command -v $tool >/dev/null || t_skip "$tool not installed (Debian package binutils)"
done
[ -e "$SO" ] || t_skip "$SO not built (configured with --disable-shared?)"
t_workdir
errors=0
bad() {
	echo "[$T_NAME] $*"
	errors=$((errors + 1))
}

# The map as "node NAME", "parent NAME PARENT" and "SECTION NODE SYMBOL" lines: comments
# dropped, then one token a line.
awk '{
	line = $0; out = ""
	while (line != "") {
		if (incomment) {
			i = index(line, "*/")
			if (!i) break
			line = substr(line, i + 2); incomment = 0
		} else {
			i = index(line, "/*")
			if (!i) { out = out line; break }
			out = out substr(line, 1, i - 1); line = substr(line, i + 2); incomment = 1
		}
	}
	print out
}' "$MAP" | sed 's/[{};:]/ & /g' | tr -s ' \t' '\n\n' | awk '
	$0 == "" { next }
	$0 == "{" { node = prev; depth = 1; sect = ""; print "node", node; next }
	$0 == "}" { depth = 0; prev = ""; next }
	depth == 0 && $0 == ";" { if (prev != "") print "parent", node, prev; prev = ""; next }
	depth == 0 { prev = $0; next }
	$0 == ":" { sect = prev; prev = ""; next }
	$0 == ";" { print (sect == "" ? "none" : sect), node, prev; prev = ""; next }
	{ prev = $0 }' >"$T_WORK/map"

awk '$1 == "global" { print $3, $2 }' "$T_WORK/map" | sort >"$T_WORK/map.syms"
awk '$1 == "node" { print $2 }' "$T_WORK/map" >"$T_WORK/map.nodes"
[ -s "$T_WORK/map.syms" ] || t_fail "no global symbols read from $MAP"

t_log "the map names each symbol once, without patterns, in its node's global section"
while read -r sect node sym; do
	case $sect in
	global)
		[[ $sym =~ ^dmafs_[a-z0-9_]+$ ]] ||
			bad "$MAP: '$sym' in $node is not a plain dmafs_ name (no patterns: name each call)"
		;;
	local)
		[ "$sym" = "*" ] || bad "$MAP: local '$sym' in $node: only 'local: *;' belongs there"
		;;
	node | parent) ;;
	*) bad "$MAP: '$sym' in $node outside a global: or local: section" ;;
	esac
done <"$T_WORK/map"
awk '{ print $1 }' "$T_WORK/map.syms" | uniq -d | while read -r sym; do
	echo "[$T_NAME] $MAP names $sym more than once"
done | tee "$T_WORK/dups"
[ -s "$T_WORK/dups" ] && errors=$((errors + 1))
grep -q '^local [^ ]* \*$' "$T_WORK/map" || bad "$MAP has no 'local: *;': every other symbol would be exported"

t_log "nodes DMAFS_<major>.<minor>, each inheriting the one before"
prev=
while read -r node; do
	[[ $node =~ ^DMAFS_[0-9]+\.[0-9]+$ ]] || bad "$MAP: node $node is not named DMAFS_<major>.<minor>"
	parent=$(awk -v n="$node" '$1 == "parent" && $2 == n { print $3 }' "$T_WORK/map")
	[ "$parent" = "$prev" ] || bad "$MAP: node $node inherits '${parent:-nothing}', expected '${prev:-nothing}'"
	prev=$node
done <"$T_WORK/map.nodes"
newest=$prev
first=$(head -n 1 "$T_WORK/map.nodes")
[ "$first" = DMAFS_0.1 ] || bad "$MAP: the first node is $first, not DMAFS_0.1"
if [ -r "$VHDR" ]; then
	major=$(sed -n 's/^#define DMAFS_VERSION_MAJOR \([0-9]*\)$/\1/p' "$VHDR")
	minor=$(sed -n 's/^#define DMAFS_VERSION_MINOR \([0-9]*\)$/\1/p' "$VHDR")
	nmaj=${newest#DMAFS_} nmin=${nmaj#*.} nmaj=${nmaj%.*}
	if [ -z "$major" ] || [ -z "$minor" ]; then
		bad "$VHDR: no DMAFS_VERSION_MAJOR or _MINOR"
	elif ((nmaj > major || (nmaj == major && nmin > minor))); then
		bad "$MAP: newest node $newest is later than this version, $major.$minor (configure.ac)"
	fi
else
	bad "$VHDR not made (configure makes it)"
fi

t_log "$SO exports the map's symbols, each in its node, and nothing else"
nm -D --defined-only --with-symbol-versions "$SO" >"$T_WORK/nm" || t_fail "nm -D $SO failed"
# Version nodes are absolute symbols (type A) named like the node; calls are sym@@NODE.
awk '$2 == "A" { next } { print $3 }' "$T_WORK/nm" | sed 's/@@*/ /' | sort >"$T_WORK/so.syms"
awk '$2 == "A" { print $3 }' "$T_WORK/nm" | sed 's/@.*//' | sort >"$T_WORK/so.nodes"
while read -r sym node; do
	[ -n "$node" ] || node="(no version)"
	want=$(awk -v s="$sym" '$1 == s { print $2 }' "$T_WORK/map.syms")
	if [ -z "$want" ]; then
		bad "$sym is exported ($node) but not named in $MAP"
	elif [ "$want" != "$node" ]; then
		bad "$sym is exported in $node but $MAP names it in $want"
	fi
done <"$T_WORK/so.syms"
while read -r sym node; do
	grep -q "^$sym " "$T_WORK/so.syms" || bad "$sym is named in $MAP ($node) but $SO does not export it"
done <"$T_WORK/map.syms"
sort "$T_WORK/map.nodes" | diff - "$T_WORK/so.nodes" >/dev/null ||
	bad "version nodes of $SO ($(echo $(cat "$T_WORK/so.nodes"))) differ from the map's ($(echo $(cat "$T_WORK/map.nodes")))"

t_log "every call declared in lib/dmafs.h is in the map, and every call of the map is declared there"
grep -E '^[a-z][a-z0-9_ ]*[ *]dmafs_[a-z0-9_]+\(' "$HDR" | grep -oE 'dmafs_[a-z0-9_]+\(' |
	tr -d '(' | sort -u >"$T_WORK/hdr.syms"
[ -s "$T_WORK/hdr.syms" ] || t_fail "no dmafs_* declarations read from $HDR"
awk '{ print $1 }' "$T_WORK/map.syms" | sort -u | comm -3 - "$T_WORK/hdr.syms" >"$T_WORK/hdr.diff"
while IFS= read -r line; do
	case $line in
	$'\t'*) bad "${line#$'\t'} is declared in lib/dmafs.h but not named in $MAP" ;;
	*) bad "$line is named in $MAP but not declared in lib/dmafs.h" ;;
	esac
done <"$T_WORK/hdr.diff"

t_log "soname libdmafs.so.0; -version-info age = nodes after DMAFS_0.1"
soname=$(readelf -d "$SO" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = libdmafs.so.0 ] || bad "soname of $SO is '$soname', not libdmafs.so.0"
real=$(basename "$(readlink -f "$SO")")
age=$(echo "$real" | sed -n 's/^libdmafs\.so\.0\.\([0-9]*\)\.[0-9]*$/\1/p')
nodes=$(wc -l <"$T_WORK/map.nodes")
if [ -z "$age" ]; then
	bad "$SO is $real, not libdmafs.so.0.AGE.REVISION"
elif [ "$age" != $((nodes - 1)) ]; then
	bad "$real: -version-info age $age, but $MAP has $nodes nodes: each node after DMAFS_0.1 adds one to current and age (lib/lib.am)"
fi

[ $errors = 0 ] || t_fail "$errors difference(s) between $MAP and the library (see above)"
t_log "$(wc -l <"$T_WORK/map.syms") symbols in $nodes nodes, newest $newest, $real"
t_log "PASS"
