"""GELU (exact and tanh), SiLU and LeakyReLU (csrc/activation_math.h,
the _C.unary ops, ampc/nn/_activations.py): values and derivatives against
float64 references from math.erf / math.tanh / math.exp on every CPU level,
every float dtype and odd sizes, including the tails where the results are
tiny; gradients by finite differences and through create_graph; torch where
installed; the GPU (marked cuda) against the CPU bit for bit in float32."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import (FLOAT_NAMES, assert_close, from_values, gradcheck,
                     to64)

C = ampc._C
SQRT_2_PI = math.sqrt(2.0 / math.pi)


def _phi(x):
    # erfc, not 1 + erf: exact in the negative tail
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _pdf(x):
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _sig(x):
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def _gelu_tanh(x):
    # x (1 + tanh(u)) / 2 == x sigmoid(2u), which float64 does not cancel
    return x * _sig(2.0 * SQRT_2_PI * (x + 0.044715 * x ** 3))


def _gelu_tanh_grad(x):
    u2 = 2.0 * SQRT_2_PI * (x + 0.044715 * x ** 3)
    du = SQRT_2_PI * (1.0 + 3 * 0.044715 * x * x)
    return _sig(u2) * (1.0 + 2.0 * x * _sig(-u2) * du)


# op -> (value, derivative) in float64
REF = {
    "gelu": (lambda x: x * _phi(x), lambda x: _phi(x) + x * _pdf(x)),
    "gelu_tanh": (_gelu_tanh, _gelu_tanh_grad),
    "silu": (lambda x: x * _sig(x),
             lambda x: _sig(x) * (1.0 + x * (1.0 - _sig(x)))),
}


def _ref(fn, x):
    return np.vectorize(fn, otypes=[np.float64])(x)


def _inputs(n, seed=0):
    """Odd-length random values plus the tails and special points."""
    rng = np.random.default_rng(seed)
    # -13.13 and -13.2: gelu and gelu' are normal where Phi is subnormal;
    # -87.5 and -88: silu is normal where sigmoid is below FLT_MIN
    special = [0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 0.5, -0.5, 3.0, -3.0,
               5.5, -5.5, 9.0, -9.0, 12.0, -12.0, -13.1347294, -13.2,
               -13.2369909, 30.0, -30.0, -87.5, -87.6394424, -88.0, 100.0,
               -100.0]
    return np.concatenate([rng.normal(scale=3.0, size=n), special])


@pytest.mark.parametrize("op", sorted(REF))
@pytest.mark.parametrize("grad", [False, True])
def test_float32_against_float64(cpu_level, op, grad):
    x = _inputs(1001).astype(np.float32)
    got = to64(C.unary(op + "_grad" if grad else op, ampc.tensor(x)))
    want = _ref(REF[op][grad], x.astype(np.float64))
    # relative accuracy everywhere, the negative tails included (a few
    # float32 ulps); a derivative near its root (gelu' at -0.75, silu' at
    # -1.28) is as accurate as the terms that cancel there
    # (gelu_tanh's deep tail, x sigmoid(2u) with |2u| up to 70, is as
    # accurate as u's rounding allows: a few 1e-6)
    np.testing.assert_allclose(got, want, rtol=5e-6 if op == "gelu_tanh"
                               else 3e-6, atol=1e-7 if grad else 1e-37)


def _float32_grid(lo, hi, n, extra=()):
    """n float32 values spread over [lo, hi], odd in count, plus extras."""
    x = np.concatenate([np.linspace(lo, hi, n), extra])
    return x.astype(np.float32)


def test_exp_log_sigmoid_tanh_over_the_float32_range(cpu_level):
    """The branch-free exp (two powers of two: subnormal results and
    FLT_MAX), sigmoid from e^-|x| (both tails, subnormal results kept), tanh on both sides of its polynomial's edge at 0.625 and log
    (subnormal inputs, 0, negatives, inf), each within a few ulps of
    float64."""
    x = _float32_grid(-110.0, 88.72, 4001, [88.7228, 88.73, -103.9, 1e-30])
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
    assert_close(C.unary("exp", ampc.tensor(x)), want, "float32",
                 rtol=4 * 2.0 ** -24, atol=2.0 ** -149)

    x = _float32_grid(-120.0, 120.0, 3001, [-87.3, 17.0, -17.0, 0.0])
    want = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    assert_close(C.unary("sigmoid", ampc.tensor(x)), want, "float32",
                 rtol=4 * 2.0 ** -24, atol=4 * 2.0 ** -149)

    edge = np.nextafter(np.float32(0.625), np.float32([0.0, 1.0]))
    x = _float32_grid(-12.0, 12.0, 2001, [*edge, *-edge, 0.625, 1e-30,
                                         50.0, -50.0])
    got = C.unary("tanh", ampc.tensor(x))
    assert_close(got, np.tanh(x.astype(np.float64)), "float32",
                 rtol=4 * 2.0 ** -24, atol=0.0)
    signs = np.signbit(to64(C.unary("tanh", ampc.tensor([-0.0, 0.0]))))
    assert list(signs) == [True, False]

    # log: every binade, subnormals included, and its special values
    x = np.concatenate([np.geomspace(1.4e-45, 3.4e38, 4001),
                        np.linspace(0.5, 2.0, 1001), [1.0, 0.0, -0.0,
                                                      -1.0, np.inf, -np.inf,
                                                      np.nan]])
    x = x.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log(x.astype(np.float64))
    assert_close(C.unary("log", ampc.tensor(x)), want, "float32",
                 rtol=2 * 2.0 ** -24, atol=0.0)


@pytest.mark.parametrize("op", ["gelu", "silu"])
def test_deep_negative_tails(cpu_level, op):
    """Where sigmoid(x) or Phi(x) is below FLT_MIN (x < -87.3, x < -13.1)
    the results x f(x) and the derivatives can still be normal floats (or
    subnormal ones): they are kept, within a few ulps of their size, not
    flushed to 0."""
    x = np.float32(np.linspace(-13.0, -13.6, 61) if op == "gelu"
                   else np.linspace(-87.0, -89.0, 81))
    for grad in (False, True):
        got = to64(C.unary(op + "_grad" if grad else op, ampc.tensor(x)))
        want = _ref(REF[op][grad], x.astype(np.float64))
        assert np.all(got != 0.0)
        # a subnormal f(x) holds its rounding (half of 2^-149) absolutely,
        # and x, up to 89, scales it: 64 such units
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2.0 ** -143)


@pytest.mark.parametrize("op", sorted(REF))
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_dtypes_and_devices(device, op, dtype):
    x = ampc.tensor(_inputs(37, 1).astype(np.float32)).to(
        getattr(ampc, dtype))
    y = C.unary(op, x.to(device))
    assert y.dtype.name == dtype and y.device.type == device
    assert_close(y.cpu(), _ref(REF[op][0], to64(x)), dtype, k=2)


def test_nan_and_infinities():
    x = ampc.tensor([float("nan"), float("inf"), -float("inf")])
    for op in ("gelu", "gelu_tanh", "silu", "gelu_grad", "silu_grad"):
        assert math.isnan(C.unary(op, x)[0].item())
    assert C.unary("gelu", x)[1].item() == math.inf
    assert C.unary("silu", x)[1].item() == math.inf
    assert math.isnan(C.unary("gelu", x)[2].item())     # -inf * 0, as torch


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradient_by_finite_differences(approximate):
    op = "gelu" if approximate == "none" else "gelu_tanh"
    gradcheck(lambda x: F.gelu(x, approximate=approximate),
              lambda x: _ref(REF[op][0], x), [(5, 7)], low=-4, high=4)


def test_silu_and_leaky_relu_gradients_by_finite_differences():
    gradcheck(F.silu, lambda x: _ref(REF["silu"][0], x), [(3, 11)],
              low=-6, high=6)
    gradcheck(lambda x: F.leaky_relu(x, 0.2),
              lambda x: np.where(x > 0, x, 0.2 * x), [(3, 11)])


@pytest.mark.parametrize("fn,op", [
    (lambda t: F.gelu(t), "gelu"),
    (lambda t: F.gelu(t, approximate="tanh"), "gelu_tanh"),
    (F.silu, "silu")])
def test_second_derivative(device, fn, op):
    """d/dx of the create_graph gradient against central differences of
    the float64 first derivative."""
    xv = np.linspace(-4.0, 4.0, 33)
    x = ampc.tensor(xv.astype(np.float32), requires_grad=True,
                    device=device)
    g, = ampc.autograd.grad(fn(x).sum(), x, create_graph=True)
    assert g.grad_fn is not None
    h, = ampc.autograd.grad(g.sum(), x)
    eps = 1e-5
    want = (_ref(REF[op][1], xv + eps) - _ref(REF[op][1], xv - eps)) / (
        2 * eps)
    np.testing.assert_allclose(to64(h.cpu()), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_gradient_is_rounded_once(dtype):
    xv = _inputs(101, 2)
    xv = xv[np.abs(xv) < 20]
    x = from_values(xv, dtype).requires_grad_()
    F.gelu(x).backward(ampc.ones(*x.shape).to(getattr(ampc, dtype)))
    want = _ref(REF["gelu"][1], to64(x))
    assert x.grad.dtype.name == dtype
    assert_close(x.grad, want, dtype, k=1)


def test_modules_and_in_place():
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.SiLU()) == "SiLU()"
    assert repr(nn.LeakyReLU(0.2, inplace=True)) == \
        "LeakyReLU(negative_slope=0.2, inplace=True)"
    x = ampc.randn(4, 5)
    assert ampc.equal(nn.GELU()(x), F.gelu(x))
    y = x.clone()
    assert F.silu(y, inplace=True) is y and ampc.equal(y, F.silu(x))
    z = x.clone()
    nn.LeakyReLU(0.1, inplace=True)(z)
    np.testing.assert_allclose(to64(z), np.where(to64(x) > 0, to64(x),
                                                 0.1 * to64(x)), rtol=1e-6)
    assert F.leaky_relu(ampc.zeros(1, requires_grad=True)).grad_fn is not None


@pytest.mark.parametrize("name,kw", [("silu", {}),
                                     ("leaky_relu", {"negative_slope": 0.1})])
def test_in_place_under_autograd_matches_torch(name, kw):
    """nn.SiLU(inplace=True) after a layer: the write must not break the
    backward of the op that saved its input."""
    torch = pytest.importorskip("torch")
    xv = np.array([-2.0, 0.5, 3.0, -1.0, 0.0], dtype=np.float32)
    a = ampc.tensor(xv, requires_grad=True)
    y = a * 2
    assert getattr(F, name)(y, inplace=True, **kw) is y
    (y * y).sum().backward()
    ta = torch.from_numpy(xv).requires_grad_()
    ty = ta * 2
    getattr(torch.nn.functional, name)(ty, inplace=True, **kw)
    (ty * ty).sum().backward()
    np.testing.assert_allclose(to64(y), ty.detach().double().numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(to64(a.grad), ta.grad.double().numpy(),
                               rtol=1e-6)


def test_huge_finite_inputs_give_finite_gradients():
    x = ampc.tensor([-1.2e13, -3e30, 3e30, -1e5, 1e5])
    for op in ("gelu_grad", "gelu_tanh_grad", "silu_grad"):
        got = to64(C.unary(op, x))
        np.testing.assert_array_equal(got, [0.0, 0.0, 1.0, 0.0, 1.0])


def test_autocast_keeps_the_input_dtype():
    x = ampc.randn(3, 4)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert F.gelu(x).dtype == ampc.float32
        assert F.silu(x.half()).dtype == ampc.float16


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="approximate argument must be "
                                           "either none or tanh"):
        F.gelu(ampc.ones(2), approximate="erf")
    with pytest.raises(TypeError, match="input"):
        F.silu([1.0])
    with pytest.raises(RuntimeError, match="leaky_relu.*floating"):
        F.leaky_relu(ampc.ones(2, dtype=ampc.int64))


@pytest.mark.parametrize("name,kw", [("gelu", {}),
                                     ("gelu", {"approximate": "tanh"}),
                                     ("silu", {}),
                                     ("leaky_relu", {"negative_slope": 0.3})])
def test_matches_torch(name, kw):
    torch = pytest.importorskip("torch")
    xv = _inputs(301, 3).astype(np.float32)
    x = ampc.tensor(xv, requires_grad=True)
    y = getattr(F, name)(x, **kw)
    y.sum().backward()
    tx = torch.from_numpy(xv).requires_grad_()
    ty = getattr(torch.nn.functional, name)(tx, **kw)
    ty.sum().backward()
    # torch's float32 GELU (a vectorised erf) is within about 1e-6 of the
    # exact values, absolutely, where ampc's is within a few ulps
    np.testing.assert_allclose(to64(y), ty.detach().double().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to64(x.grad), tx.grad.double().numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("op", ["gelu", "gelu_tanh", "silu", "gelu_grad",
                                "gelu_tanh_grad", "silu_grad", "exp", "log",
                                "sigmoid", "tanh"])
def test_cuda_gives_the_cpu_bits(op):
    x = _inputs(4099, 4).astype(np.float32)
    if op == "log":
        x = np.abs(x)
    x = ampc.tensor(x)
    np.testing.assert_array_equal(to64(C.unary(op, x.cuda()).cpu()),
                                  to64(C.unary(op, x)))


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("op", ["sigmoid_backward", "tanh_backward",
                                "gelu_backward", "silu_backward"])
def test_cuda_backwards_give_the_cpu_bits(op):
    yv = np.tanh(_inputs(4099, 6)).astype(np.float32)
    rng = np.random.default_rng(5)
    g = ampc.tensor(rng.standard_normal(yv.size).astype(np.float32))
    y = ampc.tensor(yv)
    np.testing.assert_array_equal(
        to64(C.binary(op, g.cuda(), y.cuda()).cpu()),
        to64(C.binary(op, g, y)))
