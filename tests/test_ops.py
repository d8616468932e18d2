"""Every element-wise op, comparison, reduction and join against the float64
NumPy oracle (reference.py), for every dtype, on sizes that do not fill a
vector (1, 3, 7, 33, and 1000003 for a few ops), contiguous and strided, on
every CPU level the machine has; and against torch where it is installed.
"""
import math

import numpy as np
import pytest

import ampc
import reference as ref
from helpers import (
    ALL_NAMES, BIG, DTYPES, FLOAT_NAMES, SIZES, assert_close, check_op,
    from_values, make, rand_values, to64, to_torch, torch_or_skip,
)

BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY = ("neg", "abs", "sqrt", "exp", "log", "relu", "sign", "sigmoid",
         "tanh")
LAYOUTS = ("contig", "step", "t")

_BIN_FN = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b),
    "pow": lambda a, b: a ** b,
}


def _binary_ok(op, dtype):
    if dtype == "bool":
        return op in ("add", "mul", "maximum", "minimum")
    return True


def _bin_inputs(op, dtype):
    """Value ranges that keep each op finite and meaningful."""
    if op == "pow":
        return (0.5, 2.0) if dtype != "int64" else (0, 3)
    if op == "div" and dtype != "int64":
        return (0.5, 3.0)
    return (-3.0, 3.0)


