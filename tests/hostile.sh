#!/bin/bash
# Description: the placement channel against a hostile unprivileged user on an allow_other
# mount of 3 members (tests/hostile makes the attacks): descriptors REGISTER must refuse,
# each with its errno in the order of the checks; buffers truncated or punched (tmpfs,
# hugetlbfs) before a placement, and truncated during one; REGISTER of files of the mount itself from 20 processes; a
# flood of 10,000 registrations against the per-user and mount-wide limits, and the byte
# limits, by default and as mount options; a sparse 1 GiB buffer; O_PATH descriptors of
# files the user may not open; exits and closes racing a registration; more placements
# waiting than allowed. Each attack runs while root writes (and fsyncs) one file and
# hashes another; the daemon must live and answer, root's bytes must be exact then and
# after a remount, and the daemon's descriptors and memory must stay bounded. Every case
# runs whatever the last one did; the summary names each result.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
HOSTILE=$top_builddir/tests/hostile
[ -x "$HOSTILE" ] || t_skip "not built: $HOSTILE"

H_USER=dmafs-t-hostile
PT=2	       # place_threads of the mounts: the descriptor bound allows 2 per thread
NPROC=20       # attacker processes of the hang and starve cases
H_PROMPT=2     # seconds a refusal may take (hostile.h's PROMPT_MS)
H_RESULTS=()   # "case PASS|FAIL|SKIP reason" lines for the summary
H_CASE=
H_CASE_BAD=
H_DEAD=0       # the mount's connection was aborted or its daemon died
H_MADE_USER=0
H_HUGEPAGES=
H_FUSECTL=0

# ---- cleanup: attackers first (by process group), then hugepages and the user ----

h_cleanup() {
	local g n
	if [ -n "$T_WORK" ] && [ -f "$T_WORK/pgids" ]; then
		while read -r g; do kill -9 -- "-$g" 2>/dev/null; done <"$T_WORK/pgids"
		# one still in a FUSE request cannot die until the connection goes
		for n in $(seq 30); do
			h_any_alive || break
			sleep 0.1
		done
		if h_any_alive; then
			h_abort "cleanup: attacker processes stuck in requests"
			for n in $(seq 50); do
				h_any_alive || break
				sleep 0.1
			done
		fi
	fi
	[ -n "$H_HUGEPAGES" ] && echo "$H_HUGEPAGES" >/proc/sys/vm/nr_hugepages
	if [ $H_MADE_USER = 1 ]; then
		userdel "$H_USER" 2>/dev/null || echo "[$T_NAME] cleanup: userdel $H_USER failed" >&2
	fi
	[ $H_FUSECTL = 1 ] && umount /sys/fs/fuse/connections 2>/dev/null
	return 0
}
h_any_alive() {
	local g
	while read -r g; do
		[ -n "$(pgrep -g "$g" 2>/dev/null)" ] && return 0
	done <"$T_WORK/pgids"
	return 1
}
trap 'h_rc=$?; h_cleanup; (exit $h_rc); t_cleanup' EXIT

# ---- the users ----

if ! id -u "$H_USER" >/dev/null 2>&1; then
	command -v useradd >/dev/null || t_skip "useradd (Debian package passwd) not installed"
	useradd -r -M -s /usr/sbin/nologin "$H_USER" || t_fail "useradd $H_USER failed"
	H_MADE_USER=1
fi
U=$(id -u "$H_USER")
G=$(id -g "$H_USER")
U2=65534 # a second user (nobody) for the mount-wide limits
U3=      # a third one: a uid no account has
for ((n = 61000; n < 61100; n++)); do
	getent passwd "$n" >/dev/null || { U3=$n; break; }
done
[ -n "$U3" ] || t_fail "no free uid in 61000..61099 for a third user"
# AS_U, AS_U2, AS_U3: command prefixes that run a command as that user, with its own group,
# no supplementary groups, no capabilities
as_uid() { echo setpriv --reuid="$1" --regid="$2" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs --; }
read -r -a AS_U <<<"$(as_uid "$U" "$G")"
read -r -a AS_U2 <<<"$(as_uid "$U2" "$U2")"
read -r -a AS_U3 <<<"$(as_uid "$U3" "$U3")"
"${AS_U[@]}" true || t_fail "setpriv cannot run a command as uid $U"

# ---- FUSE connection abort: the only way to free processes stuck in a request ----

if ! awk '$2 == "/sys/fs/fuse/connections" { f = 1 } END { exit !f }' /proc/self/mounts; then
	mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null && H_FUSECTL=1
fi
# h_conn MNT - the mount's FUSE connection number (its device, as the kernel numbers it)
h_conn() {
	awk -v m="$1" '$5 == m { split($3, d, ":"); print d[1] * 1048576 + d[2] }' /proc/self/mountinfo | tail -n 1
}
# h_abort WHY - abort the main mount's FUSE connection (and the second mount's): every
# request waiting for the daemon fails, so that the processes in them can end.
h_abort() {
	local c
	t_log "aborting the FUSE connection: $*"
	for c in ${H_CONN:-} ${H_CONN2:-}; do
		if [ -w "/sys/fs/fuse/connections/$c/abort" ]; then
			echo 1 >"/sys/fs/fuse/connections/$c/abort"
		elif [ -n "${M:-}" ]; then
			umount -f "$M" 2>/dev/null # MNT_FORCE aborts too, where fusectl is missing
		fi
	done
	H_DEAD=1
}

