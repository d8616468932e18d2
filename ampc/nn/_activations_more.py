"""More of PyTorch's activations, as composites of existing kernels (no
kernels of their own): ``relu6``, ``hardtanh``, ``elu``, ``selu``,
``celu``, ``softplus``, ``hardsigmoid``, ``hardswish``, ``softsign``,
``mish`` and ``logsigmoid``.

Each (but softsign, which PyTorch also composes: x / (1 + |x|)) is one
autograd Function whose forward evaluates the formula with ampc's tensor
ops in float32 (a float16/bfloat16 input is widened, the result rounded
once to the input's dtype, as PyTorch's opmath) and whose backward is
g * f'(x), f' written explicitly with PyTorch's choices at the kinks
(hardtanh's gradient is 0 at min_val and max_val, elu's at 0 is the
negative branch's, ...) and formed in float32, rounded once.  f' is
written with differentiable ops, so ``create_graph`` goes through.

The exponential and logarithmic ones use the ``expm1`` and ``log1p``
kernels, so the tails keep their relative accuracy (softplus(-30) =
9.36e-14, not 0).

Autocast: these run in the input's dtype, as PyTorch's, except
``softplus``, a float32 op under CUDA autocast (``csrc/autocast_ops.def``).

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.relu6(ampc.tensor([-1.0, 3.0, 7.0]))
tensor([0., 3., 6.])
>>> F.softplus(ampc.tensor([-30.0]))
tensor([9.3576e-14])
"""
from .. import _C
from .._tensor_where import where as _where
from ..autograd import Function, _mode
from ..autograd import inplace as _inplace
from ._args import _number, _tensor

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_16BIT = ("float16", "bfloat16")


def _wide(x):
    """x in float32 (16-bit inputs widened; float32 as is)."""
    return x.float() if x.dtype.name in _16BIT else x


def _softplus1(x):
    """log(1 + exp(x)), for every x (no threshold)."""
    from .. import maximum
    return maximum(x, x.new_zeros(())) + (-x.abs()).exp().log1p()


# ----------------------------------------------------------------------------
# the formulas: value(x, p) and derivative(x, p) on float32 x


def _hardtanh(x, p):
    lo, hi = p
    return x.clamp(lo, hi)


def _hardtanh_d(x, p):
    lo, hi = p
    # 0 at and beyond the bounds, 1 inside and at NaN (as PyTorch)
    return _where((x <= lo) | (x >= hi), 0.0, 1.0)


def _elu(x, p):
    alpha, scale, input_scale = p
    neg = (x.clamp(max=0.0) * input_scale).expm1() * (alpha * scale)
    return _where(x > 0, x * scale, neg)


def _elu_d(x, p):
    alpha, scale, input_scale = p
    neg = (x.clamp(max=0.0) * input_scale).exp() * (
        alpha * scale * input_scale)
    return _where(x <= 0, neg, scale)


def _softplus(x, p):
    beta, threshold = p
    bx = x * beta
    return _where(bx > threshold, x, _softplus1(bx) / beta)


def _softplus_d(x, p):
    beta, threshold = p
    bx = x * beta
    return _where(bx > threshold, 1.0, bx.sigmoid())


def _hardsigmoid(x, p):
    return (x + 3.0).clamp(0.0, 6.0) / 6.0


def _hardsigmoid_d(x, p):
    return _where((x > -3.0) & (x < 3.0), 1.0 / 6.0, 0.0)


def _hardswish(x, p):
    return x * (x + 3.0).clamp(0.0, 6.0) / 6.0


def _hardswish_d(x, p):
    inner = _where(x < 3.0, x / 3.0 + 0.5, 1.0)
    return _where(x <= -3.0, 0.0, inner)


def _mish(x, p):
    return x * _softplus1(x).tanh()


def _mish_d(x, p):
    t = _softplus1(x).tanh()
    return t + x * x.sigmoid() * (1.0 - t * t)


def _logsigmoid(x, p):
    from .. import minimum
    return minimum(x, x.new_zeros(())) - (-x.abs()).exp().log1p()


def _logsigmoid_d(x, p):
    return (-x).sigmoid()


def _op(name, node, value, derivative):
    def forward(ctx, x, p):
        ctx.p = p
        ctx.save_for_backward(x)
        return value(_wide(x), p).to(x.dtype)

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return (_wide(g) * derivative(_wide(x), p=ctx.p)).to(g.dtype), None

    return type(name, (Function,), {
        "node_name": node, "forward": staticmethod(forward),
        "backward": staticmethod(backward),
        "__doc__": f"{node[:-len('Backward0')]}: y = f(x), gradient "
                   "g * f'(x) (float32, rounded once)."})