def _shape(size, layout):
    return (size,) if layout != "t" else (max(size // 3, 1), 3)


# ----------------------------------------------------------------------------
# binary


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("op", BINARY)
def test_binary(cpu_level, op, dtype, size, layout):
    if not _binary_ok(op, dtype):
        pytest.skip(f"{op} of bool tensors is not defined")
    lo, hi = _bin_inputs(op, dtype)
    rng = np.random.default_rng(size)
    shape = _shape(size, layout)
    a = rand_values(shape, dtype, rng, lo, hi)
    b = rand_values(shape, dtype, rng, lo, hi)
    if op == "div" and dtype == "int64":
        b[b == 0] = 1
    out = _BIN_FN[op](make(a, dtype, layout), make(b, dtype, layout))
    out_dtype = "float32" if (op == "div" and dtype in ("int64", "bool")) \
        else dtype
    assert out.dtype.name == out_dtype
    assert out.shape == shape
    expected = ref.binary(op, a, b)
    if dtype == "bool":
        expected = expected != 0
    assert_close(out, expected, out_dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", ("add", "mul", "div"))
def test_binary_big(cpu_level, op, dtype):
    rng = np.random.default_rng(7)
    a = rand_values((BIG,), dtype, rng, 0.5, 2.0)
    b = rand_values((BIG,), dtype, rng, 0.5, 2.0)
    out = _BIN_FN[op](from_values(a, dtype), from_values(b, dtype))
    assert_close(out, ref.binary(op, a, b), dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_binary_big_strided(cpu_level, dtype):
    rng = np.random.default_rng(8)
    a = rand_values((BIG,), dtype, rng)
    b = rand_values((BIG,), dtype, rng)
    out = make(a, dtype, "step") - make(b, dtype, "step")
    assert_close(out, a - b, dtype)


BROADCAST = [
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((5, 1, 3), (1, 7, 1)),
    ((1,), (6, 5)),
    ((), (3, 2)),
    ((4, 0), (1,)),
]


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16", "int64"))
@pytest.mark.parametrize("shapes", BROADCAST)
@pytest.mark.parametrize("op", ("add", "sub", "mul", "maximum"))
def test_binary_broadcast(cpu_level, op, shapes, dtype):
    out, _ = check_op(shapes, lambda a, b: ref.binary(op, a, b),
                      _BIN_FN[op], dtype)
    assert out.shape == np.broadcast_shapes(*shapes)


@pytest.mark.parametrize("scalar", (2, -3, 2.5, True, 0.1))
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("op", ("add", "sub", "mul", "div"))
def test_binary_python_scalar(op, dtype, scalar):
    if dtype == "bool" and op == "sub":
        pytest.skip("subtraction with bool tensors is not defined")
    rng = np.random.default_rng(3)
    a = rand_values((7,), dtype, rng, 1, 4)
    t = from_values(a, dtype)
    out = _BIN_FN[op](t, scalar)
    rout = _BIN_FN[op](scalar, t)
    expected_dtype = ref.promote_scalar(dtype, scalar)
    if op == "div" and expected_dtype in ("int64", "bool"):
        expected_dtype = "float32"
    if op in ("add", "mul") and dtype == "bool" and isinstance(scalar, bool):
        expected_dtype = "bool"
    assert out.dtype.name == expected_dtype, (out.dtype, expected_dtype)
    assert rout.dtype.name == expected_dtype
    s = float(scalar)
    e = ref.binary(op, a, s)
    re = ref.binary(op, s, a)
    if expected_dtype == "bool":
        e, re = e != 0, re != 0
    assert_close(out, e, expected_dtype)
    assert_close(rout, re, expected_dtype)


@pytest.mark.parametrize("a,b", [
    ("float16", "float32"), ("bfloat16", "float32"), ("float16", "bfloat16"),
    ("int64", "float16"), ("bool", "int64"), ("bool", "bfloat16"),
    ("int64", "float32"),
])
@pytest.mark.parametrize("op", ("add", "mul", "sub"))
def test_binary_promotion(op, a, b):
    rng = np.random.default_rng(4)
    va = rand_values((5,), a, rng)
    vb = rand_values((5,), b, rng)
    if op == "sub" and "bool" in (a, b) and a == b:
        pytest.skip("bool - bool")
    out = _BIN_FN[op](from_values(va, a), from_values(vb, b))
    want = ref.promote(a, b)
    assert out.dtype.name == want
    assert ampc._C.result_type(from_values(va, a), from_values(vb, b)).name \
        == want
    assert_close(out, ref.binary(op, va, vb), want)


def test_binary_special_values():
    x = ampc.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0,
                     1.0])
    y = ampc.tensor([1.0, float("inf"), 1.0, 0.0, 0.0, 0.0])
    with np.errstate(all="ignore"):
        assert_close(x + y, to64(x) + to64(y))
        assert_close(x * y, to64(x) * to64(y))
        assert_close(x / y, to64(x) / to64(y))
        assert_close(x.maximum(y), np.maximum(to64(x), to64(y)))


def test_float16_overflow_to_inf():
    a = ampc.tensor([60000.0, -60000.0, 3e4], dtype=ampc.float16)
    out = a * 2
    assert to64(out).tolist() == [math.inf, -math.inf, 60000.0]


def test_int64_exact_large():
    a = ampc.tensor([2**62, -(2**62), 3])
    assert (a + 1).tolist() == [2**62 + 1, -(2**62) + 1, 4]
    assert (a * 2).tolist()[2] == 6


# ----------------------------------------------------------------------------
# comparisons


@pytest.mark.parametrize("layout", ("contig", "step"))
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("op", COMPARE)
def test_compare(cpu_level, op, dtype, layout):
    rng = np.random.default_rng(5)
    a = rand_values((33,), dtype, rng, -2, 2)
    b = rand_values((33,), dtype, rng, -2, 2)
    b[::3] = a[::3]                         # some ties
    ta, tb = make(a, dtype, layout), make(b, dtype, layout)
    out = getattr(ta, op)(tb)
    assert out.dtype is ampc.bool
    assert_close(out, ref.compare(op, a, b), "bool")
    sym = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__",
           "gt": "__gt__", "ge": "__ge__"}[op]
    assert_close(getattr(ta, sym)(tb), ref.compare(op, a, b), "bool")
    assert_close(getattr(ta, sym)(1), ref.compare(op, a, 1.0), "bool")


def test_compare_nan_and_broadcast():
    a = ampc.tensor([[float("nan")], [1.0]])
    b = ampc.tensor([1.0, float("nan"), 2.0])
    assert (a == b).tolist() == [[False] * 3, [True, False, False]]
    assert (a != b).tolist() == [[True] * 3, [False, True, True]]
    assert (a < b).shape == (2, 3)


def test_compare_big(cpu_level):
    rng = np.random.default_rng(6)
    a = rand_values((BIG,), "float16", rng)
    t = from_values(a, "float16")
    assert_close(t > 0.5, a > 0.5, "bool")


# ----------------------------------------------------------------------------
# unary


def _unary_range(op):
    return (0.1, 4.0) if op in ("sqrt", "log") else (-3.0, 3.0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", UNARY)
def test_unary(cpu_level, op, dtype, size, layout):
    lo, hi = _unary_range(op)
    rng = np.random.default_rng(size + 100)
    v = rand_values(_shape(size, layout), dtype, rng, lo, hi)
    out = getattr(make(v, dtype, layout), op)()
    assert out.dtype.name == dtype
    assert_close(out, ref.unary(op, v), dtype)


@pytest.mark.parametrize("op", ("neg", "abs", "sign", "relu"))
def test_unary_int64(cpu_level, op):
    v = np.array([-3, -1, 0, 2, 5], dtype=np.float64)
    out = getattr(from_values(v, "int64"), op)()
    assert out.dtype is ampc.int64
    assert_close(out, ref.unary(op, v), "int64")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", ("exp", "sqrt", "sigmoid", "tanh"))
def test_unary_big(cpu_level, op, dtype):
    rng = np.random.default_rng(9)
    v = rand_values((BIG,), dtype, rng, 0.0, 3.0)
    assert_close(getattr(from_values(v, dtype), op)(), ref.unary(op, v),
                 dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_unary_special_values(cpu_level, dtype):
    v = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1.0, 1.0])
    t = from_values(v, dtype)
    for op in UNARY:
        if op == "sign":
            continue        # NaN: see test_sign_of_nan_is_zero
        assert_close(getattr(t, op)(), ref.unary(op, v), dtype,
                     msg=f"{op}: ")
    assert_close(t[:2].sign(), [1.0, -1.0], dtype)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_sign_of_nan_is_zero(cpu_level, dtype):
    # PyTorch: torch.sign(torch.tensor(float("nan"))) -> tensor(0.)
    t = from_values(np.array([np.nan, -0.0, 0.0, 2.0]), dtype)
    assert to64(t.sign()).tolist() == [0.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("layout", ("contig", "step"))
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_isfinite(cpu_level, dtype, layout):
    v = np.array([np.inf, -np.inf, np.nan, 0.0, 1.5, -65536.0, 1e30] * 5)
    if dtype in ("int64", "bool"):
        v = np.array([0, 1, -2, 3] * 9, dtype=np.float64)
    t = make(ref.round_to(v, dtype), dtype, layout)
    out = t.isfinite()
    assert out.dtype is ampc.bool
    assert_close(out, np.isfinite(ref.round_to(v, dtype)), "bool")
    assert_close(ampc.isfinite(t), np.isfinite(ref.round_to(v, dtype)),
                 "bool")


def test_isfinite_big_float16(cpu_level):
    v = np.ones(BIG)
    v[12345] = np.inf
    v[BIG - 1] = np.nan
    out = from_values(v, "float16").isfinite()
    assert_close(out, np.isfinite(v), "bool")


@pytest.mark.parametrize("dtype", FLOAT_NAMES + ("int64",))
@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (None, 0.5), (-0.5, None),
                                   (0, 2)])
