"""Argument checks and raw-data helpers shared by ``ampc.Tensor``'s
modules (``tensor``, ``_tensor_ops``, ``_tensor_convert``) and by
``_creation``: scalar coercion, shape/dim/tensor/number arguments, and
host copies of a tensor's values.
"""
import numbers
import operator

import numpy as np

from . import _C
from ._dtype_device import _pybool, bfloat16, float32

_TB = _C.TensorBase
_cast = _C.cast
_pyint = int
_pyfloat = float
_SCALARS = (int, float, bool)


def _coerce_scalar(x):
    """A NumPy scalar or other real Number as a Python int/float/bool, else
    None."""
    if isinstance(x, np.generic):
        v = x.item()
        return v if v.__class__ in _SCALARS else None
    if isinstance(x, _TB):
        return None
    if isinstance(x, numbers.Integral):
        return _pyint(x)
    if isinstance(x, numbers.Real):
        return _pyfloat(x)
    return None


def _shape_arg(fn, shape, arg="shape"):
    """view(2, 3) / view((2, 3)) / view([2, -1]) -> a tuple of ints (one
    -1 allowed; C checks it)."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
        if not isinstance(shape, (tuple, list)):
            raise TypeError(
                f"{fn}(): argument '{arg}' must be a tuple of ints, but got "
                f"{type(shape).__name__}")
    out = []
    for pos, s in enumerate(shape):
        if s.__class__ is not int:
            if s.__class__ is _pybool or not hasattr(s, "__index__"):
                raise TypeError(
                    f"{fn}(): argument '{arg}' must be a tuple of ints, but "
                    f"found element of type {type(s).__name__} at pos {pos}")
            s = operator.index(s)
        out.append(s)
    return tuple(out)


def _dims_arg(fn, dim):
    """dim for reductions: None, an int, or a tuple/list of ints."""
    if dim is None or dim.__class__ is int:
        return dim
    if isinstance(dim, (tuple, list)):
        out = []
        for d in dim:
            if d.__class__ is _pybool or not hasattr(d, "__index__"):
                raise TypeError(
                    f"{fn}(): argument 'dim' must be an int or a tuple of "
                    f"ints, but found element of type {type(d).__name__}")
            out.append(operator.index(d))
        return tuple(out)
    if dim.__class__ is _pybool or not hasattr(dim, "__index__"):
        raise TypeError(
            f"{fn}(): argument 'dim' must be an int or a tuple of ints, but "
            f"got {type(dim).__name__}")
    return operator.index(dim)


def _check_tensor(fn, arg, x):
    if not isinstance(x, _TB):
        raise TypeError(
            f"{fn}(): argument '{arg}' must be a Tensor, but got "
            f"{type(x).__name__}")


def _check_number(fn, arg, x, allow_none=True):
    if x is None and allow_none:
        return x
    if x.__class__ in _SCALARS:
        return x
    c = _coerce_scalar(x)
    if c is None:
        raise TypeError(
            f"{fn}(): argument '{arg}' must be a number"
            + (" or None" if allow_none else "")
            + f", but got {type(x).__name__}")
    return c


def _c_array(a):
    """``a`` as a C-contiguous array (0-d stays 0-d, unlike
    np.ascontiguousarray)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


def _raw_to_device(t, dev, non_blocking=False):
    out = _C.empty(tuple(t.shape), t.dtype, dev)
    return _C.copy_(out, t, non_blocking)


def _host_array(t):
    """A NumPy array with t's values (float32 for bfloat16), sharing memory
    when t is a CPU tensor that NumPy can represent."""
    if t.device_type != "cpu":
        t = _raw_to_device(t, "cpu")
    if t.dtype is bfloat16:
        return _cast(t, float32)._numpy()
    return t._detach()._numpy()
