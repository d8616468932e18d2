"""Creation functions (``tensor``, ``zeros``, ``randn``, ...), the random
seed, and the module-level functions of ``api.md`` (``cat``, ``stack``,
``flatten``, ``isfinite`` and the functional forms of the tensor methods).

>>> import ampc
>>> ampc.zeros(2, 3).shape
ampc.Size([2, 3])
>>> ampc.manual_seed(0); a = ampc.randn(3)
>>> ampc.manual_seed(0); bool((a == ampc.randn(3)).all())
True
"""
import numbers

import numpy as np

from . import _C
from . import autograd as _ag
from ._dtype_device import (
    _NP_TO_DTYPE, _check_dtype, _device_str, _parse_shape, _pybool,
    _wrap_dim, bool_, float32, int64,
)
from .tensor import Tensor, _c_array, _check_number, _dev_str

_TB = _C.TensorBase
_mode = _ag._mode

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full",
    "rand", "randn", "randint", "arange", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
    "manual_seed", "initial_seed", "seed", "get_rng_state", "set_rng_state",
    "cat", "concat", "concatenate", "stack", "flatten", "unflatten",
    "isfinite", "is_tensor", "numel", "matmul", "get_default_dtype",
]


def _finish(fn, t, requires_grad):
    if requires_grad:
        if requires_grad.__class__ is not _pybool:
            raise TypeError(
                f"{fn}(): argument 'requires_grad' must be a bool, but got "
                f"{type(requires_grad).__name__}")
        if not t.dtype.is_floating_point:
            raise RuntimeError(
                f"{fn}(): only Tensors of floating point dtype can require "
                f"gradients, got dtype={t.dtype!r}")
        t.requires_grad = True
    return t


def get_default_dtype():
    """ampc's default floating point dtype (always float32)."""
    return float32


# ----------------------------------------------------------------------------
# from data

def _infer_array(fn, data):
    """Python data -> a NumPy array that C can take (float32, float16,
    int64 or bool), inferring the dtype as PyTorch does: floats ->
    float32, ints -> int64, bools -> bool."""
    if isinstance(data, np.ndarray):
        arr = data
    else:
        if isinstance(data, (str, bytes)):
            raise TypeError(
                f"{fn}(): could not infer dtype of {type(data).__name__}")
        try:
            arr = np.array(data)
        except ValueError as e:
            raise ValueError(
                f"{fn}(): expected a sequence of equal-length sequences "
                f"(a rectangular nested list), got {_short(data)}: {e}") \
                from None
        except OverflowError:
            raise RuntimeError(
                f"{fn}(): an integer is too large for int64 in "
                f"{_short(data)}") from None
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype not in (np.float32, np.float16):
            arr = arr.astype(np.float32)
    elif kind in "iu":
        if arr.dtype != np.int64:
            if arr.dtype == np.uint64 and arr.size and arr.max() > 2**63 - 1:
                raise RuntimeError(
                    f"{fn}(): a value does not fit in int64")
            arr = arr.astype(np.int64)
    elif kind == "b":
        pass
    elif kind == "O":
        flat = np.ravel(arr)
        if flat.size and all(isinstance(x, numbers.Integral)
                             and not isinstance(x, bool) for x in flat):
            raise RuntimeError(
                f"{fn}(): an integer in {_short(data)} is too large for "
                "int64")
        raise TypeError(
            f"{fn}(): could not infer the dtype of {_short(data)}: expected "
            "numbers, bools or (nested) sequences of them")
    else:
        raise TypeError(
            f"{fn}(): can't convert data of NumPy dtype {arr.dtype} to a "
            "tensor; ampc supports float32, float16, bfloat16, int64 and "
            "bool (float64 is converted to float32, other ints to int64)")
    return arr


