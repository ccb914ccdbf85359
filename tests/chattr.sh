#!/bin/bash
# Description: chattr +i and +a (FS_IOC_GETFLAGS/SETFLAGS, and FSGETXATTR/FSSETXATTR
# through xfs_io): every mutating call against an immutable and an append-only file and
# directory (opens for writing, O_TRUNC, writes and ftruncate through descriptors opened
# before, truncate, chmod, chown, utime, setxattr, fallocate modes, link, rename, rename
# over, unlink, create, mkdir, unlink, rename and rmdir in the directory), setting and
# clearing as root, and as the owner and another user without CAP_LINUX_IMMUTABLE: every
# result equals xfs's on the same kernel, except that a descriptor opened before the file
# became immutable can no longer write or truncate (xfs lets it; dmafs(8)). Then on dmafs: the flags survive a remount and a
# kill -9 after fsync; an append-only file's descriptor whose O_APPEND was cleared cannot
# write before the end; unknown flags are EOPNOTSUPP; dmafs-fsck is clean.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_root_fuse
t_require_python
command -v chattr >/dev/null && command -v lsattr >/dev/null || t_skip "chattr/lsattr (Debian package e2fsprogs) not installed"
command -v setpriv >/dev/null || t_skip "setpriv (util-linux) not installed"
t_workdir
chmod 0755 "$T_WORK"

cat >"$T_WORK/iflags.py" <<'PY'
# iflags.py DIR - every mutating call against immutable and append-only files and
# directories; one line per call: "what: ok|ERRNO".
import ctypes, errno, fcntl, os, struct, subprocess, sys

D = sys.argv[1]
GET, SET = 0x80086601, 0x40086602
IMM, APP = 0x10, 0x20
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

def getflags(p):
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return struct.unpack("i", fcntl.ioctl(fd, GET, b"\0" * 4))[0]
    finally:
        os.close(fd)

def setflags(p, f):
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, SET, struct.pack("i", f))
    finally:
        os.close(fd)

def run(what, fn):
    try:
        fn()
        r = "ok"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print(f"{what}: {r}")

def falloc(p, mode, off, n):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        if libc.fallocate(fd, mode, off, n) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)

def write_open(p, flags, data=b"x"):
    fd = os.open(p, flags)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)

def as_user(uid, *cmd):
    r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *cmd],
                       capture_output=True, text=True)
    if r.returncode:
        raise OSError(errno.EPERM if "not permitted" in r.stderr else errno.EIO, r.stderr.strip())

