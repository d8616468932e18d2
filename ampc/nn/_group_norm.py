"""``group_norm`` (``ampc.nn.functional``): PyTorch's group normalisation
on ampc's layer_norm kernel.

Input (N, C, *) seen as (N, G, C/G * prod(*)) is exactly a layer norm of
each row without affine; the per-channel scale and shift follow.  The
statistics come from the kernel, accumulated in float32 for float16 and
bfloat16 inputs, and backward is one ``_C.layer_norm_backward`` call for the
input, with the weight and bias gradients as per-channel sums.  A float16
or bfloat16 input may come with float32 weight and bias, as PyTorch
allows; the output keeps the input's dtype.  Under autocast it runs in
float32 on CUDA and in the input's dtype on the CPU (PyTorch's lists).

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


def _affine(y, weight, bias, dtype):
    """y (the kernel's fresh output, ours to overwrite) scaled and shifted
    per channel; float32 parameters of a 16-bit y act in float32, rounded
    once."""
    params = [p for p in (weight, bias) if p is not None]
    if all(p.dtype is y.dtype for p in params):
        if weight is not None:
            y.mul_(_channel_view(weight, y.ndim))
        if bias is not None:
            y.add_(_channel_view(bias, y.ndim))
        return y
    if weight is not None:
        y = y * _channel_view(weight, y.ndim)
    if bias is not None:
        y = y + _channel_view(bias, y.ndim)
    return y if y.dtype is dtype else y.to(dtype)


def _normalise(x, groups, eps):
    """(x normalised per (sample, group) in x's dtype and shape, the rows
    it was computed on, mean, rstd)."""
    k = x.shape[1] // groups
    for s in x.shape[2:]:
        k *= s
    rows = x.reshape(x.shape[0], groups, k)
    y, mean, rstd = _C.layer_norm(rows, (rows.shape[2],), None, None, eps)
    return y.view(x.shape), rows, mean, rstd


class _GroupNorm(Function):
    node_name = "NativeGroupNormBackward0"
    autocast_op = "group_norm"

    @staticmethod
    def forward(ctx, x, groups, weight, bias, eps):
        y, rows, mean, rstd = _normalise(x, groups, eps)
        ctx.shape = x.shape
        ctx.rows = tuple(rows.shape)
        ctx.eps = eps
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return _affine(y, weight, bias, x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        rows = x.reshape(ctx.rows)
        needs = ctx.needs_input_grad
        gx = gw = gb = None
        if needs[2] or needs[3]:
            gw, gb = _param_grads(g, x, mean, rstd, ctx.rows[1])
            gw = gw.to(weight.dtype) if needs[2] else None
            gb = gb.to(bias.dtype) if needs[3] else None
        if needs[0]:
            gy = g if weight is None else g * _channel_view(weight, g.ndim)
            gy = gy.to(rows.dtype).reshape(rows.shape)
            gx = _C.layer_norm_backward(
                gy, rows, (rows.shape[2],), None, mean, rstd,
                (True, False, False))[0].view(ctx.shape)
        return gx, None, gw, gb, None


def _param_grads(g, x, mean, rstd, groups):
    """(sum of g * xhat, sum of g) per channel, in float32, from per
    (sample, channel) sums of g * x and g: xhat is never formed, so two
    full passes instead of four (PyTorch's CPU kernel does the same)."""
    n, c = x.shape[0], x.shape[1]
    g3 = g.reshape(n, c, -1).float()
    sum_g = g3.sum(2)
    sum_gx = (g3 * x.reshape(n, c, -1)).sum(2)
    per_group = (n, groups, 1)
    mean = mean.view(per_group).expand(n, groups, c // groups).reshape(n, c)
    rstd = rstd.view(per_group).expand(n, groups, c // groups).reshape(n, c)
    return (rstd * (sum_gx - mean * sum_g)).sum(0), sum_g.sum(0)


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
    y = _normalise(input, groups, eps)[0]
    return _affine(y, weight, bias, input.dtype)