def test_clamp(cpu_level, dtype, lo, hi):
    rng = np.random.default_rng(10)
    v = rand_values((33,), dtype, rng, -3, 3)
    if dtype == "int64" and any(isinstance(x, float) for x in (lo, hi)):
        pytest.skip("float bounds on int64")
    out = from_values(v, dtype).clamp(lo, hi)
    assert out.dtype.name == dtype
    assert_close(out, ref.clamp(v, lo, hi), dtype)
    t = from_values(v, dtype)
    assert t.clamp_(lo, hi) is t
    assert_close(t, ref.clamp(v, lo, hi), dtype)


def test_clamp_nan_stays():
    t = ampc.tensor([float("nan"), 5.0, -5.0])
    assert_close(t.clamp(-1, 1), [np.nan, 1.0, -1.0])


# ----------------------------------------------------------------------------
# reductions


REDUCE_SHAPES = [(1,), (7,), (33,), (3, 5), (2, 3, 4), (4, 1, 6)]


@pytest.mark.parametrize("layout", ("contig", "t"))
@pytest.mark.parametrize("shape", REDUCE_SHAPES)
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", ("sum", "mean", "max", "min"))
def test_reduce_all(cpu_level, op, dtype, shape, layout):
    rng = np.random.default_rng(11)
    v = rand_values(shape, dtype, rng)
    t = make(v, dtype, layout)
    out = getattr(t, op)()
    assert out.shape == ()
    assert out.dtype.name == dtype
    assert_close(out, ref.reduce(op, v), dtype, k=v.size)


