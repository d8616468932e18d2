"""F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.binary_cross_entropy and
their modules (ampc/nn/_losses_more.py): values for every reduction and
float dtype against float64 NumPy, gradients by finite differences, values,
gradients and second derivatives against torch (when importable), the
kinks (input == target, |d| == beta / delta, BCE at 0 and 1), autocast's
float32 policy and the CUDA ban of binary_cross_entropy, the modules and
the argument errors; on the CPU and (cuda-marked) the GPU."""
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import device, requires_cuda  # noqa: F401 (a fixture)
from helpers import gradcheck, to64, torch_or_skip, to_torch

FLOATS = ("float32", "float16", "bfloat16")      # ampc has no float64
REDUCTIONS = ("mean", "sum", "none")
SHAPES = ((37,), (5, 7), (2, 3, 5))

# ----------------------------------------------------------------------------
# float64 references


def ref_l1(x, y):
    return np.abs(x - y)


def ref_smooth_l1(x, y, beta=1.0):
    d = x - y
    if beta == 0:
        return np.abs(d)
    return np.where(np.abs(d) < beta, 0.5 * d * d / beta,
                    np.abs(d) - 0.5 * beta)


def ref_huber(x, y, delta=1.0):
    d = x - y
    return np.where(np.abs(d) < delta, 0.5 * d * d,
                    delta * (np.abs(d) - 0.5 * delta))


def ref_bce(x, y, w=None):
    with np.errstate(divide="ignore"):
        loss = -(y * np.maximum(np.log(x), -100) +
                 (1 - y) * np.maximum(np.log(1 - x), -100))
    return loss if w is None else loss * w


def reduce_ref(loss, reduction):
    if reduction == "mean":
        return np.asarray(loss.mean())
    return np.asarray(loss.sum()) if reduction == "sum" else loss


# name -> (ampc function, reference, kwargs, input range, target range)
LOSSES = {
    "l1_loss": (F.l1_loss, ref_l1, {}),
    "smooth_l1_loss": (F.smooth_l1_loss, ref_smooth_l1, {"beta": 0.75}),
    "smooth_l1_loss_beta0": (F.smooth_l1_loss, ref_smooth_l1, {"beta": 0.0}),
    "huber_loss": (F.huber_loss, ref_huber, {"delta": 1.25}),
    "binary_cross_entropy": (F.binary_cross_entropy, ref_bce, {}),
}


def values(name, shape, dtype, seed=0):
    """Input and target values that ``dtype`` holds exactly (probabilities
    in (0, 1) for BCE)."""
    rng = np.random.default_rng(seed)
    rd = dtype
    if name == "binary_cross_entropy":
        x = ref.round_to(rng.uniform(0.02, 0.98, size=shape), rd)
        y = ref.round_to(rng.uniform(0.0, 1.0, size=shape), rd)
    else:
        x = ref.round_to(rng.uniform(-3, 3, size=shape), rd)
        y = ref.round_to(rng.uniform(-3, 3, size=shape), rd)
    return x, y


def make(v, dtype, dev="cpu", grad=False):
    t = ampc.tensor(np.asarray(v, dtype=np.float64)).to(
        getattr(ampc, dtype)).to(dev)
    return t.requires_grad_() if grad else t


def tol(dtype):
    return {"float32": (1e-5, 1e-6),
            "float16": (4e-3, 2e-3), "bfloat16": (3e-2, 2e-2)}[dtype]


