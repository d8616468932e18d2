"""GradScaler conformance: PyTorch's scenarios (amp_semantics.md §5) and
the rules of §1-§2, scale(), update(), the state machine with PyTorch's
errors and their texts, enabled=False.  The rest is beside it:
test_grad_scaler_state.py (state_dict, pickling), _diagnostics.py (stats()
and the misuse warnings), _vs_torch.py (random sequences against torch),
_clip.py (scaler.clip_grad_norm_).
"""
import math
import pickle
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn as nn
from ampc.amp import GradScaler, OptState
from helpers import gradcheck

FIX = ("This may indicate your script did not use scaler.scale(loss or "
       "outputs) earlier in the iteration.")


def scaler_cpu(**kw):
    return GradScaler("cpu", **kw)


def same(a, b):
    """Bit-for-bit equal tensors (NaN positions included)."""
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.detach().float().numpy(), b.detach().float().numpy(),
        equal_nan=True)


class MyScaler(GradScaler):
    """A Python subclass with an attribute of its own."""

    def __init__(self, tag):
        super().__init__("cpu", init_scale=32.0)
        self.tag = tag


@pytest.fixture(autouse=True)
def _quiet():
    """The diagnostics warn once per scaler; tests that check them use
    pytest.warns, the others need not see them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


# ----------------------------------------------------------------------------
# PyTorch's harness (common_cuda._create_scaling_case, _run_scaling_case)


def create_scaling_case(optimizer="sgd", lr=1.0, seed=0):
    ampc.manual_seed(seed)
    control = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
    scaling = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
    with ampc.no_grad():
        for c, s in zip(control.parameters(), scaling.parameters()):
            s.copy_(c)
    data = [(ampc.randn(8, 8), ampc.randn(8, 8)) for _ in range(4)]
    make = {"sgd": lambda p: ampc.optim.SGD(p, lr=lr),
            "adam": lambda p: ampc.optim.Adam(p, lr=lr * 1e-3)}[optimizer]
    return (control, scaling, make(control.parameters()),
            make(scaling.parameters()), data, nn.MSELoss(), 2)


def run_scaling_case(run, unskipped, skipped, atol=1e-7, optimizer="sgd",
                     pickle_each=False):
    for enabled in (True, False):
        (mod_c, mod_s, opt_c, opt_s, data, loss_fn,
         skip_iter) = create_scaling_case(optimizer)
        scaler = scaler_cpu(init_scale=128.0, growth_factor=2.0,
                            enabled=enabled, growth_interval=1)
        run(data, mod_c, opt_c, scaler, loss_fn, skip_iter, False)
        scaler = run(data, mod_s, opt_s, scaler, loss_fn, skip_iter, True) \
            or scaler
        if enabled:
            assert scaler.get_scale() == 128.0 * 2.0 ** unskipped * \
                0.5 ** skipped
        else:
            assert scaler.get_scale() == 1.0
        for c, s in zip(mod_c.parameters(), mod_s.parameters()):
            assert (s.grad is None) == (c.grad is None)
            if c.grad is not None:
                np.testing.assert_allclose(s.grad.numpy(), c.grad.numpy(),
                                           atol=atol, rtol=1e-5)
            np.testing.assert_allclose(s.detach().numpy(),
                                       c.detach().numpy(), atol=atol,
                                       rtol=1e-5)
        for c, s in zip(mod_c.parameters(), mod_s.parameters()):
            for key, value in opt_c.state[c].items():
                if isinstance(value, ampc.Tensor):
                    np.testing.assert_allclose(
                        opt_s.state[s][key].numpy(), value.numpy(),
                        atol=atol, rtol=1e-5)


def inject_inf(model):
    with ampc.no_grad():
        model[1].weight.grad.fill_(float("inf"))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_scaling_basic(optimizer):
    def run(data, model, opt, scaler, loss_fn, skip_iter, try_scaling_api):
        for i, (x, y) in enumerate(data):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            if try_scaling_api:
                scaler.scale(loss).backward()
                if i == skip_iter and scaler.is_enabled():
                    inject_inf(model)
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                if not scaler.is_enabled() or i != skip_iter:
                    opt.step()
    run_scaling_case(run, unskipped=3, skipped=1, optimizer=optimizer,
                     atol=1e-6)


def test_scaling_with_pickling_after_each_update():
    """test_grad_scaling_autocast's pickling variant: a scaler pickled and
    unpickled after every update() gives the same run."""
    def run(data, model, opt, scaler, loss_fn, skip_iter, try_scaling_api):
        for i, (x, y) in enumerate(data):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            if try_scaling_api:
                scaler.scale(loss).backward()
                if i == skip_iter and scaler.is_enabled():
                    inject_inf(model)
                scaler.step(opt)
                scaler.update()
                scaler = pickle.loads(pickle.dumps(scaler))
            else:
                loss.backward()
                if not scaler.is_enabled() or i != skip_iter:
                    opt.step()
        return scaler
    run_scaling_case(run, unskipped=3, skipped=1)


def test_scaling_clipping_scaled_grads():
    """test_grad_scaling_clipping: clip the scaled grads with
    max_norm * get_scale(), no unscale_."""
    max_norm = 0.2

    def run(data, model, opt, scaler, loss_fn, skip_iter, try_scaling_api):
        for i, (x, y) in enumerate(data):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            if try_scaling_api:
                scaler.scale(loss).backward()
                nn.utils.clip_grad_norm_(model.parameters(),
                                         max_norm * scaler.get_scale())
                if i == skip_iter and scaler.is_enabled():
                    inject_inf(model)
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                if not scaler.is_enabled() or i != skip_iter:
                    opt.step()
    run_scaling_case(run, unskipped=3, skipped=1, atol=1e-5)


def test_scaling_clipping_separate_unscale():
    """test_grad_scaling_clipping_separate_unscale: inf injected before
    unscale_, clipping with error_if_nonfinite=False, still one skip."""
    max_norm = 0.2

    def run(data, model, opt, scaler, loss_fn, skip_iter, try_scaling_api):
        for i, (x, y) in enumerate(data):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            if try_scaling_api:
                scaler.scale(loss).backward()
                if i == skip_iter and scaler.is_enabled():
                    inject_inf(model)
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), max_norm,
                                         error_if_nonfinite=False)
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                if not scaler.is_enabled() or i != skip_iter:
                    opt.step()
    run_scaling_case(run, unskipped=3, skipped=1, atol=1e-6)


def test_scaling_accumulation():
    """test_grad_scaling_accumulation: loss / 2, a step every 2 iterations,
    unskipped 2, skipped 0."""
    iters_to_accumulate = 2

    def run(data, model, opt, scaler, loss_fn, skip_iter, try_scaling_api):
        for i, (x, y) in enumerate(data):
            loss = loss_fn(model(x), y) / iters_to_accumulate
            if try_scaling_api:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if (i + 1) % iters_to_accumulate == 0:
                if try_scaling_api:
                    scaler.step(opt)
                    scaler.update()
                    opt.zero_grad()
                else:
                    opt.step()
                    opt.zero_grad()
    run_scaling_case(run, unskipped=2, skipped=0, atol=1e-6)


def test_scaling_multiple_models_and_optimizers():
    """test_grad_scaling_multiple: two models, two optimisers, one scaler;
    the inf in model1 skips only opt1's step, the scale backs off once."""
    for enabled in (True, False):
        mod_c0, mod_s0, opt_c0, opt_s0, data, loss_fn, skip_iter = \
            create_scaling_case()
        mod_c1, mod_s1, opt_c1, opt_s1, _, _, _ = create_scaling_case(seed=1)
        scaler = scaler_cpu(init_scale=128.0, growth_factor=2.0,
                            enabled=enabled, growth_interval=1)

        def run(model0, model1, opt0, opt1, try_scaling_api):
            for i, (x, y) in enumerate(data):
                opt0.zero_grad()
                opt1.zero_grad()
                out0, out1 = model0(x), model1(x)
                loss0 = loss_fn(0.3 * out0 + 0.7 * out1, y)
                loss1 = loss_fn(0.6 * out0 - 0.4 * out1, y)
                if try_scaling_api:
                    scaler.scale(loss0).backward(retain_graph=True)
                    scaler.scale(loss1).backward()
                    if i == skip_iter and scaler.is_enabled():
                        inject_inf(model1)
                    scaler.unscale_(opt0)
                    scaler.step(opt0)
                    scaler.step(opt1)
                    scaler.update()
                else:
                    loss0.backward(retain_graph=True)
                    loss1.backward()
                    opt0.step()
                    if not scaler.is_enabled() or i != skip_iter:
                        opt1.step()

        run(mod_c0, mod_c1, opt_c0, opt_c1, False)
        run(mod_s0, mod_s1, opt_s0, opt_s1, True)
        want = 128.0 * 2.0 ** 3 * 0.5 if enabled else 1.0
        assert scaler.get_scale() == want
        pairs = list(zip(mod_c0.parameters(), mod_s0.parameters())) + \
            list(zip(mod_c1.parameters(), mod_s1.parameters()))
        for c, s in pairs:
            np.testing.assert_allclose(s.detach().numpy(),
                                       c.detach().numpy(), atol=1e-6,
                                       rtol=1e-5)
        if enabled:
            st = scaler.stats()
            assert st["steps"] == 8 and st["skipped_steps"] == 1


