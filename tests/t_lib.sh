# SPDX-License-Identifier: MIT
# t_lib.sh - shared helpers for the mounted dmafs tests (sourced, not run).
#
# Every helper is prefixed t_.  Sourcing this file registers t_cleanup on EXIT;
# whatever the test leaves behind (mounts, daemons, loop devices, work dirs) is
# recorded in a state file as it is created, so helpers work from subshells too
# and the cleanup runs even when the test fails half way.
#
# Environment: top_builddir / top_srcdir (set by `make check`; default: the
# directory above this file).  DMAFS / MKFS may point at other binaries.

: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${DMAFS:=$top_builddir/fs/dmafs}"
: "${MKFS:=$top_builddir/tools/mkfs.dmafs}"
# The mount.dmafs that tests link into /sbin for mount(8): make check's copy beside a link
# to this build's daemon (tests/tests.am says why); the source tree's when run by hand.
T_MOUNT_HELPER=$top_builddir/tests/sbin/mount.dmafs
[ -f "$T_MOUNT_HELPER" ] || T_MOUNT_HELPER=$top_srcdir/tools/mount.dmafs
T_NAME=$(basename "$0" .sh)
# The interpreter itself (not a wrapper such as a pyenv shim), so that $! of a
# backgrounded "$T_PY" is the python process.
T_PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)
T_WORK=
T_MEMBERS=
T_IMGS=()
T_LOOPDEVS=()
T_DAEMON_ERR=
T_STATE=$(mktemp /dev/shm/.dmafs-t-state.XXXXXX) || { echo "$T_NAME: mktemp failed"; exit 1; }

# t_log MSG... - one line of what the test is checking now.
t_log() { echo "[$T_NAME] $*"; }

# t_fail MSG... - report a failure and end the test with status 1.
t_fail() {
	echo "[$T_NAME] FAIL: $*"
	exit 1
}

# t_skip MSG... - end the test with status 77 (skip), saying why.
t_skip() {
	echo "[$T_NAME] SKIP: $*"
	exit 77
}

# t_register KIND VALUE - remember something for t_cleanup (dir, loop, mnt, pid, file,
# sysctl PATH=VALUE).
# A pid is recorded with its start time, so that t_cleanup never kills another process
# that got the number after ours was reaped.
t_register() {
	if [ "$1" = pid ]; then
		echo "pid $2 $(t_pid_start "$2" || echo -)" >>"$T_STATE"
	else
		echo "$1 $2" >>"$T_STATE"
	fi
}

# t_sysctl PATH VALUE - write VALUE to the /proc/sys file PATH; t_cleanup writes back
# the value it had before the first t_sysctl of PATH.
t_sysctl() {
	local old
	old=$(cat "$1") || t_fail "cannot read $1"
	grep -q "^sysctl $1=" "$T_STATE" || t_register sysctl "$1=$old"
	echo "$2" >"$1" || t_fail "cannot write $2 to $1"
}

# t_pid_start PID - the start time of PID (field 22 of /proc/PID/stat, clock ticks after
# boot); fails when there is no such process. The command name (field 2) may hold spaces
# and parentheses: the fields are counted after its last ')'.
t_pid_start() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	[ -n "${20:-}" ] || return 1
	echo "${20}"
}

# t_stop PID... - SIGSTOP each PID and wait until every thread of each is stopped.  kill(2)
# returns once one thread of a process has been told; the others stop only when that
# thread has run and started the group stop, so until then they still serve requests.
t_stop() {
	local p n
	kill -STOP "$@" || t_fail "kill -STOP $*"
	for p in "$@"; do
		# a thread in a kernel call (D) stops only when the call returns
		for ((n = 0; n < 3000; n++)); do
			t_all_stopped "$p" && break
			sleep 0.01
		done
		((n < 3000)) || t_fail "daemon $p: not every thread stopped 30 s after SIGSTOP: $(grep -h '^State:' /proc/"$p"/task/*/status 2>/dev/null | sort | uniq -c | tr '\n' ' ')$(t_unstopped "$p")"
	done
}

