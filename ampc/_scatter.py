"""``Tensor``'s writes at indices, PyTorch's ``scatter``/``scatter_``,
``scatter_add``/``scatter_add_``, ``scatter_reduce``/``scatter_reduce_``,
``index_add``/``index_add_`` and the read ``take``, with autograd.
``scatter_`` (no reduce) and ``index_add_`` are advanced indices
(ampc/_indexing.py) written or added; the reductions (``scatter_add_``,
``scatter_(reduce=)``, ``scatter_reduce_``) run ``_C.scatter_reduce_``
(csrc/scatter_ops.c), float16/bfloat16 in a float32 copy rounded once and
bool in an int64 one.

>>> import ampc
>>> ampc.zeros(2, 4).scatter_(1, ampc.tensor([[3], [0]]), 1.0)
tensor([[0., 0., 0., 1.],
        [1., 0., 0., 0.]])
>>> ampc.zeros(3).scatter_reduce(0, ampc.tensor([0, 0, 2]),
...                              ampc.tensor([4.0, 2.0, 1.0]), "amax",
...                              include_self=False)
tensor([4., 0., 1.])
"""
import warnings

from . import _C
from ._dtype_device import _wrap_dim, bool_, float32, int64
from ._indexing import along_dim, check_along_dim, put, read
from .autograd import _mode
from .autograd.function import _dev_str

_TB = _C.TensorBase
_REDUCE = ("sum", "prod", "mean", "amax", "amin")
# PyTorch's parser takes "max" and "min" for amax and amin too
_ALIAS = {"max": "amax", "min": "amin"}
# bool in an int64 copy of 0s and 1s: a sum is "or", a product "and"
_BOOL_OP = {"sum": "amax", "prod": "amin", "amax": "amax", "amin": "amin"}
_LEGACY = {"add": "sum", "multiply": "prod"}
_LEGACY_SRC = (
    "The reduce argument of torch.scatter with Tensor src is deprecated and "
    "will be removed in a future PyTorch release. Use torch.scatter_reduce "
    "instead for more reduction options.")


def _values_for(fn, index, src, value):
    """What scatter writes: src restricted to index's extent, or a
    number."""
    if isinstance(src, _TB):
        return src[tuple(slice(0, n) for n in index.shape)]
    if src is None and value is None:
        raise TypeError(f"{fn}(): expected src (a tensor) or value (a "
                        "number)")
    return value if src is None else src


def _type_check(fn, name, pos, obj, want, kind):
    if not isinstance(obj, want):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must "
                        f"be {kind}, not {type(obj).__name__}")


def _check_reduce(fn, t, dim, index, src, reduce, include_self):
    """PyTorch's checks of scatter_reduce's arguments, in its order: the
    reduce op (aliases resolved) and the wrapped dim, None for an empty
    index."""
    _type_check(fn, "src", 3, src, _TB, "Tensor")
    _type_check(fn, "reduce", 4, reduce, str, "str")
    if include_self.__class__ is not bool:
        raise TypeError(f"{fn}(): argument 'include_self' must be bool, not "
                        f"{type(include_self).__name__}")
    if src.dtype is not t.dtype:
        raise RuntimeError(
            f"{fn}(): Expected self.dtype to be equal to src.dtype (self "
            f"{t.dtype.name}, src {src.dtype.name})")
    dim = check_along_dim(fn, t, dim, index, src)
    op = _ALIAS.get(reduce, reduce)
    if op not in _REDUCE:
        raise RuntimeError(
            f"{fn}(): reduce argument must be either sum, prod, mean, amax "
            f"or amin, got {reduce}")
    if op == "mean" and t.dtype is bool_:
        raise NotImplementedError(
            f"{fn}(): reduce=\"mean\" is not implemented for bool (as in "
            "PyTorch)")
    return op, dim


def reduce_into(t, dim, index, src, op, include_self, name):
    """The kernel on t in place (no autograd), t of any dtype and ndim >= 1,
    the arguments checked; returns t."""
    dt = t.dtype
    if dt is float32 or dt is int64:
        _C.scatter_reduce_(t, dim, index, src, op, include_self, name=name)
        return t
    if dt is bool_:
        wide, op = _C.cast(t, int64), _BOOL_OP[op]
    else:
        # float16/bfloat16: formed in float32, rounded once (PyTorch's CPU)
        wide = _C.cast(t, float32)
    _C.scatter_reduce_(wide, dim, index, _C.cast(src, wide.dtype), op,
                       include_self, name=name)
    _C.copy_(t, wide)
    return t


def _scatter_reduce(t, dim, index, src, op, include_self, name, in_place):
    """scatter_reduce on t (in place, or on a copy) after the checks, with
    autograd; a 0-d t is reduced as a 1-element view."""
    from .autograd import ScatterReduce, _mode, inplace
    if t.ndim == 0:
        flat = t.reshape(1)
        out = _scatter_reduce(flat, dim, index.reshape(-1), src.reshape(-1),
                              op, include_self, name, in_place)
        return t if in_place else out.reshape(())
    # (src's elements beyond index's extent are not read: no gradient)
    src = src[tuple(slice(0, n) for n in index.shape)]
    if _mode.enabled and (t.requires_grad or src.requires_grad):
        if in_place:
            return inplace(t, ScatterReduce, dim, index, src, op,
                           include_self, name)
        return ScatterReduce.apply(t, dim, index, src, op, include_self,
                                   name)
    return reduce_into(t if in_place else t.clone(), dim, index, src, op,
                       include_self, name)