def test_params_invalidated_between_unscale_and_step():
    """Grads made inf/NaN after unscale_ are not re-checked: the step runs
    and the parameters become non-finite."""
    for bad in (float("inf"), float("nan")):
        model, _, opt, _, data, loss_fn, _ = create_scaling_case()
        scaler = scaler_cpu()
        x, y = data[0]
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.unscale_(opt)
        with ampc.no_grad():
            for p in model.parameters():
                p.grad.fill_(bad)
        scaler.step(opt)
        scaler.update()
        for p in model.parameters():
            assert not ampc.isfinite(p.detach()).any().item()


def test_scale_will_not_overflow():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    scaler = scaler_cpu(init_scale=1e38, growth_factor=2.0 ** 4,
                        growth_interval=1)
    opt.zero_grad()
    x, y = data[0]
    scaler.scale(loss_fn(model(x), y) * 1e-30).backward()
    scaler.step(opt)
    scaler.update()
    s = scaler._scale.item()
    assert math.isfinite(s) and s == np.float32(1e38)


def test_skipped_step_leaves_params_and_state_untouched():
    model, _, _, _, data, loss_fn, _ = create_scaling_case()
    opt = ampc.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = scaler_cpu(init_scale=4.0)
    for x, y in data[:2]:
        opt.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()
    before = [p.detach().clone() for p in model.parameters()]
    bufs = {id(p): opt.state[p]["momentum_buffer"].clone()
            for p in model.parameters()}
    opt.zero_grad()
    x, y = data[2]
    scaler.scale(loss_fn(model(x), y)).backward()
    model[0].bias.grad[1] = float("nan")
    assert scaler.step(opt) is None
    scaler.update()
    for b, p in zip(before, model.parameters()):
        assert same(b, p.detach())
        assert same(bufs[id(p)], opt.state[p]["momentum_buffer"])
    assert scaler.get_scale() == 2.0
    assert scaler.stats()["last_step_skipped"] is True