# t_all_stopped PID - true when every thread of PID is stopped, or in D inside a write to
# /dev/fuse: a notification (the kernel drops a cached name) waits for the directory's lock,
# which a process holds whose own request waits for the stopped threads; such a thread
# writes nothing else, and stops as it returns (seen in a clean-clone run of powercut.sh,
# a thread in fuse_reverse_inval_entry for 30 s).
t_all_stopped() {
	local t st
	for t in /proc/"$1"/task/*; do
		st=$(awk '/^State:/ { print $2 }' "$t/status" 2>/dev/null)
		case $st in
		T | t | "") ;;
		D) grep -q fuse_dev_write "$t/stack" 2>/dev/null || return 1 ;;
		*) return 1 ;;
		esac
	done
	return 0
}

# t_unstopped PID - the threads of PID not stopped: tid, name, state, where they wait.
t_unstopped() {
	local t st
	for t in /proc/"$1"/task/*; do
		st=$(awk '/^State:/ { print $2 }' "$t/status" 2>/dev/null)
		case $st in T | t | "") continue ;; esac
		printf '; thread %s (%s) %s in %s: %s' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" "$st" \
			"$(cat "$t/wchan" 2>/dev/null)" "$(tr '\n' ' ' <"$t/stack" 2>/dev/null | cut -c1-600)"
	done
}

# t_running PID - true while PID runs.  A zombie does not count: it has exited and closed
# its files, and its parent may reap it much later (an init that reaps slowly).
t_running() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# t_require_root_fuse - skip unless we can mount FUSE filesystems as root
# and the dmafs binaries are built.
t_require_root_fuse() {
	[ "$(id -u)" = 0 ] || t_skip "needs root (mounts FUSE, uses loop devices, changes owners)"
	[ -c /dev/fuse ] || t_skip "no /dev/fuse character device"
	command -v fusermount3 >/dev/null || t_skip "fusermount3 not installed (Debian package fuse3)"
	[ -x "$DMAFS" ] || t_skip "daemon not built: $DMAFS"
	[ -x "$MKFS" ] || t_skip "mkfs not built: $MKFS"
}

# t_require_acl_tools - skip unless setfacl, getfacl, getfattr and setpriv are installed
# (the ACL tests set ACLs and act as another user).
t_require_acl_tools() {
	command -v setfacl >/dev/null && command -v getfacl >/dev/null ||
		t_skip "setfacl/getfacl not installed (Debian package acl)"
	command -v getfattr >/dev/null || t_skip "getfattr not installed (Debian package attr)"
	command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
}

# t_require_python - skip unless python3 is available (several checks use it).
t_require_python() {
	[ -n "$T_PY" ] || t_skip "python3 not found"
}

# t_require_torch [CODE [WHAT]] - sets PY to the python with torch (DMAFS_TEST_PYTHON,
# default Debian's /usr/bin/python3) and skips unless it runs CODE (default: import torch;
# WHAT says what failed), root and /dev/fuse are there and libdmafs is built; exports
# DMAFS_LIBRARY and PYTHONPATH so that the tree's dmafs module and library are used.
t_require_torch() {
	local code=${1:-import torch} what=${2:-"'import torch' fails"} out
	PY=${DMAFS_TEST_PYTHON:-/usr/bin/python3}
	[ -x "$PY" ] || t_skip "$PY not found (set DMAFS_TEST_PYTHON to a python with torch)"
	out=$("$PY" -c "$code" 2>&1) ||
		t_skip "$what in $PY (Debian package python3-torch): $(echo "$out" | tail -n 1)"
	t_require_root_fuse
	: "${DMAFS_LIBRARY:=$top_builddir/lib/.libs/libdmafs.so.0}"
	[ -e "$DMAFS_LIBRARY" ] || t_skip "libdmafs not built: $DMAFS_LIBRARY"
	export DMAFS_LIBRARY PYTHONPATH="$top_srcdir/lib/python${PYTHONPATH:+:$PYTHONPATH}"
	export PYTHONDONTWRITEBYTECODE=1
}

# t_require_gpus N [CODE [WHAT]] - t_require_torch with N CUDA GPUs, NCCL and torchrun
# (and CODE, when given: WHAT says what else is needed); skips without them.
t_require_gpus() {
	local n=$1
	t_require_torch "import torch, torch.distributed as d, torch.distributed.run
assert torch.cuda.is_available() and torch.cuda.device_count() >= $n, f'{torch.cuda.device_count() if torch.cuda.is_available() else 0} CUDA GPUs'
assert d.is_nccl_available(), 'no NCCL'
${2:-}" "needs torch with $n CUDA GPUs and NCCL${3:+, and $3}"
}

# t_torchrun N SCRIPT ARGS... - run SCRIPT in N processes with torchrun (torch.distributed.run
# of $PY) on this machine, on a free port; fails when any process does. Each process's
# stdout is teed with a [defaultN] prefix: --redirects/--tee 1 also keep Debian's torch 1.13
# torchrun working on Python 3.11 (its default, Std.NONE, is lost there: "NoneType has no
# attribute get").
t_torchrun() {
	local n=$1 port
	shift
	port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
		t_fail "no free TCP port for torchrun"
	OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$PY" -m torch.distributed.run --nnodes 1 --nproc_per_node "$n" \
		--master_addr 127.0.0.1 --master_port "$port" --redirects 1 --tee 1 "$@"
}

# t_py ARGS... - run python3.
t_py() { PYTHONDONTWRITEBYTECODE=1 "$T_PY" "$@"; }

# t_workdir - create a fresh work dir under /dev/shm; sets T_WORK.
t_workdir() {
	T_WORK=$(mktemp -d "/dev/shm/dmafs-$T_NAME.XXXXXX") || t_fail "mktemp -d under /dev/shm failed"
	t_register dir "$T_WORK"
}

# t_images N SIZE [NAME] - N sparse image files of SIZE (truncate(1) syntax)
# in the work dir.  Sets T_IMGS (array) and T_MEMBERS (comma list).
t_images() {
	local n=$1 size=$2 name=${3:-img} i
	[ -n "$T_WORK" ] || t_workdir
	T_IMGS=()
	for ((i = 0; i < n; i++)); do
		truncate -s "$size" "$T_WORK/$name$i" || t_fail "cannot create image $T_WORK/$name$i"
		T_IMGS+=("$T_WORK/$name$i")
	done
	T_MEMBERS=$(IFS=,; echo "${T_IMGS[*]}")
}

# t_loops N SIZE [NAME] - N loop devices over sparse files in the work dir.
# Sets T_LOOPDEVS (array) and T_MEMBERS (comma list).
t_loops() {
	local n=$1 size=$2 name=${3:-loop} i dev
	command -v losetup >/dev/null || t_skip "losetup not installed"
	[ -n "$T_WORK" ] || t_workdir
	T_LOOPDEVS=()
	for ((i = 0; i < n; i++)); do
		truncate -s "$size" "$T_WORK/$name$i.img" || t_fail "cannot create $T_WORK/$name$i.img"
		dev=
		# losetup -f races with other users of loop devices; retry a few times.
		for _ in 1 2 3 4 5; do
			dev=$(losetup -f --show "$T_WORK/$name$i.img" 2>/dev/null) && break
			dev=
			sleep 0.2
		done
		[ -n "$dev" ] || t_skip "no free loop device (losetup -f --show failed)"
		t_register loop "$dev"
		T_LOOPDEVS+=("$dev")
	done
	T_MEMBERS=$(IFS=,; echo "${T_LOOPDEVS[*]}")
}

# t_xfs SIZE MNT - an xfs filesystem on a loop device over a sparse file in the work dir,
# mounted on MNT: the kernel's own filesystem that dmafs is compared with. Skips without
# mkfs.xfs or xfs in the kernel.
t_xfs() {
	local size=$1 mnt=$2 saved=("${T_LOOPDEVS[@]}") members=$T_MEMBERS dev
	command -v mkfs.xfs >/dev/null || t_skip "mkfs.xfs not installed (Debian package xfsprogs)"
	grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null || true
	grep -qw xfs /proc/filesystems || t_skip "the kernel has no xfs"
	t_loops 1 "$size" xfs
	dev=${T_LOOPDEVS[0]}
	T_LOOPDEVS=("${saved[@]}")
	T_MEMBERS=$members
	mkfs.xfs -q -f "$dev" >/dev/null 2>&1 || t_fail "mkfs.xfs $dev failed"
	mkdir -p "$mnt" || t_fail "mkdir $mnt"
	mount -t xfs "$dev" "$mnt" || t_fail "mount -t xfs $dev $mnt failed"
	t_register kmnt "$mnt"
}

# t_mkfs ARGS... - run mkfs.dmafs -q ARGS; fails the test if mkfs fails.
t_mkfs() {
	local out
	# T_MKFS_DATA=mirror: the same test over the mirror data profile (tests/*_mirror.sh)
	out=$("$MKFS" -q ${T_MKFS_DATA:+--data "$T_MKFS_DATA"} "$@" 2>&1) || t_fail "mkfs.dmafs $* failed: $out"
}

# t_faultfs IMAGE - serve IMAGE as $T_WORK/ff/disk through tests/faultfs (the member whose
# reads can be delayed or failed through the control file $T_WORK/ctl, made empty here);
# faultfs runs in the foreground as a background job, its pid in T_FAULTFS_PID, unmounted
# and stopped at the end. Sets T_FF (the mount point) and T_FF_CTL. Skips without faultfs.
t_faultfs() {
	local ff=$T_WORK/ff bin=$top_builddir/tests/faultfs
	[ -x "$bin" ] || t_skip "tests/faultfs not built"
	T_FF=$ff
	T_FF_CTL=$T_WORK/ctl
	: >"$T_FF_CTL"
	mkdir -p "$ff" || t_fail "mkdir $ff"
	t_register mnt "$ff"
	"$bin" "$1" "$T_FF_CTL" "$ff" -f 2>>"$T_WORK/faultfs.err" &
	T_FAULTFS_PID=$!
	disown "$T_FAULTFS_PID" # no "Killed" job notice when a test kills it
	t_register pid "$T_FAULTFS_PID"
	t_wait_mounted "$ff" 30 || t_fail "faultfs did not mount $ff: $(cat "$T_WORK/faultfs.err")"
	[ -f "$ff/disk" ] || t_fail "faultfs mounted $ff without $ff/disk"
}

# t_fsck RC ARGS... - run dmafs-fsck ARGS, output in $T_WORK/fsck.out; fail unless it
# exits RC.
t_fsck() {
	local want=$1 rc
	shift
	"$top_builddir/tools/dmafs-fsck" "$@" >"$T_WORK/fsck.out" 2>&1
	rc=$?
	[ $rc = "$want" ] || t_fail "dmafs-fsck $* exited $rc, expected $want: $(cat "$T_WORK/fsck.out")"
}

# t_daemon_pids MNT - pids of dmafs daemons whose last argument is MNT.
t_daemon_pids() {
	local mnt=$1 p a
	for p in /proc/[0-9]*; do
		mapfile -d "" -t a 2>/dev/null <"$p/cmdline" || continue
		[ ${#a[@]} -ge 2 ] || continue
		[ "${a[0]##*/}" = dmafs ] || continue
		[ "${a[${#a[@]} - 1]}" = "$mnt" ] && echo "${p#/proc/}"
	done
}

