"""Advanced indexing, with PyTorch's rules: an index that holds an int64 or
bool tensor, a list or a NumPy array (``x[idx]``, ``x[mask]``,
``x[:, [0, 2]]``, ``x[rows, cols] = v``).

The ints, slices, ``None`` and ``...`` of the index are applied first, as a
view; a bool mask becomes the int64 coordinates of its true elements
(``nonzero``), one index tensor per dim it covers; the index tensors are
broadcast together to one shape B, whose dims replace the indexed ones in
the result where those were next to each other, and lead the result
otherwise.  ``IndexPlan`` holds that decision; ``_C.index_gather`` and
``_C.index_put_`` do the reading and writing with the indexed dims moved
first (a permuted view, nothing copied).

>>> import ampc
>>> x = ampc.arange(12).reshape(3, 4)
>>> x[[2, 0], 1:3]
tensor([[ 9, 10],
        [ 1,  2]])
>>> x[x > 8]
tensor([ 9, 10, 11])
"""
import warnings

import numpy as np

from . import _C
from ._dtype_device import _wrap_dim, bool_, float32, int64
from .autograd.function import _dev_str as _dev

_TB = _C.TensorBase
_LOW = ("float16", "bfloat16")


_SEQUENCE_AS_TUPLE = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated "
    "and will be changed in pytorch 2.9; use x[tuple(seq)] instead of "
    "x[seq]. In pytorch 2.9 this will be interpreted as tensor index, "
    "x[torch.tensor(seq)], which will result either in an error or a "
    "different result")


def as_tuple(index):
    """PyTorch's (and old NumPy's) reading of a short list that holds a
    sequence, tensor, slice, None or ... as a tuple (``x[[[0, 1]]]`` is
    ``x[[0, 1],]``), with PyTorch's deprecation warning; anything else
    unchanged."""
    if index.__class__ is not list or len(index) >= 32:
        return index
    for i in index:
        if i is None or i is Ellipsis or isinstance(
                i, (_TB, list, tuple, np.ndarray, slice)):
            warnings.warn(_SEQUENCE_AS_TUPLE, UserWarning, stacklevel=3)
            return tuple(index)
    return index


def is_advanced(index):
    """Whether ``index`` has an item only advanced indexing handles."""
    items = index if index.__class__ is tuple else (index,)
    for i in items:
        if isinstance(i, _TB):
            if i.ndim or i.dtype is bool_ or i.dtype.is_floating_point:
                return True
        elif isinstance(i, (list, np.ndarray, bool)) or (
                i.__class__ is tuple and index.__class__ is tuple):
            return True
    return False


def merge_mask_dims(t, index):
    """(t, index) for ``t[mask]`` with a bool mask over several leading
    dims that t can view as one: the view and the flattened mask, so the
    coordinates are one row of flat positions; else unchanged."""
    mask = index[0] if index.__class__ is tuple and len(index) == 1 \
        else index
    if not isinstance(mask, _TB) or mask.dtype is not bool_ or \
            mask.ndim < 2 or \
            tuple(mask.shape) != tuple(t.shape[:mask.ndim]):
        return t, index
    try:
        flat = t.view(-1, *t.shape[mask.ndim:])
    except RuntimeError:            # (those dims do not merge in place)
        return t, index
    return flat, mask.reshape(-1)


def fill_by_mask(t, index, value):
    """``t[mask] = value`` for one bool mask over t's leading dims and a
    number or 0-d tensor value, as ``masked_fill_`` (one pass, and on CUDA
    no read of the count); False when the index or value is of another
    kind."""
    mask = index[0] if index.__class__ is tuple and len(index) == 1 \
        else index
    if not isinstance(mask, _TB) or mask.dtype is not bool_ or \
            mask.ndim == 0 or (isinstance(value, _TB) and value.ndim) or \
            tuple(mask.shape) != tuple(t.shape[:mask.ndim]):
        return False
    if mask.device != t.device:
        mask = mask.to(t.device)
    t.masked_fill_(mask.reshape(*mask.shape, *[1] * (t.ndim - mask.ndim)),
                   value)
    return True


