"""``ampc.linalg``: PyTorch's ``vector_norm``, ``matrix_norm``, ``norm``
and ``cross``, written with ampc's differentiable ops (the norms on
``Tensor.norm``'s Function, in float32 for float16/bfloat16 input and
rounded once), so they run and differentiate wherever those ops do.
Under CUDA autocast the norms without ``dtype=`` compute in float32
(PyTorch's fp32_set_opt_dtype) and cross promotes its inputs to the wider
dtype.

The matrix norms are 'fro', 1, -1, inf and -inf; 2, -2 and 'nuc' need
singular values, and ampc has no SVD, so they raise a RuntimeError saying
so.

>>> import ampc
>>> ampc.linalg.vector_norm(ampc.tensor([3.0, 4.0]))
tensor(5.)
>>> ampc.linalg.matrix_norm(ampc.tensor([[1.0, -2.0], [3.0, 4.0]]), 1)
tensor(6.)
"""
import math

from . import _C
from ._dtype_device import float32
from ._tensor_select import cross as _cross
from ._tensor_stats import Norm, _dims
from .autograd.grad_mode import _mode

__all__ = ["vector_norm", "matrix_norm", "norm", "cross"]

_INF = (math.inf, -math.inf)


def _float_input(fn, x):
    from .tensor import Tensor
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not "
                        f"{type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{fn}: Expected a floating point or complex "
                           f"tensor as input. Got {x.dtype.name}")


def _with_dtype(fn, op, x, dtype):
    """x in dtype (PyTorch's: only a widening cast), or, without one and
    under CUDA autocast, in float32."""
    if dtype is None:
        if _C.autocast_active():
            x, = _C.autocast_cast_args(op, (x,), _mode.enabled)
        return x
    if not getattr(dtype, "is_floating_point", False) or (
            dtype is not x.dtype and dtype is not float32):
        raise RuntimeError(
            f"{fn}: the dtype of the input ({x.dtype.name}) should be "
            f"convertible without narrowing to the specified dtype "
            f"({getattr(dtype, 'name', dtype)})")
    return x.to(dtype)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ``ord``-norm of ``x`` over ``dim`` (an int, several, or
    None: all): 2, 1, inf (the largest magnitude), -inf (the smallest), 0
    (the count of non-zeros), or any other number ((sum |x|^ord)^(1/ord)).

    >>> import ampc
    >>> ampc.linalg.vector_norm(ampc.tensor([[3.0, 4.0], [0.0, 1.0]]),
    ...                         dim=1)
    tensor([5., 1.])
    """
    fn = "linalg.vector_norm"
    _float_input(fn, x)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be "
                        f"Number, not {type(ord).__name__}")
    x = _with_dtype(fn, "linalg_vector_norm", x, dtype)
    dims = _dims(fn, x, dim)
    if ord < 0 or ord == math.inf:
        what = "inf" if ord == math.inf else f"{ord:g}"
        if dim is None and x.numel() == 0:
            raise RuntimeError(
                f"{fn} cannot compute the {what} norm on an empty tensor "
                "because the operation does not have an identity")
        for d in dims:
            if x.shape[d] == 0:
                raise RuntimeError(
                    f"{fn} cannot compute the {what} norm on the dimension "
                    f"{d} because this dimension is empty and the operation "
                    "does not have an identity")
    return Norm.apply(x, ord, dims, bool(keepdim))


def _matrix_dims(fn, x, dim):
    if x.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 "
                           "dimensions.")
    if isinstance(dim, int) or len(dim) != 2:
        shown = dim if isinstance(dim, int) else " ".join(map(str, dim))
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {shown}")
    d0, d1 = (_dims(fn, x, d)[0] for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got "
                           f"({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix ``ord``-norm of ``A`` over the two dims ``dim``: 'fro'
    (the root of the sum of squares), 1 / -1 (the largest / smallest
    column sum of magnitudes), inf / -inf (likewise of the rows).

    >>> import ampc
    >>> ampc.linalg.matrix_norm(ampc.tensor([[1.0, -2.0], [3.0, 4.0]]),
    ...                         float("inf"))
    tensor(7.)
    """
    fn = "linalg.matrix_norm"
    _float_input(fn, A)
    d0, d1 = _matrix_dims(fn, A, dim)
    if ord in ("nuc", 2, -2):
        raise RuntimeError(
            f"{fn}: ord={ord!r} needs the singular values of A, and ampc "
            "has no SVD; the supported orders are 'fro', 1, -1, inf and "
            "-inf")
    if ord == "fro":
        A = _with_dtype(fn, "linalg_matrix_norm", A, dtype)
        return Norm.apply(A, 2, tuple(sorted((d0, d1))), bool(keepdim))
    if isinstance(ord, bool) or ord not in (1, -1) + _INF:
        raise RuntimeError(f"{fn}: Order {ord} not supported.")
    A = _with_dtype(fn, "linalg_matrix_norm", A, dtype)
    if ord in _INF:
        d0, d1 = d1, d0         # rows: sum along the columns
    sums = A.abs().sum(d0, keepdim=True)
    out = sums.amax(d1, keepdim=True) if ord > 0 else \
        sums.amin(d1, keepdim=True)
    if not keepdim:
        out = out.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    return out


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``vector_norm`` or ``matrix_norm`` as PyTorch chooses: by the length
    of ``dim`` (1 or 2), else by ``A``'s rank when ``ord`` is given (1-D
    or 2-D), else the 2-norm of all elements.

    >>> import ampc
    >>> ampc.linalg.norm(ampc.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    fn = "linalg.norm"
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if isinstance(ord, str):
            return matrix_norm(A, ord, dim, keepdim, dtype=dtype)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim,
                               dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims,
                               keepdim, dtype=dtype)
        raise RuntimeError(f"{fn}: If dim is specified, it must be of "
                           f"length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    _float_input(fn, A)
    if A.ndim not in (1, 2):
        raise RuntimeError(f"{fn}: If dim is not specified but ord is, the "
                           f"input must be 1D or 2D. Got {A.ndim}D.")
    if A.ndim == 1 and not isinstance(ord, str):
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


def cross(input, other, *, dim=-1):
    """The cross product of ``input`` and ``other`` along ``dim`` (size 3,
    default the last); the inputs broadcast.

    >>> import ampc
    >>> ampc.linalg.cross(ampc.tensor([0.0, 1.0, 0.0]),
    ...                   ampc.tensor([0.0, 0.0, 1.0]))
    tensor([1., 0., 0.])
    """
    from .tensor import Tensor
    if not isinstance(input, Tensor):
        raise TypeError("linalg.cross(): argument 'input' must be Tensor, "
                        f"not {type(input).__name__}")
    return _cross("linalg.cross", input, other, dim)
