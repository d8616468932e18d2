"""``Tensor.norm``, ``var`` and ``std``: PyTorch's vector norms and
variance over all elements or some dims, written with ampc's reductions
and computed in float32 for float16/bfloat16 inputs (the result is rounded
once to the input's dtype, as in PyTorch).  The 2-norm has its own
``Function`` so that its gradient at a zero vector is 0 (PyTorch's rule),
where ``sqrt``'s chain rule would give 0 * inf.  A mixin of ``Tensor``.

>>> import ampc
>>> ampc.tensor([3.0, -4.0]).norm()
tensor(5.)
"""
import math
import warnings

from . import _C
from ._dtype_device import float32
from .autograd.function import Function

_TB = _C.TensorBase


def _dims(fn, t, dim):
    """dim (None, an int or a sequence) as a tuple of dims of t, or None
    for all of them."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    nd = max(t.ndim, 1)
    for d in dims:
        if not -nd <= d < nd:
            raise IndexError(
                f"{fn}(): Dimension out of range (expected to be in range of "
                f"[{-nd}, {nd - 1}], but got {d})")
    return tuple(sorted({d % nd for d in dims})) if t.ndim else None


def _wide(t):
    """t in float32 when it is 16-bit (float tensors only)."""
    return t.to(float32) if t.dtype.itemsize == 2 else t


def _sum(t, dims, keepdim):
    return t.sum() if dims is None else t.sum(dims, keepdim=keepdim)


class Norm2(Function):
    """sqrt(sum(x^2)) over dims; the gradient g * x / norm, 0 where the
    norm is 0."""

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.dims, ctx.keepdim = dims, keepdim
        ctx.save_for_backward(x)
        w = _wide(x)
        return _sum(w * w, dims, keepdim).sqrt().to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return norm2_grad(x, g, ctx.dims, ctx.keepdim), None, None


def norm2_grad(x, g, dims, keepdim):
    """g * x / |x| (0 where |x| is 0), broadcast back over the reduced dims.
    Written with differentiable tensor ops (the norm recomputed from x), so
    it is also the create_graph formula."""
    from ._tensor_where import where
    w = _wide(x)
    n = _sum(w * w, dims, True).sqrt()
    if dims is not None and not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    zero = n == 0
    scale = where(zero, 0.0, _wide(g) / where(zero, 1.0, n))
    return (w * scale).to(x.dtype)


class _TensorStats:

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The vector p-norm over all elements or ``dim``: 2 ("fro"), 1,
        inf (the largest magnitude), -inf (the smallest), 0 (the count of
        non-zeros) or any other number ((sum |x|^p)^(1/p))."""
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                "norm(): input dtype should be either floating point or "
                f"complex. Got {self.dtype.name} instead.")
        x = self if dtype is None else self.to(dtype)
        dims = _dims("norm", x, dim)
        if p in ("fro", 2, 2.0):
            return Norm2.apply(x, dims, keepdim)
        if not isinstance(p, (int, float)) or isinstance(p, bool):
            raise RuntimeError(f"norm(): p must be a number or 'fro', got "
                               f"{p!r}")
        a = _wide(x).abs()
        if p == math.inf or p == -math.inf:
            if dims is None:
                out = a.max() if p > 0 else a.min()
            else:
                out = a
                for d in reversed(dims):    # (later dims first: keep d)
                    out = (out.max if p > 0 else out.min)(d, keepdim)[0]
        elif p == 0:
            out = _sum((a != 0).to(a.dtype), dims, keepdim)
        elif p == 1:
            out = _sum(a, dims, keepdim)
        else:
            out = _sum(a ** p, dims, keepdim) ** (1.0 / p)
        return out.to(x.dtype)

    def var(self, dim=None, unbiased=True, keepdim=False, *,
            correction=None):
        """The variance over all elements or ``dim``: the mean squared
        deviation times N / (N - correction) (``correction`` defaults to
        1, or 0 with ``unbiased=False``)."""
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                "var(): input dtype should be floating point, got "
                f"{self.dtype.name}")
        corr = (1 if unbiased else 0) if correction is None else correction
        dims = _dims("var", self, dim)
        x = _wide(self)
        n = self.numel() if dims is None else math.prod(
            self.shape[d] for d in dims)
        mean = x.mean() if dims is None else x.mean(dims, keepdim=True)
        dev = x - mean
        if n - corr <= 0:
            warnings.warn("var(): degrees of freedom is <= 0. Correction "
                          "should be strictly less than the reduction factor "
                          "(input numel divided by output numel).",
                          stacklevel=2)
        denom = max(n - corr, 0)
        ss = _sum(dev * dev, dims, keepdim)
        out = ss / denom if denom else ss * math.nan
        return out.to(self.dtype)

    def std(self, dim=None, unbiased=True, keepdim=False, *,
            correction=None):
        """The square root of ``var`` (same arguments)."""
        return self.var(dim, unbiased, keepdim,
                        correction=correction).sqrt()
