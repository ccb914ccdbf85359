#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Description: checks of the dmafs Python module (lib/python/dmafs) against a reference
# safetensors reader written here from the format: load_file/load/safe_open on cpu (and
# cuda when torch sees a GPU, also against safetensors.torch when importable), sharded
# models, a Hugging Face snapshot of symlinks, lifetime of host placements, the posix
# fallback warning, malformed files, dtypes this torch lacks.
#
# Usage:
#   python_check.py gen DIR                        write the test models into DIR (no torch)
#   python_check.py check MNTDIR SHMDIR [MODEL...]  MNTDIR: DIR copied onto dmafs; SHMDIR:
#                                                  its mixed/ copied elsewhere; MODEL: more
#                                                  model dirs on dmafs (synthetic models)
# Exit: 0 all checks passed, 1 a check failed (says which), 2 usage, 77 skipped (no torch).

import errno
import gc
import hashlib
import json
import os
import random
import struct
import sys
import time
import warnings

NAME = "python_check"

# safetensors dtype -> (element size in bytes, torch attribute); F4 packs two per byte.
DTYPES = {
    "BOOL": (1, "bool"), "U8": (1, "uint8"), "I8": (1, "int8"), "I16": (2, "int16"),
    "U16": (2, "uint16"), "F16": (2, "float16"), "BF16": (2, "bfloat16"),
    "I32": (4, "int32"), "U32": (4, "uint32"), "F32": (4, "float32"), "F64": (8, "float64"),
    "I64": (8, "int64"), "U64": (8, "uint64"), "F8_E4M3": (1, "float8_e4m3fn"),
    "F8_E5M2": (1, "float8_e5m2"), "F8_E8M0": (1, "float8_e8m0fnu"),
    "F4": (0.5, "float4_e2m1fn_x2"),
}
# dtypes not every torch has: one file each, so that one refusal does not hide the rest.
EXOTIC = ("U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4")


class CheckFailed(Exception):
    pass


def say(msg):
    print(f"[{NAME}] {msg}", flush=True)


def check(cond, msg):
    if not cond:
        raise CheckFailed(msg)


# ---------------------------------------------------------------- writing test models


def nbytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return int(n * DTYPES[dtype][0])


def payload(rng, dtype, n):
    if dtype == "BOOL":
        return bytes(rng.getrandbits(1) for _ in range(n))
    return rng.randbytes(n)


def write_st(path, tensors, metadata=None, keep_order=False, rng=None):
    """tensors: [(name, dtype, shape)]. Laid out like safetensors' writer (largest element
    first, so every tensor is aligned) unless keep_order. Returns the file's sha256."""
    rng = rng or random.Random(path)
    order = list(tensors) if keep_order else sorted(
        tensors, key=lambda t: (-DTYPES[t[1]][0], t[0]))
    header, data, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in order:
        n = nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        data.append(payload(rng, dtype, n))
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    blob = struct.pack("<Q", len(h)) + h + b"".join(data)
    with open(path, "wb") as f:
        f.write(blob)
    return hashlib.sha256(blob).hexdigest()


