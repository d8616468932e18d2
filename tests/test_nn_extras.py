"""prelu / PReLU, channel-wise dropout (dropout1d/2d/3d and their
modules), nn.init.trunc_normal_ and parameters_to_vector /
vector_to_parameters: against float64 NumPy, finite differences and, where
installed, torch."""
import math
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
from ampc import nn
from cuda_helpers import requires_cuda

try:
    import torch
except ImportError:     # the torch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
RNG = np.random.default_rng(7)


# ----------------------------------------------------------------------------
# prelu


def _prelu_ref(x, w):
    w = np.asarray(w, dtype=np.float64)
    if w.size > 1:
        w = w.reshape((-1,) + (1,) * (x.ndim - 2))
    return np.where(x > 0, x, w * x)


@pytest.mark.parametrize("shape, slopes", [
    ((7,), 1), ((5, 3), 3), ((2, 3, 5, 7), 3), ((4, 33), 1), ((3, 1031), 1),
    ((), 1)])
def test_prelu_values_and_gradients(shape, slopes):
    x = RNG.standard_normal(shape).astype(np.float32)
    if x.size:
        x.flat[0] = 0.0                     # the kink: the slope's branch
    w = RNG.uniform(0.05, 0.5, slopes).astype(np.float32)
    xt = ampc.tensor(x, requires_grad=True)
    wt = nn.Parameter(ampc.tensor(w))
    y = F.prelu(xt, wt)
    np.testing.assert_allclose(y.detach().numpy(),
                               _prelu_ref(x.astype(np.float64), w),
                               rtol=1e-6)
    g = RNG.standard_normal(shape).astype(np.float32)
    y.backward(ampc.tensor(g))
    wb = w.reshape((-1,) + (1,) * (x.ndim - 2)) if slopes > 1 else w[0]
    np.testing.assert_allclose(xt.grad.numpy(), np.where(x > 0, g, wb * g),
                               rtol=1e-6)
    gw = np.where(x > 0, 0.0, x.astype(np.float64) * g)
    if slopes > 1:
        gw = gw.swapaxes(0, 1).reshape(slopes, -1).sum(1)
    else:
        gw = np.array([gw.sum()])
    np.testing.assert_allclose(wt.grad.numpy(), gw, rtol=1e-5, atol=1e-5)


def test_prelu_gradient_by_finite_differences():
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    x[np.abs(x) < 0.05] = 0.3               # away from the kink
    w = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    xt = ampc.tensor(x, requires_grad=True)
    wt = ampc.tensor(w, requires_grad=True)
    (F.prelu(xt, wt) ** 2).sum().backward()
    eps = 1e-3
    for i in range(4):
        up, dn = w.astype(np.float64).copy(), w.astype(np.float64).copy()
        up[i] += eps
        dn[i] -= eps
        fd = ((_prelu_ref(x, up) ** 2).sum() -
              (_prelu_ref(x, dn) ** 2).sum()) / (2 * eps)
        assert abs(wt.grad.numpy()[i] - fd) <= 1e-3 * max(1.0, abs(fd))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prelu_16_bit(dtype):
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    dt = getattr(ampc, dtype)
    xt = ampc.tensor(x).to(dt)
    m = nn.PReLU(3, 0.2, dtype=dt)
    y = m(xt)
    assert y.dtype is dt
    ref = _prelu_ref(xt.float().numpy().astype(np.float64),
                     m.weight.float().detach().numpy())
    np.testing.assert_allclose(y.float().detach().numpy(), ref, rtol=1e-2,
                               atol=1e-3)


def test_prelu_autocast_runs_in_the_autocast_dtype():
    m = nn.PReLU(3)
    x = ampc.randn(2, 3, 4)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        y = m(x)
    assert y.dtype is ampc.bfloat16
    y.float().sum().backward()
    assert m.weight.grad.dtype is ampc.float32


def test_prelu_errors():
    with pytest.raises(RuntimeError, match="Found parameter numbers = 3 and "
                       "channel size = 4"):
        F.prelu(ampc.ones(2, 4), ampc.ones(3))
    with pytest.raises(RuntimeError, match="scalar or 1D tensor, but got: "
                       "ndim = 2"):
        F.prelu(ampc.ones(2, 3), ampc.ones(3, 1))
    with pytest.raises(RuntimeError, match="Type promoting not supported. "
                       "Got Half and Float"):
        F.prelu(ampc.ones(2, 3).half(), ampc.ones(3))
    with pytest.raises(TypeError, match="argument 'weight'"):
        F.prelu(ampc.ones(2), 0.25)


def test_prelu_module():
    m = nn.PReLU()
    assert repr(m) == "PReLU(num_parameters=1)"
    np.testing.assert_array_equal(m.weight.detach().numpy(), [0.25])
    np.testing.assert_allclose(
        m(ampc.tensor([-4.0, 2.0])).detach().numpy(), [-1.0, 2.0])


