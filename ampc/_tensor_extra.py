"""More of ``Tensor``'s methods that PyTorch scripts reach for, each a thin
composition of ops ampc already has (so autograd, dtypes and devices come
from them): ``softmax``/``log_softmax`` as methods, ``amax``/``amin``
over several dims (ties share the gradient, as PyTorch), ``median``
(the lower middle value; NaN propagates), ``select``, ``dot``, ``mv``,
``trace``, ``clamp_min``/``clamp_max``, ``mT``, ``tensor_split`` and
``hsplit``/``vsplit``/``dsplit``, ``nansum``/``nanmean``, ``diff``, and
``unique``/``bincount`` (data-dependent sizes: computed on the host, as
PyTorch's also synchronise).  A mixin of ``Tensor``.

>>> import ampc
>>> x = ampc.tensor([[1.0, 3.0], [3.0, 2.0]])
>>> x.amax(), x.median()
(tensor(3.), tensor(2.))
"""
import math
import operator

import numpy as np

from . import _C
from ._dtype_device import _wrap_dim, bool_, float32, int64
from .autograd import Function

_TB = _C.TensorBase
_TORCH_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                "int64": "Long", "bool": "Bool"}


def _dims(fn, t, dim):
    """dim (an int, a sequence, or () / None for all) as sorted dims."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return list(range(t.ndim))
    if not isinstance(dim, (tuple, list)):
        dim = (dim,)
    dims = sorted({_wrap_dim(fn, d, t.ndim) for d in dim})
    if len(dims) != len(dim):
        raise RuntimeError(f"{fn}(): dim appears multiple times in the list "
                           "of dims")
    return dims


def _rows_last(t, dims):
    """t with ``dims`` moved last and merged into one: (rest..., k)."""
    rest = [d for d in range(t.ndim) if d not in dims]
    moved = t.permute(*rest, *dims) if t.ndim else t.reshape(1)
    return moved.reshape(*[t.shape[d] for d in rest], -1)


class _Extreme(Function):
    """amax/amin over ``dims``: the gradient shared evenly by the elements
    equal to the result (PyTorch's rule)."""

    node_name = "AmaxBackward0"

    @staticmethod
    def forward(ctx, x, dims, keepdim, largest):
        rows = _rows_last(x, dims)
        out = (rows.max(-1) if largest else rows.min(-1)).values
        kept = out.reshape(*[1 if d in dims else n
                             for d, n in enumerate(x.shape)])
        ctx.dims = tuple(dims)
        ctx.save_for_backward(x, kept)
        return kept if keepdim else out

    @staticmethod
    def backward(ctx, g):
        x, kept = ctx.saved_tensors
        ties = (x == kept).to(g.dtype)
        share = g.reshape(*kept.shape) / ties.sum(ctx.dims, keepdim=True)
        return ties * share, None, None, None


def _extreme(fn, t, dim, keepdim, largest):
    dims = _dims(fn, t, dim)
    if any(t.shape[d] == 0 for d in dims):
        raise IndexError(f"{fn}(): Expected reduction dim to have non-zero "
                         "size")
    if not dims:
        return t.clone()
    return _Extreme.apply(t, dims, keepdim, largest)


def _split_points(n, sections):
    """tensor_split's boundaries for ``sections`` parts of n elements."""
    size, extra = divmod(n, sections)
    points, at = [], 0
    for i in range(sections - 1):
        at += size + (1 if i < extra else 0)
        points.append(at)
    return points


class _TensorExtra:
    """Tensor's methods in this file (a mixin, as ``_TensorOps``)."""

    __slots__ = ()

    def softmax(self, dim, dtype=None):
        """``F.softmax(self, dim, dtype=dtype)``."""
        from .nn.functional import softmax
        return softmax(self, dim, dtype=dtype)

    def log_softmax(self, dim, dtype=None):
        """``F.log_softmax(self, dim, dtype=dtype)``."""
        from .nn.functional import log_softmax
        return log_softmax(self, dim, dtype=dtype)

    def amax(self, dim=(), keepdim=False):
        """The largest value over ``dim`` (an int or several; all when
        empty); ties share the gradient."""
        return _extreme("amax", self, dim, keepdim, True)

    def amin(self, dim=(), keepdim=False):
        """The smallest value over ``dim``; ties share the gradient."""
        return _extreme("amin", self, dim, keepdim, False)

    def median(self, dim=None, keepdim=False):
        """The lower of the two middle values (of every element, or along
        ``dim`` with its index as a ``(values, indices)`` tuple); a NaN
        makes the median NaN (its index the first NaN's)."""
        from .tensor import return_types
        if dim is None:
            flat = self.reshape(-1)
            if flat.numel() == 0:
                return _C.full((), math.nan, self.dtype, _dev(self))
            values, index = flat.median(0)
            return values
        d = _wrap_dim("median", dim, self.ndim)
        n = self.shape[d] if self.ndim else 1
        if n == 0:
            raise IndexError("median(): Expected reduction dim " + str(d) +
                             " to have non-zero size.")
        srt = self.sort(d)
        k = (n - 1) // 2
        values = srt.values.narrow(d, k, 1) if self.ndim else srt.values
        index = srt.indices.narrow(d, k, 1) if self.ndim else srt.indices
        if self.dtype.is_floating_point:
            # NaN sorts last: a line holding one has its first NaN's index
            last = srt.values.narrow(d, n - 1, 1) if self.ndim else \
                srt.values
            nan = last != last
            first_nan = self.isnan().to(int64).argmax(d, keepdim=True) \
                if self.ndim else index
            values = values.where(~nan, last)
            index = index.where(~nan, first_nan)
        if not keepdim and self.ndim:
            values, index = values.squeeze(d), index.squeeze(d)
        return return_types.median(values, index)

    def select(self, dim, index):
        """The view ``self[..., index, ...]`` with ``dim`` removed."""
        d = _wrap_dim("select", dim, self.ndim)
        index = operator.index(index)
        n = self.shape[d]
        if not -n <= index < n:
            raise IndexError(
                f"select(): index {index} out of range for tensor of size "
                f"{list(self.shape)} at dimension {dim}")
        return self[(slice(None),) * d + (index,)]

    def dot(self, other):
        """The inner product of two 1-D tensors of the same size and
        dtype."""
        _check_vectors("dot", self, other)
        if not self.dtype.is_floating_point:
            return (self * other).sum()
        return (self.reshape(1, -1) @ other.reshape(-1, 1)).reshape(())

    def vdot(self, other):
        """``dot`` (ampc has no complex dtypes)."""
        return self.dot(other)

    def mv(self, vec):
        """matrix (n, m) @ vector (m,) -> (n,)."""
        if not isinstance(vec, _TB):
            raise TypeError(f"mv(): argument 'vec' must be Tensor, not "
                            f"{type(vec).__name__}")
        if self.ndim != 2 or vec.ndim != 1:
            raise RuntimeError(
                f"vector + matrix @ vector expected, got 1, {self.ndim}, "
                f"{vec.ndim}")
        if self.shape[1] != vec.shape[0]:
            raise RuntimeError(
                f"size mismatch, got input ({self.shape[0]}), mat "
                f"({self.shape[0]}x{self.shape[1]}), vec ({vec.shape[0]})")
        return (self @ vec.reshape(-1, 1)).reshape(-1)

    def trace(self):
        """The sum of the main diagonal of a matrix."""
        if self.ndim != 2:
            raise RuntimeError(
                f"trace: expected a matrix, but got tensor with dim "
                f"{self.ndim}")
        n = min(self.shape)
        if n == 0:
            return self.sum()
        return self.reshape(-1)[::self.shape[1] + 1][:n].sum()

    def clamp_min(self, min):
        return self.clamp(min=min)

    def clamp_max(self, max):
        return self.clamp(max=max)

    def clamp_min_(self, min):
        return self.clamp_(min=min)

    def clamp_max_(self, max):
        return self.clamp_(max=max)

    @property
    def mT(self):
        """The last two dims swapped (a view)."""
        if self.ndim < 2:
            raise RuntimeError(
                "tensor.mT is only supported on matrices or batches of "
                f"matrices. Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    def tensor_split(self, indices_or_sections, dim=0):
        """Views split at the given indices, or into that many parts whose
        sizes differ by at most one (the first ones larger)."""
        d = _wrap_dim("tensor_split", dim, self.ndim)
        n = self.shape[d]
        if isinstance(indices_or_sections, (tuple, list)):
            points = [operator.index(i) for i in indices_or_sections]
        else:
            sections = operator.index(indices_or_sections)
            if sections <= 0:
                raise RuntimeError(
                    "tensor_split(): number of sections must be larger than "
                    f"0, got {sections}")
            points = _split_points(n, sections)
        bounds = [0] + [min(max(p if p >= 0 else p + n, 0), n)
                        for p in points] + [n]
        return tuple(self.narrow(d, a, max(b - a, 0))
                     for a, b in zip(bounds, bounds[1:]))

    def hsplit(self, sections):
        return _nsplit("hsplit", self, sections, 1 if self.ndim > 1 else 0,
                       1)

    def vsplit(self, sections):
        return _nsplit("vsplit", self, sections, 0, 2)

    def dsplit(self, sections):
        return _nsplit("dsplit", self, sections, 2, 3)

    def nansum(self, dim=None, keepdim=False, *, dtype=None):
        """``sum`` with NaN counted as 0."""
        x = self.where(~self.isnan(), 0) if self.dtype.is_floating_point \
            else self
        return x.sum(dim, keepdim=keepdim, dtype=dtype) if dim is not None \
            else x.sum(dtype=dtype)

    def nanmean(self, dim=None, keepdim=False, *, dtype=None):
        """The mean of the values that are not NaN."""
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                "nanmean(): expected input to have floating point dtype but "
                f"got {_TORCH_NAMES[self.dtype.name]}")
        keep = ~self.isnan()
        total = self.nansum(dim, keepdim, dtype=dtype)
        count = keep.sum(dim, keepdim=keepdim) if dim is not None \
            else keep.sum()
        return total / count

    def diff(self, n=1, dim=-1, prepend=None, append=None):
        """The n-th forward difference along ``dim`` (bool: ``!=``), with
        ``prepend``/``append`` joined first."""
        from ._creation import cat
        d = _wrap_dim("diff", dim, self.ndim)
        parts = [t for t in (prepend, self, append) if t is not None]
        x = cat(parts, d) if len(parts) > 1 else self
        for _ in range(operator.index(n)):
            m = x.shape[d]
            if m == 0:
                break
            hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
            x = hi != lo if x.dtype is bool_ else hi - lo
        return x

    def unique(self, sorted=True, return_inverse=False, return_counts=False,
               dim=None):
        """The distinct values (sorted), with the inverse indices and the
        counts when asked; with ``dim``, the distinct slices along it."""
        from ._creation import tensor
        arr = self.float().cpu().numpy() if self.dtype.name in (
            "float16", "bfloat16") else self.cpu().numpy()
        out = np.unique(arr, return_inverse=True, return_counts=True,
                        axis=None if dim is None else
                        _wrap_dim("unique", dim, self.ndim))
        dev = _dev(self)
        values = tensor(out[0], device=dev).to(self.dtype)
        inverse = tensor(out[1].reshape(
            self.shape if dim is None else (-1,)), dtype=int64, device=dev)
        counts = tensor(out[2], dtype=int64, device=dev)
        extra = (([inverse] if return_inverse else []) +
                 ([counts] if return_counts else []))
        return (values, *extra) if extra else values

    def bincount(self, weights=None, minlength=0):
        """Occurrences of each value of a 1-D non-negative int64 tensor
        (summing ``weights`` instead of counting, when given)."""
        from ._creation import tensor
        if self.ndim != 1 or self.dtype is not int64:
            raise RuntimeError(
                "bincount only supports 1-d non-negative integral inputs.")
        arr = self.cpu().numpy()
        if arr.size and arr.min() < 0:
            raise RuntimeError(
                "bincount only supports 1-d non-negative integral inputs.")
        dev = _dev(self)
        if weights is None:
            return tensor(np.bincount(arr, minlength=minlength), dtype=int64,
                          device=dev)
        if tuple(weights.shape) != tuple(self.shape):
            raise RuntimeError(
                "weights should be 1-d and have the same length as input")
        w = weights.float().cpu().numpy().astype(np.float64)
        out = np.bincount(arr, w, minlength=minlength)
        dtype = weights.dtype if weights.dtype.is_floating_point else float32
        return tensor(out.astype(np.float32), device=dev).to(dtype)


def _dev(t):
    return "cpu" if t.device_type == "cpu" else f"cuda:{t.device_index}"


def _check_vectors(fn, a, b):
    if not isinstance(b, _TB):
        raise TypeError(f"{fn}(): argument 'tensor' must be Tensor, not "
                        f"{type(b).__name__}")
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and "
                           f"{b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a.shape[0]}] and "
            f"src [{b.shape[0]}] to have the same number of elements, but got "
            f"{a.shape[0]} and {b.shape[0]} elements respectively")
    if a.dtype is not b.dtype:
        raise RuntimeError(
            f"{fn} : expected both vectors to have same dtype, but found "
            f"{_TORCH_NAMES[a.dtype.name]} and {_TORCH_NAMES[b.dtype.name]}")


def _nsplit(fn, t, sections, dim, min_ndim):
    """hsplit/vsplit/dsplit: tensor_split along ``dim``, a number of
    sections having to divide the size."""
    if t.ndim < min_ndim:
        raise RuntimeError(
            f"torch.{fn} requires a tensor with at least {min_ndim} "
            f"dimension, but got a tensor with {t.ndim} dimensions!")
    if not isinstance(sections, (tuple, list)):
        sections = operator.index(sections)
        if sections == 0 or t.shape[dim] % sections:
            raise RuntimeError(
                f"torch.{fn} attempted to split along dimension {dim}, but "
                f"the size of the dimension {t.shape[dim]} is not divisible "
                f"by the split_size {sections}!")
    return t.tensor_split(sections, dim)