# ----------------------------------------------------------------------------
# scale()


def test_scale_nested_outputs_keep_their_containers():
    """test_grad_scaling_scale: nested tuple/list outputs, init_scale 2,
    values 4 -> all 8; containers keep their types."""
    scaler = scaler_cpu(init_scale=2.0)
    t0 = ampc.full((1,), 4.0)
    t1 = ampc.full((1,), 4.0)
    outputs = scaler.scale((t1, (t0, t1), [t0, (t1, t0)]))
    assert isinstance(outputs, tuple) and isinstance(outputs[2], list)
    assert isinstance(outputs[2][1], tuple)

    def flat(x):
        if isinstance(x, (list, tuple)):
            for v in x:
                yield from flat(v)
        else:
            yield x
    assert [t.item() for t in flat(outputs)] == [8.0] * 6
    assert scaler._scale.device == t1.device
    assert scaler._scale.dtype is ampc.float32 and scaler._scale.ndim == 0


def test_scale_other_iterables_are_lazy_maps():
    scaler = scaler_cpu(init_scale=3.0)
    gen = (ampc.ones(2) for _ in range(2))
    out = scaler.scale(gen)
    assert scaler._scale is None            # nothing scaled yet: lazy
    vals = [t.tolist() for t in out]
    assert vals == [[3.0, 3.0], [3.0, 3.0]]
    assert scaler.get_scale() == 3.0
    with pytest.raises(ValueError, match="^outputs must be a Tensor or an "
                                         "iterable of Tensors$"):
        scaler.scale([1, 2])
    with pytest.raises(ValueError, match="outputs must be a Tensor"):
        scaler.scale(5)


