"""relu6, hardtanh, elu, selu, celu, softplus, hardsigmoid, hardswish,
softsign, mish, logsigmoid (ampc/nn/_activations_more.py, composites of
existing kernels): values and gradients against float64 references on
odd-sized random data plus the special points (0, the kinks, the tails,
+-inf, NaN), every float dtype, finite differences, second derivatives,
torch where installed, modules, in-place forms and bad arguments."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from helpers import FLOAT_NAMES, assert_close, from_values, gradcheck, to64

SA, SS = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _sp(x):
    # log1p(exp(x)) in float64, both tails accurate
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _sig(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


def _elu(a, s=1.0, k=1.0):
    return (lambda x: np.where(x > 0, s * x, s * a * np.expm1(np.minimum(x, 0) * k)),
            lambda x: np.where(x <= 0, s * a * k * np.exp(np.minimum(x, 0) * k), s))


def _mish_d(x):
    t = np.tanh(_sp(x))
    return t + x * _sig(x) * (1 - t * t)


# name -> (ampc call, torch kwargs, value, derivative) in float64
OPS = {
    "relu6": ({}, lambda x: np.clip(x, 0, 6),
              lambda x: ((x > 0) & (x < 6)).astype(float)),
    "hardtanh": ({"min_val": -2.0, "max_val": 0.5},
                 lambda x: np.clip(x, -2, 0.5),
                 lambda x: ((x > -2) & (x < 0.5)).astype(float)),
    "elu": ({"alpha": 0.7},) + _elu(0.7),
    "selu": ({},) + _elu(SA, SS),
    "celu": ({"alpha": 2.0},) + _elu(2.0, 1.0, 0.5),
    "softplus": ({"beta": 1.5, "threshold": 10.0},
                 lambda x: np.where(1.5 * x > 10, x, _sp(1.5 * x) / 1.5),
                 lambda x: np.where(1.5 * x > 10, 1.0, _sig(1.5 * x))),
    "hardsigmoid": ({}, lambda x: np.clip(x + 3, 0, 6) / 6,
                    lambda x: ((x > -3) & (x < 3)) / 6.0),
    "hardswish": ({}, lambda x: x * np.clip(x + 3, 0, 6) / 6,
                  lambda x: np.where(x <= -3, 0, np.where(x < 3, x / 3 + .5, 1))),
    "softsign": ({}, lambda x: x / (1 + np.abs(x)),
                 lambda x: 1 / (1 + np.abs(x)) ** 2),
    "mish": ({}, lambda x: x * np.tanh(_sp(x)), _mish_d),
    "logsigmoid": ({}, lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))),
                   lambda x: _sig(-x)),
}
SMOOTH = ("elu", "selu", "celu", "softplus", "softsign", "mish", "logsigmoid")
INPLACE = ("relu6", "hardtanh", "elu", "selu", "celu", "hardsigmoid",
           "hardswish", "mish")


def _call(name, x, **extra):
    return getattr(F, name)(x, **OPS[name][0], **extra)


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 1e-3, -1e-3, 0.4999,
               -0.4999, 0.5, -0.5, 0.5001, -0.5001, 1.0, -1.0, 2.0, -2.0,
               3.0, -3.0, 6.0, -6.0, 6.6666665, 20.0, -20.0, -30.0, 30.0,
               -80.0, -87.0, 100.0, -100.0]
    return np.concatenate([rng.normal(scale=4.0, size=n), special])


@pytest.mark.parametrize("name", sorted(OPS))
def test_float32_values_and_gradients(name):
    xv = _inputs(1001).astype(np.float32)
    x = ampc.tensor(xv, requires_grad=True)
    y = _call(name, x)
    y.backward(ampc.ones(*x.shape))
    x64 = xv.astype(np.float64)
    # a few float32 ulps relatively, the tails included; an absolute floor
    # near a root of the value or derivative (mish' at -1.19, the bounded
    # results that cross 0)
    np.testing.assert_allclose(to64(y), OPS[name][1](x64), rtol=2e-6,
                               atol=1e-30 if name in ("softplus", "elu", "celu",
                                                      "selu") else 1e-7)
    np.testing.assert_allclose(to64(x.grad), OPS[name][2](x64), rtol=2e-6,
                               atol=1e-7)


@pytest.mark.parametrize("name", ["elu", "selu", "celu"])
def test_elu_near_zero_is_relatively_accurate(name):
    # exp(x) - 1 cancels there: the composite's polynomial branch does not
    xv = -np.geomspace(1e-8, 2.0, 301).astype(np.float32)
    got = to64(_call(name, ampc.tensor(xv)))
    want = OPS[name][1](xv.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", ["softplus", "logsigmoid", "mish"])
def test_deep_tails_are_relatively_accurate(name):
    xv = np.concatenate([-np.linspace(5.0, 100.0, 97),
                         np.linspace(5.0, 30.0, 51)]).astype(np.float32)
    # where the result is still a normal float32 (softplus here has
    # beta = 1.5; exp(-87) is near FLT_MIN)
    xv = xv[xv > {"softplus": -55.0, "mish": -80.0}.get(name, -200.0)]
    x = ampc.tensor(xv)
    got = to64(_call(name, x))
    want = OPS[name][1](xv.astype(np.float64))
    assert np.all(got != 0.0) or name == "logsigmoid"
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    assert F.softplus(ampc.tensor([-30.0])).item() == pytest.approx(
        9.357622968839299e-14, rel=1e-6)


def test_special_points_match_torch_rules():
    """NaN, +-inf and the kinks, values and gradients, against torch's
    documented results (as listed here, checked against torch 2.13)."""
    nan, inf = math.nan, math.inf
    xv = [-inf, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0, 7.0, inf, nan]
    want = {
        "relu6": ([0, 0, 0, 0, 1, 3, 6, 6, 6, nan], [0, 0, 0, 0, 1, 1, 0, 0, 0, 1]),
        "hardtanh": ([-1, -1, -1, 0, 1, 1, 1, 1, 1, nan], [0, 0, 0, 1, 0, 0, 0, 0, 0, 1]),
        "hardsigmoid": ([0, 0, 1 / 3, .5, 2 / 3, 1, 1, 1, 1, nan],
                        [0, 0, 1 / 6, 1 / 6, 1 / 6, 0, 0, 0, 0, 0]),
        "hardswish": ([nan, 0, -1 / 3, 0, 2 / 3, 3, 6, 7, inf, nan],
                      [0, 0, 1 / 6, .5, 5 / 6, 1, 1, 1, 1, 1]),
    }
    for name, (v, g) in want.items():
        x = ampc.tensor(xv, requires_grad=True)
        y = getattr(F, name)(x)
        y.sum().backward()
        np.testing.assert_allclose(to64(y), v, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(to64(x.grad), g, rtol=1e-6, err_msg=name)
    x = ampc.tensor([-inf, 0.0, inf, nan], requires_grad=True)
    F.elu(x).sum().backward()
    np.testing.assert_array_equal(to64(F.elu(x)), [-1, 0, inf, nan])
    np.testing.assert_array_equal(to64(x.grad), [0, 1, 1, 1])
    x.grad = None
    F.selu(x).sum().backward()
    assert to64(x.grad)[1] == pytest.approx(SA * SS, rel=1e-6)
    x.grad = None
    F.softplus(x).sum().backward()
    np.testing.assert_array_equal(to64(F.softplus(x)),
                                  [0, np.float32(math.log(2)), inf, nan])
    np.testing.assert_array_equal(to64(x.grad), [0, 0.5, 1, nan])
    x.grad = None
    F.logsigmoid(x).sum().backward()
    np.testing.assert_array_equal(to64(x.grad), [1, 0.5, 0, nan])
    assert to64(F.logsigmoid(x))[0] == -inf and to64(F.logsigmoid(x))[2] == 0
    assert np.isnan(to64(F.mish(x))[0]) and to64(F.mish(x))[2] == inf


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_every_float_dtype(name, dtype):
    xv = _inputs(37, 1)
    xv = xv[np.abs(xv) < 60]
    x = from_values(xv, dtype).requires_grad_()
    y = _call(name, x)
    assert y.dtype.name == dtype
    y.backward(ampc.ones(*x.shape).to(x.dtype))
    assert x.grad.dtype.name == dtype
    x64 = to64(x)
    # the composites round once from float32 (softsign, torch's composite
    # too, rounds twice)
    k = 3 if name == "softsign" else 1
    assert_close(y, OPS[name][1](x64), dtype, k=k)
    assert_close(x.grad, OPS[name][2](x64), dtype, k=3)


@pytest.mark.parametrize("name", sorted(OPS))
def test_gradients_by_finite_differences(name):
    # away from the kinks, where a central difference is meaningless
    rng = np.random.default_rng(3)
    v = rng.uniform(-5, 5, size=(3, 11))
    kinks = {"relu6": [0, 6], "hardtanh": [-2, 0.5], "hardsigmoid": [-3, 3],
             "hardswish": [-3, 3]}.get(name, [0] if "elu" in name else [])
    for k in kinks:
        v = np.where(np.abs(v - k) < 1e-2, v + 0.05, v)
    v = v.astype(np.float32).astype(np.float64)
    gradcheck(lambda t: _call(name, t), OPS[name][1], [(3, 11)], values=[v])


@pytest.mark.parametrize("name", SMOOTH + ("hardswish",))
def test_second_derivative(name):
    xv = np.linspace(-4.0, 4.0, 31)
    xv = xv[np.abs(xv) > 1e-3]
    x = ampc.tensor(xv.astype(np.float32), requires_grad=True)
    g, = ampc.autograd.grad(_call(name, x).sum(), x, create_graph=True)
    assert g.grad_fn is not None
    h, = ampc.autograd.grad(g.sum(), x)
    eps = 1e-6
    d = OPS[name][2]
    want = (d(xv + eps) - d(xv - eps)) / (2 * eps)
    np.testing.assert_allclose(to64(h), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(OPS))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    xv = _inputs(301, 4).astype(np.float32)
    xv = np.concatenate([xv, [np.inf, -np.inf, np.nan]]).astype(np.float32)
    x = ampc.tensor(xv, requires_grad=True)
    y = _call(name, x)
    y.sum().backward()
    tx = torch.from_numpy(xv).requires_grad_()
    ty = getattr(torch.nn.functional, name)(tx, **OPS[name][0])
    ty.sum().backward()
    assert y.grad_fn.name() == ty.grad_fn.name()
    np.testing.assert_allclose(to64(y), ty.detach().double().numpy(),
                               rtol=2e-6, atol=1e-12)
    # near a root of the derivative (mish' at -1.19) each side is as
    # accurate as the terms that cancel there
    np.testing.assert_allclose(to64(x.grad), tx.grad.double().numpy(),
                               rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", INPLACE)
def test_in_place_under_autograd_matches_torch(name):
    torch = pytest.importorskip("torch")
    xv = np.array([-4.0, -2.0, -0.3, 0.0, 0.2, 0.5, 2.5, 3.0, 7.0],
                  dtype=np.float32)
    a = ampc.tensor(xv, requires_grad=True)
    y = a * 2
    assert _call(name, y, inplace=True) is y
    (y * y).sum().backward()
    ta = torch.from_numpy(xv).requires_grad_()
    ty = ta * 2
    getattr(torch.nn.functional, name)(ty, inplace=True, **OPS[name][0])
    (ty * ty).sum().backward()
    np.testing.assert_allclose(to64(y), ty.detach().double().numpy(),
                               rtol=1e-6)
    # torch's in-place elu differentiates through its output (y + alpha
    # below 0, which cancels near -alpha), ampc through the saved input
    np.testing.assert_allclose(to64(a.grad), ta.grad.double().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_in_place_without_grad_and_underscore_forms():
    x = ampc.randn(5, 7)
    for name in INPLACE:
        y = x.clone()
        assert _call(name, y, inplace=True) is y
        assert ampc.equal(y, _call(name, x))
    for fn, ref in [(F.hardtanh_, F.hardtanh), (F.elu_, F.elu),
                    (F.selu_, F.selu), (F.celu_, F.celu)]:
        y = x.clone()
        assert fn(y) is y and ampc.equal(y, ref(x))
    leaf = ampc.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        F.elu(leaf, inplace=True)


def test_modules():
    reprs = {
        nn.Hardtanh(-2, 3, True): "Hardtanh(min_val=-2, max_val=3, inplace=True)",
        nn.Hardtanh(): "Hardtanh(min_val=-1.0, max_val=1.0)",
        nn.ReLU6(): "ReLU6()", nn.ReLU6(True): "ReLU6(inplace=True)",
        nn.ELU(): "ELU(alpha=1.0)", nn.ELU(0.5, True): "ELU(alpha=0.5, inplace=True)",
        nn.SELU(True): "SELU(inplace=True)", nn.SELU(): "SELU()",
        nn.CELU(2.0): "CELU(alpha=2.0)",
        nn.Softplus(): "Softplus(beta=1.0, threshold=20.0)",
        nn.Softplus(2, 10): "Softplus(beta=2, threshold=10)",
        nn.Hardsigmoid(True): "Hardsigmoid()", nn.Hardswish(): "Hardswish()",
        nn.Softsign(): "Softsign()", nn.Mish(True): "Mish(inplace=True)",
        nn.Mish(): "Mish()", nn.LogSigmoid(): "LogSigmoid()",
    }
    for m, r in reprs.items():
        assert repr(m) == r
    x = ampc.randn(4, 5)
    pairs = [(nn.ReLU6(), F.relu6(x)), (nn.Hardtanh(-2, 0.5), F.hardtanh(x, -2, 0.5)),
             (nn.ELU(0.7), F.elu(x, 0.7)), (nn.SELU(), F.selu(x)),
             (nn.CELU(2.0), F.celu(x, 2.0)), (nn.Softplus(1.5, 10), F.softplus(x, 1.5, 10)),
             (nn.Hardsigmoid(), F.hardsigmoid(x)), (nn.Hardswish(), F.hardswish(x)),
             (nn.Softsign(), F.softsign(x)), (nn.Mish(), F.mish(x)),
             (nn.LogSigmoid(), F.logsigmoid(x))]
    for m, want in pairs:
        assert ampc.equal(m(x), want)
    z = x.clone()
    assert nn.ELU(inplace=True)(z) is z and ampc.equal(z, F.elu(x))
    for n in ("ReLU6", "Hardtanh", "ELU", "SELU", "CELU", "Softplus",
              "Hardsigmoid", "Hardswish", "Softsign", "Mish", "LogSigmoid"):
        assert n in nn.__all__
    for n in ("relu6", "hardtanh", "hardtanh_", "elu", "elu_", "selu",
              "selu_", "celu", "celu_", "softplus", "hardsigmoid",
              "hardswish", "softsign", "mish", "logsigmoid"):
        assert n in F.__all__


def test_autocast_keeps_the_input_dtype():
    x = ampc.randn(3, 4)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        for name in OPS:
            assert _call(name, x).dtype == ampc.float32
            assert _call(name, x.half()).dtype == ampc.float16


def test_bad_arguments():
    with pytest.raises(TypeError, match="input"):
        F.elu([1.0])
    with pytest.raises(RuntimeError, match="softplus.*floating"):
        F.softplus(ampc.ones(2, dtype=ampc.int64))
    with pytest.raises(ValueError, match="min_val cannot be greater"):
        F.hardtanh(ampc.ones(2), 1.0, -1.0)
    with pytest.raises(ValueError, match="min_val cannot be greater"):
        nn.Hardtanh(1.0, -1.0)
    with pytest.raises(TypeError, match="alpha.*number"):
        F.elu(ampc.ones(2), alpha="1")
    with pytest.raises(TypeError, match="beta.*number"):
        F.softplus(ampc.ones(2), beta=None)


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_autocast_runs_softplus_in_float32():
    """PyTorch's CUDA autocast lists softplus as a float32 op."""
    x = ampc.randn(8, device="cuda").half()
    with ampc.autocast("cuda", dtype=ampc.float16):
        assert F.softplus(x).dtype is ampc.float32
        assert F.elu(x).dtype is ampc.float16