@pytest.mark.parametrize("keepdim", (False, True))
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4), (4, 1, 6)])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", ("sum", "mean"))
def test_reduce_dim(cpu_level, op, dtype, shape, keepdim):
    rng = np.random.default_rng(12)
    v = rand_values(shape, dtype, rng)
    t = from_values(v, dtype)
    for dim in list(range(-len(shape), len(shape))) + [(0, -1)]:
        out = getattr(t, op)(dim, keepdim=keepdim)
        e = ref.reduce(op, v, dim if isinstance(dim, int) else tuple(
            d % len(shape) for d in dim), keepdim)
        assert out.shape == e.shape, (dim, out.shape, e.shape)
        assert_close(out, e, dtype, k=v.size, msg=f"dim={dim}: ")


@pytest.mark.parametrize("keepdim", (False, True))
@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("which", ("max", "min"))
def test_max_min_dim(cpu_level, which, dtype, keepdim):
    rng = np.random.default_rng(13)
    v = rand_values((4, 5, 3), dtype, rng, -2, 2)   # small range: ties
    t = from_values(v, dtype)
    for dim in (0, 1, 2, -1):
        r = getattr(t, which)(dim, keepdim=keepdim)
        values, indices = r
        assert r.values is values and r.indices is indices
        assert indices.dtype is ampc.int64
        assert_close(values, ref.reduce(which, v, dim, keepdim), dtype)
        assert_close(indices, ref.reduce("arg" + which, v, dim, keepdim),
                     "int64")


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("op", ("argmax", "argmin"))
def test_argmax_argmin(cpu_level, op, dtype):
    rng = np.random.default_rng(14)
    v = rand_values((6, 7), dtype, rng, -2, 2)
    t = from_values(v, dtype)
    out = getattr(t, op)()
    assert out.shape == () and out.dtype is ampc.int64
    assert out.item() == ref.reduce(op, v)
    for dim in (0, 1):
        for keepdim in (False, True):
            assert_close(getattr(t, op)(dim, keepdim),
                         ref.reduce(op, v, dim, keepdim), "int64")


def test_max_nan_wins():
    t = ampc.tensor([[1.0, float("nan"), 3.0], [4.0, 2.0, 1.0]])
    assert math.isnan(t.max().item())
    assert t.argmax().item() == 1
    v, i = t.max(1)
    assert math.isnan(v[0].item()) and v[1].item() == 4.0
    assert i.tolist() == [1, 0]


@pytest.mark.parametrize("dtype", ("int64", "bool"))
def test_sum_int_bool_to_int64(cpu_level, dtype):
    rng = np.random.default_rng(15)
    v = rand_values((5, 7), dtype, rng)
    t = from_values(v, dtype)
    out = t.sum()
    assert out.dtype is ampc.int64
    assert out.item() == int(v.sum())
    assert_close(t.sum(1), v.sum(1), "int64")
    assert t.sum(0).dtype is ampc.int64


def test_sum_dtype_keyword():
    t = ampc.ones(4096, dtype=ampc.float16)
    assert t.sum(dtype=ampc.float32).dtype is ampc.float32
    assert t.sum(dtype=ampc.float32).item() == 4096.0


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_low_precision_accumulates_in_float32(cpu_level, dtype):
    # fp16 accumulation would stop at 2048 (2048 + 1 rounds back to 2048);
    # bf16 at 256.
    t = ampc.ones(4096, dtype=DTYPES[dtype])
    assert t.sum().item() == 4096.0
    assert t.view(64, 64).sum(1).tolist() == [64.0] * 64
    assert t.mean().item() == 1.0


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_reduce_big(cpu_level, dtype):
    rng = np.random.default_rng(16)
    v = rand_values((BIG,), dtype, rng, 0.0, 1.0)
    t = from_values(v, dtype)
    assert_close(t.mean(), v.mean(), dtype, k=BIG)
    assert t.max().item() == v.max()
    assert t.argmax().item() == int(np.argmax(v))