def test_scale_dtypes_and_autograd():
    scaler = scaler_cpu(init_scale=8.0)
    h = ampc.ones(3, dtype=ampc.float16)
    assert scaler.scale(h).dtype is ampc.float16
    loss16 = ampc.tensor(2.0, dtype=ampc.float16)
    assert scaler.scale(loss16).dtype is ampc.float32
    w = ampc.ones(2, requires_grad=True)
    out = scaler.scale((w * 3.0).sum())
    assert out.grad_fn is not None
    out.backward()
    assert w.grad.tolist() == [24.0, 24.0]


def test_scale_gradient_by_finite_differences():
    """scale() is an autograd-recorded multiply: d(s * f)/dx = s * f'."""
    scaler = scaler_cpu(init_scale=8.0)
    gradcheck(lambda x, y: scaler.scale([x * y, (x,)])[0],
              lambda x, y: 8.0 * x * y, [(3, 4), (3, 4)], rtol=1e-3,
              atol=1e-3)


def test_scale_lazy_init_uses_loaded_state():
    """A loaded state is never clobbered by the lazy initialisation."""
    s0 = scaler_cpu(init_scale=3.0, growth_factor=4.0, backoff_factor=0.5,
                    growth_interval=2)
    s0.scale(ampc.ones(1))
    s0._growth_tracker.fill_(1)
    sd = s0.state_dict()
    s1 = scaler_cpu(init_scale=6.0, growth_factor=7.0, backoff_factor=0.8,
                    growth_interval=1)
    s1.load_state_dict(sd)
    assert s1._scale is None
    s1.scale(ampc.ones(1))
    assert s1.get_scale() == 3.0 and s1._get_growth_tracker() == 1


# ----------------------------------------------------------------------------
# update()


def test_update_growth_interval_three():
    """The tracker counts clean steps: growth on the 3rd, reset by inf."""
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu(init_scale=4.0, growth_interval=3)
    seen = []
    for i in range(7):
        x, y = data[i % 4]
        opt.zero_grad()
        s.scale(loss_fn(model(x), y)).backward()
        if i == 4:
            inject_inf(model)
        s.step(opt)
        s.update()
        seen.append((s.get_scale(), s._get_growth_tracker()))
    assert seen == [(4.0, 1), (4.0, 2), (8.0, 0), (8.0, 1), (4.0, 0),
                    (4.0, 1), (4.0, 2)]


def test_backoff_has_no_floor_and_nan_counts_as_inf():
    s = scaler_cpu(init_scale=1.0, backoff_factor=2.0 ** -100)
    w = ampc.ones(2, requires_grad=True)
    opt = ampc.optim.SGD([w], lr=1.0)
    scales = []
    for bad in (float("nan"), float("inf"), float("-inf")):
        opt.zero_grad()
        s.scale((w * 2).sum()).backward()
        w.grad[0] = bad
        s.step(opt)
        s.update()
        scales.append(s.get_scale())
    assert scales[0] == 2.0 ** -100
    assert scales[1] == 0.0 and scales[2] == 0.0
    assert w.tolist() == [1.0, 1.0]


