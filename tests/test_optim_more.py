"""ampc.optim.RMSprop and Adagrad: step by step against torch.optim and
against their formulas in NumPy float64, 16-bit parameters, GradScaler,
state dicts (torch's layout, round trips mid-training) and errors."""
import copy
import io
import itertools
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.optim as optim
from helpers import torch_or_skip

STEPS = 12


def problem(rng, shape=(7, 33), n=STEPS):
    p0 = rng.standard_normal(shape).astype(np.float32)
    grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
    return p0, grads


def run(lib, cls, kw, p0, grads, dtype="float32"):
    """The parameter (float64) after each step of lib's optimiser."""
    p = lib.nn.Parameter(lib.tensor(p0).to(getattr(lib, dtype)))
    opt = getattr(lib.optim, cls)([p], **kw)
    out = []
    for g in grads:
        p.grad = lib.tensor(g).to(getattr(lib, dtype))
        opt.step()
        out.append(p.detach().float().numpy().astype(np.float64))
    return out, opt, p


# ----------------------------------------------------------------------------
# the float64 references, transcribing torch/optim/rmsprop.py, adagrad.py


def rmsprop_ref(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0,
                momentum=0.0, centered=False, maximize=False):
    p = p.astype(np.float64)
    v, buf, m = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    out = []
    for g in grads:
        g = -g.astype(np.float64) if maximize else g.astype(np.float64)
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        if centered:
            m = m + (1 - alpha) * (g - m)
            den = np.sqrt(v - m * m) + eps
        else:
            den = np.sqrt(v) + eps
        if momentum > 0:
            buf = momentum * buf + g / den
            p = p - lr * buf
        else:
            p = p - lr * g / den
        out.append(p)
    return out


def adagrad_ref(p, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    p = p.astype(np.float64)
    acc = np.full_like(p, initial_accumulator_value)
    out = []
    for t, g in enumerate(grads, 1):
        g = -g.astype(np.float64) if maximize else g.astype(np.float64)
        g = g + weight_decay * p
        acc = acc + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(acc) + eps)
        out.append(p)
    return out


REFS = {"RMSprop": rmsprop_ref, "Adagrad": adagrad_ref}
# every combination of the options (the lerp of a centered RMSprop takes
# its other branch for 1 - alpha >= 0.5)
RMSPROP_CASES = [
    ("RMSprop", dict(lr=lr, alpha=alpha, momentum=momentum,
                     centered=centered, weight_decay=wd, maximize=maximize,
                     eps=eps))
    for (lr, alpha, eps), momentum, centered, wd, maximize in
    itertools.product(((0.01, 0.99, 1e-8), (0.003, 0.3, 1e-3)), (0, 0.9),
                      (False, True), (0, 0.1), (False, True))
]
ADAGRAD_CASES = [
    ("Adagrad", dict(lr=0.1, lr_decay=lr_decay, weight_decay=wd,
                     initial_accumulator_value=init, eps=eps,
                     maximize=maximize))
    for lr_decay, wd, (init, eps), maximize in itertools.product(
        (0, 0.05), (0, 0.1), ((0, 1e-10), (0.5, 1e-3)), (False, True))
]
CASES = RMSPROP_CASES + ADAGRAD_CASES


def case_id(case):
    cls, kw = case
    return cls + "-" + "-".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("cls,kw", CASES, ids=[case_id(c) for c in CASES])
