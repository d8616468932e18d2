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
import math
import numbers
import operator
import weakref

import numpy as np

from . import _C
from . import autograd as _ag
from ._dtype_device import (
    _check_dtype, _device_of, _device_str, _pybool, _wrap_dim, bfloat16,
    bool_, float16, float32, int64, device,
)

_TB = _C.TensorBase
_binary = _C.binary
_compare = _C.compare
_unary = _C.unary
_reduce = _C.reduce
_cast = _C.cast
_mode = _ag._mode
_autocast_active = _C.autocast_active
_inplace = _ag.inplace
_dev_str = _ag._dev_str
_pyint = int
_pyfloat = float
_SCALARS = (int, float, bool)

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
    """Namespace of the named tuples that max(dim)/min(dim) return."""
    max = _return_type("max")
    min = _return_type("min")


# ----------------------------------------------------------------------------
# argument helpers


def _coerce_scalar(x):
    """A NumPy scalar or other real Number as a Python int/float/bool, else
    None."""
    if isinstance(x, np.generic):
        v = x.item()
        return v if v.__class__ in _SCALARS else None
    if isinstance(x, _TB):
        return None
    if isinstance(x, numbers.Integral):
        return _pyint(x)
    if isinstance(x, numbers.Real):
        return _pyfloat(x)
    return None


def _shape_arg(fn, shape, arg="shape"):
    """view(2, 3) / view((2, 3)) / view([2, -1]) -> a tuple of ints (one
    -1 allowed; C checks it)."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
        if not isinstance(shape, (tuple, list)):
            raise TypeError(
                f"{fn}(): argument '{arg}' must be a tuple of ints, but got "
                f"{type(shape).__name__}")
    out = []
    for pos, s in enumerate(shape):
        if s.__class__ is not int:
            if s.__class__ is _pybool or not hasattr(s, "__index__"):
                raise TypeError(
                    f"{fn}(): argument '{arg}' must be a tuple of ints, but "
                    f"found element of type {type(s).__name__} at pos {pos}")
            s = operator.index(s)
        out.append(s)
    return tuple(out)


def _dims_arg(fn, dim):
    """dim for reductions: None, an int, or a tuple/list of ints."""
    if dim is None or dim.__class__ is int:
        return dim
    if isinstance(dim, (tuple, list)):
        out = []
        for d in dim:
            if d.__class__ is _pybool or not hasattr(d, "__index__"):
                raise TypeError(
                    f"{fn}(): argument 'dim' must be an int or a tuple of "
                    f"ints, but found element of type {type(d).__name__}")
            out.append(operator.index(d))
        return tuple(out)
    if dim.__class__ is _pybool or not hasattr(dim, "__index__"):
        raise TypeError(
            f"{fn}(): argument 'dim' must be an int or a tuple of ints, but "
            f"got {type(dim).__name__}")
    return operator.index(dim)


def _check_tensor(fn, arg, x):
    if not isinstance(x, _TB):
        raise TypeError(
            f"{fn}(): argument '{arg}' must be a Tensor, but got "
            f"{type(x).__name__}")


def _check_number(fn, arg, x, allow_none=True):
    if x is None and allow_none:
        return x
    if x.__class__ in _SCALARS:
        return x
    c = _coerce_scalar(x)
    if c is None:
        raise TypeError(
            f"{fn}(): argument '{arg}' must be a number"
            + (" or None" if allow_none else "")
            + f", but got {type(x).__name__}")
    return c


def _c_array(a):
    """``a`` as a C-contiguous array (0-d stays 0-d, unlike
    np.ascontiguousarray)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


def _raw_to_device(t, dev, non_blocking=False):
    out = _C.empty(tuple(t.shape), t.dtype, dev)
    return _C.copy_(out, t, non_blocking)


def _host_array(t):
    """A NumPy array with t's values (float32 for bfloat16), sharing memory
    when t is a CPU tensor that NumPy can represent."""
    if t.device_type != "cpu":
        t = _raw_to_device(t, "cpu")
    if t.dtype is bfloat16:
        return _cast(t, float32)._numpy()
    return t._detach()._numpy()


# ----------------------------------------------------------------------------
# operator factories (the hot paths)