# ---- running things with a deadline ----

# h_bg NAME CMD... - start CMD in its own process group, output in $T_WORK/out.NAME. Until
# h_join has reaped it, the group's id is listed in $T_WORK/pgids for the cleanup to kill:
# while the leader is an unreaped child, or any member lives, no other process can have it.
h_bg() {
	local name=$1
	shift
	setsid "$@" >"$T_WORK/out.$name" 2>&1 &
	echo $! >"$T_WORK/pid.$name"
	echo $! >>"$T_WORK/pgids"
}
# h_join NAME SECONDS - wait for h_bg's NAME; print its output; its exit status, or 124 after
# aborting the connection when it did not end in time (a hang).
h_join() {
	local name=$1 n=$(($2 * 10)) pid rc
	pid=$(cat "$T_WORK/pid.$name")
	while t_running "$pid"; do
		if ((n-- <= 0)); then
			h_bad "$name: still running after $2 s (a request the daemon never answers?)"
			h_abort "$name hangs"
			kill -9 -- "-$pid" 2>/dev/null
			for n in $(seq 50); do t_running "$pid" || break; sleep 0.1; done
			sed 's/^/    /' "$T_WORK/out.$name"
			wait "$pid" 2>/dev/null
			[ -n "$(pgrep -g "$pid")" ] || sed -i "/^$pid\$/d" "$T_WORK/pgids"
			return 124
		fi
		sleep 0.1
	done
	wait "$pid"
	rc=$?
	[ -n "$(pgrep -g "$pid")" ] || sed -i "/^$pid\$/d" "$T_WORK/pgids"
	sed 's/^/    /' "$T_WORK/out.$name"
	return $rc
}
# h_run NAME SECONDS CMD... - h_bg and h_join; a nonzero status (but 77) is a failure of the case.
h_run() {
	local name=$1 secs=$2 rc
	shift 2
	h_bg "$name" "$@"
	h_join "$name" "$secs"
	rc=$?
	case $rc in
	0 | 77) ;;
	124) ;;
	*) h_bad "$name: the daemon did not answer as specified (see above)" ;;
	esac
	return $rc
}
# h_wait_file PATH SECONDS NAME - wait until PATH exists (while h_bg's NAME runs).
h_wait_file() {
	local n=$(($2 * 10)) pid
	pid=$(cat "$T_WORK/pid.$3")
	while [ ! -e "$1" ]; do
		t_running "$pid" || return 1
		if ((n-- <= 0)); then
			h_bad "$3: not done after $2 s"
			return 1
		fi
		sleep 0.1
	done
}

# ---- cases ----

h_bad() {
	echo "[$T_NAME] FAIL ($H_CASE): $*"
	H_CASE_BAD="${H_CASE_BAD:+$H_CASE_BAD; }$*"
}

# h_mount [OPTS] - mount the 3 members on $M with $H_OPTS (plus OPTS), the daemon in the
# foreground so that its log (stderr) is $T_DAEMON_ERR (daemonized, it logs to syslog);
# false, with the daemon's words in H_MOUNT_ERR, when it does not mount. Unlike
# t_mount_fg, a refused option is one failed case, not the end of the test.
h_mount() {
	local opts=$H_OPTS${1:+,$1} n=300
	[ -f "$T_DAEMON_ERR" ] && cat "$T_DAEMON_ERR" >>"$T_WORK/daemon.all"
	mkdir -p "$M"
	t_register mnt "$M"
	"$DMAFS" -f -o "$opts" "$MEMBERS" "$M" </dev/null >/dev/null 2>"$T_DAEMON_ERR" &
	DPID=$!
	t_register pid "$DPID"
	while ! t_is_mounted "$M"; do
		if ! t_running "$DPID" || ((n-- <= 0)); then
			kill -9 "$DPID" 2>/dev/null
			H_MOUNT_ERR="dmafs -f -o $opts: $(cat "$T_DAEMON_ERR")"
			return 1
		fi
		sleep 0.1
	done
	H_CONN=$(h_conn "$M")
	H_DEAD=0
}
# h_detach - end the main mount whatever state it is in (daemon dead, hung, aborted).
h_detach() {
	local p
	for p in $(t_daemon_pids "$M"); do kill -9 "$p" 2>/dev/null; done
	for p in $(seq 50); do [ -z "$(t_daemon_pids "$M")" ] && break; sleep 0.1; done
	fusermount3 -u -z "$M" 2>/dev/null || umount -l "$M" 2>/dev/null
	t_is_mounted "$M" && t_fail "cannot detach $M"
	return 0
}
# h_answers - true when the daemon lives and the mount answers a stat within 5 s.
h_answers() {
	local pid n
	t_running "$DPID" || return 1
	stat "$M/root/r" >/dev/null 2>&1 &
	pid=$!
	for n in $(seq 50); do
		t_running "$pid" || { wait "$pid"; return; }
		sleep 0.1
	done
	return 1
}

