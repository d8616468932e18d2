"""``ampc.Tensor``'s operators and element-wise method families: the
operator factories (the hot paths), arithmetic, comparisons, unary ops,
clamp, where and masked_fill (from ``_tensor_where``), and the in-place
writes (fill_, copy_, the random fills).

``_TensorOps`` is a mixin of ``Tensor`` (see ``tensor.py``); its methods
are Tensor's methods.
"""
import math

from . import _C
from . import _tensor_where
from . import autograd as _ag
from ._tensor_args import (
    _SCALARS, _TB, _check_number, _coerce_scalar,
)

_binary = _C.binary
_compare = _C.compare
_unary = _C.unary
_mode = _ag._mode
_autocast_active = _C.autocast_active
_inplace = _ag.inplace
_dev_str = _ag._dev_str


# ----------------------------------------------------------------------------
# operator factories (the hot paths)


def _binop(op, fn):
    listed = fn.autocast_op is not None

    def method(self, other):
        if _mode.enabled and (self.requires_grad or (
                isinstance(other, _TB) and other.requires_grad)) or (
                listed and _autocast_active()):
            return fn.apply(self, other)
        try:
            return _binary(op, self, other)
        except TypeError:
            other = _coerce_scalar(other)
            if other is None:
                return NotImplemented
            return method(self, other)
    return method


def _rbinop(op, fn):
    listed = fn.autocast_op is not None

    def method(self, other):
        if (_mode.enabled and self.requires_grad) or (
                listed and _autocast_active()):
            return fn.apply(other, self)
        try:
            return _binary(op, other, self)
        except TypeError:
            other = _coerce_scalar(other)
            if other is None:
                return NotImplemented
            return method(self, other)
    return method


def _named_binop(name, op, fn):
    raw = _binop(op, fn)

    def method(self, other):
        r = raw(self, other)
        if r is NotImplemented:
            raise TypeError(
                f"{name}(): argument 'other' must be a Tensor or a number, "
                f"but got {type(other).__name__}")
        return r
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    return method


def _inplace_binop(name, op, fn):
    def method(self, other):
        if _mode.enabled and (self.requires_grad or (
                isinstance(other, _TB) and other.requires_grad)):
            return _inplace(self, fn, other)
        try:
            _binary(op, self, other, self)
        except TypeError:
            c = _coerce_scalar(other)
            if c is None:
                if not isinstance(other, _TB):
                    raise TypeError(
                        f"{name}(): argument 'other' must be a Tensor or a "
                        f"number, but got {type(other).__name__}") from None
                raise
            _binary(op, self, c, self)
        return self
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    return method


def _cmpop(op):
    def method(self, other):
        try:
            return _compare(op, self, other)
        except TypeError:
            c = _coerce_scalar(other)
            if c is None:
                return NotImplemented
            return _compare(op, self, c)
    return method


def _named_cmpop(name, op):
    raw = _cmpop(op)

    def method(self, other):
        r = raw(self, other)
        if r is NotImplemented:
            raise TypeError(
                f"{name}(): argument 'other' must be a Tensor or a number, "
                f"but got {type(other).__name__}")
        return r
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    return method


def _unop(op, fn):
    listed = fn.autocast_op is not None     # autocast applies in apply()

    def method(self):
        if (_mode.enabled and self.requires_grad) or (
                listed and _autocast_active()):
            return fn.apply(self)
        return _unary(op, self)
    method.__name__ = op
    method.__qualname__ = "Tensor." + op
    return method


def _rounding(op, fn):
    """floor, ceil, round, trunc: an integer tensor is returned as a copy
    (its values are integers already), a bool one refused, as torch."""
    float_method = _unop(op, fn)

    def method(self):
        if self.dtype is _C.bool:
            raise RuntimeError(
                f"{op}(): not implemented for 'Bool' tensors; convert with "
                ".long() or .float() first")
        if not self.dtype.is_floating_point:
            return self.clone()
        return float_method(self)
    method.__name__ = op
    method.__qualname__ = "Tensor." + op
    return method


