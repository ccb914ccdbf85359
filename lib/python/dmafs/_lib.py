# SPDX-License-Identifier: MIT
"""_lib.py - ctypes bindings of libdmafs (lib/dmafs.h) and thin owners of its handles.

Only what the torch loader needs is bound: sessions, buffers, whole-file placement, the
safetensors model calls, and prefetch into the warm tier. Every C call returns 0 or -errno; check() turns a failure
into OSError(errno, dmafs_strerror text, filename) once, here.

The library is found, in this order:
  1. $DMAFS_LIBRARY (a full path; nothing else is tried when it is set),
  2. the dynamic linker, by the soname these bindings are written for: "libdmafs.so.0"
     (LD_LIBRARY_PATH, then the ld.so cache and the system's directories, where make
     install puts it),
  3. the build tree this package sits in: lib/python/dmafs/../../.libs/libdmafs.so.0.
ctypes.util.find_library("dmafs") is not asked: it would also take another soname
(libdmafs.so.1, of an incompatible library), and it runs ldconfig and the compiler.
"""

import ctypes
import errno as _errno
import os

# ---- constants (lib/dmafs.h) ----

PATH_NONE, PATH_P2P, PATH_STAGED, PATH_HOST, PATH_POSIX = 0, 1, 2, 3, 4
PATH_P2P_COMPAT = 5  # cuFile in compatibility mode (bounces through host memory), since 0.6


def slower(a, b):
    """The slower of two PATH_* values, in dmafs.h's order (p2p, p2p-compat, staged, host,
    posix); PATH_NONE (nothing moved) never wins."""
    if a == PATH_NONE or b == PATH_NONE:
        return a or b
    rank = {PATH_P2P_COMPAT: 3}
    return a if rank.get(a, 2 * a) > rank.get(b, 2 * b) else b
TARGET_HOST, TARGET_CUDA, TARGET_HIP = 1, 2, 3
MAX_DIMS = 8

# ---- structs (lib/dmafs.h); ctypes lays them out with the C compiler's padding ----


class Result(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint64), ("path", ctypes.c_int), ("elapsed_ns", ctypes.c_uint64)]


class TargetCaps(ctypes.Structure):
    _fields_ = [("path", ctypes.c_int), ("devices", ctypes.c_int), ("why", ctypes.c_char * 240)]


class Caps(ctypes.Structure):
    _fields_ = [
        ("on_dmafs", ctypes.c_int),
        ("proto_version", ctypes.c_int),
        ("members", ctypes.c_uint),
        ("stripe_unit", ctypes.c_uint),
        ("staging_bytes", ctypes.c_uint64),
        ("host", TargetCaps),
        ("cuda", TargetCaps),
        ("hip", TargetCaps),
    ]

    def target(self, target):
        return {TARGET_HOST: self.host, TARGET_CUDA: self.cuda, TARGET_HIP: self.hip}[target]


class Extent(ctypes.Structure):
    """struct dmafs_extent"""
    _fields_ = [("file_offset", ctypes.c_uint64), ("length", ctypes.c_uint64),
                ("buffer_offset", ctypes.c_uint64)]


class Handle(ctypes.Structure):
    """struct dmafs_handle (opaque)"""
    _fields_ = [("a", ctypes.c_uint64), ("b", ctypes.c_uint64), ("c", ctypes.c_uint32),
                ("d", ctypes.c_uint32)]


class Sample(ctypes.Structure):
    """struct dmafs_sample: 48 bytes, six 64-bit words (the last: length | result << 32)"""
    _fields_ = [("file", Handle), ("file_offset", ctypes.c_uint64),
                ("buffer_offset", ctypes.c_uint64), ("length", ctypes.c_uint32),
                ("result", ctypes.c_int32)]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("nbytes", ctypes.c_uint64),
        ("file", ctypes.c_uint),
        ("file_offset", ctypes.c_uint64),
        ("buffer_offset", ctypes.c_uint64),
        ("ptr", ctypes.c_void_p),
    ]


