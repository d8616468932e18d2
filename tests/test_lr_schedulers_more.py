"""The learning-rate schedulers beyond StepLR/CosineAnnealingLR: every
rate (and cycled momentum) step by step against torch.optim.lr_scheduler
(bit for bit: the same float formulas), the deprecated step(epoch) closed
forms, resuming with last_epoch, state dicts, warnings and errors; and,
without torch, against the schedules written out in NumPy float64."""
import copy
import math
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.optim as optim
from helpers import torch_or_skip

S = optim.lr_scheduler
LRS = (0.1, 0.03)


def make_opt(lib, kind="SGD", lrs=LRS):
    """An optimiser of two groups over lib (ampc or torch)."""
    params = [{"params": [lib.nn.Parameter(lib.ones(1))], "lr": lr}
              for lr in lrs]
    if kind == "SGD":
        return lib.optim.SGD(params, lr=lrs[0], momentum=0.9)
    return lib.optim.Adam(params, lr=lrs[0], betas=(0.9, 0.999))


def trace(lib, make, n, kind="SGD", metrics=None):
    """The rates (and momentum or beta1) of both groups after the
    constructor and after each of n steps."""
    opt = make_opt(lib, kind)
    sched = make(lib.optim.lr_scheduler, opt)

    def record():
        m = [g["betas"][0] if kind == "Adam" else g["momentum"]
             for g in opt.param_groups]
        return list(sched.get_last_lr()), m

    out = [record()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            opt.step()
            if metrics is None:
                sched.step()
            else:
                sched.step(metrics[i])
            out.append(record())
            assert [g["lr"] for g in opt.param_groups] == out[-1][0]
    return out


PLATEAU = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.5, 0.6, 0.6, 0.6, 0.6, 0.7,
           0.8, 0.9, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4] * 3

CASES = {
    "lambda": (lambda m, o: m.LambdaLR(o, lambda e: 0.95 ** e), None),
    "lambda_list": (lambda m, o: m.LambdaLR(
        o, [lambda e: 1 / (e + 1), lambda e: 0.9 ** e]), None),
    "multiplicative": (lambda m, o: m.MultiplicativeLR(
        o, lambda e: 0.9 + 0.001 * e), None),
    "multistep": (lambda m, o: m.MultiStepLR(o, [3, 7, 7, 20], 0.3), None),
    "exponential": (lambda m, o: m.ExponentialLR(o, 0.93), None),
    "linear": (lambda m, o: m.LinearLR(o, 0.25, 0.9, total_iters=17), None),
    "linear_down": (lambda m, o: m.LinearLR(o, 1.0, 0.0, total_iters=9),
                    None),
    "constant": (lambda m, o: m.ConstantLR(o, 0.4, total_iters=6), None),
    "polynomial": (lambda m, o: m.PolynomialLR(o, 23, power=2.5), None),
    "warm_restarts": (lambda m, o: m.CosineAnnealingWarmRestarts(
        o, 3, T_mult=2, eta_min=1e-3), None),
    "warm_restarts_1": (lambda m, o: m.CosineAnnealingWarmRestarts(o, 5),
                        None),
    "onecycle_cos": (lambda m, o: m.OneCycleLR(o, [1.0, 0.5], 60), None),
    "onecycle_linear_3": (lambda m, o: m.OneCycleLR(
        o, 0.8, epochs=6, steps_per_epoch=10, pct_start=0.25,
        anneal_strategy="linear", three_phase=True, div_factor=10.0,
        final_div_factor=100.0, base_momentum=0.8, max_momentum=0.9),
        None),
    "onecycle_no_momentum": (lambda m, o: m.OneCycleLR(
        o, 1.0, 60, cycle_momentum=False, three_phase=True), None),
    "sequential": (lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, 0.1, total_iters=5), m.ExponentialLR(o, 0.9),
            m.CosineAnnealingLR(o, 10)], milestones=[5, 20]), None),
    "chained": (lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, 0.5, total_iters=4), m.ExponentialLR(o, 0.95),
         m.MultiStepLR(o, [10, 30], 0.5)]), None),
    "plateau_min_rel": (lambda m, o: m.ReduceLROnPlateau(
        o, patience=2, factor=0.5), PLATEAU),
    "plateau_max_abs": (lambda m, o: m.ReduceLROnPlateau(
        o, "max", 0.3, patience=1, threshold=0.05, threshold_mode="abs",
        cooldown=2, min_lr=[0.01, 0.005]), PLATEAU),
    "plateau_eps": (lambda m, o: m.ReduceLROnPlateau(
        o, patience=0, factor=0.9, eps=0.005, min_lr=0.02), PLATEAU),
}


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, kind):
    torch = torch_or_skip()
    make, metrics = CASES[name]
    n = 60 if name.startswith("onecycle") else 70
    got = trace(ampc, make, n, kind, metrics)
    want = trace(torch, make, n, kind, metrics)
    assert got == want


