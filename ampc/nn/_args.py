"""The argument checks of ``ampc.nn.functional`` and its losses: PyTorch's
types and messages for tensors, ints, pairs of ints, groups, numbers and
the ``reduction`` name (shapes, dtypes and values are checked in ``_C``)."""
import numbers
import operator
import warnings

from .. import _C
from ..autograd import _mode
from .._dtype_device import _pybool

_TB = _C.TensorBase


def _tensor(fn, name, pos, x):
    if not isinstance(x, _TB):
        raise TypeError(
            f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
            f"{type(x).__name__}")
    return x


def _opt_tensor(fn, name, pos, x):
    if x is None:
        return x
    if not isinstance(x, _TB):
        raise TypeError(
            f"{fn}(): argument '{name}' (position {pos}) must be Tensor or "
            f"None, not {type(x).__name__}")
    return x


def _int(fn, name, v):
    if v.__class__ is _pybool or not hasattr(v, "__index__"):
        raise TypeError(
            f"{fn}(): argument '{name}' must be an int or a pair of ints, "
            f"but got {type(v).__name__}")
    return operator.index(v)


def _pair(fn, name, v):
    """An int or a pair of ints -> a pair of ints."""
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            v = (v[0], v[0])
        if len(v) != 2:
            raise ValueError(
                f"{fn}(): argument '{name}' must be an int or a pair of "
                f"ints, but got a sequence of length {len(v)}")
        return (_int(fn, name, v[0]), _int(fn, name, v[1]))
    v = _int(fn, name, v)
    return (v, v)


def _groups(fn, v):
    """conv2d's groups: a positive int (TypeError for another type,
    RuntimeError, as PyTorch, for zero or less)."""
    if v.__class__ is _pybool or not hasattr(v, "__index__"):
        raise TypeError(
            f"{fn}(): argument 'groups' expected a positive int, but got "
            f"{type(v).__name__} {v!r}")
    v = operator.index(v)
    if v < 1:
        raise RuntimeError(
            f"{fn}(): argument 'groups' expected a positive int, but got "
            f"{v}")
    return v


def _number(fn, name, v):
    if v.__class__ is _pybool or not isinstance(v, numbers.Real):
        raise TypeError(
            f"{fn}(): argument '{name}' must be a number, but got "
            f"{type(v).__name__}")
    return float(v)


def _reduction(fn, size_average, reduce, reduction):
    """The reduction name, from the deprecated size_average/reduce flags
    when given (with PyTorch's warning)."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        if size_average and reduce:
            reduction = "mean"
        elif reduce:
            reduction = "sum"
        else:
            reduction = "none"
        warnings.warn(
            "size_average and reduce args will be deprecated, please use "
            f"reduction='{reduction}' instead.", stacklevel=3)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(
            f"{reduction} is not a valid value for reduction (expected "
            f"'mean', 'sum' or 'none' in {fn}())")
    return reduction


def _needs_grad(*tensors):
    if not _mode.enabled:
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False