# h_root_io NAME HASH STOP RESULT - root's I/O during an attack, until STOP exists: write
# $M/root/w-NAME (16 MiB of $T_WORK/wref, fsync) and read it back, hash $M/root/r, both
# read O_DIRECT so that they reach the daemon. RESULT gets the rounds done, or what went
# wrong.
h_root_io() {
	local name=$1 hash=$2 stop=$3 res=$4 i=0 sum
	while :; do
		dd if="$T_WORK/wref" of="$M/root/w-$name" bs=1M conv=fsync status=none 2>"$res.err" ||
			{ echo "write+fsync of w-$name failed: $(tr '\n' ' ' <"$res.err")" >"$res"; return 1; }
		sum=$(dd if="$M/root/w-$name" bs=1M iflag=direct status=none 2>"$res.err" | $hash; exit "${PIPESTATUS[0]}") ||
			{ echo "reading w-$name back failed: $(tr '\n' ' ' <"$res.err")" >"$res"; return 1; }
		[ "${sum%% *}" = "$(cut -d' ' -f1 "$T_WORK/wref.$hash")" ] ||
			{ echo "w-$name read back differs in round $i" >"$res"; return 1; }
		sum=$(dd if="$M/root/r" bs=1M iflag=direct status=none 2>"$res.err" | $hash; exit "${PIPESTATUS[0]}") ||
			{ echo "reading r failed: $(tr '\n' ' ' <"$res.err")" >"$res"; return 1; }
		[ "${sum%% *}" = "$(cut -d' ' -f1 "$T_WORK/r.$hash")" ] ||
			{ echo "$hash of r differs in round $i" >"$res"; return 1; }
		i=$((i + 1))
		[ -e "$stop" ] && break
	done
	echo "$i" >"$res"
}

# h_begin NAME [HASH] - a case starts: the mount must be up (mounted again if the last case
# killed it); FUSE workers are started (16 reads at once), root places once (hostile warm)
# and its I/O makes one round, so that the baseline figures hold what the daemon sets up
# for root anyway; then the sampler and root's I/O start.
h_begin() {
	H_CASE=$1
	H_CASE_BAD=
	H_CASE_T0=$SECONDS
	H_HASH=${2:-sha256sum}
	echo
	t_log "==== case $H_CASE ===="
	if [ $H_DEAD = 1 ] || ! h_answers; then
		h_detach
		h_mount || t_fail "cannot mount again after the last case: $H_MOUNT_ERR"
	fi
	touch "$T_WORK/io.stop"
	h_bg warm bash -c "for i in \$(seq 16); do dd if='$M/root/r' of=/dev/null bs=1M skip=\$i count=1 iflag=direct status=none & done; wait"
	h_join warm 60 >/dev/null || t_fail "16 reads at once do not complete on a fresh mount"
	h_bg warm "$HOSTILE" warm "$IOC"
	h_join warm 60 >/dev/null || h_bad "root's own placement fails on a fresh mount: $(cat "$T_WORK/out.warm")"
	h_bg io bash -c "$(declare -f h_root_io); h_root_io \"\$@\"" h_root_io \
		"$H_CASE" "$H_HASH" "$T_WORK/io.stop" "$T_WORK/io.res"
	h_join io 60 >/dev/null || t_fail "root's I/O fails on a fresh mount: $(cat "$T_WORK/io.res")"
	ls -l "/proc/$DPID/fd" | awk '{ print $NF }' | sort >"$T_WORK/fds0"
	read -r H_FDS0 H_PFDS0 H_SFDS0 H_ANON0 H_SHM0 < <("$HOSTILE" status "$DPID" "$T_WORK/")
	H_LOGOFF=$(stat -c %s "$T_DAEMON_ERR")
	rm -f "$T_WORK/sample" "$T_WORK/io.stop" "$T_WORK/io.res"
	"$HOSTILE" sample "$DPID" "$T_WORK/" "$T_WORK/sample" &
	H_SAMPLER=$!
	h_bg io bash -c "$(declare -f h_root_io); h_root_io \"\$@\"" h_root_io \
		"$H_CASE" "$H_HASH" "$T_WORK/io.stop" "$T_WORK/io.res"
	sleep 0.2 # root's I/O under way before the attack
}