# t_is_mounted MNT - true if MNT is in the mount table.  (mountpoint(1) stats the
# path and says "not a mount point" for a FUSE mount whose daemon is dead.)
t_is_mounted() {
	awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts
}

# t_wait_mounted MNT [SECONDS] - wait until MNT is a mount point.
t_wait_mounted() {
	local mnt=$1 n=$((${2:-30} * 10))
	while ! t_is_mounted "$mnt"; do
		((n-- > 0)) || return 1
		sleep 0.1
	done
}

# t_mount MEMBERS MNT [OPTS] - mount with the daemon (which daemonizes once the
# mount is up) and wait for the mount point.  Fails the test if it does not mount.
# The daemon's stderr is kept in $T_DAEMON_ERR.
t_mount() {
	local members=$1 mnt=$2 opts=${3:-} rc
	[ -n "$T_WORK" ] || t_workdir
	mkdir -p "$mnt" || t_fail "mkdir $mnt"
	t_register mnt "$mnt"
	T_DAEMON_ERR=$T_WORK/daemon.err
	if [ -n "$opts" ]; then
		"$DMAFS" -o "$opts" "$members" "$mnt" 2>"$T_DAEMON_ERR"
	else
		"$DMAFS" "$members" "$mnt" 2>"$T_DAEMON_ERR"
	fi
	rc=$?
	[ $rc = 0 ] || t_fail "dmafs ${opts:+-o $opts }$members $mnt exited $rc: $(cat "$T_DAEMON_ERR")"
	t_wait_mounted "$mnt" 30 || t_fail "dmafs exited 0 but $mnt is not a mount point after 30 s"
	local p
	for p in $(t_daemon_pids "$mnt"); do t_register pid "$p"; done
}