def test_update_new_scale():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu(init_scale=64.0, growth_interval=10)
    for x, y in data[:2]:
        opt.zero_grad()
        s.scale(loss_fn(model(x), y)).backward()
        s.step(opt)
        s.update()
    assert s._get_growth_tracker() == 2
    s.update(new_scale=5.0)
    assert s.get_scale() == 5.0 and s._get_growth_tracker() == 2
    s.update(ampc.tensor([9.0]))
    assert s.get_scale() == 9.0 and s._get_growth_tracker() == 2
    reason = ("new_scale should be a float or a 1-element "
              "ampc.cuda.FloatTensor or ampc.FloatTensor with "
              "requires_grad=False.")
    with pytest.raises(AssertionError, match="^" + reason.replace(
            ".", "\\.") + "$"):
        s.update(ampc.tensor([1.0, 2.0]))
    with pytest.raises(AssertionError, match="new_scale should be"):
        s.update(ampc.tensor([1.0], requires_grad=True))
    with pytest.raises(AttributeError, match="'int' object has no "
                                             "attribute 'device'"):
        s.update(3)
    assert s.get_scale() == 9.0
    # the per-optimizer states are reset either way
    assert len(s._per_optimizer_states) == 0


# ----------------------------------------------------------------------------
# the state machine and PyTorch's errors


def one_backward(scaler, model, data, loss_fn, i=0):
    x, y = data[i]
    scaler.scale(loss_fn(model(x), y)).backward()


def test_state_machine_and_errors():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu()
    for fn in ("unscale_", "step", "update"):
        with pytest.raises(AssertionError,
                           match=f"^Attempted {fn} but _scale is None.  "
                                 + FIX.replace(".", "\\.").replace(
                                     "(", "\\(").replace(")", "\\)") + "$"):
            getattr(s, fn)(*([opt] if fn != "update" else []))
    one_backward(s, model, data, loss_fn)
    key = id(opt)
    with pytest.raises(AssertionError, match="^No inf checks were recorded "
                                             "prior to update\\."):
        s.update()
    s.unscale_(opt)
    assert s._per_optimizer_states[key]["stage"] is OptState.UNSCALED
    with pytest.raises(RuntimeError, match="^unscale_\\(\\) has already "
                                           "been called on this optimizer "
                                           "since the last update\\(\\)\\."):
        s.unscale_(opt)
    s.step(opt)
    assert s._per_optimizer_states[key]["stage"] is OptState.STEPPED
    with pytest.raises(RuntimeError, match="^unscale_\\(\\) is being called "
                                           "after step\\(\\)\\."):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match="^step\\(\\) has already been "
                                           "called since the last "
                                           "update\\(\\)\\."):
        s.step(opt)
    s.update()
    assert len(s._per_optimizer_states) == 0
    with pytest.raises(RuntimeError, match="^Closure use is not currently "
                                           "supported if GradScaler is "
                                           "enabled\\.$"):
        s.step(opt, closure=lambda: 0.0)


def test_step_with_no_grads_asserts_with_a_hint():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu()
    one_backward(s, model, data, loss_fn)
    opt.zero_grad()     # zero_grad between backward and step: grads None
    with pytest.raises(AssertionError) as e:
        s.step(opt)
    msg = str(e.value)
    assert msg.startswith("No inf checks were recorded for this optimizer.")
    assert "zero_grad()" in msg and "scaler.scale(loss).backward()" in msg


def test_fp16_grads_raise_and_bf16_grads_are_unscaled():
    w = ampc.nn.Parameter(ampc.ones(3, dtype=ampc.float16))
    opt = ampc.optim.SGD([w], lr=0.1)
    s = scaler_cpu(init_scale=4.0)
    s.scale(ampc.ones(1))
    w.grad = ampc.full((3,), 8.0, dtype=ampc.float16)
    with pytest.raises(ValueError, match="^Attempting to unscale FP16 "
                                         "gradients\\."):
        s.unscale_(opt)
    assert w.grad.tolist() == [8.0] * 3
    b = ampc.nn.Parameter(ampc.ones(3, dtype=ampc.bfloat16))
    optb = ampc.optim.SGD([b], lr=0.1)
    b.grad = ampc.full((3,), 8.0, dtype=ampc.bfloat16)
    s.unscale_(optb)
    assert b.grad.tolist() == [2.0] * 3


