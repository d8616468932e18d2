"""tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, atan2, fmod and
remainder (csrc/trig_math.h, arc_hyp_math.h, mod_math.h, the _C.unary and
_C.binary ops, ampc/autograd/math_functions.py): within 3 ulp of float64
NumPy on every CPU level and float dtype (16-bit ones computed in float32,
rounded once), over random data, a sweep of float32 bit patterns and the
special values; fmod and remainder bit for bit (int64 too) with PyTorch's
zero-division error and signs; NumPy's aliases; PyTorch's gradients and
second derivatives, type promotion and autocast; torch where installed;
the GPU (marked cuda) against the CPU bit for bit."""
import math

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import (FLOAT_NAMES, from_values, gradcheck, strided, to64,
                     torch_or_skip)
from test_unary_math import _bit_patterns, _ulps

NUMPY = {"tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
         "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
         "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}
OPS = sorted(NUMPY)
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan",
           "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
           "arctan2": "atan2"}
MAX_ULP = 3.0


def _want(op, x):
    with np.errstate(all="ignore"):
        return NUMPY[op](np.asarray(x, dtype=np.float64))


def _check(op, got, x, dtype="float32"):
    err = _ulps(to64(got), _want(op, x), dtype)
    worst = int(np.argmax(err))
    # a 16-bit result is the float32 one rounded once more: within 1 ulp
    limit = MAX_ULP if dtype == "float32" else 1.0
    assert err[worst] <= limit, (
        f"{op}({x[worst]!r}) = {to64(got)[worst]!r}, want "
        f"{_want(op, x)[worst]!r}: {err[worst]:.2f} ulp")


