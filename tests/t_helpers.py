#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_helpers.py - the command line of the Python helpers of the mounted dmafs tests, for
# the checks the shell cannot make (renameat2, xattr errnos, mmap, readdir while
# deleting, superblocks, crash workloads...). The helpers live in modules by what they
# help:
#
#   t_check.py    shared by all: check(), say(), errno expectations, seeded data, run()
#   t_posix.py    POSIX semantics on a mount: files, directories, rename, xattrs, big
#                 directories, concurrent processes (with t_posix_rename.py,
#                 t_posix_xattr.py and t_posix_many.py)
#   t_ondisk.py   what the members hold: superblocks, layouts, stripes, bytes read from
#                 the images, tree manifests, GPT
#   t_crash.py    the crash workload and its check after kill -9 or a power cut
#
# (python_check.py and t_load_check.py hold the loader and model checks.)
#
# Usage: t_helpers.py COMMAND ARGS...   (COMMAND from the modules' COMMANDS tables)
# Every command prints what it checks; exit 0 = all checks passed, 1 = a check
# failed (the message says which and why), 2 = usage error.

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import t_check  # noqa: E402
import t_crash  # noqa: E402
import t_ondisk  # noqa: E402
import t_posix  # noqa: E402
# Names that tests use through "import t_helpers".
from t_ondisk import dev_size, read_sb  # noqa: E402,F401

COMMANDS = {**t_posix.COMMANDS, **t_ondisk.COMMANDS, **t_crash.COMMANDS}

if __name__ == "__main__":
    sys.exit(t_check.run(COMMANDS, sys.argv))
