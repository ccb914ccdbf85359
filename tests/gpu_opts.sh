#!/bin/bash
# Description: the mount options gpu_setup=mount|first_use and p2p=auto|off|force. Each
# accepted value mounts and places into host memory; a bad value is refused (exit 1, one
# line naming the option and its values, nothing mounted). gpu_setup=mount (and the
# default) set up every GPU runtime at mount: without a GPU the daemon logs, with -o debug,
# why no CUDA and no HIP staging was prepared; with first_use nothing is tried at mount.
# Where a GPU answers, dmafs-check shows its staging ready (mount) or left to the first
# use, and p2p=off names the option as why the p2p path is not used. Without CUDA the p2p
# choice has no path to change: dmafs-check gives every p2p value the same CUDA reason.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
CHECK=$top_builddir/tools/dmafs-check
LOAD=$top_builddir/tools/dmafs-load
t_workdir
t_images 2 128M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
head -c 3000000 /dev/urandom >"$T_WORK/ref" || t_fail "urandom"

# field TARGET KEY - KEY ("path" or "why") of TARGET's placement in $T_WORK/check.json
field() {
	t_py -c 'import json, sys; print(json.load(open(sys.argv[1]))["mount"]["placement"][sys.argv[2]][sys.argv[3]])' \
		"$T_WORK/check.json" "$1" "$2" || t_fail "dmafs-check --json: no placement.$1.$2: $(cat "$T_WORK/check.json")"
}

# mnt OPTS - mount in the foreground with OPTS,debug; host placement works; dmafs-check
# --json of the mount in $T_WORK/check.json
mnt() {
	t_mount_fg "$T_MEMBERS" "$M" "debug${1:+,$1}"
	cp "$T_WORK/ref" "$M/f" || t_fail "-o $1: copy in"
	"$LOAD" --target host --verify -q "$M/f" >"$T_WORK/load.out" 2>&1 ||
		t_fail "-o $1: dmafs-load --target host --verify: $(cat "$T_WORK/load.out")"
	"$CHECK" --json "$M" >"$T_WORK/check.json" 2>&1 || t_fail "-o $1: dmafs-check --json exited $?"
}

# umnt - unmount and wait for the foreground daemon's exit status (0)
umnt() {
	t_umount "$M"
	wait "$T_DAEMON_PID" || t_fail "the daemon exited $? after the unmount"
}

# gpus - the GPU targets whose runtime loads here (dmafs-check's report, off any mount)
gpus=$("$CHECK" --json | t_py -c 'import json, sys; g = json.load(sys.stdin)["gpus"]; print(" ".join(k for k in ("cuda", "hip") if g[k]["present"]))') ||
	t_fail "dmafs-check --json: no gpus section"
t_log "GPU runtimes that load here: ${gpus:-none}"

for opt in "" gpu_setup=mount gpu_setup=first_use; do
	t_log "${opt:-no gpu_setup option (default: mount)}: mounts, places into host memory"
	mnt "$opt"
	if [ "$opt" = gpu_setup=first_use ]; then
		# after the mount, a placement and dmafs-check (with gpu_setup=mount the lines
		# are there by then): no runtime was tried at mount
		grep -E "placement: no (CUDA|HIP) staging prepared" "$T_DAEMON_ERR" &&
			t_fail "gpu_setup=first_use: the daemon set up GPU runtimes at mount"
		for t in $gpus; do
			case $(field "$t" why) in *"staging set up at first use"*) ;; *) t_fail "gpu_setup=first_use: $t: $(field "$t" why)" ;; esac
		done
	else
		for t in cuda hip; do
			case " $gpus " in
			*" $t "*)
				n=0
				until case $(field "$t" why) in *"staging ready"*) true ;; *) false ;; esac; do
					((n++ < 100)) || t_fail "${opt:-default}: $t staging not ready 10 s after mount: $(field "$t" why)"
					sleep 0.1
					"$CHECK" --json "$M" >"$T_WORK/check.json" 2>&1
				done
				t_log "  $t: $(field "$t" why)"
				;;
			*)
				T=$(echo "$t" | tr a-z A-Z)
				n=0
				until grep -q "placement: no $T staging prepared: " "$T_DAEMON_ERR"; do
					((n++ < 100)) || t_fail "${opt:-default}: no GPU runtime, and the daemon did not log why no $T staging was prepared: $(grep -i staging "$T_DAEMON_ERR")"
					sleep 0.1
				done
				why=$(grep -m1 "placement: no $T staging prepared: " "$T_DAEMON_ERR")
				[ "$(field "$t" path)" = none ] || t_fail "$t: path $(field "$t" path) without a runtime"
				case $why in *"$(field "$t" why)"*) ;; *) t_fail "$t: the daemon logs '$why', dmafs-check says '$(field "$t" why)'" ;; esac
				t_log "  daemon: $why"
				;;
			esac
		done
	fi
	umnt
done

for v in auto off force; do
	t_log "p2p=$v: mounts, places into host memory"
	mnt "p2p=$v"
	path=$(field cuda path)
	why=$(field cuda why)
	t_log "  CUDA placements: path $path: $why"
	case " $gpus " in
	*" cuda "*)
		[ "$path" = p2p ] || [ "$path" = staged ] || t_fail "p2p=$v: CUDA path $path"
		if [ $v = off ]; then
			[ "$path" = staged ] || t_fail "p2p=off: CUDA path $path"
			case $why in *"p2p disabled by the mount option p2p=off"*) ;; *) t_fail "p2p=off: why: $why" ;; esac
		fi
		;;
	*)
		[ "$path" = none ] || t_fail "p2p=$v without CUDA: path $path"
		[ -n "$cuda_why" ] || cuda_why=$why
		[ "$why" = "$cuda_why" ] || t_fail "p2p=$v without CUDA: '$why', with the other values '$cuda_why'"
		;;
	esac
	umnt
done

t_log "bad values are refused with the option and the values it takes"
refused() {
	local rc err
	"$DMAFS" -o "$1" "$T_MEMBERS" "$M" >"$T_WORK/out" 2>"$T_WORK/err"
	rc=$?
	err=$(cat "$T_WORK/err")
	[ $rc = 1 ] || t_fail "-o $1: exit $rc, expected 1: $err"
	[ "$err" = "$2" ] || t_fail "-o $1: message '$err', expected '$2'"
	t_is_mounted "$M" && t_fail "-o $1: mounted although refused"
	t_log "  -o $1: $err"
}
refused gpu_setup=later "dmafs: gpu_setup=later: want mount or first_use"
refused gpu_setup= "dmafs: gpu_setup=: want mount or first_use"
refused p2p=maybe "dmafs: p2p=maybe: want auto, off or force"
refused p2p=OFF "dmafs: p2p=OFF: want auto, off or force"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