def test_constructor_asserts():
    with pytest.raises(AssertionError, match="^The growth factor must be > "
                                             "1\\.0\\.$"):
        scaler_cpu(growth_factor=1.0)
    with pytest.raises(AssertionError, match="^The backoff factor must be < "
                                             "1\\.0\\.$"):
        scaler_cpu(backoff_factor=1.0)
    scaler_cpu(growth_factor=1.0, enabled=False)     # not checked
    with pytest.raises(ValueError, match="device must be 'cuda' or 'cpu'"):
        GradScaler("tpu")
    s = GradScaler(ampc.device("cpu"))
    assert s._device == "cpu"


def test_defaults_and_getters_setters():
    s = scaler_cpu()
    assert s.get_scale() == 2.0 ** 16
    assert (s.get_growth_factor(), s.get_backoff_factor(),
            s.get_growth_interval()) == (2.0, 0.5, 2000)
    assert s.is_enabled() is True
    s.set_growth_factor(0.5)         # setters do not validate
    s.set_backoff_factor(3.0)
    s.set_growth_interval(7)
    assert (s.get_growth_factor(), s.get_backoff_factor(),
            s.get_growth_interval()) == (0.5, 3.0, 7)
    assert s._get_growth_tracker() == 0
    assert s._get_scale_async() is None
    # C reads the scale and the tracker in place: only sound values go in
    with pytest.raises(TypeError, match="_scale must be None or a "
                                        "1-element float32 CPU tensor"):
        s._scale = 5.0
    with pytest.raises(TypeError, match="_growth_tracker must be None or a "
                                        "1-element int64 CPU tensor"):
        s._growth_tracker = ampc.tensor([1.0])
    s._scale = ampc.tensor(3.0)
    assert s.get_scale() == 3.0


def test_cuda_scaler_disables_itself_without_cuda():
    if ampc.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.warns(UserWarning, match="^ampc.cuda.amp.GradScaler is "
                                         "enabled, but CUDA is not "
                                         "available.  Disabling.$"):
        s = GradScaler()
    assert s.is_enabled() is False
    with pytest.warns(FutureWarning, match="ampc.cuda.amp.GradScaler\\("
                                           "args...\\)` is deprecated"):
        old = ampc.cuda.amp.GradScaler(init_scale=8.0)
    assert isinstance(old, GradScaler) and not old.is_enabled()
    # the lab's loop still runs, as plain float32 training
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    for x, y in data:
        opt.zero_grad()
        old.scale(loss_fn(model(x), y)).backward()
        old.step(opt)
        old.update()


def test_disabled_is_a_pass_through():
    s = scaler_cpu(enabled=False)
    t = ampc.ones(2)
    assert s.scale(t) is t
    assert s.get_scale() == 1.0 and s._get_growth_tracker() == 0
    assert s.state_dict() == {} and s.is_enabled() is False
    for getter in ("get_growth_factor", "get_backoff_factor",
                   "get_growth_interval"):
        with pytest.raises(AttributeError, match="object has no attribute "
                                                 "'_"):
            getattr(s, getter)()

    class Opt:
        param_groups = []

        def step(self, closure=None):
            return closure() if closure else "stepped"
    assert s.step(Opt()) == "stepped"
    assert s.step(Opt(), closure=lambda: 3.5) == 3.5
    assert s.unscale_(Opt()) is None and s.update() is None
    r = pickle.loads(pickle.dumps(s))
    assert r.is_enabled() is False


class ReturningSGD(ampc.optim.SGD):
    def step(self, closure=None):
        super().step()
        return "ran" if closure is None else closure()


def test_step_returns_the_optimizer_value_and_forwards_args():
    w = ampc.nn.Parameter(ampc.ones(2))
    opt = ReturningSGD([w], lr=0.1)
    s = scaler_cpu(init_scale=2.0)
    s.scale((w * 1.0).sum()).backward()
    assert s.step(opt) == "ran"
    s.update()
    opt.zero_grad()
    s.scale((w * 1.0).sum()).backward()
    # a positional closure goes through (only the keyword is refused)
    assert s.step(opt, lambda: 42) == 42
    s.update()
    opt.zero_grad()
    s.scale((w * 1.0).sum()).backward()
    w.grad[0] = float("inf")
    assert s.step(opt) is None
    s.update()