def _as_index_tensor(i, device):
    """A list or array item as a tensor on ``device``; a tensor there."""
    from ._creation import tensor
    if not isinstance(i, _TB):
        try:
            i = tensor(i)
        except (TypeError, ValueError) as e:
            raise IndexError(
                "only integers, slices, None, ..., and int64 or bool "
                f"tensors, lists and arrays are valid indices ({e})") from None
        if i.numel() == 0:
            i = i.long()            # [] indexes nothing, as in PyTorch
    if i.dtype is not bool_ and i.dtype is not int64:
        raise IndexError(
            "tensors used as indices must be long or bool tensors, got "
            f"{i.dtype!r}")
    return i if i.device == device else i.to(device)


def _mask_shape_error(mask, t, at):
    return IndexError(
        f"The shape of the mask {list(mask.shape)} at index {at} does not "
        "match the shape of the indexed tensor "
        f"{list(t.shape[at:at + mask.ndim])} at index {at}")


def broadcast_shape(shapes):
    """The broadcast of ``shapes`` (PyTorch's rule), or IndexError."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for k, n in enumerate(s, nd - len(s)):
            if n != out[k] and out[k] != 1 and n != 1:
                raise IndexError(
                    "shape mismatch: indexing tensors could not be broadcast "
                    "together with shapes "
                    + ", ".join(str(list(x)) for x in shapes))
            if n != 1:
                out[k] = n
    return tuple(out)


class IndexPlan:
    """How ``t[index]`` reads and writes: the basic part, the view dims the
    index tensors cover, their rows, and where the broadcast dims go."""

    def __init__(self, t, index, name="index", wrap=True):
        self.name = name            # the user's op, for errors
        self.wrap = wrap            # negative indices count from the end
        items = list(index) if index.__class__ is tuple else [index]
        items = [i if i is None or i is Ellipsis or isinstance(i, slice)
                 or _is_int(i) else _as_index_tensor(i, t.device)
                 for i in items]
        consumed = sum(i.ndim if _is_mask(i) else 1 for i in items
                       if i is not None and i is not Ellipsis)
        if consumed > t.ndim:
            raise IndexError(
                f"too many indices for tensor of dimension {t.ndim}")
        if sum(i is Ellipsis for i in items) > 1:
            raise IndexError("an index can only have a single ellipsis "
                             "('...')")
        basic, dims, tensors, src_dims = [], [], [], []
        vdim = sdim = 0             # the next dim of the view, of t
        for i in items:
            if i is Ellipsis:
                n = t.ndim - consumed
                basic += [slice(None)] * n
                vdim += n
                sdim += n
            elif i is None:
                basic.append(None)
                vdim += 1
            elif isinstance(i, slice):
                basic.append(i)
                vdim += 1
                sdim += 1
            elif _is_int(i):
                basic.append(_int(i))
                sdim += 1
            elif i.dtype is bool_ and i.ndim == 0:
                # a new dim of size 1, kept (True) or emptied (False)
                basic.append(None)
                dims.append(vdim)
                src_dims.append(vdim)
                tensors.append(_C.full((1 if i.item() else 0,), 0, int64,
                                       _dev(t)))
                vdim += 1
            elif i.dtype is bool_:
                if tuple(i.shape) != tuple(t.shape[sdim:sdim + i.ndim]):
                    raise _mask_shape_error(i, t, sdim)
                coords = _C.nonzero(i)
                for c in range(i.ndim):
                    basic.append(slice(None))
                    dims.append(vdim + c)
                    src_dims.append(sdim + c)
                    tensors.append(coords[:, c])
                vdim += i.ndim
                sdim += i.ndim
            else:
                basic.append(slice(None))
                dims.append(vdim)
                src_dims.append(sdim)
                tensors.append(i)
                vdim += 1
                sdim += 1
        self.basic = tuple(basic)
        self.dims = dims
        self.src_dims = tuple(src_dims)
        self.bshape = broadcast_shape([tuple(x.shape) for x in tensors])
        n = 1
        for s in self.bshape:
            n *= s
        self.n = n
        if len(tensors) == 1:
            self.rows = tensors[0].reshape(1, n)
        else:
            self.rows = _C.cat([x.expand(*self.bshape).reshape(1, n)
                                for x in tensors], 0)
        view_shape = t._getitem(self.basic).shape
        self.rest = [d for d in range(len(view_shape)) if d not in dims]
        self.rest_shape = tuple(view_shape[d] for d in self.rest)
        # the result: B in place of adjacent indexed dims, else first
        adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
        self.lead = dims[0] if adjacent else 0

    def _moved(self, t):
        """``t`` with the basic index applied and the indexed dims moved
        first (a view)."""
        return t._getitem(self.basic).permute(*self.dims, *self.rest)

    def result_shape(self):
        r, lead = self.rest_shape, self.lead
        return r[:lead] + self.bshape + r[lead:]

    def _as_rows(self, r, view=False):
        """A tensor of result_shape() as (n, rest...): a view when
        ``view`` (the broadcast dims of ``r`` must then merge), else a view
        where the broadcast dims allow one."""
        nb, lead = len(self.bshape), self.lead
        order = [*range(lead, lead + nb), *range(lead),
                 *range(lead + nb, r.ndim)]
        r = r.permute(*order)
        shape = (self.n, *self.rest_shape)
        return r.view(*shape) if view else r.reshape(*shape)

    def gather(self, t):
        """``t[index]`` as a new tensor (no autograd)."""
        out = _C.empty(self.result_shape(), t.dtype, _dev(t))
        _C.index_gather(self._moved(t), self.rows,
                        self._as_rows(out, view=True),
                        dims=self.src_dims, name=self.name,
                        wrap=self.wrap)
        return out

    def put(self, t, value, accumulate=False):
        """``t[index] = value`` (or ``+=`` with ``accumulate``, where a
        repeated index adds each value) in place, no autograd; ``value`` a
        number or a tensor broadcastable to the result's shape."""
        dst = self._moved(t)
        shape = self.result_shape()
        if not isinstance(value, _TB):
            value = _C.full((), value, t.dtype, _dev(t))
        elif value.dtype is not t.dtype or value.device != t.device:
            value = value.to(device=t.device, dtype=t.dtype)
        while value.ndim > len(shape) and value.shape[0] == 1:
            value = value.squeeze(0)       # (leading 1s go, as in PyTorch)
        try:
            vals = self._as_rows(value.expand(*shape))
        except RuntimeError:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(value.shape)} "
                "cannot be broadcast to indexing result of shape "
                f"{list(shape)}") from None
        if accumulate and t.dtype.name in _LOW:
            # 16-bit sums are formed in float32, rounded once
            wide = _C.cast(dst, float32)
            _C.index_put_(wide, self.rows, _C.cast(vals, float32), True,
                          dims=self.src_dims, name=self.name,
                        wrap=self.wrap)
            _C.copy_(dst, wide)
        else:
            _C.index_put_(dst, self.rows, vals, accumulate,
                          dims=self.src_dims, name=self.name,
                        wrap=self.wrap)
        return t

    def scatter_add(self, g, in_shape):
        """A zero tensor of ``in_shape`` with ``g`` (of result_shape())
        added at the index: the gradient of ``gather``."""
        z = _C.full(tuple(in_shape), 0,
                    float32 if g.dtype.name in _LOW else g.dtype, _dev(g))
        self.put(z, g, accumulate=True)
        return z if z.dtype is g.dtype else _C.cast(z, g.dtype)


