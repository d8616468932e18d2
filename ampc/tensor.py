"""``ampc.Tensor``: the user-facing tensor, a Python subclass of the C
``_C.TensorBase``.

C owns storage, dtypes, views and the kernels; this class adds PyTorch's
method names, argument checks, operators and autograd.  Every op checks
first, cheaply, whether autograd must record it (grad mode on and an input
requires grad); when not, it calls ``_C`` directly, so that a small
element-wise op costs little more than the C call.

>>> import ampc
>>> x = ampc.tensor([[1.0, 2.0], [3.0, 4.0]])
>>> (x * 2 + 1).sum(dim=0)
tensor([10., 14.])
>>> x.t().contiguous().view(-1)
tensor([1., 3., 2., 4.])
"""
import collections
import copy as _copy
import weakref

import numpy as np

from . import _C
from . import _indexing, _scatter
from . import autograd as _ag
from ._dtype_device import (
    _device_of, _device_str, _pybool, _wrap_dim, bfloat16, bool_, float16,
    float32, int64,
)
from ._tensor_args import (  # noqa: F401  (some re-exported)
    _SCALARS, _TB, _c_array, _check_number, _check_tensor, _coerce_scalar,
    _dims_arg, _raw_to_device, _shape_arg,
)
from ._tensor_convert import _TensorConvert, _parse_to  # noqa: F401
from ._tensor_close import _TensorClose
from ._tensor_extra import _TensorExtra
from ._tensor_layout import _TensorLayout
from ._tensor_logic import _TensorLogic
from ._tensor_more import _TensorMore
from ._tensor_ops import _TensorOps
from ._tensor_shape import _TensorShape
from ._tensor_sort import _TensorSortScan
from ._tensor_select import _TensorSelect
from ._tensor_stats import _TensorStats
from ._random_more import _TensorRandom
from .autograd.function import _fresh_grad_fn

_compare = _C.compare
_reduce = _C.reduce
_cast = _C.cast
_mode = _ag._mode
_autocast_active = _C.autocast_active
_inplace = _ag.inplace
_dev_str = _ag._dev_str
_pyint = int


# ----------------------------------------------------------------------------
# return types of max(dim) / min(dim), shaped like torch.return_types


def _return_type(name):
    base = collections.namedtuple(name, ["values", "indices"])

    def __repr__(self):
        return (f"ampc.return_types.{name}(\nvalues={self.values!r},\n"
                f"indices={self.indices!r})")

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__,
                                "__module__": "ampc.return_types"})


class return_types:
    """Namespace of the named tuples that max(dim)/min(dim), sort and
    topk return."""
    max = _return_type("max")
    min = _return_type("min")
    sort = _return_type("sort")
    topk = _return_type("topk")
    median = _return_type("median")
    kthvalue = _return_type("kthvalue")
    cummax = _return_type("cummax")
    cummin = _return_type("cummin")

# ----------------------------------------------------------------------------
# the Tensor class (its conversion methods come from _TensorConvert in
# _tensor_convert.py, its operators and element-wise methods from
# _TensorOps in _tensor_ops.py)


