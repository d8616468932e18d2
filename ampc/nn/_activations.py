"""``gelu`` (exact, or ``approximate="tanh"``), ``silu`` and
``leaky_relu``: PyTorch's activations (``inplace=True`` as PyTorch's, also
under autograd).  GELU and SiLU and their
derivatives are element-wise kernels of their own (``_C.unary`` ops
"gelu", "gelu_tanh", "silu" and "*_grad", and the fused backward, g * f'(x), as
``_C.binary`` ops "*_backward"; csrc/activation_math.h, the same code on
the CPU and the GPU); a 16-bit gradient is formed in float32 and rounded
once.  The derivative is an op with its own gradient, so
create_graph goes through.  Under autocast they run in the input's dtype,
as in PyTorch.

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.gelu(ampc.tensor([-1.0, 0.0, 2.0]))
tensor([-0.1587,  0.0000,  1.9545])
>>> F.silu(ampc.tensor([-1.0, 0.0, 2.0]))
tensor([-0.2689,  0.0000,  1.7616])
"""
import math

from .. import _C
from ..autograd import Function, _mode
from ..autograd import inplace as _inplace
from ._args import _tensor

_GRAD_OP = {"gelu": "gelu_grad", "gelu_tanh": "gelu_tanh_grad",
            "silu": "silu_grad"}
_BACKWARD_OP = {"gelu": "gelu_backward", "gelu_tanh": "gelu_tanh_backward",
                "silu": "silu_backward"}
_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715


def _unary(x, op):
    return _C.unary(op, x)


class _Activation(Function):
    """y = op(x) for op in "gelu", "gelu_tanh", "silu"; the gradient is
    g * op'(x), from the saved input."""

    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        ctx.save_for_backward(x)
        return _C.unary(op, x)

    @staticmethod
    def backward(ctx, g):
        # one fused pass, g * op'(x), in float32 and rounded once
        x, = ctx.saved_tensors
        return _C.binary(_BACKWARD_OP[ctx.op], g, x), None


class _Gelu(_Activation):
    node_name = "GeluBackward0"


class _Silu(_Activation):
    node_name = "SiluBackward0"


class _ActivationGrad(Function):
    """op'(x) as an op of its own (what create_graph differentiates); its
    gradient is gg * op''(x), written with differentiable ops."""

    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        ctx.save_for_backward(x)
        return _C.unary(_GRAD_OP[op], x)

    @staticmethod
    def backward(ctx, gg):
        x, = ctx.saved_tensors
        return gg * _second_derivative(ctx.op, x), None


def _second_derivative(op, x):
    """op''(x) with ampc's differentiable tensor ops."""
    if op == "gelu":
        pdf = (x * x * -0.5).exp() * (1.0 / math.sqrt(2.0 * math.pi))
        return pdf * (2.0 - x * x)
    if op == "silu":
        s = x.sigmoid()
        return s * (1.0 - s) * (2.0 + x * (1.0 - 2.0 * s))
    # gelu_tanh: with t = tanh(u), u = c (x + k x^3):
    # (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2)
    u = (x + x * x * x * _GELU_TANH_C) * _SQRT_2_PI
    du = (1.0 + x * x * (3.0 * _GELU_TANH_C)) * _SQRT_2_PI
    d2u = x * (6.0 * _GELU_TANH_C * _SQRT_2_PI)
    t = u.tanh()
    return (1.0 - t * t) * (du + x * (d2u - t * du * du * 2.0) * 0.5)


class _LeakyRelu(Function):
    """x where x > 0, else slope * x; the gradient g there, else slope * g
    (slope at 0, as PyTorch), from the saved input."""

    node_name = "LeakyReluBackward0"

    @staticmethod
    def forward(ctx, x, slope):
        ctx.slope = slope
        ctx.save_for_backward(x)
        return _C.where(x > 0, x, x * slope)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * _C.where(x > 0, 1.0, ctx.slope).to(g.dtype), None


def formulas():
    """The differentiable backward of each Function here, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    def activation(node, g):
        x, = node.saved_tensors
        return g * _ActivationGrad.apply(x, node.op), None
    return {_Activation: activation, _Gelu: activation, _Silu: activation,
            _ActivationGrad: _ActivationGrad.backward,
            _LeakyRelu: _LeakyRelu.backward}


def _run(cls, input, arg, inplace, plain):
    """cls.apply(input, arg) under autograd, else plain(input, arg); with
    ``inplace``, written into input (a Function that saves its input is
    given a copy, as for relu_)."""
    if _mode.enabled and input.requires_grad:
        if inplace:
            return _inplace(input, cls, arg)
        return cls.apply(input, arg)
    out = plain(input, arg)
    if inplace:
        _C.copy_(input, out)
        return input
    return out


def gelu(input, approximate="none"):
    """x * Phi(x), Phi the standard normal CDF; ``approximate="tanh"``:
    x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2."""
    _tensor("gelu", "input", 1, input)
    if approximate not in ("none", "tanh"):
        raise RuntimeError(
            f"gelu(): approximate argument must be either none or tanh, "
            f"got {approximate!r}")
    return _run(_Gelu, input, "gelu" if approximate == "none" else
                "gelu_tanh", False, _unary)


def silu(input, inplace=False):
    """x * sigmoid(x) (also called swish)."""
    _tensor("silu", "input", 1, input)
    return _run(_Silu, input, "silu", inplace, _unary)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x (the gradient at 0 is
    negative_slope, as PyTorch's)."""
    _tensor("leaky_relu", "input", 1, input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "leaky_relu(): expected a floating point input, got "
            f"{input.dtype.name}")
    return _run(_LeakyRelu, input, float(negative_slope), inplace,
                lambda x, slope: _C.where(x > 0, x, x * slope))