CLOSED = {
    "multistep": lambda m, o: m.MultiStepLR(o, [3, 7, 7, 20], 0.3),
    "exponential": lambda m, o: m.ExponentialLR(o, 0.93),
    "linear": lambda m, o: m.LinearLR(o, 0.25, 0.9, total_iters=17),
    "constant": lambda m, o: m.ConstantLR(o, 0.4, total_iters=6),
    "polynomial": lambda m, o: m.PolynomialLR(o, 23, power=2.5),
    "lambda": lambda m, o: m.LambdaLR(o, lambda e: 0.95 ** e),
    "onecycle": lambda m, o: m.OneCycleLR(o, 1.0, 40),
}
EPOCHS = [1, 2, 5, 3, 17, 30, 0, 22, 7, 39]


def closed_trace(lib, make, epochs):
    opt = make_opt(lib)
    sched = make(lib.optim.lr_scheduler, opt)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e in epochs:
            opt.step()
            sched.step(e)
            out.append(list(sched.get_last_lr()))
    return out


@pytest.mark.parametrize("name", list(CLOSED))
def test_step_epoch_closed_form_matches_torch(name):
    torch = torch_or_skip()
    got = closed_trace(ampc, CLOSED[name], EPOCHS)
    assert got == closed_trace(torch, CLOSED[name], EPOCHS)


def test_warm_restarts_fractional_epochs_match_torch():
    torch = torch_or_skip()
    epochs = [0.0, 0.25, 0.5, 1.75, 3.0, 3.1, 8.5, 9.0, 20.2, 2.5, 44.9]
    for t_mult in (1, 2, 3):
        def make(m, o):
            return m.CosineAnnealingWarmRestarts(o, 3, T_mult=t_mult,
                                                 eta_min=0.001)
        got = closed_trace(ampc, make, epochs)
        assert got == closed_trace(torch, make, epochs)


def test_resume_with_last_epoch_matches_torch():
    torch = torch_or_skip()
    makers = {
        "exp": lambda m, o, e: m.ExponentialLR(o, 0.9, last_epoch=e),
        "cos": lambda m, o, e: m.CosineAnnealingLR(o, 10, last_epoch=e),
        "poly": lambda m, o, e: m.PolynomialLR(o, 12, 2.0, last_epoch=e),
        "linear": lambda m, o, e: m.LinearLR(o, 0.5, total_iters=8,
                                             last_epoch=e),
        "sgdr": lambda m, o, e: m.CosineAnnealingWarmRestarts(
            o, 4, 2, last_epoch=e),
        "onecycle": lambda m, o, e: m.OneCycleLR(o, 1.0, 30, last_epoch=e),
    }

    def run(lib, make):
        opt = make_opt(lib)
        make(lib.optim.lr_scheduler, opt, -1)   # sets initial_lr
        sched = make(lib.optim.lr_scheduler, opt, 4)
        out = [list(sched.get_last_lr())]
        for _ in range(12):
            opt.step()
            sched.step()
            out.append(list(sched.get_last_lr()))
        return out

    for name, make in makers.items():
        assert run(ampc, make) == run(torch, make), name


# ----------------------------------------------------------------------------
# without torch: the schedules in NumPy float64


def lrs_of(make, n, metrics=None):
    return [lr for lr, _ in trace(ampc, make, n, "SGD", metrics)]


