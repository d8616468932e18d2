"""Dtypes, devices and ``Size``: the small value types every other module uses.

The dtype objects live in C (``_C.dtype``); this module names them the way
PyTorch does and adds the argument parsers that the rest of the package
shares, so that every public function reports a bad ``dtype``, ``device`` or
``size`` argument in the same words.

>>> import ampc
>>> ampc.device("cuda:1")
device(type='cuda', index=1)
>>> ampc.Size([2, 3]).numel()
6
"""
import operator

import numpy as np

from . import _C

# ----------------------------------------------------------------------------
# dtypes

dtype = _C.dtype
float32 = _C.float32
float16 = _C.float16
bfloat16 = _C.bfloat16
int64 = _C.int64
bool_ = _C.bool     # ampc.bool; named bool_ here to keep the builtin
_pybool = bool

ALL_DTYPES = (float32, float16, bfloat16, int64, bool_)
FLOAT_DTYPES = (float32, float16, bfloat16)

# NumPy dtypes that C's from_numpy / tensor_from_array take as they are.
_NP_TO_DTYPE = {
    np.dtype(np.float32): float32,
    np.dtype(np.float16): float16,
    np.dtype(np.int64): int64,
    np.dtype(np.bool_): bool_,
}
# The NumPy dtype that holds a dtype's values (bfloat16 has none: float32).
_DTYPE_TO_NP = {
    float32: np.dtype(np.float32),
    float16: np.dtype(np.float16),
    bfloat16: np.dtype(np.float32),
    int64: np.dtype(np.int64),
    bool_: np.dtype(np.bool_),
}


def _check_dtype(fn, arg, value, allow_none=True):
    """Return ``value`` if it is an ampc dtype (or None when allowed)."""
    if value.__class__ is dtype or (value is None and allow_none):
        return value
    raise TypeError(
        f"{fn}(): argument '{arg}' must be an ampc.dtype (one of "
        f"{', '.join(repr(d) for d in ALL_DTYPES)}), but got "
        f"{type(value).__name__}"
        + (f" {value!r}" if isinstance(value, (str, np.dtype, type)) else ""))


# ----------------------------------------------------------------------------
# devices

class device:
    """Where a tensor lives: ``device("cpu")``, ``device("cuda")``,
    ``device("cuda:0")`` or ``device("cuda", 0)``.

    >>> device("cuda:0").index
    0
    >>> str(device("cpu"))
    'cpu'
    """

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            if index is not None:
                raise ValueError(
                    "device(): an index cannot be given with a device "
                    f"object, got device={type!r} and index={index!r}")
            self._type, self._index = type._type, type._index
            return
        if not isinstance(type, str):
            raise TypeError(
                "device(): argument 'type' must be a str such as 'cpu', "
                f"'cuda' or 'cuda:0', but got {type.__class__.__name__}")
        name, sep, idx = type.partition(":")
        if name not in ("cpu", "cuda"):
            raise RuntimeError(
                "device(): expected one of cpu, cuda device type at start of "
                f"device string: {type}")
        if sep:
            if not idx.isdigit() or index is not None:
                raise RuntimeError(f"device(): invalid device string: "
                                   f"'{type}'")
            index = int(idx)
        if index is not None:
            if index.__class__ is _pybool or not isinstance(index, int):
                raise TypeError(
                    "device(): argument 'index' must be an int, but got "
                    f"{index.__class__.__name__}")
            if index < 0:
                raise RuntimeError(
                    f"device(): device index must be non-negative, got "
                    f"{index}")
        self._type = name
        self._index = index

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __str__(self):
        if self._index is None:
            return self._type
        return f"{self._type}:{self._index}"

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __eq__(self, other):
        if isinstance(other, device):
            return self._type == other._type and self._index == other._index
        return NotImplemented

    def __hash__(self):
        return hash((self._type, self._index))

    def __reduce__(self):
        return (device, (self._type, self._index))


def _device_str(fn, value, arg="device"):
    """Normalise a device argument to the string C takes: 'cpu', 'cuda' or
    'cuda:N'.  None means the CPU."""
    if value is None:
        return "cpu"
    if value.__class__ is str:
        if value == "cpu" or value == "cuda":
            return value
        return str(device(value))
    if isinstance(value, device):
        return str(value)
    if isinstance(value, int) and value.__class__ is not _pybool:
        if value < 0:
            raise RuntimeError(
                f"{fn}(): device index must be non-negative, got {value}")
        return f"cuda:{value}"
    raise TypeError(
        f"{fn}(): argument '{arg}' must be an ampc.device, a str such as "
        f"'cpu' or 'cuda:0', or an int, but got {value.__class__.__name__}")


_DEVICE_CACHE = {}


def _device_of(device_type, device_index):
    """The (cached) device object of a tensor."""
    key = (device_type, device_index)
    dev = _DEVICE_CACHE.get(key)
    if dev is None:
        dev = device(device_type,
                     None if device_type == "cpu" else device_index)
        _DEVICE_CACHE[key] = dev
    return dev


# ----------------------------------------------------------------------------
# Size

class Size(tuple):
    """A tensor's shape: a tuple of ints with ``numel()``.

    >>> Size([2, 3])
    ampc.Size([2, 3])
    >>> Size([2, 3]).numel()
    6
    """

    __slots__ = ()

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, index):
        r = tuple.__getitem__(self, index)
        if isinstance(index, slice):
            return Size(r)
        return r

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __repr__(self):
        return f"ampc.Size({list(self)!r})"

    def __reduce__(self):
        return (Size, (tuple(self),))


def _parse_shape(fn, size, arg="size"):
    """``size`` as given to zeros(*size) etc.: ints, or one tuple/list/Size.
    Returns a tuple of non-negative ints."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = size[0]
        if not isinstance(size, (tuple, list)):
            raise TypeError(
                f"{fn}(): argument '{arg}' must be a tuple of ints, but got "
                f"{size.__class__.__name__}")
    out = []
    for pos, s in enumerate(size):
        if s.__class__ is not int:
            if s.__class__ is _pybool or not hasattr(s, "__index__"):
                raise TypeError(
                    f"{fn}(): argument '{arg}' must be a tuple of ints, but "
                    f"found element of type {s.__class__.__name__} at pos "
                    f"{pos}")
            s = operator.index(s)
        if s < 0:
            raise RuntimeError(
                f"{fn}(): argument '{arg}' must have non-negative sizes, got "
                f"{list(size)}")
        out.append(s)
    return tuple(out)


def _wrap_dim(fn, dim, ndim, arg="dim"):
    """A dim in [-ndim, ndim) as a non-negative int (a 0-d tensor takes
    -1 and 0, as in PyTorch)."""
    if dim.__class__ is not int:
        if dim.__class__ is _pybool or not hasattr(dim, "__index__"):
            raise TypeError(
                f"{fn}(): argument '{arg}' must be an int, but got "
                f"{dim.__class__.__name__}")
        dim = operator.index(dim)
    n = ndim if ndim > 0 else 1
    if dim < -n or dim >= n:
        raise IndexError(
            f"{fn}(): Dimension out of range (expected to be in range of "
            f"[{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim
