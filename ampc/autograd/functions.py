"""Element-wise Functions: arithmetic, unary math, casts and device moves.
Each forward is one ``_C`` call; backward may return a gradient of the
broadcast shape and promoted dtype (the engine sums and casts it back)."""
import math

from .. import _C
from .function import Function, _dev_str

_TB = _C.TensorBase
_binary = _C.binary
_compare = _C.compare
_unary = _C.unary
_cast = _C.cast
_F32 = _C.float32


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        return _binary("add", a, b)

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        return _binary("sub", a, b)

    @staticmethod
    def backward(ctx, g):
        return g, (_unary("neg", g) if ctx.needs_input_grad[1] else None)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ta, tb = isinstance(a, _TB), isinstance(b, _TB)
        ctx.save_for_backward(a if ta else None, b if tb else None)
        ctx.a = None if ta else a       # Python scalars only: a node never
        ctx.b = None if tb else b       # keeps tensors outside _saved
        return _binary("mul", a, b)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.saved_tensors
        a = ctx.a if sa is None else sa
        b = ctx.b if sb is None else sb
        need_a, need_b = ctx.needs_input_grad
        return (_binary("mul", g, b) if need_a else None,
                _binary("mul", g, a) if need_b else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = _binary("div", a, b)
        if isinstance(b, _TB):
            ctx.save_for_backward(b, out)
        else:
            ctx.save_for_backward(None, None)
        ctx.b = None if isinstance(b, _TB) else b
        return out

    @staticmethod
    def backward(ctx, g):
        b, out = ctx.saved_tensors
        if b is None:
            b = ctx.b
        ga = _binary("div", g, b)
        gb = None
        if ctx.needs_input_grad[1]:
            # d(a/b)/db = -a/b^2 = -(a/b)/b
            gb = _unary("neg", _binary("mul", ga, out))
        return (ga if ctx.needs_input_grad[0] else None), gb


class Pow(Function):
    autocast_op = "pow"

    @staticmethod
    def forward(ctx, a, b):
        out = _binary("pow", a, b)
        # the output only for a tensor exponent's gradient (PyTorch's
        # PowBackward0 keeps none: y = x ** 2; y.clamp_() then works)
        ctx.save_for_backward(a if isinstance(a, _TB) else None,
                              b if isinstance(b, _TB) else None,
                              out if isinstance(b, _TB) else None)
        ctx.a = None if isinstance(a, _TB) else a
        ctx.b = None if isinstance(b, _TB) else b
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        ga = gb = None
        if need_a:
            bb = ctx.b if b is None else b
            if bb.__class__ in (int, float) and bb == 0:
                ga = _binary("mul", g, 0.0)
            else:
                # b * a^(b-1); a ** 1 is a (x ** 2's backward skips a pow)
                bm1 = bb - 1 if b is None else _binary("sub", b, 1)
                am1 = a if bm1.__class__ in (int, float) and bm1 == 1 \
                    else _binary("pow", a, bm1)
                ga = _binary("mul", g, _binary("mul", am1, bb))
        if need_b:
            # out * ln(a)
            if a is None:
                ga_log = math.log(ctx.a) if ctx.a > 0 else float("nan")
                gb = _binary("mul", _binary("mul", g, out), ga_log)
            else:
                gb = _binary("mul", _binary("mul", g, out),
                             _unary("log", a))
        return ga, gb


class Maximum(Function):
    _op = "maximum"
    _cmp = "gt"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _binary(ctx._function._op, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        # the winner takes the gradient; ties split it evenly (as PyTorch)
        win = _compare(ctx._function._cmp, a, b)
        tie = _compare("eq", a, b)
        w = _binary("add", win, _binary("mul", tie, 0.5))
        ga = _binary("mul", g, w)
        gb = _binary("sub", g, ga) if ctx.needs_input_grad[1] else None
        return ga, gb


class Minimum(Maximum):
    _op = "minimum"
    _cmp = "lt"

    forward = Maximum.forward
    backward = Maximum.backward


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return _unary("neg", a)

    @staticmethod
    def backward(ctx, g):
        return _unary("neg", g)


class Abs(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _unary("abs", a)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("mul", g, _unary("sign", a))


class _FromOutput(Function):
    """A unary op (its _C.unary name: _op) whose backward reads its output:
    forward saves the output; each subclass gives backward."""

    _op = None

    @staticmethod
    def forward(ctx, a):
        out = _unary(ctx._function._op, a)
        ctx.save_for_backward(out)
        return out


class Sqrt(_FromOutput):
    _op = "sqrt"

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("div", g, _binary("mul", out, 2))


class Rsqrt(_FromOutput):
    autocast_op = _op = "rsqrt"

    @staticmethod
    def backward(ctx, g):
        # d/dx x^-1/2 = -0.5 y^3 (PyTorch's rsqrt_backward)
        out, = ctx.saved_tensors
        return _binary("mul", _binary("mul", g, -0.5), _unary("cube", out))


class Reciprocal(_FromOutput):
    autocast_op = _op = "reciprocal"

    @staticmethod
    def backward(ctx, g):
        # d/dx 1/x = -y^2
        out, = ctx.saved_tensors
        return _binary("mul", _unary("neg", g), _unary("square", out))


class Exp(_FromOutput):
    autocast_op = _op = "exp"

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("mul", g, out)


class _FromInput(Function):
    """A unary op (its _C.unary name: _op) whose backward reads its input:
    forward saves the input; each subclass gives backward."""

    _op = None

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _unary(ctx._function._op, a)


class Log(_FromInput):
    autocast_op = _op = "log"

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("div", g, a)


class Log2(_FromInput):
    """log2, and through _op and _ln log10: d/dx = 1 / (x ln b), as
    PyTorch's g / (x * ln b)."""

    autocast_op = _op = "log2"
    _ln = math.log(2.0)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("div", g, _binary("mul", a, ctx._function._ln))


class Log10(Log2):
    autocast_op = _op = "log10"
    _ln = math.log(10.0)


class Log1p(_FromInput):
    autocast_op = _op = "log1p"

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("div", g, _binary("add", a, 1))


class Expm1(_FromOutput):
    """d/dx (e^x - 1) = y + 1, from the saved output (as PyTorch)."""

    autocast_op = _op = "expm1"

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("mul", g, _binary("add", out, 1))


class Sin(_FromInput):
    _op = "sin"

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("mul", g, _unary("cos", a))


class Cos(_FromInput):
    _op = "cos"

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("mul", g, _unary("neg", _unary("sin", a)))


class Erf(_FromInput):
    """erf, and through _op and _slope erfc: d/dx = +-2/sqrt(pi) e^(-x^2),
    as PyTorch's."""

    _op = "erf"
    _slope = 2.0 / math.sqrt(math.pi)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        e = _unary("exp", _unary("neg", _unary("square", a)))
        return _binary("mul", g, _binary("mul", e, ctx._function._slope))


class Erfc(Erf):
    _op = "erfc"
    _slope = -2.0 / math.sqrt(math.pi)


class Relu(Function):
    @staticmethod
    def forward(ctx, a):
        out = _unary("relu", a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("mul", g, _compare("gt", out, 0))


class Sigmoid(_FromOutput):
    """y = 1 / (1 + e^-x); dy/dx = y (1 - y), from the saved output, one
    fused kernel (sigmoid_backward; a 16-bit g in float32, rounded once).
    Tanh shares the shape with its own ops."""

    _op = "sigmoid"

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary(ctx._function._op + "_backward", g, out)


class Tanh(Sigmoid):
    """y = tanh(x); dy/dx = 1 - y^2, from the saved output."""

    _op = "tanh"


class Sign(Function):
    @staticmethod
    def forward(ctx, a):
        return _unary("sign", a)

    @staticmethod
    def backward(ctx, g):
        return _binary("mul", g, 0)


class Floor(Function):
    """floor, and through _op ceil, round and trunc: piecewise constant, so
    the gradient is zeros (zeros_like, as PyTorch: not g * 0, which would
    carry a NaN or inf of g)."""

    _op = "floor"

    @staticmethod
    def forward(ctx, a):
        return _unary(ctx._function._op, a)

    @staticmethod
    def backward(ctx, g):
        return _C.full(tuple(g.shape), 0, g.dtype, _dev_str(g))


class Ceil(Floor):
    _op = "ceil"


class Round(Floor):
    _op = "round"


class Trunc(Floor):
    _op = "trunc"


class Frac(Function):
    """x - trunc(x): the gradient passes unchanged."""

    @staticmethod
    def forward(ctx, a):
        return _unary("frac", a)

    @staticmethod
    def backward(ctx, g):
        return g


class Clamp(Function):
    @staticmethod
    def forward(ctx, a, min=None, max=None):
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = min, max
        return _C.clamp(a, min, max)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        lo, hi = ctx.lo, ctx.hi
        # the gradient passes where lo <= a <= hi (as PyTorch)
        mask = None
        if lo is not None:
            mask = _compare("ge", a, lo)
        if hi is not None:
            m = _compare("le", a, hi)
            mask = m if mask is None else _binary("mul", mask, m)
        if mask is None:
            return g
        return _binary("mul", g, mask)


class Where(Function):
    """where(condition, input, other): each side's gradient is g where it
    was chosen and 0 elsewhere (the engine sums it back over broadcast
    dims and casts it to the side's dtype)."""

    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        return _C.where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        cond, = ctx.saved_tensors
        need = ctx.needs_input_grad
        return (None, _C.where(cond, g, 0) if need[1] else None,
                _C.where(cond, 0, g) if need[2] else None)


class MaskedFill(Function):
    """self.masked_fill(mask, value), i.e. where(mask, value, self), with
    value a number or a 0-d tensor of self's dtype (whose gradient, summed
    back by the engine, is the sum of g over the mask)."""

    @staticmethod
    def forward(ctx, a, mask, value):
        ctx.save_for_backward(mask)
        return _C.where(mask, value, a)

    @staticmethod
    def backward(ctx, g):
        mask, = ctx.saved_tensors
        need = ctx.needs_input_grad
        return (_C.where(mask, 0, g) if need[0] else None, None,
                _C.where(mask, g, 0) if need[2] else None)


class Cast(Function):
    """to(dtype): the gradient flows back in the source dtype (the engine
    casts it).  Autocast passes ``kept``, a weight's kept cast
    (``ampc.amp.keep_weight_casts``), that already holds ``a``'s values in
    ``dtype``: the output is then a view of it, and nothing is cast."""

    node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, a, dtype, kept=None):
        return _cast(a, dtype) if kept is None else kept

    @staticmethod
    def backward(ctx, g):
        return g, None      # (None for kept is implied)


class Clone(Function):
    @staticmethod
    def forward(ctx, a):
        return _cast(a, a.dtype)

    @staticmethod
    def backward(ctx, g):
        return g


class ToDevice(Function):
    node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, a, device, dtype):
        ctx.src = _dev_str(a)
        out = _C.empty(tuple(a.shape), dtype, device)
        return _C.copy_(out, a)

    @staticmethod
    def backward(ctx, g):
        if _dev_str(g) == ctx.src:
            return g, None, None
        out = _C.empty(tuple(g.shape), g.dtype, ctx.src)
        return _C.copy_(out, g), None, None