def _binop(op, fn):
    listed = fn.autocast_op is not None

    def method(self, other):
        if _mode.enabled and (self.requires_grad or (
                isinstance(other, _TB) and other.requires_grad)) or (
                listed and _autocast_active()):
            return fn.apply(self, other)
        try:
            return _binary(op, self, other)
        except TypeError:
            other = _coerce_scalar(other)
            if other is None:
                return NotImplemented
            return method(self, other)
    return method


def _rbinop(op, fn):
    listed = fn.autocast_op is not None

    def method(self, other):
        if (_mode.enabled and self.requires_grad) or (
                listed and _autocast_active()):
            return fn.apply(other, self)
        try:
            return _binary(op, other, self)
        except TypeError:
            other = _coerce_scalar(other)
            if other is None:
                return NotImplemented
            return method(self, other)
    return method


def _named_binop(name, op, fn):
    raw = _binop(op, fn)

    def method(self, other):
        r = raw(self, other)
        if r is NotImplemented:
            raise TypeError(
                f"{name}(): argument 'other' must be a Tensor or a number, "
                f"but got {type(other).__name__}")
        return r
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    return method


def _inplace_binop(name, op, fn):
    def method(self, other):
        if _mode.enabled and (self.requires_grad or (
                isinstance(other, _TB) and other.requires_grad)):
            return _inplace(self, fn, other)
        try:
            _binary(op, self, other, self)
        except TypeError:
            c = _coerce_scalar(other)
            if c is None:
                if not isinstance(other, _TB):
                    raise TypeError(
                        f"{name}(): argument 'other' must be a Tensor or a "
                        f"number, but got {type(other).__name__}") from None
                raise
            _binary(op, self, c, self)
        return self
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    return method


def _cmpop(op):
    def method(self, other):
        try:
            return _compare(op, self, other)
        except TypeError:
            c = _coerce_scalar(other)
            if c is None:
                return NotImplemented
            return _compare(op, self, c)
    return method


def _named_cmpop(name, op):
    raw = _cmpop(op)

    def method(self, other):
        r = raw(self, other)
        if r is NotImplemented:
            raise TypeError(
                f"{name}(): argument 'other' must be a Tensor or a number, "
                f"but got {type(other).__name__}")
        return r
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    return method


def _unop(op, fn):
    listed = fn.autocast_op is not None     # autocast applies in apply()

    def method(self):
        if (_mode.enabled and self.requires_grad) or (
                listed and _autocast_active()):
            return fn.apply(self)
        return _unary(op, self)
    method.__name__ = op
    method.__qualname__ = "Tensor." + op
    return method


def _inplace_unop(op, fn):
    def method(self):
        if _mode.enabled and self.requires_grad:
            return _inplace(self, fn)
        _unary(op, self, self)
        return self
    method.__name__ = op + "_"
    method.__qualname__ = "Tensor." + op + "_"
    return method


# ----------------------------------------------------------------------------
# the Tensor class