# ---- finding and binding the library ----

_HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_TREE_LIBRARY = os.path.normpath(os.path.join(_HERE, "..", "..", ".libs", "libdmafs.so.0"))


def _candidates():
    env = os.environ.get("DMAFS_LIBRARY")
    if env:
        return [("$DMAFS_LIBRARY", env)]
    return [("the dynamic linker", "libdmafs.so.0"), ("the build tree", BUILD_TREE_LIBRARY)]


def _open_library():
    tried = []
    for where, name in _candidates():
        try:
            return ctypes.CDLL(name, use_errno=True), name
        except OSError as e:
            tried.append(f"{name} ({where}): {e}")
    raise ImportError(
        "dmafs: cannot load libdmafs; tried " + "; ".join(tried) +
        ". Install dmafs (make install, then ldconfig), name its directory in "
        "LD_LIBRARY_PATH, build it in this tree (make), or set DMAFS_LIBRARY to the full "
        "path of libdmafs.so.0")


lib, library_path = _open_library()

_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_I, _U, _U64, _SZ = ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_size_t

# name: (restype, argtypes). Missing calls are bound as None: the model calls come with
# the safetensors support of libdmafs, dmafs_prefetch and dmafs_buf_tier_bytes with 0.5,
# dmafs_model_fd with 0.6, the batch calls with 0.7, and an older library still serves
# the rest.
_SIGNATURES = {
    "dmafs_version": (_I, []),
    "dmafs_strerror": (ctypes.c_char_p, [_I]),
    "dmafs_path_name": (ctypes.c_char_p, [_I]),
    "dmafs_session_open": (_I, [ctypes.c_char_p, _PP]),
    "dmafs_session_close": (None, [_P]),
    "dmafs_session_caps": (_I, [_P, ctypes.POINTER(Caps)]),
    "dmafs_buf_register_cuda": (_I, [_P, _P, _SZ, _I, _PP]),
    "dmafs_buf_register_hip": (_I, [_P, _P, _SZ, _I, _PP]),
    "dmafs_buf_alloc_host": (_I, [_P, _SZ, _PP]),
    "dmafs_buf_ptr": (_P, [_P]),
    "dmafs_buf_size": (_SZ, [_P]),
    "dmafs_buf_tier_bytes": (_U64, [_P]),
    "dmafs_buf_unregister": (_I, [_P]),
    "dmafs_place": (_I, [_P, _I, ctypes.POINTER(Extent), _SZ, ctypes.POINTER(Result)]),
    "dmafs_place_file": (_I, [_P, ctypes.c_char_p, _U64, ctypes.POINTER(Result)]),
    "dmafs_model_open": (_I, [ctypes.c_char_p, _PP, ctypes.c_char_p, _SZ]),
    "dmafs_model_close": (None, [_P]),
    "dmafs_model_files": (_U, [_P]),
    "dmafs_model_file": (ctypes.c_char_p, [_P, _U]),
    "dmafs_model_fd": (_I, [_P, _U]),
    "dmafs_model_tensors": (_SZ, [_P]),
    "dmafs_model_tensor": (ctypes.POINTER(Tensor), [_P, _SZ]),
    "dmafs_model_find": (ctypes.c_long, [_P, ctypes.c_char_p]),
    "dmafs_model_bytes": (_U64, [_P]),
    "dmafs_model_place": (_I, [_P, _P, _U64, _U, ctypes.POINTER(Result)]),
    "dmafs_model_place_part": (_I, [_P, _P, _U64, _U64, _U64, _U, ctypes.POINTER(Result)]),
    "dmafs_model_place_range": (_I, [_P, _P, _U64, _U64, _U64, _U, ctypes.POINTER(Result)]),
    "dmafs_dtype_name": (ctypes.c_char_p, [_I]),
    "dmafs_dtype_size": (_U, [_I]),
    "dmafs_prefetch": (_I, [_I, _U64, _U64, ctypes.POINTER(Result), ctypes.POINTER(_U64)]),
    "dmafs_handle_get": (_I, [_P, _I, ctypes.POINTER(Handle)]),
    "dmafs_place_batch": (_I, [_P, _P, _SZ, ctypes.POINTER(Result)]),
}

