"""``group_norm`` (``ampc.nn.functional``): PyTorch's group normalisation,
one autograd ``Function`` over the fused ``_C.group_norm`` kernel forward
and one ``_C.group_norm_backward`` call backward.

Forward takes each (sample, group)'s statistics in two passes (float32
lanes folded in double, also for float16 and bfloat16 inputs) and
normalises with the per-channel scale and shift in a third; backward takes
the per-(sample, channel) sums of grad_output and grad_output * (x - mean)
in one pass, then grad_input in a second, and the weight and bias
gradients from those sums.  A float16 or bfloat16 input may come with
float32 weight and bias, as PyTorch allows; the output keeps the input's
dtype.  Under autocast it runs in float32 on CUDA and in the input's dtype
on the CPU (PyTorch's lists).

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.group_norm(ampc.tensor([[[0.0], [2.0], [1.0], [5.0]]]), 2)
tensor([[[-1.0000],
         [ 1.0000],
         [-1.0000],
         [ 1.0000]]])
"""
import operator

from .. import _C
from .._dtype_device import _pybool, float32
from ..autograd import Function, autocast_listed
from ._args import _needs_grad, _number, _opt_tensor, _tensor

__all__ = ["group_norm"]


def _channel_view(t, ndim):
    """A (C,) parameter shaped to broadcast over (N, C, *)."""
    return t.view((t.shape[0],) + (1,) * (ndim - 2))


class _GroupNorm(Function):
    node_name = "NativeGroupNormBackward0"
    autocast_op = "group_norm"

    @staticmethod
    def forward(ctx, x, groups, weight, bias, eps):
        y, mean, rstd = _C.group_norm(x, groups, weight, bias, eps)
        ctx.groups = groups
        ctx.shape = x.shape
        ctx.rows = _rows(x.shape, groups)
        ctx.eps = eps
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        needs = ctx.needs_input_grad
        if g.dtype is not x.dtype:
            g = g.to(x.dtype)
        gx, gw, gb = _C.group_norm_backward(
            g, x, ctx.groups, weight, mean, rstd,
            (needs[0], needs[2], needs[3] and bias is not None))
        return gx, None, gw, gb, None


def _rows(shape, groups):
    """(N, groups, C / groups * prod(*)): x (N, C, *) as one row per
    (sample, group), for the differentiable backward."""
    k = shape[1] // groups
    for s in shape[2:]:
        k *= s
    return (shape[0], groups, k)


def formulas():
    """The differentiable backward, for ``backward(create_graph=True)``
    (autograd/higher_order.py): layer norm's formula on the groups, in
    float32, the statistics recomputed from x so that the second
    derivative reaches x through them."""
    from ._norm import _input_grad, _normalised

    def grads(node, g):
        x, weight, bias, _, _ = node.saved_tensors
        needs = node.needs_input_grad
        g = g.float()
        xhat, rstd = _normalised(x.float().reshape(node.rows), (2,),
                                 node.eps)
        dims = (0,) + tuple(range(2, g.ndim))
        gx = gw = gb = None
        if needs[0]:
            gy = g if weight is None else \
                g * _channel_view(weight.float(), g.ndim)
            gx = _input_grad(gy.reshape(node.rows), xhat, rstd, (2,)) \
                .reshape(node.shape)
        if needs[2]:
            gw = (g * xhat.reshape(node.shape)).sum(dims)
        if needs[3]:
            gb = g.sum(dims)
        return gx, None, gw, gb, None
    return {_GroupNorm: grads}


def _groups(v):
    if v.__class__ is _pybool or not hasattr(v, "__index__"):
        raise TypeError(
            "group_norm(): argument 'num_groups' (position 2) must be int, "
            f"not {type(v).__name__}")
    return operator.index(v)


def _check_param(name, p, input):
    if p is None:
        return
    c = input.shape[1]
    if p.ndim != 1 or p.shape[0] != c:
        raise RuntimeError(
            f"Expected {name} to be a vector of size equal to the number of "
            f"channels in input, but got {name} of shape {list(p.shape)} "
            f"and input of shape {list(input.shape)}")
    if p.dtype is not input.dtype and p.dtype is not float32:
        raise RuntimeError(
            f"group_norm(): expected {name} to have the input's dtype "
            f"({input.dtype}) or float32, but got {p.dtype}")


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation of input (N, C, *): the C channels form
    ``num_groups`` groups of C / num_groups channels, and each sample's
    group is normalised by its own mean and biased variance,
    (x - mean) / sqrt(var + eps), then scaled by ``weight`` and shifted by
    ``bias`` (each of shape (C,)) per channel.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.group_norm(ampc.randn(2, 6, 5, 5), 3).shape
    ampc.Size([2, 6, 5, 5])
    """
    _tensor("group_norm", "input", 1, input)
    groups = _groups(num_groups)
    _opt_tensor("group_norm", "weight", 3, weight)
    _opt_tensor("group_norm", "bias", 4, bias)
    eps = _number("group_norm", "eps", eps)
    if input.ndim < 2:
        raise RuntimeError(
            "Expected at least 2 dimensions for input tensor but received "
            f"{input.ndim}")
    if groups <= 0:
        raise RuntimeError(
            f"group_norm(): expected num_groups to be positive, but got "
            f"{groups}")
    if input.shape[1] % groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by "
            f"num_groups, but got input of shape {list(input.shape)} and "
            f"num_groups={groups}")
    _check_param("weight", weight, input)
    _check_param("bias", bias, input)
    if _needs_grad(input, weight, bias) or autocast_listed(_GroupNorm):
        return _GroupNorm.apply(input, groups, weight, bias, eps)
    return _C.group_norm(input, groups, weight, bias, eps)[0]
