"""``Tensor.cumsum``, ``cumprod`` (and their in-place forms), ``sort``,
``argsort``, ``msort`` and ``topk``: PyTorch's argument checks, then one
``_C`` kernel call each (``csrc/ops_scan.c``, ``csrc/ops_sort.c``), through
the autograd Functions of ``autograd/sort_scan.py`` when a gradient is
wanted.  A mixin of ``Tensor``.

The sorts are stable on every device (``stable=`` is accepted and always
honoured), NaN sorts above +inf and -0.0 ties with 0.0, as in PyTorch.
Under CUDA autocast, ``cumsum`` and ``cumprod`` without ``dtype=`` return
float32 (PyTorch's ``fp32_set_opt_dtype``).

>>> import ampc
>>> ampc.tensor([1, 2, 3]).cumsum(0)
tensor([1, 3, 6])
>>> ampc.tensor([3.0, 1.0, 2.0]).sort().indices
tensor([1, 2, 0])
>>> ampc.tensor([3.0, 1.0, 2.0]).topk(2).values
tensor([3., 2.])
"""
from . import _C
from ._dtype_device import _check_dtype, _pybool, _wrap_dim
from .autograd import sort_scan as _ss
from .autograd.function import autocast_listed
from .autograd.grad_mode import _mode


def _bool_arg(fn, arg, v):
    if v.__class__ is not _pybool:
        raise TypeError(f"{fn}(): argument '{arg}' must be bool, but got "
                        f"{type(v).__name__}")
    return v


def _scan(fn, x, dim, dtype):
    dim = _wrap_dim(fn, dim, x.ndim)
    dtype = _check_dtype(fn, "dtype", dtype)
    plain, listed = (_ss.Cumsum, _ss.CumsumNoAutocast) if fn == "cumsum" \
        else (_ss.Cumprod, _ss.CumprodNoAutocast)
    if dtype is not None:
        if dtype.is_floating_point and dtype is not x.dtype:
            x = x.to(dtype)         # cast first, with its own gradient
        if _mode.enabled and x.requires_grad:
            return listed.apply(x, dim, dtype)
        return getattr(_C, fn)(x, dim, dtype)
    if (_mode.enabled and x.requires_grad) or autocast_listed(plain):
        return plain.apply(x, dim, None)
    return getattr(_C, fn)(x, dim)


def _inplace_scan(fn, x, dim, dtype):
    out = _scan(fn[:-1], x, dim, dtype)
    if out.dtype is not x.dtype:
        raise RuntimeError(
            f"{fn}(): Bad in-place call: input tensor dtype {x.dtype} and "
            f"output tensor dtype {out.dtype} should match")
    return x.copy_(out)


def _sort_args(fn, x, dim, descending, stable):
    dim = _wrap_dim(fn, dim, x.ndim)
    _bool_arg(fn, "descending", descending)
    if stable is not None:
        _bool_arg(fn, "stable", stable)
    return dim


class _TensorSortScan:
    """Scans and sorts along one dim (see the module docstring)."""

    def cumsum(self, dim, *, dtype=None):
        """The running sum along ``dim``: bool and int64 give int64,
        float16/bfloat16 are summed in float32 and each output rounded
        once; ``dtype`` casts the input first.

        >>> import ampc
        >>> ampc.tensor([[1.0, 2.0], [3.0, 4.0]]).cumsum(1)
        tensor([[1., 3.],
                [3., 7.]])
        """
        return _scan("cumsum", self, dim, dtype)

    def cumprod(self, dim, *, dtype=None):
        """The running product along ``dim`` (dtypes as ``cumsum``).

        >>> import ampc
        >>> ampc.tensor([1.0, 2.0, 3.0]).cumprod(0)
        tensor([1., 2., 6.])
        """
        return _scan("cumprod", self, dim, dtype)

    def cumsum_(self, dim, *, dtype=None):
        """In place: ``cumsum`` written into self (the result's dtype must
        be self's, so not for bool)."""
        return _inplace_scan("cumsum_", self, dim, dtype)

    def cumprod_(self, dim, *, dtype=None):
        """In place: ``cumprod`` written into self."""
        return _inplace_scan("cumprod_", self, dim, dtype)

    def sort(self, dim=-1, descending=False, *, stable=False):
        """``(values, indices)`` of each line along ``dim`` sorted (always
        stably: equal elements keep their order); NaN counts as the largest
        value, -0.0 equals 0.0.

        >>> import ampc
        >>> ampc.tensor([2.0, float("nan"), 1.0]).sort(descending=True)
        ampc.return_types.sort(
        values=tensor([nan, 2., 1.]),
        indices=tensor([1, 0, 2]))
        """
        from .tensor import return_types
        dim = _sort_args("sort", self, dim, descending, stable)
        if _mode.enabled and self.requires_grad:
            values, indices = _ss.Sort.apply(self, dim, descending)
        else:
            values, indices = _C.sort(self, dim, descending)
        return return_types.sort(values, indices)

    def argsort(self, dim=-1, descending=False, *, stable=False):
        """The indices that sort each line along ``dim`` (``sort``'s).

        >>> import ampc
        >>> ampc.tensor([3, 1, 2]).argsort()
        tensor([1, 2, 0])
        """
        dim = _sort_args("argsort", self, dim, descending, stable)
        return _C.argsort(self, dim, descending)

    def msort(self):
        """The values of ``sort(dim=0)``."""
        return self.sort(0).values

    def topk(self, k, dim=-1, largest=True, sorted=True):
        """``(values, indices)`` of the ``k`` largest (``largest=False``:
        smallest) elements of each line along ``dim``, in sorted order
        (also with ``sorted=False``); ties keep the first ones.

        >>> import ampc
        >>> ampc.tensor([1.0, 5.0, 3.0, 4.0]).topk(2)
        ampc.return_types.topk(
        values=tensor([5., 4.]),
        indices=tensor([1, 3]))
        """
        from .tensor import return_types
        if k.__class__ is _pybool or not hasattr(k, "__index__"):
            raise TypeError("topk(): argument 'k' must be an int, but got "
                            f"{type(k).__name__}")
        k = k.__index__()
        dim = _wrap_dim("topk", dim, self.ndim)
        _bool_arg("topk", "largest", largest)
        _bool_arg("topk", "sorted", sorted)
        if _mode.enabled and self.requires_grad:
            values, indices = _ss.Topk.apply(self, k, dim, largest)
        else:
            values, indices = _C.topk(self, k, dim, largest)
        return return_types.topk(values, indices)
