# SPDX-License-Identifier: MIT
"""rig - what the benchmarks set up and take down: messages, commands, the programs
under test, member files with loop devices over them, dmafs and btrfs mounts, output
folders, and the cleanup that undoes all of it, last made first undone, on any exit: a
finished run, a failure, or SIGINT, SIGTERM or SIGHUP (130, 143, 129).

Standard library only: the models mode's runner imports it too, under PYTHON.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

PROG = "dmafs-bench"
# The folder of the dmafs-bench program (it sets this): dmafs-synth-model is beside it,
# and in a source tree lib/python is beside that folder.
BIN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG_DIR = os.path.dirname(os.path.abspath(__file__))

# The Debian package of each command a mode may need, for the message when it is missing.
PACKAGES = {"fio": "fio", "mkfs.btrfs": "btrfs-progs", "losetup": "util-linux",
            "wipefs": "util-linux", "fallocate": "util-linux", "mount": "mount",
            "umount": "mount", "setpriv": "util-linux", "fusermount3": "fuse3",
            "cmp": "diffutils", "diff": "diffutils", "du": "coreutils", "dd": "coreutils",
            "cp": "coreutils"}


class Fail(Exception):
    """A bad argument, a missing requirement or a failed step: printed, exit status 1."""


class Stop(BaseException):
    """A signal arrived: the run ends with 128 + its number, after the cleanup."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def log(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def warn(msg):
    log(f"warning: {msg}")


def fail(msg):
    raise Fail(msg)


# ---- the cleanup ----

_undo = []      # callables taking the exit status, run last first
_children = []  # (Popen, whole process group) to stop before anything is undone


def on_exit(fn):
    """Run fn(exit status) in the cleanup."""
    _undo.append(fn)
    return fn


def child(p, group=False):
    """A process to stop (SIGTERM, then SIGKILL) in the cleanup if it still runs; with
    @group, its whole process group (it was started in a session of its own)."""
    _children.append((p, group))
    return p


def _signal(p, group, sig):
    try:
        if group:
            os.killpg(p.pid, sig)
        else:
            os.kill(p.pid, sig)
    except OSError:
        pass


def stop_children():
    live = [(p, g) for p, g in _children if p.poll() is None]
    for p, g in live:
        _signal(p, g, signal.SIGTERM)
    for p, g in live:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            _signal(p, g, signal.SIGKILL)
            p.wait()
    _children.clear()


def cleanup(rc):
    stop_children()
    while _undo:
        fn = _undo.pop()
        try:
            fn(rc)
        except Exception as e:  # one failing step must not leave the others undone
            warn(f"cleanup: {e}")