# ----------------------------------------------------------------------------
# values against NumPy


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_values_against_numpy(name, dtype, reduction, shape):
    fn, reference, kw = LOSSES[name]
    x, y = values(name, shape, dtype)
    out = fn(make(x, dtype), make(y, dtype), reduction=reduction, **kw)
    assert out.dtype is getattr(ampc, dtype)
    want = reduce_ref(reference(x, y, **kw), reduction)
    assert tuple(out.shape) == want.shape
    rtol, atol = tol(dtype)
    np.testing.assert_allclose(to64(out), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_weight_broadcast(reduction):
    x, y = values("binary_cross_entropy", (5, 7), "float32")
    w = ref.round_to(np.random.default_rng(3).uniform(0.5, 2, size=(7,)),
                     "float32")
    out = F.binary_cross_entropy(make(x, "float32"), make(y, "float32"),
                                 weight=make(w, "float32"),
                                 reduction=reduction)
    want = reduce_ref(ref_bce(x, y, w), reduction)
    np.testing.assert_allclose(to64(out), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_and_huber_weight(reduction):
    x, y = values("l1_loss", (5, 7), "float32")
    w = ref.round_to(np.random.default_rng(4).uniform(0.5, 2, size=(5, 7)),
                     "float32")
    args = make(x, "float32"), make(y, "float32")
    out = F.l1_loss(*args, reduction=reduction, weight=make(w, "float32"))
    lw = ref_l1(x, y) * w
    want = lw.sum() / w.sum() if reduction == "mean" else \
        reduce_ref(lw, reduction)
    np.testing.assert_allclose(to64(out), want, rtol=1e-5, atol=1e-6)
    out = F.huber_loss(*args, reduction=reduction, delta=0.5,
                       weight=make(w, "float32"))
    want = reduce_ref(ref_huber(x, y, 0.5) * w, reduction)
    np.testing.assert_allclose(to64(out), want, rtol=1e-5, atol=1e-6)


def test_bce_clamps_logs_at_minus_100():
    out = F.binary_cross_entropy(ampc.tensor([0.0, 1.0, 0.0, 1.0]),
                                 ampc.tensor([1.0, 0.0, 0.0, 1.0]),
                                 reduction="none")
    assert to64(out).tolist() == [100.0, 100.0, 0.0, 0.0]


def test_mixed_dtypes_promote():
    h = ampc.tensor([0.5, 2.0]).half()
    assert F.l1_loss(h, ampc.tensor([1.0, 1.0])).dtype is ampc.float32
    assert F.huber_loss(h, h).dtype is ampc.float16
    with pytest.raises(RuntimeError, match="binary_cross_entropy.*Found "
                                           "dtype Float but expected Half"):
        F.binary_cross_entropy(ampc.tensor([0.5]).half(), ampc.tensor([1.]))


def test_empty():
    e = ampc.empty(0)
    for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss,
               F.binary_cross_entropy):
        assert np.isnan(fn(e, e).item())
        assert fn(e, e, reduction="sum").item() == 0.0
        assert fn(e, e, reduction="none").shape == (0,)


# ----------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradients_by_differences(name, reduction):
    fn, reference, kw = LOSSES[name]
    x, y = values(name, (5, 7), "float32", seed=7)
    d = x - y
    if name != "binary_cross_entropy":
        # keep away from the kinks (0, +-beta, +-delta) by > the step
        width = kw.get("beta", kw.get("delta", 0.0))
        for k in (0.0, width, -width):
            x = np.where(np.abs(d - k) < 1e-3, x + 0.01, x)

    def ref_fn(a, b):
        return reduce_ref(reference(a, b, **kw), reduction)

    gradcheck(lambda a, b: fn(a, b, reduction=reduction, **kw), ref_fn,
              None, values=[x, y])


def test_gradients_at_the_kinks():
    # torch: l1's gradient at input == target is 0 (sign); smooth_l1 and
    # huber are continuous at |d| == beta / delta (+-1, +-delta)
    x = ampc.tensor([0.0, 1.0, -1.0, 0.5, 3.0, -3.0], requires_grad=True)
    y = ampc.zeros(6)
    cases = [(F.l1_loss, {}, [0, 1, -1, 1, 1, -1]),
             (F.smooth_l1_loss, {"beta": 1.0}, [0, 1, -1, 0.5, 1, -1]),
             (F.smooth_l1_loss, {"beta": 0.0}, [0, 1, -1, 1, 1, -1]),
             (F.huber_loss, {"delta": 1.0}, [0, 1, -1, 0.5, 1, -1]),
             (F.huber_loss, {"delta": 0.5}, [0, .5, -.5, .5, .5, -.5])]
    for fn, kw, want in cases:
        x.grad = None
        fn(x, y, reduction="sum", **kw).backward()
        assert to64(x.grad).tolist() == want, (fn.__name__, kw)


def test_bce_gradients_at_0_and_1():
    # PyTorch's closed forms: input (x - y) / max(x (1 - x), 1e-12),
    # target log(1 - x) - log(x) (infinite at 0 and 1)
    x = ampc.tensor([0.0, 0.5, 1.0, 0.0], requires_grad=True)
    y = ampc.tensor([0.0, 1.0, 1.0, 1.0], requires_grad=True)
    F.binary_cross_entropy(x, y, reduction="sum").backward()
    np.testing.assert_allclose(to64(x.grad), [0.0, -2.0, 0.0, -1e12],
                               rtol=1e-6)
    assert to64(y.grad).tolist() == [np.inf, 0.0, -np.inf, np.inf]


@pytest.mark.parametrize("name", LOSSES)
def test_second_derivatives(name):
    fn, reference, kw = LOSSES[name]
    x, y = values(name, (6,), "float32", seed=2)
    xt = ampc.tensor(x, requires_grad=True)
    g, = ampc.autograd.grad(fn(xt, ampc.tensor(y), reduction="sum", **kw),
                            xt, create_graph=True)
    if g.requires_grad:
        h, = ampc.autograd.grad(g.sum(), xt)
    else:       # sign(d) alone: ampc's gradient of abs has no graph
        assert name.startswith("l1") or name.endswith("beta0")
        h = ampc.zeros(6)
    d = x - y
    if name == "binary_cross_entropy":
        want = (x * x - 2 * x * y + y) / (x * x * (1 - x) ** 2)
    elif name == "huber_loss":
        want = (np.abs(d) < kw["delta"]).astype(float)
    elif name == "smooth_l1_loss":
        want = (np.abs(d) < kw["beta"]) / kw["beta"]
    else:
        want = np.zeros(6)
    np.testing.assert_allclose(to64(h), want, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------
# against torch


def torch_fn(torch, name):
    return getattr(torch.nn.functional, name.replace("_beta0", ""))


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_matches_torch(device, name, dtype, reduction):
    torch = torch_or_skip()
    fn, _, kw = LOSSES[name]
    x, y = values(name, (5, 7), dtype, seed=11)
    if name == "binary_cross_entropy":
        x[0, :4] = [0.0, 1.0, 0.0, 1.0]
        y[0, :4] = [0.0, 1.0, 1.0, 0.0]
    else:
        x[0, :3] = y[0, :3] + np.array([0.0, 0.75, -1.25])   # kinks
        x = ref.round_to(x, dtype)
    xa, ya = make(x, dtype, device, True), make(y, dtype, device, True)
    out = fn(xa, ya, reduction=reduction, **kw)
    k = np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape)) / 10
    (out * make(k, dtype, device)).sum().backward()
    xt, yt = (to_torch(torch, t.detach().cpu()).requires_grad_()
              for t in (xa, ya))
    want = torch_fn(torch, name)(xt, yt, reduction=reduction, **kw)
    (want * to_torch(torch, make(k, dtype))).sum().backward()
    assert out.dtype.name == str(want.dtype).replace("torch.", "")
    rtol, atol = tol(dtype)
    for got, exp in ((out, want), (xa.grad, xt.grad), (ya.grad, yt.grad)):
        np.testing.assert_allclose(
            to64(got.cpu()), exp.detach().double().numpy(), rtol=rtol,
            atol=atol)


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_second_order_matches_torch(device, name, reduction):
    torch = torch_or_skip()
    fn, _, kw = LOSSES[name]
    x, y = values(name, (4, 5), "float32", seed=5)
    results = []
    for lib, dev in ((ampc, device), (torch, "cpu")):
        xi = lib.tensor(x).to(dev).requires_grad_()
        yi = lib.tensor(y).to(dev).requires_grad_()
        f = fn if lib is ampc else torch_fn(torch, name)
        out = f(xi, yi, reduction=reduction, **kw)
        k = lib.arange(1.0, out.numel() + 1).to(dev).reshape(out.shape)
        gx, gy = lib.autograd.grad((out * k).sum(), (xi, yi),
                                   create_graph=True)
        penalty = (gx * gx).sum() + (gy * gy).sum()
        if lib is ampc and not penalty.requires_grad:
            # l1: ampc's gradient of abs, sign(d), has no graph (torch's
            # sgn has one, of zeros)
            hx, hy = ampc.zeros_like(xi), ampc.zeros_like(yi)
        else:
            hx, hy = lib.autograd.grad(penalty, (xi, yi))
        results.append([np.asarray((t.detach().cpu() + 0).numpy(), np.float64)
                        for t in (out, gx, gy, hx, hy)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# autocast


def test_cpu_autocast_runs_in_float32():
    x = ampc.rand(3, 4).bfloat16()
    y = ampc.rand(3, 4).bfloat16()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss,
                   F.binary_cross_entropy):
            assert fn(x, y).dtype is ampc.float32, fn.__name__
    assert F.l1_loss(x, y).dtype is ampc.bfloat16


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_float32_and_bce_ban():
    x = ampc.rand(3, 4, device="cuda").half()
    y = ampc.rand(3, 4, device="cuda").half()
    with ampc.autocast("cuda"):
        for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss):
            assert fn(x, y).dtype is ampc.float32, fn.__name__
        with pytest.raises(RuntimeError) as info:
            F.binary_cross_entropy(x, y)
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            nn.BCELoss()(x.float(), y.float())
    assert str(info.value).startswith(
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are "
        "unsafe to autocast.\n")
    assert "BCEWithLogitsLoss.  binary_cross_entropy_with_logits" in \
        str(info.value)
    assert F.binary_cross_entropy(x, y).dtype is ampc.float16