class Tensor(_TB):
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

    def __hash__(self):
        return id(self)

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

    # -- conversion ----------------------------------------------------------

    def numpy(self, *, force=False):
        """The values as a NumPy array sharing memory with this CPU tensor.

        >>> import ampc
        >>> ampc.tensor([1.0, 2.0]).numpy()
        array([1., 2.], dtype=float32)
        """
        if force:
            t = self._detach()
            if t.device_type != "cpu":
                t = _raw_to_device(t, "cpu")
            if t.dtype is bfloat16:
                t = _cast(t, float32)
            return t._numpy()
        if self.device_type != "cpu":
            raise TypeError(
                f"numpy(): can't convert {self.device} device type tensor "
                "to numpy. Use Tensor.cpu() to copy the tensor to host "
                "memory first.")
        return self._numpy()

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        if copy:
            return arr.copy()
        return arr

    def tolist(self):
        """The values as (nested lists of) Python numbers.

        >>> import ampc
        >>> ampc.tensor([[1, 2], [3, 4]]).tolist()
        [[1, 2], [3, 4]]
        """
        return _host_array(self).tolist()

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter([self[i] for i in range(self.shape[0])])

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(
                "Boolean value of Tensor with more than one value is "
                "ambiguous")
        return _pybool(self.item())

    def __float__(self):
        if self.numel() != 1:
            raise ValueError(
                "only one element tensors can be converted to Python "
                "scalars")
        return _pyfloat(self.item())

    def __int__(self):
        if self.numel() != 1:
            raise ValueError(
                "only one element tensors can be converted to Python "
                "scalars")
        return _pyint(self.item())

    def __index__(self):
        if self.numel() != 1 or self.dtype.is_floating_point:
            raise TypeError(
                "only integer tensors of a single element can be converted "
                "to an index")
        return _pyint(self.item())

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(
                "unsupported format string passed to Tensor.__format__")
        return repr(self)

    def __contains__(self, element):
        if isinstance(element, (_TB,) + _SCALARS):
            return _pybool((self == element).any().item())
        raise RuntimeError(
            "Tensor.__contains__ only supports Tensor or scalar, but you "
            f"passed in a {type(element).__name__}.")

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

    def __repr__(self):
        return _tensor_repr(self)

    __str__ = __repr__

    # -- dtype and device ----------------------------------------------------

    def to(self, *args, **kwargs):
        """Cast and/or move: ``to(dtype)``, ``to(device)``,
        ``to(device, dtype)``, ``to(other)``, or keywords ``device=``,
        ``dtype=``, ``copy=``.  Returns self when nothing changes.

        >>> import ampc
        >>> ampc.ones(2).to(ampc.float16).dtype
        ampc.float16
        """
        dev, dtype, copy, non_blocking = _parse_to(args, kwargs)
        return self._to(dev, dtype, copy, non_blocking)

    def _to(self, dev, dtype, copy=False, non_blocking=False):
        here = _dev_str(self)
        if dev == "cuda":
            # 'cuda' is the current GPU, as in PyTorch
            dev = f"cuda:{_C.cuda_current_device()}" if \
                _C.cuda_device_count() > 0 else "cuda"
        same_dev = dev is None or dev == here
        same_dtype = dtype is None or dtype is self.dtype
        if same_dev and same_dtype:
            return self.clone() if copy else self
        grad = _mode.enabled and self.requires_grad
        t = self
        if not same_dev:
            if grad:
                t = _ag.ToDevice.apply(t, dev, t.dtype)
            else:
                t = _raw_to_device(t, dev, non_blocking)
        if not same_dtype:
            if grad:
                t = _ag.Cast.apply(t, dtype)
            else:
                t = _cast(t, dtype)
        return t

    def cpu(self):
        """This tensor on the CPU (self when it already is there).

        >>> import ampc
        >>> ampc.ones(2).cpu().device
        device(type='cpu')
        """
        return self._to("cpu", None)

    def cuda(self, device=None, non_blocking=False):
        """This tensor on a GPU (the current one by default; self when it
        already is there).  With ``non_blocking=True`` a copy from pinned
        memory (pin_memory()) is queued and this returns at once; otherwise
        the copy has finished when it returns, as in PyTorch.

        >>> import ampc
        >>> if ampc.cuda.is_available():
        ...     assert ampc.ones(2).cuda().is_cuda
        """
        if device is None:
            dev = "cuda"
        else:
            dev = _device_str("cuda", device)
            if not dev.startswith("cuda"):
                raise RuntimeError(
                    f"cuda(): invalid device, must be a cuda device, got "
                    f"{dev}")
        return self._to(dev, None, non_blocking=non_blocking)

    def pin_memory(self):
        """A copy of this CPU tensor in pinned (page-locked) host memory, so
        that copies to a GPU are faster and can be queued without waiting
        (``to("cuda", non_blocking=True)``).  Needs a CUDA GPU.

        >>> import ampc
        >>> if ampc.cuda.is_available():
        ...     assert ampc.ones(2).pin_memory().is_pinned()
        """
        if self.is_pinned():
            return self
        return _C.pin_memory(self._detach() if self.requires_grad else self)

    def is_pinned(self):
        """True when this tensor lives in pinned host memory.

        >>> import ampc
        >>> ampc.ones(2).is_pinned()
        False
        """
        return _C.is_pinned(self)

    def float(self):
        return self._to(None, float32)

    def half(self):
        return self._to(None, float16)

    def bfloat16(self):
        return self._to(None, bfloat16)

    def long(self):
        return self._to(None, int64)

    def bool(self):
        return self._to(None, bool_)

    def double(self):
        raise TypeError(
            "double(): ampc has no float64 dtype; use float() (float32) "
            "instead")

    def type_as(self, other):
        _check_tensor("type_as", "other", other)
        return self._to(None, other.dtype)

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
        raise NotImplementedError(
            "register_hook(): tensor hooks are not supported by ampc")

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

    # -- arithmetic ----------------------------------------------------------

    __add__ = _binop("add", _ag.Add)
    __radd__ = _rbinop("add", _ag.Add)
    __sub__ = _binop("sub", _ag.Sub)
    __rsub__ = _rbinop("sub", _ag.Sub)
    __mul__ = _binop("mul", _ag.Mul)
    __rmul__ = _rbinop("mul", _ag.Mul)
    __truediv__ = _binop("div", _ag.Div)
    __rtruediv__ = _rbinop("div", _ag.Div)
    __pow__ = _binop("pow", _ag.Pow)
    __rpow__ = _rbinop("pow", _ag.Pow)

    __iadd__ = _inplace_binop("add_", "add", _ag.Add)
    __isub__ = _inplace_binop("sub_", "sub", _ag.Sub)
    __imul__ = _inplace_binop("mul_", "mul", _ag.Mul)
    __itruediv__ = _inplace_binop("div_", "div", _ag.Div)
    __ipow__ = _inplace_binop("pow_", "pow", _ag.Pow)

    __eq__ = _cmpop("eq")
    __ne__ = _cmpop("ne")
    __lt__ = _cmpop("lt")
    __le__ = _cmpop("le")
    __gt__ = _cmpop("gt")
    __ge__ = _cmpop("ge")

    eq = _named_cmpop("eq", "eq")
    ne = _named_cmpop("ne", "ne")
    lt = _named_cmpop("lt", "lt")
    le = _named_cmpop("le", "le")
    gt = _named_cmpop("gt", "gt")
    ge = _named_cmpop("ge", "ge")

    mul = multiply = _named_binop("mul", "mul", _ag.Mul)
    div = divide = true_divide = _named_binop("div", "div", _ag.Div)
    pow = _named_binop("pow", "pow", _ag.Pow)
    maximum = _named_binop("maximum", "maximum", _ag.Maximum)
    minimum = _named_binop("minimum", "minimum", _ag.Minimum)
    mul_ = _inplace_binop("mul_", "mul", _ag.Mul)
    div_ = _inplace_binop("div_", "div", _ag.Div)
    pow_ = _inplace_binop("pow_", "pow", _ag.Pow)

    _add = _named_binop("add", "add", _ag.Add)
    _sub = _named_binop("sub", "sub", _ag.Sub)
    _add_ = _inplace_binop("add_", "add", _ag.Add)
    _sub_ = _inplace_binop("sub_", "sub", _ag.Sub)

    def add(self, other, *, alpha=1):
        """self + alpha * other."""
        if alpha != 1:
            other = _scale("add", other, alpha)
        return self._add(other)

    def sub(self, other, *, alpha=1):
        """self - alpha * other."""
        if alpha != 1:
            other = _scale("sub", other, alpha)
        return self._sub(other)

    subtract = sub

    def add_(self, other, *, alpha=1):
        """In place: self += alpha * other."""
        if alpha != 1:
            other = _scale("add_", other, alpha)
        return self._add_(other)

    def sub_(self, other, *, alpha=1):
        """In place: self -= alpha * other."""
        if alpha != 1:
            other = _scale("sub_", other, alpha)
        return self._sub_(other)

    def __pos__(self):
        return self

    neg = negative = __neg__ = _unop("neg", _ag.Neg)
    abs = absolute = __abs__ = _unop("abs", _ag.Abs)
    sqrt = _unop("sqrt", _ag.Sqrt)
    exp = _unop("exp", _ag.Exp)
    log = _unop("log", _ag.Log)
    relu = _unop("relu", _ag.Relu)
    sign = _unop("sign", _ag.Sign)

    neg_ = negative_ = _inplace_unop("neg", _ag.Neg)
    abs_ = _inplace_unop("abs", _ag.Abs)
    sqrt_ = _inplace_unop("sqrt", _ag.Sqrt)
    exp_ = _inplace_unop("exp", _ag.Exp)
    log_ = _inplace_unop("log", _ag.Log)
    relu_ = _inplace_unop("relu", _ag.Relu)

    def isfinite(self):
        """A bool tensor: True where the value is neither inf nor NaN."""
        return _unary("isfinite", self)

    def isnan(self):
        return _compare("ne", self, self)

    def isinf(self):
        if not self.dtype.is_floating_point:
            return _compare("ne", self, self)
        return _compare("eq", _unary("abs", self), math.inf)

    def clamp(self, min=None, max=None):
        """Limit the values to [min, max] (either may be None)."""
        lo, hi = _clamp_args("clamp", min, max)
        if lo.__class__ is Tensor or hi.__class__ is Tensor or \
                isinstance(lo, _TB) or isinstance(hi, _TB):
            t = self
            if lo is not None:
                t = t.maximum(lo)
            if hi is not None:
                t = t.minimum(hi)
            return t
        if _mode.enabled and self.requires_grad:
            return _ag.Clamp.apply(self, lo, hi)
        return _C.clamp(self, lo, hi)

    clip = clamp

    def clamp_(self, min=None, max=None):
        """In place: limit the values to [min, max]."""
        lo, hi = _clamp_args("clamp_", min, max)
        if isinstance(lo, _TB) or isinstance(hi, _TB):
            return self.copy_(self.clamp(lo, hi))
        if _mode.enabled and self.requires_grad:
            return _inplace(self, _ag.Clamp, lo, hi)
        _C.clamp(self, lo, hi, self)
        return self

    clip_ = clamp_

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

    def __matmul__(self, other):
        if not isinstance(other, _TB):
            return NotImplemented
        return self.matmul(other)

    def __rmatmul__(self, other):
        if not isinstance(other, _TB):
            return NotImplemented
        return Tensor.matmul(other, self)

    # -- in-place writes -----------------------------------------------------

    def fill_(self, value):
        """Set every element to ``value``; returns self."""
        if isinstance(value, _TB):
            if value.numel() != 1:
                raise RuntimeError(
                    "fill_ only supports 0-dimension value tensor but got "
                    f"tensor with {value.ndim} dimensions.")
            value = value.item()
        value = _check_number("fill_", "value", value, allow_none=False)
        if _mode.enabled and self.requires_grad:
            new = _C.full(tuple(self.shape), value, self.dtype,
                          _dev_str(self))
            return _inplace(self, _ag.Overwrite, new)
        _C.fill_(self, value)
        return self

    def zero_(self):
        """Set every element to zero; returns self."""
        return self.fill_(0)

    def copy_(self, src, non_blocking=False):
        """Copy ``src`` (broadcast and cast) into self; returns self."""
        if not isinstance(src, _TB):
            raise TypeError(
                "copy_(): argument 'src' must be a Tensor, but got "
                f"{type(src).__name__}")
        if _mode.enabled and (self.requires_grad or src.requires_grad):
            return _inplace(self, _ag.CopyFrom, src)
        _C.copy_(self, src, non_blocking)
        return self

    def uniform_(self, a=0.0, b=1.0):
        """Fill with values drawn uniformly from [a, b)."""
        a = _check_number("uniform_", "from", a, False)
        b = _check_number("uniform_", "to", b, False)
        if a > b:
            raise RuntimeError(
                f"uniform_(): expects a <= b, but found a={a} and b={b}")
        return _random_fill(self, "uniform", a, b)

    def normal_(self, mean=0.0, std=1.0):
        """Fill with values drawn from N(mean, std^2)."""
        mean = _check_number("normal_", "mean", mean, False)
        std = _check_number("normal_", "std", std, False)
        if std < 0:
            raise RuntimeError(
                f"normal_(): expects std >= 0.0, but found std {std}")
        return _random_fill(self, "normal", mean, std)

    def bernoulli_(self, p=0.5):
        """Fill with 1 with probability p, else 0."""
        p = _check_number("bernoulli_", "p", p, False)
        if not 0 <= p <= 1:
            raise RuntimeError(
                f"bernoulli_(): expects p to be in [0, 1], but got p={p}")
        return _random_fill(self, "bernoulli", p, 0.0)

    def random_(self, from_=0, to=None):
        """Fill with integers drawn uniformly from [from_, to)."""
        if to is None:
            from_, to = 0, from_
            if to == 0:
                raise RuntimeError("random_(): give an upper bound 'to'")
        return _random_fill(self, "randint", from_, to)

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
    """Turn NumPy ints and 0-d int tensors in an index into Python ints;
    None when there is nothing to fix."""
    changed = False

    def one(i):
        nonlocal changed
        if i is None or i is Ellipsis or i.__class__ in (int, slice):
            return i
        if isinstance(i, _TB):
            if i.ndim == 0 and not i.dtype.is_floating_point and \
                    i.dtype is not bool_:
                changed = True
                return _pyint(i.item())
            raise IndexError(
                "__getitem__(): ampc supports basic indexing only (ints, "
                "slices, None, ...), not indexing with a tensor of shape "
                f"{list(i.shape)} and dtype {i.dtype!r}")
        if isinstance(i, np.integer):
            changed = True
            return _pyint(i)
        if isinstance(i, (list, np.ndarray)):
            raise IndexError(
                "__getitem__(): ampc supports basic indexing only (ints, "
                f"slices, None, ...), not a {type(i).__name__}")
        return i

    if isinstance(index, tuple):
        fixed = tuple(one(i) for i in index)
    else:
        fixed = one(index)
    return fixed if changed else None