def main(fn):
    """Run fn() with the cleanup after it, whatever happens; exit with the status."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def stop(signum, frame):
        raise Stop(signum)

    for s in sigs:
        signal.signal(s, stop)
    rc = 1
    try:
        fn()
        rc = 0
    except Fail as e:
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
    except Stop as e:
        log(f"stopped by {signal.Signals(e.signum).name}; cleaning up")
        rc = 128 + e.signum
    except BrokenPipeError:
        pass
    except Exception:
        traceback.print_exc()
    finally:
        for s in sigs:  # the cleanup runs to its end
            signal.signal(s, signal.SIG_IGN)
        cleanup(rc)
    sys.exit(rc)


# ---- commands and programs ----

def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:]).rstrip()
    except OSError:
        return ""


def run(cmd, what=None, log=None, env=None, quiet_ok=False):
    """Run @cmd and return its standard output. @log: a file that gets both its output
    streams instead. A failure names the command (@what) and ends its error output."""
    cmd = [str(c) for c in cmd]
    what = what or os.path.basename(cmd[0])
    try:
        if log:
            with open(log, "a") as lf:
                r = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env)
            out, err = "", tail(log)
        else:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            out, err = r.stdout, (r.stderr or r.stdout).strip()[-800:]
    except OSError as e:
        fail(f"{what}: {e.strerror}: {cmd[0]}")
    if r.returncode:
        fail(f"{what} exited {r.returncode}" + (f": {err}" if err else "")
             + (f" (log: {log})" if log else ""))
    return out


def timed(cmd, what=None, env=None):
    """Seconds of wall time @cmd took (its output thrown away); fails when it fails."""
    t0 = time.monotonic()
    r = subprocess.run([str(c) for c in cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, env=env)
    dt = time.monotonic() - t0
    if r.returncode:
        fail(f"{what or ' '.join(map(str, cmd))} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return dt


def tee(cmd, path, env=None):
    """Run @cmd in a session of its own, its output (both streams) line by line to our
    standard error and to the file @path; its exit status."""
    with open(path, "ab") as lf:
        p = child(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True),
                  group=True)
        for line in p.stdout:
            sys.stderr.buffer.write(line)
            sys.stderr.flush()
            lf.write(line)
        return p.wait()


def need(mode, *cmds):
    for c in cmds:
        if not shutil.which(c):
            pkg = PACKAGES.get(c, c)
            fail(f"{mode}: '{c}' not found: install the Debian package {pkg} (apt-get install {pkg})")


def need_root(mode, why="loop devices, mkfs, mount, drop_caches"):
    if os.geteuid():
        fail(f"{mode}: run as root ({why})")


def need_fuse(mode):
    if not os.path.exists("/dev/fuse"):
        fail(f"{mode}: /dev/fuse is missing: load the fuse module (modprobe fuse) or give the "
             "container /dev/fuse")


def need_shm(mode, mib, what):
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        fail(f"{mode}: /dev/shm is missing (the members are files there)")
    free = st.f_bavail * st.f_frsize >> 20
    if free < mib:
        fail(f"{mode}: /dev/shm has {free} MiB free; {what} need {mib} MiB: use fewer or "
             "smaller members")


def builddir():
    return os.environ.get("DMAFS_BUILDDIR") or None


def program(mode, name, rel):
    """A dmafs program: @rel in $DMAFS_BUILDDIR when it is set, else @name in PATH."""
    b = builddir()
    if b:
        p = os.path.join(b, rel)
        if not os.access(p, os.X_OK):
            fail(f"{mode}: DMAFS_BUILDDIR={b} but {p} is not there (run make)")
        return p
    p = shutil.which(name)
    if not p:
        fail(f"{mode}: {name} not found in PATH: install dmafs or set DMAFS_BUILDDIR to a "
             "build tree")
    return p


def script(mode, name):
    """A Python script of dmafs: beside dmafs-bench (a source tree, or bindir), else PATH."""
    p = os.path.join(BIN_DIR, name)
    if os.path.isfile(p):
        return p
    p = shutil.which(name)
    if not p:
        fail(f"{mode}: {name} is neither beside dmafs-bench ({BIN_DIR}) nor in PATH")
    return p


def python():
    """The interpreter with torch for the parts that need it: $PYTHON, else python3."""
    return os.environ.get("PYTHON") or "python3"


def child_env(**extra):
    """The environment of a Python child: the source tree's dmafs module (lib/python beside
    tools/) and the build tree's library (DMAFS_BUILDDIR) when there are, no bytecode
    written, and @extra."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    tree = os.path.normpath(os.path.join(BIN_DIR, "..", "lib", "python"))
    if os.path.isfile(os.path.join(tree, "dmafs", "__init__.py")):
        env["PYTHONPATH"] = tree + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    b = builddir()
    lib = os.path.join(b, "lib", ".libs", "libdmafs.so.0") if b else ""
    if lib and os.path.exists(lib) and not env.get("DMAFS_LIBRARY"):
        env["DMAFS_LIBRARY"] = lib
    env.update(extra)
    return env


def need_python(mode, py, *modules, env=None):
    """@py runs and imports @modules; the failure names what is missing."""
    if not shutil.which(py):
        fail(f"{mode}: '{py}' not found: set PYTHON to a python with torch")
    for m in modules:
        r = subprocess.run([py, "-c", f"import {m}"], capture_output=True, text=True,
                           env=env or child_env())
        if r.returncode:
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            fail(f"{mode}: '{py}' cannot import {m} (set PYTHON to a python that can): {last}")