# ----------------------------------------------------------------------------
# modules


def test_modules():
    x, y = values("l1_loss", (5, 7), "float32")
    xa, ya = make(x, "float32"), make(y, "float32")
    assert repr(nn.L1Loss()) == "L1Loss()"
    assert repr(nn.SmoothL1Loss(beta=0.5)) == "SmoothL1Loss()"
    assert repr(nn.HuberLoss(delta=2.0)) == "HuberLoss()"
    assert repr(nn.BCELoss()) == "BCELoss()"
    for reduction in REDUCTIONS:
        pairs = [(nn.L1Loss(reduction=reduction),
                  F.l1_loss(xa, ya, reduction=reduction)),
                 (nn.SmoothL1Loss(reduction=reduction, beta=0.5),
                  F.smooth_l1_loss(xa, ya, reduction=reduction, beta=0.5)),
                 (nn.HuberLoss(reduction=reduction, delta=2.0),
                  F.huber_loss(xa, ya, reduction=reduction, delta=2.0))]
        for mod, want in pairs:
            assert mod.reduction == reduction
            np.testing.assert_array_equal(to64(mod(xa, ya)), to64(want))
    assert nn.SmoothL1Loss(beta=0.5).beta == 0.5
    assert nn.HuberLoss(delta=2.0).delta == 2.0
    p, t = values("binary_cross_entropy", (5, 7), "float32")
    w = ampc.rand(7)
    crit = nn.BCELoss(weight=w, reduction="sum")
    assert "weight" in dict(crit.named_buffers())
    np.testing.assert_array_equal(
        to64(crit(make(p, "float32"), make(t, "float32"))),
        to64(F.binary_cross_entropy(make(p, "float32"), make(t, "float32"),
                                    weight=w, reduction="sum")))
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.L1Loss(size_average=False).reduction == "sum"
    assert {"L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss"} <= \
        set(nn.__all__)
    assert {"l1_loss", "smooth_l1_loss", "huber_loss",
            "binary_cross_entropy"} <= set(F.__all__)