# What a library without the call predates, for require()'s message.
_ADDED_WITH = {
    "prefetch": "prefetch into the warm tier (dmafs 0.5)",
    "handle_get": "sample batches (dmafs 0.7)",
    "place_batch": "sample batches (dmafs 0.7)",
}


class _Calls:
    pass


C = _Calls()
for _name, (_res, _args) in _SIGNATURES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        setattr(C, _name[len("dmafs_"):], None)
        continue
    _fn.restype, _fn.argtypes = _res, _args
    setattr(C, _name[len("dmafs_"):], _fn)


def require(name):
    """The bound call dmafs_<name>, or ImportError saying this libdmafs lacks it."""
    fn = getattr(C, name)
    if fn is None:
        what = _ADDED_WITH.get(name, "safetensors model support")
        raise ImportError(f"dmafs: {library_path} has no dmafs_{name}(): this libdmafs predates "
                          f"{what}; install a newer dmafs or point DMAFS_LIBRARY at one")
    return fn


def prefetch_fd(fd, offset=0, length=None, filename=None):
    """dmafs_prefetch on an open descriptor: (bytes read into the tier, bytes it held)."""
    fn = require("prefetch")
    res, held = Result(), ctypes.c_uint64()
    length = 0xFFFFFFFFFFFFFFFF if length is None else length  # DMAFS_TO_EOF
    check(fn(fd, offset, length, ctypes.byref(res), ctypes.byref(held)), filename)
    return res.bytes, held.value


def strerror(ret):
    return C.strerror(ret).decode("utf-8", "replace")


def path_name(path):
    return C.path_name(path).decode()


def check(ret, filename=None, detail=None):
    """Raise OSError for a negative return; detail (the C error text) follows the strerror text."""
    if ret >= 0:
        return ret
    msg = strerror(ret)
    if detail:
        msg = f"{msg}: {detail}"
    raise OSError(-ret, msg, os.fspath(filename) if filename is not None else None)


def _fs(path):
    return os.fsencode(path)


# ---- owners of C handles ----


class Session:
    """A dmafs_session. close() also unregisters (and frees) every buffer still registered."""

    def __init__(self, path):
        h = ctypes.c_void_p()
        check(C.session_open(_fs(path), ctypes.byref(h)), path)
        self.handle = h.value
        self.path = path

    def caps(self):
        caps = Caps()
        check(C.session_caps(self.handle, ctypes.byref(caps)), self.path)
        return caps

    def close(self):
        if self.handle:
            C.session_close(self.handle)
            self.handle = None


class Buffer:
    """A dmafs_buf registered through a Session (host, CUDA or HIP)."""

    def __init__(self, session, handle, target):
        self.session = session
        self.handle = handle
        self.target = target

    @classmethod
    def alloc_host(cls, session, size, filename=None):
        h = ctypes.c_void_p()
        check(C.buf_alloc_host(session.handle, size, ctypes.byref(h)), filename)
        return cls(session, h.value, TARGET_HOST)

    @classmethod
    def register_gpu(cls, session, target, devptr, size, device):
        """Returns the Buffer, or the negative errno (the caller decides what a refusal means)."""
        fn = C.buf_register_cuda if target == TARGET_CUDA else C.buf_register_hip
        h = ctypes.c_void_p()
        ret = fn(session.handle, ctypes.c_void_p(devptr), size, device, ctypes.byref(h))
        if ret < 0:
            return ret
        return cls(session, h.value, target)

    @property
    def ptr(self):
        return C.buf_ptr(self.handle)

    @property
    def size(self):
        return C.buf_size(self.handle)

    @property
    def tier_bytes(self):
        """Bytes placed into the buffer so far that came from the warm tier; None when
        this libdmafs predates dmafs_buf_tier_bytes (it cannot tell)."""
        if C.buf_tier_bytes is None or not self.handle:
            return None
        return C.buf_tier_bytes(self.handle)

    def unregister(self):
        """Unregister; for host buffers this unmaps the memory. Returns 0 or -errno."""
        ret = 0
        if self.handle:
            ret = C.buf_unregister(self.handle)
            if ret != -_errno.EBUSY:
                self.handle = None
        return ret