def test_formulas_in_numpy():
    t = np.arange(41, dtype=np.float64)
    base = np.array(LRS)[None, :]

    def check(make, want, n=40):
        got = np.array(lrs_of(make, n))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)

    check(lambda m, o: m.ExponentialLR(o, 0.93), base * 0.93 ** t[:, None])
    check(lambda m, o: m.MultiStepLR(o, [3, 7, 7, 20], 0.3),
          base * 0.3 ** np.searchsorted([3, 7, 7, 20], t, "right")[:, None])
    f = 0.25 + 0.65 * np.minimum(t, 17) / 17
    check(lambda m, o: m.LinearLR(o, 0.25, 0.9, total_iters=17),
          base * f[:, None])
    check(lambda m, o: m.ConstantLR(o, 0.4, total_iters=6),
          base * np.where(t < 6, 0.4, 1.0)[:, None])
    f = (1 - np.minimum(t, 23) / 23) ** 2.5
    check(lambda m, o: m.PolynomialLR(o, 23, power=2.5), base * f[:, None])
    check(lambda m, o: m.LambdaLR(o, lambda e: 1 / (e + 1)),
          base / (t[:, None] + 1))
    check(lambda m, o: m.MultiplicativeLR(o, lambda e: 0.9),
          base * 0.9 ** t[:, None])


def test_warm_restarts_formula_in_numpy():
    T0, mult, eta = 3, 2, 1e-3
    got = np.array(lrs_of(lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T0, T_mult=mult, eta_min=eta), 45))
    want = []
    for e in range(46):
        Ti, cur = T0, e
        while cur >= Ti:
            cur -= Ti
            Ti *= mult
        want.append([eta + (b - eta) * (1 + np.cos(np.pi * cur / Ti)) / 2
                     for b in LRS])
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_onecycle_formula_in_numpy(strategy):
    total, pct, top = 50, 0.3, np.array([1.0, 0.5])
    got = trace(ampc, lambda m, o: m.OneCycleLR(
        o, list(top), total, anneal_strategy=strategy), total - 1)
    init, low = top / 25.0, top / 25.0 / 1e4
    up = pct * total - 1

    def anneal(a, b, p):
        if strategy == "cos":
            return b + (a - b) / 2 * (np.cos(np.pi * p) + 1)
        return a + (b - a) * p

    for s, (lrs, moms) in enumerate(got):
        if s <= up:
            p = s / up
            want, mom = anneal(init, top, p), anneal(0.95, 0.85, p)
        else:
            p = (s - up) / (total - 1 - up)
            want, mom = anneal(top, low, p), anneal(0.85, 0.95, p)
        np.testing.assert_allclose(lrs, want, rtol=1e-12)
        np.testing.assert_allclose(moms, [mom, mom], rtol=1e-12)


def test_onecycle_sets_beta1_of_adam():
    opt = make_opt(ampc, "Adam")
    S.OneCycleLR(opt, 1.0, 10, base_momentum=0.8, max_momentum=0.9)
    assert [g["betas"] for g in opt.param_groups] == [(0.9, 0.999)] * 2
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = S.OneCycleLR(make_opt(ampc), 1.0, 10)
            for _ in range(11):
                s.step()


