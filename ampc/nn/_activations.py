"""``gelu`` (exact, or ``approximate="tanh"``), ``silu`` and
``leaky_relu``: PyTorch's activations.  GELU and SiLU and their
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
from ._args import _tensor

_GRAD_OP = {"gelu": "gelu_grad", "gelu_tanh": "gelu_tanh_grad",
            "silu": "silu_grad"}
_BACKWARD_OP = {"gelu": "gelu_backward", "gelu_tanh": "gelu_tanh_backward",
                "silu": "silu_backward"}
_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715


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


def formulas():
    """The differentiable backward of each Function here, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    def activation(node, g):
        x, = node.saved_tensors
        return g * _ActivationGrad.apply(x, node.op), None
    return {_Activation: activation, _Gelu: activation, _Silu: activation,
            _ActivationGrad: _ActivationGrad.backward}


def _apply(cls, input, op):
    if _mode.enabled and input.requires_grad:
        return cls.apply(input, op)
    return _C.unary(op, input)


def _in_place(input, out):
    """torch's inplace=True: the result written into input."""
    input.copy_(out)
    return input


def gelu(input, approximate="none"):
    """x * Phi(x), Phi the standard normal CDF; ``approximate="tanh"``:
    x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2."""
    _tensor("gelu", "input", 1, input)
    if approximate not in ("none", "tanh"):
        raise RuntimeError(
            f"gelu(): approximate argument must be either none or tanh, "
            f"got {approximate!r}")
    return _apply(_Gelu, input,
                  "gelu" if approximate == "none" else "gelu_tanh")


def silu(input, inplace=False):
    """x * sigmoid(x) (also called swish)."""
    _tensor("silu", "input", 1, input)
    out = _apply(_Silu, input, "silu")
    return _in_place(input, out) if inplace else out


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x (the gradient at 0 is
    negative_slope, as PyTorch's)."""
    from .._tensor_where import where
    _tensor("leaky_relu", "input", 1, input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "leaky_relu(): expected a floating point input, got "
            f"{input.dtype.name}")
    out = where(input > 0, input, input * float(negative_slope))
    return _in_place(input, out) if inplace else out