_Hardtanh = _op("_Hardtanh", "HardtanhBackward0", _hardtanh, _hardtanh_d)
_Elu = _op("_Elu", "EluBackward0", _elu, _elu_d)
_Celu = _op("_Celu", "CeluBackward0", _elu, _elu_d)
_Softplus = _op("_Softplus", "SoftplusBackward0", _softplus, _softplus_d)
_Softplus.autocast_op = "softplus"     # float32 under CUDA autocast
_Hardsigmoid = _op("_Hardsigmoid", "HardsigmoidBackward0", _hardsigmoid,
                   _hardsigmoid_d)
_Hardswish = _op("_Hardswish", "HardswishBackward0", _hardswish,
                 _hardswish_d)
_Mish = _op("_Mish", "MishBackward0", _mish, _mish_d)
_LogSigmoid = _op("_LogSigmoid", "LogSigmoidBackward0", _logsigmoid,
                  _logsigmoid_d)
_ALL = (_Hardtanh, _Elu, _Celu, _Softplus, _Hardsigmoid, _Hardswish, _Mish,
        _LogSigmoid)


def formulas():
    """The differentiable backward of each Function here, for
    ``backward(create_graph=True)`` (autograd/higher_order.py): the same
    backward, run with grad mode on."""
    return {cls: cls.backward for cls in _ALL}


def _run(name, cls, input, p, inplace):
    """cls on input (written into it with ``inplace``, also under
    autograd, as PyTorch's)."""
    _tensor(name, "input", 1, input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"{name}(): expected a floating point input, got "
            f"{input.dtype.name}")
    if _mode.enabled and input.requires_grad:
        if inplace:
            return _inplace(input, cls, p)
        return cls.apply(input, p)
    out = cls.apply(input, p)
    if inplace:
        _C.copy_(input, out)
        return input
    return out



def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """clamp(x, min_val, max_val); the gradient is 1 strictly inside,
    0 at the bounds and beyond (as PyTorch's)."""
    lo = _number("hardtanh", "min_val", min_val)
    hi = _number("hardtanh", "max_val", max_val)
    if lo > hi:
        raise ValueError("min_val cannot be greater than max_val")
    return _run("hardtanh", _Hardtanh, input, (lo, hi), inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place ``hardtanh``; returns ``input``."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """min(max(x, 0), 6): ``hardtanh(input, 0, 6)``."""
    return _run("relu6", _Hardtanh, input, (0.0, 6.0), inplace)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    a = _number("elu", "alpha", alpha)
    return _run("elu", _Elu, input, (a, 1.0, 1.0), inplace)


def elu_(input, alpha=1.0):
    """In-place ``elu``; returns ``input``."""
    return elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    """scale * elu(x, alpha) with PyTorch's constants (alpha = 1.6733,
    scale = 1.0507)."""
    return _run("selu", _Elu, input, (_SELU_ALPHA, _SELU_SCALE, 1.0),
                inplace)


def selu_(input):
    """In-place ``selu``; returns ``input``."""
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    a = _number("celu", "alpha", alpha)
    if a == 0.0:
        raise RuntimeError("ZeroDivisionError")
    return _run("celu", _Celu, input, (a, 1.0, 1.0 / a), inplace)


def celu_(input, alpha=1.0):
    """In-place ``celu``; returns ``input``."""
    return celu(input, alpha, inplace=True)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, or x where beta * x > threshold."""
    b = _number("softplus", "beta", beta)
    t = _number("softplus", "threshold", threshold)
    return _run("softplus", _Softplus, input, (b, t), False)


def hardsigmoid(input, inplace=False):
    """clamp(x + 3, 0, 6) / 6 (gradient 1/6 strictly inside (-3, 3))."""
    return _run("hardsigmoid", _Hardsigmoid, input, None, inplace)


def hardswish(input, inplace=False):
    """x * clamp(x + 3, 0, 6) / 6."""
    return _run("hardswish", _Hardswish, input, None, inplace)


def softsign(input):
    """x / (1 + |x|), composed of tensor ops, as PyTorch's."""
    _tensor("softsign", "input", 1, input)
    return input / (input.abs() + 1)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return _run("mish", _Mish, input, None, inplace)


def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), accurate in both
    tails."""
    return _run("logsigmoid", _LogSigmoid, input, None, False)
