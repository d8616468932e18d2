"""``Tensor.tril``/``triu`` (and in place), ``roll``, ``movedim``/
``moveaxis``, ``repeat_interleave``, ``diag``, ``diagonal`` (a strided
view), ``diag_embed``, ``outer`` and ``addmm``;
and the functions ``hstack``, ``vstack``, ``dstack``, ``atleast_1d/2d/3d``,
``meshgrid`` and ``broadcast_tensors``.  Each is a view, a masked fill,
an index read, ``cat`` or ``matmul``, so autograd flows through the ops
they are made of.  PyTorch's signatures and argument errors.  A mixin of
``Tensor``.

>>> import ampc
>>> ampc.arange(5).roll(2)
tensor([3, 4, 0, 1, 2])
"""
import operator
import warnings

import numpy as np

from . import _C
from ._dtype_device import _pybool, _wrap_dim, int64
from ._tensor_args import _TB, _check_number, _check_tensor
from ._tensor_more import _autocast, _dev
from .autograd import views as _views
from .autograd.grad_mode import _mode as _ag_mode

__all__ = ["hstack", "vstack", "dstack", "atleast_1d", "atleast_2d",
           "atleast_3d", "meshgrid", "broadcast_tensors", "addmm"]


def _int(fn, arg, v):
    if v.__class__ is _pybool or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}(): argument '{arg}' must be int, not "
                        f"{type(v).__name__}")
    return operator.index(v)


def _ints(fn, arg, v):
    """An int or a sequence of ints as a tuple."""
    if isinstance(v, (tuple, list)):
        return tuple(_int(fn, arg, i) for i in v)
    return (_int(fn, arg, v),)


def _tri_drop(fn, t, diagonal, lower):
    """True where tril (lower) / triu zeroes an element of t's last two
    dims: col > row + diagonal (tril), col < row + diagonal (triu); one
    broadcast compare of a row and a column of indices."""
    if t.ndim < 2:
        raise RuntimeError(f"{fn}: input tensor must have at least 2 "
                           "dimensions")
    k = _int(fn, "diagonal", diagonal)
    n, m = t.shape[-2], t.shape[-1]
    rows = _C.arange(k, n + k, 1, int64, _dev(t))._view((n, 1))
    cols = _C.arange(0, m, 1, int64, _dev(t))._view((1, m))
    return _C.compare("gt" if lower else "lt", cols, rows)