class TensorInfo:
    """One tensor of a model, copied out of struct dmafs_tensor (valid after the model closes)."""

    __slots__ = ("name", "dtype", "dtype_name", "shape", "nbytes", "file", "file_offset",
                 "buffer_offset")

    _dtype_names = {}  # dtype number -> name: one library call per dtype, not per tensor

    def __init__(self, t):
        self.name = t.name.decode("utf-8", "surrogateescape")
        self.dtype = dtype = t.dtype
        name = TensorInfo._dtype_names.get(dtype)
        if name is None:
            raw = C.dtype_name(dtype)
            name = TensorInfo._dtype_names[dtype] = raw.decode() if raw else f"dtype#{dtype}"
        self.dtype_name = name
        self.shape = tuple(t.shape[:t.ndim])
        self.nbytes = t.nbytes
        self.file = t.file
        self.file_offset = t.file_offset
        self.buffer_offset = t.buffer_offset


class Model:
    """A dmafs_model: headers read and validated, nothing placed."""

    def __init__(self, path):
        require("model_open")
        h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        ret = C.model_open(_fs(path), ctypes.byref(h), err, len(err))
        if ret < 0:
            detail = err.value.decode("utf-8", "replace")
            if ret == -_errno.EINVAL and detail:
                # dmafs_strerror's EINVAL sentence is about call arguments; here the
                # library's own message says what is wrong with which file.
                raise OSError(_errno.EINVAL, "malformed safetensors model: " + detail,
                              os.fspath(path))
            check(ret, path, detail or None)
        self.handle = h.value
        self.path = path
        self.files = [os.fsdecode(C.model_file(self.handle, i))
                      for i in range(C.model_files(self.handle))]
        self.tensors = [TensorInfo(C.model_tensor(self.handle, i).contents)
                        for i in range(C.model_tensors(self.handle))]
        self.nbytes = C.model_bytes(self.handle)

    def fd(self, i):
        """The descriptor the model holds open on file i (libdmafs >= 0.6; None before):
        the file as it was when the model was opened, even if it was removed since. The
        model closes it."""
        if C.model_fd is None:
            return None
        fd = C.model_fd(self.handle, i)
        return fd if fd >= 0 else None

    def session(self):
        """A Session on the mount of the model's first file; through the descriptor the
        model holds when that file has been removed since the model was opened."""
        try:
            return Session(self.files[0])
        except FileNotFoundError:
            fd = self.fd(0)
            if fd is None:
                raise
        return Session(f"/proc/self/fd/{fd}")

    def place(self, buf, buffer_offset=0, threads=0):
        res = Result()
        check(C.model_place(self.handle, buf.handle, buffer_offset, threads, ctypes.byref(res)),
              self.path)
        return res

    def place_part(self, buf, begin, end, buffer_offset=0, threads=0):
        """Place only bytes [begin, end) of the model's layout (dmafs_model_place_part)."""
        fn = require("model_place_part")
        res = Result()
        check(fn(self.handle, buf.handle, buffer_offset, begin, end, threads, ctypes.byref(res)),
              self.path)
        return res

    def place_range(self, buf, begin, end, buffer_offset=0, threads=0):
        """Place bytes [begin, end) of the layout with begin at buffer_offset
        (dmafs_model_place_range): a compact buffer of one device's tensors."""
        fn = require("model_place_range")
        res = Result()
        check(fn(self.handle, buf.handle, buffer_offset, begin, end, threads, ctypes.byref(res)),
              self.path)
        return res

    def close(self):
        if self.handle:
            C.model_close(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
