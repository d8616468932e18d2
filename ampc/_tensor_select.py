"""``Tensor.kthvalue``, ``cummax``, ``cummin``, ``histc`` and ``cross``:
PyTorch's arguments and errors.  cummax and cummin are one ``_C`` kernel
each (csrc/ops_stats.c, with autograd in autograd/sort_scan.py), histc
one kernel after its range is settled here; kthvalue is ``topk`` (its
values and gradient), cross a composite of differentiable slices, so both
run wherever those ops do.  A mixin of ``Tensor``.

NOTE: kthvalue's index among equal values is implementation-defined in
PyTorch (its CPU quickselect and its GPU radix select pick differently);
ampc returns the index of one element equal to the value.

>>> import ampc
>>> ampc.tensor([3.0, 1.0, 2.0]).kthvalue(2)
ampc.return_types.kthvalue(
values=tensor(2.),
indices=tensor(2))
>>> ampc.tensor([1, 3, 2]).cummax(0).values
tensor([1, 3, 3])
>>> ampc.tensor([1.0, 2.0, 1.0, 4.0]).histc(bins=4, min=0, max=4)
tensor([0., 2., 1., 1.])
"""
import math
import warnings

from . import _C
from ._dtype_device import _pybool, _wrap_dim
from .autograd import sort_scan as _ss
from .autograd.grad_mode import _mode

_autocast_active = _C.autocast_active
_autocast_cast_args = _C.autocast_cast_args


def _int_arg(fn, arg, v):
    if v.__class__ is _pybool or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}(): argument '{arg}' must be int, not "
                        f"{type(v).__name__}")
    return v.__index__()


def _histc_range(x, lo, hi):
    """histc's [min, max]: both 0 (equal) means the data's extremes, and an
    empty span widens by 1 each way, as PyTorch."""
    if lo == hi and x.numel() > 0:
        lo, hi = x.min().item(), x.max().item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return lo, hi


def _cross_dim(fn, a, b, dim):
    """cross's dim: PyTorch's linalg.cross default -1; torch.cross's
    deprecated default (dim=None) is the first dim of size 3."""
    if dim is not None:
        return _wrap_dim(fn, dim, max(a.ndim, b.ndim))
    warnings.warn(
        "Using torch.cross without specifying the dim arg is deprecated.\n"
        "Please either pass the dim explicitly or simply use "
        "torch.linalg.cross.\nThe default value of dim will change to "
        "agree with that of linalg.cross in a future release.",
        UserWarning, stacklevel=4)
    for d, n in enumerate(a.shape):
        if n == 3:
            return d
    raise RuntimeError(f"{fn}(): no dimension of size 3 in input")


def cross(fn, a, b, dim):
    """The cross product of a and b along dim (size 3), broadcast."""
    from .tensor import Tensor
    if not isinstance(b, Tensor):
        raise TypeError(f"{fn}(): argument 'other' must be Tensor, not "
                        f"{type(b).__name__}")
    if _autocast_active():
        a, b = _autocast_cast_args("cross", (a, b), _mode.enabled)
    if a.ndim != b.ndim:
        raise RuntimeError(f"{fn}: inputs must have the same number of "
                           "dimensions.")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{fn}(): expected input and other to have the "
                           f"same dtype, but got {a.dtype.name} and "
                           f"{b.dtype.name}")
    d = _cross_dim(fn, a, b, dim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"{fn}: inputs dimension {d - a.ndim} must have "
                           f"length 3. Got {a.shape[d]} and {b.shape[d]}")
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    from ._creation import cat
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0],
               d)


class _TensorSelect:
    """Order statistics, running extremes, histograms, cross products."""

    def kthvalue(self, k, dim=-1, keepdim=False):
        """``(values, indices)`` of the k-th smallest element of each line
        along ``dim`` (1-based k; NaN counts as the largest).

        >>> import ampc
        >>> ampc.tensor([[1, 5, 2], [3, 0, 7]]).kthvalue(2, 1, True).values
        tensor([[2],
                [3]])
        """
        from .tensor import return_types
        k = _int_arg("kthvalue", "k", k)
        d = _wrap_dim("kthvalue", dim, self.ndim)
        n = self.shape[d] if self.ndim else 1
        if not 1 <= k <= n:
            raise RuntimeError(f"kthvalue(): selected number k out of range "
                               f"for dimension {d}")
        x = self if self.ndim else self.reshape(1)
        # the cheaper end of the line: k smallest, or n - k + 1 largest
        if k <= n - k + 1:
            v, i = x.topk(k, d, largest=False)
            pick = k - 1
        else:
            v, i = x.topk(n - k + 1, d, largest=True)
            pick = n - k
        values, indices = v.narrow(d, pick, 1), i.narrow(d, pick, 1)
        if not self.ndim:
            values, indices = values.reshape(()), indices.reshape(())
        elif not keepdim:
            values, indices = values.squeeze(d), indices.squeeze(d)
        return return_types.kthvalue(values, indices)

    def cummax(self, dim):
        """``(values, indices)``: the running max along ``dim`` and where
        each came from (a later equal element and any NaN take over, as in
        PyTorch).

        >>> import ampc
        >>> ampc.tensor([1.0, 3.0, 3.0, 2.0]).cummax(0).indices
        tensor([0, 1, 2, 2])
        """
        return self._running_extreme("cummax", _ss.Cummax, dim)

    def cummin(self, dim):
        """``(values, indices)``: the running min along ``dim`` (as
        ``cummax``)."""
        return self._running_extreme("cummin", _ss.Cummin, dim)

    def _running_extreme(self, fn, cls, dim):
        from .tensor import return_types
        dim = _int_arg(fn, "dim", dim)
        if _mode.enabled and self.requires_grad:
            values, indices = cls.apply(self, dim)
        else:
            values, indices = getattr(_C, fn)(self, dim)
        return getattr(return_types, fn)(values, indices)

    def histc(self, bins=100, min=0, max=0):
        """The counts of the elements in ``bins`` equal bins over [min,
        max] (both 0: the data's min and max); elements outside (and NaN)
        are left out, the right edge belongs to the last bin.  Each bin is
        found as PyTorch's CPU kernel finds it, in the input's dtype; the
        counts are exact and rounded once (PyTorch's CPU kernel adds
        bfloat16 counts in bfloat16).

        >>> import ampc
        >>> ampc.tensor([1.0, 1.0, 1.0]).histc(4)
        tensor([0., 0., 3., 0.])
        """
        bins = _int_arg("histc", "bins", bins)
        if not self.dtype.is_floating_point:
            raise RuntimeError("histc(): input dtype should be floating "
                               f"point (float32, float16 or bfloat16), got "
                               f"{self.dtype.name}")
        lo, hi = float(min), float(max)
        if math.isfinite(lo) and math.isfinite(hi) and lo > hi:
            raise RuntimeError("histc(): max must be larger than min")
        if lo == hi:
            lo, hi = _histc_range(self, lo, hi)
        return _C.histc(self, bins, lo, hi)

    def cross(self, other, dim=None):
        """The cross product with ``other`` along ``dim`` (size 3; None:
        PyTorch's deprecated default, the first dim of size 3, with its
        warning); the inputs broadcast.

        >>> import ampc
        >>> ampc.tensor([1.0, 0.0, 0.0]).cross(ampc.tensor([0.0, 1.0, 0.0]),
        ...                                    dim=0)
        tensor([0., 0., 1.])
        """
        return cross("cross", self, other, dim)
