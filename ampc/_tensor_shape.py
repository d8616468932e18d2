"""``Tensor``'s splitting and tiling, PyTorch's ``split``, ``chunk``,
``unbind`` (views: narrow and select, so gradients flow back through
them), ``repeat``/``tile`` (an expanded view copied out) and ``flip`` (a
reversed index read); and the creation functions ``linspace`` and ``eye``.
A mixin of ``Tensor``.

>>> import ampc
>>> [t.tolist() for t in ampc.arange(5).split(2)]
[[0, 1], [2, 3], [4]]
"""
import math
import operator

from . import _C
from ._dtype_device import _wrap_dim, int64

_TB = _C.TensorBase


class _TensorShape:

    def split(self, split_size_or_sections, dim=0):
        """Views of ``split_size_or_sections`` entries along ``dim`` (the
        last one shorter), or of the given list of sizes."""
        dim = _wrap_dim("split", dim, self.ndim)
        size = self.shape[dim]
        if isinstance(split_size_or_sections, int):
            step = split_size_or_sections
            if step < 0 or (step == 0 and size != 0):
                raise RuntimeError(
                    "split(): split_size can only be 0 if dimension size is "
                    f"0, and must be non-negative, but got {step}")
            sizes = [min(step, size - s) for s in range(0, size, step)] \
                if step else [0]
        else:
            sizes = [int(n) for n in split_size_or_sections]
            if sum(sizes) != size or any(n < 0 for n in sizes):
                raise RuntimeError(
                    "split_with_sizes expects split_sizes to sum exactly to "
                    f"{size} (input tensor's size at dimension {dim}), but "
                    f"got split_sizes={sizes}")
        out, start = [], 0
        for n in sizes:
            out.append(self.narrow(dim, start, n))
            start += n
        return tuple(out)

    def chunk(self, chunks, dim=0):
        """At most ``chunks`` views along ``dim``, each of
        ceil(size / chunks) entries (the last one shorter)."""
        if chunks <= 0:
            raise RuntimeError(
                f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        dim = _wrap_dim("chunk", dim, self.ndim)
        return self.split(max(1, math.ceil(self.shape[dim] / chunks)), dim)

    def unbind(self, dim=0):
        """The views self[..., i, ...] along ``dim``, that dim removed."""
        dim = _wrap_dim("unbind", dim, self.ndim)
        lead = (slice(None),) * dim
        return tuple(self[lead + (i,)] for i in range(self.shape[dim]))

    def unflatten(self, dim, sizes):
        """Dim ``dim`` split into ``sizes`` (one of them may be -1), by
        ``reshape`` (a view where the strides allow)."""
        d = _wrap_dim("unflatten", dim, self.ndim)
        sizes = [operator.index(n) for n in sizes]
        if not sizes:
            raise RuntimeError("unflatten: sizes must be non-empty")
        if sizes.count(-1) > 1:
            raise RuntimeError(
                "unflatten: only one dimension can be inferred")
        n = self.shape[d] if self.ndim else 1
        known = math.prod(v for v in sizes if v != -1)
        # -1 beside a 0 is ambiguous, as in PyTorch
        fits = (known != 0 and n % known == 0) if -1 in sizes else known == n
        if not fits:
            raise RuntimeError(
                f"unflatten: Provided sizes {sizes} don't multiply up to the "
                f"size of dim {dim} ({n}) in the input tensor")
        sizes = [n // known if v == -1 else v for v in sizes]
        shape = tuple(self.shape)
        return self.reshape(*shape[:d], *sizes, *shape[d + 1:])

    def repeat(self, *sizes):
        """A copy tiled ``sizes[d]`` times along each dim (len(sizes) >=
        ndim; extra leading sizes add dims)."""
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        if len(sizes) < self.ndim:
            raise RuntimeError(
                "Number of dimensions of repeat dims can not be smaller than "
                "number of dimensions of tensor")
        shape = (1,) * (len(sizes) - self.ndim) + tuple(self.shape)
        x = self.reshape(*shape)
        # (r, n) per dim: an expanded view, copied out as (r * n)
        paired = x.reshape(*[v for n in shape for v in (1, n)])
        big = paired.expand(*[v for r, n in zip(sizes, shape)
                              for v in (r, n)])
        return big.reshape(*[r * n for r, n in zip(sizes, shape)])

    def tile(self, *dims):
        """``repeat``, with dims padded with leading 1s to self's ndim."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        return self.repeat(*((1,) * (self.ndim - len(dims)) + tuple(dims)))

    def flip(self, *dims):
        """A copy reversed along each of ``dims``."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        out = self
        for d in dims:
            d = _wrap_dim("flip", d, self.ndim)
            n = self.shape[d]
            back = _C.arange(n - 1, -1, -1, int64,
                             "cpu" if self.device_type == "cpu" else
                             f"cuda:{self.device_index}")
            out = out.index_select(d, back)
        return out if out is not self else self.clone()


def linspace(start, end, steps, *, dtype=None, device=None,
             requires_grad=False):
    """``steps`` values from ``start`` to ``end`` inclusive, evenly spaced
    (float32 by default): the first half counted up from start, the second
    down from end, in float32, as PyTorch does (so both ends are exact)."""
    from ._creation import arange, full
    from ._tensor_where import where
    if not isinstance(steps, int) or steps < 0:
        raise RuntimeError("linspace(): number of steps must be "
                           f"non-negative, got {steps!r}")
    if steps <= 1:
        out = full((steps,), float(start), device=device)
    else:
        step = (end - start) / (steps - 1)
        i = arange(steps, device=device).float()
        out = where(i < steps // 2, i * step + start,
                    (i - (steps - 1)) * step + end)
    out = out if dtype is None else out.to(dtype)
    return out.requires_grad_() if requires_grad else out


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The n x m (default n x n) identity: ones on the diagonal."""
    from ._creation import arange, zeros
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"eye(): n and m must be non-negative, got {n} "
                           f"and {m}")
    out = zeros(n, m, dtype=dtype, device=device)
    k = min(n, m)
    if k:
        at = arange(k, device=device)
        out[at, at] = 1
    return out.requires_grad_() if requires_grad else out