def test_reduce_big_sum_float32(cpu_level):
    rng = np.random.default_rng(17)
    v = rand_values((BIG,), "float32", rng)
    assert_close(from_values(v, "float32").sum(), v.sum(), "float32",
                 atol=1e-2, rtol=1e-5)


def test_mean_of_int_raises():
    with pytest.raises(RuntimeError, match="mean"):
        ampc.arange(5).mean()


def test_any_all():
    t = ampc.tensor([[0.0, 1.0], [0.0, 0.0]])
    assert t.any().item() is True and t.all().item() is False
    assert t.any(1).tolist() == [True, False]
    assert ampc.ones(0).all().item() is True


# ----------------------------------------------------------------------------
# joins


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_cat(cpu_level, dtype):
    rng = np.random.default_rng(18)
    a = rand_values((2, 3), dtype, rng)
    b = rand_values((4, 3), dtype, rng)
    c = rand_values((2, 5), dtype, rng)
    out = ampc.cat([from_values(a, dtype), from_values(b, dtype)])
    assert_close(out, np.concatenate([a, b]), dtype)
    out = ampc.cat((from_values(a, dtype), make(c, dtype, "step")), dim=1)
    assert_close(out, np.concatenate([a, c], 1), dtype)
    out = ampc.cat([from_values(a, dtype), from_values(c, dtype)], dim=-1)
    assert out.shape == (2, 8)


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_stack(cpu_level, dtype):
    rng = np.random.default_rng(19)
    vs = [rand_values((2, 3), dtype, rng) for _ in range(3)]
    for dim in (0, 1, 2, -1):
        out = ampc.stack([make(v, dtype, "t") for v in vs], dim)
        assert_close(out, np.stack(vs, dim), dtype)


def test_cat_single_and_empty_pieces():
    a = ampc.ones(2, 3)
    assert ampc.cat([a]).shape == (2, 3)
    assert ampc.cat([a, ampc.zeros(0, 3)]).shape == (2, 3)


# ----------------------------------------------------------------------------
# in-place ops


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", ("add_", "sub_", "mul_", "div_"))
def test_inplace_binary(cpu_level, op, dtype):
    rng = np.random.default_rng(20)
    a = rand_values((3, 5), dtype, rng, 0.5, 2)
    b = rand_values((5,), dtype, rng, 0.5, 2)
    t = from_values(a, dtype)
    v0 = t._version
    ptr = t.data_ptr()
    r = getattr(t, op)(from_values(b, dtype))
    assert r is t and t.data_ptr() == ptr
    assert t._version > v0
    assert_close(t, ref.binary(op[:-1], a, b), dtype)
    t2 = from_values(a, dtype)
    getattr(t2, op)(2)
    assert_close(t2, ref.binary(op[:-1], a, 2.0), dtype)


def test_inplace_operators_and_views():
    base = ampc.zeros(4, 4)
    v = base[1:3, ::2]
    v += 1
    v *= 3
    v -= 1
    v /= 2
    expected = np.zeros((4, 4))
    expected[1:3, ::2] = 1.0
    assert_close(base, expected)
    assert base._version == v._version


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
def test_inplace_with_a_broadcast_view_of_itself(cpu_level, dtype):
    """An input that is a broadcast prefix of the output (same data pointer
    and strides, fewer elements: x[:1], x[:, :1]) is read before any
    element is written."""
    a = np.arange(35, dtype=np.float64).reshape(5, 7)
    x = from_values(a, dtype)
    x.sub_(x[:1])
    assert_close(x, a - a[:1])
    y = from_values(a, dtype)
    y.add_(y[:, :1])
    assert_close(y, a + a[:, :1])
    z = from_values(a, dtype)
    z.mul_(z[:1, :1])
    assert_close(z, a * a[0, 0])


