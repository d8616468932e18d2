"""``conv1d`` (``ampc.nn.functional``): 1-D convolution as ampc's conv2d
kernels over a unit height, (N, C, L) seen as (N, C, 1, L) and the weight
(OC, C/groups, K) as (OC, C/groups, 1, K), so it gets conv2d's CPU and
cuDNN paths.  One autograd node (``ConvolutionBackward0``, as PyTorch's)
whose backward is one ``_C.conv2d_backward`` call; under autocast it runs
in the lower precision on both devices (PyTorch's conv1d policy).

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.conv1d(ampc.ones(1, 2, 5), ampc.ones(3, 2, 3), padding=1)
tensor([[[4., 6., 6., 6., 4.],
         [4., 6., 6., 6., 4.],
         [4., 6., 6., 6., 4.]]])
"""
import operator

from .. import _C
from .._dtype_device import _pybool
from ..autograd import Function, autocast_listed
from ._args import _groups, _needs_grad, _opt_tensor, _tensor
from ._pad import pad as _pad

__all__ = ["conv1d"]


class _Conv1d(Function):
    node_name = "ConvolutionBackward0"
    autocast_op = "conv1d"

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        geometry = ((1, stride), (0, padding), (1, dilation))
        out = _C.conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias,
                        *geometry, False, groups)
        ctx.geometry = geometry
        ctx.groups = groups
        ctx.save_for_backward(x, weight)
        return out.squeeze(2)

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        gx, gw, gb = _C.conv2d_backward(
            g.unsqueeze(2), x.unsqueeze(2), weight.unsqueeze(2),
            *ctx.geometry, tuple(ctx.needs_input_grad[:3]), ctx.groups)
        gx = None if gx is None else gx.squeeze(2)
        gw = None if gw is None else gw.squeeze(2)
        return gx, gw, gb, None, None, None, None


def formulas():
    """The differentiable backward, for ``backward(create_graph=True)``
    (autograd/higher_order.py): conv2d's gradient ops over the unit
    height."""
    from ..autograd.higher_order import ConvInputGrad, ConvWeightGrad

    def grads(node, g):
        x, weight = node.saved_tensors
        need = node.needs_input_grad
        g4, x4, w4 = g.unsqueeze(2), x.unsqueeze(2), weight.unsqueeze(2)
        gx = ConvInputGrad.apply(g4, w4, x4.shape, node.geometry,
                                 node.groups) \
            .squeeze(2) if need[0] else None
        gw = ConvWeightGrad.apply(x4, g4, w4, node.geometry, node.groups) \
            .squeeze(2) if need[1] else None
        gb = g.sum((0, 2)) if need[2] else None
        return gx, gw, gb, None, None, None, None
    return {_Conv1d: grads}


def _run(x, weight, bias, stride, padding, dilation, groups):
    """conv1d of a batched x with a symmetric padding."""
    if _needs_grad(x, weight, bias) or autocast_listed(_Conv1d):
        return _Conv1d.apply(x, weight, bias, stride, padding, dilation,
                             groups)
    geometry = ((1, stride), (0, padding), (1, dilation))
    return _C.conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, *geometry,
                     False, groups).squeeze(2)


def _single(fn, name, v):
    """An int or a sequence of one int -> the int."""
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise RuntimeError(
                f"{fn}(): expected {name} to be a single integer value or a "
                f"list of 1 values to match the convolution dimensions, but "
                f"got {name}={list(v)}")
        v = v[0]
    if v.__class__ is _pybool or not hasattr(v, "__index__"):
        raise TypeError(
            f"{fn}(): argument '{name}' must be an int or a tuple of one "
            f"int, but got {type(v).__name__}")
    return operator.index(v)


def string_sides(fn, padding, kernel_size, stride, dilation,
                 error=RuntimeError):
    """((left, right) per dim) for padding 'valid' or 'same' over the
    dims' kernel_size, stride and dilation: 'same' puts the odd element of
    an uneven total on the right, as PyTorch.  ``error``: the functions'
    bad strings raise RuntimeError, the modules' ValueError, as PyTorch's
    (whose messages differ too)."""
    if padding == "valid":
        return ((0, 0),) * len(kernel_size)
    if padding != "same":
        raise error(
            f"Invalid padding string: '{padding}'" if error is RuntimeError
            else f"Invalid padding string '{padding}', should be one of "
                 "{'valid', 'same'}")
    if any(s != 1 for s in stride):
        raise error(
            "padding='same' is not supported for strided convolutions")
    totals = [d * (k - 1) for k, d in zip(kernel_size, dilation)]
    return tuple((t // 2, t - t // 2) for t in totals)


def padding_sides(fn, padding, kernel_size, stride, dilation,
                  error=RuntimeError):
    """conv1d's (left, right) padding for an int, 'valid' or 'same'."""
    if isinstance(padding, str):
        return string_sides(fn, padding, (kernel_size,), (stride,),
                            (dilation,), error)[0]
    p = _single(fn, "padding", padding)
    if p < 0:
        raise RuntimeError(f"{fn}(): negative padding is not supported")
    return p, p


def pre_pad(input, sides, mode="zeros"):
    """(input, the symmetric zero padding per dim left to the convolution)
    for ``sides`` = (left, right) per spatial dim: in another mode than
    'zeros' F.pad does all of it; an uneven zero padding (padding='same')
    gets its extra right elements from F.pad, as PyTorch."""
    if mode != "zeros":
        flat = tuple(p for side in reversed(sides) for p in side)
        return _pad(input, flat, mode=mode), (0,) * len(sides)
    if any(left != right for left, right in sides):
        extra = tuple(p for left, right in reversed(sides)
                      for p in (0, right - left))
        input = _pad(input, extra)
    return input, tuple(left for left, _ in sides)


def conv_sides(input, weight, bias, stride, sides, dilation, groups,
               mode="zeros"):
    """conv1d of input (N, C, L) or (C, L) with ``sides`` = (left, right)
    padding in ``mode`` (F.pad's mode, or 'zeros')."""
    unbatched = input.ndim == 2
    if unbatched:
        input = input.unsqueeze(0)
    input, (padding,) = pre_pad(input, (sides,), mode)
    out = _run(input, weight, bias, stride, padding, dilation, groups)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1,
           groups=1):
    """1-D convolution (cross-correlation) of input (N, C, L) or (C, L)
    with weight (OC, C/groups, K) and an optional bias (OC,); stride,
    padding and dilation are ints (or 1-tuples), padding may also be
    'valid' or 'same'.  With groups G, output channels [g*OC/G,
    (g+1)*OC/G) see only input channels [g*C/G, (g+1)*C/G).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.conv1d(ampc.ones(2, 4, 9), ampc.ones(8, 2, 3), stride=2,
    ...          groups=2).shape
    ampc.Size([2, 8, 4])
    """
    _tensor("conv1d", "input", 1, input)
    _tensor("conv1d", "weight", 2, weight)
    _opt_tensor("conv1d", "bias", 3, bias)
    groups = _groups("conv1d", groups)
    stride = _single("conv1d", "stride", stride)
    dilation = _single("conv1d", "dilation", dilation)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            "Expected 2D (unbatched) or 3D (batched) input to conv1d, but "
            f"got input of size: {list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(
            "conv1d(): expected weight to be 3-D (out_channels, "
            "in_channels / groups, kernel_size), got shape "
            f"{list(weight.shape)}")
    sides = padding_sides("conv1d", padding, weight.shape[2], stride,
                          dilation)
    return conv_sides(input, weight, bias, stride, sides, dilation, groups)