# t_mount_fg MEMBERS MNT [OPTS] - like t_mount but runs the daemon with -f in the
# background; sets T_DAEMON_PID so the test can wait for its exit status.
t_mount_fg() {
	local members=$1 mnt=$2 opts=${3:-}
	[ -n "$T_WORK" ] || t_workdir
	mkdir -p "$mnt" || t_fail "mkdir $mnt"
	t_register mnt "$mnt"
	T_DAEMON_ERR=$T_WORK/daemon.err
	if [ -n "$opts" ]; then
		"$DMAFS" -f -o "$opts" "$members" "$mnt" 2>"$T_DAEMON_ERR" &
	else
		"$DMAFS" -f "$members" "$mnt" 2>"$T_DAEMON_ERR" &
	fi
	T_DAEMON_PID=$!
	t_register pid "$T_DAEMON_PID"
	local n=300
	while ! t_is_mounted "$mnt"; do
		kill -0 "$T_DAEMON_PID" 2>/dev/null ||
			t_fail "dmafs -f $members $mnt died before mounting: $(cat "$T_DAEMON_ERR")"
		((n-- > 0)) || t_fail "dmafs -f: $mnt not mounted after 30 s"
		sleep 0.1
	done
}

# t_umount MNT - unmount and wait (up to 60 s) for the daemon to exit: fusermount3 -u
# returns before the daemon has finished, so this waits for its pid (umount_sync.sh tests
# umount(8) through umount.dmafs, which waits by itself).
t_umount() {
	local mnt=$1 pids p n
	pids=$(t_daemon_pids "$mnt")
	for n in 1 2 3 4 5 6 7 8 9 10; do
		fusermount3 -u "$mnt" 2>/dev/null && break
		t_is_mounted "$mnt" || break
		umount "$mnt" 2>/dev/null && break
		sleep 0.5
	done
	t_is_mounted "$mnt" && t_fail "cannot unmount $mnt (busy?)"
	for p in $pids; do
		n=600
		while t_running "$p"; do
			((n-- > 0)) || t_fail "daemon $p still running 60 s after unmounting $mnt"
			sleep 0.1
		done
	done
	return 0
}