def _short(data):
    r = repr(data)
    return r if len(r) < 60 else r[:57] + "..."


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (a number, a nested list,
    a NumPy array or a Tensor).  Floats become float32, ints int64 and
    bools bool unless ``dtype`` says otherwise.

    >>> import ampc
    >>> ampc.tensor([[1, 2], [3, 4]])
    tensor([[1, 2],
            [3, 4]])
    >>> ampc.tensor(1.5, dtype=ampc.float16)
    tensor(1.5000, dtype=ampc.float16)
    """
    dtype = _check_dtype("tensor", "dtype", dtype)
    if device is None and isinstance(data, _TB):
        device = _dev_str(data)        # a tensor's copy stays on its device
    dev = _device_str("tensor", device)
    if isinstance(data, _TB):
        t = data._detach()
        out = _C.empty(tuple(t.shape), dtype or t.dtype, dev)
        _C.copy_(out, t)
    else:
        if isinstance(data, (list, tuple)) and data and any(
                isinstance(x, _TB) for x in data):
            data = [x.tolist() if isinstance(x, _TB) else x for x in data]
        arr = _infer_array("tensor", data)
        out = _C.tensor_from_array(_c_array(arr),
                                   dtype or _NP_TO_DTYPE[arr.dtype], dev)
    return _finish("tensor", out, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor``, but returns ``data`` itself when it already is a
    tensor of that dtype and device, and shares a NumPy array's memory
    when it can."""
    dtype = _check_dtype("as_tensor", "dtype", dtype)
    if isinstance(data, _TB):
        return data.to(device=device, dtype=dtype) if (
            device is not None or dtype is not None) else data
    if isinstance(data, np.ndarray) and data.dtype in _NP_TO_DTYPE and (
            device is None or _device_str("as_tensor", device) == "cpu"):
        t = from_numpy(data)
        return t if dtype is None else t.to(dtype)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(a):
    """A CPU tensor that shares memory with the NumPy array ``a``
    (float32, float16, int64 or bool).

    >>> import ampc, numpy as np
    >>> a = np.zeros(3, dtype=np.float32)
    >>> t = ampc.from_numpy(a); t[0] = 5
    >>> a
    array([5., 0., 0.], dtype=float32)
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(
            "from_numpy(): argument 'a' must be a numpy.ndarray, but got "
            f"{type(a).__name__}")
    return _C.from_numpy(a)


# ----------------------------------------------------------------------------
# filled

def _new(fn, size, dtype, device, default=None):
    shape = _parse_shape(fn, size)
    dtype = _check_dtype(fn, "dtype", dtype) or default or float32
    return _C.empty(shape, dtype, _device_str(fn, device)), shape


def empty(*size, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of the given shape (float32 by default);
    under ``use_deterministic_algorithms(True)`` filled with NaN (floats)
    or the largest value (integers, bool True), as PyTorch's, unless
    ``ampc.utils.deterministic.fill_uninitialized_memory`` is False."""
    t, _ = _new("empty", size, dtype, device)
    if _C._deterministic_algorithms()[0]:
        from .utils import deterministic
        if deterministic.fill_uninitialized_memory:
            _C.fill_(t, _UNINITIALIZED.get(t.dtype.name, float("nan")))
    return _finish("empty", t, requires_grad)


# what empty() fills with under deterministic algorithms (floats: NaN)
_UNINITIALIZED = {"int64": 2 ** 63 - 1, "bool": True}


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros: ``zeros(2, 3)`` or ``zeros((2, 3))``.

    >>> import ampc
    >>> ampc.zeros(2, dtype=ampc.int64)
    tensor([0, 0])
    """
    return _full("zeros", size, 0, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of ones.

    >>> import ampc
    >>> ampc.ones(2)
    tensor([1., 1.])
    """
    return _full("ones", size, 1, dtype, device, requires_grad)


def _full(fn, size, value, dtype, device, requires_grad):
    shape = _parse_shape(fn, size)
    dtype = _check_dtype(fn, "dtype", dtype) or float32
    t = _C.full(shape, value, dtype, _device_str(fn, device))
    return _finish(fn, t, requires_grad)