# h_end NPROC [SUMKIB] - a case ends: root's I/O must have completed exactly; the daemon lives
# and answers; its descriptors stayed within before + NPROC + 2 x place_threads + 16 and its
# RssAnon grew by at most 64 MiB (with SUMKIB: RssAnon+RssShmem by at most SUMKIB KiB, at
# its peak); its log blames no member; after an unmount (or, when it died, a kill and
# detach) and a mount, root's files hold their bytes.
h_end() {
	local nproc=$1 io_ok=0 fds pfds sfds anon shm fdsmax pfdsmax sfdsmax anonmax shmmax summax samples bound new
	touch "$T_WORK/io.stop"
	if h_join io 60 >/dev/null; then
		io_ok=1
		t_log "root's I/O during the attack: $(cat "$T_WORK/io.res") round(s) of a 16 MiB write+fsync, read back and $H_HASH of another 16 MiB file, all exact"
	else
		h_bad "root's I/O during the attack: $(tr '\n' ' ' <"$T_WORK/io.res" 2>/dev/null)"
	fi
	if [ $H_DEAD = 0 ] && h_answers; then
		read -r fds pfds sfds anon shm < <("$HOSTILE" status "$DPID" "$T_WORK/")
	else
		h_bad "the daemon is dead or its mount does not answer"
		H_DEAD=1
	fi
	kill "$H_SAMPLER" 2>/dev/null
	wait "$H_SAMPLER" 2>/dev/null
	if read -r fdsmax pfdsmax sfdsmax anonmax shmmax summax samples <"$T_WORK/sample" 2>/dev/null; then
		bound=$((H_FDS0 + nproc + 2 * PT + 16))
		t_log "daemon descriptors: before $H_FDS0, max during $fdsmax (bound $bound = before + $nproc attacker processes + 2 x $PT place_threads + 16), after ${fds:-?}; pidfds max $pfdsmax, shared-memory descriptors max $sfdsmax"
		t_log "daemon RssAnon: before $((H_ANON0 / 1024)) MiB, max during $((anonmax / 1024)) MiB (+$(((anonmax - H_ANON0) / 1024)) MiB, bound +64); RssShmem: before $((H_SHM0 / 1024)) MiB, max $((shmmax / 1024)) MiB, after $((${shm:-0} / 1024)) MiB ($samples samples)"
		((fdsmax <= bound)) || h_bad "the daemon held $fdsmax descriptors, more than $bound"
		((anonmax - H_ANON0 <= 65536)) || h_bad "the daemon's RssAnon grew by $(((anonmax - H_ANON0) / 1024)) MiB, more than 64"
		if [ -n "${2:-}" ]; then
			t_log "daemon RssAnon+RssShmem: before $(((H_ANON0 + H_SHM0) / 1024)) MiB, max during $((summax / 1024)) MiB (bound +$(($2 / 1024)))"
			((summax - H_ANON0 - H_SHM0 <= $2)) ||
				h_bad "the daemon's RssAnon+RssShmem grew by $(((summax - H_ANON0 - H_SHM0) / 1024)) MiB, more than $(($2 / 1024))"
		fi
	else
		h_bad "no figures from the sampler (daemon gone?)"
	fi
	new=$(tail -c +$((H_LOGOFF + 1)) "$T_DAEMON_ERR")
	if [ -n "$new" ]; then
		t_log "daemon log during the case (first 5 of $(echo "$new" | wc -l) lines):"
		echo "$new" | head -n 5 | sed 's/^/    /'
	fi
	echo "$new" | grep -E "error on member|on member [0-9]|member [0-9]+ \(" >/dev/null &&
		h_bad "the daemon's log blames a member for the client's doing: $(echo "$new" | grep -E "error on member|on member [0-9]|member [0-9]+ \(" | head -n 1)"
	# unmount (or kill and detach) and mount again: root's files as fsync left them
	if [ $H_DEAD = 0 ]; then
		(t_umount "$M") || { h_bad "unmount failed"; h_detach; }
	else
		h_detach
	fi
	h_mount || t_fail "the filesystem does not mount again after case $H_CASE: $H_MOUNT_ERR"
	# a write cut short by a dead daemon has no bytes to check
	[ $io_ok = 1 ] && h_verify_files "after remount" "$H_CASE"
	[ $io_ok = 1 ] || h_verify_files "after remount"
	if [ -z "$H_CASE_BAD" ]; then
		H_RESULTS+=("$H_CASE PASS ($((SECONDS - H_CASE_T0)) s)")
	else
		H_RESULTS+=("$H_CASE FAIL ($((SECONDS - H_CASE_T0)) s): $H_CASE_BAD")
	fi
}
# h_verify_files WHEN NAME - root's files on $M hold their bytes.
h_verify_files() {
	local f
	for f in r data; do
		[ "$(sha256sum <"$M/root/$f" | cut -d' ' -f1)" = "$(cut -d' ' -f1 "$T_WORK/$f.sha256sum")" ] ||
			h_bad "$1: root/$f differs"
	done
	if [ -n "$2" ] && [ -e "$M/root/w-$2" ]; then
		cmp -s "$T_WORK/wref" "$M/root/w-$2" || h_bad "$1: root/w-$2 (written with fsync during the attack) differs"
	fi
}
# h_released [SECONDS] - the attackers have exited: within SECONDS (2) the daemon holds no
# pidfd or shared memory of theirs, its RssShmem is back (within 4 MiB) where it was, and
# it holds at most 2 descriptors per placement thread more than before (polled together
# until the deadline: the last registrations' other descriptors close just after).
h_released() {
	local n ok=0 fds pfds sfds anon shm
	h_answers || return
	for n in $(seq $((${1:-2} * 10))); do
		read -r fds pfds sfds anon shm < <("$HOSTILE" status "$DPID" "$T_WORK/")
		if ((pfds <= H_PFDS0 && sfds <= H_SFDS0 && shm <= H_SHM0 + 4096 && fds <= H_FDS0 + 2 * PT)); then
			ok=1
			break
		fi
		sleep 0.1
	done
	t_log "after the attackers exited: daemon descriptors $fds (before $H_FDS0; $pfds pidfds, $sfds of shared memory), RssShmem $((shm / 1024)) MiB (before $((H_SHM0 / 1024))) after $((n / 10)).$((n % 10)) s"
	((pfds <= H_PFDS0 && sfds <= H_SFDS0 && shm <= H_SHM0 + 4096)) ||
		h_bad "the daemon still holds what the exited attackers gave it ${1:-2} s later: $pfds pidfds (before $H_PFDS0), $sfds shared-memory descriptors (before $H_SFDS0), RssShmem $((shm / 1024)) MiB (before $((H_SHM0 / 1024)))"
	if ((fds > H_FDS0)); then
		t_log "descriptors the daemon opened since the baseline:"
		ls -l "/proc/$DPID/fd" | awk '{ print $NF }' | sort | comm -13 "$T_WORK/fds0" - | head -n 10 | sed 's/^/    /'
		((fds <= H_FDS0 + 2 * PT)) ||
			h_bad "the daemon holds $fds descriptors ${1:-2} s after the attackers exited, more than $H_FDS0 + 2 x $PT place_threads"
	fi
}
h_skip_case() {
	echo "[$T_NAME] SKIP ($1): $2"
	H_RESULTS+=("$1 SKIP: $2")
}

# ---- the filesystem ----

t_workdir
chmod 0711 "$T_WORK" # the attacker reaches the mount points, lists nothing
echo -n >"$T_WORK/pgids"
t_images 3 64M other
t_mkfs "${T_IMGS[@]}"
M2_MEMBERS=$T_MEMBERS
t_images 3 256M
t_mkfs -s 256K "${T_IMGS[@]}"
MEMBERS=$T_MEMBERS
chmod 0600 "$T_WORK"/img* "$T_WORK"/other*
M=$T_WORK/mnt
M2=$T_WORK/mnt2
export M T_WORK # for root's I/O in its own shell
T_DAEMON_ERR=$T_WORK/daemon.err
# writebehind_mb=16: root's own 16 MiB writes must not account for the daemon's memory
H_OPTS="allow_other,writebehind_mb=16,place_threads=$PT"
if ! h_mount; then
	# place_threads is part of what is tested: say so and go on without it, so that the
	# attacks are still made
	PT_REFUSED="the daemon refuses -o place_threads=$PT"
	echo "[$T_NAME] FAIL: $PT_REFUSED; going on without it ($H_MOUNT_ERR)"
	H_OPTS="allow_other,writebehind_mb=16"
	h_mount || t_fail "dmafs does not mount: $H_MOUNT_ERR"
fi
t_log "daemon $DPID on $M (3 members of 256 MiB), attacker uid $U ($H_USER), other users $U2 and $U3"
mkdir -p "$M/root" "$M/att" && chmod 0755 "$M/root" && chown "$U:$G" "$M/att" || t_fail "directories on $M"
head -c $((16 << 20)) /dev/urandom >"$T_WORK/wref" || t_fail "urandom"
head -c $((16 << 20)) /dev/urandom >"$M/root/r" || t_fail "write root/r"
head -c $((16 << 20)) /dev/urandom >"$M/root/data" || t_fail "write root/data"
echo "root only" >"$M/root/secret" && chmod 0600 "$M/root/secret"
chmod 0644 "$M/root/r" "$M/root/data"
sync -f "$M/root/r"
for h in sha256sum md5sum; do
	$h <"$T_WORK/wref" >"$T_WORK/wref.$h"
	$h <"$M/root/r" >"$T_WORK/r.$h"
done
sha256sum <"$M/root/data" >"$T_WORK/data.sha256sum"
"${AS_U[@]}" sh -c "head -c 8192 /dev/zero >'$M/att/own'" || t_fail "the attacker cannot write to its directory on $M"
head -c $((1 << 20)) /dev/urandom >"$T_WORK/rootshm" && chmod 0666 "$T_WORK/rootshm"
mkdir -m 0711 "$T_WORK/secret" && echo "root only" >"$T_WORK/secret/key" && chmod 0600 "$T_WORK/secret/key" &&
	mkfifo -m 0600 "$T_WORK/secret/fifo" || t_fail "secret files"
mkdir -m 1777 "$T_WORK/hold"
# O_DIRECT reads reach the daemon; root's I/O relies on them
dd if="$M/root/r" bs=1M count=1 iflag=direct status=none of=/dev/null ||
	t_fail "O_DIRECT reads on $M fail: root's I/O checks need them"
IOC=$M/root/data

# ---- 0: registrations refused with the errno of each check, in order ----

h_begin refuse
h_run refuse 60 "${AS_U[@]}" "$HOSTILE" refuse "$IOC" "$M/att/own" "$T_WORK/rootshm" "/dev/shm/.dmafs-hostile-$$"
h_end 1

# ---- 1: crash: buffers shrunk or punched after registration, then placed into ----

h_begin crash
t_log "shared memory truncated to 0 after REGISTER: EFAULT, aligned and unaligned"
h_run shrink-shm 30 "${AS_U[@]}" "$HOSTILE" shrink "$IOC" shm
h_answers || h_bad "the daemon died or stopped answering after placements into a shrunk buffer"
h_end 1

h_begin crash-race
t_log "shared memory truncated under a placement, where the daemon zeroes a hole's pages itself: EFAULT, 3 times"
{ head -c 128M /dev/urandom >"$M/root/dh" && truncate -s 144M "$M/root/dh" && chmod 644 "$M/root/dh"; } ||
	t_fail "cannot write $M/root/dh (128 MiB of data, then a 16 MiB hole)"
h_run shrink-race 60 "${AS_U[@]}" "$HOSTILE" shrinkrace "$M/root/dh" 128 16
h_answers || h_bad "the daemon died or stopped answering after a buffer shrank under a placement"
rm -f "$M/root/dh"
h_end 1

# 2 MiB pages for the hugetlb memfds of crash-huge and punch
H_HUGEPAGES=$(cat /proc/sys/vm/nr_hugepages)
echo $((H_HUGEPAGES + 2)) >/proc/sys/vm/nr_hugepages 2>/dev/null
hp_free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)

