"""``dropout1d``, ``dropout2d`` and ``dropout3d``: PyTorch's channel-wise
dropout, which zeroes whole channels (every element of (n, c, ...) for a
drawn (n, c)) with probability ``p`` and scales the others by 1/(1-p).
The keep mask has one element per (n, c), drawn from ampc's generator
(``ampc.manual_seed`` makes it repeatable); the result is ``input`` times
it, so the gradient is the mask times the incoming one.  The input ranks
and warnings are PyTorch's (``dropout2d`` of a 3-D input acts as
``dropout1d``, with its warning).

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.dropout2d(ampc.ones(1, 2, 2, 2), p=0.5, training=False).sum().item()
8.0
"""
import warnings

from .. import _creation
from ._args import _number, _tensor


def _check_p(fn, p):
    p = _number(fn, "p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(
            f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def _feature_dropout(input, p, training, inplace):
    """Drop whole (dim 0, dim 1) slices of ``input``."""
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError(
            "Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    if p == 1.0:
        # a multiply, not a fill: NaN * 0 stays NaN, as PyTorch's
        mask = _creation.zeros(shape, dtype=input.dtype, device=input.device)
    else:
        keep = _creation.rand(shape, device=input.device) < 1.0 - p
        mask = keep.to(input.dtype) / (1.0 - p)
    return input.mul_(mask) if inplace else input * mask


def _unbatched(input, p, training, inplace):
    """``_feature_dropout`` of ``input`` with a batch dim of 1 added."""
    out = _feature_dropout(input.unsqueeze(0), p, training, inplace)
    return input if inplace else out.squeeze(0)


def _warn_rank(fn, ndim, spatial):
    warnings.warn(
        f"{fn}: Received a {ndim}-D input to {fn}, which is deprecated and "
        "will result in an error in a future release. To retain the "
        "behavior and silence this warning, please use dropout instead. "
        f"Note that {fn} exists to provide channel-wise dropout on inputs "
        f"with {spatial} spatial dimensions, a channel dimension, and an "
        f"optional batch dimension (i.e. {spatial + 1}D or {spatial + 2}D "
        "inputs).", stacklevel=3)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of an (N, C, L) or (C, L) input."""
    _tensor("dropout1d", "input", 1, input)
    p = _check_p("dropout1d", p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            "dropout1d: Expected 2D or 3D input, but received a "
            f"{input.ndim}D input. Note that dropout1d exists to provide "
            "channel-wise dropout on inputs with 1 spatial dimension, a "
            "channel dimension, and an optional batch dimension (i.e. 2D "
            "or 3D inputs).")
    if input.ndim == 2:
        return _unbatched(input, p, training, inplace)
    return _feature_dropout(input, p, training, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of an (N, C, H, W) input (a 3-D input is taken
    as (N, C, L), with PyTorch's warning)."""
    _tensor("dropout2d", "input", 1, input)
    p = _check_p("dropout2d", p)
    if input.ndim not in (3, 4):
        _warn_rank("dropout2d", input.ndim, 2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that "
            "channel-wise 1D dropout behavior is desired - input is "
            "interpreted as shape (N, C, L), where C is the channel dim. "
            "This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). "
            "To maintain the 1D channel-wise dropout behavior, please switch "
            "to using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of an (N, C, D, H, W) or (C, D, H, W) input."""
    _tensor("dropout3d", "input", 1, input)
    p = _check_p("dropout3d", p)
    if input.ndim not in (4, 5):
        _warn_rank("dropout3d", input.ndim, 3)
    if input.ndim != 5:
        return _unbatched(input, p, training, inplace)
    return _feature_dropout(input, p, training, inplace)