# ---- files, folders, memory ----

def workdir(mode, *subdirs):
    """A new folder under /tmp with @subdirs (mount points); removed at the end with
    rmdir and unlink only, so that the files of a mount that survived stay untouched."""
    d = tempfile.mkdtemp(prefix=f"{PROG}-{mode}.")
    for s in subdirs:
        os.mkdir(os.path.join(d, s))

    def end(rc):
        for name in os.listdir(d):
            p = os.path.join(d, name)
            try:
                os.rmdir(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
            except OSError as e:
                warn(f"cannot remove {p}: {e.strerror}")
        try:
            os.rmdir(d)
        except OSError:
            pass
    on_exit(end)
    return d


class Out:
    """Where a mode's logs and results go: --out DIR (made if needed, kept), else a new
    folder under /tmp that is removed at the end of a run that worked (kept after a
    failure, or with @keep)."""

    def __init__(self, mode, path=None, keep=False):
        self.keep, self.temp = keep, not path
        if path:
            try:
                os.makedirs(path, exist_ok=True)
            except OSError as e:
                fail(f"{mode}: cannot create {path}: {e.strerror}")
            self.path = os.path.abspath(path)
        else:
            self.path = tempfile.mkdtemp(prefix=f"{PROG}-{mode}-out.")
        on_exit(self._end)

    def _end(self, rc):
        if not self.temp:
            log(f"results in {self.path}")
        elif self.keep:
            log(f"kept results in {self.path}")
        elif rc:
            log(f"logs of the failed run kept in {self.path}")
        else:
            shutil.rmtree(self.path, ignore_errors=True)

    def __call__(self, name):
        return os.path.join(self.path, name)

    def write(self, name, text):
        with open(self(name), "w") as f:
            f.write(text)


class Progress:
    """A progress line for a long step on standard error: what, done of total (in @unit),
    the rate and the time left; redrawn at most 5 times a second, cleared by end(), and
    silent when standard error is not a terminal (a log file gets no bar)."""

    def __init__(self, what, total, unit="MiB"):
        self.what, self.total, self.unit = what, max(total, 1), unit
        self.on = sys.stderr.isatty()
        self.t0 = self.last = time.monotonic()
        self.shown = False

    def update(self, done):
        if not self.on:
            return
        now = time.monotonic()
        if now - self.last < 0.2 and done < self.total:
            return
        self.last = now
        el = max(now - self.t0, 1e-9)
        rate = done / el
        left = (self.total - done) / rate if rate > 0 else 0
        sys.stderr.write(f"\r{PROG}: {self.what}: {done:,} of {self.total:,} {self.unit} "
                         f"({100 * done // self.total}%), {rate:,.0f} {self.unit}/s, "
                         f"{left:.0f} s left\033[K")
        sys.stderr.flush()
        self.shown = True

    def end(self):
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False


def write_file(path, mib, random=False, zero=False):
    """@mib MiB at @path: random bytes, zeros (every page written), or allocated only."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if not (random or zero):
                os.posix_fallocate(fd, 0, mib << 20)
                return
            chunk = 16 << 20 if zero else 1 << 20
            buf = bytes(chunk) if zero else None
            left = mib << 20
            bar = Progress(f"writing {os.path.basename(path)}", mib)
            while left:
                n = min(left, chunk)
                data = buf[:n] if zero else os.urandom(n)
                done = 0
                while done < n:
                    done += os.write(fd, data[done:])
                left -= n
                bar.update(mib - (left >> 20))
            bar.end()
        finally:
            os.close(fd)
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror}")


class Members:
    """@n member files of @mib MiB in /dev/shm, named @tag.PID.I.img, with a loop device
    over each; detached and removed at the end (the files stay with @keep). @zero writes
    every page (no first touch of the memory later, in a timed run); else they are only
    allocated."""

    def __init__(self, tag, n, mib, zero=False, keep=False):
        self.imgs, self.loops, self.keep = [], [], keep
        on_exit(self.release)
        for i in range(n):
            f = f"/dev/shm/{tag}.{os.getpid()}.{i}.img"
            self.imgs.append(f)
            write_file(f, mib, zero=zero)
            self.loops.append(run(["losetup", "--find", "--show", f],
                                  what=f"losetup of {f} (no free loop device?)").strip())

    def csv(self, part=None):
        return ",".join(part if part is not None else self.loops)

    def release(self, rc=0):
        for lp in self.loops:
            if subprocess.run(["losetup", "-d", lp], capture_output=True).returncode:
                warn(f"could not detach {lp}")
        self.loops = []
        if self.keep and self.imgs:
            log(f"kept member files: {' '.join(self.imgs)}")
        else:
            for f in self.imgs:
                try:
                    os.unlink(f)
                except OSError:
                    pass
        self.imgs = []


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        fail(f"cannot drop the page cache (/proc/sys/vm/drop_caches): {e.strerror}")


# ---- mounts ----

def mounted(mnt):
    """Something is mounted on @mnt. Reads the mount table rather than stat()ing: a FUSE
    mount whose daemon died fails stat with ENOTCONN but is still mounted."""
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == mnt for line in f)


def unmount(mnt, lazy=True):
    """Unmount @mnt, retrying for 10 s while it is busy; then detach it lazily (@lazy,
    with a warning) or give up (False)."""
    for _ in range(40):
        if not mounted(mnt):
            return True
        if subprocess.run(["umount", mnt], capture_output=True).returncode:
            time.sleep(0.25)
    if not mounted(mnt):
        return True
    if not lazy:
        return False
    warn(f"{mnt} stays busy; detaching it lazily")
    if subprocess.run(["umount", "-l", mnt], capture_output=True).returncode:
        subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
    return True


def alive(pid):
    """@pid runs (a zombie has exited: whoever inherited it may reap it late)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1] != "Z"
    except OSError:
        return False
    return True


