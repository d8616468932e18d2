"""``ampc.save`` / ``ampc.load``: checkpoints of tensors, state dicts and
plain Python containers of them.

The file format (all integers little-endian)::

    offset  size  field
         0     8  magic b"AMPCSAVE"
         8     4  format version (1)
        12     4  flags (0; reserved)
        16     8  payload length in bytes
        24     4  CRC-32 of the payload
        28     4  zero padding
        32     -  payload:
                    8 bytes  length P of the pickle
                    P bytes  pickle (protocol 4) of the object, each tensor
                             replaced by a persistent id (dtype, shape,
                             requires_grad, device, offset, byte count)
                    ...      each tensor's elements, row-major, raw
                             little-endian bytes (bfloat16 as its 16-bit
                             patterns), at 64-byte aligned offsets

So a truncated file (payload shorter than its length), a damaged one (CRC)
and a foreign one (magic) are all told apart before anything is
unpickled.  A view is saved as its own elements only; a tensor that occurs
twice in the object is saved once and loads as one tensor.

Saving to a path writes a temporary file in the same directory, fsyncs it
and renames it over the target (``os.replace``): a crash mid-save leaves
the old file, never half a file.  Loading unpickles only tensors, dtypes,
devices and plain containers unless ``weights_only=False`` (as PyTorch's
``weights_only=True``, the default).

>>> import ampc, io
>>> buf = io.BytesIO()
>>> ampc.save({"w": ampc.ones(2, dtype=ampc.bfloat16), "step": 3}, buf)
>>> _ = buf.seek(0)
>>> ampc.load(buf)
{'w': tensor([1., 1.], dtype=ampc.bfloat16), 'step': 3}
"""
import io
import os
import pickle
import secrets
import stat
import struct
import zlib

import numpy as np

from . import _C
from ._dtype_device import Size, _device_str, device as _device_cls

__all__ = ["save", "load"]

MAGIC = b"AMPCSAVE"
VERSION = 1
_HEADER = struct.Struct("<8sIIQII")     # magic, version, flags, len, crc, pad
_ALIGN = 64

_TB = _C.TensorBase
_DTYPES = {d.name: d for d in (_C.float32, _C.float16, _C.bfloat16,
                               _C.int64, _C.bool)}
# how each dtype's elements are stored (bfloat16: its bit patterns)
_NP_STORED = {"float32": np.dtype("<f4"), "float16": np.dtype("<u2"),
              "bfloat16": np.dtype("<u2"), "int64": np.dtype("<i8"),
              "bool": np.dtype("u1")}

# the globals a weights-only load may reconstruct
_SAFE_GLOBALS = {
    ("collections", "OrderedDict"), ("collections", "defaultdict"),
    ("builtins", "dict"), ("builtins", "list"), ("builtins", "tuple"),
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "int"),
    ("builtins", "float"), ("builtins", "complex"), ("builtins", "str"),
    ("builtins", "bytes"), ("builtins", "bytearray"), ("builtins", "bool"),
    ("builtins", "slice"), ("builtins", "range"),
    ("_codecs", "encode"),      # how protocol 2- pickles write bytes
}


# ----------------------------------------------------------------------------
# save


def _tensor_bytes(t):
    """(the elements of t as a flat little-endian uint8 array, device)."""
    dev = "cpu" if t.device_type == "cpu" else f"cuda:{t.device_index}"
    t = t._detach()
    if dev != "cpu":
        out = _C.empty(tuple(t.shape), t.dtype, "cpu")
        t = _C.copy_(out, t)
    if not t.is_contiguous():
        t = t._contiguous()          # a view: only its own elements
    name = t.dtype.name
    if name in ("float16", "bfloat16"):
        arr = _C.to_bits(t)
    else:
        arr = t._numpy()
    arr = np.ascontiguousarray(arr.reshape(-1))
    if name == "bool":
        return arr.view(np.uint8), dev
    return arr.astype(_NP_STORED[name], copy=False).view(np.uint8), dev