def test_matches_formula(cls, kw, rng):
    p0, grads = problem(rng)
    got, _, _ = run(ampc, cls, kw, p0, grads)
    want = REFS[cls](p0, grads, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


# ampc's foreach=None/True is one call per group, False one per parameter;
# torch's CPU default (None) is its for-loop, True its foreach ops
FLAGS = [dict(), dict(foreach=False), dict(foreach=True)]


@pytest.mark.parametrize("flags", FLAGS, ids=str)
@pytest.mark.parametrize("cls,kw", CASES, ids=[case_id(c) for c in CASES])
def test_matches_torch(cls, kw, flags, rng):
    """120 steps of every option combination beside torch.optim, and the
    state dicts.  The two round alike but not always the same (torch's
    vector loops fuse some multiply-adds), so the trajectories part by a
    random walk of float32 roundings: the tolerance grows with sqrt(step)
    and the parameters' scale.  A centered RMSprop's denominator
    sqrt(v - m^2) cancels (it is 1e-3 of v at times here), which
    magnifies every rounding: a looser tolerance there (the float64
    formula is tested above)."""
    torch = torch_or_skip()
    p0, grads = problem(rng, n=120)
    kw = dict(kw, **flags)
    got, opt, _ = run(ampc, cls, kw, p0, grads)
    want, topt, _ = run(torch, cls, kw, p0, grads)
    loose = 4.0 if kw.get("centered") else 1.0
    for i, (g, w) in enumerate(zip(got, want)):
        scale = max(1.0, float(np.abs(w).max())) * loose
        np.testing.assert_allclose(g, w, rtol=2e-5,
                                   atol=1e-6 * np.sqrt(i + 1) * scale,
                                   err_msg=f"step {i + 1}")
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert sorted(sd["state"][0]) == sorted(tsd["state"][0])
    for k, v in sd["state"][0].items():
        tv = tsd["state"][0][k].numpy()
        scale = max(1.0, float(np.abs(tv).max())) * loose
        np.testing.assert_allclose(v.numpy(), tv, rtol=2e-5,
                                   atol=1e-6 * np.sqrt(120) * scale)
        assert v.dtype.name == str(tsd["state"][0][k].dtype)[6:]


@pytest.mark.parametrize("cls,kw", ADAGRAD_CASES[::3],
                         ids=[case_id(c) for c in ADAGRAD_CASES[::3]])
def test_fused_adagrad_matches_torch(cls, kw, rng):
    """fused=True beside torch's fused CPU Adagrad: the step counter on the
    parameter's device, advanced by the kernel."""
    torch = torch_or_skip()
    p0, grads = problem(rng, n=60)
    got, opt, p = run(ampc, cls, dict(kw, fused=True), p0, grads)
    want, topt, _ = run(torch, cls, dict(kw, fused=True), p0, grads)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    assert opt._step_supports_amp_scaling
    assert float(opt.state[p]["step"]) == 60.0
    assert opt.state_dict()["param_groups"] == \
        topt.state_dict()["param_groups"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cls,kw", [
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, eps=1e-3)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.01, lr_decay=0.01)),
], ids=str)
def test_low_precision(dtype, cls, kw, rng):
    p0, grads = problem(rng, n=5)
    got, opt, p = run(ampc, cls, kw, p0, grads, dtype)
    assert all(v.dtype.name == dtype for k, v in opt.state[p].items()
               if k != "step")
    assert opt.state[p]["step"].dtype is ampc.float32
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
    want = REFS[cls](p0, grads, **kw)
    np.testing.assert_allclose(got[-1], want[-1], atol=16 * ulp)
    torch = pytest.importorskip("torch")
    tgot, _, _ = run(torch, cls, kw, p0, grads, dtype)
    np.testing.assert_allclose(got[-1], tgot[-1], atol=4 * ulp)


@pytest.mark.parametrize("cls,kw", [RMSPROP_CASES[-1], ADAGRAD_CASES[-1]],
                         ids=str)
def test_state_dict_round_trip_mid_training(cls, kw, rng):
    p0, grads = problem(rng, n=10)
    full, _, _ = run(ampc, cls, kw, p0, grads)
    p = nn.Parameter(ampc.tensor(p0))
    opt = getattr(optim, cls)([p], **kw)
    for g in grads[:5]:
        p.grad = ampc.tensor(g)
        opt.step()
    buf = io.BytesIO()
    ampc.save(opt.state_dict(), buf)
    buf.seek(0)
    p2 = nn.Parameter(p.detach().clone())
    opt2 = getattr(optim, cls)([p2], lr=123.0)
    opt2.load_state_dict(ampc.load(buf))
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert int(opt2.state[p2]["step"]) == 5
    for g in grads[5:]:
        p2.grad = ampc.tensor(g)
        opt2.step()
    np.testing.assert_array_equal(p2.detach().numpy(), full[-1])