def _scalar_dtype(value):
    if value.__class__ is _pybool:
        return bool_
    if isinstance(value, int):
        return int64
    return float32


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ``fill_value``; the dtype follows the value
    (bool, int64 or float32) unless given.

    >>> import ampc
    >>> ampc.full((2,), 7)
    tensor([7, 7])
    """
    if isinstance(fill_value, _TB):
        fill_value = fill_value.item()
    fill_value = _check_number("full", "fill_value", fill_value, False)
    dtype = _check_dtype("full", "dtype", dtype) or _scalar_dtype(fill_value)
    return _full("full", (size,), fill_value, dtype, device, requires_grad)


def _random(fn, size, kind, a, b, dtype, device, requires_grad,
            default=float32):
    t, _ = _new(fn, size, dtype, device, default)
    if kind != "randint" and not t.dtype.is_floating_point:
        raise TypeError(
            f"{fn}(): expected a floating point dtype, got {t.dtype!r}")
    _C.random_(t, kind, a, b)
    return _finish(fn, t, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False,
         generator=None):
    """Uniform random values in [0, 1)."""
    return _random("rand", size, "uniform", 0.0, 1.0, dtype, device,
                   requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False,
          generator=None):
    """Standard normal random values.

    >>> import ampc
    >>> ampc.randn(2, 3).shape
    ampc.Size([2, 3])
    """
    return _random("randn", size, "normal", 0.0, 1.0, dtype, device,
                   requires_grad)


def randint(*args, size=None, dtype=None, device=None, requires_grad=False,
            generator=None):
    """``randint(high, size)`` or ``randint(low, high, size)``: integers
    drawn uniformly from [low, high) (int64 by default).

    >>> import ampc
    >>> ampc.randint(0, 10, (4,)).dtype
    ampc.int64
    """
    args = list(args)
    if size is None:
        if not args or not isinstance(args[-1], (tuple, list)):
            raise TypeError(
                "randint(): argument 'size' (a tuple of ints) is required: "
                "randint(high, size) or randint(low, high, size)")
        size = args.pop()
    if len(args) == 1:
        low, high = 0, args[0]
    elif len(args) == 2:
        low, high = args
    else:
        raise TypeError(
            "randint(): expected randint(high, size) or randint(low, high, "
            f"size), got {len(args)} positional numbers")
    for name, v in (("low", low), ("high", high)):
        if v.__class__ is _pybool or not isinstance(v, numbers.Integral):
            raise TypeError(
                f"randint(): argument '{name}' must be an int, but got "
                f"{type(v).__name__}")
    low, high = int(low), int(high)
    if low >= high:
        raise RuntimeError(
            f"randint(): random_ expects 'from' to be less than 'to', but "
            f"got from={low} >= to={high}")
    return _random("randint", (size,), "randint", low, high, dtype, device,
                   requires_grad, int64)


def arange(start, end=None, step=1, *, dtype=None, device=None,
           requires_grad=False):
    """Values from start (inclusive) to end (exclusive) by step; int64
    when all of them are ints, else float32.

    >>> import ampc
    >>> ampc.arange(4)
    tensor([0, 1, 2, 3])
    >>> ampc.arange(0, 1, 0.25)
    tensor([0.0000, 0.2500, 0.5000, 0.7500])
    """
    if end is None:
        start, end = 0, start
    vals = []
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, _TB):
            v = v.item()
        v = _check_number("arange", name, v, allow_none=False)
        if v != v or v in (float("inf"), float("-inf")):
            raise RuntimeError(
                f"arange(): argument '{name}' must be finite, got {v}")
        vals.append(v)
    start, end, step = vals
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            "arange(): upper bound and lower bound inconsistent with step "
            f"sign (start={start}, end={end}, step={step})")
    dtype = _check_dtype("arange", "dtype", dtype)
    if dtype is None:
        dtype = int64 if all(isinstance(v, int) for v in vals) else float32
    t = _C.arange(start, end, step, dtype, _device_str("arange", device))
    return _finish("arange", t, requires_grad)


# ----------------------------------------------------------------------------
# *_like

def _like(fn, t):
    if not isinstance(t, _TB):
        raise TypeError(
            f"{fn}(): argument 'input' must be a Tensor, but got "
            f"{type(t).__name__}")


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    _like("empty_like", input)
    return empty(input.shape, dtype=dtype or input.dtype,
                 device=device or _dev_str(input),
                 requires_grad=requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    """Zeros with the shape (and by default the dtype and device) of
    ``input``."""
    _like("zeros_like", input)
    return zeros(input.shape, dtype=dtype or input.dtype,
                 device=device or _dev_str(input),
                 requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    _like("ones_like", input)
    return ones(input.shape, dtype=dtype or input.dtype,
                device=device or _dev_str(input),
                requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None,
              requires_grad=False):
    _like("full_like", input)
    return full(input.shape, fill_value, dtype=dtype or input.dtype,
                device=device or _dev_str(input),
                requires_grad=requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    _like("rand_like", input)
    return rand(input.shape, dtype=dtype or input.dtype,
                device=device or _dev_str(input),
                requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    _like("randn_like", input)
    return randn(input.shape, dtype=dtype or input.dtype,
                 device=device or _dev_str(input),
                 requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, device=None):
    _like("randint_like", input)
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape),
                   dtype=dtype or input.dtype,
                   device=device or _dev_str(input))


# ----------------------------------------------------------------------------
# the random generator

def manual_seed(seed):
    """Seed the generator: every later random draw is repeatable.

    >>> import ampc
    >>> _ = ampc.manual_seed(42)
    >>> ampc.initial_seed()
    42
    """
    if seed.__class__ is _pybool or not isinstance(seed, numbers.Integral):
        raise TypeError(
            "manual_seed(): argument 'seed' must be an int, but got "
            f"{type(seed).__name__}")
    seed = int(seed)
    if not -(2**63) <= seed < 2**64:
        raise RuntimeError(
            f"manual_seed(): seed must be within the range [-2**63, 2**64), "
            f"got {seed}")
    _C.manual_seed(seed & (2**64 - 1))


def initial_seed():
    """The seed last given to ``manual_seed`` (or the default one)."""
    return _C.initial_seed()


def seed():
    """Seed the generator from the OS's entropy; returns the seed."""
    import os
    s = int.from_bytes(os.urandom(8), "little") >> 1
    manual_seed(s)
    return s