class _TensorLayout:

    def tril(self, diagonal=0):
        """The lower triangle of the last two dims (col - row <=
        diagonal), zeros elsewhere."""
        return self.masked_fill(_tri_drop("tril", self, diagonal, True), 0)

    def triu(self, diagonal=0):
        """The upper triangle of the last two dims (col - row >=
        diagonal), zeros elsewhere."""
        return self.masked_fill(_tri_drop("triu", self, diagonal, False), 0)

    def tril_(self, diagonal=0):
        return self.masked_fill_(_tri_drop("tril_", self, diagonal, True),
                                 0)

    def triu_(self, diagonal=0):
        return self.masked_fill_(_tri_drop("triu_", self, diagonal, False),
                                 0)

    def roll(self, shifts, dims=None):
        """Elements shifted by ``shifts`` along ``dims`` (ints or tuples of
        the same length), wrapping around; with dims None, over the
        flattened tensor (shape kept)."""
        shifts = _ints("roll", "shifts", shifts)
        if dims is None or (isinstance(dims, (tuple, list)) and not dims):
            if len(shifts) != 1:
                raise RuntimeError(
                    f"roll(): shifts and dimensions must align. shifts: "
                    f"{len(shifts)}, dims:0")
            return self.flatten().roll(shifts, 0).view(self.shape)
        dims = _ints("roll", "dims", dims)
        if len(shifts) != len(dims):
            raise RuntimeError(
                f"roll(): shifts and dimensions must align. shifts: "
                f"{len(shifts)}, dims:{len(dims)}")
        out = self
        for s, d in zip(shifts, dims):
            d = _wrap_dim("roll", d, self.ndim)
            n = self.shape[d] if self.ndim else 1
            s = s % n if n else 0
            if s and self.ndim:
                from ._creation import cat
                out = cat([out.narrow(d, n - s, s),
                           out.narrow(d, 0, n - s)], d)
        return out if out is not self else self.clone()

    def movedim(self, source, destination):
        """The dims ``source`` moved to positions ``destination`` (ints or
        tuples of the same length), the others keeping their order (a
        view)."""
        src = _ints("movedim", "source", source)
        dst = _ints("movedim", "destination", destination)
        if len(src) != len(dst):
            raise RuntimeError(
                f"movedim: Invalid source or destination dims: source "
                f"({list(src)} dims) should contain the same number of dims "
                f"as destination ({list(dst)} dims)")
        nd = self.ndim
        src = [_wrap_dim("movedim", d, nd, "source") for d in src]
        dst = [_wrap_dim("movedim", d, nd, "destination") for d in dst]
        for name, ds, given in (("source", src, source),
                                ("destination", dst, destination)):
            if len(set(ds)) != len(ds):
                raise RuntimeError(f"movedim: repeated dim in `{name}` "
                                   f"({list(_ints('movedim', name, given))})")
        if nd == 0:
            return self.view(())
        order = [None] * nd
        for s, d in zip(src, dst):
            order[d] = s
        rest = iter(d for d in range(nd) if d not in src)
        order = [next(rest) if o is None else o for o in order]
        return self.permute(order)

    moveaxis = movedim

    def repeat_interleave(self, repeats=None, dim=None, *, output_size=None):
        """Each element repeated ``repeats`` times (an int, or an int64
        tensor of one count per element along ``dim``), consecutively;
        with dim None over the flattened tensor.  ``x.repeat_interleave()``
        of an int64 tensor of counts gives the indices repeated so."""
        if repeats is None:
            return _repeat_counts(self, output_size)
        x = self.flatten() if dim is None else self
        d = 0 if dim is None else _wrap_dim("repeat_interleave", dim,
                                            self.ndim)
        if x.ndim == 0:
            x = x.reshape(1)
        if isinstance(repeats, _TB):
            idx = _repeat_counts(repeats, output_size, x.shape[d])
            return x.index_select(d, idx)
        r = _int("repeat_interleave", "repeats", repeats)
        if r < 0:
            raise RuntimeError("repeat_interleave(): Repeats must be "
                               "non-negative")
        shape = list(x.shape)
        big = x.unsqueeze(d + 1).expand(*shape[:d + 1], r, *shape[d + 1:])
        shape[d] *= r
        return big.reshape(*shape)

    def diag(self, diagonal=0):
        """A 1-D tensor as the ``diagonal``-th diagonal of a square
        matrix; a 2-D tensor's ``diagonal``-th diagonal as a 1-D tensor."""
        k = _int("diag", "diagonal", diagonal)
        if self.ndim == 1:
            n = self.shape[0]
            m = n + abs(k)
            at = _C.arange(0, n, 1, int64, _dev(self))
            out = self.new_zeros(m, m)
            rows, cols = (at, at + k) if k >= 0 else (at - k, at)
            out[rows, cols] = self
            return out
        if self.ndim != 2:
            raise RuntimeError("diag(): Supports 1D or 2D tensors. Got "
                               f"{self.ndim}D")
        n, m = self.shape
        r0, c0 = (0, k) if k >= 0 else (-k, 0)
        length = max(0, min(n - r0, m - c0))
        at = _C.arange(0, length, 1, int64, _dev(self))
        return self[at + r0, at + c0]

    def diagonal(self, offset=0, dim1=0, dim2=1):
        """The ``offset``-th diagonal over dims dim1 and dim2, as a view:
        those dims dropped and the diagonal appended as the last dim.

        >>> import ampc
        >>> ampc.arange(6.0).view(2, 3).diagonal(1)
        tensor([1., 5.])
        """
        k = _int("diagonal", "offset", offset)
        d1, d2 = _diag_dims("diagonal", dim1, dim2, self.ndim)
        if _ag_mode.enabled and self.requires_grad:
            return _views.Diagonal.apply(self, k, d1, d2)
        return _views.diagonal_view(self, k, d1, d2)

    def diag_embed(self, offset=0, dim1=-2, dim2=-1):
        """A tensor with one more dim whose ``offset``-th diagonal over
        dims dim1 and dim2 holds the last dim of self, zeros elsewhere.

        >>> import ampc
        >>> ampc.tensor([1.0, 2.0]).diag_embed()
        tensor([[1., 0.],
                [0., 2.]])
        """
        k = _int("diag_embed", "offset", offset)
        d1, d2 = _diag_dims("diag_embed", dim1, dim2, self.ndim + 1)
        n = self.shape[-1] + abs(k)
        shape = list(self.shape[:-1])
        for d in sorted((d1, d2)):
            shape.insert(d, n)
        if _ag_mode.enabled and self.requires_grad:
            return _views.DiagEmbed.apply(self, tuple(shape), k, d1, d2)
        return _views.embed_diagonal(self, shape, k, d1, d2)

    def outer(self, vec2):
        """The outer product self[i] * vec2[j] of two 1-D tensors."""
        _check_tensor("outer", "vec2", vec2)
        for name, v in (("self", self), ("vec2", vec2)):
            if v.ndim != 1:
                raise RuntimeError(f"outer: Expected 1-D argument {name}, "
                                   f"but got {v.ndim}-D")
        return self.unsqueeze(1) * vec2.unsqueeze(0)

    ger = outer

    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        """beta * self + alpha * (mat1 @ mat2); with beta 0 self is not
        read (its NaNs do not propagate), as in PyTorch."""
        return addmm(self, mat1, mat2, beta=beta, alpha=alpha)


