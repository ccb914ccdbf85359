#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# t_posix_many.py - many names and many processes on a mounted dmafs: a big directory
# (readdir, lookups, stable readdir while deleting and creating, and after a remount) and
# several processes on one file or one directory at once: the commands bigdir,
# bigdir-verify and concurrency of t_posix.py's COMMANDS.

import json
import os
import random
import time

from t_check import KIB, MIB, NAME, CheckFailed, check, content, read_file, say, write_file

# ---------------------------------------------------------------- big directory

def cmd_bigdir(args):
    """bigdir DIR N: create N entries, readdir exactly once each, lookup time, stable readdir
    while deleting every other entry."""
    d, n = args[0], int(args[1])
    os.makedirs(d, exist_ok=True)
    names = [f"entry-{i:06d}-{(i * 2654435761) % 1000003:07d}" for i in range(n)]
    say(f"creating {n} files in one directory")
    t0 = time.monotonic()
    for nm in names:
        os.close(os.open(os.path.join(d, nm), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    t1 = time.monotonic()
    say(f"  created in {t1 - t0:.1f} s ({n / (t1 - t0):.0f}/s)")
    say("readdir returns each name exactly once")
    seen = [e.name for e in os.scandir(d)]
    check(len(seen) == n, f"readdir returned {len(seen)} entries, expected {n}")
    check(len(set(seen)) == n, f"readdir returned {len(seen) - len(set(seen))} duplicate names")
    check(set(seen) == set(names), "readdir names differ from created names")
    say("lookup time: stat of 3000 random names (after the 1 s entry cache expired)")
    time.sleep(1.5)
    r = random.Random(80)
    sample = r.sample(names, 3000)
    t0 = time.monotonic()
    for nm in sample:
        os.stat(os.path.join(d, nm))
    dt = (time.monotonic() - t0) / len(sample)
    say(f"  {dt * 1e6:.0f} us per stat")
    check(dt < 0.005, f"stat in a {n}-entry dir takes {dt * 1e3:.2f} ms (> 5 ms: lookup looks linear)")
    t0 = time.monotonic()
    for i in range(2000):
        try:
            os.stat(os.path.join(d, f"missing-{i}"))
        except FileNotFoundError:
            pass
        else:
            raise CheckFailed(f"missing-{i} exists")
    dt = (time.monotonic() - t0) / 2000
    say(f"  {dt * 1e6:.0f} us per negative lookup")
    check(dt < 0.005, f"negative lookup takes {dt * 1e3:.2f} ms")
    say("stable readdir: delete every other entry (seen and unseen) during iteration")
    victims = set(sorted(names)[::2])
    order = sorted(victims)
    r.shuffle(order)
    counts = {}
    it = os.scandir(d)
    k = 0
    for e in it:
        counts[e.name] = counts.get(e.name, 0) + 1
        # two deletions per entry returned so that all victims are gone half way through
        for _ in range(2):
            if k < len(order):
                os.unlink(os.path.join(d, order[k]))
                k += 1
    it.close()
    check(k == len(order), f"iteration ended after deleting only {k} of {len(order)}")
    dup = [nm for nm, c in counts.items() if c > 1]
    check(not dup, f"{len(dup)} names returned twice during deleting iteration, e.g. {dup[:3]}")
    unknown = set(counts) - set(names)
    check(not unknown, f"unknown names returned: {list(unknown)[:3]}")
    survivors = set(names) - victims
    missing = survivors - set(counts)
    check(not missing, f"{len(missing)} never-deleted names not returned during iteration, e.g. {sorted(missing)[:3]}")
    left = os.listdir(d)
    check(len(left) == len(survivors) and set(left) == survivors,
          f"after deleting, listing has {len(left)} names, expected {len(survivors)}")
    say("stable readdir: create 20000 new entries during iteration; old ones seen exactly once")
    counts = {}
    k = 0
    for e in os.scandir(d):
        counts[e.name] = counts.get(e.name, 0) + 1
        if k < 20000:
            os.close(os.open(os.path.join(d, f"new-{k:06d}"), os.O_WRONLY | os.O_CREAT, 0o644))
            k += 1
    dup = [nm for nm, c in counts.items() if c > 1]
    check(not dup, f"{len(dup)} names returned twice while creating, e.g. {dup[:3]}")
    missing = survivors - set(counts)
    check(not missing, f"{len(missing)} old names not returned while creating, e.g. {sorted(missing)[:3]}")
    for i in range(k):
        os.unlink(os.path.join(d, f"new-{i:06d}"))
    print(json.dumps({"survivors": len(survivors)}))


def cmd_bigdir_verify(args):
    d, n = args[0], int(args[1])
    names = [f"entry-{i:06d}-{(i * 2654435761) % 1000003:07d}" for i in range(n)]
    survivors = set(names) - set(sorted(names)[::2])
    left = [e.name for e in os.scandir(d)]
    say(f"after remount: {len(left)} names, each once, equal to the survivors")
    check(len(left) == len(set(left)), "duplicates after remount")
    check(set(left) == survivors, f"after remount {len(left)} names, expected {len(survivors)}")


# ---------------------------------------------------------------- concurrency

def _pwriter(p, k, nproc, chunk, total):
    fd = os.open(p, os.O_WRONLY)
    off = k * chunk
    while off < total:
        os.pwrite(fd, content(off, min(chunk, total - off)), off)
        off += nproc * chunk
    os.close(fd)


def _creator(d, k, n):
    for i in range(n):
        write_file(os.path.join(d, f"c{k}-{i}"), f"{k}-{i}".encode() * 10)
    for i in range(0, n, 2):
        os.unlink(os.path.join(d, f"c{k}-{i}"))


def _appender(p, k, n):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    for i in range(n):
        rec = f"{k:02d}:{i:06d}:".encode()
        rec += b"." * (509 - len(rec)) + b"|\n"
        check(len(rec) == 511, "record length")
        os.write(fd, rec)
    os.close(fd)


def _renamer(d, k, n, seed):
    r = random.Random(seed)
    for i in range(n):
        a, b = r.randrange(20), r.randrange(20)
        try:
            os.rename(os.path.join(d, f"r{a}"), os.path.join(d, f"r{b}"))
        except FileNotFoundError:
            pass


def _run_procs(targets):
    pids = []
    for fn, args in targets:
        pid = os.fork()
        if pid == 0:
            try:
                fn(*args)
                os._exit(0)
            except BaseException as e:   # noqa: B036 - report anything from the child
                print(f"[{NAME}] child {fn.__name__}{args[1:2]}: {e!r}", flush=True)
                os._exit(1)
        pids.append(pid)
    bad = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        bad += status != 0
    return bad


def cmd_concurrency(args):
    """concurrency DIR: several processes on one file / one directory at once."""
    d = args[0]
    os.makedirs(d, exist_ok=True)
    say("8 processes pwrite interleaved 100 KiB chunks of one 48 MiB file")
    p = os.path.join(d, "shared")
    total, chunk = 48 * MIB + 777, 100 * KIB + 3
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    check(_run_procs([(_pwriter, (p, k, 8, chunk, total)) for k in range(8)]) == 0, "a pwrite child failed")
    got = read_file(p)
    check(len(got) == total, f"shared file size {len(got)}, expected {total}")
    off = 0
    while off < total:
        n = min(chunk, total - off)
        check(got[off:off + n] == content(off, n), f"chunk at {off} wrong after concurrent pwrite")
        off += chunk
    say("4 processes create 1500 files each in one dir and unlink half")
    cd = os.path.join(d, "cdir")
    os.mkdir(cd)
    check(_run_procs([(_creator, (cd, k, 1500)) for k in range(4)]) == 0, "a creator child failed")
    want = {f"c{k}-{i}" for k in range(4) for i in range(1, 1500, 2)}
    got_names = os.listdir(cd)
    check(len(got_names) == len(set(got_names)), "duplicate names after concurrent creates")
    check(set(got_names) == want, f"dir has {len(got_names)} names, expected {len(want)}")
    for nm in list(want)[:300]:
        k, i = nm[1:].split("-")
        check(read_file(os.path.join(cd, nm)) == f"{k}-{i}".encode() * 10, f"{nm} content")
    say("4 processes O_APPEND 2000 records each: no record lost or torn")
    ap = os.path.join(d, "append")
    write_file(ap, b"")
    check(_run_procs([(_appender, (ap, k, 2000)) for k in range(4)]) == 0, "an appender child failed")
    data = read_file(ap)
    check(len(data) == 4 * 2000 * 511, f"append file {len(data)} bytes, expected {4 * 2000 * 511}")
    recs = data.split(b"\n")[:-1]
    seen = set()
    for rec in recs:
        check(len(rec) == 510 and rec.endswith(b"|"), f"torn append record {rec[:30]!r}")
        seen.add(rec[:10])
    check(len(seen) == 8000, f"{len(seen)} distinct records, expected 8000")
    say("4 processes rename among 20 names 3000 times; names are conserved")
    rd = os.path.join(d, "rdir")
    os.mkdir(rd)
    for i in range(20):
        write_file(os.path.join(rd, f"r{i}"), b"r")
    check(_run_procs([(_renamer, (rd, k, 3000, k)) for k in range(4)]) == 0, "a renamer child failed")
    left = os.listdir(rd)
    check(1 <= len(left) <= 20 and all(n.startswith("r") for n in left), f"after rename storm: {left}")
    for n in left:
        check(read_file(os.path.join(rd, n)) == b"r", f"{n} content after rename storm")