@needs_torch
def test_prelu_matches_torch():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x[0, 0, 0, :2] = 0.0
    w = RNG.uniform(0, 1, 3).astype(np.float32)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    outs = []
    for m in (ampc, torch):
        xt = m.tensor(x, requires_grad=True)
        wt = m.tensor(w, requires_grad=True)
        y = m.nn.functional.prelu(xt, wt)
        y.backward(m.tensor(g))
        outs.append([t.detach().numpy() for t in (y, xt.grad, wt.grad)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------
# channel-wise dropout


@pytest.mark.parametrize("fn, shape", [
    (F.dropout1d, (16, 9, 7)), (F.dropout1d, (33, 5)),
    (F.dropout2d, (8, 12, 3, 5)), (F.dropout2d, (8, 12, 7)),
    (F.dropout3d, (4, 10, 2, 3, 3)), (F.dropout3d, (10, 2, 3, 3))])
def test_feature_dropout_zeroes_whole_channels(fn, shape):
    p = 0.4
    x = ampc.tensor(RNG.uniform(1, 2, shape).astype(np.float32),
                    requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = fn(x, p=p)
    yn, xn = y.detach().numpy(), x.detach().numpy()
    batched = len(shape) in (3, 5) or fn is F.dropout2d
    lead = 2 if batched else 1
    per = yn.reshape(int(np.prod(shape[:lead])), -1)
    kept = per[:, 0] != 0
    # each channel is all zero or all kept, scaled by 1/(1-p)
    assert np.all((per != 0) == kept[:, None])
    np.testing.assert_allclose(
        per[kept], xn.reshape(per.shape)[kept] / (1 - p), rtol=1e-6)
    y.backward(ampc.ones(shape))
    np.testing.assert_allclose(
        x.grad.numpy().reshape(per.shape),
        np.where(kept[:, None], 1 / (1 - p), 0.0) * np.ones_like(per),
        rtol=1e-6)


def test_feature_dropout_keep_rate_and_seed():
    ampc.manual_seed(3)
    y = F.dropout2d(ampc.ones(200, 50, 1, 1), p=0.3)
    kept = (y.numpy() != 0).mean()
    assert abs(kept - 0.7) < 4 * math.sqrt(0.21 / 10000)
    ampc.manual_seed(3)
    np.testing.assert_array_equal(
        F.dropout2d(ampc.ones(200, 50, 1, 1), p=0.3).numpy(), y.numpy())


def test_feature_dropout_identity_cases_and_p_one():
    x = ampc.randn(2, 3, 4)
    assert F.dropout1d(x, 0.5, training=False) is x
    assert F.dropout1d(x, 0.0) is x
    nan = ampc.tensor([[[float("nan")], [1.0]]])
    out = F.dropout1d(nan, 1.0).numpy()
    assert np.isnan(out[0, 0, 0]) and out[0, 1, 0] == 0.0


def test_feature_dropout_in_place():
    x = ampc.ones(4, 6, 5)
    out = F.dropout1d(x, 0.5, inplace=True)
    assert out is x
    per = x.numpy().reshape(24, 5)
    assert set(np.unique(per)) <= {0.0, 2.0}
    y = ampc.ones(6, 5)
    assert F.dropout1d(y, 0.5, inplace=True) is y
    assert y.shape == (6, 5)


def test_feature_dropout_ranks_and_warnings():
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D "
                       "input, but received a 4D input"):
        F.dropout1d(ampc.ones(2, 2, 2, 2))
    with pytest.warns(UserWarning, match="Received a 5-D input to "
                      "dropout2d"):
        F.dropout2d(ampc.ones(2, 2, 2, 2, 2))
    with pytest.warns(UserWarning, match="assuming that channel-wise 1D"):
        F.dropout2d(ampc.ones(2, 2, 2))
    with pytest.warns(UserWarning, match="Received a 3-D input to "
                      "dropout3d"):
        F.dropout3d(ampc.ones(2, 2, 2))
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        F.dropout2d(ampc.ones(2, 2, 2, 2), 1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout3d(-0.1)


def test_dropout_modules_follow_train_and_eval():
    for cls, shape in ((nn.Dropout1d, (3, 4, 5)), (nn.Dropout2d, (3, 4, 2, 2)),
                       (nn.Dropout3d, (3, 4, 2, 2, 2))):
        m = cls(0.5)
        assert repr(m) == f"{cls.__name__}(p=0.5, inplace=False)"
        x = ampc.ones(*shape)
        assert m.eval()(x) is x
        m.p = 1.0
        assert not m.train()(x).numpy().any()


# ----------------------------------------------------------------------------
# trunc_normal_


def _truncated_moments(a, b):
    """Mean and variance of a standard normal truncated to [a, b]."""
    pdf = lambda t: math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa
    cdf = lambda t: 0.5 * math.erfc(-t / math.sqrt(2))  # noqa
    z = cdf(b) - cdf(a)
    pa, pb = pdf(a), pdf(b)
    ta = a * pa if math.isfinite(a) else 0.0
    tb = b * pb if math.isfinite(b) else 0.0
    mean = (pa - pb) / z
    var = 1 + (ta - tb) / z - mean ** 2
    return mean, var


@pytest.mark.parametrize("a, b", [(-2.0, 2.0), (3.0, 5.0), (-0.01, 0.01),
                                  (-math.inf, -6.0), (1.0, 1.01),
                                  (0.5, math.inf)])
def test_trunc_normal_moments_and_bounds(a, b):
    ampc.manual_seed(11)
    n = 40000
    with warnings.catch_warnings():     # far tails: PyTorch's warning
        warnings.simplefilter("ignore")
        t = nn.init.trunc_normal_(ampc.empty(n), a=a, b=b)
    x = t.numpy().astype(np.float64)
    assert x.min() >= a and x.max() <= b
    mean, var = _truncated_moments(a, b)
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / n) + 1e-6
    assert abs(x.var() - var) < 0.05 * var + 1e-9


def test_trunc_normal_scaled_and_repeatable():
    ampc.manual_seed(5)
    t = nn.init.trunc_normal_(ampc.empty(200, 50), mean=1.0, std=0.02,
                              a=0.97, b=1.03)
    x = t.numpy()
    assert t.shape == (200, 50) and x.min() >= 0.97 and x.max() <= 1.03
    assert abs(x.mean() - 1.0) < 1e-3
    ampc.manual_seed(5)
    u = nn.init.trunc_normal_(ampc.empty(200, 50), mean=1.0, std=0.02,
                              a=0.97, b=1.03)
    np.testing.assert_array_equal(u.numpy(), x)
    h = nn.init.trunc_normal_(ampc.empty(7, dtype=ampc.bfloat16))
    assert h.dtype is ampc.bfloat16 and float(h.float().abs().max()) <= 2


def test_trunc_normal_warns_and_checks():
    with pytest.warns(UserWarning, match="mean is more than 2 std"):
        nn.init.trunc_normal_(ampc.empty(3), mean=10.0)
    with pytest.raises(ValueError, match="std > 0 and a < b"):
        nn.init.trunc_normal_(ampc.empty(3), a=1.0, b=-1.0)
    with pytest.raises(TypeError, match="argument 'tensor'"):
        nn.init.trunc_normal_(np.zeros(3))


# ----------------------------------------------------------------------------
# parameters_to_vector / vector_to_parameters


def test_parameters_to_vector_round_trip():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    vec = nn.utils.parameters_to_vector(net.parameters())
    parts = [p.detach().numpy().ravel() for p in net.parameters()]
    np.testing.assert_array_equal(vec.detach().numpy(), np.concatenate(parts))
    assert vec.shape == (sum(p.numel() for p in net.parameters()),)
    new = ampc.arange(vec.numel()).float()
    nn.utils.vector_to_parameters(new, net.parameters())
    np.testing.assert_array_equal(
        nn.utils.parameters_to_vector(net.parameters()).detach().numpy(),
        np.arange(vec.numel(), dtype=np.float32))
    assert net[0].weight.shape == (4, 3)
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        nn.utils.vector_to_parameters([1.0], net.parameters())


def test_parameters_to_vector_carries_gradients():
    lin = nn.Linear(2, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    (vec * ampc.arange(6).float()).sum().backward()
    np.testing.assert_array_equal(lin.weight.grad.numpy(), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(lin.bias.grad.numpy(), [4, 5])


# ----------------------------------------------------------------------------
# on the GPU


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_cuda_prelu_and_channel_dropout_match_the_cpu(dtype):
    dt = getattr(ampc, dtype)
    x = RNG.standard_normal((4, 3, 5, 7)).astype(np.float32)
    w = RNG.uniform(0.05, 0.5, 3).astype(np.float32)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    results = []
    for dev in ("cpu", "cuda"):
        xt = ampc.tensor(x, device=dev).to(dt).requires_grad_()
        wt = ampc.tensor(w, device=dev).to(dt).requires_grad_()
        y = F.prelu(xt, wt)
        y.backward(ampc.tensor(g, device=dev).to(dt))
        results.append([t.float().detach().cpu().numpy()
                        for t in (y, xt.grad)])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    y = F.dropout2d(ampc.ones(64, 16, 3, 3, device="cuda", dtype=dt), 0.25)
    per = y.float().cpu().numpy().reshape(64 * 16, 9)
    assert set(np.unique(per)) <= {0.0, np.float32(ampc.tensor(
        1 / 0.75).to(dt).float().item())}
    assert np.all((per == 0).all(1) | (per != 0).all(1))