def _diag_dims(fn, dim1, dim2, ndim):
    d1 = _wrap_dim(fn, dim1, ndim, "dim1")
    d2 = _wrap_dim(fn, dim2, ndim, "dim2")
    if d1 == d2:
        raise RuntimeError(f"{fn}(): diagonal dimensions cannot be "
                           f"identical {dim1}, {dim2}")
    return d1, d2


def _repeat_counts(repeats, output_size, size=None):
    """The indices 0, 1, ... each repeated repeats[i] times (int64)."""
    if repeats.dtype is not int64 or repeats.ndim > 1:
        raise RuntimeError("repeat_interleave(): repeats must be a 0-dim or "
                           "1-dim int64 tensor")
    counts = np.asarray(repeats.detach().cpu().tolist(),
                        dtype=np.int64).reshape(-1)
    if size is not None and counts.size == 1:
        counts = np.repeat(counts, size)
    if size is not None and counts.size != size:
        raise RuntimeError(
            "repeat_interleave(): repeats must have the same size as input "
            f"along dim, but got repeats.size(0) = {counts.size} and "
            f"input.size(0) = {size}")
    if (counts < 0).any():
        raise RuntimeError("repeat_interleave(): repeats can not be "
                           "negative")
    idx = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    if output_size is not None and output_size != idx.size:
        raise RuntimeError(
            "repeat_interleave(): allocated size does not match required "
            f"size ({output_size} vs {idx.size})")
    from ._creation import tensor
    return tensor(idx, device=_dev(repeats))


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), mat1 and mat2 matrices and
    input broadcastable to their product (autocast lowers all three, as
    PyTorch's ``addmm``)."""
    for name, t in (("input", input), ("mat1", mat1), ("mat2", mat2)):
        _check_tensor("addmm", name, t)
    for name, t in (("mat1", mat1), ("mat2", mat2)):
        if t.ndim != 2:
            raise RuntimeError(f"addmm(): {name} must be a matrix, got "
                               f"{t.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"addmm(): mat1 and mat2 shapes cannot be multiplied "
            f"({mat1.shape[0]}x{mat1.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})")
    beta = _check_number("addmm", "beta", beta, False)
    alpha = _check_number("addmm", "alpha", alpha, False)
    input, mat1, mat2 = _autocast("addmm", input, mat1, mat2)
    prod = mat1.matmul(mat2)
    if alpha != 1:
        prod = prod * alpha
    shape = tuple(prod.shape)
    if beta == 0:
        return prod
    term = input if beta == 1 else input * beta
    out = term + prod
    if tuple(out.shape) != shape:
        raise RuntimeError(
            f"addmm(): the input of shape {list(input.shape)} does not "
            f"broadcast to the product's shape {list(shape)}")
    return out


# ----------------------------------------------------------------------------
# functions over several tensors


def _tensors(fn, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, _TB):
            raise TypeError(f"{fn}(): expected Tensor as element {i} in "
                            f"argument 0, but got {type(t).__name__}")
    return tuple(tensors)


def atleast_1d(*tensors):
    """Each tensor viewed with at least 1 dim (a tuple for several)."""
    out = tuple(t.reshape(1) if t.ndim == 0 else t
                for t in _tensors("atleast_1d", tensors))
    return out[0] if len(out) == 1 else out


def atleast_2d(*tensors):
    """Each tensor viewed with at least 2 dims ((n,) -> (1, n))."""
    out = tuple(t.reshape(1, -1) if t.ndim < 2 else t
                for t in _tensors("atleast_2d", tensors))
    return out[0] if len(out) == 1 else out


def atleast_3d(*tensors):
    """Each tensor viewed with at least 3 dims ((n,) -> (1, n, 1),
    (m, n) -> (m, n, 1))."""
    def one(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        return t.unsqueeze(-1) if t.ndim == 2 else t
    out = tuple(one(t) for t in _tensors("atleast_3d", tensors))
    return out[0] if len(out) == 1 else out


def _stack_along(fn, tensors, lift, dim):
    from ._creation import cat
    if isinstance(tensors, _TB) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{fn}(): argument 'tensors' must be a tuple or "
                        f"list of Tensors, but got {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError(f"{fn} expects a non-empty TensorList")
    lifted = lift(*_tensors(fn, tensors))
    lifted = lifted if isinstance(lifted, tuple) else (lifted,)
    return cat(list(lifted), dim)


def hstack(tensors):
    """Tensors joined column-wise: along dim 0 for 1-D tensors, else 1."""
    dim = 0 if isinstance(tensors, (list, tuple)) and tensors and \
        isinstance(tensors[0], _TB) and tensors[0].ndim <= 1 else 1
    return _stack_along("hstack", tensors, atleast_1d, dim)


def vstack(tensors):
    """Tensors joined row-wise (1-D tensors as rows)."""
    return _stack_along("vstack", tensors, atleast_2d, 0)


def dstack(tensors):
    """Tensors joined depth-wise, along dim 2 (after atleast_3d)."""
    return _stack_along("dstack", tensors, atleast_3d, 2)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views)."""
    from .nn._losses import _broadcast_shape
    tensors = _tensors("broadcast_tensors", tensors)
    shape = ()
    for t in tensors:
        shape = _broadcast_shape("broadcast_tensors", shape, t.shape)
    return tuple(t.expand(*shape) for t in tensors)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 1-D (or 0-d) tensors: with indexing 'ij' output
    i varies along dim i; 'xy' swaps the first two dims (Cartesian).
    Without ``indexing`` it is 'ij', with PyTorch's warning."""
    tensors = _tensors("meshgrid", tensors)
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be "
                      "required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError('meshgrid: indexing must be one of "xy" or '
                           f'"ij", but received: {indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError("meshgrid: Expected 0D or 1D tensor in the "
                               "tensor list but got: " + repr(t.ndim) + "D")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the "
                               "same dtype")
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = [t.shape[0] for t in flat]
    nd = len(flat)
    out = []
    for i, t in enumerate(flat):
        view = [1] * nd
        view[i] = shape[i]
        out.append(t.reshape(*view).expand(*shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)
