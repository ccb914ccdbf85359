#!/bin/bash
# Description: readdir while the directory changes: 15,000 names that stay, interleaved
# with 15,000 that another process unlinks in random order while it also creates and
# unlinks names of its own; meanwhile the directory is listed over and over with small
# getdents64 calls, through one open handle and by reopening it at the last offset for
# every call (what telldir/seekdir and an NFS server do). No listing may return an entry
# twice or miss a name that existed throughout; the same run on xfs of this kernel is
# clean too. Three rounds, so that slot compaction happens during listings. Then: a walk
# that renames each entry it finds ends without a name twice (generic/736's case); an
# entry's offset still resumes right after it when everything before it is gone; after
# rewinddir a name made since is listed.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
WALK=$top_builddir/tests/dirwalk
[ -x "$WALK" ] || t_skip "tests/dirwalk not built"
N=15000
t_workdir

cat >"$T_WORK/churn.py" <<'PY'
# churn.py DIR N STOP MODE - setup: N "keep" names interleaved with N "pad" names;
# churn: unlink the pads in random order while creating and unlinking names of its own,
# then create STOP.
import os, random, sys

d, n, stop, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if mode == "setup":
    os.mkdir(d)
    for i in range(n):
        for name in ("keep-%06d" % i, "pad-%06d" % i):
            os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
    sys.exit(0)
rng = random.Random(int(sys.argv[5]))
pads = ["pad-%06d" % i for i in range(n)]
rng.shuffle(pads)
live, k = [], 0
while pads:
    for _ in range(8):
        name = "new-%07d" % k
        k += 1
        os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
        live.append(name)
    for _ in range(min(len(pads), 12)):
        os.unlink(os.path.join(d, pads.pop()))
    for _ in range(6):
        os.unlink(os.path.join(d, live.pop(rng.randrange(len(live)))))
os.close(os.open(stop, os.O_CREAT | os.O_WRONLY, 0o644))
print("churn: %d pads unlinked, %d names created, %d of them unlinked" % (n, k, k - len(live)))
PY

# rounds ROOT LABEL - three rounds of setup, churn and listings under ROOT.
rounds() {
	local root=$1 label=$2 r rc=0
	for r in 1 2 3; do
		local d=$root/d$r stop=$root/stop$r
		t_py "$T_WORK/churn.py" "$d" $N "$stop" setup || t_fail "$label: setup of $d failed"
		t_py "$T_WORK/churn.py" "$d" $N "$stop" churn $r >"$T_WORK/churn.out" 2>&1 &
		local cpid=$!
		"$WALK" "$d" keep- $N "$stop" reopen >"$T_WORK/reopen.out" 2>&1 &
		local rpid=$!
		"$WALK" "$d" keep- $N "$stop" one >"$T_WORK/one.out" 2>&1 || rc=1
		wait $rpid || rc=1
		wait $cpid || t_fail "$label: the churn failed: $(cat "$T_WORK/churn.out")"
		t_log "$label round $r: $(cat "$T_WORK/churn.out")"
		t_log "  $(tail -n 1 "$T_WORK/one.out")"
		t_log "  $(tail -n 1 "$T_WORK/reopen.out")"
		[ $rc = 0 ] || t_fail "$label round $r: listings returned an entry twice or missed one:
$(head -n 5 "$T_WORK/one.out" "$T_WORK/reopen.out")"
	done
}

# checks ROOT LABEL - renames during a walk, offsets after unlinks, rewinddir.
checks() {
t_log "$2: a walk that renames every entry it finds ends, and finds no name twice"
t_py - "$1/ren" 5000 <<'PY' || t_fail "$2: walk with renames (see above)"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.mkdir(d)
for i in range(n):
    os.close(os.open(os.path.join(d, "f%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
count, names = 0, set()
with os.scandir(d) as it:
    for e in it:
        count += 1
        if e.name in names:
            sys.exit("%s listed twice" % e.name)
        names.add(e.name)
        if count > 2 * n:
            sys.exit("more than %d entries from a directory of %d: the walk does not end" % (2 * n, n))
        os.rename(os.path.join(d, e.name), os.path.join(d, "r" + e.name))
if count < n:
    sys.exit("%d entries of %d" % (count, n))
print("%d entries listed, %d renamed" % (count, count))
PY

t_log "$2: an entry's offset resumes right after it once everything before it is unlinked"
mkdir "$1/seek" && for i in $(seq -w 1 300); do : >"$1/seek/a$i"; : >"$1/seek/b$i"; done
t_py - "$1/seek" <<'PY' || t_fail "$2: offsets after unlinks, rewinddir (see above)"
import ctypes, os, sys
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.readdir.restype = ctypes.c_void_p
libc.telldir.restype = ctypes.c_long
for f in ("readdir", "telldir", "closedir", "seekdir"):
    getattr(libc, f).argtypes = [ctypes.c_void_p] + ([ctypes.c_long] if f == "seekdir" else [])
off_name = 19  # offsetof(struct dirent64, d_name) on x86_64 and aarch64
def names(dp, n):
    out = []
    while len(out) < n:
        e = libc.readdir(dp)
        if not e:
            break
        name = ctypes.string_at(e + off_name).decode()
        if name not in (".", ".."):
            out.append(name)
    return out
dp = libc.opendir(d.encode())
head = names(dp, 100)
pos = libc.telldir(dp)
libc.closedir(dp)
for name in os.listdir(d):
    if name.startswith("b"):
        os.unlink(os.path.join(d, name))
dp = libc.opendir(d.encode())
libc.seekdir(dp, pos)
rest = names(dp, 1000)
libc.closedir(dp)
want = sorted(set(os.listdir(d)) - set(head))
if sorted(rest) != want:
    sys.exit("after %s: got %d names (%s...), want the %d not listed yet (%s...)"
             % (head[-1], len(rest), rest[:3], len(want), want[:3]))
print("resumed after %s: the %d names not listed yet" % (head[-1], len(rest)))
# rewinddir(3) shows the directory as it is now: a name made since is listed
dp = libc.opendir(d.encode())
before = names(dp, 100000)
os.close(os.open(os.path.join(d, "made-later"), os.O_CREAT | os.O_WRONLY, 0o644))
libc.rewinddir.argtypes = [ctypes.c_void_p]
libc.rewinddir(dp)
after = names(dp, 100000)
libc.closedir(dp)
if "made-later" in before or "made-later" not in after or len(after) != len(before) + 1:
    sys.exit("rewinddir: %d names before, %d after, made-later %s" % (len(before), len(after), "made-later" in after))
print("rewinddir: the name made since is listed")
PY
}

if command -v mkfs.xfs >/dev/null && { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	t_xfs 1G "$T_WORK/xfs"
	rounds "$T_WORK/xfs" xfs
	checks "$T_WORK/xfs" xfs
else
	t_log "no xfs here (mkfs.xfs, or xfs in the kernel): dmafs alone"
fi

t_images 2 1G
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M"
rounds "$M" dmafs
checks "$M" dmafs

t_umount "$M"
t_log "PASS"
