"""``pad`` (``ampc.nn.functional``): PyTorch's ``F.pad`` in its four modes.

'constant' pads (or, with negative amounts, crops) any number of trailing
dims: a filled tensor with the input copied into its interior; its
gradient is the incoming gradient padded by the negated amounts.
'reflect', 'replicate' and 'circular' pad the last 1, 2 or 3 dims of a
batched or unbatched input by an index per padded dim (``_axis_index``),
with PyTorch's index formulas, negative amounts included.  Under CPU
autocast reflect and replicate run in float32, as PyTorch's
reflection_pad/replication_pad; the others keep the input's dtype.

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.pad(ampc.tensor([[1.0, 2.0, 3.0]]), (2, 1), mode="reflect")
tensor([[3., 2., 1., 2., 3., 2.]])
"""
import operator

import numpy as np

from .. import _C
from .._dtype_device import _pybool
from ..autograd import Function
from ..autograd.function import _dev_str
from . import _axis_index as _ax
from ._args import _needs_grad, _tensor

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_list(pad):
    if not isinstance(pad, (tuple, list)):
        raise TypeError(
            "pad(): argument 'pad' (position 2) must be tuple of ints, not "
            f"{type(pad).__name__}")
    out = []
    for i, p in enumerate(pad):
        if p.__class__ is _pybool or not hasattr(p, "__index__"):
            raise TypeError(
                "pad(): argument 'pad' (position 2) must be tuple of ints, "
                f"but found element of type {type(p).__name__} at pos {i}")
        out.append(operator.index(p))
    return tuple(out)


def _pairs(pad):
    """((dim from the end, left, right), ...): pad's pairs, last dim first."""
    return [(-1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


# ----------------------------------------------------------------------------
# constant


def _fill_value(value, dtype):
    if dtype.is_floating_point:
        return float(value)
    return bool(value) if dtype.name == "bool" else int(value)


def _constant_pad(x, pad, value):
    shape = list(x.shape)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for d, left, right in _pairs(pad):
        n = shape[d]
        size = n + left + right
        if size < 0:
            raise RuntimeError(
                f"pad(): padding ({left}, {right}) of dimension "
                f"{x.ndim + d} of size {n} gives a negative size {size}")
        shape[d] = size
        # the part of x kept, and where it lands
        lo, hi = max(0, -left), n - max(0, -right)
        src[d] = slice(lo, max(lo, hi))
        dst[d] = slice(max(0, left), max(0, left) + max(0, hi - lo))
    out = _C.full(tuple(shape), _fill_value(value, x.dtype), x.dtype,
                  _dev_str(x))
    if out.numel() and x.numel():
        _C.copy_(out[tuple(dst)], x[tuple(src)])
    return out


class _ConstantPad(Function):
    node_name = "ConstantPadNdBackward0"

    @staticmethod
    def forward(ctx, x, pad, value):
        ctx.pad = pad
        return _constant_pad(x, pad, value)

    @staticmethod
    def backward(ctx, g):
        return _constant(g, tuple(-p for p in ctx.pad), 0), None, None


def formulas():
    """The differentiable backward of the constant pad (the others are
    ``_axis_index``'s), for ``backward(create_graph=True)``."""
    return {_ConstantPad: _ConstantPad.backward}


def _constant(x, pad, value):
    if _needs_grad(x):
        return _ConstantPad.apply(x, pad, value)
    return _constant_pad(x, pad, value)


# ----------------------------------------------------------------------------
# reflect, replicate, circular


_NODES = {
    (mode, k): _ax.subclass(f"{name}{k}DBackward0", policy)
    for mode, name, policy in (
        ("reflect", "ReflectionPad", "reflection_pad"),
        ("replicate", "ReplicationPad", "replication_pad"),
        ("circular", "CircularPad", None))
    for k in (1, 2, 3)
}


def _source_index(mode, n, left, right):
    """The input index of each output position along one dim, by
    PyTorch's formulas (negative amounts crop)."""
    j = np.arange(n + left + right)
    i_start, o_start = max(0, -left), max(0, left)
    if mode == "circular":
        # wraps around what is left after the negative amounts crop
        kept = n - i_start - max(0, -right)
        return i_start + (j - o_start) % kept
    if mode == "reflect":
        i = np.where(j < left, 2 * left - j,
                     np.where(j < n + left, j, 2 * (n + left - 1) - j))
    else:
        i = np.clip(j, left, n + left - 1)
    return i - o_start + i_start


def _unsupported(pad, x):
    return NotImplementedError(
        f"Padding size {len(pad)} is not supported for {x.ndim}D input "
        "tensor.\nSupported combinations for non-constant padding:\n"
        "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
        "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
        "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _check_index_pad(mode, x, pad):
    k = len(pad) // 2
    shape = list(x.shape)
    if mode != "circular":
        batched = x.ndim == k + 2
        if 0 in shape[1 if batched else 0:]:
            raise RuntimeError(
                f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with "
                "possibly 0 batch size and other non-zero dimensions for "
                f"input, but got: {shape}")
    for i, (d, left, right) in enumerate(_pairs(pad)):
        n = shape[d]
        if mode == "reflect" and (left >= n or right >= n):
            raise RuntimeError(
                f"Argument #{4 + 2 * i}: Padding size should be less than "
                "the corresponding input dimension, but got: padding "
                f"({left}, {right}) at dimension {x.ndim + d} of input "
                f"{shape}")
        if mode == "circular" and (left > n or right > n):
            raise RuntimeError(
                "Padding value causes wrapping around more than once.")
        size = n + left + right
        kept = n - max(0, -left) - max(0, -right)
        if size < (0 if mode == "circular" else 1) or (size and kept < 1):
            raise RuntimeError(
                f"pad(): padding ({left}, {right}) in mode '{mode}' makes "
                f"dimension {x.ndim + d} of size {n} size {size}")


def _index_pad(x, pad, mode):
    k = len(pad) // 2
    if x.ndim not in (k + 1, k + 2):
        raise _unsupported(pad, x)
    _check_index_pad(mode, x, pad)
    plan = tuple(
        (x.ndim + d,
         _ax.index_tensor(_source_index(mode, x.shape[d], left, right),
                          x.device))
        for d, left, right in _pairs(pad))
    return _ax.run(_NODES[mode, k], x, plan)


def pad(input, pad, mode="constant", value=None):
    """Pads ``input``: ``pad`` holds (left, right) amounts for the last
    dim, then the one before, and so on ((1, 2, 0, 3) pads the last dim by
    1 and 2 and the one before by 0 and 3).  'constant' fills with
    ``value`` (0 by default) and takes any number of dims; a negative
    amount crops.  'reflect' mirrors without repeating the edge,
    'replicate' repeats the edge and 'circular' wraps around, for the
    last 1, 2 or 3 dims of a batched or unbatched input.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.pad(ampc.ones(2, 3), (1, 1), value=0.5)
    tensor([[0.5000, 1.0000, 1.0000, 1.0000, 0.5000],
            [0.5000, 1.0000, 1.0000, 1.0000, 0.5000]])
    """
    _tensor("pad", "input", 1, input)
    pad = _pad_list(pad)
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(
            "Padding length should be less than or equal to two times the "
            f"input dimension but got padding length {len(pad)} and input "
            f"of dimension {input.ndim}")
    if mode == "constant":
        return _constant(input, pad, 0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(
            f'Padding mode "{mode}" doesn\'t take in value argument')
    if not 1 <= len(pad) // 2 <= 3:
        raise _unsupported(pad, input)
    return _index_pad(input, pad, mode)
