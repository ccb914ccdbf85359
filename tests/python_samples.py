# SPDX-License-Identifier: MIT
"""python_samples.py DIR DEVICE [--expect-posix] - checks of dmafs.SampleReader and
dmafs.batches() on files made in DIR (on the mount under test, or off dmafs with
--expect-posix), placing into DEVICE ("cpu" or "cuda:0"). Every placed byte is compared
with the file's bytes as open().read() gives them. Exit 0, or 1 with the first difference."""
import os
import random
import sys
import warnings

import torch

import dmafs

d, device = sys.argv[1], sys.argv[2]
posix = "--expect-posix" in sys.argv
rng = random.Random(7)


def say(msg):
    print(f"[python_samples] {msg}", flush=True)


def fail(msg):
    sys.exit(f"[python_samples] FAIL: {msg}")


os.makedirs(d, exist_ok=True)
files, data = [], []
for i in range(300):
    size = rng.choice([0, 1, 4095, 4096, 48 << 10, 50000, 70000]) if i < 40 else rng.randrange(1, 60000)
    p = os.path.join(d, f"{i // 100:02d}", f"f{i:05d}.bin")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    b = rng.randbytes(size)
    with open(p, "wb") as f:
        f.write(b)
    files.append(p)
    data.append(b)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    reader = dmafs.SampleReader(files, device=device)
    out = reader.empty((64, 48 << 10))
    for rnd in range(10):
        ix = [rng.randrange(len(files)) for _ in range(64)]
        out.fill_(0xEE)
        lens = reader.read_into(out, ix)
        host = out.cpu()
        for r, i in enumerate(ix):
            want = data[i][:48 << 10]
            if int(lens[r]) != len(want):
                fail(f"round {rnd} row {r} ({files[i]}): {int(lens[r])} bytes, expected {len(want)}")
            row = bytes(host[r].numpy().tobytes())
            if row[:len(want)] != want:
                fail(f"round {rnd} row {r} ({files[i]}): bytes differ from the file")
            if row[len(want):] != b"\xee" * ((48 << 10) - len(want)):
                fail(f"round {rnd} row {r}: bytes after the sample were written")
    say(f"whole-file samples into {device}: 10 x 64 rows equal to the files "
        f"({reader.last_result[1]} path)")
    # the same as a tensor of indices (int32 too), as batches() passes them
    for dt in (torch.int64, torch.int32):
        ix = [rng.randrange(len(files)) for _ in range(64)]
        out.fill_(0xEE)
        lens = reader.read_into(out, torch.tensor(ix, dtype=dt))
        host = out.cpu()
        for r, i in enumerate(ix):
            want = data[i][:48 << 10]
            row = bytes(host[r].numpy().tobytes())
            if int(lens[r]) != len(want) or row[:len(want)] != want or \
                    row[len(want):] != b"\xee" * ((48 << 10) - len(want)):
                fail(f"tensor of indices ({dt}): row {r} ({files[i]}) differs")
    # a 1-D tensor with a stride: the last sample may end before its stride does
    short = min(range(len(files)), key=lambda i: len(data[i]))
    tight = reader.empty(3 * 65536 + len(data[short]))
    lens = reader.read_into(tight, torch.tensor([1, 2, 3, short]), stride=65536)
    got = tight.cpu().numpy().tobytes()
    if int(lens[3]) != len(data[short]) or got[3 * 65536:] != data[short]:
        fail("a last sample shorter than its stride, into a tensor that just holds it, differs")
    try:
        big = max(range(len(files)), key=lambda i: len(data[i]))
        reader.read_into(tight, torch.tensor([1, 2, 3, big]), stride=65536)
        fail("samples needing more than the tensor holds were accepted")
    except ValueError:
        pass
    for bad in ([0, -1], [0, len(files)]):
        try:
            reader.read_into(out, torch.tensor(bad))
            fail(f"a tensor index out of range ({bad[1]}) was accepted")
        except IndexError:
            pass
    say("the same as int64 and int32 index tensors; a short last sample; bad indices refused")
    # ranges, packed, more samples than one request takes (320)
    flat = reader.empty(8 << 20)
    spec = []
    for _ in range(700):
        i = rng.randrange(len(files))
        off = rng.randrange(len(data[i]) + 100)
        spec.append((i, off, rng.randrange(1, 9000)))
    lens = reader.read_into(flat, spec)
    host = flat.cpu().numpy().tobytes()
    at = 0
    for k, (i, off, ln) in enumerate(spec):
        want = data[i][off:off + ln]
        if int(lens[k]) != len(want) or host[at:at + len(want)] != want:
            fail(f"range sample {k} ({files[i]} at {off}, {ln} bytes) differs")
        at += ln
    flat.fill_(0xEE)
    lens = reader.read_into(flat, tuple(torch.tensor(c) for c in zip(*spec)))
    host = flat.cpu().numpy().tobytes()
    at = 0
    for k, (i, off, ln) in enumerate(spec):
        want = data[i][off:off + ln]
        if int(lens[k]) != len(want) or host[at:at + len(want)] != want or \
                host[at + len(want):at + ln] != b"\xee" * (ln - len(want)):
            fail(f"range sample {k} given as tensors ({files[i]} at {off}, {ln} bytes) differs")
        at += ln
    say("700 (file, offset, length) samples packed into one tensor: equal (as lists and as tensors)")
    # a tensor not from empty(): placed and copied, with a warning
    plain = torch.zeros((4, 48 << 10), dtype=torch.uint8, device=device)
    reader.read_into(plain, [0, 5, 6, 7])
    for r, i in enumerate([0, 5, 6, 7]):
        if bytes(plain[r].cpu().numpy().tobytes()[:len(data[i][:48 << 10])]) != data[i][:48 << 10]:
            fail(f"read_into a plain tensor: row {r} differs")
    if not any("not made by SampleReader.empty" in str(w.message) for w in caught):
        fail("no SlowPathWarning for a tensor not from empty()")
    try:
        reader.read_into(out, [(0, 0, 10), (len(files), 0, 10)])
        fail("a sample of a file index out of range was accepted")
    except IndexError:
        pass
    reader.close()
    posix_warned = any("is not on dmafs" in str(w.message) for w in caught)
    if posix != posix_warned:
        fail(f"the POSIX-path warning was {'missing' if posix else 'given on dmafs'}")