# t_crash MNT - kill -9 the daemon of MNT and lazily detach the dead mount.
t_crash() {
	local mnt=$1 pids p
	pids=$(t_daemon_pids "$mnt")
	[ -n "$pids" ] || t_fail "no daemon found for $mnt"
	for p in $pids; do kill -9 "$p"; done
	for p in $pids; do
		while t_running "$p"; do sleep 0.05; done
	done
	fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
	t_is_mounted "$mnt" && t_fail "cannot detach $mnt after killing the daemon"
	return 0
}

# t_statfs MNT FIELD - f_blocks|f_bfree|f_bavail|f_files|f_ffree|f_frsize|f_bsize|f_namemax
t_statfs() {
	case $2 in
	f_blocks) stat -f -c %b "$1" ;;
	f_bfree) stat -f -c %f "$1" ;;
	f_bavail) stat -f -c %a "$1" ;;
	f_files) stat -f -c %c "$1" ;;
	f_ffree) stat -f -c %d "$1" ;;
	f_frsize) stat -f -c %S "$1" ;;
	f_bsize) stat -f -c %s "$1" ;;
	f_namemax) stat -f -c %l "$1" ;;
	*) t_fail "t_statfs: unknown field $2" ;;
	esac
}

# t_free_bytes MNT - free bytes for unprivileged users (f_bavail * f_frsize).
t_free_bytes() { echo $(($(t_statfs "$1" f_bavail) * $(t_statfs "$1" f_frsize))); }

# t_expect_fail DESC CMD... - CMD must fail; fails the test otherwise.
t_expect_fail() {
	local desc=$1
	shift
	if "$@" 2>/dev/null; then t_fail "$desc: '$*' succeeded but must fail"; fi
	return 0
}

# t_timeout SECONDS CMD... - run CMD and return its exit status; fail the test if it is
# still running after SECONDS.  Unlike timeout(1) this never waits for a process that
# cannot die: one blocked in a request its FUSE daemon never answers ignores even SIGKILL
# until the daemon goes (t_cleanup kills it, which releases the process).
t_timeout() {
	local secs=$1 pid n
	shift
	"$@" &
	pid=$!
	n=$((secs * 10))
	while kill -0 "$pid" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; do
		((n-- > 0)) || t_fail "$* still running after $secs s (blocked in a request the daemon never answers?)"
		sleep 0.1
	done
	wait "$pid"
}

# t_ours PID:START - true when PID is still the process that started at START.
t_ours() {
	local start
	[ "${1#*:}" != - ] || return 1
	start=$(t_pid_start "${1%%:*}") || return 1
	[ "$start" = "${1#*:}" ]
}