def _as_signed(v):
    return v - 2**64 if v >= 2**63 else v


def get_rng_state():
    """The generator's state, to restore later with ``set_rng_state`` (a
    checkpoint's exact resume): an int64 tensor (seed, offset), since
    ampc's generator is counter-based (Philox: the seed and how many
    numbers it has handed out).  PyTorch's is a uint8 tensor of its
    Mersenne Twister state; each library reads back only its own.

    >>> import ampc
    >>> state = ampc.get_rng_state()
    >>> a = ampc.rand(3)
    >>> ampc.set_rng_state(state)
    >>> bool((ampc.rand(3) == a).all())
    True
    """
    s, offset = _C.get_rng_state()
    return tensor([_as_signed(s), _as_signed(offset)], dtype=int64)


def set_rng_state(new_state):
    """Restore a state ``get_rng_state`` returned."""
    if not isinstance(new_state, _TB) or new_state.dtype is not int64 or \
            tuple(new_state.shape) != (2,):
        what = (f"{new_state.dtype} tensor of shape {list(new_state.shape)}"
                if isinstance(new_state, _TB) else type(new_state).__name__)
        raise TypeError(
            "set_rng_state(): expected the state ampc.get_rng_state() "
            f"returns (an int64 tensor of 2 values: seed, offset), got {what}")
    s, offset = (v & (2**64 - 1) for v in new_state.tolist())
    _C.set_rng_state((s, offset))


# ----------------------------------------------------------------------------
# functions over tensors

def _tensor_list(fn, tensors):
    if isinstance(tensors, _TB) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"{fn}(): argument 'tensors' must be a tuple or list of "
            f"Tensors, but got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{fn}(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, _TB):
            raise TypeError(
                f"{fn}(): expected Tensor as element {i} in argument 0, but "
                f"got {type(t).__name__}")
    return tuple(tensors)


def cat(tensors, dim=0):
    """Join tensors along an existing dim.

    >>> import ampc
    >>> ampc.cat([ampc.zeros(1), ampc.ones(2)])
    tensor([0., 1., 1.])
    """
    tensors = _tensor_list("cat", tensors)
    if dim.__class__ is not int:
        dim = _wrap_dim("cat", dim, 1)
    if (_mode.enabled and any(t.requires_grad for t in tensors)) or (
            _C.autocast_active()):
        return _ag.Cat.apply(*tensors, dim=dim)
    return _C.cat(tensors, dim)


concat = concatenate = cat


def stack(tensors, dim=0):
    """Join same-shape tensors along a new dim.

    >>> import ampc
    >>> ampc.stack([ampc.zeros(2), ampc.ones(2)]).shape
    ampc.Size([2, 2])
    """
    tensors = _tensor_list("stack", tensors)
    shape = tensors[0].shape
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != shape:
            raise RuntimeError(
                f"stack(): stack expects each tensor to be equal size, but "
                f"got {list(shape)} at entry 0 and {list(t.shape)} at entry "
                f"{i}")
    dim = _wrap_dim("stack", dim, len(shape) + 1)
    if (_mode.enabled and any(t.requires_grad for t in tensors)) or (
            _C.autocast_active()):
        return _ag.Stack.apply(*tensors, dim=dim)
    return _C.cat([t._unsqueeze(dim) for t in tensors], dim)