def test_module_signatures_match_torch():
    torch = torch_or_skip()
    import inspect
    for name in ("L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss"):
        ours = list(inspect.signature(getattr(nn, name)).parameters)
        theirs = list(inspect.signature(getattr(torch.nn, name)).parameters)
        assert ours == theirs, name
    for name in ("l1_loss", "smooth_l1_loss", "huber_loss",
                 "binary_cross_entropy"):
        ours = inspect.signature(getattr(F, name)).parameters
        theirs = inspect.signature(
            getattr(torch.nn.functional, name)).parameters
        assert list(ours) == list(theirs), name
        assert [p.default for p in ours.values()] == \
            [p.default for p in theirs.values()], name


# ----------------------------------------------------------------------------
# errors and warnings


def test_size_mismatch_warns_and_broadcasts():
    x = ampc.randn(3, 4)
    y = ampc.randn(4)
    for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss):
        with pytest.warns(UserWarning, match=r"Using a target size "
                          r"\(ampc.Size\(\[4\]\)\) that is different to the "
                          r"input size \(ampc.Size\(\[3, 4\]\)\)"):
            out = fn(x, y, reduction="none")
        assert out.shape == (3, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match=fn.__name__ +
                               r"\(\): The size of tensor a \(4\) must match "
                               r"the size of tensor b \(5\)"):
                fn(x, ampc.randn(5))


