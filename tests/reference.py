"""The float64 NumPy oracle: what every tensor op should compute, before
rounding to the output dtype, plus the dtype tools (float16 through NumPy,
bfloat16 through the uint32 bit formula of design.md §9) and PyTorch's
type-promotion rules.  Numerics here are on purpose; nowhere else.

Dtypes are named by string ('float32', 'float16', 'bfloat16', 'int64',
'bool') so that this module does not import ampc.
"""
import numpy as np

FLOATS = ("float32", "float16", "bfloat16")
ALL = ("float32", "float16", "bfloat16", "int64", "bool")

# machine epsilon (2^-mantissa bits) per dtype
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7,
       "int64": 0.0, "bool": 0.0}

# ----------------------------------------------------------------------------
# rounding to a dtype


def bf16_bits(x):
    """float32 values -> bfloat16 bit patterns (uint16), round to nearest
    even; NaN stays NaN (quiet, sign kept)."""
    with np.errstate(over="ignore"):
        x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(x)
    quiet = ((u >> 16) | 0x40)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_to_f32(bits):
    """bfloat16 bit patterns (uint16) -> float32 values (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def round_bf16(x):
    """float64/float32 values rounded to bfloat16, as float64.  Like
    PyTorch, float64 goes through float32 first."""
    return bf16_to_f32(bf16_bits(np.asarray(x, dtype=np.float32))) \
        .astype(np.float64)


def round_to(x, dtype):
    """Round float64 values to ``dtype`` and return them as float64 (the
    values a tensor of that dtype can hold)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "float32":
            return x.astype(np.float32).astype(np.float64)
        if dtype == "float16":
            return x.astype(np.float16).astype(np.float64)
        if dtype == "bfloat16":
            return round_bf16(x)
    if dtype == "int64":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(np.int64).astype(np.float64)
    if dtype == "bool":
        return (x != 0).astype(np.float64)
    raise ValueError(dtype)


def cast(x, src, dst):
    """The values of casting a ``src`` tensor with values x (float64) to
    ``dst``: floats round to nearest even (float16 overflows to inf), float
    to int truncates toward zero, anything to bool is x != 0."""
    x = np.asarray(x, dtype=np.float64)
    if dst in FLOATS:
        if src == "int64":
            # int64 -> float goes int64 -> float32 -> narrow in ampc and torch
            x = x.astype(np.float32).astype(np.float64)
        return round_to(x, dst)
    return round_to(x, dst)


# ----------------------------------------------------------------------------
# type promotion (PyTorch's rules for the five dtypes)

_CATEGORY = {"bool": 0, "int64": 1, "float16": 2, "bfloat16": 2,
             "float32": 2}


def promote(a, b):
    """Result dtype of two tensors of dtypes a and b (same ndim class)."""
    if a == b:
        return a
    ca, cb = _CATEGORY[a], _CATEGORY[b]
    if ca != cb:
        return a if ca > cb else b
    # both float, different: float16 with bfloat16 -> float32, else wider
    return "float32"


def scalar_kind(x):
    if isinstance(x, bool):
        return 0
    if isinstance(x, int):
        return 1
    return 2


def promote_scalar(t, s):
    """Result dtype of a tensor of dtype t with a Python scalar s."""
    ks = scalar_kind(s)
    if ks > _CATEGORY[t]:
        return "int64" if ks == 1 else "float32"
    return t


# ----------------------------------------------------------------------------
# ops (float64 in, float64 out)

def binary(op, a, b):
    with np.errstate(all="ignore"):
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":
            return a / b
        if op == "maximum":
            return np.maximum(a, b)
        if op == "minimum":
            return np.minimum(a, b)
        if op == "pow":
            return np.power(a, b)
    raise ValueError(op)


def compare(op, a, b):
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less,
            "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}[op](a, b)


def unary(op, a):
    with np.errstate(all="ignore"):
        if op == "neg":
            return -a
        if op == "abs":
            return np.abs(a)
        if op == "sqrt":
            return np.sqrt(a)
        if op == "exp":
            return np.exp(a)
        if op == "log":
            return np.log(a)
        if op == "relu":
            return np.where(np.isnan(a), a, np.maximum(a, 0))
        if op == "sign":
            return np.where(np.isnan(a), 0.0, np.sign(a))
        if op == "isfinite":
            return np.isfinite(a)
    raise ValueError(op)


def clamp(a, lo, hi):
    out = a
    if lo is not None:
        out = np.where(np.isnan(out), out, np.maximum(out, lo))
    if hi is not None:
        out = np.where(np.isnan(out), out, np.minimum(out, hi))
    return out


def _first_arg(a, dim, which):
    """argmax/argmin with NaN winning and the first occurrence kept."""
    nan = np.isnan(a)
    if dim is None:
        flat = a.ravel()
        fnan = nan.ravel()
        if fnan.any():
            return np.int64(np.argmax(fnan))
        return np.int64(np.argmax(flat) if which == "max"
                        else np.argmin(flat))
    idx = np.argmax(a, axis=dim) if which == "max" else \
        np.argmin(a, axis=dim)
    if nan.any():
        has = nan.any(axis=dim)
        idx = np.where(has, np.argmax(nan, axis=dim), idx)
    return idx


def reduce(op, a, dim=None, keepdim=False):
    """sum/mean/max/min/argmax/argmin like PyTorch (NaN wins max/min)."""
    axis = dim
    if op == "sum":
        return np.sum(a, axis=axis, keepdims=keepdim)
    if op == "mean":
        with np.errstate(all="ignore"):
            return np.mean(a, axis=axis, keepdims=keepdim)
    if op in ("max", "min"):
        f = np.max if op == "max" else np.min
        return f(a, axis=axis, keepdims=keepdim)    # NaN propagates
    if op in ("argmax", "argmin"):
        r = _first_arg(a, dim, op[3:])
        if keepdim and dim is not None:
            r = np.expand_dims(r, dim)
        elif keepdim:
            r = np.reshape(r, (1,) * a.ndim)
        return r
    raise ValueError(op)


# ----------------------------------------------------------------------------
# tolerances

def tolerance(dtype, k=1):
    """(rtol, atol) for results rounded to dtype after a k-term float32
    computation: a few ulps of the dtype, growing like sqrt(k)."""
    if dtype in ("int64", "bool"):
        return 0.0, 0.0
    eps = EPS[dtype]
    r = 2.0 * eps + 8 * 2.0 ** -24 * np.sqrt(k)
    return r, r