# batches(): every file once per epoch, padded rows, in order of the index
seen = []
for b in dmafs.batches(files, 32, sample_bytes=48 << 10, device=device, seed=3, epochs=2):
    host = b.data.cpu()
    for r in range(b.index.numel()):
        i = int(b.index[r])
        want = data[i][:48 << 10]
        row = bytes(host[r].numpy().tobytes())
        if int(b.lengths[r]) != len(want) or row[:len(want)] != want or any(row[len(want):]):
            fail(f"batches(): file {files[i]} differs (or its padding is not zero)")
        seen.append(i)
if sorted(seen) != sorted(list(range(len(files))) * 2):
    fail("batches(): two epochs did not give every file twice")
say(f"batches(): 2 epochs of {len(files)} files in batches of 32, each equal, padding zero")
# batches(records=...): byte ranges of shard files, some running past their end
shards, sdata = [], []
for k, size in enumerate([1 << 20, 300001, 5000, 0]):
    p = os.path.join(d, f"shard{k}.bin")
    b = rng.randbytes(size)
    with open(p, "wb") as f:
        f.write(b)
    shards.append(p)
    sdata.append(b)
recs = [(s, rng.randrange(len(sdata[s]) + 100), rng.randrange(8193))
        for s in (rng.randrange(4) for _ in range(500))]
recs[:3] = [(0, 0, 8192), (1, 300001 - 10, 8192), (2, 4096, 904)]  # whole, past the end, exact end
rf, ro, rl = (torch.tensor([r[j] for r in recs]) for j in range(3))
import dmafs._samples as samples_mod
rtab_bytes = samples_mod._RTAB_BYTES
# the records' entries made once (the default), and gathered per batch (past the bound)
for bound in (rtab_bytes, 0):
    samples_mod._RTAB_BYTES = bound
    seen = []
    for b in dmafs.batches(shards, 64, sample_bytes=8192, device=device, seed=5, epochs=2,
                           records=(rf, ro, rl.to(torch.int32))):
        host = b.data.cpu()
        for r in range(b.index.numel()):
            k = int(b.index[r])
            s, o, ln = recs[k]
            want = sdata[s][o:o + ln]
            row = bytes(host[r].numpy().tobytes())
            if int(b.lengths[r]) != len(want) or row[:len(want)] != want or any(row[len(want):]):
                fail(f"batches(records): record {k} ({shards[s]} at {o}, {ln} bytes) differs "
                     f"(or its padding is not zero): {int(b.lengths[r])} bytes placed, "
                     f"{len(want)} expected (entries bound {bound})")
            seen.append(k)
    if sorted(seen) != sorted(list(range(len(recs))) * 2):
        fail(f"batches(records): two epochs did not give every record twice (entries bound {bound})")
samples_mod._RTAB_BYTES = rtab_bytes
say(f"batches(records=...): 2 epochs of {len(recs)} ranges of 4 shard files, each equal, padding "
    "zero, with the records' entries made once and per batch")
for bad, exc, why in (((rf, ro, rl + 1), ValueError, "longer than sample_bytes"),
                      ((rf + 4, ro, rl), IndexError, "is not one of the reader's"),
                      ((rf, ro[:-1], rl), ValueError, "one of each per record"),
                      ((rf, ro - 10 ** 9, rl), ValueError, ">= 0")):
    try:
        next(dmafs.batches(shards, 64, sample_bytes=8192, device=device, records=bad))
    except exc as e:
        if why not in str(e):
            fail(f"batches(records): bad records refused with {e!r}, expected {why!r}")
    else:
        fail(f"batches(records): records that are bad ({why}) were accepted")
say("batches(records=...): records too long, naming no file, of unequal counts or negative refused")
try:
    next(dmafs.batches(files, 2, sample_bytes=1 << 32, device=device))
    fail("batches(): a sample_bytes of 4 GiB (past a request entry's length) was accepted")
except ValueError as e:
    if "at most 4 GiB" not in str(e):
        fail(f"batches(): sample_bytes of 4 GiB refused with {e!r}")
# fewer workers and buffers than the defaults, each file once
got = [int(i) for b in dmafs.batches(files, 7, sample_bytes=48 << 10, device=device,
                                     workers=1, depth=1) for i in b.index]
if sorted(got) != list(range(len(files))):
    fail(f"batches(workers=1, depth=1) gave {len(got)} samples, not every file once")
# stopping early frees everything (no thread left behind)
it = dmafs.batches(files, 16, sample_bytes=4096, device=device)
next(it)
it.close()
# the DataLoader integration
dl = torch.utils.data.DataLoader(dmafs.SampleDataset(files, 50, sample_bytes=48 << 10,
                                                     device=device, shuffle=False),
                                 batch_size=None, num_workers=0)
n = sum(b.index.numel() for b in dl)
if n != len(files):
    fail(f"SampleDataset gave {n} samples, expected {len(files)}")
say("SampleDataset through a DataLoader: every file once")
say("PASS")