h_begin crash-huge
t_log "a hugetlb memfd (2 MiB pages) punched after REGISTER, no huge page free: EFAULT, aligned and unaligned"
huge_skip=
if [ "${hp_free:-0}" -ge 2 ]; then
	h_run shrink-huge 30 "${AS_U[@]}" "$HOSTILE" shrink "$IOC" huge
	[ $? = 77 ] && huge_skip="the attacker could not make a hugetlb memfd or drain the pool (see above)"
	h_answers || h_bad "the daemon died or stopped answering after placements into a punched hugetlb buffer"
else
	huge_skip="no 2 MiB pages could be reserved (HugePages_Free ${hp_free:-?} after asking for $((H_HUGEPAGES + 2)))"
fi
h_end 1
if [ -n "$huge_skip" ] && [[ ${H_RESULTS[-1]} = "crash-huge PASS"* ]]; then
	t_log "SKIP (crash-huge): $huge_skip"
	H_RESULTS[-1]="crash-huge SKIP: $huge_skip"
fi

h_begin punch
t_log "holes punched in registered memfds (tmpfs; hugetlbfs with pages free): EFAULT, and the daemon does not fill them"
h_run punch 30 "${AS_U[@]}" "$HOSTILE" shrink "$IOC" punch
h_answers || h_bad "the daemon died or stopped answering after placements into punched buffers"
h_end 1
echo "$H_HUGEPAGES" >/proc/sys/vm/nr_hugepages
H_HUGEPAGES=