class _Saver(pickle.Pickler):
    """Pickles the object with tensors (and dtypes, devices, sizes) as
    persistent ids; collects the tensors' bytes in ``self.blobs``."""

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.blobs = []
        self.offset = 0
        self.seen = {}
        self.keep = []          # keeps ids of saved tensors unique
        from .nn.parameter import Parameter
        self.parameter = Parameter

    def persistent_id(self, obj):
        if isinstance(obj, _TB):
            pid = self.seen.get(id(obj))
            if pid is None:
                data, dev = _tensor_bytes(obj)
                pad = -self.offset % _ALIGN
                if pad:
                    self.blobs.append(bytes(pad))
                    self.offset += pad
                pid = ("tensor", len(self.keep), obj.dtype.name,
                       tuple(int(s) for s in obj.shape),
                       bool(obj.requires_grad),
                       isinstance(obj, self.parameter), dev, self.offset,
                       int(data.nbytes))
                self.blobs.append(data)
                self.offset += data.nbytes
                self.seen[id(obj)] = pid
                self.keep.append(obj)
            return pid
        if obj.__class__ is _C.dtype:
            return ("dtype", obj.name)
        if isinstance(obj, _device_cls):
            return ("device", str(obj))
        if isinstance(obj, Size):
            return ("size", tuple(int(s) for s in obj))
        return None


def _serialize(obj, protocol):
    """The file's bytes as a list of buffers: header, pickle, tensor
    data."""
    pbuf = io.BytesIO()
    saver = _Saver(pbuf, protocol)
    saver.dump(obj)
    pick = pbuf.getvalue()
    # the data region starts 64-byte aligned within the payload
    pre_len = 8 + len(pick)
    lead = -pre_len % _ALIGN
    head = struct.pack("<Q", len(pick)) + pick + bytes(lead)
    payload = [head] + saver.blobs
    crc = 0
    length = 0
    for b in payload:
        crc = zlib.crc32(b, crc)
        length += memoryview(b).nbytes
    header = _HEADER.pack(MAGIC, VERSION, 0, length, crc, 0)
    return [header] + payload


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def _atomic_write(path, chunks):
    """Write ``chunks`` to a temporary file beside ``path``, fsync it and
    rename it over ``path``, so that ``path`` always holds a whole file."""
    path = os.path.realpath(os.fsdecode(os.fspath(path)))
    directory, base = os.path.split(path)
    tmp = os.path.join(directory,
                       f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fh = open(tmp, "xb")
    try:
        try:
            if os.path.exists(path):
                os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
            _write_chunks(fh, chunks)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fh.close()
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    # the rename itself survives a power cut once the directory is synced
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _write_chunks(fh, chunks):
    for c in chunks:
        fh.write(c)


def save(obj, f, pickle_protocol=4):
    """Save ``obj`` (a tensor, a state dict, or plain containers of them:
    dict, OrderedDict, list, tuple, numbers, strings, None) to ``f``, a
    path or a binary file object.  A path is written atomically.
    Tensors keep dtype (bfloat16 too), shape, device and requires_grad;
    a view is saved as its own elements only.

    >>> import ampc, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
    >>> ampc.save(ampc.nn.Linear(2, 2).state_dict(), path)
    >>> sorted(ampc.load(path))
    ['bias', 'weight']
    """
    if pickle_protocol < 2:
        raise ValueError(
            f"save(): pickle_protocol must be at least 2, got "
            f"{pickle_protocol}")
    chunks = _serialize(obj, pickle_protocol)
    if _is_path(f):
        _atomic_write(f, chunks)
    elif hasattr(f, "write"):
        _write_chunks(f, chunks)
    else:
        raise TypeError(
            "save(): argument 'f' must be a path (str or os.PathLike) or a "
            f"binary file object with write(), but got {type(f).__name__}")


# ----------------------------------------------------------------------------
# load


def _describe(f):
    if _is_path(f):
        return repr(os.fsdecode(os.fspath(f)))
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"<{type(f).__name__}>"


def _foreign_hint(head):
    if head.startswith(b"PK\x03\x04"):
        return (" It looks like a zip archive, e.g. a PyTorch checkpoint "
                "(torch.save); load it with torch and save its tensors with "
                "ampc.save.")
    if head[:1] == b"\x80":
        return (" It looks like a plain Python pickle; ampc.load does not "
                "unpickle arbitrary files.")
    if head.startswith(b"\x89PNG"):
        return " It looks like a PNG image."
    if head.startswith(b"\x93NUMPY"):
        return " It looks like a NumPy .npy file (use numpy.load)."
    return ""


def _read_all(f, where):
    if _is_path(f):
        with open(f, "rb") as fh:
            return fh.read()
    if hasattr(f, "read"):
        data = f.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"load(): {where} was opened in text mode; open it in "
                "binary mode ('rb')")
        return bytes(data)
    raise TypeError(
        "load(): argument 'f' must be a path (str or os.PathLike) or a "
        f"binary file object with read(), but got {type(f).__name__}")


