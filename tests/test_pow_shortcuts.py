"""pow's shortcuts for a Python-number exponent (as PyTorch's): x ** 2,
3, -2 as products, x ** 0.5 as sqrt, x ** -0.5 as 1 / sqrt, x ** -1 as
1 / x; a tensor exponent keeps plain pow.  And the public ops square,
rsqrt and reciprocal with their gradients."""
import math

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import device, to_device  # noqa: F401 (the fixture)
from helpers import (
    FLOAT_NAMES, assert_close, from_values, gradcheck, make,
    rand_values, strided, to64, to_torch,
)

SIZES = (1001, 37)

# exponent -> its float32 formula, as the kernels compute it
F32 = np.float32
FORMULAS = {
    2: lambda x: x * x,
    3: lambda x: x * x * x,
    -2: lambda x: F32(1) / (x * x),
    0.5: np.sqrt,
    -0.5: lambda x: F32(1) / np.sqrt(x),
    -1: lambda x: F32(1) / x,
}
EXPONENTS = tuple(FORMULAS) + (2.0, 3.0, -2.0, -1.0)
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, -2.0, -1.5, -1e-3,
           1e-3, 1.5, 3.0, 1e-30, 1e30, 1e-40, 3e38, -3e38, 300.0, 0.004]


def _special(dtype, values=SPECIAL):
    return from_values(ref.round_to(values, dtype), dtype)


def _formula(e):
    return FORMULAS[int(e) if float(e).is_integer() else e]


def _f32_expected(values, e, dtype):
    """The float32 formula on values (exact in dtype), rounded once to
    dtype, as float64."""
    with np.errstate(all="ignore"):
        r = _formula(e)(np.asarray(values, dtype=np.float32))
    return ref.round_to(r.astype(np.float64), dtype)


def _same(actual, expected):
    """Bit-equal float64 arrays (NaN matches NaN, and -0 is not +0)."""
    a, b = np.asarray(actual), np.asarray(expected)
    nan = np.isnan(a) & np.isnan(b)
    return a.shape == b.shape and bool(np.all(
        nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))


def _domain(e):
    return (0.05, 4.0) if e in (0.5, -0.5) else (-4.0, 4.0)


# ----------------------------------------------------------------------------
# values


@pytest.mark.parametrize("e", EXPONENTS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", ("contig", "step"))
def test_float32_matches_float64_reference(cpu_level, e, n, layout):
    rng = np.random.default_rng(n)
    lo, hi = _domain(e)
    v = rand_values((n,), "float32", rng, lo, hi)
    v[np.abs(v) < 0.05] = 0.5            # keep the reciprocals moderate
    out = make(v, "float32", layout) ** e
    assert out.dtype is ampc.float32
    with np.errstate(all="ignore"):
        assert_close(out, np.power(v, float(e)), "float32")
    # and the float32 formula, bit for bit, on every level
    assert _same(to64(out), _f32_expected(v, e, "float32"))


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("e", tuple(FORMULAS))
def test_16_bit_computes_in_float32_and_rounds_once(cpu_level, dtype, e):
    rng = np.random.default_rng(7)
    lo, hi = _domain(e)
    v = rand_values((1001,), dtype, rng, lo, hi)
    v = np.concatenate([v, ref.round_to([300.0, 0.004, 40.0, -40.0], dtype),
                        EDGES])
    out = make(v, dtype) ** e
    assert out.dtype.name == dtype
    assert _same(to64(out), _f32_expected(v, e, dtype))


def test_float16_intermediates_do_not_round():
    # 0.004 ** 2 is below float16's normals and 300 ** 2 above its range:
    # one float32 computation, then one rounding
    x = from_values([0.004, 300.0], "float16")
    r = to64(x ** -2)
    v = ref.round_to([0.004, 300.0], "float16")
    assert np.all(np.isfinite(r)) and np.all(r > 0)
    assert _same(r, ref.round_to(1.0 / (v * v), "float16"))
    assert to64(from_values([40.0], "float16") ** 3)[0] == 64000.0


def test_special_values_without_torch():
    x = ampc.tensor([-0.0, 0.0, -math.inf, math.inf, -1.0, math.nan])
    nan = math.nan
    want = {
        0.5: [-0.0, 0.0, nan, math.inf, nan, nan],
        -0.5: [-math.inf, math.inf, nan, 0.0, nan, nan],
        -1: [-math.inf, math.inf, -0.0, 0.0, -1.0, nan],
        2: [0.0, 0.0, math.inf, math.inf, 1.0, nan],
        3: [-0.0, 0.0, -math.inf, math.inf, -1.0, nan],
        -2: [math.inf, math.inf, 0.0, 0.0, 1.0, nan],
    }
    for e, w in want.items():
        assert _same(to64(x ** e), w), e


# ±0, ±inf, NaN and negatives: what each shortcut changes
EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, -2.0, -1.5]
# torch's CPU float16 pow takes no shortcut (plain powf: (-0) ** 0.5 = +0);
# ampc's, like torch's CUDA, takes them for every float dtype
TORCH_CPU_PLAIN = {("float16", 0.5), ("float16", -0.5)}