# ---- 2: hang: REGISTER of files of the mount itself from 20 processes ----

h_begin hang
t_log "$NPROC processes REGISTER O_RDWR descriptors of a file of this mount for 5 s (half on that very descriptor)"
h_run selfreg 25 "${AS_U[@]}" "$HOSTILE" selfreg "$IOC" "$M/att/own" $NPROC 5
h_end $NPROC

# ---- 3: starve: 10,000 registrations against the default limits ----

h_begin starve md5sum
t_log "$NPROC processes x 500 registrations of written 4 KiB memfds at once (default reg_max_user 4096)"
rm -f "$T_WORK/hold/"*
h_bg flood "${AS_U[@]}" "$HOSTILE" flood "$IOC" $NPROC 500 4096 "$T_WORK/hold/flood"
if h_wait_file "$T_WORK/hold/flood" 90 flood; then
	read -r fds pfds sfds anon shm < <("$HOSTILE" status "$DPID" "$T_WORK/")
	t_log "while the flood's registrations are held: daemon descriptors $fds (before $H_FDS0; $pfds pidfds, $sfds of shared memory), RssAnon $((anon / 1024)) MiB, RssShmem $((shm / 1024)) MiB"
	((pfds <= H_PFDS0 + NPROC)) || h_bad "$pfds pidfds for $NPROC client processes: want one per process"
	t_log "mount-wide default reg_max 8192: uid $U2 registers 4000 (all made), uid $U3 200 (96 made, then ENOSPC)"
	h_bg fill2 "${AS_U2[@]}" "$HOSTILE" fill "$IOC" 4096 4000 4000 ENOSPC "$T_WORK/hold/fill2"
	h_wait_file "$T_WORK/hold/fill2" 60 fill2
	h_bg fill3 "${AS_U3[@]}" "$HOSTILE" fill "$IOC" 4096 200 96 ENOSPC "$T_WORK/hold/fill3"
	h_wait_file "$T_WORK/hold/fill3" 60 fill3
	rm -f "$T_WORK/hold/fill2" "$T_WORK/hold/fill3"
	h_join fill2 30 || h_bad "uid $U2's registrations under the mount-wide default"
	h_join fill3 30 || h_bad "uid $U3's registrations beyond the mount-wide default: want ENOSPC after 8192 in all"
fi
rm -f "$T_WORK/hold/flood"
h_join flood 60 || h_bad "the flood's registrations were not answered as specified (see above)"
h_released
h_end $((NPROC + 2))

# ---- 4: memory: a sparse 1 GiB buffer ----

h_begin memory
t_log "a 1 GiB memfd that is all hole: EFAULT, and the daemon's memory does not grow"
h_run sparse 30 "${AS_U[@]}" "$HOSTILE" sparse "$IOC" 1024
h_end 1 65536

# ---- 5: confused deputy: O_PATH descriptors of files the attacker may not open ----

h_begin deputy
watched=("$T_WORK/secret/key" "$T_WORK/secret/fifo" "$M/root/secret")
if command -v inotifywait >/dev/null && [ -z "${HOSTILE_NO_INOTIFYWAIT:-}" ]; then
	h_bg watch inotifywait -m -e open,access,modify --format '%w %e' "${watched[@]}"
	ready="Watches established"
