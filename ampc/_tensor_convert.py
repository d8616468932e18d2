"""``ampc.Tensor``'s conversions: to NumPy, Python lists and numbers;
``to()`` and its argument parsing, cpu/cuda/pinned memory and the dtype
shortcuts; and ``repr``, shaped like torch's ``_tensor_str``.

``_TensorConvert`` is a mixin of ``Tensor`` (see ``tensor.py``); its
methods are Tensor's methods.
"""
import math

import numpy as np

from . import _C
from . import autograd as _ag
from ._dtype_device import (
    _check_dtype, _device_str, _pybool, bfloat16, bool_, float16, float32,
    int64, device,
)
from ._print_options import PRINT
from ._tensor_args import (
    _SCALARS, _TB, _check_tensor, _host_array, _raw_to_device,
)

_cast = _C.cast
_mode = _ag._mode
_dev_str = _ag._dev_str
_pyint = int
_pyfloat = float


class _TensorConvert:
    """Tensor's conversion, dtype and device methods."""

    __slots__ = ()

    # -- conversion ----------------------------------------------------------

    def numpy(self, *, force=False):
        """The values as a NumPy array sharing memory with this CPU tensor.

        >>> import ampc
        >>> ampc.tensor([1.0, 2.0]).numpy()
        array([1., 2.], dtype=float32)
        """
        if force:
            t = self._detach()
            if t.device_type != "cpu":
                t = _raw_to_device(t, "cpu")
            if t.dtype is bfloat16:
                t = _cast(t, float32)
            return t._numpy()
        if self.device_type != "cpu":
            raise TypeError(
                f"numpy(): can't convert {self.device} device type tensor "
                "to numpy. Use Tensor.cpu() to copy the tensor to host "
                "memory first.")
        return self._numpy()

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        if copy:
            return arr.copy()
        return arr

    def tolist(self):
        """The values as (nested lists of) Python numbers.

        >>> import ampc
        >>> ampc.tensor([[1, 2], [3, 4]]).tolist()
        [[1, 2], [3, 4]]
        """
        return _host_array(self).tolist()

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter([self[i] for i in range(self.shape[0])])

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(
                "Boolean value of Tensor with more than one value is "
                "ambiguous")
        return _pybool(self.item())

    def __float__(self):
        if self.numel() != 1:
            raise ValueError(
                "only one element tensors can be converted to Python "
                "scalars")
        return _pyfloat(self.item())

    def __int__(self):
        if self.numel() != 1:
            raise ValueError(
                "only one element tensors can be converted to Python "
                "scalars")
        return _pyint(self.item())

    def __index__(self):
        if self.numel() != 1 or self.dtype.is_floating_point:
            raise TypeError(
                "only integer tensors of a single element can be converted "
                "to an index")
        return _pyint(self.item())

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(
                "unsupported format string passed to Tensor.__format__")
        return repr(self)

    def __contains__(self, element):
        if isinstance(element, (_TB,) + _SCALARS):
            return _pybool((self == element).any().item())
        raise RuntimeError(
            "Tensor.__contains__ only supports Tensor or scalar, but you "
            f"passed in a {type(element).__name__}.")

    def __repr__(self):
        return _tensor_repr(self)

    __str__ = __repr__

    # -- dtype and device ----------------------------------------------------

    def to(self, *args, **kwargs):
        """Cast and/or move: ``to(dtype)``, ``to(device)``,
        ``to(device, dtype)``, ``to(other)``, or keywords ``device=``,
        ``dtype=``, ``copy=``.  Returns self when nothing changes.

        >>> import ampc
        >>> ampc.ones(2).to(ampc.float16).dtype
        ampc.float16
        """
        dev, dtype, copy, non_blocking = _parse_to(args, kwargs)
        return self._to(dev, dtype, copy, non_blocking)

    def _to(self, dev, dtype, copy=False, non_blocking=False):
        here = _dev_str(self)
        if dev == "cuda":
            # 'cuda' is the current GPU, as in PyTorch
            dev = f"cuda:{_C.cuda_current_device()}" if \
                _C.cuda_device_count() > 0 else "cuda"
        same_dev = dev is None or dev == here
        same_dtype = dtype is None or dtype is self.dtype
        if same_dev and same_dtype:
            return self.clone() if copy else self
        grad = _mode.enabled and self.requires_grad
        t = self
        if not same_dev:
            if grad:
                t = _ag.ToDevice.apply(t, dev, t.dtype)
            else:
                t = _raw_to_device(t, dev, non_blocking)
        if not same_dtype:
            if grad:
                t = _ag.Cast.apply(t, dtype)
            else:
                t = _cast(t, dtype)
        return t

    def cpu(self):
        """This tensor on the CPU (self when it already is there).

        >>> import ampc
        >>> ampc.ones(2).cpu().device
        device(type='cpu')
        """
        return self._to("cpu", None)

    def cuda(self, device=None, non_blocking=False):
        """This tensor on a GPU (the current one by default; self when it
        already is there).  With ``non_blocking=True`` a copy from pinned
        memory (pin_memory()) is queued and this returns at once; otherwise
        the copy has finished when it returns, as in PyTorch.

        >>> import ampc
        >>> if ampc.cuda.is_available():
        ...     assert ampc.ones(2).cuda().is_cuda
        """
        if device is None:
            dev = "cuda"
        else:
            dev = _device_str("cuda", device)
            if not dev.startswith("cuda"):
                raise RuntimeError(
                    f"cuda(): invalid device, must be a cuda device, got "
                    f"{dev}")
        return self._to(dev, None, non_blocking=non_blocking)

    def pin_memory(self):
        """A copy of this CPU tensor in pinned (page-locked) host memory, so
        that copies to a GPU are faster and can be queued without waiting
        (``to("cuda", non_blocking=True)``).  Needs a CUDA GPU.

        >>> import ampc
        >>> if ampc.cuda.is_available():
        ...     assert ampc.ones(2).pin_memory().is_pinned()
        """
        if self.is_pinned():
            return self
        return _C.pin_memory(self._detach() if self.requires_grad else self)

    def is_pinned(self):
        """True when this tensor lives in pinned host memory.

        >>> import ampc
        >>> ampc.ones(2).is_pinned()
        False
        """
        return _C.is_pinned(self)

    def float(self):
        return self._to(None, float32)

    def half(self):
        return self._to(None, float16)

    def bfloat16(self):
        return self._to(None, bfloat16)

    def long(self):
        return self._to(None, int64)

    def bool(self):
        return self._to(None, bool_)

    def double(self):
        raise TypeError(
            "double(): ampc has no float64 dtype; use float() (float32) "
            "instead")

    def type_as(self, other):
        _check_tensor("type_as", "other", other)
        return self._to(None, other.dtype)