def _domain(op, rng, n):
    """Odd-length random float64 values where op is defined, at several
    scales, each branch of the formulas included."""
    spread = rng.normal(size=n) * np.exp(rng.uniform(-12.0, 5.0, n))
    if op in ("asin", "acos", "atanh"):
        return np.concatenate([rng.uniform(-1.0, 1.0, n - n // 3),
                               np.tanh(spread[:n // 3])])
    if op == "acosh":
        return 1.0 + np.abs(spread)
    if op in ("sinh", "cosh"):
        return np.clip(spread * 3.0, -89.0, 89.0)
    if op == "tan":
        return rng.normal(scale=1e3, size=n) * rng.uniform(0, 1, n) ** 3
    return spread


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_random_values(cpu_level, op, dtype):
    rng = np.random.default_rng(len(op))
    for n in (1, 7, 33, 1031):
        x = ref.round_to(_domain(op, rng, n), dtype)
        _check(op, getattr(ampc, op)(from_values(x, dtype)), x, dtype)
    x = ref.round_to(_domain(op, rng, 257), dtype)
    a = strided(x, dtype)
    assert not a.is_contiguous()
    _check(op, getattr(a, op)(), x, dtype)


@pytest.mark.parametrize("op", OPS)
def test_ulp_sweep_over_float32(cpu_level, op):
    """The bit-pattern sweep and every 16th float32 in [2^-8, 8] (both
    signs), where the formulas switch branches."""
    dense = np.arange(0x3b800000, 0x41000000, 16, dtype=np.uint32).view(
        np.float32).astype(np.float64)
    x = np.concatenate([_bit_patterns(), dense, -dense])
    got = to64(getattr(ampc, op)(from_values(x, "float32")))
    err = _ulps(got, _want(op, x))
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP, (
        f"{op}({x[worst]!r}) = {got[worst]!r}, want "
        f"{_want(op, x)[worst]!r}: {err[worst]:.2f} ulp")
    zero = _want(op, x) == 0
    np.testing.assert_array_equal(np.signbit(got[zero]),
                                  np.signbit(_want(op, x)[zero]))


INF, NAN = np.inf, np.nan
TINY = 2.0 ** -149
# exact results only (each within an ulp elsewhere is checked above)
SPECIAL = [
    ("tan", [0.0, -0.0, INF, -INF, NAN, TINY], [0.0, -0.0, NAN, NAN, NAN,
                                                TINY]),
    ("asin", [0.0, -0.0, 1.0, -1.0, 1.5, -2.0, INF, NAN, -TINY],
     [0.0, -0.0, np.pi / 2, -np.pi / 2, NAN, NAN, NAN, NAN, -TINY]),
    ("acos", [0.0, -0.0, 1.0, -1.0, 1.5, -INF, NAN],
     [np.pi / 2, np.pi / 2, 0.0, np.pi, NAN, NAN, NAN]),
    ("atan", [0.0, -0.0, INF, -INF, NAN, TINY],
     [0.0, -0.0, np.pi / 2, -np.pi / 2, NAN, TINY]),
    ("sinh", [0.0, -0.0, INF, -INF, NAN, 89.5, -89.5, TINY],
     [0.0, -0.0, INF, -INF, NAN, INF, -INF, TINY]),
    ("cosh", [0.0, -0.0, INF, -INF, NAN, 89.5, -89.5],
     [1.0, 1.0, INF, INF, NAN, INF, INF]),
    ("asinh", [0.0, -0.0, INF, -INF, NAN, -TINY],
     [0.0, -0.0, INF, -INF, NAN, -TINY]),
    ("acosh", [1.0, 0.0, -1.0, 0.5, -INF, INF, NAN, -3.4028234663852886e38],
     [0.0, NAN, NAN, NAN, NAN, INF, NAN, NAN]),
    ("atanh", [0.0, -0.0, 1.0, -1.0, 1.5, INF, NAN, TINY],
     [0.0, -0.0, INF, -INF, NAN, NAN, NAN, TINY]),
]


@pytest.mark.parametrize("op,x,want", SPECIAL, ids=[s[0] for s in SPECIAL])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_special_values(op, x, want, dtype):
    x, want = np.array(x), np.array(want)
    keep = (ref.round_to(x, dtype) == x) | np.isnan(x)
    got = to64(getattr(ampc, op)(from_values(x[keep], dtype)))
    want = ref.round_to(want[keep], dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[want == 0]),
                                  np.signbit(want[want == 0]))


def test_tan_huge_arguments_and_poles():
    """Payne-Hanek past 65536 (a block with one huge value takes the exact
    path, in place too), and the neighbours of pi/2 + k pi."""
    rng = np.random.default_rng(3)
    x = ref.round_to(np.exp(rng.uniform(11.0, 88.7, 2001)), "float32")
    x = np.concatenate([x, [65536.0, 3.4028234663852886e38, 1e22, -1e30]])
    x = ref.round_to(np.concatenate([x, -x]), "float32")
    _check("tan", ampc.tan(from_values(x, "float32")), x)
    poles = (np.arange(-2000, 2000) + 0.5) * np.pi
    x = np.concatenate([ref.round_to(poles, "float32"),
                        np.nextafter(ref.round_to(poles, "float32"), 0)])
    x = ref.round_to(x, "float32")
    _check("tan", ampc.tan(from_values(x, "float32")), x)
    mixed = rng.normal(size=1500)
    mixed[700] = 1e30
    t = from_values(mixed, "float32")
    t.tan_()
    assert _ulps(to64(t), np.tan(ref.round_to(mixed, "float32"))).max() \
        <= MAX_ULP


def test_aliases():
    x = ampc.tensor([0.25, -0.5, 0.75])
    for alias, op in ALIASES.items():
        if op == "atan2":
            y = ampc.tensor([1.0, -2.0, 0.5])
            np.testing.assert_array_equal(
                to64(getattr(ampc, alias)(x, y)), to64(ampc.atan2(x, y)))
            np.testing.assert_array_equal(to64(getattr(x, alias)(y)),
                                          to64(x.atan2(y)))
            continue
        arg = x + 1.5 if op == "acosh" else x
        want = to64(getattr(ampc, op)(arg))
        np.testing.assert_array_equal(to64(getattr(ampc, alias)(arg)), want)
        np.testing.assert_array_equal(to64(getattr(arg, alias)()), want)
        c = arg.clone()
        assert getattr(c, alias + "_")() is c
        np.testing.assert_array_equal(to64(c), want)


def test_integers_bools_and_in_place():
    for op in OPS:
        i = ampc.tensor([1, 2, 3])
        out = getattr(ampc, op)(i)
        assert out.dtype is ampc.float32
        _check(op, out, np.array([1.0, 2.0, 3.0]))
        assert getattr(ampc.tensor([True, False]), op)().dtype is \
            ampc.float32
        with pytest.raises(RuntimeError, match="can't be cast to the "
                                               "desired output type Long"):
            getattr(i, op + "_")()
        x = ampc.tensor([0.25, 0.5, 0.75]) + (1.0 if op == "acosh" else 0)
        want = to64(getattr(ampc, op)(x))
        assert getattr(x, op + "_")() is x
        np.testing.assert_array_equal(to64(x), want)
        h = ampc.tensor([1.25, 1.5]).half()
        getattr(h, op + "_")()
        assert h.dtype is ampc.float16


# (float64 function, d/dx, d2/dx2, low, high)
def _derivatives():
    return {
        "tan": (np.tan, lambda x: 1 / np.cos(x) ** 2,
                lambda x: 2 * np.tan(x) / np.cos(x) ** 2, -1.2, 1.2),
        "asin": (np.arcsin, lambda x: 1 / np.sqrt(1 - x * x),
                 lambda x: x / (1 - x * x) ** 1.5, -0.9, 0.9),
        "acos": (np.arccos, lambda x: -1 / np.sqrt(1 - x * x),
                 lambda x: -x / (1 - x * x) ** 1.5, -0.9, 0.9),
        "atan": (np.arctan, lambda x: 1 / (1 + x * x),
                 lambda x: -2 * x / (1 + x * x) ** 2, -3.0, 3.0),
        "sinh": (np.sinh, np.cosh, np.sinh, -3.0, 3.0),
        "cosh": (np.cosh, np.sinh, np.cosh, -3.0, 3.0),
        "asinh": (np.arcsinh, lambda x: 1 / np.sqrt(x * x + 1),
                  lambda x: -x / (x * x + 1) ** 1.5, -3.0, 3.0),
        "acosh": (np.arccosh, lambda x: 1 / np.sqrt(x * x - 1),
                  lambda x: -x / (x * x - 1) ** 1.5, 1.1, 4.0),
        "atanh": (np.arctanh, lambda x: 1 / (1 - x * x),
                  lambda x: 2 * x / (1 - x * x) ** 2, -0.9, 0.9),
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


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_against_torch(dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(11)
    for op in OPS:
        x = ref.round_to(_domain(op, rng, 301), dtype)
        if op in ("sinh", "cosh"):
            # torch's vectorised sinh and cosh overflow where e^x does
            # (88.7), before the true results do (89.4)
            x = np.clip(x, -88.0, 88.0)
        got = to64(getattr(ampc, op)(from_values(x, dtype)))
        want = getattr(torch, op)(
            torch.tensor(x, dtype=getattr(torch, dtype))).double().numpy()
        # each within a few ulp of the truth, so of each other
        limit = 2 * MAX_ULP if dtype == "float32" else 1.0
        assert _ulps(got, want, dtype).max() <= limit, op


# ----------------------------------------------------------------------------
# atan2


def _atan2_cases(rng, n):
    """(y, x) over every quadrant and scale, the axes and the diagonal."""
    y = rng.normal(size=n) * np.exp(rng.uniform(-30.0, 30.0, n))
    x = rng.normal(size=n) * np.exp(rng.uniform(-30.0, 30.0, n))
    x[::7] = y[::7] * rng.choice([-1.0, 1.0], len(y[::7]))
    x[1::11] = y[1::11] * rng.uniform(0.9, 1.1, len(y[1::11]))
    return y, x


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_atan2_random(cpu_level, dtype):
    rng = np.random.default_rng(2)
    for n in (1, 7, 33, 1031):
        y, x = (ref.round_to(v, dtype) for v in _atan2_cases(rng, n))
        got = to64(ampc.atan2(from_values(y, dtype), from_values(x, dtype)))
        err = _ulps(got, np.arctan2(y, x), dtype)
        assert err.max() <= (MAX_ULP if dtype == "float32" else 1.0), (
            y[np.argmax(err)], x[np.argmax(err)])
    # broadcasting, and a strided operand
    y = ref.round_to(rng.normal(size=(5, 1)), dtype)
    x = ref.round_to(rng.normal(size=(1, 33)), dtype)
    got = to64(ampc.atan2(from_values(y, dtype), strided(x, dtype)))
    assert got.shape == (5, 33)
    assert _ulps(got, np.arctan2(y, x), dtype).max() <= MAX_ULP


def test_atan2_special_values():
    """Every pair of +-0, +-1, +-inf and NaN: C99's (NumPy's) angles."""
    v = np.array([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 3e-45, 3e38])
    y, x = np.meshgrid(v, v)
    want = ref.round_to(np.arctan2(y, x), "float32")
    got = to64(ampc.atan2(from_values(y, "float32"),
                          from_values(x, "float32")))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[want == 0]),
                                  np.signbit(want[want == 0]))


def test_atan2_dtypes_and_errors():
    i = ampc.tensor([1, -2, 3])
    assert ampc.atan2(i, ampc.tensor([2, 2, -1])).dtype is ampc.float32
    assert ampc.atan2(ampc.tensor([True]), ampc.tensor([True])).dtype is \
        ampc.float32
    h = ampc.tensor([1.0, 2.0]).half()
    assert ampc.atan2(h, ampc.tensor(1.0)).dtype is ampc.float16
    assert ampc.atan2(h, ampc.tensor([1.0, 1.0])).dtype is ampc.float32
    with pytest.raises(TypeError, match="atan2.*must be Tensor, not float"):
        ampc.tensor([1.0]).atan2(2.0)
    with pytest.raises(RuntimeError, match="output type Long"):
        i.atan2_(ampc.tensor([1, 1, 1]))
    x = ampc.tensor([1.0, -1.0])
    assert x.atan2_(ampc.tensor([-1.0, -1.0])) is x
    np.testing.assert_allclose(to64(x), [3 * np.pi / 4, -3 * np.pi / 4],
                               rtol=1e-7)


def test_atan2_gradients():
    gradcheck(ampc.atan2, np.arctan2, [(7,), (7,)])
    gradcheck(ampc.atan2, np.arctan2, [(3, 1), (1, 5)])
    y = ampc.tensor([0.5, -2.0, 3.0], requires_grad=True)
    x = ampc.tensor([1.5, 0.25, -1.0], requires_grad=True)
    gy, gx = ampc.autograd.grad(ampc.atan2(y, x).sum(), (y, x),
                                create_graph=True)
    yv, xv = to64(y), to64(x)
    r2 = yv * yv + xv * xv
    np.testing.assert_allclose(to64(gy), xv / r2, rtol=1e-6)
    np.testing.assert_allclose(to64(gx), -yv / r2, rtol=1e-6)
    # d/dy (x / r2) = -2xy / r2^2, d/dx (-y / r2) = 2xy / r2^2
    g2y, g2x = ampc.autograd.grad((gy + gx).sum(), (y, x))
    np.testing.assert_allclose(
        to64(g2y), (-2 * xv * yv + yv * yv - xv * xv) / r2 ** 2, rtol=1e-5)
    np.testing.assert_allclose(
        to64(g2x), (yv * yv - xv * xv + 2 * xv * yv) / r2 ** 2, rtol=1e-5)


def test_atan2_against_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(4)
    for dtype in FLOAT_NAMES:
        y, x = (ref.round_to(v, dtype) for v in _atan2_cases(rng, 301))
        got = to64(ampc.atan2(from_values(y, dtype), from_values(x, dtype)))
        tdt = getattr(torch, dtype)
        want = torch.atan2(torch.tensor(y, dtype=tdt),
                           torch.tensor(x, dtype=tdt)).double().numpy()
        limit = 2 * MAX_ULP if dtype == "float32" else 1.0
        assert _ulps(got, want, dtype).max() <= limit, dtype
    # a 0-d float32 tensor beside float16 is rounded to float16 first
    h = torch.tensor([1.0, 2.0, -3.0], dtype=torch.float16)
    want = torch.atan2(h, torch.tensor(1.7)).double().numpy()
    got = ampc.atan2(ampc.tensor([1.0, 2.0, -3.0]).half(), ampc.tensor(1.7))
    np.testing.assert_array_equal(to64(got), want)


# ----------------------------------------------------------------------------
# fmod and remainder


def _fmod32(a, b):
    """C's fmod of float32 values (exact), as float64."""
    with np.errstate(all="ignore"):
        return np.fmod(a.astype(np.float32), b.astype(np.float32)).astype(
            np.float64)


def _remainder32(a, b):
    """PyTorch's remainder in float32: fmod, plus b (rounded) where the
    signs differ."""
    m = _fmod32(a, b).astype(np.float32)
    bf = b.astype(np.float32)
    with np.errstate(all="ignore"):
        flip = (m != 0) & ((m < 0) != (bf < 0))
        return np.where(flip, m + bf, m).astype(np.float64)


MOD_REF = {"fmod": _fmod32, "remainder": _remainder32}


def _mod_cases(rng, n):
    """Dividends and divisors whose quotients go from tiny to 2^250 (the
    exact reduction), subnormals included."""
    a = rng.normal(size=n) * np.exp2(rng.integers(-140, 120, n))
    b = rng.normal(size=n) * np.exp2(rng.integers(-140, 120, n))
    b[::5] = rng.normal(size=len(b[::5]))
    a[::3] = rng.integers(-50, 50, len(a[::3])) * b[::3]  # exact multiples
    return a, b


@pytest.mark.parametrize("op", ["fmod", "remainder"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_mod_floats_bit_exact(cpu_level, op, dtype):
    rng = np.random.default_rng(5)
    for n in (1, 7, 33, 1031):
        a, b = (ref.round_to(v, dtype) for v in _mod_cases(rng, n))
        a = np.where(np.isfinite(a), a, 1.0)
        b = np.where(np.isfinite(b) & (b != 0), b, 1.0)
        got = to64(getattr(ampc, op)(from_values(a, dtype),
                                     from_values(b, dtype)))
        want = ref.round_to(MOD_REF[op](a, b), dtype)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    # a Python number divisor, and broadcasting with a strided operand
    a = ref.round_to(rng.normal(scale=10.0, size=(4, 33)), dtype)
    np.testing.assert_array_equal(
        to64(getattr(ampc, op)(from_values(a, dtype), -1.5)),
        ref.round_to(MOD_REF[op](a, np.full_like(a, -1.5)), dtype))
    b = ref.round_to(rng.normal(size=(4, 1)) + 3.0, dtype)
    np.testing.assert_array_equal(
        to64(getattr(ampc, op)(strided(a, dtype), from_values(b, dtype))),
        ref.round_to(MOD_REF[op](a, np.broadcast_to(b, a.shape)), dtype))


@pytest.mark.parametrize("op", ["fmod", "remainder"])
def test_mod_special_values(op):
    v = np.array([0.0, -0.0, 1.5, -1.5, INF, -INF, NAN, 1e-45, 3e38, -3e38])
    a, b = np.meshgrid(v, v)
    got = to64(getattr(ampc, op)(from_values(a, "float32"),
                                 from_values(b, "float32")))
    want = MOD_REF[op](a, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[want == 0]),
                                  np.signbit(want[want == 0]))


def test_mod_integers():
    rng = np.random.default_rng(6)
    a = rng.integers(-10 ** 18, 10 ** 18, 1031)
    b = rng.integers(-1000, 1000, 1031)
    b[b == 0] = 7
    a[:4] = [-2 ** 63, -2 ** 63, 2 ** 63 - 1, -5]
    b[:4] = [-1, 3, -1, 2 ** 62]
    ta, tb = ampc.tensor(a), ampc.tensor(b)
    want_fmod = np.fmod(a, b)
    want_fmod[0] = 0                  # INT64_MIN % -1, mathematically 0
    np.testing.assert_array_equal(ampc.fmod(ta, tb).numpy(), want_fmod)
    want_rem = np.remainder(a, b)
    want_rem[0] = 0
    np.testing.assert_array_equal((ta % tb).numpy(), want_rem)
    assert (ta % tb).dtype is ampc.int64
    np.testing.assert_array_equal((ta % 10).numpy(), np.remainder(a, 10))
    np.testing.assert_array_equal((7 % tb[4:20]).numpy(),
                                  np.remainder(7, b[4:20]))
    np.testing.assert_array_equal(ampc.fmod(ta, -3).numpy(), np.fmod(a, -3))
    # bool divisors read as 0/1; a float operand promotes
    assert (ampc.tensor([5, 6]) % ampc.tensor([True, True])).tolist() == \
        [0, 0]
    assert (ampc.tensor([5, -6]) % 2.5).dtype is ampc.float32


def test_mod_errors():
    for op in ("fmod", "remainder"):
        for divisor in (0, ampc.tensor([3, 0]), ampc.tensor(0),
                        ampc.tensor([True, False])):
            with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
                getattr(ampc, op)(ampc.tensor([5, -5]), divisor)
        with pytest.raises(NotImplementedError,
                           match=f'"{op}" not implemented for \'Bool\''):
            getattr(ampc, op)(ampc.tensor([True]), ampc.tensor([True]))
        with pytest.raises(RuntimeError, match="output type Long"):
            getattr(ampc.tensor([1, 2]), op + "_")(1.5)
        # a float zero divisor is NaN, not an error
        assert math.isnan(getattr(ampc, op)(ampc.tensor([1.0]), 0).item())
    with pytest.raises(TypeError, match="fmod.*must be Tensor"):
        ampc.fmod(5, ampc.tensor([3]))
    with pytest.raises(TypeError, match="remainder.*'input'"):
        ampc.remainder("5", ampc.tensor([3]))


def test_mod_operators_and_in_place():
    x = ampc.tensor([5.5, -5.5, 3.0])
    np.testing.assert_array_equal(to64(x % 2), [1.5, 0.5, 1.0])
    np.testing.assert_array_equal(to64(7 % ampc.tensor([3, -3])), [1, -2])
    np.testing.assert_array_equal(to64(ampc.remainder(5.5, x)),
                                  _remainder32(np.full(3, 5.5), to64(x)))
    y = x.clone()
    y %= 2
    np.testing.assert_array_equal(to64(y), [1.5, 0.5, 1.0])
    y = x.clone()
    assert y.fmod_(2) is y
    np.testing.assert_array_equal(to64(y), [1.5, -1.5, 1.0])
    y = x.clone()
    assert y.remainder_(ampc.tensor(-2.0)) is y
    np.testing.assert_array_equal(to64(y), [-0.5, -1.5, -1.0])
    i = ampc.tensor([7, -7])
    i %= 3
    assert i.tolist() == [1, 2]


def test_mod_16bit_scalar_rounds_first():
    """PyTorch rounds a number beside a float16 tensor to float16 before
    fmod (no float32 opmath): fmod(half(2), 1.7) = 2 - half(1.7)."""
    h = ampc.tensor([2.0, 5.0]).half()
    assert ampc.fmod(h, 1.7).tolist() == [2.0 - 1.7001953125,
                                          5.0 - 2 * 1.7001953125]
    assert ampc.fmod(h, 1.7).dtype is ampc.float16
    b = ampc.tensor([2.0, 5.0]).bfloat16()
    assert (b % ampc.tensor(1.7)).dtype is ampc.bfloat16


def test_mod_gradients():
    for op, rnd in (("fmod", np.trunc), ("remainder", np.floor)):
        a = ampc.tensor([5.5, -3.25, 7.0, -0.5], requires_grad=True)
        b = ampc.tensor([2.0, 1.5, -3.0, 0.75], requires_grad=True)
        ga, gb = ampc.autograd.grad(getattr(ampc, op)(a, b).sum(), (a, b),
                                    create_graph=True)
        np.testing.assert_array_equal(to64(ga), np.ones(4))
        np.testing.assert_array_equal(to64(gb),
                                      -rnd(to64(a) / to64(b)))
        # the gradient is linear in the incoming one: d/dw (w * grad) works
        w = ampc.tensor(2.0, requires_grad=True)
        gw, = ampc.autograd.grad((getattr(ampc, op)(a, b) * w).sum(), w)
        np.testing.assert_allclose(
            gw.item(), MOD_REF[op](to64(a), to64(b)).sum(), rtol=1e-6)
        # a number on either side
        x = ampc.tensor([5.5, -3.25], requires_grad=True)
        getattr(ampc, op)(x, 2.0).sum().backward()
        np.testing.assert_array_equal(to64(x.grad), [1.0, 1.0])
    gradcheck(lambda a, b: a % b, lambda a, b: np.remainder(a, b),
              [(7,), (7,)], low=0.5, high=3.0)


def test_mod_against_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(8)
    for op in ("fmod", "remainder"):
        for dtype in FLOAT_NAMES:
            a, b = (ref.round_to(v, dtype) for v in _mod_cases(rng, 301))
            # torch's vectorised fmod gives NaN where the quotient
            # overflows float32 (C's, NumPy's and ampc's: the exact value)
            with np.errstate(all="ignore"):
                keep = np.abs(a / b) < 3e38
            a, b = a[keep], b[keep]
            tdt = getattr(torch, dtype)
            want = getattr(torch, op)(torch.tensor(a, dtype=tdt),
                                      torch.tensor(b, dtype=tdt))
            got = getattr(ampc, op)(from_values(a, dtype),
                                    from_values(b, dtype))
            np.testing.assert_array_equal(to64(got),
                                          want.double().numpy())
            want = getattr(torch, op)(torch.tensor(a, dtype=tdt), 1.7)
            got = getattr(ampc, op)(from_values(a, dtype), 1.7)
            np.testing.assert_array_equal(to64(got),
                                          want.double().numpy())
        a = torch.tensor([5.5, -3.25, 7.0], requires_grad=True)
        b = torch.tensor([2.0, 1.5, -3.0], requires_grad=True)
        getattr(torch, op)(a, b).sum().backward()
        x = ampc.tensor([5.5, -3.25, 7.0], requires_grad=True)
        y = ampc.tensor([2.0, 1.5, -3.0], requires_grad=True)
        getattr(ampc, op)(x, y).sum().backward()
        np.testing.assert_array_equal(to64(x.grad), a.grad.numpy())
        np.testing.assert_array_equal(to64(y.grad), b.grad.numpy())
    ia = rng.integers(-1000, 1000, 101)
    ib = rng.integers(1, 50, 101) * rng.choice([-1, 1], 101)
    for op in ("fmod", "remainder"):
        np.testing.assert_array_equal(
            getattr(ampc, op)(ampc.tensor(ia), ampc.tensor(ib)).numpy(),
            getattr(torch, op)(torch.tensor(ia), torch.tensor(ib)).numpy())


# ----------------------------------------------------------------------------
# autocast and the GPU


def test_autocast_policy():
    """Not listed on the CPU; PyTorch's CUDA lists: tan, asin, acos, sinh
    and cosh in float32, atan2 promoted (test_autocast.py's table too)."""
    for op in OPS + ["atan2", "fmod", "remainder"]:
        assert ampc._C.autocast_policy(op, "cpu") is None
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        x = ampc.ones(3).bfloat16()
        for op in OPS:
            assert getattr(ampc, op)(x + 1).dtype is ampc.bfloat16
        assert ampc.atan2(x, ampc.ones(3)).dtype is ampc.float32
    for op in ("tan", "asin", "acos", "sinh", "cosh"):
        assert ampc._C.autocast_policy(op, "cuda") == "fp32"
    for op in ("atan", "asinh", "acosh", "atanh", "fmod", "remainder"):
        assert ampc._C.autocast_policy(op, "cuda") is None
    assert ampc._C.autocast_policy("atan2", "cuda") == "promote"


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_autocast():
    x = ampc.rand(8, device="cuda").half()
    with ampc.autocast("cuda", dtype=ampc.float16):
        for op in OPS:
            want = ampc.float32 if op in ("tan", "asin", "acos", "sinh",
                                          "cosh") else ampc.float16
            assert getattr(ampc, op)(x + 1).dtype is want, op
        assert ampc.atan2(x, x).dtype is ampc.float16
        assert ampc.atan2(x, x.float()).dtype is ampc.float32


@pytest.mark.parametrize("op", OPS)
def test_devices(device, op):
    """The GPU gives the CPU's bits (huge tan arguments included)."""
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


@pytest.mark.parametrize("op", ["atan2", "fmod", "remainder"])
def test_binary_devices(device, op):
    rng = np.random.default_rng(9)
    y, x = _atan2_cases(rng, 4099) if op == "atan2" else _mod_cases(rng,
                                                                    4099)
    sp = np.array([0.0, -0.0, INF, -INF, NAN, 1.5])
    y = np.concatenate([y, np.repeat(sp, 6)])
    x = np.concatenate([x, np.tile(sp, 6)])
    for dtype in FLOAT_NAMES:
        with np.errstate(over="ignore"):
            a, b = from_values(y, dtype), from_values(x, dtype)
        want = to64(getattr(ampc, op)(a, b))
        got = getattr(ampc, op)(a.to(device), b.to(device)).cpu()
        np.testing.assert_array_equal(to64(got), want)
        c = ampc.tensor(1.7) if op == "atan2" else 1.7
        got = getattr(ampc, op)(a.to(device), c).cpu()
        np.testing.assert_array_equal(to64(got),
                                      to64(getattr(ampc, op)(a, c)))
    if op != "atan2":
        ia = ampc.tensor(rng.integers(-10 ** 12, 10 ** 12, 1031))
        ib = ampc.tensor(rng.integers(1, 100, 1031) *
                         rng.choice([-1, 1], 1031))
        np.testing.assert_array_equal(
            getattr(ampc, op)(ia.to(device), ib.to(device)).cpu().numpy(),
            getattr(ampc, op)(ia, ib).numpy())