class Tensor(_TensorConvert, _TensorRandom, _TensorOps,
             _indexing._TensorIndexing, _scatter._TensorScatter, _TensorClose,
             _TensorLogic, _TensorStats, _TensorShape, _TensorSortScan,
             _TensorMore, _TensorLayout, _TensorExtra, _TensorSelect, _TB):
    """An n-dimensional array on a device, with a dtype, that autograd can
    differentiate through.  Make one with ``ampc.tensor``, ``ampc.zeros``
    and friends.

    >>> import ampc
    >>> t = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = (t * t).sum()
    >>> y.backward()
    >>> t.grad
    tensor([2., 4., 6.])
    """

    # NumPy defers binary operators to us (ndarray + Tensor -> Tensor
    # method), as with torch.
    __array_priority__ = 1000
    _tensor_hooks = None        # a leaf's register_hook hooks
    _post_accumulate_hooks = None

    def __new__(cls, *args, device=None):
        """PyTorch's legacy constructor: ``Tensor()`` is empty,
        ``Tensor(2, 3)`` uninitialised float32, ``Tensor([1, 2])`` float32
        data.  Prefer ``ampc.tensor`` / ``ampc.empty``."""
        from . import _creation
        if not args:
            t = _C.empty((0,), float32, _device_str("Tensor", device))
        elif len(args) == 1 and not isinstance(args[0], _pyint):
            t = _creation.tensor(args[0], dtype=float32, device=device)
        else:
            t = _creation.empty(*args, device=device)
        if cls is not Tensor:
            t.__class__ = cls
        return t

    @staticmethod
    def _make_subclass(cls, data, require_grad=False):
        """A tensor of class ``cls`` sharing ``data``'s storage, as a new
        leaf (what ``nn.Parameter`` is built from)."""
        _check_tensor("_make_subclass", "data", data)
        t = data._detach()
        t.__class__ = cls
        if require_grad:
            t.requires_grad = True
        return t

    # identity hashing, as torch (a tensor's == is element-wise); the C
    # slot, not a Python method: optimizers hash every parameter each step
    __hash__ = object.__hash__

    # -- properties ----------------------------------------------------------

    @property
    def device(self):
        """The tensor's ``ampc.device``."""
        return _device_of(self.device_type, self.device_index)

    @property
    def is_cuda(self):
        return self.device_type == "cuda"

    @property
    def is_cpu(self):
        return self.device_type == "cpu"

    @property
    def data(self):
        """The same values without autograd history (shares memory)."""
        return self._detach()

    @data.setter
    def data(self, value):
        """``t.data = other``: t now holds other's values, shape and dtype
        (sharing its memory), keeping its identity and autograd flags."""
        _check_tensor("data", "value", value)
        self._set_data(value)

    @property
    def T(self):
        """The tensor with its dimensions reversed."""
        return self.permute(tuple(range(self.ndim - 1, -1, -1)))

    def size(self, dim=None):
        """The shape (an ``ampc.Size``), or the size of one dimension."""
        if dim is None:
            return self.shape
        return self.shape[_wrap_dim("size", dim, self.ndim)] \
            if self.ndim else 1

    def dim(self):
        return self.ndim

    ndimension = dim

    def nelement(self):
        return self.numel()

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def type(self, dtype=None):
        """With no argument, the type name ('ampc.FloatTensor'); with a
        dtype, the tensor cast to it."""
        if dtype is None:
            return "ampc." + _ag._type_str(self)
        return self.to(dtype)

    # -- pickling and deep copies --------------------------------------------

    def __reduce_ex__(self, protocol):
        t = self._detach()
        dev = str(self.device)
        if t.device_type != "cpu":
            t = _raw_to_device(t, "cpu")
        if t.dtype is float16 or t.dtype is bfloat16:
            data = _C.to_bits(t._contiguous())
        else:
            data = t._numpy().copy()
        return (_rebuild_tensor,
                (data, t.dtype, dev, self.requires_grad and self.is_leaf))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) "
                "support the deepcopy protocol at the moment.  If you were "
                "attempting to deepcopy a module, this may be because of a "
                "torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        new = _cast(self, self.dtype)
        if type(self) is not Tensor:
            new.__class__ = type(self)
        new.requires_grad = self.requires_grad
        if self.grad is not None:
            new.grad = _copy.deepcopy(self.grad, memo)
        d = getattr(self, "__dict__", None)
        if d:
            new.__dict__.update(_copy.deepcopy(d, memo))
        memo[id(self)] = new
        return new

    # -- autograd ------------------------------------------------------------

    def backward(self, gradient=None, retain_graph=None, create_graph=False,
                 inputs=None):
        """Add d(self)/d(leaf) into every leaf's ``.grad``.  A tensor of
        more than one element needs ``gradient`` (same shape).

        >>> import ampc
        >>> x = ampc.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * 3).backward(ampc.ones(2))
        >>> x.grad
        tensor([3., 3.])
        """
        _ag.backward((self,), (gradient,), retain_graph, create_graph,
                     inputs)

    def detach(self):
        """A tensor with the same storage and no autograd history."""
        return self._detach()

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` in place (floating point tensors only);
        returns self."""
        if requires_grad.__class__ is not _pybool:
            raise TypeError(
                "requires_grad_(): argument 'requires_grad' must be a bool, "
                f"but got {type(requires_grad).__name__}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. "
                "If you want to use a computed variable in a subgraph that "
                "doesn't require differentiation use var_no_grad = "
                "var.detach().")
        self.requires_grad = requires_grad
        return self

    def retain_grad(self):
        """Keep ``.grad`` for this non-leaf tensor during backward."""
        if not self.requires_grad:
            raise RuntimeError(
                "can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None:
            return
        self._retains_grad = True
        node = self.grad_fn
        refs = node._retained
        if refs is None:
            refs = node._retained = []
        for r in refs:
            if r() is self:
                return
        refs.append(weakref.ref(self))

    @property
    def retains_grad(self):
        return _pybool(self._retains_grad) and self.grad_fn is not None

    def register_hook(self, hook):
        """Call ``hook(grad)`` each time backward computes this tensor's
        gradient; a tensor it returns (same shape, dtype and device) replaces
        the gradient.  A leaf's hooks run before ``.grad`` is accumulated; a
        non-leaf's see the gradient summed over all its uses.  Returns a
        handle whose ``remove()`` unregisters the hook.

        >>> import ampc
        >>> x = ampc.ones(2, requires_grad=True)
        >>> h = x.register_hook(lambda g: g * 10)
        >>> (x * 3).sum().backward()
        >>> x.grad
        tensor([30., 30.])
        >>> h.remove()
        """
        from .utils.hooks import add_hook  # (utils imports tensor)
        self._check_hookable()
        node = _fresh_grad_fn(self)
        return add_hook(self if node is None else node, "_tensor_hooks", hook)

    def _check_hookable(self):
        if not self.requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require "
                "gradient")

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after backward has accumulated into this
        leaf's ``.grad`` (not under ``autograd.grad``, which accumulates
        nothing): where an optimizer can step one parameter as soon as its
        gradient is ready.  Returns a handle whose ``remove()``
        unregisters it.

        >>> import ampc
        >>> w = ampc.ones(2, requires_grad=True)
        >>> h = w.register_post_accumulate_grad_hook(
        ...     lambda p: print(p.grad.tolist()))
        >>> (w * 3).sum().backward()
        [3.0, 3.0]
        """
        from .utils.hooks import add_hook  # (utils imports tensor)
        self._check_hookable()
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf "
                "tensors")
        return add_hook(self, "_post_accumulate_hooks", hook)

    # -- copies and views ----------------------------------------------------

    def clone(self):
        """A copy with its own (contiguous) storage; autograd flows
        through."""
        if _mode.enabled and self.requires_grad:
            return _ag.Clone.apply(self)
        return _cast(self, self.dtype)

    def contiguous(self):
        if self.is_contiguous():
            return self
        if _mode.enabled and self.requires_grad:
            return _ag.Contiguous.apply(self)
        return self._contiguous()

    def view(self, *shape):
        """A view with another shape (one size may be -1); the strides must
        allow it, else use reshape.

        >>> import ampc
        >>> ampc.arange(6).view(2, 3)
        tensor([[0, 1, 2],
                [3, 4, 5]])
        """
        shape = _shape_arg("view", shape)
        if _mode.enabled and self.requires_grad:
            return _ag.View.apply(self, shape)
        return self._view(shape)

    def view_as(self, other):
        _check_tensor("view_as", "other", other)
        return self.view(other.shape)

    def reshape(self, *shape):
        """Like view, but copies when the strides do not allow a view."""
        shape = _shape_arg("reshape", shape)
        if _mode.enabled and self.requires_grad:
            return _ag.Reshape.apply(self, shape)
        return self._reshape(shape)

    def reshape_as(self, other):
        _check_tensor("reshape_as", "other", other)
        return self.reshape(other.shape)

    def flatten(self, start_dim=0, end_dim=-1):
        """Merge dims start_dim..end_dim into one."""
        start = _wrap_dim("flatten", start_dim, self.ndim, "start_dim")
        end = _wrap_dim("flatten", end_dim, self.ndim, "end_dim")
        if start > end:
            raise RuntimeError(
                "flatten(): start_dim cannot come after end_dim, got "
                f"start_dim={start_dim} and end_dim={end_dim}")
        if _mode.enabled and self.requires_grad:
            return _ag.Flatten.apply(self, start, end)
        return self._flatten(start, end)

    def transpose(self, dim0, dim1):
        """Swap two dimensions (a view)."""
        d0 = _wrap_dim("transpose", dim0, self.ndim, "dim0")
        d1 = _wrap_dim("transpose", dim1, self.ndim, "dim1")
        if self.ndim == 0:
            return self.view(())
        if _mode.enabled and self.requires_grad:
            return _ag.Transpose.apply(self, d0, d1)
        return self._transpose(d0, d1)

    swapaxes = transpose

    def t(self):
        """Transpose a tensor of at most 2 dims."""
        if self.ndim > 2:
            raise RuntimeError(
                f"t() expects a tensor with <= 2 dimensions, but self is "
                f"{self.ndim}D")
        if self.ndim < 2:
            return self.view(self.shape)
        return self.transpose(0, 1)

    def permute(self, *dims):
        """Reorder the dimensions (a view)."""
        dims = _shape_arg("permute", dims, "dims")
        nd = self.ndim
        if len(dims) != nd:
            raise RuntimeError(
                f"permute(): number of dims don't match: the tensor has {nd} "
                f"dimensions but {len(dims)} were given ({list(dims)})")
        wrapped = tuple(_wrap_dim("permute", d, nd, "dims") for d in dims)
        if len(set(wrapped)) != nd:
            raise RuntimeError(
                f"permute(): duplicate dims are not allowed, got "
                f"{list(dims)}")
        if _mode.enabled and self.requires_grad:
            return _ag.Permute.apply(self, wrapped)
        return self._permute(wrapped)

    def expand(self, *sizes):
        """Broadcast size-1 dims to larger sizes without copying (-1 keeps
        a size)."""
        sizes = _shape_arg("expand", sizes, "size")
        if _mode.enabled and self.requires_grad:
            return _ag.Expand.apply(self, sizes)
        return self._expand(sizes)

    def expand_as(self, other):
        _check_tensor("expand_as", "other", other)
        return self.expand(other.shape)

    def unsqueeze(self, dim):
        d = _wrap_dim("unsqueeze", dim, self.ndim + 1)
        if _mode.enabled and self.requires_grad:
            return _ag.Unsqueeze.apply(self, d)
        return self._unsqueeze(d)

    def squeeze(self, dim=None):
        if dim is not None:
            dim = _wrap_dim("squeeze", dim, self.ndim)
        if _mode.enabled and self.requires_grad:
            return _ag.Squeeze.apply(self, dim)
        return self._squeeze(dim)

    def __getitem__(self, index):
        if index.__class__ is list:
            index = _indexing.as_tuple(index)
        if _indexing.is_advanced(index):
            return _indexing.read(self, index, "__getitem__")
        if _mode.enabled and self.requires_grad:
            fixed = _fix_index(index)
            return _ag.GetItem.apply(self, index if fixed is None else fixed)
        try:
            return self._getitem(index)
        except TypeError as e:
            fixed = _fix_index(index)
            if fixed is None:
                raise TypeError(f"__getitem__(): {e}") from None
            return self._getitem(fixed)

    def __setitem__(self, index, value):
        if isinstance(value, _TB):
            pass
        elif value.__class__ not in _SCALARS:
            c = _coerce_scalar(value)
            if c is None:
                if isinstance(value, (list, tuple, np.ndarray)):
                    from ._creation import tensor as _tensor
                    value = _tensor(value, dtype=self.dtype,
                                    device=self.device)
                else:
                    raise TypeError(
                        "__setitem__(): the value must be a Tensor or a "
                        f"number, but got {type(value).__name__}")
            else:
                value = c
        if index.__class__ is list:
            index = _indexing.as_tuple(index)
        if _indexing.is_advanced(index):
            _indexing.put(self, index, value, name="__setitem__")
            return
        if _mode.enabled and (self.requires_grad or (
                isinstance(value, _TB) and value.requires_grad)):
            fixed = _fix_index(index)
            index = index if fixed is None else fixed
            if _ag._check_inplace(self) is not None:
                # self is a view: its base's history changes too
                _inplace(self, _ag.SetItemOutOfPlace, value, index)
                return
            out = _ag.SetItem.apply(self, value, index)
            _ag._rebase(self, out)
            return
        try:
            view = self._getitem(index)
        except TypeError as e:
            fixed = _fix_index(index)
            if fixed is None:
                raise TypeError(f"__setitem__(): {e}") from None
            view = self._getitem(fixed)
        if isinstance(value, _TB):
            _C.copy_(view, value)
        else:
            _C.fill_(view, value)

    # -- reductions ----------------------------------------------------------

    def sum(self, dim=None, keepdim=False, *, dtype=None):
        """Sum over all elements or over ``dim`` (an int or a tuple);
        bool and int64 sum to int64, float16/bfloat16 accumulate in
        float32.

        >>> import ampc
        >>> ampc.tensor([[1, 2], [3, 4]]).sum(1)
        tensor([3, 7])
        """
        dim = _dims_arg("sum", dim)
        t = self if dtype is None else self.to(dtype)
        if (_mode.enabled and t.requires_grad) or (
                dtype is None and _autocast_active()):
            return _ag.Sum.apply(t, dim, keepdim)
        return _reduce("sum", t, dim, keepdim)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        """Mean over all elements or over ``dim`` (floating point only)."""
        dim = _dims_arg("mean", dim)
        t = self if dtype is None else self.to(dtype)
        if _mode.enabled and t.requires_grad:
            return _ag.Mean.apply(t, dim, keepdim)
        return _reduce("mean", t, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        """``max()``: the largest element (0-d); ``max(dim)``: a named
        tuple (values, indices); ``max(other)``: maximum(other)."""
        return _minmax(self, "max", dim, keepdim)

    def min(self, dim=None, keepdim=False):
        """``min()``, ``min(dim)`` -> (values, indices), ``min(other)``."""
        return _minmax(self, "min", dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        """Index of the first largest element (flattened when dim is
        None)."""
        if dim is not None:
            dim = _wrap_dim("argmax", dim, self.ndim)
        return _reduce("argmax", self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        if dim is not None:
            dim = _wrap_dim("argmin", dim, self.ndim)
        return _reduce("argmin", self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        b = self if self.dtype is bool_ else _compare("ne", self, 0)
        return _compare("gt", _reduce("sum", b, _dims_arg("any", dim),
                                      keepdim), 0)

    def all(self, dim=None, keepdim=False):
        b = self if self.dtype is bool_ else _compare("ne", self, 0)
        dim = _dims_arg("all", dim)
        n = _reduce("sum", _compare("eq", b, False), dim, keepdim)
        return _compare("eq", n, 0)

    # -- matrix products -----------------------------------------------------

    def matmul(self, other):
        """The matrix product with ``torch.matmul``'s rules: 1-D operands
        are promoted to a matrix and the added dim removed again, batch dims
        broadcast.

        >>> import ampc
        >>> ampc.ones(2, 3).matmul(ampc.ones(3))
        tensor([3., 3.])
        """
        _check_tensor("matmul", "other", other)
        if (_mode.enabled and (self.requires_grad or other.requires_grad)) \
                or _autocast_active():
            return Matmul.apply(self, other)
        return _C.matmul(self, other)

    def mm(self, mat2):
        """The product of two matrices (2-D tensors only).

        >>> import ampc
        >>> ampc.ones(2, 3).mm(ampc.ones(3, 4)).shape
        ampc.Size([2, 4])
        """
        _check_tensor("mm", "mat2", mat2)
        if self.ndim != 2:
            raise RuntimeError(
                f"mm(): self must be a matrix, got a {self.ndim}-D tensor")
        if mat2.ndim != 2:
            raise RuntimeError(
                f"mm(): mat2 must be a matrix, got a {mat2.ndim}-D tensor")
        return self.matmul(mat2)

    def bmm(self, mat2):
        """Batched matrix product: (B, N, M) @ (B, M, P) -> (B, N, P), no
        broadcasting.

        >>> import ampc
        >>> ampc.ones(4, 2, 3).bmm(ampc.ones(4, 3, 5)).shape
        ampc.Size([4, 2, 5])
        """
        _check_tensor("bmm", "mat2", mat2)
        if self.ndim != 3:
            raise RuntimeError("batch1 must be a 3D tensor")
        if mat2.ndim != 3:
            raise RuntimeError("batch2 must be a 3D tensor")
        want = [self.shape[0], self.shape[2]]
        if list(mat2.shape[:2]) != want:
            raise RuntimeError(
                "Expected size for first two dimensions of batch2 tensor to "
                f"be: {want} but got: {list(mat2.shape[:2])}.")
        return self.matmul(mat2)

    def __matmul__(self, other):
        if not isinstance(other, _TB):
            return NotImplemented
        return self.matmul(other)

    def __rmatmul__(self, other):
        if not isinstance(other, _TB):
            return NotImplemented
        return Tensor.matmul(other, self)

    # -- new tensors like this one ------------------------------------------

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        from . import _creation
        return _creation.empty(*size, dtype=dtype or self.dtype,
                               device=device or self.device,
                               requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        from . import _creation
        return _creation.zeros(*size, dtype=dtype or self.dtype,
                               device=device or self.device,
                               requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        from . import _creation
        return _creation.ones(*size, dtype=dtype or self.dtype,
                              device=device or self.device,
                              requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None,
                 requires_grad=False):
        from . import _creation
        return _creation.full(size, fill_value, dtype=dtype or self.dtype,
                              device=device or self.device,
                              requires_grad=requires_grad)

    def new_tensor(self, data, *, dtype=None, device=None,
                   requires_grad=False):
        from . import _creation
        return _creation.tensor(data, dtype=dtype or self.dtype,
                                device=device or self.device,
                                requires_grad=requires_grad)


# ----------------------------------------------------------------------------
# the autograd Function of matmul


def _mT(t):
    """t with its last two dims swapped (a view: _C.matmul reads it through
    a transpose flag instead of copying)."""
    return t._transpose(t.ndim - 2, t.ndim - 1)


class Matmul(_ag.Function):
    """a @ b.  Backward promotes 1-D operands the way forward did
    (a: (k,) -> (1, k), b: (k,) -> (k, 1)), so both gradients are again
    matmuls: grad_a = g @ b^T, grad_b = a^T @ g; the added dims are
    squeezed off and the engine sums broadcast batch dims back."""

    node_name = "MmBackward0"
    autocast_op = "matmul"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _C.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        a1, b1 = a.ndim == 1, b.ndim == 1
        a2 = a._unsqueeze(0) if a1 else a
        b2 = b._unsqueeze(1) if b1 else b
        if a1 and b1:
            g2 = g._reshape((1, 1))
        elif a1:
            g2 = g._unsqueeze(g.ndim - 1)       # (..., m) -> (..., 1, m)
        elif b1:
            g2 = g._unsqueeze(g.ndim)           # (..., n) -> (..., n, 1)
        else:
            g2 = g
        ga = gb = None
        if need_a:
            ga = _C.matmul(g2, _mT(b2))         # (..., n, k)
            if a1:
                ga = ga._squeeze(ga.ndim - 2)
        if need_b:
            gb = _C.matmul(_mT(a2), g2)         # (..., k, m)
            if b1:
                gb = gb._squeeze(gb.ndim - 1)
        return ga, gb


# ----------------------------------------------------------------------------
# helpers of the methods above


def _rebuild_tensor(data, dtype, dev, requires_grad):
    if data.dtype == np.uint16:
        t = _C.from_bits(data, dtype)
    else:
        t = _C.tensor_from_array(_c_array(data), dtype, "cpu")
    if dev != "cpu":
        t = _raw_to_device(t, dev)
    if requires_grad:
        t.requires_grad = True
    return t


def _fix_index(index):
    """Turn NumPy ints and 0-d int tensors in a basic index into Python
    ints; None when there is nothing to fix.  (Tensors of other kinds,
    lists and arrays make an advanced index: ampc/_indexing.py.)"""
    changed = False

    def one(i):
        nonlocal changed
        if isinstance(i, _TB) and i.ndim == 0 and i.dtype is int64 or \
                isinstance(i, np.integer):
            changed = True
            return _pyint(i.item() if isinstance(i, _TB) else i)
        return i

    if isinstance(index, tuple):
        fixed = tuple(one(i) for i in index)
    else:
        fixed = one(index)
    return fixed if changed else None


def _minmax(self, which, dim, keepdim):
    if isinstance(dim, _TB):
        return self.maximum(dim) if which == "max" else self.minimum(dim)
    grad = _mode.enabled and self.requires_grad
    if dim is None:
        if self.numel() == 0:
            raise RuntimeError(
                f"{which}(): Expected reduction dim to be specified for "
                "input.numel() == 0. Specify the reduction dim with the "
                "'dim' argument.")
        if grad:
            fn = _ag.MaxAll if which == "max" else _ag.MinAll
            return fn.apply(self)
        return _reduce(which, self)
    dim = _wrap_dim(which, dim, self.ndim)
    if grad:
        fn = _ag.MaxDim if which == "max" else _ag.MinDim
        values, indices = fn.apply(self, dim, keepdim)
    else:
        values, indices = _reduce(which + "_dim", self, dim, keepdim)
    rt = return_types.max if which == "max" else return_types.min
    return rt(values, indices)