# ----------------------------------------------------------------------------
# to()'s arguments


def _parse_to(args, kwargs):
    """The arguments of Tensor.to -> (device str or None, dtype or None,
    copy, non_blocking)."""
    dev = dtype = None
    copy = kwargs.pop("copy", False)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    kwargs.pop("memory_format", None)
    if "device" in kwargs:
        dev = _device_str("to", kwargs.pop("device"))
    if "dtype" in kwargs:
        dtype = _check_dtype("to", "dtype", kwargs.pop("dtype"))
    if kwargs:
        raise TypeError(
            f"to(): unexpected keyword argument '{next(iter(kwargs))}'")
    args = list(args)
    if args:
        a = args[0]
        if isinstance(a, _TB):
            args.pop(0)
            dev, dtype = _dev_str(a), a.dtype
        elif a.__class__ is _C.dtype:
            pass
        elif a is None:
            args.pop(0)
        elif isinstance(a, (str, device)) or (
                isinstance(a, int) and a.__class__ is not _pybool):
            dev = _device_str("to", args.pop(0))
        else:
            raise TypeError(
                "to(): expected a dtype, a device or a Tensor as the first "
                f"argument, but got {type(a).__name__}")
    if args and args[0].__class__ is _C.dtype:
        dtype = args.pop(0)
    if args and args[0].__class__ is _pybool:
        non_blocking = args.pop(0)
        if args and args[0].__class__ is _pybool:
            copy = args.pop(0)
    if args:
        raise TypeError(
            "to() received an invalid combination of arguments: expected "
            "to(dtype), to(device, dtype=None), to(tensor) or keywords "
            f"device=/dtype=/copy=, got an extra {type(args[0]).__name__}")
    return dev, dtype, copy, non_blocking