for kind, flag, letter in (("immutable", IMM, "i"), ("append", APP, "a")):
    d = os.path.join(D, kind)
    os.mkdir(d)
    os.chmod(d, 0o755)
    f = os.path.join(d, "f")
    with open(f, "wb") as fp:
        fp.write(b"hello")
    dd = os.path.join(d, "dir")
    os.mkdir(dd)
    with open(os.path.join(dd, "in"), "wb") as fp:
        fp.write(b"in")
    mine = os.path.join(d, "mine")
    open(mine, "w").close()
    os.chown(mine, 65534, 65534)
    held = os.open(f, os.O_RDWR | os.O_APPEND)   # opened before the flag is set
    run(f"{kind}: set as the owner without CAP_LINUX_IMMUTABLE", lambda: as_user(65534, "chattr", f"+{letter}", mine))
    run(f"{kind}: set as another user", lambda: as_user(65533, "chattr", f"+{letter}", f))
    run(f"{kind}: set on a file", lambda: setflags(f, flag))
    run(f"{kind}: set on a directory", lambda: setflags(dd, flag))
    print(f"{kind}: flags read back {getflags(f):#x} {getflags(dd):#x}")
    run(f"{kind}: read as another user", lambda: as_user(65533, "lsattr", f))
    run(f"{kind}: open O_WRONLY", lambda: os.close(os.open(f, os.O_WRONLY)))
    run(f"{kind}: open O_RDWR", lambda: os.close(os.open(f, os.O_RDWR)))
    run(f"{kind}: open O_WRONLY|O_APPEND and write", lambda: write_open(f, os.O_WRONLY | os.O_APPEND, b"+a"))
    run(f"{kind}: open O_WRONLY|O_APPEND|O_TRUNC", lambda: os.close(os.open(f, os.O_WRONLY | os.O_APPEND | os.O_TRUNC)))
    run(f"{kind}: open O_RDONLY|O_TRUNC", lambda: os.close(os.open(f, os.O_RDONLY | os.O_TRUNC)))
    run(f"{kind}: open O_RDONLY", lambda: os.close(os.open(f, os.O_RDONLY)))
    run(f"{kind}: write through a descriptor opened before", lambda: os.write(held, b"h"))
    run(f"{kind}: ftruncate through it", lambda: os.ftruncate(held, 7))
    run(f"{kind}: fallocate 0 through it", lambda: libc.fallocate(held, 0, 0, 4096) and (_ for _ in ()).throw(OSError(ctypes.get_errno(), "")))
    os.close(held)
    run(f"{kind}: truncate", lambda: os.truncate(f, 0))
    run(f"{kind}: chmod", lambda: os.chmod(f, 0o600))
    run(f"{kind}: chown", lambda: os.chown(f, 1, 1))
    run(f"{kind}: utime to a time", lambda: os.utime(f, (1, 1)))
    run(f"{kind}: utime to now", lambda: os.utime(f, None))
    run(f"{kind}: setxattr", lambda: os.setxattr(f, "user.x", b"1"))
    run(f"{kind}: fallocate 0", lambda: falloc(f, 0, 0, 8192))
    run(f"{kind}: fallocate KEEP_SIZE", lambda: falloc(f, 1, 0, 65536))
    run(f"{kind}: fallocate PUNCH_HOLE", lambda: falloc(f, 3, 0, 4096))
    run(f"{kind}: fallocate ZERO_RANGE", lambda: falloc(f, 0x10, 0, 4096))
    run(f"{kind}: link", lambda: os.link(f, os.path.join(d, "f2")))
    run(f"{kind}: rename", lambda: os.rename(f, os.path.join(d, "f3")))
    open(os.path.join(d, "other"), "w").close()
    run(f"{kind}: rename over it", lambda: os.rename(os.path.join(d, "other"), f))
    run(f"{kind}: unlink", lambda: os.unlink(f))
    run(f"{kind} dir: create in it", lambda: open(os.path.join(dd, "new"), "w").close())
    run(f"{kind} dir: mkdir in it", lambda: os.mkdir(os.path.join(dd, "newdir")))
    run(f"{kind} dir: symlink in it", lambda: os.symlink("x", os.path.join(dd, "sym")))
    run(f"{kind} dir: unlink in it", lambda: os.unlink(os.path.join(dd, "in")))
    run(f"{kind} dir: rename within it", lambda: os.rename(os.path.join(dd, "in"), os.path.join(dd, "in2")))
    run(f"{kind} dir: rename out of it", lambda: os.rename(os.path.join(dd, "in"), os.path.join(d, "moved")))
    run(f"{kind} dir: rename into it", lambda: os.rename(os.path.join(d, "other"), os.path.join(dd, "other")))
    run(f"{kind} dir: chmod", lambda: os.chmod(dd, 0o700))
    run(f"{kind} dir: setxattr", lambda: os.setxattr(dd, "user.x", b"1"))
    run(f"{kind} dir: rmdir", lambda: os.rmdir(dd))
    run(f"{kind}: clear as another user", lambda: as_user(65533, "chattr", f"-{letter}", f))
    print(f"{kind}: size {os.stat(f).st_size} content {open(f, 'rb').read()[:32]!r}")
    run(f"{kind}: clear", lambda: (setflags(f, 0), setflags(dd, 0)))
    print(f"{kind}: flags after clearing {getflags(f):#x} {getflags(dd):#x}")
    run(f"{kind}: unlink after clearing", lambda: os.unlink(f))
    run(f"{kind} dir: rmdir after clearing", lambda: (os.unlink(os.path.join(dd, "in")), [os.unlink(os.path.join(dd, n)) if not os.path.isdir(os.path.join(dd, n)) else os.rmdir(os.path.join(dd, n)) for n in os.listdir(dd)], os.rmdir(dd)))
PY

