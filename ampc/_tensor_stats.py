"""``Tensor.norm``, ``var`` and ``std``: PyTorch's vector norms and
variance over all elements or some dims, written with ampc's reductions
and computed in float32 for float16/bfloat16 inputs (the result is rounded
once to the input's dtype, as in PyTorch).  The norm and the square root
of ``std`` are ``Function``s of their own, whose gradients follow PyTorch's
rules where the chain rule of pow or sqrt would give 0 * inf: 0 at a zero
norm (or zero element, for p < 1) and at a zero variance, and ties of the
inf-norm sharing the gradient.  A mixin of ``Tensor``.

>>> import ampc
>>> ampc.tensor([3.0, -4.0]).norm()
tensor(5.)
"""
import math
import warnings

from . import _C
from ._dtype_device import float32
from .autograd.function import Function
from .autograd.grad_mode import _mode

_TB = _C.TensorBase
_INF = (math.inf, -math.inf)


def _dims(fn, t, dim):
    """dim (None, an int or a sequence; empty or None: every dim) as a
    sorted tuple of t's dims (empty for a 0-d t)."""
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return tuple(range(t.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    nd = max(t.ndim, 1)
    seen = set()
    for d in dims:
        if not -nd <= d < nd:
            raise IndexError(
                f"{fn}(): Dimension out of range (expected to be in range of "
                f"[{-nd}, {nd - 1}], but got {d})")
        if d % nd in seen:
            raise RuntimeError(f"{fn}(): dim {d % nd} appears multiple "
                               "times in the list of dims")
        seen.add(d % nd)
    return tuple(sorted(seen)) if t.ndim else ()


def _wide(t):
    """t in float32 when it is 16-bit (float tensors only)."""
    return t.to(float32) if t.dtype.itemsize == 2 else t


def _sum(t, dims, keepdim):
    if not dims:
        return t.clone() if t.ndim == 0 else t.sum()
    return t.sum(dims, keepdim=keepdim)


def _extreme(a, dims, keepdim, largest):
    """The max (or min) of a over dims, in one reduction: dims moved last
    and merged."""
    if not dims:
        return a.clone()
    rest = [d for d in range(a.ndim) if d not in dims]
    kept = [a.shape[d] for d in rest]
    flat = a.permute(*rest, *dims).reshape(*kept, -1)
    out = (flat.max if largest else flat.min)(-1)[0]
    if keepdim:
        out = out.reshape(*[1 if d in dims else a.shape[d]
                            for d in range(a.ndim)])
    return out


def _unreduce(g, dims, keepdim):
    """g with the reduced dims back (size 1), so it broadcasts over x."""
    if not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    return g


def _norm_of(x, p, dims, keepdim):
    """The p-norm of x (float32 for 16-bit x), no autograd: over every dim
    for p > 0 one fused pass (clip_grad_norm_'s kernel, float32 sums)."""
    if p > 0 and len(dims) == x.ndim and x.numel() and not (
            _mode.enabled and x.requires_grad):     # (not in a formula)
        out = _C._grad_norm([_wide(x)], float(p))
        return out.reshape(*[1] * x.ndim) if keepdim else out
    a = _wide(x).abs()
    if p in _INF:
        return _extreme(a, dims, keepdim, p > 0)
    if p == 0:
        return _sum((a != 0).to(a.dtype), dims, keepdim)
    if p == 1:
        return _sum(a, dims, keepdim)
    if p == 2:
        return _sum(a * a, dims, keepdim).sqrt()
    return _sum(a ** p, dims, keepdim) ** (1.0 / p)


class Norm(Function):
    """The vector p-norm over dims; its gradient in closed form."""

    @staticmethod
    def forward(ctx, x, p, dims, keepdim):
        ctx.p, ctx.dims, ctx.keepdim = p, dims, keepdim
        ctx.save_for_backward(x)
        return _norm_of(x, p, dims, keepdim).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return norm_grad(x, g, ctx.p, ctx.dims, ctx.keepdim), None, None, None


def norm_grad(x, g, p, dims, keepdim):
    """d|x|_p/dx times g, with PyTorch's zeros (a zero norm; for p < 1 a
    zero element) and the inf-norm's ties sharing it; written with
    differentiable tensor ops (the norm recomputed from x), so it is also
    the create_graph formula."""
    from ._tensor_where import where
    w = _wide(x)
    g = _unreduce(_wide(g), dims, keepdim)
    if p == 0:
        return (w * 0.0).to(x.dtype)
    n = _norm_of(w, p, dims, True) if p not in (1,) else None
    if p in _INF:
        hit = (w.abs() == n).to(w.dtype)
        share = hit / _sum(hit, dims, True)
        return (w.sign() * share * g).to(x.dtype)
    if p == 1:
        return (w.sign() * g).to(x.dtype)
    zero = n == 0
    scale = where(zero, 0.0, g / where(zero, 1.0, n ** (p - 1)))
    a = w.abs()
    if p < 1:
        # |x|^(p-1) is infinite at a zero element; its gradient is 0
        mag = where(a == 0, 0.0, where(a == 0, 1.0, a) ** (p - 1))
    else:
        mag = a ** (p - 1)
    return (w.sign() * mag * scale).to(x.dtype)


class SafeSqrt(Function):
    """sqrt, with the gradient 0 where the result is 0 (std's rule)."""

    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return v.sqrt()

    @staticmethod
    def backward(ctx, g):
        v, = ctx.saved_tensors
        return safe_sqrt_grad(v, g)


def safe_sqrt_grad(v, g):
    """g / (2 sqrt(v)), 0 where v is 0 (also the create_graph formula)."""
    from ._tensor_where import where
    y = v.sqrt()
    zero = y == 0
    return where(zero, 0.0, g / where(zero, 1.0, y * 2.0))


def _var_wide(fn, t, dim, unbiased, keepdim, correction, stacklevel):
    """The variance of t in float32 (for 16-bit t), with autograd."""
    if isinstance(dim, bool):               # var(False): PyTorch's overload
        dim, unbiased = None, dim
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"{fn}(): input dtype should be floating point, "
                           f"got {t.dtype.name}")
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{fn}(): cannot specify both unbiased and "
                           "correction")
    corr = correction if correction is not None else (
        0 if unbiased is False else 1)
    dims = _dims(fn, t, dim)
    x = _wide(t)
    n = math.prod(t.shape[d] for d in dims) if dims else t.numel()
    mean = x.mean(dims, keepdim=True) if dims else x
    dev = x - mean
    if n - corr <= 0:
        warnings.warn(f"{fn}(): degrees of freedom is <= 0. Correction "
                      "should be strictly less than the reduction factor "
                      "(input numel divided by output numel).",
                      stacklevel=stacklevel)
    return _sum(dev * dev, dims, keepdim) / float(max(n - corr, 0))


