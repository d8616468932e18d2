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


def _bool_op(name, a, b, inplace=False):
    kind, op = _KERNEL[name]
    who = f"__i{name}__" if inplace else f"__{name}__"
    a = _as_bool_operand(who, a)
    b = _as_bool_operand(who, b)
    if kind == "compare":
        out = _C.compare(op, a, b)
        return _C.copy_(a, out) if inplace else out
    return _C.binary(op, a, b, out=a) if inplace else _C.binary(op, a, b)


def _truth(t):
    """A bool tensor, or a Python bool for a number (non-zero is True)."""
    if isinstance(t, _TB):
        return t if t.dtype is bool_ else (t != 0)
    if isinstance(t, (bool, int, float)):
        return bool(t)
    raise TypeError(f"logical ops take tensors or numbers, not "
                    f"{type(t).__name__}")


class _TensorLogic:

    def __and__(self, other):
        return _bool_op("and", self, other)

    def __or__(self, other):
        return _bool_op("or", self, other)

    def __xor__(self, other):
        return _bool_op("xor", self, other)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __iand__(self, other):
        return _bool_op("and", self, other, inplace=True)

    def __ior__(self, other):
        return _bool_op("or", self, other, inplace=True)

    def __ixor__(self, other):
        return _bool_op("xor", self, other, inplace=True)

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