def test_errors():
    x = ampc.rand(3)
    for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss,
               F.binary_cross_entropy):
        name = fn.__name__
        with pytest.raises(ValueError, match="bad is not a valid value for "
                                             f"reduction .*{name}"):
            fn(x, x, reduction="bad")
        with pytest.raises(TypeError, match=f"{name}.*argument 'target'"):
            fn(x, 0.5)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support "
                                           "negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-0.1)
    for delta in (0.0, -1.0):
        with pytest.raises(RuntimeError, match="huber_loss does not support "
                                               "non-positive values for "
                                               "delta"):
            F.huber_loss(x, x, delta=delta)
    for fn in (F.l1_loss, F.huber_loss):
        with pytest.raises(ValueError, match="Weights and input must have "
                                             "the same size"):
            fn(x, x, weight=ampc.ones(1))


def test_bce_errors():
    bce = F.binary_cross_entropy
    ok = ampc.tensor([0.2, 0.7])
    for bad in (1.5, -0.1, float("nan")):
        t = ampc.tensor([0.2, bad])
        with pytest.raises(RuntimeError, match=r"binary_cross_entropy\(\): "
                           "all elements of input should be between 0 and "
                           "1"):
            bce(t, ok)
        with pytest.raises(RuntimeError, match=r"binary_cross_entropy\(\): "
                           "all elements of target should be between 0 and "
                           "1"):
            bce(ok, t)
    with pytest.raises(ValueError, match=r"Using a target size "
                       r"\(ampc.Size\(\[2\]\)\) that is different to the "
                       r"input size \(ampc.Size\(\[1, 2\]\)\) is deprecated"):
        bce(ok.reshape(1, 2), ok)
    with pytest.raises(RuntimeError, match="not differentiable with respect "
                                           "to argument 'weight'"):
        bce(ok, ok, weight=ampc.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="binary_cross_entropy"):
        bce(ok, ok, weight=ampc.ones(3))


# ----------------------------------------------------------------------------
# kl_div


def ref_kl(x, t, log_target=False):
    if log_target:
        return np.exp(t) * (t - x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t == 0, 0.0, t * np.log(np.where(t == 0, 1, t))) \
            - t * x


def kl_values(shape, dtype, log_target, seed=0):
    rng = np.random.default_rng(seed)
    x = ref.round_to(rng.uniform(-4, 0, size=shape), dtype)
    t = ref.round_to(rng.uniform(-3, 0, size=shape) if log_target
                     else rng.uniform(0, 1, size=shape), dtype)
    if not log_target:
        t.flat[0] = 0.0                 # xlogy(0, 0) = 0
    return x, t


