"""ampc.optim: SGD, Adam and AdamW step by step against PyTorch's formulas
in float64 NumPy (and against torch.optim where installed), parameter
groups, state dicts mid-training, closures, errors, and the learning-rate
schedulers against torch's."""
import copy
import io
import itertools
import math
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.optim as optim
import reference as ref
from helpers import from_values, to64, torch_or_skip

STEPS = 5


# ----------------------------------------------------------------------------
# the float64 references (reference.sgd_step / adam_step transcribe
# torch/optim/sgd.py and adam.py), run over several steps


def sgd_ref(p, grads, lr, dtype="float32", **kw):
    """The parameter after each step.  As a fused kernel does, each step
    reads the stored (``dtype``) param and buffer, computes in high
    precision and rounds only what it stores."""
    buf = None
    out = []
    for g in grads:
        p, buf = ref.sgd_step(p, g, buf, lr, **kw)
        p = ref.round_to(p, dtype)
        buf = None if buf is None else ref.round_to(buf, dtype)
        out.append(p)
    return out


def adam_ref(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
             amsgrad=False, maximize=False, decoupled=False,
             dtype="float32"):
    """As sgd_ref, for Adam/AdamW (moments rounded when stored)."""
    m = v = vmax = np.zeros_like(p)
    out = []
    for step, g in enumerate(grads, 1):
        p, m, v, vmax = ref.adam_step(p, g, m, v, vmax, step, lr, betas[0],
                                      betas[1], eps, weight_decay, amsgrad,
                                      maximize, decoupled)
        p, m, v, vmax = (ref.round_to(a, dtype) for a in (p, m, v, vmax))
        out.append(p)
    return out


def run_ampc(make_opt, p0, grads, dtype="float32"):
    p = nn.Parameter(from_values(p0, dtype))
    opt = make_opt([p])
    out = []
    for g in grads:
        p.grad = from_values(g, dtype)
        opt.step()
        out.append(to64(p))
    return out, opt, p


def values(rng, shape=(7, 33), n=STEPS, dtype="float32"):
    p0 = ref.round_to(rng.uniform(-1, 1, size=shape), dtype)
    grads = [ref.round_to(rng.uniform(-1, 1, size=shape), dtype)
             for _ in range(n)]
    return p0, grads


def close(got, want, dtype, k=4):
    for i, (a, b) in enumerate(zip(got, want)):
        if dtype == "float32":
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {i + 1}")
        else:
            # one rounding per stored value: a few ulps of the dtype
            tol = k * ref.EPS[dtype]
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol,
                                       err_msg=f"step {i + 1}")


SGD_CASES = [
    dict(momentum=0.0),
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.3),
    dict(momentum=0.9, nesterov=True),
    dict(momentum=0.9, weight_decay=0.1),
    dict(momentum=0.0, weight_decay=0.05, maximize=True),
    dict(momentum=0.5, dampening=0.1, weight_decay=0.01, maximize=True),
]


@pytest.mark.parametrize("kw", SGD_CASES, ids=str)
def test_sgd_matches_formula(kw, rng):
    p0, grads = values(rng)
    got, _, _ = run_ampc(lambda ps: optim.SGD(ps, lr=0.1, **kw), p0, grads)
    close(got, sgd_ref(p0, grads, 0.1, **kw), "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kw", [SGD_CASES[1], SGD_CASES[3], SGD_CASES[6]],
                         ids=str)
def test_sgd_low_precision(dtype, kw, rng):
    p0, grads = values(rng, dtype=dtype)
    got, _, p = run_ampc(lambda ps: optim.SGD(ps, lr=0.1, **kw), p0, grads,
                         dtype)
    assert p.dtype.name == dtype
    close(got, sgd_ref(p0, grads, 0.1, dtype=dtype, **kw), dtype)


ADAM_CASES = [
    dict(),
    dict(amsgrad=True),
    dict(weight_decay=0.1),
    dict(maximize=True, betas=(0.8, 0.99), eps=1e-6),
    dict(amsgrad=True, weight_decay=0.05, maximize=True),
]