def test_state_is_torch_s(rng):
    w = nn.Parameter(ampc.zeros(3))
    rms = optim.RMSprop([w], momentum=0.9, centered=True)
    assert len(rms.state) == 0                     # created on first step
    w.grad = ampc.ones(3)
    rms.step()
    assert sorted(rms.state[w]) == ["grad_avg", "momentum_buffer",
                                    "square_avg", "step"]
    ada = optim.Adagrad([w], initial_accumulator_value=0.25)
    assert float(ada.state[w]["sum"][0]) == 0.25    # created by __init__
    assert float(ada.state[w]["step"]) == 0.0
    v = nn.Parameter(ampc.zeros(2))
    ada.add_param_group({"params": [v]})
    v.grad = ampc.ones(2)
    ada.step()
    assert float(ada.state[v]["step"]) == 1.0 and float(
        ada.state[v]["sum"][0]) == 1.25


@pytest.mark.parametrize("cls,extra", [("RMSprop", {}), ("Adagrad", {}),
                                       ("Adagrad", dict(fused=True))],
                         ids=str)
def test_grad_scaler(cls, extra, rng):
    """scaler.step(opt): a power-of-two scale gives the unscaled run's
    bits; an overflowing step is skipped, state included (with a fused
    Adagrad by the kernel itself, from the scaler's found_inf)."""
    x = ampc.tensor(rng.standard_normal((8, 4)).astype(np.float32))

    def train(scale):
        ampc.manual_seed(0)
        model = nn.Linear(4, 3)
        opt = getattr(optim, cls)(model.parameters(), lr=0.01, **extra)
        scaler = ampc.amp.GradScaler("cpu", init_scale=scale,
                                     growth_interval=1000)
        for _ in range(4):
            opt.zero_grad()
            scaler.scale((model(x) ** 2).mean()).backward()
            scaler.step(opt)
            scaler.update()
        return model.weight.detach().numpy(), opt, scaler, model

    a, _, _, _ = train(1.0)
    b, _, _, _ = train(2.0 ** 12)
    np.testing.assert_array_equal(a, b)
    _, opt, scaler, model = train(1.0)
    before = {k: v.clone() for k, v in opt.state[model.weight].items()}
    opt.zero_grad()
    scaler.scale((model(x) * 1e38).sum() * 1e38).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaler.step(opt)
    np.testing.assert_array_equal(model.weight.detach().numpy(),
                                  train(1.0)[0])
    for k, v in opt.state[model.weight].items():
        np.testing.assert_array_equal(v.numpy(), before[k].numpy())


def _mixed_params(rng):
    dtypes = ("float32", "float16", "float32", "bfloat16")
    return [nn.Parameter(ampc.tensor(rng.standard_normal(n).astype(
        np.float32)).to(getattr(ampc, dt))) for n, dt in zip((5, 33, 7, 1),
                                                             dtypes)]


def _train_mixed(cls, kw, seed=3):
    params = _mixed_params(np.random.default_rng(4))
    opt = getattr(optim, cls)(params, **kw)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        for p in params:
            p.grad = ampc.tensor(rng.standard_normal(tuple(p.shape)).astype(
                np.float32)).to(p.dtype)
        opt.step()
    return params, opt


@pytest.mark.parametrize("cls,kw,fn", [
    ("RMSprop", dict(momentum=0.9, centered=True), "rmsprop_foreach_step_"),
    ("Adagrad", dict(lr_decay=0.1), "adagrad_foreach_step_"),
    ("Adagrad", dict(fused=True), "adagrad_foreach_step_"),
], ids=str)
def test_one_call_per_dtype_and_foreach_false(monkeypatch, cls, kw, fn):
    """One C call per (device, dtype) batch of a group, the step counters
    advanced by the kernel; foreach=False one call per parameter (fused
    steps are always batched, as torch's), with the same bits."""
    calls = []
    real = getattr(ampc._C, fn)

    def counting(ps, *a, **k):
        calls.append(len(ps))
        return real(ps, *a, **k)

    monkeypatch.setattr(ampc._C, fn, counting)
    batched, opt = _train_mixed(cls, kw)
    monkeypatch.undo()
    assert len(calls) == 9 and sorted(calls[:3]) == [1, 1, 2]
    assert all(float(opt.state[p]["step"]) == 3.0 for p in batched)

    def refuse(*a, **k):
        raise AssertionError("foreach=False must not batch")

    if not kw.get("fused"):
        monkeypatch.setattr(ampc._C, fn, refuse)
    looped, _ = _train_mixed(cls, dict(kw, foreach=False))
    for a, b in zip(batched, looped):
        np.testing.assert_array_equal(a.detach().float().numpy(),
                                      b.detach().float().numpy())