def test_add_alpha():
    a = ampc.ones(3)
    b = ampc.tensor([1.0, 2.0, 3.0])
    assert_close(a.add(b, alpha=2), [3.0, 5.0, 7.0])
    assert_close(a.sub(b, alpha=0.5), [0.5, 0.0, -0.5])
    a.add_(b, alpha=-1)
    assert_close(a, [0.0, -1.0, -2.0])


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_fill_zero_copy(dtype):
    t = ampc.empty(3, 4, dtype=DTYPES[dtype])
    assert t.fill_(1) is t
    assert_close(t, np.ones((3, 4)), dtype)
    assert t.zero_() is t
    assert_close(t, np.zeros((3, 4)), dtype)
    src = from_values(np.arange(4.0), "float32")
    assert t.copy_(src) is t       # broadcast + cast
    assert_close(t, ref.round_to(np.broadcast_to(np.arange(4.0), (3, 4)),
                                 dtype), dtype)


def test_inplace_unary():
    t = ampc.tensor([-1.0, 4.0])
    t.abs_().sqrt_()
    assert t.tolist() == [1.0, 2.0]
    t.neg_().relu_()
    assert t.tolist() == [0.0, 0.0]
    t.exp_().log_()
    assert t.tolist() == [0.0, 0.0]


def test_inplace_int_with_float_raises():
    t = ampc.ones(3, dtype=ampc.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.add_(1.5)


# ----------------------------------------------------------------------------
# arange, random


@pytest.mark.parametrize("args,kwargs", [
    ((5,), {}), ((2, 9, 3), {}), ((0.0, 1.0, 0.1), {}), ((-3, 3), {}),
    ((10, 0, -2), {}), ((5,), {"dtype": ampc.float16}),
    ((0, 2, 0.25), {"dtype": ampc.bfloat16}),
])
def test_arange(cpu_level, args, kwargs):
    t = ampc.arange(*args, **kwargs)
    e = np.arange(*args)
    dt = kwargs.get("dtype")
    name = dt.name if dt else ("int64" if e.dtype.kind == "i" else "float32")
    assert t.dtype.name == name
    assert t.shape == e.shape
    assert_close(t, e, name)


def test_arange_big(cpu_level):
    t = ampc.arange(BIG)
    assert t.shape == (BIG,)
    assert t[-1].item() == BIG - 1
    assert t.sum().item() == BIG * (BIG - 1) // 2


def test_random_repeatable_and_distributed():
    ampc.manual_seed(123)
    a = ampc.randn(100000)
    u = ampc.rand(100000)
    ampc.manual_seed(123)
    b = ampc.randn(100000)
    assert (a == b).all().item()
    assert abs(a.mean().item()) < 0.02
    assert abs(to64(a).std() - 1) < 0.02
    assert 0 <= u.min().item() and u.max().item() < 1
    assert abs(u.mean().item() - 0.5) < 0.01
    assert ampc.initial_seed() == 123


def test_random_kinds():
    ampc.manual_seed(1)
    r = ampc.randint(3, 7, (1000,))
    assert r.dtype is ampc.int64
    assert r.min().item() == 3 and r.max().item() == 6
    r = ampc.randint(5, (10,))
    assert 0 <= r.min().item() and r.max().item() < 5
    t = ampc.empty(10000).uniform_(-2, 2)
    assert -2 <= t.min().item() and t.max().item() < 2
    t = ampc.empty(10000).normal_(3, 0.5)
    assert abs(t.mean().item() - 3) < 0.05
    t = ampc.empty(10000).bernoulli_(0.25)
    assert set(np.unique(to64(t))) <= {0.0, 1.0}
    assert abs(t.mean().item() - 0.25) < 0.03
    s = ampc.zeros(4, 6)[:, ::2].normal_()     # non-contiguous target
    assert s.abs().sum().item() > 0


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_random_low_precision(dtype):
    ampc.manual_seed(2)
    t = ampc.randn(1000, dtype=DTYPES[dtype])
    assert t.dtype.name == dtype
    assert abs(t.float().mean().item()) < 0.15
    assert ampc.rand(7, dtype=DTYPES[dtype]).isfinite().all().item()


def test_random_independent_of_level():
    vals = []
    for level in ampc.backends.cpu.levels():
        prev = ampc._C.cpu_capability()
        ampc._C._set_cpu_level(level)
        try:
            ampc.manual_seed(5)
            vals.append(to64(ampc.randn(1001)))
        finally:
            ampc._C._set_cpu_level(prev)
    for v in vals[1:]:
        assert np.array_equal(v, vals[0])


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_normal_draws_identical_on_every_level(dtype):
    """The AVX-512 normal kernel (16 Philox blocks, 64 values a step) gives
    ref's bits: sizes around its steps and the generator's offset at every
    position within a Philox block; the chunks that run on several threads
    (over 16384 elements) included."""
    levels = ampc.backends.cpu.levels()
    prev = ampc._C.cpu_capability()
    try:
        for n in (1, 3, 63, 64, 65, 129, 4095, 4097, 20001):
            for skip in (0, 1, 2, 3, 6):
                outs = []
                for level in levels:
                    ampc._C._set_cpu_level(level)
                    ampc.manual_seed(17)
                    ampc.randn(skip)            # moves the offset
                    t = ampc.empty(n, dtype=DTYPES[dtype]).normal_(0.25, 3.0)
                    outs.append(to64(t))
                for level, o in zip(levels[1:], outs[1:]):
                    assert np.array_equal(o, outs[0]), (level, n, skip)
    finally:
        ampc._C._set_cpu_level(prev)


# ----------------------------------------------------------------------------
# against torch (skipped cleanly where torch is not installed)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("op", ("add", "sub", "mul", "div", "maximum",
                                "minimum"))