@pytest.mark.parametrize("kw", ADAM_CASES, ids=str)
@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_adam_matches_formula(cls, kw, rng):
    p0, grads = values(rng)
    got, _, _ = run_ampc(lambda ps: getattr(optim, cls)(ps, lr=0.01, **kw),
                         p0, grads)
    kw = dict(kw)
    if cls == "AdamW":
        kw.setdefault("weight_decay", 1e-2)
    close(got, adam_ref(p0, grads, 0.01, decoupled=cls == "AdamW", **kw),
          "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_adam_low_precision(dtype, rng):
    p0, grads = values(rng, dtype=dtype)
    got, opt, p = run_ampc(lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True),
                           p0, grads, dtype)
    st = opt.state[p]
    assert st["exp_avg"].dtype.name == dtype
    assert st["step"].dtype is ampc.float32 and int(st["step"]) == STEPS
    close(got, adam_ref(p0, grads, 0.01, amsgrad=True, dtype=dtype), dtype,
          k=8)


def torch_steps(torch, cls, kw, p0, grads):
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float32))
    opt = getattr(torch.optim, cls)([p], **kw)
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
    return p.detach().double().numpy()


@pytest.mark.parametrize("cls,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, betas=(0.8, 0.95), maximize=True)),
], ids=str)
def test_against_torch_optim(cls, kw, rng):
    torch = torch_or_skip()
    p0, grads = values(rng, n=8)
    got, _, _ = run_ampc(lambda ps: getattr(optim, cls)(ps, **kw), p0, grads)
    want = torch_steps(torch, cls, kw, p0, grads)
    np.testing.assert_allclose(got[-1], want, rtol=1e-5, atol=1e-6)


def test_params_without_grad_are_skipped():
    a = nn.Parameter(ampc.ones(2))
    b = nn.Parameter(ampc.ones(2))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = ampc.ones(2)
    opt.step()
    assert b not in opt.state
    np.testing.assert_array_equal(to64(b), [1, 1])
    assert float(a[0]) < 1


# ----------------------------------------------------------------------------
# groups, state dicts, closures


def test_param_groups_defaults_and_add_param_group():
    a, b, c = (nn.Parameter(ampc.ones(3)) for _ in range(3))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 1.0}], lr=0.1,
                    momentum=0.5)
    g0, g1 = opt.param_groups
    assert g0["lr"] == 0.1 and g1["lr"] == 1.0 and g1["momentum"] == 0.5
    assert g1["params"] == [b]
    opt.add_param_group({"params": [c], "momentum": 0.0})
    assert opt.param_groups[2]["lr"] == 0.1
    for p in (a, b, c):
        p.grad = ampc.ones(3)
    opt.step()
    np.testing.assert_allclose(to64(a), [0.9] * 3, rtol=1e-6)
    np.testing.assert_allclose(to64(b), [0.0] * 3, atol=1e-6)
    np.testing.assert_allclose(to64(c), [0.9] * 3, rtol=1e-6)
    assert "momentum_buffer" in opt.state[a] and c not in opt.state
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    r = repr(opt)
    assert r.startswith("SGD (\nParameter Group 0\n") and "lr: 1.0" in r


def fake_grads(params):
    """Deterministic gradients that depend on the parameters (as a real
    loss's would), without needing the layer kernels."""
    for i, p in enumerate(params):
        p.grad = (p * (1.5 + i) + 0.25).detach()


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True),
    lambda ps: optim.AdamW(ps, lr=0.01),
], ids=["sgd", "adam", "adamw"])
def test_state_dict_roundtrip_mid_training(make):
    ampc.manual_seed(3)
    params = [nn.Parameter(ampc.randn(4, 5)), nn.Parameter(ampc.randn(5))]
    opt = make(params)
    for _ in range(3):
        fake_grads(params)
        opt.step()
    buf = io.BytesIO()
    ampc.save({"opt": opt.state_dict(),
               "params": [p.detach() for p in params]}, buf)
    ck = ampc.load(io.BytesIO(buf.getvalue()))
    params2 = [nn.Parameter(t) for t in ck["params"]]
    opt2 = make(params2)
    opt2.load_state_dict(ck["opt"])
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1]
    assert sd["param_groups"][0]["params"] == [0, 1]
    for _ in range(3):
        fake_grads(params)
        opt.step()
        fake_grads(params2)
        opt2.step()
    for p, q in zip(params, params2):
        np.testing.assert_array_equal(to64(p), to64(q))
    # the loaded state is a copy, not the saved tensors
    key = next(iter(opt2.state[params2[0]]))
    assert opt2.state[params2[0]][key] is not ck["opt"]["state"][0][key]