def test_plateau_in_numpy_terms():
    opt = make_opt(ampc)
    s = S.ReduceLROnPlateau(opt, patience=1, cooldown=1, min_lr=[0.02, 0])
    got = []
    for m in [5, 5, 5, 5, 5, 5, 4, 5, 5]:
        s.step(m)
        got.append(s.get_last_lr())
    # bad epochs 1, 2 -> reduce; cooldown eats epoch 4; 5, 6 -> reduce
    want = [LRS, LRS, (0.02, 0.003), (0.02, 0.003), (0.02, 0.003),
            (0.02, 0.0003), (0.02, 0.0003), (0.02, 0.0003), (0.02, 3e-5)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    s.step(ampc.tensor(1.0))             # a one-element tensor is a metric
    assert s.best == 1.0


# ----------------------------------------------------------------------------
# state dicts, warnings, errors


class Halve:
    """A callable object: its __dict__ goes into the state dict."""

    def __init__(self, f):
        self.f = f

    def __call__(self, e):
        return self.f ** e


@pytest.mark.parametrize("name", ["lambda", "multiplicative", "sequential",
                                  "chained", "warm_restarts",
                                  "onecycle_linear_3", "linear",
                                  "plateau_max_abs"])
def test_state_dict_resumes_the_same_schedule(name):
    make, metrics = CASES[name]
    full = lrs_of(make, 40, metrics)
    opt = make_opt(ampc)
    sched = make(S, opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(15):
            opt.step()
            sched.step(*([metrics[i]] if metrics else []))
        sd = copy.deepcopy(sched.state_dict())
        assert "optimizer" not in sd
        opt2 = make_opt(ampc)
        sched2 = make(S, opt2)
        sched2.load_state_dict(sd)
        for g2, g in zip(opt2.param_groups, opt.param_groups):
            g2["lr"] = g["lr"]
        got = full[:16]
        for i in range(15, 40):
            opt2.step()
            sched2.step(*([metrics[i]] if metrics else []))
            got.append(list(sched2.get_last_lr()))
    assert got == full


def test_lambda_state_dict_saves_callable_objects_only():
    opt = make_opt(ampc)
    s = S.LambdaLR(opt, [Halve(0.5), lambda e: 1.0])
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"f": 0.5}, None]
    sd["lr_lambdas"][0] = {"f": 0.25}
    s2 = S.LambdaLR(make_opt(ampc), [Halve(0.5), lambda e: 1.0])
    s2.load_state_dict(sd)
    assert s2.lr_lambdas[0].f == 0.25 and "lr_lambdas" in sd


def test_plateau_state_dict():
    opt = make_opt(ampc)
    s = S.ReduceLROnPlateau(opt, "max", patience=3, threshold_mode="abs")
    for m in [1.0, 2.0, 1.5]:
        s.step(m)
    sd = s.state_dict()
    assert sd["best"] == 2.0 and sd["num_bad_epochs"] == 1
    assert sd["mode"] == "max" and sd["last_epoch"] == 3
    s2 = S.ReduceLROnPlateau(make_opt(ampc))
    s2.load_state_dict(copy.deepcopy(sd))
    assert (s2.mode, s2.mode_worse, s2.best) == ("max", -math.inf, 2.0)


