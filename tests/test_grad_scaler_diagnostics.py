"""GradScaler beyond PyTorch: ``stats()`` (which parameters overflowed,
the underflow fractions), ``watch()``, and the misuse diagnostics (the
warning after consecutive skipped steps with its likely cause, zero_grad
between backward and step, an unscaled loss, clipping scaled gradients,
bfloat16)."""
import warnings

import pytest

import ampc
import ampc.nn as nn
from test_grad_scaler import (  # noqa: F401 (_quiet: an autouse fixture)
    _quiet, create_scaling_case, one_backward, scaler_cpu,
)


def test_stats_names_overflowing_parameters():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu(init_scale=2.0 ** 10)
    one_backward(s, model, data, loss_fn)
    model[1].weight.grad[0, 0] = float("inf")
    model[1].weight.grad[0, 1] = float("-inf")
    model[0].bias.grad[3] = float("nan")
    s.step(opt)
    s.update()
    st = s.stats()
    assert st["steps"] == 1 and st["skipped_steps"] == 1
    assert st["last_step_skipped"] is True
    assert st["scale"] == 2.0 ** 9 and st["growth_tracker"] == 0
    assert st["overflow"] == {"param_group[0][2]": {"inf": 2, "nan": 0},
                              "param_group[0][1]": {"inf": 0, "nan": 1}}
    named = s.stats(model)["overflow"]
    assert named == {"1.weight": {"inf": 2, "nan": 0},
                     "0.bias": {"inf": 0, "nan": 1}}
    assert s.watch(model) is model
    assert s.stats()["overflow"] == named
    assert set(s.stats()["underflow"]) == {"0.weight", "0.bias", "1.weight",
                                           "1.bias"}


def test_stats_underflow_fractions():
    """Zero and subnormal elements after unscaling, in the grad's dtype."""
    w = ampc.nn.Parameter(ampc.zeros(4))
    b = ampc.nn.Parameter(ampc.zeros(4, dtype=ampc.bfloat16))
    opt = ampc.optim.SGD([w, b], lr=0.0)
    s = scaler_cpu(init_scale=2.0 ** 20)
    s.scale(ampc.ones(1))
    w.grad = ampc.tensor([0.0, 2.0 ** -110, 1.0, 2.0])   # / 2^20: subnormal
    b.grad = ampc.tensor([0.0, 0.0, 1.0, 1.0]).bfloat16()
    s.step(opt)
    s.update()
    u = s.stats()["underflow"]
    assert u == {"param_group[0][0]": 0.5, "param_group[0][1]": 0.5}


def test_warning_after_consecutive_skips_nonfinite_loss():
    w = ampc.nn.Parameter(ampc.ones(3))
    opt = ampc.optim.SGD([w], lr=0.1)
    s = scaler_cpu()
    s.warn_after_skips = 4
    with pytest.warns(UserWarning, match="the loss itself is inf or NaN"):
        for _ in range(4):
            opt.zero_grad()
            loss = (w * float("inf")).sum()
            s.scale(loss).backward()
            s.step(opt)
            s.update()
    assert s.stats()["skipped_steps"] == 4


def test_warning_after_consecutive_skips_stale_grads():
    """zero_grad missing: the same grad tensors keep their inf."""
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu()
    s.watch(model)
    s.warn_after_skips = 5
    with pytest.warns(UserWarning, match="the gradients are never cleared.*"
                                         "1.weight.*zero_grad"):
        for i in range(5):
            one_backward(s, model, data, loss_fn, i % 4)
            if i == 0:
                model[1].weight.grad[2, 2] = float("inf")
            s.step(opt)
            s.update()


def test_warning_after_consecutive_skips_scale_below_one():
    w = ampc.nn.Parameter(ampc.ones(2))
    opt = ampc.optim.SGD([w], lr=0.1)
    s = scaler_cpu(init_scale=2.0 ** -3)
    s.warn_after_skips = 3
    with pytest.warns(UserWarning, match="scale below 1.*bfloat16"):
        for _ in range(3):
            opt.zero_grad()
            s.scale((w * 2.0).sum()).backward()
            w.grad[0] = float("inf")       # fresh overflow every time
            s.step(opt)
            s.update()
    s.warn_after_skips = 0                 # off
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.zero_grad()
        s.scale((w * 2.0).sum()).backward()
        w.grad[0] = float("inf")
        s.step(opt)
        s.update()
    with pytest.raises(ValueError):
        s.warn_after_skips = -1


def test_warning_zero_grad_between_backward_and_step():
    """zero_grad(set_to_none=False) between backward and step: every grad
    zero although a loss was scaled."""
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu()
    one_backward(s, model, data, loss_fn)
    opt.zero_grad(set_to_none=False)
    with pytest.warns(UserWarning, match="every gradient of this optimizer "
                                         "is zero.*zero_grad"):
        s.step(opt)