def test_found_inf_per_device_and_check_inf():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu(init_scale=8.0)
    one_backward(s, model, data, loss_fn)
    before = [p.grad.clone() for p in model.parameters()]
    found = s._check_inf_per_device(opt)
    assert list(found) == [ampc.device("cpu")]
    assert found[ampc.device("cpu")].item() == 0.0
    for b, p in zip(before, model.parameters()):
        assert same(b, p.grad)                 # inv_scale 1: untouched
    assert s._per_optimizer_states[id(opt)]["stage"] is OptState.READY
    s.unscale_(opt)
    f = s._found_inf_per_device(opt)
    assert f[ampc.device("cpu")].item() == 0.0


def test_unscale_grads_perfect_storm():
    """Mixed dtypes and contiguity through _unscale_grads_ (allow_fp16):
    nothing planted -> found 0 and every grad 1; one inf anywhere -> 1."""
    shapes = [(10, 10), (10, 10), (6, 8)]
    for inject in [None, 0, 1, 2, 3]:
        params, grads = [], []
        for i, dt in enumerate((ampc.float32, ampc.bfloat16, ampc.float16,
                                ampc.float32)):
            g = ampc.full(shapes[i % 3], 4.0, dtype=dt)
            if i == 1:
                g = g.t()                       # dense, not contiguous
            if i == 3:
                g = ampc.full((10, 20), 4.0)[:, ::2]   # not dense
            if inject == i:
                g[0, 0] = float("inf")
            p = ampc.nn.Parameter(ampc.zeros(tuple(g.shape), dtype=dt))
            p.grad = g
            params.append(p)
            grads.append(g)
        opt = ampc.optim.SGD(params, lr=1.0)
        s = scaler_cpu()
        found = s._unscale_grads_(opt, ampc.full((), 0.25),
                                  ampc.full((), 0.0), True)
        total = sum(v.item() for v in found.values())
        assert total == (0.0 if inject is None else 1.0)
        for i, g in enumerate(grads):
            vals = g.float().flatten().tolist()
            if inject == i:
                assert vals[0] == math.inf and set(vals[1:]) == {1.0}
            else:
                assert set(vals) == {1.0}


class AmpAwareOptimizer(ampc.optim.SGD):
    """An optimizer that handles the scale itself (as fused Adam)."""
    _step_supports_amp_scaling = True

    def step(self, closure=None):
        self.seen = (self.grad_scale, self.found_inf)
        return "custom"


class PassItselfOptimizer(ampc.optim.SGD):
    _step_supports_amp_scaling = True

    def step(self, closure=None, grad_scaler=None):
        self.seen = (grad_scaler, hasattr(self, "grad_scale"),
                     hasattr(self, "found_inf"))
        return "passed"


def test_step_supports_amp_scaling_paths():
    """test_grad_scaler_pass_itself, and the grad_scale/found_inf
    attributes."""
    w = ampc.nn.Parameter(ampc.ones(2))
    s = scaler_cpu(init_scale=4.0)
    opt = PassItselfOptimizer([w], lr=0.1)
    s.scale((w * 1.0).sum()).backward()
    with pytest.warns(FutureWarning, match="GradScaler is going to stop "
                                           "passing itself"):
        assert s.step(opt) == "passed"
    assert opt.seen == (s, False, False)
    s.update(new_scale=4.0)

    opt2 = AmpAwareOptimizer([w], lr=0.1)
    opt2.zero_grad()
    s.scale((w * 1.0).sum()).backward()
    w.grad[1] = float("nan")
    assert s.step(opt2) == "custom"
    grad_scale, found_inf = opt2.seen
    assert grad_scale.item() == 4.0 and found_inf.item() == 1.0
    assert not hasattr(opt2, "grad_scale") and not hasattr(opt2,
                                                           "found_inf")
    assert w.grad[0].item() == 4.0         # checked only, not unscaled
    s.update()
    assert s.get_scale() == 2.0