def _scale(fn, other, alpha):
    alpha = _check_number(fn, "alpha", alpha, allow_none=False)
    if isinstance(other, _TB):
        return other * alpha
    c = other if other.__class__ in _SCALARS else _coerce_scalar(other)
    if c is None:
        raise TypeError(
            f"{fn}(): argument 'other' must be a Tensor or a number, but got "
            f"{type(other).__name__}")
    return c * alpha


def _clamp_args(fn, lo, hi):
    if lo is None and hi is None:
        raise RuntimeError(
            f"{fn}(): at least one of 'min' or 'max' must not be None")
    if not isinstance(lo, _TB):
        lo = _check_number(fn, "min", lo)
    if not isinstance(hi, _TB):
        hi = _check_number(fn, "max", hi)
    return lo, hi


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


def _random_fill(self, kind, a, b):
    if _mode.enabled and self.requires_grad:
        new = _C.empty(tuple(self.shape), self.dtype, _dev_str(self))
        _C.random_(new, kind, a, b)
        return _inplace(self, _ag.Overwrite, new)
    if self.is_contiguous():
        _C.random_(self, kind, a, b)
    else:
        tmp = _C.empty(tuple(self.shape), self.dtype, _dev_str(self))
        _C.random_(tmp, kind, a, b)
        _C.copy_(self, tmp)
    return self