def _input(fn, x):
    if not isinstance(x, _TB):
        raise TypeError(
            f"{fn}(): argument 'input' (position 1) must be Tensor, not "
            f"{type(x).__name__}")
    return x


def flatten(input, start_dim=0, end_dim=-1):
    """``input.flatten(start_dim, end_dim)``.

    >>> import ampc
    >>> ampc.flatten(ampc.zeros(2, 3, 4), 1).shape
    ampc.Size([2, 12])
    """
    return _input("flatten", input).flatten(start_dim, end_dim)


def unflatten(input, dim, sizes):
    """``input.unflatten(dim, sizes)``.

    >>> import ampc
    >>> ampc.unflatten(ampc.zeros(2, 6), 1, (2, -1)).shape
    ampc.Size([2, 2, 3])
    """
    return _input("unflatten", input).unflatten(dim, sizes)


def isfinite(input):
    """A bool tensor: True where ``input`` is neither inf nor NaN.

    >>> import ampc
    >>> ampc.isfinite(ampc.tensor([1.0, float("inf"), float("nan")]))
    tensor([ True, False, False])
    """
    return _input("isfinite", input).isfinite()


def matmul(input, other):
    """The matrix product with ``torch.matmul``'s rules (1-D operands
    promoted, batch dims broadcast).

    >>> import ampc
    >>> ampc.matmul(ampc.ones(4, 2, 3), ampc.ones(3, 5)).shape
    ampc.Size([4, 2, 5])
    """
    return _input("matmul", input).matmul(other)


def is_tensor(obj):
    """True if obj is an ampc tensor."""
    return isinstance(obj, _TB)


def numel(input):
    return _input("numel", input).numel()


def _make_function(name):
    method = getattr(Tensor, name)

    def fn(input, *args, **kwargs):
        return method(_input(name, input), *args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``ampc.{name}(input, ...)`` is ``input.{name}(...)``."
    return fn


_FUNCTIONS = [
    "add", "sub", "subtract", "mul", "multiply", "div", "divide",
    "true_divide", "pow", "neg", "negative", "abs", "absolute", "sqrt",
    "rsqrt", "reciprocal", "square", "exp",
    "log", "relu", "sign", "clamp", "clip", "maximum", "minimum", "sum",
    "mean", "max", "min", "argmax", "argmin", "eq", "ne", "lt", "le", "gt",
    "ge", "isnan", "isinf", "reshape", "transpose", "swapaxes", "t",
    "permute", "unsqueeze", "squeeze", "clone", "detach", "any", "all",
    "mm", "bmm", "nonzero", "argwhere", "masked_select", "index_select", "gather",
    "index_put", "masked_fill", "scatter", "scatter_add", "scatter_reduce",
    "index_add",
    "take", "narrow", "isclose", "allclose", "equal", "logical_and",
    "logical_or", "logical_xor", "logical_not", "sigmoid", "tanh", "norm",
    "var", "std", "split", "chunk", "unbind", "tile", "flip", "floor",
    "ceil", "round", "trunc", "fix", "frac", "sin", "cos", "log1p", "expm1",
    "log2", "log10", "erf", "erfc", "tan", "asin", "arcsin", "acos",
    "arccos", "atan", "arctan", "sinh", "cosh", "asinh", "arcsinh", "acosh",
    "arccosh", "atanh", "arctanh", "atan2", "arctan2", "fmod",
]
# scans and sorts (ampc/_tensor_sort.py)
_FUNCTIONS += ["cumsum", "cumprod", "sort", "argsort", "msort", "topk"]


def remainder(input, other):
    """``input % other`` (PyTorch's remainder: the divisor's sign);
    ``input`` may be a Python number when ``other`` is a Tensor.

    >>> import ampc
    >>> ampc.remainder(ampc.tensor([-3, 3]), 2)
    tensor([1, 1])
    """
    if not isinstance(input, _TB) and isinstance(other, _TB):
        r = other.__rmod__(input)
        if r is NotImplemented:
            raise TypeError(
                "remainder(): argument 'input' must be a Tensor or a "
                f"number, not {type(input).__name__}")
        return r
    return _input("remainder", input).remainder(other)


# Kept out of this module's globals (they would shadow the builtins
# sum/max/min/abs/any/all here); ampc/__init__.py exports them.
FUNCTIONS = {name: _make_function(name) for name in _FUNCTIONS}
FUNCTIONS["remainder"] = remainder