class Dmafs:
    """A dmafs mount whose daemon runs in the foreground (-f) in a session of its own, its
    output to @log: its pid is known, so an unmount waits for it to exit (it commits its
    metadata and closes the members first) and a mount that did not come up is stopped.
    With @state (a JSON file) another process can remount it (Dmafs.load): the models
    mode's runner does, for its cold and warm runs. Unmounted at the end."""

    FIELDS = ("bin", "members", "mnt", "opts", "log", "state")

    def __init__(self, bin, members, mnt, opts="", log=os.devnull, state=None, cleanup=True):
        self.bin, self.members, self.mnt, self.opts, self.log, self.state = \
            bin, members, mnt, opts, log, state
        self.pid, self.proc = None, None
        if cleanup:
            on_exit(lambda rc: self.umount())
        self.save()

    @classmethod
    def load(cls, state):
        with open(state) as f:
            d = json.load(f)
        m = cls(**{k: d[k] for k in cls.FIELDS}, cleanup=False)
        m.pid = d.get("pid")
        return m

    def save(self):
        if self.state:
            d = {k: getattr(self, k) for k in self.FIELDS}
            d["pid"] = self.pid
            with open(self.state + ".new", "w") as f:
                json.dump(d, f)
            os.replace(self.state + ".new", self.state)

    def mount(self, extra=""):
        """Mount, with @extra options for this mount only; return once it answers."""
        if mounted(self.mnt):
            fail(f"{self.mnt} is mounted already")
        opts = ",".join(o for o in (self.opts, extra) if o)
        cmd = [self.bin, "-f"] + (["-o", opts] if opts else []) + [self.members, self.mnt]
        with open(self.log, "a") as lf:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                 start_new_session=True)
        self.proc, self.pid = p, p.pid
        self.save()
        for _ in range(3000):
            # stat(2) of the root waits until the daemon has answered the kernel's INIT
            if mounted(self.mnt):
                try:
                    os.stat(self.mnt)
                    return
                except OSError:
                    pass
            if p.poll() is not None:
                fail(f"dmafs exited ({p.returncode}) before the mount came up: "
                     f"{tail(self.log, 5)} (log: {self.log})")
            time.sleep(0.01)
        fail(f"dmafs did not mount {self.mnt} within 30 s (log: {self.log})")

    def umount(self, lazy=True):
        """Unmount and wait for the daemon to exit (60 s, then SIGTERM). A mount that
        stays busy is detached lazily with @lazy, else False is returned."""
        if self.state and os.path.exists(self.state):
            self.pid = Dmafs.load(self.state).pid  # another process may have remounted
        was = mounted(self.mnt)
        if was and not unmount(self.mnt, lazy):
            log(f"cannot unmount {self.mnt}: it stays busy (a process holds a file or a dmafs "
                "host buffer of it)")
            return False
        pid = self.pid
        if pid:
            if not was and alive(pid):  # never came up, or someone else unmounted it
                os.kill(pid, signal.SIGTERM)
            for _ in range(600):
                if not alive(pid):
                    break
                time.sleep(0.1)
            else:
                warn(f"dmafs (pid {pid}) did not exit 60 s after the unmount; sending SIGTERM")
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
                time.sleep(1)
            if self.proc is not None and self.proc.pid == pid:
                try:
                    rc = self.proc.wait(5)
                    if rc and was:
                        warn(f"dmafs exited with status {rc} after the unmount (log: {self.log})")
                except subprocess.TimeoutExpired:
                    pass
            self.pid = None
            self.save()
        return True

    def remount(self, extra=""):
        if not self.umount(lazy=False):
            fail(f"cannot unmount {self.mnt} to mount it again")
        self.mount(extra)