def _parse_to(args, kwargs):
    """The arguments of Tensor.to -> (device str or None, dtype or None,
    copy, non_blocking)."""
    dev = dtype = None
    copy = kwargs.pop("copy", False)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    kwargs.pop("memory_format", None)
    if "device" in kwargs:
        dev = _device_str("to", kwargs.pop("device"))
    if "dtype" in kwargs:
        dtype = _check_dtype("to", "dtype", kwargs.pop("dtype"))
    if kwargs:
        raise TypeError(
            f"to(): unexpected keyword argument '{next(iter(kwargs))}'")
    args = list(args)
    if args:
        a = args[0]
        if isinstance(a, _TB):
            args.pop(0)
            dev, dtype = _dev_str(a), a.dtype
        elif a.__class__ is _C.dtype:
            pass
        elif a is None:
            args.pop(0)
        elif isinstance(a, (str, device)) or (
                isinstance(a, int) and a.__class__ is not _pybool):
            dev = _device_str("to", args.pop(0))
        else:
            raise TypeError(
                "to(): expected a dtype, a device or a Tensor as the first "
                f"argument, but got {type(a).__name__}")
    if args and args[0].__class__ is _C.dtype:
        dtype = args.pop(0)
    if args and args[0].__class__ is _pybool:
        non_blocking = args.pop(0)
        if args and args[0].__class__ is _pybool:
            copy = args.pop(0)
    if args:
        raise TypeError(
            "to() received an invalid combination of arguments: expected "
            "to(dtype), to(device, dtype=None), to(tensor) or keywords "
            f"device=/dtype=/copy=, got an extra {type(args[0]).__name__}")
    return dev, dtype, copy, non_blocking


