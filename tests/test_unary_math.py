"""sin, cos, log1p, expm1, log2, log10, erf and erfc (csrc/trig_math.h,
csrc/elementwise_math.h, the _C.unary ops, ampc/_tensor_ops.py): within 4
ulp of float64 NumPy on every CPU level and float dtype (16-bit ones
computed in float32, rounded once), over random data, a sweep of float32
bit patterns and the special values; huge sin/cos arguments; PyTorch's
integer, in-place, gradient and second-derivative rules; torch where
installed; the GPU (marked cuda) against the CPU bit for bit."""
import math

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import (FLOAT_NAMES, from_values, gradcheck, strided, to64,
                     torch_or_skip)

NUMPY = {"sin": np.sin, "cos": np.cos, "log1p": np.log1p, "expm1": np.expm1,
         "log2": np.log2, "log10": np.log10,
         "erf": np.vectorize(math.erf, otypes=[np.float64]),
         "erfc": np.vectorize(math.erfc, otypes=[np.float64])}
OPS = sorted(NUMPY)
# significand bits and smallest normal exponent of each float dtype
FORMAT = {"float32": (24, -126), "float16": (11, -14), "bfloat16": (8, -126)}
MAX_ULP = 4.0


def _want(op, x):
    with np.errstate(all="ignore"):
        return NUMPY[op](np.asarray(x, dtype=np.float64))


def _ulps(got, want, dtype="float32"):
    """|got - want| in units of dtype's ulp at want (want rounded to dtype
    first where it overflows or underflows); 0 where both are the same
    non-finite value or NaN, inf where only one is."""
    bits, emin = FORMAT[dtype]
    want_r = ref.round_to(want, dtype)
    both_nan = np.isnan(got) & np.isnan(want_r)
    same = (got == want_r) | both_nan
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.abs(want)))
        e = np.maximum(np.where(np.isfinite(e), e, emin), emin)
        err = np.abs(got - want) / np.exp2(e - bits + 1)
    err = np.where(np.isfinite(want_r) & np.isfinite(got), err, np.inf)
    return np.where(same, 0.0, err)