def layer_tensors(first, last, hidden=256, inter=704, dtype="BF16"):
    out = []
    for i in range(first, last):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj.weight", dtype, (hidden, hidden)),
                (p + "self_attn.k_proj.weight", dtype, (hidden // 4, hidden)),
                (p + "self_attn.k_proj.bias", dtype, (hidden // 4,)),
                (p + "mlp.gate_proj.weight", dtype, (inter, hidden)),
                (p + "mlp.down_proj.weight", dtype, (hidden, inter)),
                (p + "input_layernorm.weight", dtype, (hidden,))]
    return out


def gen(root):
    os.makedirs(root, exist_ok=True)
    d = os.path.join(root, "mixed")
    os.makedirs(d)
    # Every dtype of torch 1.13, a 0-d scalar, an empty tensor, 1-byte and odd sizes,
    # and a few MiB so that reads cross stripe units.
    mixed = [("embed.weight", "BF16", (2048, 512)), ("f16", "F16", (3, 5, 7)),
             ("f32", "F32", (1000, 257)), ("f64", "F64", (33,)), ("i64", "I64", (4, 4)),
             ("i32", "I32", (17,)), ("i16", "I16", (9, 3)), ("i8", "I8", (5,)),
             ("u8", "U8", (1,)), ("mask", "BOOL", (2, 3)), ("scalar", "F32", ()),
             ("empty", "F32", (0, 4)), ("empty_bf16", "BF16", (0,))]
    mixed += layer_tensors(0, 2)
    write_st(os.path.join(d, "model.safetensors"), mixed,
             metadata={"format": "pt", "note": "dmafs python_check"})
    # An F32 at offset 3, an I16 at offset 23: legal, but torch views only aligned data.
    d = os.path.join(root, "misaligned")
    os.makedirs(d)
    write_st(os.path.join(d, "model.safetensors"),
             [("flags", "BOOL", (3,)), ("odd_f32", "F32", (5,)), ("odd_i16", "I16", (2,)),
              ("tail", "U8", (3,))], keep_order=True)
    # Three shards with an index.
    d = os.path.join(root, "sharded")
    os.makedirs(d)
    shards = [[("model.embed_tokens.weight", "BF16", (1024, 256))] + layer_tensors(0, 2),
              layer_tensors(2, 4),
              layer_tensors(4, 5) + [("model.norm.weight", "BF16", (256,)),
                                     ("lm_head.weight", "BF16", (1024, 256))]]
    weight_map, total = {}, 0
    for i, ts in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_st(os.path.join(d, fn), ts, metadata={"format": "pt"})
        for name, dt, shape in ts:
            weight_map[name] = fn
            total += nbytes(dt, shape)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    # A Hugging Face cache: snapshots/<rev>/* are relative symlinks to blobs/<sha256>.
    repo = os.path.join(root, "hf", "models--dmafs--tiny")
    blobs = os.path.join(repo, "blobs")
    rev = "0123456789abcdef0123456789abcdef01234567"
    snap = os.path.join(repo, "snapshots", rev)
    os.makedirs(blobs)
    os.makedirs(snap)
    os.makedirs(os.path.join(repo, "refs"))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(rev)
    weight_map = {}
    files = {}
    for i, ts in enumerate([layer_tensors(0, 2) + [("model.norm.weight", "BF16", (256,))],
                            layer_tensors(2, 3) + [("lm_head.weight", "F32", (300, 256))]]):
        fn = f"model-{i + 1:05d}-of-00002.safetensors"
        tmp = os.path.join(blobs, "tmp")
        sha = write_st(tmp, ts, metadata={"format": "pt"})
        os.rename(tmp, os.path.join(blobs, sha))
        files[fn] = sha
        for name, _, _ in ts:
            weight_map[name] = fn
    extra = {"model.safetensors.index.json": json.dumps({"metadata": {}, "weight_map": weight_map}),
             "config.json": json.dumps({"model_type": "dmafs-tiny"})}
    for fn, text in extra.items():
        sha = hashlib.sha256(text.encode()).hexdigest()
        with open(os.path.join(blobs, sha), "w") as f:
            f.write(text)
        files[fn] = sha
    for fn, sha in files.items():
        os.symlink(os.path.join("..", "..", "blobs", sha), os.path.join(snap, fn))
    # Malformed files.
    d = os.path.join(root, "bad")
    os.makedirs(d)
    good = os.path.join(root, "mixed", "model.safetensors")
    with open(good, "rb") as f:
        blob = f.read()
    with open(os.path.join(d, "truncated.safetensors"), "wb") as f:
        f.write(blob[:len(blob) // 2])              # tensors past the end of the file
    with open(os.path.join(d, "notjson.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", 16) + b"{not json at all" + b"\0" * 64)
    with open(os.path.join(d, "hugeheader.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")
    # One file per dtype that older torch lacks.
    d = os.path.join(root, "dtypes")
    os.makedirs(d)
    for dt in EXOTIC:
        write_st(os.path.join(d, dt + ".safetensors"), [("t." + dt, dt, (4, 16))])
    say(f"test models written under {root}")


# ---------------------------------------------------------------- reference reader


def st_files(path):
    """The .safetensors files of a model path, as load() finds them (for the reference)."""
    if os.path.isfile(path) and path.endswith(".json"):
        with open(path) as f:
            wm = json.load(f)["weight_map"]
        base = os.path.dirname(path)
        return sorted({os.path.join(base, v) for v in wm.values()})
    if os.path.isdir(path):
        return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".safetensors"))
    return [path]


def ref_load(path):
    """{name: cpu tensor} read with plain file I/O from the format description."""
    import torch
    out = {}
    for fn in st_files(path):
        with open(fn, "rb") as f:
            blob = f.read()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        header.pop("__metadata__", None)
        base = 8 + n
        for name, info in header.items():
            s, e = info["data_offsets"]
            dt = getattr(torch, DTYPES[info["dtype"]][1], None)
            if dt is None:
                continue
            shape = list(info["shape"])
            if info["dtype"] == "F4":
                shape[-1] //= 2
            raw = blob[base + s:base + e]
            u8 = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
            check(name not in out, f"reference: {name} twice in {path}")
            out[name] = u8.view(dt).reshape(shape)
    return out


def ref_metadata(fn):
    with open(fn, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__")


def end_rank(fails):
    """The end of one rank of a torch.distributed test: its failures printed, the ranks
    met, the process group gone; exits 1 when this rank failed."""
    import torch.distributed as dist
    for f in fails:
        print("FAIL " + f, flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if fails:
        os._exit(1)


def sectors_read(devs):
    """Bytes read so far from block devices @devs (/sys/block/NAME/stat, 512-byte sectors)."""
    total = 0
    for d in devs:
        with open(f"/sys/block/{os.path.basename(d)}/stat") as f:
            total += int(f.read().split()[2])
    return total * 512


def raw_bytes(t):
    """The bytes of a tensor as a cpu uint8 tensor (viewed on its device first: torch has no
    copy kernels for some dtypes, float4_e2m1fn_x2 among them)."""
    import torch
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.reshape(-1).view(torch.uint8).cpu()


def same(got, ref, what, device=None):
    import torch
    check(isinstance(got, dict), f"{what}: got {type(got).__name__}, not a dict")
    check(set(got) == set(ref), f"{what}: keys differ: only dmafs {sorted(set(got) - set(ref))[:5]}, "
          f"only reference {sorted(set(ref) - set(got))[:5]}")
    for k, r in ref.items():
        g = got[k]
        check(g.dtype == r.dtype, f"{what}: {k}: dtype {g.dtype}, expected {r.dtype}")
        check(tuple(g.shape) == tuple(r.shape), f"{what}: {k}: shape {tuple(g.shape)}, expected {tuple(r.shape)}")
        if device is not None:
            check(g.device == torch.device(device), f"{what}: {k}: on {g.device}, expected {device}")
        check(torch.equal(raw_bytes(g), raw_bytes(r)), f"{what}: {k}: bytes differ from the reference")


def digest(tensors):
    """sha256 over names, dtypes, shapes and bytes, in name order (compares across processes)."""
    h = hashlib.sha256()
    for k in sorted(tensors):
        t = tensors[k]
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(raw_bytes(t).numpy().tobytes())
    return h.hexdigest()


def expect_warning(fn, category, want):
    """Call fn with warnings recorded; returns (result, [warnings of category])."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = fn()
    got = [x for x in w if issubclass(x.category, category)]
    if want is not None:
        check(len(got) == want, f"expected {want} {category.__name__}, got {len(got)}: "
              f"{[str(x.message) for x in got]}")
    return res, got


def host_maps():
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if "dmafs-host" in line)


def fds_under(root):
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(root + "/") or \
                    os.readlink(f"/proc/self/fd/{fd}") == root:
                n += 1
        except OSError:
            pass
    return n


# ---------------------------------------------------------------- checks


def checks_cpu(dmafs, torch, mnt, shm, models):
    mixed = os.path.join(mnt, "mixed", "model.safetensors")
    say("load_file(cpu) of a file of every dtype equals the reference; path host, no warning")
    sd, _ = expect_warning(lambda: dmafs.load_file(mixed), dmafs.SlowPathWarning, 0)
    same(sd, ref_load(mixed), "load_file mixed", "cpu")
    st = dmafs.last_stats()
    check(st is not None and st.path == "host", f"last_stats path {st and st.path}, expected host")
    check(st.bytes == os.path.getsize(mixed), f"last_stats bytes {st.bytes} != file size")
    check(st.seconds > 0 and st.gbps > 0 and st.tensors == len(sd) and st.files == 1,
          f"last_stats incomplete: {st!r}")
    say(f"  {st!r}")
    check(len({t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()
               for t in sd.values() if t.numel()}) == 1, "tensors are not views of one allocation")
    del sd

    say("misaligned tensors (offsets 3 and 23) load with the right values")
    mis = os.path.join(mnt, "misaligned", "model.safetensors")
    same(dmafs.load_file(mis), ref_load(mis), "load_file misaligned", "cpu")

    say("load(dir) and load(index.json) of a 3-shard model equal the reference")
    sh = os.path.join(mnt, "sharded")
    ref = ref_load(sh)
    same(dmafs.load(sh), ref, "load sharded dir", "cpu")
    check(dmafs.last_stats().files == 3, f"sharded: {dmafs.last_stats().files} files, expected 3")
    same(dmafs.load(os.path.join(sh, "model.safetensors.index.json")), ref, "load index.json", "cpu")

    say("load(Hugging Face snapshot of symlinks to blobs) equals the reference")
    snapdir = os.path.join(mnt, "hf", "models--dmafs--tiny", "snapshots")
    snap = os.path.join(snapdir, os.listdir(snapdir)[0])
    same(dmafs.load(snap), ref_load(snap), "load snapshot", "cpu")
    check(dmafs.last_stats().path == "host", "snapshot: not placed through the host path")

    for m in models:
        say(f"synthetic model {m}: load() equals the reference")
        ref = ref_load(m)
        same(dmafs.load(m), ref, f"load {m}", "cpu")
        say(f"  {dmafs.last_stats()!r}")
        files = st_files(m)
        if len(files) == 1:
            same(dmafs.load_file(files[0]), ref, f"load_file {files[0]}", "cpu")
        del ref

    say("safe_open: keys, metadata, get_tensor, get_slice; tensors outlive the context")
    ref = ref_load(mixed)
    with dmafs.safe_open(mixed, framework="pt", device="cpu") as f:
        check(f.keys() == sorted(ref), "safe_open keys() differ from the sorted reference names")
        check(f.metadata() == ref_metadata(mixed), f"metadata {f.metadata()} != {ref_metadata(mixed)}")
        got = {k: f.get_tensor(k) for k in f.keys()}
        sl = f.get_slice("f32")
        check(sl.get_shape() == [1000, 257] and sl.get_dtype() == "F32", "get_slice shape/dtype")
        check(torch.equal(raw_bytes(sl[2:4, :3]), raw_bytes(ref["f32"][2:4, :3])), "get_slice values")
        try:
            f.get_tensor("no.such.tensor")
            raise CheckFailed("get_tensor of a missing name did not raise")
        except KeyError:
            pass
    same(got, ref, "safe_open", "cpu")
    del got
    with dmafs.safe_open(os.path.join(mnt, "misaligned", "model.safetensors")) as f:
        check(f.metadata() is None, "metadata() of a file without __metadata__ is not None")

    say("lifetime: one view keeps the host placement alive; the last one releases it")
    gc.collect()
    maps0, fds0 = host_maps(), fds_under(mnt)
    sd = dmafs.load_file(mixed)
    keep = sd["f32"][10:20]
    check(host_maps() == maps0 + 1, f"dmafs-host mappings {host_maps()}, expected {maps0 + 1}")
    del sd
    gc.collect()
    check(host_maps() == maps0 + 1, "placement unmapped while a view of it is alive")
    check(torch.equal(raw_bytes(keep), raw_bytes(ref["f32"][10:20])), "view changed after the dict was dropped")
    check(fds_under(mnt) == fds0 + 1, f"{fds_under(mnt) - fds0} descriptors on the mount, expected 1 (session)")
    del keep
    gc.collect()
    check(host_maps() == maps0, "placement still mapped after its last tensor was freed")
    check(fds_under(mnt) == fds0, "session descriptor still open after the last tensor was freed")

    say("a placement failing while the views are made: its error, nothing left behind, next load whole")
    from dmafs import _torch as dtorch
    real_place = dtorch.Target.place

    def failing_place(self, model, part, threads):
        real_place(self, model, part, threads)
        time.sleep(0.05)  # the caller's thread is making views meanwhile
        raise OSError(errno.EIO, "injected placement failure", model.path)

    dtorch.Target.place = failing_place
    try:
        dmafs.load_file(mixed)
        check(False, "load_file returned although its placement failed")
    except OSError as e:
        check(e.errno == errno.EIO and "injected" in str(e), f"unexpected error {e!r}")
    finally:
        dtorch.Target.place = real_place
    gc.collect()
    check(host_maps() == maps0, f"dmafs-host mappings {host_maps()} after a failed load, expected {maps0}")
    check(fds_under(mnt) == fds0, "session descriptor left open by a failed load")
    same(dmafs.load_file(mixed), ref, "load_file after a failed load", "cpu")

    say("posix fallback (file outside dmafs): values right, one SlowPathWarning saying posix and why")
    outside = os.path.join(shm, "mixed", "model.safetensors")
    sd, w = expect_warning(lambda: dmafs.load_file(outside), dmafs.SlowPathWarning, 1)
    same(sd, ref, "load_file outside dmafs", "cpu")
    msg = str(w[0].message)
    check("posix" in msg and "not on a dmafs mount" in msg and outside in msg,
          f"SlowPathWarning text lacks path/reason: {msg}")
    check(issubclass(dmafs.SlowPathWarning, UserWarning), "SlowPathWarning is not a UserWarning")
    check(w[0].filename == __file__, f"warning attributed to {w[0].filename}, not the caller")
    check(dmafs.last_stats().path == "posix", "last_stats path is not posix")
    say(f"  {msg}")
    del sd

    def via_safe_open():
        with dmafs.safe_open(outside) as f:
            return [f.get_tensor(k) for k in f.keys()]
    _, w = expect_warning(via_safe_open, dmafs.SlowPathWarning, 1)
    check(w[0].filename == __file__, f"safe_open warning attributed to {w[0].filename}")

    say("malformed files raise OSError(EINVAL) naming the file")
    bad = os.path.join(mnt, "bad")
    for fn in sorted(os.listdir(bad)):
        p = os.path.join(bad, fn)
        try:
            dmafs.load_file(p)
            raise CheckFailed(f"{p}: no error")
        except OSError as e:
            check(e.errno == errno.EINVAL, f"{p}: errno {e.errno}, expected EINVAL: {e}")
            check(e.filename == p, f"{p}: OSError.filename is {e.filename!r}")
            check(fn in str(e.strerror), f"{p}: the message does not name the file: {e.strerror}")
            say(f"  {e}")
    try:
        dmafs.load_file(os.path.join(mnt, "nonexistent.safetensors"))
        raise CheckFailed("a missing file did not raise")
    except OSError as e:
        check(e.errno == errno.ENOENT, f"missing file: errno {e.errno}: {e}")
    try:
        dmafs.load_file(os.path.join(mnt, "sharded"))
        raise CheckFailed("load_file of a directory did not raise")
    except OSError as e:
        check(e.errno == errno.EISDIR, f"load_file(dir): errno {e.errno}")
    try:
        dmafs.load_file(mixed, device="meta")
        raise CheckFailed("device meta did not raise")
    except ValueError:
        pass

    say("dtypes this torch may lack: equal when present, else a TypeError naming tensor and dtype")
    for dt in EXOTIC:
        p = os.path.join(mnt, "dtypes", dt + ".safetensors")
        if getattr(torch, DTYPES[dt][1], None) is not None:
            same(dmafs.load_file(p), ref_load(p), f"dtype {dt}", "cpu")
            say(f"  {dt}: torch.{DTYPES[dt][1]}, equal")
            continue
        try:
            dmafs.load_file(p)
            raise CheckFailed(f"{dt}: loaded although torch has no {DTYPES[dt][1]}")
        except TypeError as e:
            check(f"t.{dt}" in str(e) and dt in str(e), f"{dt}: message does not name tensor and dtype: {e}")
            say(f"  {dt}: {e}")


def checks_gpu(dmafs, torch, mnt, shm, models):
    if not torch.cuda.is_available():
        say("NOTE: torch.cuda.is_available() is False: GPU checks not run")
        return
    try:
        import safetensors.torch as st
    except ImportError:
        st = None
        say("NOTE: safetensors not importable: GPU results compared with the reference reader only")
    dev = "cuda:0"
    mixed = os.path.join(mnt, "mixed", "model.safetensors")
    kind = "HIP" if getattr(torch.version, "hip", None) else "CUDA"
    say(f"GPU ({kind}, {torch.cuda.get_device_name(0)}): load_file(cuda:0) equals the reference")
    sd, _ = expect_warning(lambda: dmafs.load_file(mixed, device=dev), dmafs.SlowPathWarning, 0)
    same(sd, ref_load(mixed), "load_file cuda mixed", dev)
    s = dmafs.last_stats()
    check(s.path in ("staged", "p2p", "p2p-compat"), f"cuda placement used path {s.path}")
    say(f"  {s!r}")
    del sd
    same(dmafs.load_file(mixed, device="cuda"), ref_load(mixed), "device 'cuda'", dev)
    same(dmafs.load_file(mixed, device=torch.device(dev)), ref_load(mixed), "torch.device", dev)

    files = [mixed, os.path.join(mnt, "misaligned", "model.safetensors")]
    files += [os.path.join(mnt, "dtypes", dt + ".safetensors") for dt in EXOTIC
              if getattr(torch, DTYPES[dt][1], None) is not None]
    for m in models:
        files += st_files(m)
    for p in files:
        ref = ref_load(p)
        got = dmafs.load_file(p, device=dev)
        same(got, ref, f"cuda {p}", dev)
        if st is not None:
            try:
                theirs = st.load_file(p, device=dev)
            except Exception as e:  # their refusal is a note, not our failure
                say(f"  NOTE: safetensors.torch.load_file({p}) raised {type(e).__name__}: {e}")
                continue
            same(got, theirs, f"cuda {p} vs safetensors.torch.load_file", dev)
        del got
    say(f"  {len(files)} files equal the reference" + (" and safetensors.torch" if st else ""))

    say("GPU: sharded model, snapshot, synthetic models through load()")
    sh = os.path.join(mnt, "sharded")
    same(dmafs.load(sh, device=dev), ref_load(sh), "cuda sharded", dev)
    snapdir = os.path.join(mnt, "hf", "models--dmafs--tiny", "snapshots")
    snap = os.path.join(snapdir, os.listdir(snapdir)[0])
    same(dmafs.load(snap, device=dev), ref_load(snap), "cuda snapshot", dev)
    for m in models:
        same(dmafs.load(m, device=dev), ref_load(m), f"cuda {m}", dev)
        say(f"  {dmafs.last_stats()!r}")

    say("GPU: safe_open(device=cuda:0)")
    with dmafs.safe_open(mixed, framework="pt", device=dev) as f:
        got = {k: f.get_tensor(k) for k in f.keys()}
    same(got, ref_load(mixed), "cuda safe_open", dev)
    if st is not None:
        from safetensors import safe_open as their_open
        with their_open(mixed, framework="pt", device=dev) as f:
            check(f.keys() == sorted(got), "keys() order differs from safetensors.safe_open")
            check(f.metadata() == ref_metadata(mixed), "safetensors metadata differs (reference broken?)")
    del got

    if kind == "CUDA":
        say("GPU: memory without an IPC handle (expandable_segments) is filled through host "
            "memory, with one SlowPathWarning")
        child = (
            "import hashlib, json, sys, warnings, dmafs\n"
            "sys.path.insert(0, %r)\n"
            "import python_check as pc\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    sd = dmafs.load_file(%r, device='cuda:0')\n"
            "print(json.dumps({'digest': pc.digest(sd), 'path': dmafs.last_stats().path,\n"
            "                  'fallback': dmafs.last_stats().fallback,\n"
            "                  'warnings': [str(x.message) for x in w\n"
            "                               if issubclass(x.category, dmafs.SlowPathWarning)]}))\n"
        ) % (os.path.dirname(os.path.abspath(__file__)), mixed)
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
        import subprocess
        r = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True)
        check(r.returncode == 0, f"expandable_segments child failed: {r.stderr.strip()[-2000:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        check(res["digest"] == digest(ref_load(mixed)), "expandable_segments: bytes differ")
        if res["fallback"] is None:
            say("  NOTE: this torch's expandable segments were registered directly (no fallback)")
            check(not res["warnings"], f"warnings without a fallback: {res['warnings']}")
        else:
            check(len(res["warnings"]) == 1 and "expandable_segments" in res["warnings"][0],
                  f"fallback warnings: {res['warnings']}")
            say(f"  {res['warnings'][0]}")

    say("GPU: posix fallback outside dmafs warns once and is right")
    outside = os.path.join(shm, "mixed", "model.safetensors")
    sd, w = expect_warning(lambda: dmafs.load_file(outside, device=dev), dmafs.SlowPathWarning, 1)
    same(sd, ref_load(mixed), "cuda outside dmafs", dev)
    check("posix" in str(w[0].message), f"warning text: {w[0].message}")
    del sd
    torch.cuda.synchronize()


def main(argv):
    if len(argv) >= 3 and argv[1] == "gen":
        gen(argv[2])
        return 0
    if len(argv) < 4 or argv[1] != "check":
        print(__doc__ or "usage: python_check.py gen DIR | check MNTDIR SHMDIR [MODEL...]",
              file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        say(f"SKIP: import torch failed: {e}")
        return 77
    import dmafs
    mnt, shm, models = os.path.abspath(argv[2]), os.path.abspath(argv[3]), argv[4:]
    say(f"torch {torch.__version__}, libdmafs {dmafs.library_version()} from {dmafs.library_path}")
    try:
        checks_cpu(dmafs, torch, mnt, shm, models)
        checks_gpu(dmafs, torch, mnt, shm, models)
    except CheckFailed as e:
        say(f"FAIL: {e}")
        return 1
    say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
