"""``ampc.where``, ``Tensor.where``, ``Tensor.masked_fill`` and
``Tensor.masked_fill_``: one ``_C.where`` call each (a select kernel,
``csrc/ops_where.c``), through ``autograd.Where`` / ``autograd.MaskedFill``
when a gradient is wanted.  ``masked_fill(mask, value)`` is
``where(mask, value, self)`` with ``value`` first converted to self's dtype,
since masked_fill keeps self's dtype where ``where`` would promote.
"""
from . import _C
from . import autograd as _ag
from ._dtype_device import bool_
from ._tensor_args import _SCALARS, _TB, _check_number, _coerce_scalar

_mode = _ag._mode
_c_where = _C.where


def _number(v):
    """A NumPy scalar as a Python number; anything else as it is (C names
    what it does not take)."""
    if isinstance(v, _TB) or v.__class__ in _SCALARS:
        return v
    c = _coerce_scalar(v)
    return v if c is None else c


def _wants_grad(v):
    return isinstance(v, _TB) and v.requires_grad


_UNSET = object()


def where(condition, input=_UNSET, other=_UNSET):
    """``input`` where ``condition`` is True, else ``other``, element-wise,
    with condition, input and other broadcast together.  ``input`` and
    ``other`` may be Python numbers; their dtypes promote as in ``+``.
    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.

    >>> import ampc
    >>> x = ampc.tensor([-1.0, 2.0, -3.0])
    >>> ampc.where(x > 0, x, 0.0)
    tensor([0., 2., 0.])
    """
    if input is _UNSET and other is _UNSET and isinstance(condition, _TB):
        return condition.nonzero(as_tuple=True)
    if input is _UNSET or other is _UNSET:
        raise TypeError("where() takes a condition alone, or a condition, "
                        "input and other")
    input, other = _number(input), _number(other)
    if _mode.enabled and (_wants_grad(input) or _wants_grad(other)):
        return _ag.Where.apply(condition, input, other)
    return _c_where(condition, input, other)


def _same_device(a, b):
    return a.device_type == b.device_type and \
        a.device_index == b.device_index


def _check_shapes(fn, self, mask, inplace):
    """mask and self broadcast together (in place: to self's shape)."""
    ms, ss = tuple(mask.shape), tuple(self.shape)
    ok = len(ms) <= len(ss) or not inplace
    for m, s in zip(reversed(ms), reversed(ss)):
        ok = ok and (m == s or m == 1 or (s == 1 and not inplace))
    if ok:
        return
    if inplace:
        raise RuntimeError(
            f"{fn}(): mask of shape {list(ms)} cannot be broadcast to "
            f"self's shape {list(ss)}")
    raise RuntimeError(
        f"{fn}(): the shapes of self {list(ss)} and mask {list(ms)} are "
        "not broadcastable")


def _fill_value(fn, self, value):
    """value as where() takes it for self: a 0-d tensor of self's dtype,
    or a Python number of self's kind."""
    if isinstance(value, _TB):
        if value.ndim != 0:
            raise RuntimeError(
                f"{fn}(): only supports a 0-dimensional value tensor, but "
                f"got tensor with {value.ndim} dimension(s).")
        if value.device_type != "cpu" and not _same_device(value, self):
            raise RuntimeError(
                f"{fn}(): expected value to be on {self.device}, the device "
                f"of self, or be a CPU tensor, but it is on {value.device}")
        return value if value.dtype is self.dtype else value.to(self.dtype)
    value = _check_number(fn, "value", value, allow_none=False)
    if self.dtype is bool_:
        return bool(value)
    if self.dtype.is_floating_point:
        return value
    try:
        value = int(value)
    except (OverflowError, ValueError):
        value = None
    if value is None or not -2 ** 63 <= value < 2 ** 63:
        raise RuntimeError(
            f"{fn}(): value cannot be converted to {self.dtype.name} "
            "without overflow")
    return value


def _masked_fill_args(fn, self, mask, value, inplace):
    """Checks masked_fill's arguments; returns the value for where()."""
    if not isinstance(mask, _TB):
        raise TypeError(
            f"{fn}(): argument 'mask' must be a Tensor, but got "
            f"{type(mask).__name__}")
    if mask.dtype is not bool_:
        raise RuntimeError(
            f"{fn}(): only supports boolean masks, but got mask with dtype "
            f"{mask.dtype.name}")
    if not _same_device(mask, self) and not (
            mask.device_type == "cpu" and mask.ndim == 0):
        raise RuntimeError(
            f"{fn}(): expected mask to be on {self.device}, the device of "
            f"self, but it is on {mask.device}")
    _check_shapes(fn, self, mask, inplace)
    return _fill_value(fn, self, value)


def tensor_where(self, condition, other):
    """``self`` where ``condition`` is True, else ``other``
    (``ampc.where(condition, self, other)``).

    >>> import ampc
    >>> x = ampc.tensor([1.0, -2.0])
    >>> x.where(x > 0, -1.0)
    tensor([ 1., -1.])
    """
    return where(condition, self, other)


def masked_fill(self, mask, value):
    """A copy of self with ``value`` (a number or a 0-d tensor) where the
    bool ``mask`` (broadcast with self) is True; self's dtype.

    >>> import ampc
    >>> x = ampc.tensor([1.0, 2.0, 3.0])
    >>> x.masked_fill(x > 1.5, 0.0)
    tensor([1., 0., 0.])
    """
    value = _masked_fill_args("masked_fill", self, mask, value, False)
    if _mode.enabled and (self.requires_grad or _wants_grad(value)):
        return _ag.MaskedFill.apply(self, mask, value)
    return _c_where(mask, value, self)


def masked_fill_(self, mask, value):
    """In place: set self to ``value`` where the bool ``mask`` (broadcast
    to self's shape) is True; returns self.

    >>> import ampc
    >>> x = ampc.zeros(3)
    >>> x.masked_fill_(ampc.tensor([True, False, True]), 5.0)
    tensor([5., 0., 5.])
    """
    value = _masked_fill_args("masked_fill_", self, mask, value, True)
    if _mode.enabled and (self.requires_grad or _wants_grad(value)):
        return _ag.inplace(self, _ag.MaskedFill, mask, value)
    _c_where(mask, value, self, out=self)
    return self