def test_warning_unscaled_loss_backward():
    """loss.backward() instead of scaler.scale(loss).backward() after the
    first iteration (the seed's question 4)."""
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu()
    one_backward(s, model, data, loss_fn)
    s.step(opt)
    s.update()
    opt.zero_grad()
    x, y = data[1]
    loss_fn(model(x), y).backward()
    with pytest.warns(UserWarning, match="scaler.scale\\(\\) was not called "
                                         "since the last update\\(\\)"):
        s.step(opt)


def test_warning_clipping_scaled_gradients_once():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu()
    one_backward(s, model, data, loss_fn)
    with pytest.warns(UserWarning, match="Call scaler.unscale_\\(optimizer\\)"
                                         " before clipping"):
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # once only
        s.step(opt)
        s.update()
        # the right order never warns
        s2 = scaler_cpu()
        opt.zero_grad()
        one_backward(s2, model, data, loss_fn)
        s2.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        s2.step(opt)
        s2.update()
        # and outside a scaled iteration, nothing is pending
        opt.zero_grad()
        x, y = data[2]
        loss_fn(model(x), y).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)


def test_warning_bfloat16_gradients():
    b = ampc.nn.Parameter(ampc.ones(3, dtype=ampc.bfloat16))
    opt = ampc.optim.SGD([b], lr=0.1)
    s = scaler_cpu()
    s.scale(ampc.ones(1))
    b.grad = ampc.ones(3, dtype=ampc.bfloat16)
    with pytest.warns(UserWarning, match="bfloat16.*not needed"):
        s.step(opt)


def test_warning_bfloat16_autocast():
    if not hasattr(ampc, "is_autocast_enabled") or \
            not hasattr(ampc, "autocast"):
        pytest.skip("autocast is not built yet")
    s = scaler_cpu()
    with pytest.warns(UserWarning, match="not needed with bfloat16 "
                                         "autocast"):
        with ampc.autocast("cpu", dtype=ampc.bfloat16):
            s.scale(ampc.ones(1))


def _iterations(scaler, model, opt, n, nonfinite):
    for _ in range(n):
        opt.zero_grad()
        scaler.scale(model(ampc.ones(1, 2)).sum()).backward()
        if nonfinite:           # (a gradient overflow, the loss finite)
            ampc.testing.plant_nonfinite(model.weight)
        scaler.step(opt)
        scaler.update()


def test_min_and_max_scale_bound_the_scale():
    """Beyond PyTorch (user_needs A1, PyTorch #99640): update() keeps the
    scale in [min_scale, max_scale]; skipped steps stay skipped; the bounds
    go through state_dict (only when set) and pickling; the warning after
    repeated skips names the floor."""
    import pickle
    model = nn.Linear(2, 1)
    opt = ampc.optim.SGD(model.parameters(), lr=0.1)
    s = scaler_cpu(init_scale=4.0, growth_interval=1, min_scale=1.0,
                   max_scale=16.0)
    assert (s.min_scale, s.max_scale) == (1.0, 16.0)
    _iterations(s, model, opt, 5, nonfinite=False)
    assert s.get_scale() == 16.0                   # 4 -> 8 -> 16, capped
    s.warn_after_skips = 4
    with pytest.warns(UserWarning, match=r"reached its floor "
                                         r"\(min_scale=1\)"):
        _iterations(s, model, opt, 6, nonfinite=True)
    assert s.get_scale() == 1.0 and s.stats()["skipped_steps"] == 6
    sd = s.state_dict()
    assert (sd["min_scale"], sd["max_scale"]) == (1.0, 16.0)
    fresh = scaler_cpu()
    assert "min_scale" not in fresh.state_dict()    # PyTorch's keys
    fresh.load_state_dict(sd)
    copy = pickle.loads(pickle.dumps(s))
    for other in (fresh, copy):
        assert (other.min_scale, other.max_scale) == (1.0, 16.0)
    s.min_scale = None
    _iterations(s, model, opt, 1, nonfinite=True)
    assert s.get_scale() == 0.5                    # no floor any more
    s.update(new_scale=1024.0)                      # explicit: not capped
    assert s.get_scale() == 1024.0


def test_scale_bounds_are_checked():
    for kw, msg in [(dict(min_scale=0.0), "min_scale must be None or a "
                     "finite number > 0"),
                    (dict(max_scale=float("inf")), "max_scale must be"),
                    (dict(min_scale=4.0, max_scale=2.0),
                     r"min_scale \(4.0\) must not exceed max_scale \(2.0\)")]:
        with pytest.raises(ValueError, match=msg):
            scaler_cpu(**kw)
    s = scaler_cpu(max_scale=8.0)
    with pytest.raises(ValueError, match="must not exceed"):
        s.min_scale = 16.0
    with pytest.raises(TypeError, match=r"GradScaler\(\): min_scale must be "
                                        "None or a number, not str"):
        scaler_cpu(min_scale="1")
    # a state dict without bounds (PyTorch's, or an unbounded scaler's)
    # keeps the constructor's
    s = scaler_cpu(min_scale=1.0)
    s.load_state_dict(scaler_cpu(init_scale=8.0).state_dict())
    assert s.min_scale == 1.0 and s.get_scale() == 8.0
