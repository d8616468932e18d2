"""``isclose``, ``allclose`` and ``equal``, PyTorch's comparisons for tests:
element-wise |a - b| <= atol + rtol * |b| (equal infinities close, NaN only
with ``equal_nan``), its all-reduction read to a Python bool, and exact
equality of shape and values.  A mixin of ``Tensor``.

>>> import ampc
>>> ampc.allclose(ampc.tensor([1.0, 2.0]), ampc.tensor([1.0, 2.0 + 1e-6]))
True
"""
from . import _C
from ._dtype_device import float32

_TB = _C.TensorBase


class _TensorClose:

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """A bool tensor: where ``|self - other| <= atol + rtol * |other|``
        (broadcast; equal values, infinities included, are close; NaN is
        close to NaN only with ``equal_nan``).  The dtypes must match, as
        in PyTorch."""
        if not isinstance(other, _TB):
            raise TypeError("isclose(): argument 'other' must be a Tensor, "
                            f"not {type(other).__name__}")
        if other.dtype is not self.dtype:
            raise RuntimeError(
                f"isclose(): {self.dtype.name} did not match "
                f"{other.dtype.name} (cast one of them first)")
        for name, v in (("rtol", rtol), ("atol", atol)):
            if v < 0:
                raise RuntimeError(f"isclose(): {name} must be greater than "
                                   f"or equal to zero, but got {v}")
        close = self == other
        if equal_nan and self.dtype.is_floating_point:
            close = close | (self.isnan() & other.isnan())
        if rtol == 0 and atol == 0:
            return close
        a, b = self.detach(), other.detach()
        if not a.dtype.is_floating_point:
            a, b = a.to(float32), b.to(float32)
        err = (a - b).abs()
        allowed = (b * rtol).abs() + atol
        return close | (err.isfinite() & (err <= allowed))

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Whether every element is ``isclose``: a Python bool (on CUDA, one
        read back)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

    def equal(self, other):
        """True when ``other`` has self's shape and equal values (NaN is not
        equal to itself)."""
        if not isinstance(other, _TB):
            raise TypeError("equal(): argument 'other' must be a Tensor, not "
                            f"{type(other).__name__}")
        if tuple(self.shape) != tuple(other.shape):
            return False
        return bool((self == other).all().item())
