"""``avg_pool2d`` and ``adaptive_avg_pool2d``: PyTorch's average pooling
over the last two dims of (N, C, H, W) or (C, H, W) input, on ampc's
kernels (csrc/nn_avg_pool.c, cpu/avg_pool_loops.h, cuda/avg_pool.cu).
The input gradient is the adjoint pass (``_C.avg_pool2d_backward``), and
that pass's own gradient is the pooling again, so create_graph goes
through both.  Under autocast they run in the input's dtype, as in
PyTorch.

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.avg_pool2d(ampc.arange(16.0).view(1, 1, 4, 4), 2)
tensor([[[[ 2.5000,  4.5000],
          [10.5000, 12.5000]]]])
>>> F.adaptive_avg_pool2d(ampc.arange(16.0).view(1, 1, 4, 4), 1)
tensor([[[[7.5000]]]])
"""
from .. import _C
from ..autograd import Function, _mode
from ._args import _tensor


def _pool(x, adaptive, args):
    if adaptive:
        return _C.adaptive_avg_pool2d(x, *args)
    return _C.avg_pool2d(x, *args)


def _pool_grad(g, in_shape, adaptive, args):
    if adaptive:
        return _C.adaptive_avg_pool2d_backward(g, in_shape)
    return _C.avg_pool2d_backward(g, in_shape, *args)


class _AvgPool2d(Function):
    """The pooling; args are _C.avg_pool2d's after the input."""

    node_name = "AvgPool2DBackward0"
    adaptive = False

    @classmethod
    def forward(cls, ctx, x, args):
        ctx.in_shape = tuple(x.shape)
        ctx.args = args
        ctx.adaptive = cls.adaptive
        return _pool(x, cls.adaptive, args)

    @staticmethod
    def backward(ctx, g):
        return _pool_grad(g, ctx.in_shape, ctx.adaptive, ctx.args), None


class _AdaptiveAvgPool2d(_AvgPool2d):
    node_name = "AdaptiveAvgPool2DBackward0"
    adaptive = True


class _AvgPool2dGrad(Function):
    """The pooling's input gradient, as a differentiable op (its gradient
    is the pooling of the incoming gradient)."""

    node_name = "AvgPool2DBackwardBackward0"

    @staticmethod
    def forward(ctx, g, in_shape, adaptive, args):
        ctx.adaptive, ctx.args = adaptive, args
        return _pool_grad(g, in_shape, adaptive, args)

    @staticmethod
    def backward(ctx, gg):
        cls = _AdaptiveAvgPool2d if ctx.adaptive else _AvgPool2d
        return cls.apply(gg, ctx.args), None, None, None


def formulas():
    """The differentiable backward of each Function here, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    def pool(node, g):
        return (_AvgPool2dGrad.apply(g, node.in_shape, node.adaptive,
                                     node.args), None)
    return {_AvgPool2d: pool, _AdaptiveAvgPool2d: pool,
            _AvgPool2dGrad: _AvgPool2dGrad.backward}


def _apply(cls, input, args):
    if _mode.enabled and input.requires_grad:
        return cls.apply(input, args)
    return _pool(input, cls.adaptive, args)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each kernel_size window (stride defaults to
    kernel_size; zero padding, counted in the divisor unless
    ``count_include_pad=False``; ``divisor_override`` replaces the
    divisor; ``ceil_mode`` keeps a last partial window)."""
    _tensor("avg_pool2d", "input", 1, input)
    return _apply(_AvgPool2d, input, (kernel_size, stride, padding,
                                      bool(ceil_mode),
                                      bool(count_include_pad),
                                      divisor_override))


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to an output of ``output_size`` (an int, or a pair
    whose None keeps that input dim): output i averages input rows
    floor(i H / OH) to ceil((i + 1) H / OH), and likewise for columns."""
    _tensor("adaptive_avg_pool2d", "input", 1, input)
    return _apply(_AdaptiveAvgPool2d, input, (output_size,))