def test_load_state_dict_casts_to_param_dtype_but_not_step():
    p = nn.Parameter(ampc.ones(3))
    opt = optim.Adam([p], lr=0.1)
    p.grad = ampc.ones(3)
    opt.step()
    q = nn.Parameter(ampc.ones(3).half())
    opt2 = optim.Adam([q], lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[q]["exp_avg"].dtype is ampc.float16
    assert opt2.state[q]["step"].dtype is ampc.float32


def test_load_state_dict_mismatches():
    a, b = nn.Parameter(ampc.ones(1)), nn.Parameter(ampc.ones(1))
    sd = optim.SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.SGD([a], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="different number of parameter"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1) \
            .load_state_dict(sd)


def test_closure_runs_with_grad_and_returns_loss():
    w = nn.Parameter(ampc.tensor([1.0, 2.0]))
    opt = optim.SGD([w], lr=0.1)
    modes = []

    def closure():
        modes.append(ampc.is_grad_enabled())
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with ampc.no_grad():
        loss = opt.step(closure)
    assert modes == [True]
    assert float(loss) == 5.0
    np.testing.assert_allclose(to64(w), [0.8, 1.6], rtol=1e-6)
    assert opt.step() is None


def test_zero_grad():
    w = nn.Parameter(ampc.ones(2))
    opt = optim.SGD([w], lr=0.1)
    (w * 3).sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g and float(g.abs().sum()) == 0
    opt.zero_grad()
    assert w.grad is None


# ----------------------------------------------------------------------------
# errors (PyTorch's types and words)


def test_constructor_errors():
    p = nn.Parameter(ampc.ones(2))
    cases = [
        (lambda: optim.SGD([p], lr=-1), ValueError, "Invalid learning rate"),
        (lambda: optim.SGD([p], momentum=-0.1), ValueError,
         "Invalid momentum value"),
        (lambda: optim.SGD([p], weight_decay=-1), ValueError,
         "Invalid weight_decay value"),
        (lambda: optim.SGD([p], nesterov=True), ValueError,
         "Nesterov momentum requires a momentum and zero dampening"),
        (lambda: optim.SGD([p], momentum=0.9, dampening=0.1, nesterov=True),
         ValueError, "zero dampening"),
        (lambda: optim.Adam([p], lr=-0.1), ValueError,
         "Invalid learning rate"),
        (lambda: optim.Adam([p], eps=-1), ValueError,
         "Invalid epsilon value"),
        (lambda: optim.Adam([p], betas=(1.0, 0.9)), ValueError,
         "Invalid beta parameter at index 0"),
        (lambda: optim.AdamW([p], betas=(0.9, -0.1)), ValueError,
         "Invalid beta parameter at index 1"),
        (lambda: optim.AdamW([p], weight_decay=-1), ValueError,
         "Invalid weight_decay value"),
        (lambda: optim.SGD(p, lr=0.1), TypeError,
         "should be an iterable of Tensors or dicts"),
        (lambda: optim.SGD([], lr=0.1), ValueError,
         "optimizer got an empty parameter list"),
        (lambda: optim.SGD([{"params": {p}}], lr=0.1), TypeError,
         "ordered collections"),
        (lambda: optim.SGD([p, 3], lr=0.1), TypeError,
         "optimizer can only optimize Tensors"),
        (lambda: optim.SGD([p * 2], lr=0.1), ValueError,
         "can't optimize a non-leaf Tensor"),
        (lambda: optim.SGD([p], differentiable=True), RuntimeError,
         "differentiable"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()


def test_duplicate_param_in_group_warns():
    p = nn.Parameter(ampc.ones(2))
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([p, p], lr=0.1)


def test_required_lr():
    p = nn.Parameter(ampc.ones(2))
    with pytest.raises(ValueError, match="required optimization parameter "
                                         "lr"):
        optim.SGD([p], lr=optim.optimizer.required)


# ----------------------------------------------------------------------------
# learning-rate schedulers


def ampc_lrs(make_sched, n, lr=0.1):
    p = nn.Parameter(ampc.ones(1))
    opt = optim.SGD([p], lr=lr)
    sched = make_sched(opt)
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == out[-1]
    return out


def torch_lrs(torch, make_sched, n, lr=0.1):
    p = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = make_sched(torch.optim.lr_scheduler, opt)
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


SCHEDS = {
    "step": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=7),
    "cosine_eta": lambda m, o: m.CosineAnnealingLR(o, T_max=5,
                                                   eta_min=0.01),
}


def test_steplr_values():
    got = ampc_lrs(lambda o: optim.lr_scheduler.StepLR(o, 3, gamma=0.5), 9)
    assert got == pytest.approx([0.1] * 3 + [0.05] * 3 + [0.025] * 3
                                + [0.0125])


def test_cosine_values():
    T, base, eta = 7, 0.1, 0.0
    got = ampc_lrs(lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T), T)
    want = [eta + (base - eta) * (1 + math.cos(math.pi * t / T)) / 2
            for t in range(T + 1)]
    assert got == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("name", list(SCHEDS))
def test_schedulers_match_torch(name):
    torch = torch_or_skip()
    make = SCHEDS[name]
    got = ampc_lrs(lambda o: make(optim.lr_scheduler, o), 25)
    want = torch_lrs(torch, make, 25)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_scheduler_before_optimizer_warns():
    p = nn.Parameter(ampc.ones(1))
    opt = optim.SGD([p], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, 1)
    with pytest.warns(UserWarning, match=r"Detected call of "
                      r"`lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        sched.step()
    p2 = nn.Parameter(ampc.ones(1))
    opt2 = optim.SGD([p2], lr=0.1)
    sched2 = optim.lr_scheduler.CosineAnnealingLR(opt2, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt2.step()
        sched2.step()
        sched2.step()


def _skipped_first_step(scale):
    """One AMP iteration whose gradients overflow at this scale (the
    loss is huge), then the scheduler's step: the warnings raised."""
    p = nn.Parameter(ampc.ones(3))
    opt = optim.SGD([p], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, 1)
    scaler = ampc.amp.GradScaler("cpu", init_scale=scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler.scale((p * 1e30).sum()).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
    return [str(w.message) for w in caught], opt


def test_scheduler_warning_says_when_grad_scaler_skipped_the_step():
    """user_needs A2: the order warning after a skipped AMP step keeps
    torch's text and says why optimizer.step() did not run"""
    msgs, opt = _skipped_first_step(2.0 ** 100)
    assert opt._amp_step_skipped is True
    order = [m for m in msgs if m.startswith("Detected call of")]
    assert len(order) == 1
    assert "GradScaler.step() skipped it" in order[0]
    assert "the warning is harmless" in order[0]
    # a step that ran: no warning, and the flag is cleared
    msgs, opt = _skipped_first_step(1.0)
    assert opt._amp_step_skipped is False
    assert not [m for m in msgs if m.startswith("Detected call of")]


def test_scheduler_warning_without_grad_scaler_is_torch_s():
    p = nn.Parameter(ampc.ones(1))
    opt = optim.SGD([p], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, 1)
    with pytest.warns(UserWarning) as record:
        sched.step()
    assert str(record[0].message).endswith("#how-to-adjust-learning-rate")


def test_scheduler_state_dict_and_closed_form():
    p = nn.Parameter(ampc.ones(1))
    opt = optim.SGD([p], lr=1.0)
    sched = optim.lr_scheduler.StepLR(opt, 2, gamma=0.1)
    for _ in range(3):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3
    opt2 = optim.SGD([nn.Parameter(ampc.ones(1))], lr=1.0)
    sched2 = optim.lr_scheduler.StepLR(opt2, 5)
    sched2.load_state_dict(copy.deepcopy(sd))
    assert sched2.step_size == 2 and sched2.get_last_lr() == \
        sched.get_last_lr()
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(4)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)


def test_scheduler_needs_optimizer():
    with pytest.raises(TypeError, match="is not an Optimizer"):
        optim.lr_scheduler.StepLR(object(), 1)


def test_all_options_cover_grid(rng):
    """Every SGD option combination against the formula (short runs)."""
    p0, grads = values(rng, shape=(3, 5), n=3)
    for mom, damp, wd, nest, maxi in itertools.product(
            (0.0, 0.9), (0.0, 0.2), (0.0, 0.1), (False, True),
            (False, True)):
        if nest and (mom == 0 or damp != 0):
            continue
        kw = dict(momentum=mom, dampening=damp, weight_decay=wd,
                  nesterov=nest, maximize=maxi)
        got, _, _ = run_ampc(lambda ps: optim.SGD(ps, lr=0.1, **kw), p0,
                             grads)
        close(got, sgd_ref(p0, grads, 0.1, **kw), "float32")