def _is_int(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, bool) or (
        isinstance(i, _TB) and i.ndim == 0 and i.dtype is int64)


def _int(i):
    return int(i.item()) if isinstance(i, _TB) else int(i)


def _is_mask(i):
    return isinstance(i, _TB) and i.dtype is bool_


class _TensorIndexing:
    """``Tensor``'s selection methods built on advanced indexing (a mixin,
    as ``_TensorOps``)."""

    def nonzero(self, *, as_tuple=False):
        """The int64 coordinates of the non-zero elements, one row each
        (``as_tuple=True``: one 1-D tensor per dim), in order.  On CUDA it
        reads the count back, a host sync."""
        mask = self if self.dtype is bool_ else (self != 0)
        coords = _C.nonzero(mask)
        if not as_tuple:
            return coords
        if self.ndim == 0:
            return (_C.full((coords.shape[0],), 0, int64, _dev(self)),)
        return tuple(coords[:, d] for d in range(self.ndim))

    def argwhere(self):
        """``nonzero()``: one row of coordinates per non-zero element."""
        return self.nonzero()

    def masked_select(self, mask):
        """The elements where the bool ``mask`` (broadcast with self) is
        true, as a 1-D tensor."""
        if not isinstance(mask, _TB) or mask.dtype is not bool_:
            raise TypeError("masked_select(): expected mask to be a bool "
                            "tensor")
        shape = broadcast_shape([tuple(self.shape), tuple(mask.shape)])
        return read(self.expand(*shape), (mask.expand(*shape),),
                    "masked_select")

    def narrow(self, dim, start, length):
        """The view of ``length`` entries from ``start`` along ``dim``."""
        if self.ndim == 0:
            raise RuntimeError("narrow() cannot be applied to a 0-dim "
                               "tensor.")
        dim = _wrap_dim("narrow", dim, self.ndim)
        size = self.shape[dim]
        if not -size <= start <= size:
            raise IndexError(
                f"narrow(): start out of range (expected to be in range of "
                f"[{-size}, {size}], but got {start})")
        if length < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        start = start + size if start < 0 else start
        if start + length > size:
            raise RuntimeError(
                f"narrow(): start ({start}) + length ({length}) exceeds "
                f"dimension size ({size}).")
        return self[(slice(None),) * dim + (slice(start, start + length),)]

    def index_select(self, dim, index):
        """The entries ``index`` (a 1-D int64 tensor) along ``dim``."""
        dim = _wrap_dim("index_select", dim, self.ndim)
        if not isinstance(index, _TB) or index.dtype is not int64 or \
                index.ndim > 1:
            raise IndexError("index_select(): expected index to be a 0-d or "
                             "1-D int64 tensor")
        src = self.reshape(1) if self.ndim == 0 else self
        out = read(src, (slice(None),) * dim + (index.reshape(-1),),
                   "index_select", wrap=False)
        return out.reshape(()) if self.ndim == 0 else out

    def gather(self, dim, index):
        """``out[i][j] = self[index[i][j]][j]`` for dim 0 (and so on): the
        values along ``dim`` at ``index``, an int64 tensor of self's ndim
        and, in the other dims, no larger; out has index's shape."""
        found = along_dim("gather", self, dim, index)
        if found is None:
            return _C.full(tuple(index.shape), 0, self.dtype, _dev(self))
        return read(*found, "gather", wrap=False).reshape(*index.shape)

    def index_put_(self, indices, values, accumulate=False):
        """``self[indices] = values`` for a tuple of index tensors (``+=``
        with ``accumulate``: a repeated index adds each of its values)."""
        if not isinstance(indices, tuple):
            raise TypeError("index_put_(): expected indices to be a tuple "
                            "of tensors")
        return put(self, tuple(slice(None) if i is None else i
                               for i in indices), values, accumulate)

    def index_put(self, indices, values, accumulate=False):
        """``index_put_`` on a copy."""
        return self.clone().index_put_(indices, values, accumulate)


