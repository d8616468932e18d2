"""``max_pool1d``, ``adaptive_max_pool1d``, ``adaptive_max_pool2d`` and
``adaptive_avg_pool1d``: PyTorch's pooling of (N, C, L) / (C, L) signals
and adaptive max pooling of images.  The 1-d poolings are the 2-d ones
over a height-1 view (max_pool2d's kernel takes every option max_pool1d
has; a height-1 plane's flat index is the position along L).  The adaptive
max pooling's forward is its own kernel (csrc/nn_adaptive_max_pool.c,
cpu/ref/adaptive_max_pool.c, cuda/adaptive_max_pool.cu) and its gradient
max_pool2d's scatter at the indices.  Under autocast they run in the
input's dtype, as in PyTorch.

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.max_pool1d(ampc.arange(6.0).view(1, 1, 6), 2)
tensor([[[1., 3., 5.]]])
>>> F.adaptive_max_pool2d(ampc.arange(16.0).view(1, 4, 4), 2)
tensor([[[ 5.,  7.],
         [13., 15.]]])
"""
import operator

from .. import _C
from .._dtype_device import _pybool
from ..autograd import Function, _mode
from ._args import _tensor
from ._avg_pool import adaptive_avg_pool2d


def _one(fn, name, v):
    """An int or a sequence of one int (max_pool1d's arguments)."""
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise RuntimeError(
                f"{fn}() {name} must be an int, list of ints or tuple of "
                f"ints of size 1 but got size {len(v)}")
        v = v[0]
    if v.__class__ is _pybool or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}(): argument '{name}' must be an int or a "
                        f"tuple of one int, not {type(v).__name__}")
    return operator.index(v)


def _signal(fn, input):
    """input (C, L) or (N, C, L)."""
    _tensor(fn, "input", 1, input)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"{fn}: Expected 2D or 3D (batch mode) tensor with optional 0 "
            f"dim batch size for input, but got:{list(input.shape)}")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode=False, return_indices=False):
    """The maximum of each ``kernel_size`` window along the last dim of
    (N, C, L) or (C, L) input; stride defaults to kernel_size, padding
    pads with -inf.  ``return_indices=True`` also returns each maximum's
    position along L."""
    fn = "max_pool1d"
    _signal(fn, input)
    k = _one(fn, "kernel_size", kernel_size)
    s = k if stride is None or (isinstance(stride, (tuple, list))
                                and len(stride) == 0) \
        else _one(fn, "stride", stride)
    p = _one(fn, "padding", padding)
    d = _one(fn, "dilation", dilation)
    for name, v in (("kernel_size", k), ("stride", s), ("dilation", d)):
        if v <= 0:
            raise RuntimeError(f"{fn}() {name} must be greater than zero, "
                               f"but got {v}")
    if p < 0:
        raise RuntimeError(f"{fn}() padding must be non-negative, but got "
                           f"{p}")
    if p > k // 2:
        raise RuntimeError(f"{fn}() padding should be at most half of "
                           f"kernel size, but got padding={p} and "
                           f"kernel_size={k}")
    length = input.shape[-1]
    span = length + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    if out < 1:
        raise RuntimeError(f"{fn}() Invalid computed output size: {out}")
    from .functional import max_pool2d
    result = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d),
                        ceil_mode, return_indices)
    if return_indices:
        return result[0].squeeze(-2), result[1].squeeze(-2)
    return result.squeeze(-2)


class _AdaptiveMaxPool2d(Function):
    node_name = "AdaptiveMaxPool2DBackward0"

    @staticmethod
    def forward(ctx, x, oh, ow):
        y, indices = _C.adaptive_max_pool2d(x, oh, ow)
        ctx.in_shape = tuple(x.shape)
        ctx.save_for_backward(indices)
        return y, indices

    @staticmethod
    def backward(ctx, g, _g_indices=None):
        indices, = ctx.saved_tensors
        return (_C.max_pool2d_backward(g, indices, ctx.in_shape), None,
                None)


def formulas():
    """The differentiable backward here, for ``backward(create_graph=
    True)`` (autograd/higher_order.py): max_pool2d's scatter, whose own
    gradient is the gather at the indices."""
    from ..autograd.higher_order import PoolScatter

    def pool(node, g, _g_indices=None):
        indices, = node.saved_tensors
        return PoolScatter.apply(g, indices, node.in_shape, (), False), \
            None, None
    return {_AdaptiveMaxPool2d: pool}


def _output_pair(fn, output_size, h, w):
    """adaptive pooling's output_size: an int, or a pair whose None keeps
    that input dim."""
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise TypeError(f"{fn}(): output_size must be an int or a pair, "
                            f"got {output_size!r}")
        pair = list(output_size)
    else:
        pair = [output_size, output_size]
    for i, keep in enumerate((h, w)):
        if pair[i] is None and isinstance(output_size, (tuple, list)):
            pair[i] = keep
        elif pair[i].__class__ is _pybool or not hasattr(pair[i],
                                                         "__index__"):
            raise TypeError(f"{fn}(): output_size must be an int or a pair "
                            f"of ints (or None), got {output_size!r}")
        pair[i] = operator.index(pair[i])
    return pair


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling of (N, C, H, W) or (C, H, W) input to ``output_size``
    (an int, or a pair whose None keeps that input dim): output i takes the
    max of input rows floor(i H / OH) to ceil((i + 1) H / OH), and likewise
    for columns; ``return_indices=True`` also returns each maximum's flat
    index in its H*W plane."""
    fn = "adaptive_max_pool2d"
    _tensor(fn, "input", 1, input)
    h = input.shape[-2] if input.ndim >= 2 else 0
    w = input.shape[-1] if input.ndim >= 1 else 0
    oh, ow = _output_pair(fn, output_size, h, w)
    if _mode.enabled and input.requires_grad:
        y, indices = _AdaptiveMaxPool2d.apply(input, oh, ow)
    else:
        y, indices = _C.adaptive_max_pool2d(input, oh, ow)
    return (y, indices) if return_indices else y


def _one_size(fn, output_size):
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 1:
            raise RuntimeError(f"{fn}() argument 'output_size' should "
                               f"contain one int (got {len(output_size)})")
        output_size = output_size[0]
    if output_size.__class__ is _pybool or not hasattr(output_size,
                                                       "__index__"):
        raise TypeError(f"{fn}(): output_size must be an int, got "
                        f"{output_size!r}")
    return operator.index(output_size)


def _adaptive_signal(fn, input):
    _tensor(fn, "input", 1, input)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"{fn}(): Expected 2 to 3 dimensions, but got {input.ndim}-"
            "dimensional tensor for argument #1 'self'")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling of (N, C, L) or (C, L) input to ``output_size`` along
    L (windows as ``adaptive_max_pool2d``'s); ``return_indices=True`` also
    returns each maximum's position along L."""
    fn = "adaptive_max_pool1d"
    _adaptive_signal(fn, input)
    size = _one_size(fn, output_size)
    y, indices = adaptive_max_pool2d(input.unsqueeze(-2), (1, size), True)
    y, indices = y.squeeze(-2), indices.squeeze(-2)
    return (y, indices) if return_indices else y


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of (N, C, L) or (C, L) input to ``output_size``
    along L: output i averages input floor(i L / OL) to
    ceil((i + 1) L / OL)."""
    fn = "adaptive_avg_pool1d"
    _adaptive_signal(fn, input)
    size = _one_size(fn, output_size)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)