# t_cleanup - unmount everything, kill our daemons, detach our loop devices,
# remove work dirs.  Runs on EXIT; keeps the test's exit status.
t_cleanup() {
	local rc=$? kind val
	trap - EXIT
	[ -f "$T_STATE" ] || exit $rc
	# Unmount in reverse order of mounting.
	while read -r kind val; do
		[ "$kind" = mnt ] || [ "$kind" = kmnt ] || continue
		t_is_mounted "$val" || continue
		if [ "$kind" = kmnt ]; then # a kernel filesystem (t_xfs), possibly under overlays
			umount -R "$val" 2>/dev/null || umount -l "$val" 2>/dev/null ||
				echo "[$T_NAME] cleanup: cannot unmount $val" >&2
			continue
		fi
		fusermount3 -u "$val" 2>/dev/null || fusermount3 -u -z "$val" 2>/dev/null ||
			umount -l "$val" 2>/dev/null ||
			echo "[$T_NAME] cleanup: cannot unmount $val" >&2
	done < <(tac "$T_STATE")
	# Daemons: those recorded plus any still serving one of our mount points, each as
	# PID:START; a process whose start time is no longer START is not ours (its pid was
	# reused) and is neither waited for nor killed.
	local pids=() p start extra
	while read -r kind val extra; do
		case $kind in
		pid) pids+=("$val:${extra:--}") ;;
		mnt) for p in $(t_daemon_pids "$val"); do pids+=("$p:$(t_pid_start "$p" || echo -)"); done ;;
		esac
	done <"$T_STATE"
	if [ ${#pids[@]} -gt 0 ]; then
		local n=50 alive=1
		# Give daemons time to commit and exit after the unmount, then force.
		while [ $alive = 1 ] && ((n-- > 0)); do
			alive=0
			for p in "${pids[@]}"; do t_ours "$p" && t_running "${p%%:*}" && alive=1; done
			[ $alive = 1 ] && sleep 0.1
		done
		for p in "${pids[@]}"; do
			t_ours "$p" && kill -9 "${p%%:*}" 2>/dev/null
		done
		for p in "${pids[@]}"; do
			n=50
			while t_ours "$p" && t_running "${p%%:*}" && ((n-- > 0)); do sleep 0.1; done
		done
	fi
	while read -r kind val; do
		[ "$kind" = loop ] && losetup -d "$val" 2>/dev/null
	done <"$T_STATE"
	while read -r kind val; do
		[ "$kind" = sysctl ] || continue
		echo "${val#*=}" >"${val%%=*}" || echo "[$T_NAME] cleanup: cannot write ${val#*=} back to ${val%%=*}" >&2
	done <"$T_STATE"
	while read -r kind val; do
		[ "$kind" = file ] && rm -f "$val"
	done <"$T_STATE"
	while read -r kind val; do
		[ "$kind" = dir ] || continue
		# Never rm -rf through a mount that is still there.
		if grep -q " $val/" /proc/mounts 2>/dev/null; then
			echo "[$T_NAME] cleanup: leaving $val, something is still mounted in it" >&2
			continue
		fi
		rm -rf "$val"
	done <"$T_STATE"
	rm -f "$T_STATE"
	exit $rc
}
trap t_cleanup EXIT
trap 'exit 1' INT TERM HUP

# t_umount_helpers - umount(8) runs helpers from /sbin only (also /sbin/fs.d, /sbin/fs):
# link this build's umount.dmafs there as umount.dmafs and umount.fuse.dmafs, unless the
# same program is there already, and remove the links at exit (the links point into the
# build tree: installing is the only way to test what users run). Sets HELPER. Skips when
# the helper is not built, umount(8) is not util-linux's, or another program holds a name.
t_umount_helpers() {
	local name dst
	HELPER=$(readlink -f "$top_builddir/tools/umount.dmafs")
	[ -x "$HELPER" ] || t_skip "umount.dmafs not built: $top_builddir/tools/umount.dmafs"
	umount --version 2>/dev/null | grep -q util-linux || t_skip "umount(8) is not util-linux's (it runs no helpers)"
	for name in umount.dmafs umount.fuse.dmafs; do
		dst=/sbin/$name
		[ -L "$dst" ] && [ ! -e "$dst" ] && rm -f "$dst" # dangling: left by an interrupted run
		if [ -e "$dst" ]; then
			[ "$(readlink -f "$dst")" = "$HELPER" ] || cmp -s "$dst" "$HELPER" ||
				t_skip "$dst exists and is not this build's umount.dmafs (an installed dmafs, or another test run): not replacing it"
			continue
		fi
		ln -s "$HELPER" "$dst" 2>/dev/null || t_skip "cannot link $dst to this build's umount.dmafs"
		t_register file "$dst"
	done
}
