"""``Tensor``'s writes at indices, PyTorch's ``scatter``/``scatter_``,
``scatter_add``/``scatter_add_``, ``index_add``/``index_add_`` and the read
``take``: each is an advanced index (ampc/_indexing.py) written, or added
(a repeated index adds each of its values), with autograd through it.

>>> import ampc
>>> ampc.zeros(2, 4).scatter_(1, ampc.tensor([[3], [0]]), 1.0)
tensor([[0., 0., 0., 1.],
        [1., 0., 0., 0.]])
"""
from . import _C
from ._dtype_device import _wrap_dim, int64
from ._indexing import along_dim, put, read

_TB = _C.TensorBase


def _values_for(fn, index, src, value):
    """What scatter writes: src restricted to index's extent, or a
    number."""
    if isinstance(src, _TB):
        return src[tuple(slice(0, n) for n in index.shape)]
    if src is None and value is None:
        raise TypeError(f"{fn}(): expected src (a tensor) or value (a "
                        "number)")
    return value if src is None else src


class _TensorScatter:
    """A mixin of ``Tensor`` (as ``_TensorOps``)."""

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        """``self[index[i][j]][j] = src[i][j]`` for dim 0 (and so on; src
        may be a number, or given as ``value=``): each element of
        ``index`` (int64, self's ndim, in [0, size)) names a position along
        ``dim``.  ``reduce="add"`` adds instead."""
        if reduce not in (None, "add"):
            raise RuntimeError("scatter_(): reduce argument must be either "
                               f"add or multiply (ampc: add), got {reduce!r}")
        if isinstance(src, _TB) and src.dtype is not self.dtype:
            raise RuntimeError(
                f"scatter_(): Expected self.dtype to be equal to src.dtype "
                f"(self {self.dtype.name}, src {src.dtype.name})")
        found = along_dim("scatter", self, dim, index,
                          src if isinstance(src, _TB) else None)
        if found is None:
            return self
        target, items = found
        values = _values_for("scatter", index, src, value)
        if isinstance(values, _TB) and self.ndim == 0:
            values = values.reshape(1)
        put(target, items, values, accumulate=reduce is not None,
            name="scatter_", wrap=False)
        return self

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        """``scatter_`` on a copy."""
        return self.clone().scatter_(dim, index, src, value=value,
                                     reduce=reduce)

    def scatter_add_(self, dim, index, src):
        """``scatter_`` that adds: ``self[index[i][j]][j] += src[i][j]``
        for dim 0, every value of a repeated index added."""
        return self.scatter_(dim, index, src, reduce="add")

    def scatter_add(self, dim, index, src):
        """``scatter_add_`` on a copy."""
        return self.clone().scatter_add_(dim, index, src)

    def index_add_(self, dim, index, source, *, alpha=1):
        """Adds ``alpha * source`` to the entries ``index`` (a 1-D int64
        tensor) of self along ``dim``, every value of a repeated index
        added; source has self's shape but ``len(index)`` along dim."""
        dim = _wrap_dim("index_add_", dim, self.ndim)
        if not isinstance(index, _TB) or index.dtype is not int64 or \
                index.ndim > 1:
            raise IndexError("index_add_(): Index is supposed to be a "
                             "vector of dtype int64")
        index = index.reshape(-1)
        want = list(self.shape)
        if want:
            want[dim] = index.shape[0]
        if not isinstance(source, _TB) or list(source.shape) != want:
            got = list(source.shape) if isinstance(source, _TB) else source
            raise RuntimeError(
                f"index_add_(): source tensor shape must match self tensor "
                f"shape, excluding the specified dimension. Got self.shape "
                f"= {list(self.shape)} source.shape = {got}")
        if source.dtype is not self.dtype:
            raise RuntimeError(
                f"index_add_(): self ({self.dtype.name}) and source "
                f"({source.dtype.name}) must have the same scalar type")
        if alpha != 1:
            source = source * alpha
        if self.ndim == 0:
            put(self.reshape(1), (index,), source.reshape(1),
                accumulate=True, name="index_add_", wrap=False)
            return self
        return put(self, (slice(None),) * dim + (index,), source,
                   accumulate=True, name="index_add_", wrap=False)

    def index_add(self, dim, index, source, *, alpha=1):
        """``index_add_`` on a copy."""
        return self.clone().index_add_(dim, index, source, alpha=alpha)

    def take(self, index):
        """The elements at ``index`` (int64, any shape) of self read as a
        flat tensor; the result has index's shape."""
        if not isinstance(index, _TB) or index.dtype is not int64:
            raise RuntimeError("take(): Expected a long tensor for index")
        return read(self.reshape(-1), (index,), "take")