KL_REDUCTIONS = ("mean", "sum", "none", "batchmean")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", KL_REDUCTIONS)
@pytest.mark.parametrize("log_target", (False, True))
@pytest.mark.parametrize("shape", SHAPES)
def test_kl_div_against_numpy(dtype, reduction, log_target, shape):
    x, t = kl_values(shape, dtype, log_target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = F.kl_div(make(x, dtype), make(t, dtype), reduction=reduction,
                       log_target=log_target)
    assert out.dtype is getattr(ampc, dtype)
    loss = ref_kl(x, t, log_target)
    want = loss.sum() / shape[0] if reduction == "batchmean" else \
        reduce_ref(loss, reduction)
    rtol, atol = tol(dtype)
    np.testing.assert_allclose(to64(out), want, rtol=rtol, atol=atol * 4)


@pytest.mark.parametrize("reduction", KL_REDUCTIONS)
@pytest.mark.parametrize("log_target", (False, True))
def test_kl_div_gradients_by_differences(reduction, log_target):
    x, t = kl_values((5, 7), "float32", log_target, seed=3)
    if not log_target:
        t = t + 0.01                    # d/dt t log t is infinite at 0

    def ref_fn(a, b):
        loss = ref_kl(a, b, log_target)
        return np.asarray(loss.sum() / 5) if reduction == "batchmean" \
            else reduce_ref(loss, reduction)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gradcheck(lambda a, b: F.kl_div(a, b, reduction=reduction,
                                        log_target=log_target), ref_fn,
                  None, values=[x, t])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", KL_REDUCTIONS)
@pytest.mark.parametrize("log_target", (False, True))
def test_kl_div_matches_torch(device, dtype, reduction, log_target):
    torch = torch_or_skip()
    x, t = kl_values((5, 7), dtype, log_target, seed=9)
    results = []
    for lib, dev in ((ampc, device), (torch, "cpu")):
        if lib is ampc:
            xi, ti = make(x, dtype, dev, True), make(t, dtype, dev, True)
            f = F.kl_div
        else:
            xi, ti = (to_torch(torch, make(v, dtype)).requires_grad_()
                      for v in (x, t))
            f = torch.nn.functional.kl_div
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(xi, ti, reduction=reduction, log_target=log_target)
        out.sum().backward()
        results.append([out.dtype, *[
            np.asarray((v.detach().cpu().float() + 0).numpy(), np.float64)
            for v in (out, xi.grad, ti.grad)]])
    assert results[0][0].name == str(results[1][0]).replace("torch.", "")
    rtol, atol = tol(dtype)
    for got, want in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * 4)


def test_kl_div_behaviour():
    x = ampc.tensor([[-1.0, -2.0, -0.5]])
    t = ampc.tensor([[0.0, 0.3, 0.7]])
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the "
                                         "total loss by both the batch "
                                         "size and the support size"):
        mean = F.kl_div(x, t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batchmean = F.kl_div(x, t, reduction="batchmean")
        assert F.kl_div(ampc.tensor(-1.0), ampc.tensor(0.5),
                        reduction="batchmean").shape == ()
    np.testing.assert_allclose(to64(batchmean), to64(mean) * 3, rtol=1e-6)
    # torch: the target's gradient at 0 is NaN (xlogy), the input's -target
    xg = x.clone().requires_grad_()
    tg = t.clone().requires_grad_()
    F.kl_div(xg, tg, reduction="sum").backward()
    np.testing.assert_allclose(to64(xg.grad), -to64(t), rtol=1e-6)
    assert np.isnan(to64(tg.grad)[0, 0])
    assert np.isnan(F.kl_div(x, -t, reduction="sum").item())
    with pytest.raises(ValueError, match="bad is not a valid value for "
                                         "reduction .*kl_div"):
        F.kl_div(x, t, reduction="bad")
    with pytest.raises(RuntimeError, match=r"kl_div\(\): The size of "
                                           r"tensor a"):
        F.kl_div(x, ampc.zeros(2), reduction="sum")
    with pytest.raises(TypeError, match="kl_div.*argument 'target'"):
        F.kl_div(x, 0.5)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        F.kl_div(x, t, size_average=False)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert F.kl_div(x.bfloat16(), t.bfloat16(),
                        reduction="batchmean").dtype is ampc.float32
    crit = nn.KLDivLoss(reduction="batchmean", log_target=True)
    assert repr(crit) == "KLDivLoss()" and crit.log_target is True
    assert crit(x, x).item() == 0.0
    assert "KLDivLoss" in nn.__all__ and "kl_div" in F.__all__


def test_kl_div_signature_matches_torch():
    torch = torch_or_skip()
    import inspect
    ours = inspect.signature(F.kl_div).parameters
    theirs = inspect.signature(torch.nn.functional.kl_div).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == \
        [p.default for p in theirs.values()]
    assert list(inspect.signature(nn.KLDivLoss).parameters) == \
        list(inspect.signature(torch.nn.KLDivLoss).parameters)
