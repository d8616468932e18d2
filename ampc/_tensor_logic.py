"""Logic on bool tensors: the operators ``&``, ``|``, ``^``, ``~`` (and
their in-place forms), and ``logical_and``/``or``/``xor``/``not``, which
take any dtype (non-zero is True) and return bool.  Each is one of the
existing kernels on bools: ``&`` a product, ``|`` a maximum, ``^`` an
inequality, ``~`` an equality with False.  A mixin of ``Tensor``.

>>> import ampc
>>> x = ampc.tensor([0.5, -1.0, 2.0])
>>> (x > 0) & (x < 1)
tensor([ True, False, False])
"""
from . import _C
from ._dtype_device import bool_

_TB = _C.TensorBase
_KERNEL = {"and": ("binary", "mul"), "or": ("binary", "maximum"),
           "xor": ("compare", "ne")}


def _as_bool_operand(op, v):
    """A bool tensor or a Python bool; else TypeError naming the op."""
    if isinstance(v, bool) or (isinstance(v, _TB) and v.dtype is bool_):
        return v
    what = f"a tensor of dtype {v.dtype.name}" if isinstance(v, _TB) else \
        type(v).__name__
    raise TypeError(
        f"{op}: ampc supports &, |, ^ and ~ on bool tensors (and Python "
        f"bools), not {what}; compare first (x != 0) or use "
        "logical_and/logical_or/logical_xor/logical_not")


def _bool_op(name, a, b, out=None):
    kind, op = _KERNEL[name]
    a = _as_bool_operand(f"__{name}__", a)
    b = _as_bool_operand(f"__{name}__", b)
    fn = _C.binary if kind == "binary" else _C.compare
    if out is None:
        return fn(op, a, b)
    return fn(op, a, b, out=out)


def _truth(t):
    return t if t.dtype is bool_ else (t != 0)


class _TensorLogic:

    def __and__(self, other):
        return _bool_op("and", self, other)

    def __or__(self, other):
        return _bool_op("or", self, other)

    def __xor__(self, other):
        return _bool_op("xor", self, other)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __iand__(self, other):
        return _bool_op("and", self, other, out=self)

    def __ior__(self, other):
        return _bool_op("or", self, other, out=self)

    def __ixor__(self, other):
        return _bool_op("xor", self, other, out=self)

    def __invert__(self):
        return _C.compare("eq", _as_bool_operand("__invert__", self), False)

    def logical_and(self, other):
        """Element-wise AND of the truth values (non-zero is True)."""
        return _truth(self) & _truth(other)

    def logical_or(self, other):
        """Element-wise OR of the truth values (non-zero is True)."""
        return _truth(self) | _truth(other)

    def logical_xor(self, other):
        """Element-wise XOR of the truth values (non-zero is True)."""
        return _truth(self) ^ _truth(other)

    def logical_not(self):
        """Element-wise NOT of the truth values (non-zero is True)."""
        return ~_truth(self)