def _domain(op, rng, n):
    """Odd-length random float64 values where op is defined, at several
    scales."""
    if op in ("log2", "log10"):
        return np.exp(rng.uniform(-80.0, 80.0, n))
    if op == "log1p":
        return np.concatenate([np.exp(rng.uniform(-60.0, 60.0, n // 2)),
                               -rng.uniform(0.0, 1.0, n - n // 2)])
    if op == "expm1":
        return rng.normal(scale=20.0, size=n) * rng.uniform(0, 1, n) ** 4
    if op in ("erf", "erfc"):
        return rng.normal(scale=3.0, size=n)
    return rng.normal(scale=1e3, size=n) * rng.uniform(0, 1, n) ** 3


def _check(op, got, x, dtype):
    err = _ulps(to64(got), _want(op, x), dtype)
    worst = int(np.argmax(err))
    # a 16-bit result is the float32 one rounded once more: within 1 ulp
    limit = MAX_ULP if dtype == "float32" else 1.0
    assert err[worst] <= limit, (
        f"{op}({x[worst]!r}) = {to64(got)[worst]!r}, want "
        f"{_want(op, x)[worst]!r}: {err[worst]:.2f} ulp")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_random_values(cpu_level, op, dtype):
    rng = np.random.default_rng(len(op))
    for n in (1, 7, 33, 1031):
        x = ref.round_to(_domain(op, rng, n), dtype)
        _check(op, getattr(ampc, op)(from_values(x, dtype)), x, dtype)
    # non-contiguous (every other element of a bigger tensor)
    x = ref.round_to(_domain(op, rng, 257), dtype)
    a = strided(x, dtype)
    assert not a.is_contiguous()
    _check(op, getattr(a, op)(), x, dtype)


def _bit_patterns():
    """Float32 values spread over every exponent: random bit patterns and
    a stride through all of them (subnormals, +-0, +-inf and NaNs
    included)."""
    rng = np.random.default_rng(7)
    u = np.concatenate([rng.integers(0, 2 ** 32, 60000, dtype=np.uint64),
                        np.arange(0, 2 ** 32, 65537, dtype=np.uint64),
                        np.array([0, 2 ** 31, 0x7f800000, 0xff800000,
                                  0x7fc00000, 1, 0x80000001, 0x7f7fffff,
                                  0xff7fffff], dtype=np.uint64)])
    with np.errstate(invalid="ignore"):     # signalling NaNs quieten
        return u.astype(np.uint32).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("op", OPS)
def test_ulp_sweep_over_float32(cpu_level, op):
    x = _bit_patterns()
    got = to64(getattr(ampc, op)(from_values(x, "float32")))
    err = _ulps(got, _want(op, x))
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP, (
        f"{op}({x[worst]!r}) = {got[worst]!r}, want "
        f"{_want(op, x)[worst]!r}: {err[worst]:.2f} ulp")
    # the sign of zero too
    zero = _want(op, x) == 0
    np.testing.assert_array_equal(np.signbit(got[zero]),
                                  np.signbit(_want(op, x)[zero]))


SPECIAL = [
    ("sin", [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45],
     [0.0, -0.0, np.nan, np.nan, np.nan, 1e-45, -1e-45]),
    ("cos", [0.0, -0.0, np.inf, -np.inf, np.nan], [1.0, 1.0, np.nan, np.nan,
                                                   np.nan]),
    ("log1p", [0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan, 1e-45],
     [0.0, -0.0, -np.inf, np.nan, np.inf, np.nan, np.nan, 1e-45]),
    ("expm1", [0.0, -0.0, np.inf, -np.inf, np.nan, 89.0, -104.0, 1e-45],
     [0.0, -0.0, np.inf, -1.0, np.nan, np.inf, -1.0, 1e-45]),
    ("log2", [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0 ** -149],
     [-np.inf, -np.inf, 0.0, np.nan, np.inf, np.nan, np.nan, -149.0]),
    ("log10", [0.0, -0.0, 1.0, -1.0, np.inf, np.nan],
     [-np.inf, -np.inf, 0.0, np.nan, np.inf, np.nan]),
    ("erf", [0.0, -0.0, np.inf, -np.inf, np.nan, 10.0, -10.0],
     [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0]),
    ("erfc", [0.0, -0.0, np.inf, -np.inf, np.nan, 11.0, -11.0],
     [1.0, 1.0, 0.0, 2.0, np.nan, 0.0, 2.0]),
]


@pytest.mark.parametrize("op,x,want", SPECIAL, ids=[s[0] for s in SPECIAL])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_special_values(op, x, want, dtype):
    x, want = np.array(x), np.array(want)
    keep = ref.round_to(x, dtype) == x
    keep |= np.isnan(x)
    got = to64(getattr(ampc, op)(from_values(x[keep], dtype)))
    want = ref.round_to(want[keep], dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[want == 0]),
                                  np.signbit(want[want == 0]))


def test_sin_cos_huge_arguments():
    """Payne-Hanek past 65536, up to FLT_MAX; a block holding one huge value
    takes the exact path for all its elements, in place too."""
    rng = np.random.default_rng(3)
    x = np.concatenate([
        ref.round_to(np.exp(rng.uniform(11.0, 88.7, 2001)), "float32"),
        [65536.0, 65536.0078125, 3.4028234663852886e38, 1e22, 8.0e+36,
         -1e30, 102940.0, 1.5707963e9, 2.0 ** 100]])
    x = ref.round_to(np.concatenate([x, -x]), "float32")
    for op in ("sin", "cos"):
        _check(op, getattr(ampc, op)(from_values(x, "float32")), x,
               "float32")
    mixed = rng.normal(size=1500)
    mixed[700] = 1e30
    want = np.sin(ref.round_to(mixed, "float32"))
    t = from_values(mixed, "float32")
    t.sin_()
    assert _ulps(to64(t), want).max() <= MAX_ULP


def test_near_zero_and_tails():
    tiny = np.array([1e-10, -1e-10, 1e-30, -3e-39, 2.0 ** -126, 6e-8])
    for op in ("log1p", "expm1", "sin", "erf"):
        _check(op, getattr(ampc, op)(from_values(tiny, "float32")), tiny,
               "float32")
    # erfc down to its subnormal range, erf's approach to 1
    x = np.linspace(0.45, 10.06, 4001)
    x = ref.round_to(x, "float32")
    _check("erfc", ampc.erfc(from_values(x, "float32")), x, "float32")
    _check("erf", ampc.erf(from_values(-x, "float32")), -x, "float32")
    assert to64(ampc.erfc(ampc.tensor([10.0])))[0] > 0     # subnormal


def test_exact_logs():
    p = np.arange(-149, 128, dtype=np.float64)
    np.testing.assert_array_equal(
        to64(ampc.log2(from_values(np.exp2(p), "float32"))), p)
    k = np.arange(0, 11, dtype=np.float64)
    np.testing.assert_array_equal(
        to64(ampc.log10(from_values(10.0 ** k, "float32"))), k)


def test_integers_bools_and_in_place():
    for op in OPS:
        i = ampc.tensor([1, 2, 3])
        out = getattr(ampc, op)(i)
        assert out.dtype is ampc.float32
        _check(op, out, np.array([1.0, 2.0, 3.0]), "float32")
        b = getattr(ampc.tensor([True, False]), op)()
        assert b.dtype is ampc.float32
        with pytest.raises(RuntimeError, match="can't be cast to the "
                                               "desired output type Long"):
            getattr(i, op + "_")()
        x = ampc.tensor([0.25, 0.5, 2.0])
        want = to64(getattr(ampc, op)(x))
        assert getattr(x, op + "_")() is x
        np.testing.assert_array_equal(to64(x), want)
        h = ampc.tensor([0.25, 0.5]).half()
        getattr(h, op + "_")()
        assert h.dtype is ampc.float16
    x = ampc.tensor([0.5, 1.5], requires_grad=True)
    y = x * 1.0
    y.sin_()
    y.sum().backward()
    np.testing.assert_allclose(to64(x.grad), np.cos([0.5, 1.5]), rtol=1e-6)


# (ampc function, float64 function, d/dx, d2/dx2, low, high)
def _derivatives():
    c = 2.0 / math.sqrt(math.pi)
    return {
        "sin": (np.sin, np.cos, lambda x: -np.sin(x), -3.0, 3.0),
        "cos": (np.cos, lambda x: -np.sin(x), lambda x: -np.cos(x), -3.0,
                3.0),
        "log1p": (np.log1p, lambda x: 1 / (1 + x), lambda x: -1 / (1 + x) ** 2,
                  -0.9, 3.0),
        "expm1": (np.expm1, np.exp, np.exp, -3.0, 3.0),
        "log2": (np.log2, lambda x: 1 / (x * np.log(2)),
                 lambda x: -1 / (x * x * np.log(2)), 0.1, 3.0),
        "log10": (np.log10, lambda x: 1 / (x * np.log(10)),
                  lambda x: -1 / (x * x * np.log(10)), 0.1, 3.0),
        "erf": (NUMPY["erf"], lambda x: c * np.exp(-x * x),
                lambda x: -2 * x * c * np.exp(-x * x), -2.0, 2.0),
        "erfc": (NUMPY["erfc"], lambda x: -c * np.exp(-x * x),
                 lambda x: 2 * x * c * np.exp(-x * x), -2.0, 2.0),
    }


@pytest.mark.parametrize("op", OPS)
def test_gradients(op):
    f, d1, d2, low, high = _derivatives()[op]
    gradcheck(getattr(ampc, op), f, [(7,)], low=low, high=high)
    x = ref.round_to(np.linspace(low, high, 9), "float32")
    t = ampc.tensor(x.astype(np.float32), requires_grad=True)
    g, = ampc.autograd.grad(getattr(t, op)().sum(), t, create_graph=True)
    np.testing.assert_allclose(to64(g), d1(x), rtol=2e-6, atol=1e-7)
    g2, = ampc.autograd.grad(g.sum(), t)
    np.testing.assert_allclose(to64(g2), d2(x), rtol=1e-5, atol=1e-6)


def test_autocast_policy_on_cpu():
    """Not listed on the CPU: each keeps its input dtype; the CUDA list
    (expm1, log1p, log2, log10 in float32) is in test_autocast.py's
    table."""
    for op in OPS:
        assert ampc._C.autocast_policy(op, "cpu") is None
        with ampc.autocast("cpu", dtype=ampc.bfloat16):
            assert getattr(ampc, op)(ampc.ones(3).bfloat16()).dtype is \
                ampc.bfloat16
    for op in ("expm1", "log1p", "log2", "log10"):
        assert ampc._C.autocast_policy(op, "cuda") == "fp32"
    for op in ("sin", "cos", "erf", "erfc"):
        assert ampc._C.autocast_policy(op, "cuda") is None


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_against_torch(dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(11)
    for op in OPS:
        x = ref.round_to(_domain(op, rng, 301), dtype)
        got = to64(getattr(ampc, op)(from_values(x, dtype)))
        want = getattr(torch, op)(
            torch.tensor(x, dtype=getattr(torch, dtype))).double().numpy()
        # each within a few ulp of the truth, so of each other
        limit = 2 * MAX_ULP if dtype == "float32" else 1.0
        assert _ulps(got, want, dtype).max() <= limit, op


@pytest.mark.parametrize("op", OPS)
def test_gradients_against_torch(op):
    torch = torch_or_skip()
    _, _, _, low, high = _derivatives()[op]
    x = ref.round_to(np.linspace(low, high, 11), "float32").astype(np.float32)
    a = ampc.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    ga, = ampc.autograd.grad(getattr(a, op)().sum(), a, create_graph=True)
    gt, = torch.autograd.grad(getattr(t, op)().sum(), t, create_graph=True)
    np.testing.assert_allclose(to64(ga), gt.detach().double().numpy(),
                               rtol=1e-5, atol=1e-6)
    ga2, = ampc.autograd.grad((ga * ga).sum(), a)
    gt2, = torch.autograd.grad((gt * gt).sum(), t)
    np.testing.assert_allclose(to64(ga2), gt2.double().numpy(), rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("op", OPS)
def test_devices(device, op):
    """The GPU gives the CPU's bits (huge sin/cos arguments included)."""
    x = _bit_patterns()[::7].astype(np.float32)
    x = np.concatenate([x, np.random.default_rng(5).normal(size=4099)])
    t = ampc.tensor(x.astype(np.float32))
    got = getattr(ampc, op)(t.to(device)).cpu()
    np.testing.assert_array_equal(to64(got), to64(getattr(ampc, op)(t)))
    for dtype in ("float16", "bfloat16"):
        h = t.to(getattr(ampc, dtype))
        np.testing.assert_array_equal(
            to64(getattr(ampc, op)(h.to(device)).cpu()),
            to64(getattr(ampc, op)(h)))


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_autocast_float32_ops():
    """PyTorch's CUDA autocast runs expm1, log1p, log2 and log10 in
    float32; sin, cos, erf and erfc keep the input dtype."""
    x = ampc.rand(8, device="cuda").half()
    with ampc.autocast("cuda", dtype=ampc.float16):
        for op in OPS:
            want = ampc.float32 if op in ("expm1", "log1p", "log2",
                                          "log10") else ampc.float16
            assert getattr(ampc, op)(x).dtype is want, op