class Btrfs:
    """btrfs over @loops, mounted on @mnt (nodiscard with @nodiscard: btrfs discards freed
    space by default, Linux 6.2+, which gives the memory behind loop devices back and
    makes its next writes allocate it again; dmafs never discards). Unmounted at the end."""

    def __init__(self, loops, mnt, log, nodiscard=False):
        self.loops, self.mnt, self.log, self.nodiscard = loops, mnt, log, nodiscard
        on_exit(lambda rc: self.umount())

    def make(self, *args):
        run(["mkfs.btrfs", "-f", *args, *self.loops], what="mkfs.btrfs", log=self.log)

    def mount(self):
        opts = ",".join(f"device={lp}" for lp in self.loops) + (",nodiscard" if self.nodiscard else "")
        run(["mount", "-t", "btrfs", "-o", opts, self.loops[0], self.mnt],
            what=f"mount -t btrfs {self.loops[0]} (does this kernel have btrfs? grep btrfs "
            "/proc/filesystems; modprobe btrfs)")

    def umount(self):
        if mounted(self.mnt):
            unmount(self.mnt)


# ---- the machine ----

def reported_kib():
    """Memory the hypervisor took back (free page reporting), where the kernel counts it."""
    try:
        with open("/sys/module/page_reporting/parameters/reported_kib") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def page_reporting_on():
    base = "/sys/bus/virtio/devices"
    for d in os.listdir(base) if os.path.isdir(base) else []:
        try:
            with open(os.path.join(base, d, "device")) as f:
                dev = f.read().strip()
            with open(os.path.join(base, d, "features")) as f:
                feat = f.read().strip()
        except OSError:
            continue
        # device 5 is the balloon; feature bit 5 is VIRTIO_BALLOON_F_REPORTING
        if dev == "0x0005" and len(feat) > 5 and feat[5] == "1":
            return True
    return False


def vm_memory_note(kib0):
    """Lines to print when the hypervisor took memory back during the run (reported_kib
    at its start: @kib0), or has free page reporting on; else none."""
    now = reported_kib()
    if kib0 is not None and now is not None:
        if now <= kib0:
            return []
        first = (f"note: the hypervisor took back {(now - kib0) / 1048576:.1f} GiB of freed "
                 "memory during the run (free page reporting);")
    elif page_reporting_on():
        first = "note: this virtual machine has free page reporting on (virtio-balloon);"
    else:
        return []
    return [first, "a first touch of memory taken back is slow, and timings vary from round "
            "to round with it,", "on both sides: compare medians too; see dmafs-bench(1), "
            "VIRTUAL MACHINES."]