def test_binary_vs_torch(cpu_level, op, dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(21)
    a = from_values(rand_values((3, 33), dtype, rng, 0.5, 3), dtype)
    b = from_values(rand_values((33,), dtype, rng, 0.5, 3), dtype)
    ours = _BIN_FN[op](a, b)
    theirs = getattr(torch, op)(to_torch(torch, a), to_torch(torch, b))
    # one correctly rounded float32 op, then one RNE narrowing: bit-exact
    assert_close(ours, theirs.double().numpy(), dtype, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("op", UNARY)
def test_unary_vs_torch(op, dtype):
    torch = torch_or_skip()
    lo, hi = _unary_range(op)
    rng = np.random.default_rng(22)
    a = from_values(rand_values((33,), dtype, rng, lo, hi), dtype)
    ours = getattr(a, op)()
    theirs = getattr(torch, op)(to_torch(torch, a))
    assert_close(ours, theirs.double().numpy(), dtype)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("op", ("sum", "mean", "max", "min", "argmax",
                                "argmin"))
def test_reduce_vs_torch(op, dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(23)
    a = from_values(rand_values((5, 7), dtype, rng), dtype)
    ta = to_torch(torch, a)
    assert_close(getattr(a, op)(), getattr(ta, op)().double().numpy(),
                 k=35)
    for dim in (0, 1):
        ours = getattr(a, op)(dim)
        theirs = getattr(ta, op)(dim)
        if op in ("max", "min"):
            assert_close(ours.values, theirs.values.double().numpy(), k=7)
            assert ours.indices.tolist() == theirs.indices.tolist()
        else:
            assert_close(ours, theirs.double().numpy(), k=7)


@pytest.mark.parametrize("scalar", (2, 2.5, True))
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_promotion_vs_torch(dtype, scalar):
    torch = torch_or_skip()
    a = from_values(np.array([1.0, 0.0, 1.0]), dtype)
    ta = to_torch(torch, a)
    for op in ("add", "mul", "div"):
        if dtype == "bool" and op == "sub":
            continue
        ours = _BIN_FN[op](a, scalar)
        theirs = _BIN_FN[op](ta, scalar)
        assert ours.dtype.name == str(theirs.dtype).split(".")[1], op
    for other in ALL_NAMES:
        b = from_values(np.array([1.0, 1.0, 0.0]), other)
        ours = a * b
        theirs = ta * to_torch(torch, b)
        assert ours.dtype.name == str(theirs.dtype).split(".")[1]
        # a 0-d tensor promotes like a scalar of its category
        z = from_values(np.array(1.0), other)
        ours = a + z
        theirs = ta + to_torch(torch, z)
        assert ours.dtype.name == str(theirs.dtype).split(".")[1], other