class _TensorScatter:
    """A mixin of ``Tensor`` (as ``_TensorOps``)."""

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        """``self[index[i][j]][j] = src[i][j]`` for dim 0 (and so on; src
        may be a number, or given as ``value=``): each element of
        ``index`` (int64, self's ndim, in [0, size)) names a position along
        ``dim``.  ``reduce="add"`` adds, ``reduce="multiply"`` multiplies
        (PyTorch's legacy form of ``scatter_reduce_`` with "sum" and
        "prod"; ampc differentiates it, where PyTorch does not)."""
        if reduce is not None:
            return self._scatter_legacy(dim, index, src, value, reduce)
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
            values = values.reshape(-1)
        put(target, items, values, name="scatter_", wrap=False)
        return self

    def _scatter_legacy(self, dim, index, src, value, reduce):
        """scatter_ with reduce "add" or "multiply": scatter_reduce_ with
        "sum" or "prod" and include_self, a number broadcast to index's
        shape."""
        op = _LEGACY.get(reduce) if isinstance(reduce, str) else None
        if op is None:
            raise RuntimeError("scatter_(): reduce argument must be either "
                               f"add or multiply, got {reduce!r}")
        if isinstance(src, _TB):
            warnings.warn(_LEGACY_SRC, UserWarning, stacklevel=3)
            if src.dtype is not self.dtype:
                raise RuntimeError(
                    f"scatter_(): Expected self.dtype to be equal to "
                    f"src.dtype (self {self.dtype.name}, src "
                    f"{src.dtype.name})")
        dim = check_along_dim("scatter_", self, dim, index,
                              src if isinstance(src, _TB) else None)
        if dim is None:
            return self
        if not isinstance(src, _TB):
            number = _values_for("scatter_", index, src, value)
            src = _C.full((), number, self.dtype,
                          _dev_str(self)).expand(*index.shape)
        return _scatter_reduce(self, dim, index, src, op, True, "scatter_",
                               True)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        """``scatter_`` on a copy."""
        return self.clone().scatter_(dim, index, src, value=value,
                                     reduce=reduce)

    def scatter_add_(self, dim, index, src):
        """``scatter_`` that adds: ``self[index[i][j]][j] += src[i][j]``
        for dim 0, every value of a repeated index added (in index order
        on the CPU)."""
        _type_check("scatter_add_", "src", 3, src, _TB, "Tensor")
        if src.dtype is not self.dtype:
            raise RuntimeError(
                f"scatter_add_(): Expected self.dtype to be equal to "
                f"src.dtype (self {self.dtype.name}, src {src.dtype.name})")
        dim = check_along_dim("scatter_add_", self, dim, index, src)
        if dim is None:
            return self
        return _scatter_reduce(self, dim, index, src, "sum", True,
                               "scatter_add_", True)

    def scatter_add(self, dim, index, src):
        """``scatter_add_`` on a copy."""
        return self.clone().scatter_add_(dim, index, src)

    def scatter_reduce_(self, dim, index, src, reduce, *,
                        include_self=True):
        """Reduces each value of ``src`` into the element of self that
        ``index`` names along ``dim`` (``self[index[i][j]][j]`` with
        ``src[i][j]`` for dim 0): ``reduce`` "sum", "prod", "mean", "amax"
        or "amin".  ``include_self=False``: an element that is scattered to
        starts from its first value instead of from self (one that is not
        keeps self).  "mean" divides by the count, self's value counted
        with include_self (floor division for int64); amax/amin propagate
        NaN.  ``index`` is int64 of self's ndim, no larger than src, nor
        than self outside dim."""
        op, dim = _check_reduce("scatter_reduce_", self, dim, index, src,
                                reduce, include_self)
        if dim is None:
            return self
        return _scatter_reduce(self, dim, index, src, op, include_self,
                               "scatter_reduce_", True)

    def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
        """``scatter_reduce_`` on a copy."""
        op, dim = _check_reduce("scatter_reduce", self, dim, index, src,
                                reduce, include_self)
        if dim is None:
            return self.clone()
        return _scatter_reduce(self, dim, index, src, op, include_self,
                               "scatter_reduce", False)

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
        if index.numel() and not (_mode.enabled and (
                self.requires_grad or source.requires_grad)):
            # the scatter kernel over a stride-0 view of the index adds
            # whole slices (4x the advanced-index plan along a middle dim)
            shape = [1] * self.ndim
            shape[dim] = index.shape[0]
            return reduce_into(self, dim,
                               index.reshape(shape).expand(*source.shape),
                               source, "sum", True, "index_add_")
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