# torch's float32 CPU sqrt is not correctly rounded on every CPU (on AMD Zen 4
# sqrt(300) comes out 1 ulp low); ampc's is, as the NumPy tests above check
TORCH_SQRT_ULPS = {0.5: 1, -0.5: 1}


def _within_ulps(actual, expected, dtype, ulps):
    """Like _same, but finite values may differ by `ulps` units of dtype."""
    a, b = np.asarray(actual), np.asarray(expected)
    if ulps == 0 or dtype != "float32":
        return _same(a, b)
    with np.errstate(invalid="ignore"):   # inf - inf: those must be equal
        gap = np.abs(a - b) <= ulps * np.spacing(np.abs(b).astype(np.float32))
    sign = np.signbit(a) == np.signbit(b)
    nan = np.isnan(a) & np.isnan(b)
    return a.shape == b.shape and bool(np.all(nan | ((a == b) & sign) | gap))


def _torch_f32_rounded(torch, fn, x, dtype):
    """torch's float32 result rounded once to dtype, as float64."""
    r = fn(to_torch(torch, x).float()).to(getattr(torch, dtype))
    return r.to(torch.float64).numpy()


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_special_values_match_torch(cpu_level, dtype):
    torch = pytest.importorskip("torch")
    x = _special(dtype)
    edges = _special(dtype, EDGES)
    for e in EXPONENTS:
        got = x ** e
        assert got.dtype.name == dtype
        # every value: torch computing in float32, rounded once
        want = _torch_f32_rounded(torch, lambda t: t ** e, x, dtype)
        ulps = TORCH_SQRT_ULPS.get(e, 0)
        assert _within_ulps(to64(got), want, dtype, ulps), (dtype, e)
        if (dtype, e) not in TORCH_CPU_PLAIN:
            want = (to_torch(torch, edges) ** e).to(torch.float64)
            assert _same(to64(edges ** e), want.numpy()), (dtype, e)


@pytest.mark.parametrize("op", ("square", "rsqrt", "reciprocal"))
@pytest.mark.parametrize("dtype", FLOAT_NAMES + ("int64", "bool"))
def test_public_ops_match_torch(op, dtype):
    torch = pytest.importorskip("torch")
    vals = SPECIAL if dtype in FLOAT_NAMES else (
        [-3, -1, 0, 1, 2, 7] if dtype == "int64" else [0, 1, 1, 0])
    x = _special(dtype, vals)
    got = getattr(ampc, op)(x)
    want = getattr(torch, op)(to_torch(torch, x))
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    if dtype in FLOAT_NAMES:
        # torch's CPU rounds a short 16-bit rsqrt twice (its scalar path)
        want = _torch_f32_rounded(torch, getattr(torch, op), x, dtype)
        assert _same(to64(got), want)
        edges = from_values(EDGES, dtype)
        want = getattr(torch, op)(to_torch(torch, edges)).double().numpy()
        assert _same(to64(getattr(ampc, op)(edges)), want)
    else:
        assert _same(to64(got), want.to(torch.float64).numpy())


# ----------------------------------------------------------------------------
# dtypes: int and bool inputs, tensor exponents