def test_closure_and_params_without_grad():
    a, b = nn.Parameter(ampc.ones(2)), nn.Parameter(ampc.ones(2))
    for cls in (optim.RMSprop, optim.Adagrad):
        opt = cls([a, b])

        def closure():
            opt.zero_grad()
            loss = (a * a).sum()
            loss.backward()
            return loss

        assert float(opt.step(closure)) > 0
        assert b.tolist() == [1.0, 1.0]
        assert float(opt.state[b].get("step", ampc.tensor(0.0))) == 0


def test_work_with_schedulers():
    w = nn.Parameter(ampc.ones(2))
    opt = optim.RMSprop([w], lr=1.0, momentum=0.9)
    sched = optim.lr_scheduler.OneCycleLR(opt, 1.0, 10)
    assert opt.param_groups[0]["momentum"] == 0.95
    w.grad = ampc.ones(2)
    opt.step()
    sched.step()
    group = opt.param_groups[0]
    assert group["lr"] == sched.get_last_lr()[0] > 0.04
    assert group["momentum"] < 0.95


ERRORS = [
    (lambda ps: optim.RMSprop(ps, lr=-1), ValueError,
     "Invalid learning rate: -1"),
    (lambda ps: optim.RMSprop(ps, eps=-1), ValueError,
     "Invalid epsilon value: -1"),
    (lambda ps: optim.RMSprop(ps, momentum=-0.5), ValueError,
     "Invalid momentum value: -0.5"),
    (lambda ps: optim.RMSprop(ps, weight_decay=-1), ValueError,
     "Invalid weight_decay value: -1"),
    (lambda ps: optim.RMSprop(ps, alpha=-1), ValueError,
     "Invalid alpha value: -1"),
    (lambda ps: optim.Adagrad(ps, lr=-1), ValueError,
     "Invalid learning rate: -1"),
    (lambda ps: optim.Adagrad(ps, lr_decay=-1), ValueError,
     "Invalid lr_decay value: -1"),
    (lambda ps: optim.Adagrad(ps, weight_decay=-1), ValueError,
     "Invalid weight_decay value: -1"),
    (lambda ps: optim.Adagrad(ps, initial_accumulator_value=-1), ValueError,
     "Invalid initial_accumulator_value value: -1"),
    (lambda ps: optim.Adagrad(ps, eps=-1), ValueError,
     "Invalid epsilon value: -1"),
    (lambda ps: optim.Adagrad(ps, fused=True, foreach=True), RuntimeError,
     "`fused` and `foreach` cannot be `True` together."),
    (lambda ps: optim.RMSprop(ps, differentiable=True), RuntimeError,
     "differentiable=True is not supported"),
    (lambda ps: optim.RMSprop(ps, lr=ampc.ones(2)), ValueError,
     "Tensor lr must be 1-element"),
]


@pytest.mark.parametrize("make,exc,msg", ERRORS)
def test_errors(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make([nn.Parameter(ampc.ones(1))])


def test_capturable_needs_cuda():
    w = nn.Parameter(ampc.ones(1))
    opt = optim.RMSprop([w], capturable=True)
    w.grad = ampc.ones(1)
    with pytest.raises(RuntimeError, match="If capturable=True"):
        opt.step()


def test_defaults_match_torch():
    torch = torch_or_skip()
    import inspect
    for name in ("RMSprop", "Adagrad"):
        ours = inspect.signature(getattr(optim, name))
        theirs = inspect.signature(getattr(torch.optim, name))
        assert [(p.name, p.default, p.kind)
                for p in ours.parameters.values()] == \
            [(p.name, p.default, p.kind)
             for p in theirs.parameters.values()]
    w = nn.Parameter(ampc.ones(1))
    tw = torch.nn.Parameter(torch.ones(1))
    for name in ("RMSprop", "Adagrad"):
        ours = copy.deepcopy(getattr(optim, name)([w]).defaults)
        assert ours == getattr(torch.optim, name)([tw]).defaults


def test_docstrings():
    import doctest
    import importlib
    for name in ("ampc.optim.rmsprop", "ampc.optim.adagrad"):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, name