def _tensor_binop(name, op, fn, inplace=False):
    """atan2 and atan2_: ``other`` must be a Tensor (0-d for a number), as
    in PyTorch."""
    raw = _inplace_binop(name, op, fn) if inplace else _binop(op, fn)

    def method(self, other):
        if not isinstance(other, _TB):
            raise TypeError(
                f"{name}(): argument 'other' must be Tensor, not "
                f"{type(other).__name__}")
        return raw(self, other)
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    return method


def _inplace_unop(op, fn):
    def method(self):
        if _mode.enabled and self.requires_grad:
            return _inplace(self, fn)
        _unary(op, self, self)
        return self
    method.__name__ = op + "_"
    method.__qualname__ = "Tensor." + op + "_"
    return method


class _TensorOps:
    """Tensor's arithmetic, comparison, element-wise and in-place write
    methods."""

    __slots__ = ()

    # -- arithmetic ----------------------------------------------------------

    __add__ = _binop("add", _ag.Add)
    __radd__ = _rbinop("add", _ag.Add)
    __sub__ = _binop("sub", _ag.Sub)
    __rsub__ = _rbinop("sub", _ag.Sub)
    __mul__ = _binop("mul", _ag.Mul)
    __rmul__ = _rbinop("mul", _ag.Mul)
    __truediv__ = _binop("div", _ag.Div)
    __rtruediv__ = _rbinop("div", _ag.Div)
    __pow__ = _binop("pow", _ag.Pow)
    __rpow__ = _rbinop("pow", _ag.Pow)

    __mod__ = _binop("remainder", _ag.Remainder)
    __rmod__ = _rbinop("remainder", _ag.Remainder)

    __iadd__ = _inplace_binop("add_", "add", _ag.Add)
    __isub__ = _inplace_binop("sub_", "sub", _ag.Sub)
    __imul__ = _inplace_binop("mul_", "mul", _ag.Mul)
    __itruediv__ = _inplace_binop("div_", "div", _ag.Div)
    __ipow__ = _inplace_binop("pow_", "pow", _ag.Pow)
    __imod__ = _inplace_binop("remainder_", "remainder", _ag.Remainder)

    __eq__ = _cmpop("eq")
    __ne__ = _cmpop("ne")
    __lt__ = _cmpop("lt")
    __le__ = _cmpop("le")
    __gt__ = _cmpop("gt")
    __ge__ = _cmpop("ge")

    eq = _named_cmpop("eq", "eq")
    ne = _named_cmpop("ne", "ne")
    lt = _named_cmpop("lt", "lt")
    le = _named_cmpop("le", "le")
    gt = _named_cmpop("gt", "gt")
    ge = _named_cmpop("ge", "ge")

    mul = multiply = _named_binop("mul", "mul", _ag.Mul)
    div = divide = true_divide = _named_binop("div", "div", _ag.Div)
    pow = _named_binop("pow", "pow", _ag.Pow)
    maximum = _named_binop("maximum", "maximum", _ag.Maximum)
    minimum = _named_binop("minimum", "minimum", _ag.Minimum)
    fmod = _named_binop("fmod", "fmod", _ag.Fmod)
    remainder = _named_binop("remainder", "remainder", _ag.Remainder)
    atan2 = arctan2 = _tensor_binop("atan2", "atan2", _ag.Atan2)
    fmod_ = _inplace_binop("fmod_", "fmod", _ag.Fmod)
    remainder_ = _inplace_binop("remainder_", "remainder", _ag.Remainder)
    atan2_ = arctan2_ = _tensor_binop("atan2_", "atan2", _ag.Atan2, True)
    mul_ = _inplace_binop("mul_", "mul", _ag.Mul)
    div_ = _inplace_binop("div_", "div", _ag.Div)
    pow_ = _inplace_binop("pow_", "pow", _ag.Pow)

    _add = _named_binop("add", "add", _ag.Add)
    _sub = _named_binop("sub", "sub", _ag.Sub)
    _add_ = _inplace_binop("add_", "add", _ag.Add)
    _sub_ = _inplace_binop("sub_", "sub", _ag.Sub)

    def add(self, other, *, alpha=1):
        """self + alpha * other."""
        if alpha != 1:
            other = _scale("add", other, alpha)
        return self._add(other)

    def sub(self, other, *, alpha=1):
        """self - alpha * other."""
        if alpha != 1:
            other = _scale("sub", other, alpha)
        return self._sub(other)

    subtract = sub

    def add_(self, other, *, alpha=1):
        """In place: self += alpha * other."""
        if alpha != 1:
            other = _scale("add_", other, alpha)
        return self._add_(other)

    def sub_(self, other, *, alpha=1):
        """In place: self -= alpha * other."""
        if alpha != 1:
            other = _scale("sub_", other, alpha)
        return self._sub_(other)

    def __pos__(self):
        return self

    neg = negative = __neg__ = _unop("neg", _ag.Neg)
    abs = absolute = __abs__ = _unop("abs", _ag.Abs)
    sqrt = _unop("sqrt", _ag.Sqrt)
    rsqrt = _unop("rsqrt", _ag.Rsqrt)
    reciprocal = _unop("reciprocal", _ag.Reciprocal)
    exp = _unop("exp", _ag.Exp)
    log = _unop("log", _ag.Log)
    relu = _unop("relu", _ag.Relu)
    sigmoid = _unop("sigmoid", _ag.Sigmoid)
    tanh = _unop("tanh", _ag.Tanh)
    sign = _unop("sign", _ag.Sign)
    sin = _unop("sin", _ag.Sin)
    cos = _unop("cos", _ag.Cos)
    log1p = _unop("log1p", _ag.Log1p)
    expm1 = _unop("expm1", _ag.Expm1)
    log2 = _unop("log2", _ag.Log2)
    log10 = _unop("log10", _ag.Log10)
    erf = _unop("erf", _ag.Erf)
    erfc = _unop("erfc", _ag.Erfc)
    tan = _unop("tan", _ag.Tan)
    asin = arcsin = _unop("asin", _ag.Asin)
    acos = arccos = _unop("acos", _ag.Acos)
    atan = arctan = _unop("atan", _ag.Atan)
    sinh = _unop("sinh", _ag.Sinh)
    cosh = _unop("cosh", _ag.Cosh)
    asinh = arcsinh = _unop("asinh", _ag.Asinh)
    acosh = arccosh = _unop("acosh", _ag.Acosh)
    atanh = arctanh = _unop("atanh", _ag.Atanh)
    floor = _rounding("floor", _ag.Floor)
    ceil = _rounding("ceil", _ag.Ceil)
    trunc = fix = _rounding("trunc", _ag.Trunc)
    _round = _rounding("round", _ag.Round)
    _frac = _unop("frac", _ag.Frac)

    def frac(self):
        """self - trunc(self), for floating point tensors (as torch)."""
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                f"frac(): not implemented for {self.dtype} tensors; "
                "convert with .float() first")
        return self._frac()

    def round(self, decimals=0):
        """Half to even, as torch.round; with ``decimals``, torch's
        ``round(x * 10^d) / 10^d`` (``round(x / 10^-d) * 10^-d`` for d < 0),
        in the tensor's dtype."""
        if decimals == 0:
            return self._round()
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                "round(): decimals is only supported for floating point "
                f"tensors, got {self.dtype}")
        if self.dtype is not _C.float32:
            # 16-bit: in float32, rounded once at the end (as torch)
            return self.float().round(decimals).to(self.dtype)
        if decimals > 0:
            ten = 10.0 ** decimals
            return (self * ten).round() / ten
        ten = 10.0 ** -decimals
        return (self / ten).round() * ten

    neg_ = negative_ = _inplace_unop("neg", _ag.Neg)
    abs_ = _inplace_unop("abs", _ag.Abs)
    sqrt_ = _inplace_unop("sqrt", _ag.Sqrt)
    rsqrt_ = _inplace_unop("rsqrt", _ag.Rsqrt)
    reciprocal_ = _inplace_unop("reciprocal", _ag.Reciprocal)
    floor_ = _inplace_unop("floor", _ag.Floor)
    ceil_ = _inplace_unop("ceil", _ag.Ceil)
    round_ = _inplace_unop("round", _ag.Round)
    trunc_ = fix_ = _inplace_unop("trunc", _ag.Trunc)
    frac_ = _inplace_unop("frac", _ag.Frac)
    sin_ = _inplace_unop("sin", _ag.Sin)
    cos_ = _inplace_unop("cos", _ag.Cos)
    log1p_ = _inplace_unop("log1p", _ag.Log1p)
    expm1_ = _inplace_unop("expm1", _ag.Expm1)
    log2_ = _inplace_unop("log2", _ag.Log2)
    log10_ = _inplace_unop("log10", _ag.Log10)
    erf_ = _inplace_unop("erf", _ag.Erf)
    erfc_ = _inplace_unop("erfc", _ag.Erfc)
    tan_ = _inplace_unop("tan", _ag.Tan)
    asin_ = arcsin_ = _inplace_unop("asin", _ag.Asin)
    acos_ = arccos_ = _inplace_unop("acos", _ag.Acos)
    atan_ = arctan_ = _inplace_unop("atan", _ag.Atan)
    sinh_ = _inplace_unop("sinh", _ag.Sinh)
    cosh_ = _inplace_unop("cosh", _ag.Cosh)
    asinh_ = arcsinh_ = _inplace_unop("asinh", _ag.Asinh)
    acosh_ = arccosh_ = _inplace_unop("acosh", _ag.Acosh)
    atanh_ = arctanh_ = _inplace_unop("atanh", _ag.Atanh)

    def square(self):
        """self ** 2 (x * x); an integer or bool tensor gives int64, as
        torch.square."""
        return self.pow(2)

    def square_(self):
        """In place: self ** 2."""
        if self.dtype is _C.bool:
            raise RuntimeError(
                "square_(): result type Long can't be cast to the desired "
                "output type Bool")
        return self.pow_(2)
    exp_ = _inplace_unop("exp", _ag.Exp)
    log_ = _inplace_unop("log", _ag.Log)
    relu_ = _inplace_unop("relu", _ag.Relu)
    sigmoid_ = _inplace_unop("sigmoid", _ag.Sigmoid)
    tanh_ = _inplace_unop("tanh", _ag.Tanh)

    def isfinite(self):
        """A bool tensor: True where the value is neither inf nor NaN."""
        return _unary("isfinite", self)

    def isnan(self):
        return _compare("ne", self, self)

    def isinf(self):
        if not self.dtype.is_floating_point:
            return _compare("ne", self, self)
        return _compare("eq", _unary("abs", self), math.inf)

    def clamp(self, min=None, max=None):
        """Limit the values to [min, max] (either may be None)."""
        lo, hi = _clamp_args("clamp", min, max)
        if isinstance(lo, _TB) or isinstance(hi, _TB):
            # a tensor bound is an element-wise maximum/minimum; a number
            # beside it is a one-sided clamp
            t = self
            if lo is not None:
                t = t.maximum(lo) if isinstance(lo, _TB) else t.clamp(min=lo)
            if hi is not None:
                t = t.minimum(hi) if isinstance(hi, _TB) else t.clamp(max=hi)
            return t
        if _mode.enabled and self.requires_grad:
            return _ag.Clamp.apply(self, lo, hi)
        return _C.clamp(self, lo, hi)

    clip = clamp

    def clamp_(self, min=None, max=None):
        """In place: limit the values to [min, max]."""
        lo, hi = _clamp_args("clamp_", min, max)
        if isinstance(lo, _TB) or isinstance(hi, _TB):
            return self.copy_(self.clamp(lo, hi))
        if _mode.enabled and self.requires_grad:
            return _inplace(self, _ag.Clamp, lo, hi)
        _C.clamp(self, lo, hi, self)
        return self

    clip_ = clamp_

    where = _tensor_where.tensor_where
    masked_fill = _tensor_where.masked_fill
    masked_fill_ = _tensor_where.masked_fill_

    # -- in-place writes -----------------------------------------------------

    def fill_(self, value):
        """Set every element to ``value``; returns self."""
        if isinstance(value, _TB):
            if value.numel() != 1:
                raise RuntimeError(
                    "fill_ only supports 0-dimension value tensor but got "
                    f"tensor with {value.ndim} dimensions.")
            value = value.item()
        value = _check_number("fill_", "value", value, allow_none=False)
        if _mode.enabled and self.requires_grad:
            new = _C.full(tuple(self.shape), value, self.dtype,
                          _dev_str(self))
            return _inplace(self, _ag.Overwrite, new)
        _C.fill_(self, value)
        return self

    def zero_(self):
        """Set every element to zero; returns self."""
        return self.fill_(0)

    def copy_(self, src, non_blocking=False):
        """Copy ``src`` (broadcast and cast) into self; returns self."""
        if not isinstance(src, _TB):
            raise TypeError(
                "copy_(): argument 'src' must be a Tensor, but got "
                f"{type(src).__name__}")
        if _mode.enabled and (self.requires_grad or src.requires_grad):
            return _inplace(self, _ag.CopyFrom, src)
        _C.copy_(self, src, non_blocking)
        return self

    def uniform_(self, a=0.0, b=1.0):
        """Fill with values drawn uniformly from [a, b)."""
        a = _check_number("uniform_", "from", a, False)
        b = _check_number("uniform_", "to", b, False)
        if a > b:
            raise RuntimeError(
                f"uniform_(): expects a <= b, but found a={a} and b={b}")
        return _random_fill(self, "uniform", a, b)

    def normal_(self, mean=0.0, std=1.0):
        """Fill with values drawn from N(mean, std^2)."""
        mean = _check_number("normal_", "mean", mean, False)
        std = _check_number("normal_", "std", std, False)
        if std < 0:
            raise RuntimeError(
                f"normal_(): expects std >= 0.0, but found std {std}")
        return _random_fill(self, "normal", mean, std)

    def bernoulli_(self, p=0.5):
        """Fill with 1 with probability p, else 0."""
        p = _check_number("bernoulli_", "p", p, False)
        if not 0 <= p <= 1:
            raise RuntimeError(
                f"bernoulli_(): expects p to be in [0, 1], but got p={p}")
        return _random_fill(self, "bernoulli", p, 0.0)

    def random_(self, from_=0, to=None):
        """Fill with integers drawn uniformly from [from_, to)."""
        if to is None:
            from_, to = 0, from_
            if to == 0:
                raise RuntimeError("random_(): give an upper bound 'to'")
        return _random_fill(self, "randint", from_, to)


