"""The element-wise math Functions added beside sin and cos: tan, the
inverse trigonometric and hyperbolic functions, atan2, fmod and remainder
(kernels: csrc/trig_math.h, arc_hyp_math.h, mod_math.h).  Each forward is
one ``_C`` call and each backward PyTorch's formula (derivatives.yaml);
``formulas()`` gives the same formulas written with differentiable tensor
ops, for ``create_graph=True``.

Autocast: under CUDA autocast tan, asin, acos, sinh and cosh run in
float32 and atan2 in the widest of its inputs' dtypes, as PyTorch's
(``csrc/autocast_ops.def``); none of them is listed on the CPU.
"""
from .. import _C
from .function import Function
from .functions import _FromInput, _FromOutput

_TB = _C.TensorBase
_binary = _C.binary
_unary = _C.unary


def _rsqrt_of(a, shift, sign):
    """(shift + sign a^2) ** -1/2, as one kernel each."""
    return _unary("rsqrt", _binary("add", _binary("mul", _unary(
        "square", a), sign), shift))


class Tan(_FromOutput):
    """d/dx tan x = 1 + y^2, from the saved output (as PyTorch)."""

    autocast_op = _op = "tan"

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("mul", g, _binary("add", _unary("square", out), 1))


class Asin(_FromInput):
    """asin, and through _sign acos: d/dx = +-1 / sqrt(1 - x^2)."""

    autocast_op = _op = "asin"
    _sign = 1

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        d = _rsqrt_of(a, 1, -1)
        if ctx._function._sign < 0:
            d = _unary("neg", d)
        return _binary("mul", g, d)


class Acos(Asin):
    autocast_op = _op = "acos"
    _sign = -1


class Atan(_FromInput):
    _op = "atan"

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("div", g, _binary("add", _unary("square", a), 1))


class Sinh(_FromInput):
    """sinh, and through _op and _slope cosh: d/dx sinh = cosh and
    d/dx cosh = sinh."""

    autocast_op = _op = "sinh"
    _slope = "cosh"

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("mul", g, _unary(ctx._function._slope, a))


class Cosh(Sinh):
    autocast_op = _op = "cosh"
    _slope = "sinh"


class Asinh(_FromInput):
    """asinh, and through _op and _shift acosh: d/dx = 1 / sqrt(x^2 +- 1)."""

    _op = "asinh"
    _shift = 1

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("mul", g, _rsqrt_of(a, ctx._function._shift, 1))


class Acosh(Asinh):
    _op = "acosh"
    _shift = -1


class Atanh(_FromInput):
    _op = "atanh"

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("div", g, _binary("sub", 1, _unary("square", a)))


class Atan2(Function):
    """atan2(a, b) = the angle of (b, a): d/da = b / (a^2 + b^2), d/db =
    -a / (a^2 + b^2) (PyTorch's atan2_backward)."""

    autocast_op = "atan2"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _binary("atan2", a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        recip = _unary("reciprocal", _binary(
            "add", _unary("square", a), _unary("square", b)))
        gr = _binary("mul", g, recip)
        return (_binary("mul", gr, b) if need_a else None,
                _binary("mul", gr, _unary("neg", a)) if need_b else None)


class Fmod(Function):
    """fmod, and through _op and _round remainder: d/da = 1, d/db =
    -trunc(a / b) (remainder: -floor(a / b)), a piecewise constant."""

    _op = "fmod"
    _round = "trunc"

    @staticmethod
    def forward(ctx, a, b):
        ta, tb = isinstance(a, _TB), isinstance(b, _TB)
        ctx.save_for_backward(a if ta else None, b if tb else None)
        ctx.a = None if ta else a       # Python numbers only
        ctx.b = None if tb else b
        return _binary(ctx._function._op, a, b)

    @staticmethod
    def backward(ctx, g):
        return (g if ctx.needs_input_grad[0] else None,
                _mod_divisor_grad(ctx, g, _binary))


class Remainder(Fmod):
    _op = "remainder"
    _round = "floor"


def _mod_divisor_grad(node, g, mul):
    """-g * round(a / b), the quotient a constant of the graph (computed
    by plain kernels), multiplied by ``mul`` (a kernel, or a
    differentiable product)."""
    if not node.needs_input_grad[1]:
        return None
    sa, sb = node.saved_tensors
    a = node.a if sa is None else sa
    b = node.b if sb is None else sb
    q = _unary(node._function._round, _binary("div", a, b))
    return mul("mul", g, _unary("neg", q))


# ----------------------------------------------------------------------------
# create_graph formulas (higher_order.py)


def _saved_output(node, t):
    from .higher_order import _saved_output as saved
    return saved(node, t)


def _tan(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return g * (y * y + 1)


def _asin(node, g):
    a, = node.saved_tensors
    d = (1 - a * a).rsqrt()
    return g * (d if node._function._sign > 0 else -d)


def _atan(node, g):
    a, = node.saved_tensors
    return g / (a * a + 1)


def _sinh(node, g):
    a, = node.saved_tensors
    return g * getattr(a, node._function._slope)()


def _asinh(node, g):
    a, = node.saved_tensors
    return g * (a * a + node._function._shift).rsqrt()


def _atanh(node, g):
    a, = node.saved_tensors
    return g / (1 - a * a)


def _atan2(node, g):
    a, b = node.saved_tensors
    need_a, need_b = node.needs_input_grad
    gr = g * (a * a + b * b).reciprocal()
    return (gr * b if need_a else None), (gr * -a if need_b else None)


def _fmod(node, g):
    return (g if node.needs_input_grad[0] else None,
            _mod_divisor_grad(node, g, lambda _op, x, y: x * y))


def formulas():
    return {Tan: _tan, Asin: _asin, Acos: _asin, Atan: _atan, Sinh: _sinh,
            Cosh: _sinh, Asinh: _asinh, Acosh: _asinh, Atanh: _atanh,
            Atan2: _atan2, Fmod: _fmod, Remainder: _fmod}