def _check_file(data, where):
    """The payload of a whole, undamaged ampc file, else a clear error."""
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        if len(data) < len(MAGIC) and MAGIC.startswith(data) and data:
            raise RuntimeError(
                f"load(): {where} is truncated: it ends inside the "
                f"{_HEADER.size}-byte header ({len(data)} bytes in all)")
        hint = _foreign_hint(bytes(data[:8]))
        raise RuntimeError(
            f"load(): {where} is not an ampc checkpoint: it starts with "
            f"{bytes(data[:8])!r}, not the magic {MAGIC!r} that ampc.save "
            f"writes.{hint}")
    if len(data) < _HEADER.size:
        raise RuntimeError(
            f"load(): {where} is truncated: it ends inside the "
            f"{_HEADER.size}-byte header ({len(data)} bytes in all)")
    _, version, flags, length, crc, _ = _HEADER.unpack_from(data)
    if version != VERSION:
        raise RuntimeError(
            f"load(): {where} has format version {version}; this ampc reads "
            f"version {VERSION}" + (" (the file was written by a newer "
                                    "ampc)" if version > VERSION else ""))
    have = len(data) - _HEADER.size
    if have < length:
        raise RuntimeError(
            f"load(): {where} is truncated: the header announces {length} "
            f"bytes of data but only {have} follow (an interrupted copy or "
            "download?)")
    if have > length:
        raise RuntimeError(
            f"load(): {where} has {have - length} unexpected bytes after its "
            f"{length} bytes of data; it is damaged or was appended to")
    payload = memoryview(data)[_HEADER.size:]
    if zlib.crc32(payload) != crc:
        raise RuntimeError(
            f"load(): {where} is corrupted: the CRC-32 of its data does not "
            "match the one ampc.save recorded")
    if length < 8:
        raise RuntimeError(f"load(): {where} is corrupted: no pickle length")
    (plen,) = struct.unpack_from("<Q", payload)
    if 8 + plen > length:
        raise RuntimeError(
            f"load(): {where} is corrupted: its pickle length {plen} runs "
            "past the end of the data")
    return payload, plen


def _target_device(map_location, saved, where):
    """Where a tensor saved on ``saved`` goes, per map_location."""
    if map_location is None:
        dev = saved
    elif isinstance(map_location, dict):
        dev = map_location.get(saved, saved)
        if isinstance(dev, _device_cls):
            dev = str(dev)
    else:
        dev = map_location
    dev = _device_str("load", dev)
    if dev.startswith("cuda"):
        from . import cuda
        if not cuda.is_available():
            raise RuntimeError(
                f"load(): {where} has a tensor saved on {saved}, and "
                "ampc.cuda.is_available() is False. If you are running on a "
                "CPU-only machine, please use ampc.load with "
                "map_location=ampc.device('cpu') to map your tensors to the "
                "CPU.")
    return dev


