"""``finfo`` and ``iinfo``: the numeric limits of ampc's dtypes, as
``torch.finfo`` / ``torch.iinfo`` give them; what an AMP user reaches for to
see float16's ceiling (65504) or where gradients turn subnormal.

>>> import ampc
>>> ampc.finfo(ampc.float16).max
65504.0
>>> ampc.finfo(ampc.bfloat16).eps
0.0078125
"""
from ._dtype_device import bfloat16, dtype, float16, float32, int64

__all__ = ["finfo", "iinfo"]

# bits, eps, max, smallest normal, resolution (10**-digits)
_FLOAT_LIMITS = {
    float32: (32, 2.0 ** -23, (2 - 2.0 ** -23) * 2.0 ** 127, 2.0 ** -126,
              1e-06),
    float16: (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 0.001),
    bfloat16: (16, 2.0 ** -7, (2 - 2.0 ** -7) * 2.0 ** 127, 2.0 ** -126,
               0.01),
}


class finfo:
    """Limits of a floating dtype (default float32): ``bits``, ``eps``
    (1.0's distance to the next value), ``max``, ``min`` (= -max),
    ``smallest_normal`` (also ``tiny``: below it values are subnormal and
    lose precision), ``resolution`` and ``dtype`` (its name)."""

    def __init__(self, type=float32):
        if not isinstance(type, dtype):
            raise TypeError(
                f"finfo(): argument 'type' must be an ampc.dtype, not "
                f"{type.__class__.__name__}")
        if type not in _FLOAT_LIMITS:
            raise TypeError(
                "ampc.finfo() requires a floating point input type. Use "
                "ampc.iinfo to handle 'ampc.finfo'")
        bits, eps, mx, normal, res = _FLOAT_LIMITS[type]
        self.bits = bits
        self.eps = eps
        self.max = mx
        self.min = -mx
        self.smallest_normal = self.tiny = normal
        self.resolution = res
        self.dtype = type.name

    def __eq__(self, other):
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, "
                f"max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (ampc has int64): ``bits``, ``min``,
    ``max`` and ``dtype`` (its name)."""

    def __init__(self, type):
        if type is not int64:
            name = getattr(type, "name", repr(type))
            raise TypeError(f"ampc.{name} is not supported by ampc.iinfo")
        self.bits = 64
        self.min = -2 ** 63
        self.max = 2 ** 63 - 1
        self.dtype = "int64"

    def __eq__(self, other):
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return (f"iinfo(min={float(self.min):g}, max={float(self.max):g}, "
                f"dtype={self.dtype})")