@pytest.mark.parametrize("make", [
    lambda o: S.ExponentialLR(o, 0.9), lambda o: S.LinearLR(o),
    lambda o: S.OneCycleLR(o, 1.0, 10), lambda o: S.PolynomialLR(o),
    lambda o: S.LambdaLR(o, lambda e: 1.0),
])
def test_step_before_optimizer_step_warns(make):
    opt = make_opt(ampc)
    sched = make(opt)
    with pytest.warns(UserWarning, match=r"Detected call of "
                      r"`lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        sched.step()
    opt2 = make_opt(ampc)
    sched2 = make(opt2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt2.step()
        sched2.step()
        sched2.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr"):
        sched2.get_lr()


def test_base_class_names():
    assert issubclass(S._LRScheduler, S.LRScheduler)
    assert S._LRScheduler.__name__ == "_LRScheduler"
    assert all(issubclass(getattr(S, n), S.LRScheduler) for n in S.__all__)


def test_tensor_lr_is_filled_in_place():
    p = nn.Parameter(ampc.ones(1))
    lr = ampc.tensor(0.5)
    opt = optim.SGD([p], lr=0.5)
    opt.param_groups[0]["lr"] = lr
    s = S.ExponentialLR(opt, 0.5)
    opt.step()
    s.step()
    assert opt.param_groups[0]["lr"] is lr and float(lr) == 0.25
    assert s.get_last_lr()[0] is not lr


ERRORS = [
    (lambda o: S.LambdaLR(o, [lambda e: 1]), ValueError,
     "Expected 2 lr_lambdas, but got 1"),
    (lambda o: S.MultiplicativeLR(o, 0.5), TypeError,
     "lr_lambda should be a function, but got float"),
    (lambda o: S.ConstantLR(o, factor=1.5), ValueError,
     "Constant multiplicative factor expected to be between 0 and 1"),
    (lambda o: S.LinearLR(o, start_factor=0), ValueError,
     "Starting multiplicative factor"),
    (lambda o: S.LinearLR(o, end_factor=2), ValueError,
     "Ending multiplicative factor"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, 0), ValueError,
     "Expected positive integer T_0, but got 0"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, 2, T_mult=1.5), ValueError,
     "Expected integer T_mult >= 1, but got 1.5"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, 2, eta_min="0"), ValueError,
     "Expected float or int eta_min"),
    (lambda o: S.OneCycleLR(o, 1.0), ValueError,
     r"You must define either total_steps OR \(epochs AND steps_per_epoch"),
    (lambda o: S.OneCycleLR(o, 1.0, total_steps=0), ValueError,
     "Expected positive integer total_steps, but got 0"),
    (lambda o: S.OneCycleLR(o, 1.0, epochs=2, steps_per_epoch=-1),
     ValueError, "Expected positive integer steps_per_epoch, but got -1"),
    (lambda o: S.OneCycleLR(o, 1.0, 10, pct_start=1), ValueError,
     "Expected float between 0 and 1 pct_start, but got 1"),
    (lambda o: S.OneCycleLR(o, 1.0, 10, anneal_strategy="exp"), ValueError,
     "anneal_strategy must be one of 'cos' or 'linear', instead got exp"),
    (lambda o: S.OneCycleLR(o, [1.0], 10), ValueError,
     "max_lr must have the same length as optimizer.param_groups"),
    (lambda o: S.ReduceLROnPlateau(o, factor=1.0), ValueError,
     r"Factor should be < 1.0."),
    (lambda o: S.ReduceLROnPlateau(o, mode="up"), ValueError,
     "mode up is unknown!"),
    (lambda o: S.ReduceLROnPlateau(o, threshold_mode="x"), ValueError,
     "threshold mode x is unknown!"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError,
     "expected 2 min_lrs, got 1"),
    (lambda o: S.SequentialLR(o, [], []), ValueError,
     "SequentialLR expects at least one scheduler"),
    (lambda o: S.SequentialLR(o, [S.ExponentialLR(o, 0.9)], [1]),
     ValueError, "number of milestones to be equal to 1"),
    (lambda o: S.SequentialLR(o, [S.ReduceLROnPlateau(o)], []), ValueError,
     "does not support `ReduceLROnPlateau`"),
    (lambda o: S.ChainedScheduler([S.ExponentialLR(o, 0.9), object()]),
     TypeError, "ChainedScheduler at index 1 should have `optimizer`"),
    (lambda o: S.ChainedScheduler([]), ValueError,
     "expects at least one scheduler to be chained"),
    (lambda o: S.ChainedScheduler(
        [S.ExponentialLR(o, 0.9), S.ExponentialLR(make_opt(ampc), 0.9)]),
     ValueError, "expects all schedulers to belong to the same optimizer"),
    (lambda o: S.ExponentialLR(o, 0.9, last_epoch=3), KeyError,
     "param 'initial_lr' is not specified in param_groups"),
]


@pytest.mark.parametrize("make,exc,msg", ERRORS)
def test_errors(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make(make_opt(ampc))


def test_errors_match_torch_words():
    torch = torch_or_skip()
    for make_a, make_t in [
        (lambda o: S.OneCycleLR(o, 1.0, 10, pct_start=1),
         lambda o: torch.optim.lr_scheduler.OneCycleLR(o, 1.0, 10,
                                                       pct_start=1)),
        (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1]),
         lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(
             o, min_lr=[0.1])),
        (lambda o: S.CosineAnnealingWarmRestarts(o, 2, T_mult=0),
         lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
             o, 2, T_mult=0)),
        (lambda o: S.LambdaLR(o, [lambda e: 1]),
         lambda o: torch.optim.lr_scheduler.LambdaLR(o, [lambda e: 1])),
    ]:
        with pytest.raises(Exception) as got:
            make_a(make_opt(ampc))
        with pytest.raises(Exception) as want:
            make_t(make_opt(torch))
        assert (type(got.value), str(got.value)) == \
            (type(want.value), str(want.value))


def test_docstrings():
    import doctest
    import importlib
    for name in ("ampc.optim.lr_scheduler", "ampc.optim._lr_decay",
                 "ampc.optim._lr_cycles", "ampc.optim._lr_compose"):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, name