REF=$T_WORK/xfs.out
if command -v mkfs.xfs >/dev/null && { grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	t_xfs 512M "$T_WORK/xfs"
	chmod 0755 "$T_WORK/xfs"
	t_log "the calls on xfs of $(uname -r)"
	t_py "$T_WORK/iflags.py" "$T_WORK/xfs" >"$REF" 2>&1 || t_fail "on xfs: $(tail -n 3 "$REF")"
else
	REF=
	t_log "no xfs here: dmafs results are checked against the EPERM lines only"
fi

t_images 2 256M
t_mkfs "${T_IMGS[@]}"
M=$T_WORK/mnt
t_mount "$T_MEMBERS" "$M" allow_other
chmod 0755 "$M"
t_log "the calls on dmafs"
t_py "$T_WORK/iflags.py" "$M" >"$T_WORK/dmafs.out" 2>&1 || t_fail "on dmafs: $(tail -n 3 "$T_WORK/dmafs.out")"
# Where dmafs is stricter than xfs on purpose: a descriptor opened before the file became
# immutable writes and truncates on xfs (whose copy_file_range through it is EPERM); the
# kernel sends dmafs both as writes, so dmafs refuses them all (dmafs(8)).
STRICT='^immutable: (write through a descriptor opened before|ftruncate through it|size)[: ]'
for w in "immutable: write through a descriptor opened before: EPERM" \
	"immutable: ftruncate through it: EPERM" "immutable: size 5 content b'hello'"; do
	grep -qxF "$w" "$T_WORK/dmafs.out" || t_fail "expected on dmafs: '$w'"
done
if [ -n "$REF" ]; then
	diff <(grep -Ev "$STRICT" "$REF") <(grep -Ev "$STRICT" "$T_WORK/dmafs.out") >/dev/null ||
		t_fail "dmafs differs from xfs:
$(diff <(grep -Ev "$STRICT" "$REF") <(grep -Ev "$STRICT" "$T_WORK/dmafs.out"))"
	t_log "$(grep -Evc "$STRICT" "$REF") results as on xfs; stricter than xfs:"
	grep -E "$STRICT" "$T_WORK/dmafs.out"
else
	for w in "immutable: open O_WRONLY: EPERM" "immutable: unlink: EPERM" "append: truncate: EPERM" \
		"append dir: unlink in it: EPERM" "immutable: set as the owner without CAP_LINUX_IMMUTABLE: EPERM"; do
		grep -qxF "$w" "$T_WORK/dmafs.out" || t_fail "expected '$w'"
	done
fi

t_log "an append-only file's descriptor whose O_APPEND was cleared writes only at the end"
t_py - "$M/app" <<'PY' || t_fail "append-only after F_SETFL (see above)"
import errno, fcntl, os, struct, sys
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(b"0123456789")
fd = os.open(p, os.O_WRONLY | os.O_APPEND)
rd = os.open(p, os.O_RDONLY)
fcntl.ioctl(rd, 0x40086602, struct.pack("i", 0x20))
# xfs refuses this F_SETFL (IS_APPEND); a FUSE inode does not show the flag to the kernel
try:
    fcntl.fcntl(fd, fcntl.F_SETFL, 0)
except OSError:
    pass
try:
    os.pwrite(fd, b"X", 0)
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND == 0:
        sys.exit("a write at offset 0 of an append-only file succeeded")
except OSError as e:
    if e.errno != errno.EPERM:
        sys.exit(f"pwrite: {e}, expected EPERM")
os.write(os.open(p, os.O_WRONLY | os.O_APPEND), b"end")
data = open(p, "rb").read()
if not data.startswith(b"0123456789") or not data.endswith(b"end"):
    sys.exit(f"content {data!r}")
try:
    fcntl.ioctl(rd, 0x40086602, struct.pack("i", 0x20 | 0x80))  # + noatime
    sys.exit("an unknown flag was accepted")
except OSError as e:
    if e.errno != errno.EOPNOTSUPP:
        sys.exit(f"unknown flag: {e}, expected EOPNOTSUPP")
print("pwrite before the end refused, appends kept, unknown flag EOPNOTSUPP")
PY

t_log "flags survive a remount and a kill -9 after fsync"
mkdir "$M/keep" && echo i >"$M/keep/i" && echo a >"$M/keep/a" && mkdir "$M/keep/d"
chattr +i "$M/keep/i" && chattr +a "$M/keep/a" && chattr +i "$M/keep/d" || t_fail "chattr on dmafs"
lsattr -d "$M/keep/i" "$M/keep/a" "$M/keep/d" | awk '{print $1}' >"$T_WORK/before"
t_umount "$M"
t_mount "$T_MEMBERS" "$M" allow_other
lsattr -d "$M/keep/i" "$M/keep/a" "$M/keep/d" | awk '{print $1}' >"$T_WORK/after"
cmp -s "$T_WORK/before" "$T_WORK/after" || t_fail "flags after a remount: $(cat "$T_WORK/after"), before: $(cat "$T_WORK/before")"
t_expect_fail "unlink of an immutable file after a remount" rm -f "$M/keep/i"
chattr -i "$M/keep/i" && chattr +a "$M/keep/i" && sync "$M/keep/i" || t_fail "chattr -i +a, sync"
t_crash "$M"
t_mount "$T_MEMBERS" "$M" allow_other
[ "$(lsattr -d "$M/keep/i" | awk '{print $1}')" = "-----a----------------" ] ||
	t_fail "flags after kill -9: $(lsattr -d "$M/keep/i")"
chattr -a "$M/keep/i" "$M/keep/a" && chattr -i "$M/keep/d" && rm -r "$M/keep" || t_fail "clearing and removing"
t_umount "$M"
t_fsck 0 "${T_IMGS[@]}"
t_log "PASS"
