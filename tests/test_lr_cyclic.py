"""optim.lr_scheduler.CyclicLR: every rate and cycled momentum (SGD's and
RMSprop's momentum, Adam's beta1) step by step against torch's, bit for
bit, over 150 steps of every mode, scale_fn and scale_mode, per-group
lists and uneven half cycles; step(epoch), resuming with last_epoch, state
dicts (torch's keys; a scale_fn object's attributes saved, a function's
not), the errors (torch's words) and the formula in NumPy float64."""
import copy
import warnings

import numpy as np
import pytest

import ampc
import ampc.optim as optim
from helpers import torch_or_skip
from test_lr_schedulers_more import LRS, make_opt, trace

S = optim.lr_scheduler
STEPS = 150


class Scale:
    """A callable-object scale_fn: its __dict__ goes into state dicts."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, x):
        return 1.0 / (1.0 + self.rate * x)


CASES = {
    "triangular": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=7),
    "triangular_uneven": lambda m, o: m.CyclicLR(
        o, [0.01, 0.002], [0.1, 0.05], step_size_up=5, step_size_down=13),
    "triangular2": lambda m, o: m.CyclicLR(
        o, 0.001, 0.01, step_size_up=4, step_size_down=6,
        mode="triangular2", base_momentum=0.7, max_momentum=0.95),
    "exp_range": lambda m, o: m.CyclicLR(
        o, 0.01, 0.1, step_size_up=9, mode="exp_range", gamma=0.99),
    "scale_fn_cycle": lambda m, o: m.CyclicLR(
        o, 0.01, 0.1, step_size_up=6, scale_fn=lambda x: 0.5 ** x),
    "scale_fn_iterations": lambda m, o: m.CyclicLR(
        o, 0.01, 0.1, step_size_up=6, scale_fn=Scale(0.1),
        scale_mode="iterations", base_momentum=[0.8, 0.85],
        max_momentum=[0.9, 0.99]),
    "no_momentum": lambda m, o: m.CyclicLR(
        o, 0.05, 0.2, step_size_up=3, cycle_momentum=False),
    "one_step_up": lambda m, o: m.CyclicLR(o, 0.0, 1.0, step_size_up=1),
}


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, kind):
    torch = torch_or_skip()
    got = trace(ampc, CASES[name], STEPS, kind)
    want = trace(torch, CASES[name], STEPS, kind)
    assert got == want


def _rmsprop_trace(lib, make):
    p = lib.nn.Parameter(lib.ones(3))
    opt = lib.optim.RMSprop([p], lr=0.01, momentum=0.5)
    sched = make(lib.optim.lr_scheduler, opt)
    out = []
    for _ in range(40):
        p.grad = lib.ones(3)
        opt.step()
        sched.step()
        out.append((sched.get_last_lr()[0],
                    opt.param_groups[0]["momentum"],
                    p.detach().numpy().tolist()))
    return out


def test_cycles_rmsprop_momentum_like_torch():
    torch = torch_or_skip()

    def make(m, o):
        return m.CyclicLR(o, 0.001, 0.01, step_size_up=4)

    got, want = _rmsprop_trace(ampc, make), _rmsprop_trace(torch, make)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    np.testing.assert_allclose([g[2] for g in got], [w[2] for w in want],
                               rtol=1e-5)


def test_step_epoch_matches_torch():
    torch = torch_or_skip()

    def run(lib):
        opt = make_opt(lib)
        sched = CASES["triangular2"](lib.optim.lr_scheduler, opt)
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in [1, 2, 5, 3, 17, 30, 0, 22, 7, 39]:
                opt.step()
                sched.step(e)
                out.append((list(sched.get_last_lr()),
                            [g["momentum"] for g in opt.param_groups]))
        return out

    assert run(ampc) == run(torch)


def test_resume_with_last_epoch_matches_torch():
    torch = torch_or_skip()

    def run(lib):
        opt = make_opt(lib)
        m = lib.optim.lr_scheduler
        m.CyclicLR(opt, 0.01, 0.1, step_size_up=5)       # sets initial_lr
        sched = m.CyclicLR(opt, 0.02, 0.2, step_size_up=5, last_epoch=7)
        out = [(list(sched.get_last_lr()),
                [g["momentum"] for g in opt.param_groups])]
        for _ in range(20):
            opt.step()
            sched.step()
            out.append((list(sched.get_last_lr()),
                        [g["momentum"] for g in opt.param_groups]))
        return out

    assert run(ampc) == run(torch)


# ----------------------------------------------------------------------------
# without torch: the formula in NumPy float64


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_formula_in_numpy(mode):
    up, down, gamma = 4, 7, 0.97
    got = trace(ampc, lambda m, o: m.CyclicLR(
        o, [0.01, 0.001], [0.1, 0.03], step_size_up=up, step_size_down=down,
        mode=mode, gamma=gamma), 60)
    base, top = np.array([0.01, 0.001]), np.array([0.1, 0.03])
    for t, (lrs, moms) in enumerate(got):
        cycle, pos = t // (up + down) + 1, t % (up + down)
        frac = pos / up if pos <= up else (up + down - pos) / down
        scale = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1),
                 "exp_range": gamma ** t}[mode]
        np.testing.assert_allclose(lrs, base + (top - base) * frac * scale,
                                   rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(moms, 0.9 - 0.1 * frac * scale,
                                   rtol=1e-12)


def test_sets_the_groups_and_beta1():
    opt = make_opt(ampc, "Adam")
    s = S.CyclicLR(opt, [0.01, 0.02], 0.1, base_momentum=0.8,
                   max_momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.02]
    assert [g["betas"] for g in opt.param_groups] == [(0.9, 0.999)] * 2
    assert [g["initial_lr"] for g in opt.param_groups] == [0.01, 0.02]
    assert opt.param_groups[0]["max_momentum"] == 0.9
    assert opt.param_groups[0]["base_momentum"] == 0.8
    assert s.base_lrs == [0.01, 0.02] and s.max_lrs == [0.1, 0.1]
    assert (s.total_size, s.step_ratio) == (4000.0, 0.5)
    assert s.scale_mode == "cycle" and s.scale_fn(7) == 1.0


def test_tensor_lr_is_filled_in_place():
    p = ampc.nn.Parameter(ampc.ones(1))
    opt = optim.SGD([p], lr=0.5, momentum=0.9)
    lr = ampc.tensor(0.5)
    opt.param_groups[0]["lr"] = lr
    s = S.CyclicLR(opt, 0.1, 1.0, step_size_up=2)
    assert opt.param_groups[0]["lr"] is lr and float(lr) == \
        pytest.approx(0.1)
    opt.step()
    s.step()
    assert opt.param_groups[0]["lr"] is lr and float(lr) == \
        pytest.approx(0.55)


# ----------------------------------------------------------------------------
# state dicts


def test_state_dict_has_torchs_keys():
    torch = torch_or_skip()
    for name in CASES:
        sd = CASES[name](S, make_opt(ampc)).state_dict()
        tsd = CASES[name](torch.optim.lr_scheduler,
                          make_opt(torch)).state_dict()
        assert sorted(sd) == sorted(tsd), name
        for k, v in tsd.items():
            if isinstance(v, (int, float, str, list, type(None), dict)):
                assert sd[k] == v, (name, k)


@pytest.mark.parametrize("name", ["triangular2", "exp_range",
                                  "scale_fn_iterations", "triangular_uneven"])
def test_state_dict_resumes_the_same_schedule(name):
    make = CASES[name]
    full = trace(ampc, make, 60)
    opt = make_opt(ampc)
    sched = make(S, opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(25):
            opt.step()
            sched.step()
        sd = copy.deepcopy(sched.state_dict())
        assert "optimizer" not in sd and "_scale_fn_ref" not in sd
        opt2 = make_opt(ampc)
        sched2 = make(S, opt2)
        sched2.load_state_dict(sd)
        for g2, g in zip(opt2.param_groups, opt.param_groups):
            g2["lr"] = g["lr"]
        got = full[:26]
        for _ in range(25, 60):
            opt2.step()
            sched2.step()
            got.append((list(sched2.get_last_lr()),
                        [g["momentum"] for g in opt2.param_groups]))
    assert got == full


def test_state_dict_saves_scale_fn_objects_only():
    s = S.CyclicLR(make_opt(ampc), 0.01, 0.1, scale_fn=Scale(0.5))
    sd = s.state_dict()
    assert sd["_scale_fn_custom"] == {"rate": 0.5}
    sd["_scale_fn_custom"] = {"rate": 0.25}
    s2 = S.CyclicLR(make_opt(ampc), 0.01, 0.1, scale_fn=Scale(0.5))
    s2.load_state_dict(sd)
    assert s2.scale_fn(2) == 1.0 / 1.5 and "_scale_fn_custom" not in sd
    s3 = S.CyclicLR(make_opt(ampc), 0.01, 0.1, scale_fn=lambda x: 1.0)
    assert s3.state_dict()["_scale_fn_custom"] is None
    # a built-in scale is made again on load
    s4 = S.CyclicLR(make_opt(ampc), 0.01, 0.1, mode="exp_range", gamma=0.5)
    s5 = S.CyclicLR(make_opt(ampc), 0.01, 0.1)
    s5.load_state_dict(s4.state_dict())
    assert s5.scale_mode == "iterations" and s5.scale_fn(2) == 0.25


# ----------------------------------------------------------------------------
# warnings and errors


def test_step_before_optimizer_step_warns():
    opt = make_opt(ampc)
    sched = S.CyclicLR(opt, 0.01, 0.1)
    with pytest.warns(UserWarning, match=r"Detected call of "
                      r"`lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr"):
        sched.get_lr()


def _adagrad(lib):
    return lib.optim.Adagrad([lib.nn.Parameter(lib.ones(1))], lr=0.1)


ERRORS = [
    (lambda lib: lib.optim.lr_scheduler.CyclicLR(_adagrad(lib), 0.01, 0.1),
     ValueError, "optimizer must support momentum or beta1 with "
     "`cycle_momentum` option enabled"),
    (lambda lib: lib.optim.lr_scheduler.CyclicLR(
        make_opt(lib), 0.01, 0.1, mode="square"), ValueError,
     "mode is invalid and scale_fn is None"),
    (lambda lib: lib.optim.lr_scheduler.CyclicLR(
        make_opt(lib), [0.01], 0.1), ValueError,
     "base_lr must have the same length as optimizer.param_groups"),
    (lambda lib: lib.optim.lr_scheduler.CyclicLR(
        make_opt(lib), 0.01, [0.1, 0.2, 0.3]), ValueError,
     "max_lr must have the same length as optimizer.param_groups"),
    (lambda lib: lib.optim.lr_scheduler.CyclicLR(
        make_opt(lib), 0.01, 0.1, base_momentum=[0.8]), ValueError,
     "base_momentum must have the same length"),
    (lambda lib: lib.optim.lr_scheduler.CyclicLR(object(), 0.01, 0.1),
     TypeError, "object is not an Optimizer"),
    (lambda lib: lib.optim.lr_scheduler.CyclicLR(
        make_opt(lib, lrs=LRS), 0.01, 0.1, last_epoch=3), KeyError,
     "param 'initial_lr' is not specified in param_groups"),
]


@pytest.mark.parametrize("make,exc,msg", ERRORS)
def test_errors(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make(ampc)


def test_errors_match_torch_words():
    torch = torch_or_skip()
    for make, _, _ in ERRORS[:5]:
        with pytest.raises(Exception) as got:
            make(ampc)
        with pytest.raises(Exception) as want:
            make(torch)
        assert (type(got.value), str(got.value)) == \
            (type(want.value), str(want.value))


def test_adagrad_without_momentum_cycling():
    opt = _adagrad(ampc)
    s = S.CyclicLR(opt, 0.01, 0.1, step_size_up=2, cycle_momentum=False)
    opt.step()
    s.step()
    assert s.get_last_lr() == [pytest.approx(0.055)]
    assert "momentum" not in opt.param_groups[0]