def test_int_and_bool_inputs():
    i = ampc.tensor([1, 2, -3])
    sq = i ** 2
    assert sq.dtype is ampc.int64 and sq.tolist() == [1, 4, 9]
    assert (i ** 3).tolist() == [1, 8, -27]
    with pytest.raises(RuntimeError, match="negative integer powers"):
        i ** -1
    f = i ** 2.0
    assert f.dtype is ampc.float32 and f.tolist() == [1.0, 4.0, 9.0]
    assert (i ** -1.0).tolist() == pytest.approx([1.0, 0.5, -1 / 3])
    r = to64(i ** 0.5)
    assert r[0] == 1.0 and r[1] == np.float32(np.sqrt(2.0)) and \
        np.isnan(r[2])
    assert to64(i ** -0.5)[1] == np.float32(1) / np.sqrt(np.float32(2))
    b = ampc.tensor([True, False])
    assert (b ** 2).dtype is ampc.int64 and (b ** 2).tolist() == [1, 0]
    assert (b ** 0.5).dtype is ampc.float32
    assert (b ** -0.5).tolist() == [1.0, math.inf]
    assert ampc.square(i).dtype is ampc.int64
    assert ampc.square(b).tolist() == [1, 0]
    assert ampc.rsqrt(i).dtype is ampc.float32
    assert ampc.reciprocal(b).tolist() == [1.0, math.inf]


def test_a_bool_exponent_is_not_a_shortcut():
    x = ampc.tensor([-0.0, 2.0])
    assert _same(to64(x ** True), [-0.0, 2.0])
    assert _same(to64(x ** False), [1.0, 1.0])


# C99 pow at -0 and -inf, where the shortcuts differ
PLAIN_POW = {0.5: [0.0, math.inf], -0.5: [math.inf, 0.0],
             2.0: [0.0, math.inf], -1.0: [-math.inf, -0.0]}


@pytest.mark.parametrize("e", tuple(PLAIN_POW))
def test_tensor_exponent_keeps_plain_pow(e):
    x = ampc.tensor([-0.0, -math.inf, 1.5, 2.0])
    for exp in (ampc.tensor(e), ampc.full((4,), e)):
        got = to64(x ** exp)
        assert _same(got[:2], PLAIN_POW[e])
        assert np.allclose(got[2:], np.power([1.5, 2.0], e), rtol=1e-6)


def test_tensor_exponent_matches_torch():
    torch = pytest.importorskip("torch")
    x = from_values(SPECIAL, "float32")
    for e in (0.5, -0.5, -1.0):
        got = x ** ampc.tensor(e)
        want = to_torch(torch, x) ** torch.tensor(e)
        assert _same(to64(got)[:5], want[:5].double().numpy()), e


# ----------------------------------------------------------------------------
# out= and in place


def test_out_and_in_place(cpu_level):
    v = np.array([1.0, 2.0, 300.0, -0.0], np.float32)
    o = ampc.empty(4, dtype=ampc.float16)
    r = ampc._C.binary("pow", ampc.tensor(v), 2, out=o)
    assert r is o
    assert _same(to64(o), ref.round_to(v.astype(np.float64) ** 2,
                                       "float16"))
    o32 = ampc.empty(4)
    ampc._C.binary("pow", ampc.tensor(v), -0.5, out=o32)
    assert _same(to64(o32), _f32_expected(v, -0.5, "float32"))
    for e in FORMULAS:
        x = ampc.tensor(v)
        x **= e
        assert _same(to64(x), _f32_expected(v, e, "float32")), e
        h = from_values(v, "float16")
        h.pow_(e)
        assert _same(to64(h), _f32_expected(v, e, "float16")), e
    s = strided(v, "float32")
    s.pow_(3)
    assert _same(to64(s), _f32_expected(v, 3, "float32"))
    with pytest.raises(RuntimeError, match=r"pow\(\): result type Float"):
        ampc.tensor([4]).pow_(0.5)
    with pytest.raises(RuntimeError, match=r"pow\(\): output with shape"):
        ampc._C.binary("pow", ampc.tensor(v), 2, out=ampc.empty(3))


def test_public_in_place_ops():
    v = np.array([0.5, 2.0, -4.0], np.float32)
    for name, e in (("square_", 2), ("rsqrt_", -0.5),
                    ("reciprocal_", -1)):
        x = ampc.tensor(v)
        assert getattr(x, name)() is x
        assert _same(to64(x), _f32_expected(v, e, "float32")), name
    i = ampc.tensor([2, -3])
    assert i.square_().tolist() == [4, 9] and i.dtype is ampc.int64