class _Loader(pickle.Unpickler):
    def __init__(self, file, payload, data_start, map_location,
                 weights_only, where):
        super().__init__(file)
        self.payload = payload
        self.data_start = data_start
        self.map_location = map_location
        self.weights_only = weights_only
        self.where = where
        self.tensors = {}

    def find_class(self, module, name):
        if self.weights_only and (module, name) not in _SAFE_GLOBALS:
            raise pickle.UnpicklingError(
                f"load(): weights-only load of {self.where} refused to "
                f"unpickle '{module}.{name}': with weights_only=True (the "
                "default) ampc.load rebuilds only tensors, dtypes, devices "
                "and plain containers (dict, OrderedDict, list, tuple, set, "
                "int, float, complex, str, bytes, bool, None). If you trust "
                "the source of this file, pass weights_only=False.")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid:
            raise pickle.UnpicklingError(
                f"load(): {self.where} is corrupted: bad persistent id")
        kind = pid[0]
        if kind == "dtype" and pid[1] in _DTYPES:
            return _DTYPES[pid[1]]
        if kind == "device":
            return _device_cls(pid[1])
        if kind == "size":
            return Size(pid[1])
        if kind == "tensor" and len(pid) == 9:
            t = self.tensors.get(pid[1])
            if t is None:
                t = self.tensors[pid[1]] = self._tensor(*pid[2:])
            return t
        raise pickle.UnpicklingError(
            f"load(): {self.where} is corrupted: unknown persistent id "
            f"{pid[:2]!r}")

    def _tensor(self, dtype_name, shape, requires_grad, is_param, dev,
                offset, nbytes):
        dtype = _DTYPES.get(dtype_name)
        stored = _NP_STORED.get(dtype_name)
        count = 1
        for s in shape:
            count *= s
        if dtype is None or any(s < 0 for s in shape) or \
                count * stored.itemsize != nbytes or offset < 0 or \
                self.data_start + offset + nbytes > len(self.payload):
            raise RuntimeError(
                f"load(): {self.where} is corrupted: a tensor record "
                f"({dtype_name}, shape {list(shape)}) does not fit its data")
        start = self.data_start + offset
        arr = np.frombuffer(self.payload[start:start + nbytes],
                            dtype=stored).reshape(shape)
        arr = arr.astype(stored.newbyteorder("="), copy=False)
        if dtype_name in ("float16", "bfloat16"):
            t = _C.from_bits(arr, dtype)
        else:
            if dtype_name == "bool":
                arr = arr.view(np.bool_)
            t = _C.tensor_from_array(arr, dtype, "cpu")
        target = dev
        if callable(self.map_location):
            moved = self.map_location(t, dev)
            if moved is not None:
                t = moved
                target = None
        else:
            target = _target_device(self.map_location, dev, self.where)
        if target is not None and target != "cpu":
            out = _C.empty(tuple(t.shape), t.dtype, target)
            t = _C.copy_(out, t)
        if is_param:
            from .nn.parameter import Parameter
            return Parameter(t, requires_grad)
        if requires_grad and t.dtype.is_floating_point:
            t.requires_grad = True
        return t


def load(f, map_location=None, *, weights_only=True):
    """Load what ``ampc.save`` wrote to ``f`` (a path or a binary file
    object).  ``map_location`` moves tensors: a device or string ("cpu"),
    a dict {saved device: device}, or a callable (tensor, saved device) ->
    tensor.  Only tensors and plain containers are unpickled unless
    ``weights_only=False``.  A truncated, damaged or foreign file raises a
    RuntimeError naming the file.

    >>> import ampc, io
    >>> buf = io.BytesIO()
    >>> ampc.save([ampc.tensor([1, 2]), "note"], buf)
    >>> ampc.load(io.BytesIO(buf.getvalue()))
    [tensor([1, 2]), 'note']
    """
    where = _describe(f)
    data = _read_all(f, where)
    payload, plen = _check_file(data, where)
    data_start = 8 + plen
    data_start += -data_start % _ALIGN
    loader = _Loader(io.BytesIO(payload[8:8 + plen]), payload, data_start,
                     map_location, bool(weights_only), where)
    try:
        return loader.load()
    except (pickle.UnpicklingError, RuntimeError, TypeError):
        raise
    except Exception as e:
        raise RuntimeError(
            f"load(): {where} could not be unpickled: {type(e).__name__}: "
            f"{e}") from e