else
	h_bg watch "$HOSTILE" watch "${watched[@]}"
	ready=ready
fi
for n in $(seq 50); do grep -q "$ready" "$T_WORK/out.watch" && break; sleep 0.1; done
grep -q "$ready" "$T_WORK/out.watch" || t_fail "the inotify watcher did not start: $(cat "$T_WORK/out.watch")"
cat "$T_WORK/secret/key" "$M/root/secret" >/dev/null # the watcher sees opens: a control
sleep 0.3
grep -q "secret/key.*OPEN" "$T_WORK/out.watch" && grep -q "root/secret.*OPEN" "$T_WORK/out.watch" ||
	t_fail "the inotify watcher did not report root's own opens: $(cat "$T_WORK/out.watch")"
seen=$(wc -l <"$T_WORK/out.watch")
t_log "O_PATH descriptors of root's 0600 files in a 0711 directory (tmpfs, and this mount): EBADF; of a FIFO: EBADF, at once"
h_run deputy-key 20 "${AS_U[@]}" "$HOSTILE" deputy "$IOC" opath "$T_WORK/secret/key" EBADF
h_run deputy-mnt 20 "${AS_U[@]}" "$HOSTILE" deputy "$IOC" opath "$M/root/secret" EBADF
h_run deputy-fifo 20 "${AS_U[@]}" "$HOSTILE" deputy "$IOC" opath "$T_WORK/secret/fifo" EBADF
sleep 0.3
if [ "$(wc -l <"$T_WORK/out.watch")" != "$seen" ]; then
	h_bad "someone opened root's files during the attempts: $(tail -n +$((seen + 1)) "$T_WORK/out.watch" | tr '\n' ';')"
else
	t_log "inotify: no open of the files during the attempts"
fi
kill -- "-$(cat "$T_WORK/pid.watch")" 2>/dev/null
h_join watch 5 >/dev/null
t_log "an O_RDWR descriptor of a file on another FUSE mount (a second dmafs): EINVAL, at once"
if out=$(T_WORK=$T_WORK/o2 && mkdir -p "$T_WORK" && t_mount "$M2_MEMBERS" "$M2" allow_other); then
	H_CONN2=$(h_conn "$M2")
	mkdir "$M2/att" && chown "$U:$G" "$M2/att"
	"${AS_U[@]}" sh -c "head -c 65536 /dev/zero >'$M2/att/f'"
	h_run deputy-fuse 20 "${AS_U[@]}" "$HOSTILE" deputy "$IOC" rdwr "$M2/att/f" EINVAL
	(t_umount "$M2") || h_bad "the second mount does not unmount"
	H_CONN2=
else
	t_log "other FUSE mount variant skipped: a second dmafs does not mount: $out"
fi
h_end 1

# ---- 6: close and exit racing a registration ----

h_begin race
t_log "6 rounds x 6 processes register a 256 MiB memfd while a thread closes it, the process exits, or it is killed"
h_run race 120 "${AS_U[@]}" "$HOSTILE" race "$IOC" 6 6 256
h_released
h_end 6

# ---- 6b: one process's registrations coming and going at once ----

h_begin churn
t_log "8 threads of one process register and unregister a 4 KiB memfd each, for 8 s"
h_run churn 60 "${AS_U[@]}" "$HOSTILE" churn "$IOC" 8 8
h_released
h_end 1

# ---- 7: limits passed at mount ----

t_umount "$M"
if ! h_mount "reg_max_user=100,reg_max=150,reg_bytes_user=64M,reg_bytes=96M"; then
	echo
	t_log "==== case limits ===="
	echo "    $H_MOUNT_ERR"
	echo "[$T_NAME] FAIL (limits): the daemon refuses -o reg_max_user=100,reg_max=150,reg_bytes_user=64M,reg_bytes=96M"
	H_RESULTS+=("limits FAIL: mount options refused")
	h_mount || t_fail "cannot mount again: $H_MOUNT_ERR"
else
	h_begin limits
	rm -f "$T_WORK/hold/"*
	t_log "reg_max_user=100: 100 registrations made, then EDQUOT; reg_max=150: another user's 51st is ENOSPC"
	h_bg lim1 "${AS_U[@]}" "$HOSTILE" fill "$IOC" 4096 120 100 EDQUOT "$T_WORK/hold/lim1"
	h_wait_file "$T_WORK/hold/lim1" 30 lim1
	h_bg lim2 "${AS_U2[@]}" "$HOSTILE" fill "$IOC" 4096 60 50 ENOSPC "$T_WORK/hold/lim2"
	h_wait_file "$T_WORK/hold/lim2" 30 lim2
	rm -f "$T_WORK/hold/lim1" "$T_WORK/hold/lim2"
	h_join lim1 30 || h_bad "reg_max_user=100 not kept (see above)"
	h_join lim2 30 || h_bad "reg_max=150 not kept (see above)"
	sleep 1.5 # the exited processes' registrations are reaped
	t_log "reg_bytes_user=64M: 4 x 16 MiB made, the 5th EDQUOT; reg_bytes=96M: another user's 3rd 16 MiB is ENOSPC"
	h_bg lim3 "${AS_U[@]}" "$HOSTILE" fill "$IOC" $((16 << 20)) 5 4 EDQUOT "$T_WORK/hold/lim3"
	h_wait_file "$T_WORK/hold/lim3" 30 lim3
	h_bg lim4 "${AS_U2[@]}" "$HOSTILE" fill "$IOC" $((16 << 20)) 3 2 ENOSPC "$T_WORK/hold/lim4"
	h_wait_file "$T_WORK/hold/lim4" 30 lim4
	rm -f "$T_WORK/hold/lim3" "$T_WORK/hold/lim4"
	h_join lim3 30 || h_bad "reg_bytes_user=64M not kept (see above)"
	h_join lim4 30 || h_bad "reg_bytes=96M not kept (see above)"
	sleep 1.5
	t_log "the exited processes' registrations no longer count: 100 made again, then EDQUOT"
	h_bg lim5 "${AS_U[@]}" "$HOSTILE" fill "$IOC" 4096 101 100 EDQUOT "$T_WORK/hold/lim5"
	h_wait_file "$T_WORK/hold/lim5" 30 lim5
	rm -f "$T_WORK/hold/lim5"
	h_join lim5 30 || h_bad "registrations of exited processes still counted 1.5 s later"
	h_end 2