# ----------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("e", EXPONENTS)
def test_pow_gradient(e):
    gradcheck(lambda a: a ** e, lambda a: a ** float(e), [(3, 5)],
              low=0.5, high=2.0)
    if e not in (0.5, -0.5):
        gradcheck(lambda a: a ** e, lambda a: a ** float(e), [(7,)],
                  low=-2.0, high=-0.5)


@pytest.mark.parametrize("op,fn", (
    ("square", np.square),
    ("rsqrt", lambda a: 1 / np.sqrt(a)),
    ("reciprocal", lambda a: 1 / a),
))
def test_public_op_gradient(op, fn):
    gradcheck(lambda a: getattr(ampc, op)(a), fn, [(4, 5)], low=0.5,
              high=2.0)
    gradcheck(lambda a: getattr(a, op)(), fn, [(9,)], low=0.5, high=2.0)


@pytest.mark.parametrize("op,d1,d2", (
    ("square", lambda x: 2 * x, lambda x: 2 + 0 * x),
    ("rsqrt", lambda x: -0.5 * x ** -1.5, lambda x: 0.75 * x ** -2.5),
    ("reciprocal", lambda x: -x ** -2.0, lambda x: 2 * x ** -3.0),
))
def test_second_derivatives(op, d1, d2):
    v = np.array([0.5, 1.0, 1.7, 3.0])
    x = ampc.tensor(v.astype(np.float32), requires_grad=True)
    g, = ampc.autograd.grad(getattr(x, op)().sum(), x, create_graph=True)
    assert g.grad_fn is not None
    assert_close(g, d1(v), "float32", rtol=1e-5, atol=1e-6)
    g2, = ampc.autograd.grad(g.sum(), x)
    assert_close(g2, d2(v), "float32", rtol=1e-5, atol=1e-6)


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    v = np.array([0.25, 0.5, 1.0, 1.7, 3.0], np.float32)
    for name in ("square", "rsqrt", "reciprocal"):
        x = ampc.tensor(v, requires_grad=True)
        t = torch.tensor(v, requires_grad=True)
        getattr(x, name)().sum().backward()
        getattr(t, name)().sum().backward()
        assert _same(to64(x.grad), t.grad.double().numpy()), name


# ----------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("op", ("square", "rsqrt", "reciprocal"))
def test_public_op_errors(op):
    for bad in (3.0, [1.0], "x", None):
        with pytest.raises(TypeError, match=rf"^{op}\(\): argument 'input'"):
            getattr(ampc, op)(bad)
    with pytest.raises(TypeError, match=rf"{op}\(\): argument"):
        ampc._C.unary(op, [1.0])


def test_in_place_errors_name_the_op():
    with pytest.raises(RuntimeError, match=r"^square_\(\): result type Long"):
        ampc.tensor([True]).square_()
    for op in ("rsqrt", "reciprocal"):
        with pytest.raises(RuntimeError,
                           match=rf"^{op}\(\): result type Float can't be "
                                 "cast to the desired output type Long"):
            getattr(ampc.tensor([4]), op + "_")()


def test_unknown_unary_op_is_a_clear_error():
    with pytest.raises(ValueError, match="unary"):
        ampc._C.unary("cubed", ampc.ones(2))


# ----------------------------------------------------------------------------
# CUDA: the same kernels on the GPU (skips without one)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_on_device(device, dtype):
    rng = np.random.default_rng(5)
    v = np.concatenate([rand_values((1001,), dtype, rng, 0.05, 4.0),
                        ref.round_to(SPECIAL, dtype)])
    x = to_device(from_values(v, dtype), device)
    for e in EXPONENTS:
        out = x ** e
        assert out.device.type == device and out.dtype.name == dtype
        assert _same(to64(out.cpu()), _f32_expected(v, e, dtype)), e
    for op in ("square", "rsqrt", "reciprocal"):
        y = x.detach().clone().requires_grad_(True)
        getattr(y, op)().sum().backward()
        assert y.grad.device.type == device
    o = to_device(ampc.empty(len(v), dtype=ampc.float16), device)
    ampc._C.binary("pow", x.float(), 3, out=o)
    assert _same(to64(o.cpu()), _f32_expected(v, 3, "float16"))
