#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_check.py - what every dmafs test helper module shares: CheckFailed and check(), say(),
# errno expectations, seeded data, whole-file writes with fsync, waiting with a deadline,
# renameat2(2), and the command dispatcher (run()) of tests/t_helpers.py.

import ctypes
import errno
import hashlib
import os
import random
import sys
import time

NAME = "t_helpers"
KIB = 1024
MIB = 1024 * 1024
GIB = 1024 * MIB

class CheckFailed(Exception):
    pass


def say(msg):
    print(f"[{NAME}] {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def expect_errno(errnos, fn, *args, what=""):
    """fn(*args) must raise OSError with errno in errnos (an int or a tuple)."""
    if isinstance(errnos, int):
        errnos = (errnos,)
    want = "/".join(errno.errorcode[e] for e in errnos)
    try:
        fn(*args)
    except OSError as e:
        check(e.errno in errnos,
              f"{what}: expected {want}, got {errno.errorcode.get(e.errno, e.errno)} ({e})")
        return
    raise CheckFailed(f"{what}: succeeded, expected {want}")


def rnd(seed, n):
    return random.Random(seed).randbytes(n)


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        mv = memoryview(data)
        while mv:
            n = os.write(fd, mv)
            mv = mv[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def wait_for(pred, timeout, step=0.1):
    end = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > end:
            return False
        time.sleep(step)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# ---------------------------------------------------------------- renameat2

_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def renameat2(old, new, flags):
    fn = _libc.renameat2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    r = fn(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def content(seed, size):
    return rnd(seed, size)


def run(commands, argv):
    """Run the command argv[1] of commands with argv[2:]: 0 when every check passed, 1 when
    one failed (the message says which and why), 2 for a usage error."""
    if len(argv) < 2 or argv[1] not in commands:
        print(f"usage: {argv[0]} {'|'.join(commands)} ARGS...", file=sys.stderr)
        return 2
    try:
        commands[argv[1]](argv[2:])
    except CheckFailed as e:
        print(f"[{NAME}] FAIL: {e}", flush=True)
        return 1
    except OSError as e:
        print(f"[{NAME}] FAIL: unexpected error: {e}", flush=True)
        import traceback
        traceback.print_exc(file=sys.stdout)
        return 1
    return 0