def read(t, index, name, wrap=True):
    """``t[index]`` as a new tensor, with autograd; ``name`` is the user's
    op, for errors; ``wrap=False``: a negative index is out of bounds (as
    in gather)."""
    from .autograd import IndexGather, _mode
    if not is_advanced(index):
        return t[index].clone()         # (ints only: a 0-d take)
    t, index = merge_mask_dims(t, index)
    plan = IndexPlan(t, index, name, wrap)
    if _mode.enabled and t.requires_grad:
        return IndexGather.apply(t, plan)
    return plan.gather(t)


def put(t, index, values, accumulate=False, name="index_put_", wrap=True):
    """``t[index] = values``, or ``+=`` with ``accumulate`` (a repeated
    index adds each of its values), with autograd; returns t.  ``name`` is
    the user's op, for errors; ``wrap=False``: a negative index is out of
    bounds (as in scatter)."""
    from .autograd import IndexAdd, IndexPut, _mode, inplace
    if not is_advanced(index):
        # (ints and 0-d int tensors only, as index_put_ may get: a basic
        # index names each element once, so an add is a plain write)
        t[index] = t[index] + values if accumulate else values
        return t
    if not accumulate and fill_by_mask(t, index, values):
        return t
    plan = IndexPlan(t, index, name, wrap)
    if _mode.enabled and (t.requires_grad or (
            isinstance(values, _TB) and values.requires_grad)):
        return inplace(t, IndexAdd if accumulate else IndexPut, plan, values)
    return plan.put(t, values, accumulate)


