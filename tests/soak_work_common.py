#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# soak_work_common.py - what the processes of soak_work.py share: the limits and the names
# of the tree, say(), and the per-process counts of operations, accepted races and
# unexpected errors (Stats).

import errno
import os

NAME = "soak_work"
KIB = 1024
MIB = 1024 * KIB
MAX_WRITE = 2 * MIB          # one write is at most this
FILE_CAP = 5 * MIB // 2      # files never grow past this (keeps the fs from filling)
LOW_SPACE = 48 * MIB         # ENOSPC is accepted only with less free space than this
SYMLINK_DEAD = "/nonexistent-dmafs-soak/"
# Races between processes in the shared tree: these errnos are expected there
# (ELOOP: O_NOFOLLOW met a name that another writer has just made a symlink).
RACE_ERRNOS = {errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.ELOOP}

N_SHARED_DIRS = 4            # shared/d0..d3
N_SHARED_SUB = 3             # shared/dK/s0..s2 (moved between the dK, removed, made)
N_SHARED_NAMES = 6           # f0..f5 and l0..l2 in each directory
PRIV_SUBS = ["", "sub0", "sub1", "sub2"]
PRIV_NAMES = 4               # n0..n3 in each private directory


def say(msg):
    print(f"[{NAME}] {msg}", flush=True)


def en(e):
    return errno.errorcode.get(e, str(e))


def space_low(mnt):
    try:
        st = os.statvfs(mnt)
        return st.f_bavail * st.f_frsize < LOW_SPACE
    except OSError:
        return False


class Stats:
    def __init__(self, mnt, who):
        self.mnt = mnt
        self.who = who
        self.ops = {}
        self.races = {}
        self.enospc_full = 0
        self.unexpected = []     # (op, path, errno name)
        self.mismatch = []       # model mismatches (strings)

    def op(self, name):
        self.ops[name] = self.ops.get(name, 0) + 1

    def err(self, opname, path, e, races_ok):
        """Classify an OSError; returns nothing, records it."""
        no = e.errno
        if races_ok and no in RACE_ERRNOS:
            self.races[en(no)] = self.races.get(en(no), 0) + 1
            return
        if no == errno.ENOSPC and space_low(self.mnt):
            self.enospc_full += 1
            return
        if len(self.unexpected) < 50:
            self.unexpected.append((opname, path, en(no), str(e)))
        else:
            self.unexpected.append(None)

    def bad(self, msg):
        if len(self.mismatch) < 50:
            self.mismatch.append(msg)

    def result(self):
        return {"who": self.who, "ops": self.ops, "races": self.races,
                "enospc_full": self.enospc_full,
                "unexpected": [u for u in self.unexpected if u] ,
                "n_unexpected": len(self.unexpected),
                "mismatch": self.mismatch}