fi

# ---- 7b: the default byte limits: MemTotal per user, twice that on the mount ----

mem_kib=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
avail_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
chunk=$((mem_kib * 1024 / 16 / 4096 * 4096)) # 16 fit MemTotal, 17 do not
if ((avail_kib * 1024 < 3 * chunk + (2 << 30))); then
	h_skip_case bytes "3 buffers of MemTotal/16 ($((chunk >> 20)) MiB) and 2 GiB to spare do not fit MemAvailable ($((avail_kib >> 10)) MiB)"
else
	h_begin bytes
	rm -f "$T_WORK/hold/"*
	t_log "default reg_bytes_user (MemTotal $((mem_kib >> 10)) MiB): one $((chunk >> 20)) MiB memfd registered 16 times, the 17th EDQUOT"
	h_bg b1 "${AS_U[@]}" "$HOSTILE" refill "$IOC" $chunk 17 16 EDQUOT "$T_WORK/hold/b1"
	h_wait_file "$T_WORK/hold/b1" 60 b1
	t_log "default reg_bytes (2 x MemTotal): another user's 16 made, a third user's first ENOSPC"
	h_bg b2 "${AS_U2[@]}" "$HOSTILE" refill "$IOC" $chunk 16 16 ENOSPC "$T_WORK/hold/b2"
	h_wait_file "$T_WORK/hold/b2" 60 b2
	h_bg b3 "${AS_U3[@]}" "$HOSTILE" refill "$IOC" $chunk 1 0 ENOSPC "$T_WORK/hold/b3"
	h_wait_file "$T_WORK/hold/b3" 60 b3
	rm -f "$T_WORK/hold/b1" "$T_WORK/hold/b2" "$T_WORK/hold/b3"
	h_join b1 60 || h_bad "default reg_bytes_user (MemTotal) not kept (see above)"
	h_join b2 60 || h_bad "registrations under the default reg_bytes refused (see above)"
	h_join b3 60 || h_bad "default reg_bytes (2 x MemTotal) not kept (see above)"
	# unmapping 2 x MemTotal of registrations takes the kernel a while: 10 s, not 2
	h_released 10
	h_end 3
fi

# ---- 8: more placements waiting than allowed ----

# One placement thread and at most 8 waiting requests per user: with 512 requests sent at
# once, EAGAIN does not depend on how fast this machine drains the queue.
t_umount "$M"
h_mount "place_threads=1,place_queue=8" || t_fail "cannot mount with place_threads=1,place_queue=8: $H_MOUNT_ERR"
h_begin queue
t_log "512 threads of one process place 16 MiB each at once: beyond place_queue=8 waiting, EAGAIN; root's reads meanwhile"
rm -f "$T_WORK/hold/"*
h_bg queue "${AS_U[@]}" "$HOSTILE" queue "$IOC" 512 16 "$T_WORK/hold/queue"
if h_wait_file "$T_WORK/hold/queue" 30 queue; then
	h_bg probe "$HOSTILE" probe "$M/root/r" 20 "$T_WORK/hold/queue-done"
	h_join queue 120 || h_bad "the placements were not answered as specified (see above)"
	touch "$T_WORK/hold/queue-done"
	if h_join probe 30 >/dev/null; then
		read -r probes probe_ms <"$T_WORK/out.probe"
		t_log "root's uncached 4 KiB reads during the placements: $probes, slowest $probe_ms ms"
		((probe_ms <= H_PROMPT * 1000)) || h_bad "a root read waited $probe_ms ms behind the placements: FUSE workers not free"
	else
		h_bad "root's reads during the placements failed or hung"
	fi
else
	h_join queue 30
	h_bad "the queue attack did not start"
fi
h_end 1

# ---- summary ----

echo
t_log "==== summary ===="
[ -n "${PT_REFUSED:-}" ] && H_RESULTS=("options FAIL: $PT_REFUSED" "${H_RESULTS[@]}")
bad=0
for r in "${H_RESULTS[@]}"; do
	echo "[$T_NAME]   $r"
	case $r in *" FAIL"*) bad=1 ;; esac
done
[ $bad = 0 ] || t_fail "the daemon does not withstand every attack (see above)"
t_log "PASS"