class _TensorStats:

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The vector p-norm over all elements or ``dim``: 2 ("fro"), 1,
        inf (the largest magnitude), -inf (the smallest), 0 (the count of
        non-zeros) or any other number ((sum |x|^p)^(1/p))."""
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                "norm(): input dtype should be either floating point or "
                f"complex. Got {self.dtype.name} instead.")
        if p == "fro":
            p = 2
        if p == "nuc":
            raise RuntimeError(
                "norm(): p must be a number or 'fro', got 'nuc' (the "
                "nuclear norm needs singular values, and ampc has no SVD)")
        if not isinstance(p, (int, float)) or isinstance(p, bool):
            raise RuntimeError(f"norm(): p must be a number or 'fro', got "
                               f"{p!r}")
        x = self if dtype is None else self.to(dtype)
        if dtype is None and _C.autocast_active():
            # float32 under CUDA autocast (PyTorch's fp32_append_dtype)
            x, = _C.autocast_cast_args("norm", (x,), _mode.enabled)
        return Norm.apply(x, p, _dims("norm", x, dim), keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *,
            correction=None):
        """The variance over all elements or ``dim``: the mean squared
        deviation times N / (N - correction) (``correction`` defaults to
        1, or 0 with ``unbiased=False``)."""
        return _var_wide("var", self, dim, unbiased, keepdim, correction,
                         3).to(self.dtype)

    def std(self, dim=None, unbiased=None, keepdim=False, *,
            correction=None):
        """The square root of ``var`` (same arguments), taken before the
        one rounding to a 16-bit dtype; its gradient is 0 where the
        variance is 0."""
        v = _var_wide("std", self, dim, unbiased, keepdim, correction, 3)
        return SafeSqrt.apply(v).to(self.dtype)