# ----------------------------------------------------------------------------
# repr, shaped like torch's _tensor_str


class _Formatter:
    def __init__(self, arr, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if arr.size == 0:
            return
        if not floating:
            for v in arr.ravel():
                self.max_width = max(self.max_width, len(str(v)))
            return
        finite = arr[np.isfinite(arr) & (arr != 0)]
        if finite.size == 0:
            for v in arr.ravel():
                self.max_width = max(self.max_width, len(self._fmt(v)))
            return
        absv = np.abs(finite.astype(np.float64))
        mn, mx = absv.min(), absv.max()
        self.int_mode = bool(np.all(np.ceil(finite) == finite))
        if self.int_mode:
            if mx / mn > 1000.0 or mx > 1.0e8:
                self.sci_mode = True
        else:
            if mx / mn > 1000.0 or mx > 1.0e8 or mn < 1.0e-4:
                self.sci_mode = True
        if PRINT["sci_mode"] is not None:
            self.sci_mode = PRINT["sci_mode"]
        for v in arr.ravel():
            self.max_width = max(self.max_width, len(self._fmt(v)))

    def _fmt(self, v):
        if not self.floating:
            return str(v)
        v = _pyfloat(v)
        digits = PRINT["precision"]
        if self.sci_mode:
            return f"{v:.{digits}e}"
        if self.int_mode:
            s = f"{v:.0f}"
            if not (math.isinf(v) or math.isnan(v)):
                s += "."
            return s
        return f"{v:.{digits}f}"

    def width(self):
        return self.max_width

    def format(self, v):
        s = self._fmt(v)
        return " " * (self.max_width - len(s)) + s


def _summarized(arr):
    """The edge items of every dim of a large array (for the formatter)."""
    edge = PRINT["edgeitems"]
    if arr.ndim == 0:
        return arr
    if arr.shape[0] > 2 * edge:
        arr = np.concatenate([arr[:edge], arr[-edge:]])
    if arr.ndim == 1:
        return arr
    return np.stack([_summarized(a) for a in arr]) if arr.shape[0] else arr


def _vector_str(arr, indent, fmt, summarize):
    edge = PRINT["edgeitems"]
    element_length = fmt.width() + 2
    per_line = _pyint(max(1, math.floor((PRINT["linewidth"] - indent)
                                        / element_length)))
    if summarize and arr.shape[0] > 2 * edge:
        data = ([fmt.format(v) for v in arr[:edge]] + [" ..."]
                + [fmt.format(v) for v in arr[-edge:]])
    else:
        data = [fmt.format(v) for v in arr]
    lines = [", ".join(data[i:i + per_line])
             for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(arr, indent, fmt, summarize):
    if arr.ndim == 0:
        return fmt.format(arr[()])
    if arr.ndim == 1:
        return _vector_str(arr, indent, fmt, summarize)
    n, edge = arr.shape[0], PRINT["edgeitems"]
    if summarize and n > 2 * edge:
        parts = ([_array_str(arr[i], indent + 1, fmt, summarize)
                  for i in range(edge)] + ["..."]
                 + [_array_str(arr[i], indent + 1, fmt, summarize)
                    for i in range(n - edge, n)])
    else:
        parts = [_array_str(arr[i], indent + 1, fmt, summarize)
                 for i in range(n)]
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def _tensor_repr(t):
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device_type != "cpu":
        suffixes.append(f"device='{t.device}'")
    arr = _host_array(t)
    floating = t.dtype.is_floating_point
    if arr.size == 0:
        body = "[]"
        if arr.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
    else:
        summarize = arr.size > PRINT["threshold"]
        fmt = _Formatter(_summarized(arr) if summarize else arr, floating)
        body = _array_str(arr, indent, fmt, summarize)
    if t.dtype not in (float32, int64, bool_):
        suffixes.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    out = [prefix, body]
    last_line_len = len(body) - body.rfind("\n") + indent
    for s in suffixes:
        if last_line_len + len(s) + 2 > PRINT["linewidth"]:
            out.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            out.append(", " + s)
            last_line_len += len(s) + 2
    out.append(")")
    return "".join(out)