# ----------------------------------------------------------------------------
# helpers of the methods above


def _scale(fn, other, alpha):
    alpha = _check_number(fn, "alpha", alpha, allow_none=False)
    if isinstance(other, _TB):
        return other * alpha
    c = other if other.__class__ in _SCALARS else _coerce_scalar(other)
    if c is None:
        raise TypeError(
            f"{fn}(): argument 'other' must be a Tensor or a number, but got "
            f"{type(other).__name__}")
    return c * alpha


def _clamp_args(fn, lo, hi):
    if lo is None and hi is None:
        raise RuntimeError(
            f"{fn}(): at least one of 'min' or 'max' must not be None")
    if not isinstance(lo, _TB):
        lo = _check_number(fn, "min", lo)
    if not isinstance(hi, _TB):
        hi = _check_number(fn, "max", hi)
    return lo, hi


def _random_fill(self, kind, a, b):
    if _mode.enabled and self.requires_grad:
        new = _C.empty(tuple(self.shape), self.dtype, _dev_str(self))
        _C.random_(new, kind, a, b)
        return _inplace(self, _ag.Overwrite, new)
    if self.is_contiguous():
        _C.random_(self, kind, a, b)
    else:
        tmp = _C.empty(tuple(self.shape), self.dtype, _dev_str(self))
        _C.random_(tmp, kind, a, b)
        _C.copy_(self, tmp)
    return self