def _dims(t):
    """t's shape, a 0-d tensor counted as one element in one dim (as
    PyTorch's gather/scatter checks count it)."""
    return tuple(t.shape) or (1,)


def check_along_dim(fn, t, dim, index, src=None):
    """PyTorch's checks of gather's and scatter's arguments: ``index`` an
    int64 tensor of t's ndim, no larger than t outside ``dim`` and, for
    scatter (``src`` given), of src's ndim and no larger than src.  Returns
    the dim (wrapped), or None for an empty index (PyTorch checks no
    shapes then)."""
    dim = _wrap_dim(fn, dim, t.ndim)
    if not isinstance(index, _TB) or index.dtype is not int64:
        raise RuntimeError(f"{fn}(): Expected dtype int64 for index")
    if index.numel() == 0:
        return None
    ts, ix = _dims(t), _dims(index)
    if len(ix) != len(ts):
        raise RuntimeError(
            f"{fn}(): Index tensor must have the same number of dimensions "
            f"as {'self' if src is not None else 'input'} tensor")
    ss = None if src is None else _dims(src)
    if ss is not None and len(ss) != len(ix):
        raise RuntimeError(
            f"{fn}(): Index tensor must have the same number of dimensions "
            "as src tensor")
    for d in range(len(ts)):
        small = (d == dim or ix[d] <= ts[d]) and (
            ss is None or ix[d] <= ss[d])
        if small:
            continue
        if src is None:
            raise RuntimeError(
                f"{fn}(): Size does not match at dimension {d} expected "
                f"index {list(index.shape)} to be no larger than self "
                f"{list(t.shape)} apart from dimension {dim}")
        raise RuntimeError(
            f"{fn}(): Expected index {list(index.shape)} to be no larger "
            f"than self {list(t.shape)} apart from dimension {dim} and to "
            f"be no larger size than src {list(src.shape)}")
    return dim


def along_dim(fn, t, dim, index, src=None):
    """(t, the index tuple) that pairs each element of ``index`` with its
    position along ``dim`` and its own coordinates elsewhere: gather's, and
    scatter's, after ``check_along_dim``.  A 0-d t comes back as a
    1-element view; None for an empty index."""
    dim = check_along_dim(fn, t, dim, index, src)
    if dim is None:
        return None
    if t.ndim == 0:
        return t.reshape(1), (index.reshape(-1),)
    items = []
    for d in range(t.ndim):
        if d == dim:
            items.append(index)
            continue
        along = [1] * t.ndim
        along[d] = index.shape[d]
        items.append(_arange(index.shape[d], t).reshape(*along))
    return t, tuple(items)


def _arange(n, like):
    from ._creation import arange
    return arange(n, device=like.device)