# ----------------------------------------------------------------------------
# repr, shaped like torch's _tensor_str


_LINEWIDTH = 80
_THRESHOLD = 1000
_EDGEITEMS = 3
_PRECISION = 4


class _Formatter:
    def __init__(self, arr, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if arr.size == 0:
            return
        if not floating:
            for v in arr.ravel():
                self.max_width = max(self.max_width, len(str(v)))
            return
        finite = arr[np.isfinite(arr) & (arr != 0)]
        if finite.size == 0:
            for v in arr.ravel():
                self.max_width = max(self.max_width, len(self._fmt(v)))
            return
        absv = np.abs(finite.astype(np.float64))
        mn, mx = absv.min(), absv.max()
        self.int_mode = bool(np.all(np.ceil(finite) == finite))
        if self.int_mode:
            if mx / mn > 1000.0 or mx > 1.0e8:
                self.sci_mode = True
        else:
            if mx / mn > 1000.0 or mx > 1.0e8 or mn < 1.0e-4:
                self.sci_mode = True
        for v in arr.ravel():
            self.max_width = max(self.max_width, len(self._fmt(v)))

    def _fmt(self, v):
        if not self.floating:
            return str(v)
        v = _pyfloat(v)
        if self.sci_mode:
            return f"{v:.{_PRECISION}e}"
        if self.int_mode:
            s = f"{v:.0f}"
            if not (math.isinf(v) or math.isnan(v)):
                s += "."
            return s
        return f"{v:.{_PRECISION}f}"

    def width(self):
        return self.max_width

    def format(self, v):
        s = self._fmt(v)
        return " " * (self.max_width - len(s)) + s


def _summarized(arr):
    """The edge items of every dim of a large array (for the formatter)."""
    if arr.ndim == 0:
        return arr
    if arr.shape[0] > 2 * _EDGEITEMS:
        arr = np.concatenate([arr[:_EDGEITEMS], arr[-_EDGEITEMS:]])
    if arr.ndim == 1:
        return arr
    return np.stack([_summarized(a) for a in arr]) if arr.shape[0] else arr


def _vector_str(arr, indent, fmt, summarize):
    element_length = fmt.width() + 2
    per_line = _pyint(max(1, math.floor((_LINEWIDTH - indent)
                                        / element_length)))
    if summarize and arr.shape[0] > 2 * _EDGEITEMS:
        data = ([fmt.format(v) for v in arr[:_EDGEITEMS]] + [" ..."]
                + [fmt.format(v) for v in arr[-_EDGEITEMS:]])
    else:
        data = [fmt.format(v) for v in arr]
    lines = [", ".join(data[i:i + per_line])
             for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(arr, indent, fmt, summarize):
    if arr.ndim == 0:
        return fmt.format(arr[()])
    if arr.ndim == 1:
        return _vector_str(arr, indent, fmt, summarize)
    n = arr.shape[0]
    if summarize and n > 2 * _EDGEITEMS:
        parts = ([_array_str(arr[i], indent + 1, fmt, summarize)
                  for i in range(_EDGEITEMS)] + ["..."]
                 + [_array_str(arr[i], indent + 1, fmt, summarize)
                    for i in range(n - _EDGEITEMS, n)])
    else:
        parts = [_array_str(arr[i], indent + 1, fmt, summarize)
                 for i in range(n)]
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def _tensor_repr(t):
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device_type != "cpu":
        suffixes.append(f"device='{t.device}'")
    arr = _host_array(t)
    floating = t.dtype.is_floating_point
    if arr.size == 0:
        body = "[]"
        if arr.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
    else:
        summarize = arr.size > _THRESHOLD
        fmt = _Formatter(_summarized(arr) if summarize else arr, floating)
        body = _array_str(arr, indent, fmt, summarize)
    if t.dtype not in (float32, int64, bool_):
        suffixes.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    out = [prefix, body]
    last_line_len = len(body) - body.rfind("\n") + indent
    for s in suffixes:
        if last_line_len + len(s) + 2 > _LINEWIDTH:
            out.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            out.append(", " + s)
            last_line_len += len(s) + 2
    out.append(")")
    return "".join(out)
