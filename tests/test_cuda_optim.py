"""The fused optimizer steps on CUDA and the device-side skip.

On a GPU: SGD, Adam and AdamW trajectories on CUDA equal the CPU's bit for
bit (the same nn_math.h stages, no FMA contraction) for every float dtype,
and match torch's fused CUDA optimizers where torch with CUDA is
importable; ``found_inf`` skips a step on the device and ``grad_scale``
unscales, with no host sync.

Everywhere (these run on the CPU here, through host pointers): the
``_step_supports_amp_scaling`` contract of ``fused=True`` against torch's
fused CPU SGD/Adam/AdamW, the ``_C`` keyword arguments and their errors,
and ``capturable``.
"""
import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import device, torch_cuda
from cuda_helpers import requires_cuda as _requires_cuda
from helpers import from_values, to64


def requires_cuda(fn):
    """A GPU test: marked ``cuda`` (selected by ``-m cuda``) and skipped
    without a GPU.  Not a module-wide ``cuda`` mark: this file's GPU-less
    tests must stay out of ``-m cuda`` and in ``-m "not cuda"``."""
    return pytest.mark.cuda(_requires_cuda(fn))

C = ampc._C
FLOATS = ("float32", "float16", "bfloat16")

SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.25, weight_decay=0.01),
    dict(lr=0.02, momentum=0.8, nesterov=True, weight_decay=0.1),
    dict(lr=0.02, momentum=0.5, maximize=True),
]
ADAM_CASES = [
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.02, betas=(0.3, 0.9), maximize=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, betas=(0.8, 0.99), amsgrad=True, eps=1e-6)),
]


def _param(values, dtype, device):
    t = from_values(values, dtype)
    if device != "cpu":
        t = t.to(device)
    return ampc.nn.Parameter(t)


def _grads(shape, steps, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape) * scale for _ in range(steps)]


def _run(opt_cls, kw, dtype, device, steps=5, shape=(37, 29), seed=0,
         found=None, scale=None, **extra):
    """Runs ``steps`` steps on one parameter and returns (param, opt).
    found: per-step found_inf values (fused only); scale: grad_scale."""
    rng = np.random.default_rng(seed)
    p = _param(rng.normal(size=shape), dtype, device)
    opt = opt_cls([p], **kw, **extra)
    grads = _grads(shape, steps, seed + 1, 1.0 if scale is None else scale)
    for i, g in enumerate(grads):
        gt = from_values(ref.round_to(g, dtype), dtype)
        p.grad = gt.to(device) if device != "cpu" else gt
        if found is not None:
            fi = ampc.tensor(float(found[i]))
            opt.found_inf = fi.to(device) if device != "cpu" else fi
        if scale is not None:
            gs = ampc.tensor(float(scale))
            opt.grad_scale = gs.to(device) if device != "cpu" else gs
        opt.step()
    return p, opt


def _exact(a, b, msg=""):
    x, y = to64(a.detach().cpu()), to64(b.detach().cpu())
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    assert same.all(), f"{msg}{(~same).sum()} elements differ; first " \
        f"{x[~same][:3]} vs {y[~same][:3]}"


def _state_tensors(opt, p):
    return {k: v for k, v in opt.state[p].items()
            if isinstance(v, C.TensorBase)}


# ----------------------------------------------------------------------------
# everywhere: the _step_supports_amp_scaling contract on the CPU


def _torch_or_skip():
    torch = pytest.importorskip("torch")
    return torch


@pytest.mark.parametrize("name,kw", [("SGD", k) for k in SGD_CASES]
                         + ADAM_CASES)
def test_fused_skip_and_unscale_match_torch_cpu(name, kw):
    """fused=True on the CPU with grad_scale and found_inf, steps 0/1/0/1/0:
    params, states and the grads (unscaled in place unless skipped) as
    torch's fused CPU optimizer."""
    torch = _torch_or_skip()
    rng = np.random.default_rng(3)
    p0 = rng.normal(size=(13, 11)).astype(np.float32)
    scale = 4096.0
    tp = torch.tensor(p0, requires_grad=True)
    ap = ampc.nn.Parameter(ampc.tensor(p0))
    topt = getattr(torch.optim, name)([tp], fused=True, **kw)
    aopt = getattr(ampc.optim, name)([ap], fused=True, **kw)
    assert aopt._step_supports_amp_scaling is True
    for i, fi in enumerate((0.0, 1.0, 0.0, 1.0, 0.0)):
        g = (rng.normal(size=p0.shape) * scale).astype(np.float32)
        tp.grad = torch.tensor(g)
        ap.grad = ampc.tensor(g)
        topt.grad_scale = torch.tensor(scale)
        topt.found_inf = torch.tensor(fi)
        aopt.grad_scale = ampc.tensor(scale)
        aopt.found_inf = ampc.tensor(fi)
        before = ap.detach().clone()
        topt.step()
        aopt.step()
        np.testing.assert_allclose(ap.detach().numpy(),
                                   tp.detach().numpy(), rtol=2e-6,
                                   atol=2e-7, err_msg=f"step {i}")
        if fi:
            _exact(ap, before, "a skipped step changed the param: ")
        np.testing.assert_array_equal(ap.grad.numpy(), tp.grad.numpy())
        np.testing.assert_array_equal(ap.grad.numpy(),
                                      g if fi else g / np.float32(scale))
    for key, tv in topt.state[tp].items():
        want = tv.double().numpy()
        # cancellation in the moments: an absolute bound from their scale
        np.testing.assert_allclose(to64(aopt.state[ap][key]), want,
                                   rtol=2e-6,
                                   atol=1e-6 * np.abs(want).max(),
                                   err_msg=key)


@pytest.mark.parametrize("dtype", FLOATS)
def test_c_sgd_found_inf_writes_nothing(dtype):
    rng = np.random.default_rng(1)
    p = from_values(rng.normal(size=(5, 7)), dtype)
    g = from_values(rng.normal(size=(5, 7)), dtype)
    buf = from_values(rng.normal(size=(5, 7)), dtype)
    p0, b0 = p.clone(), buf.clone()
    for fi in (1.0, float("nan"), -2.0):
        C.sgd_step_(p, g, buf, 0.1, 0.9, 0.0, 0.01, False, False, False,
                    grad_scale=ampc.tensor(2.0), found_inf=ampc.tensor(fi))
        _exact(p, p0)
        _exact(buf, b0)
    C.sgd_step_(p, g, buf, 0.1, 0.9, 0.0, 0.01, False, False, False,
                found_inf=ampc.tensor(0.0))
    assert not np.array_equal(to64(p), to64(p0))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("step", ["sgd", "adam"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_c_grad_scale_writes_the_unscaled_grad_back(device, dtype, step,
                                                    layout):
    """As torch's fused kernels: with grad_scale the grad tensor ends up
    unscaled (g * (1 / scale), rounded to its dtype), a non-contiguous grad
    included; with found_inf set it is left as it was."""
    rng = np.random.default_rng(6)
    scale = 3.0             # not a power of two: the product rounds
    gv = ref.round_to(rng.normal(size=(6, 9)) * 1e3, dtype)
    p = from_values(rng.normal(size=(6, 9)), dtype).to(device)

    def grad():
        if layout == "contiguous":
            return from_values(gv, dtype).to(device)
        return from_values(gv.T.copy(), dtype).to(device).t()

    def run(g, fi):
        kw = dict(grad_scale=ampc.tensor(scale).to(device),
                  found_inf=ampc.tensor(fi).to(device))
        if step == "sgd":
            C.sgd_step_(p, g, None, 0.1, 0.0, 0.0, 0.0, False, False, False,
                        **kw)
        else:
            m, v = ampc.zeros_like(p), ampc.zeros_like(p)
            C.adam_step_(p, g, m, v, None, 1, 0.01, 0.9, 0.999, 1e-8, 0.0,
                         False, False, False, **kw)

    g = grad()
    run(g, 1.0)
    np.testing.assert_array_equal(to64(g.cpu()), gv)
    run(g, 0.0)
    want = ref.round_to(gv.astype(np.float32) * np.float32(1.0 / scale),
                        dtype)
    np.testing.assert_array_equal(to64(g.cpu()), want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_c_grad_scale_is_exact_for_powers_of_two(dtype):
    """grad * (1 / 1024) is exact: the same step as the unscaled grad."""
    rng = np.random.default_rng(2)
    vals = rng.normal(size=(9, 4))
    gv = ref.round_to(rng.normal(size=(9, 4)), dtype)
    a, b = from_values(vals, dtype), from_values(vals, dtype)
    ma, mb = C.full((9, 4), 0, a.dtype, "cpu"), C.full((9, 4), 0, a.dtype,
                                                       "cpu")
    va, vb = ma.clone(), mb.clone()
    C.adam_step_(a, from_values(gv, dtype), ma, va, None, 1, 0.01, 0.9,
                 0.999, 1e-8, 0.0, False, False, False)
    C.adam_step_(b, from_values(gv * 1024.0, dtype), mb, vb, None, 1, 0.01,
                 0.9, 0.999, 1e-8, 0.0, False, False, False,
                 grad_scale=ampc.tensor(1024.0))
    for x, y in ((a, b), (ma, mb), (va, vb)):
        _exact(x, y)


def test_c_adam_step_tensor_advances_unless_skipped():
    rng = np.random.default_rng(4)
    p = ampc.tensor(rng.normal(size=6).astype(np.float32))
    g = ampc.tensor(rng.normal(size=6).astype(np.float32))
    m, v = C.full((6,), 0, p.dtype, "cpu"), C.full((6,), 0, p.dtype, "cpu")
    step = ampc.tensor(0.0)
    q = p.clone()
    mq, vq = m.clone(), v.clone()
    C.adam_step_(p, g, m, v, None, step, 0.01, 0.9, 0.999, 1e-8, 0.0, False,
                 False, False)
    assert float(step) == 1.0
    # the same as the numbered step 1
    C.adam_step_(q, g, mq, vq, None, 1, 0.01, 0.9, 0.999, 1e-8, 0.0, False,
                 False, False)
    _exact(p, q)
    p1 = p.clone()
    C.adam_step_(p, g, m, v, None, step, 0.01, 0.9, 0.999, 1e-8, 0.0, False,
                 False, False, found_inf=ampc.tensor(1.0))
    assert float(step) == 1.0
    _exact(p, p1)
    C.adam_step_(p, g, m, v, None, step, 0.01, 0.9, 0.999, 1e-8, 0.0, False,
                 False, False)
    C.adam_step_(q, g, mq, vq, None, 2, 0.01, 0.9, 0.999, 1e-8, 0.0, False,
                 False, False)
    assert float(step) == 2.0
    _exact(p, q)


@pytest.mark.parametrize("arg,bad,match", [
    ("grad_scale", lambda: ampc.tensor([1.0, 2.0]), "one-element float32"),
    ("found_inf", lambda: ampc.tensor(1.0).half(), "one-element float32"),
    ("found_inf", lambda: 1.0, "must be a Tensor"),
])
def test_c_amp_argument_errors(arg, bad, match):
    p = ampc.zeros(3)
    with pytest.raises((RuntimeError, TypeError), match=match):
        C.sgd_step_(p, ampc.ones(3), None, 0.1, 0.0, 0.0, 0.0, False, False,
                    False, **{arg: bad()})
    m, v = ampc.zeros(3), ampc.zeros(3)
    with pytest.raises((RuntimeError, TypeError), match=match):
        C.adam_step_(p, ampc.ones(3), m, v, None, 1, 0.1, 0.9, 0.99, 1e-8,
                     0.0, False, False, False, **{arg: bad()})


def test_c_adam_step_argument_errors():
    p, m, v = ampc.zeros(3), ampc.zeros(3), ampc.zeros(3)
    with pytest.raises(TypeError, match="argument 'step'"):
        C.adam_step_(p, ampc.ones(3), m, v, None, "1", 0.1, 0.9, 0.99, 1e-8,
                     0.0, False, False, False)
    with pytest.raises(RuntimeError, match="step to be a one-element"):
        C.adam_step_(p, ampc.ones(3), m, v, None, ampc.zeros(2), 0.1, 0.9,
                     0.99, 1e-8, 0.0, False, False, False)


def test_fused_constructor_checks():
    w = ampc.nn.Parameter(ampc.zeros(2))
    for cls in (ampc.optim.SGD, ampc.optim.Adam, ampc.optim.AdamW):
        with pytest.raises(RuntimeError, match="cannot be `True` together"):
            cls([w], lr=0.1, fused=True, foreach=True)
        assert not hasattr(cls([w], lr=0.1), "_step_supports_amp_scaling")
        assert not hasattr(cls([w], lr=0.1, fused=False),
                           "_step_supports_amp_scaling")


def test_capturable_needs_cuda_params():
    w = ampc.nn.Parameter(ampc.zeros(2))
    opt = ampc.optim.Adam([w], capturable=True)
    w.grad = ampc.ones(2)
    with pytest.raises(RuntimeError, match="capturable=True"):
        opt.step()


def test_fused_cpu_state_step_is_a_tensor_advanced_by_the_kernel():
    p, opt = _run(ampc.optim.Adam, dict(lr=0.01, fused=True), "float32",
                  "cpu", steps=3, found=(0, 1, 0))
    step = opt.state[p]["step"]
    assert step.device.type == "cpu" and step.dtype is ampc.float32
    assert float(step) == 2.0


def test_fused_state_dict_round_trip_keeps_the_step_tensor():
    """load_state_dict keeps a fused group's step a float32 tensor on the
    param's device (torch's rule) and the next steps continue alike."""
    kw = dict(lr=0.01, fused=True)
    p, opt = _run(ampc.optim.Adam, kw, "float32", "cpu", steps=2)
    q = ampc.nn.Parameter(p.detach().clone())
    opt2 = ampc.optim.Adam([q], **kw)
    opt2.load_state_dict(opt.state_dict())
    step = opt2.state[q]["step"]
    assert step.dtype is ampc.float32 and float(step) == 2.0
    g = ampc.tensor(np.random.default_rng(9).normal(
        size=tuple(p.shape)).astype(np.float32))
    for param, o in ((p, opt), (q, opt2)):
        param.grad = g
        o.step()
    _exact(q, p)
    assert float(opt2.state[q]["step"]) == 3.0


def test_fused_sgd_skipped_first_step_starts_from_zero_buffer():
    """NOTE in sgd.py: a skipped first step leaves a zero buffer."""
    p, opt = _run(ampc.optim.SGD, dict(lr=0.1, momentum=0.9, fused=True),
                  "float32", "cpu", steps=1, found=(1,))
    assert np.all(to64(opt.state[p]["momentum_buffer"]) == 0.0)


# ----------------------------------------------------------------------------
# on a GPU: CUDA equals the CPU


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", SGD_CASES)
@pytest.mark.parametrize("shape", [(1,), (7,), (37, 29), (1023, 9)])
def test_sgd_cuda_equals_cpu(dtype, kw, shape):
    pc, oc = _run(ampc.optim.SGD, kw, dtype, "cpu", shape=shape)
    pg, og = _run(ampc.optim.SGD, kw, dtype, "cuda", shape=shape)
    _exact(pg, pc, "param: ")
    for key, t in _state_tensors(oc, pc).items():
        _exact(_state_tensors(og, pg)[key], t, key + ": ")


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,kw", ADAM_CASES)
@pytest.mark.parametrize("shape", [(5,), (37, 29), (4099,)])
def test_adam_cuda_equals_cpu(dtype, name, kw, shape):
    cls = getattr(ampc.optim, name)
    pc, oc = _run(cls, kw, dtype, "cpu", shape=shape)
    pg, og = _run(cls, kw, dtype, "cuda", shape=shape)
    _exact(pg, pc, "param: ")
    for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
        if key in oc.state[pc]:
            _exact(og.state[pg][key], oc.state[pc][key], key + ": ")


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,kw", ADAM_CASES)
@pytest.mark.parametrize("mode", ["fused", "capturable"])
def test_adam_device_step_counter(dtype, name, kw, mode):
    """The device counter's bias corrections (double pow on the GPU) give
    the host's within a float32 ulp; the counter lives on the GPU."""
    cls = getattr(ampc.optim, name)
    pc, oc = _run(cls, kw, dtype, "cpu")
    pg, og = _run(cls, kw, dtype, "cuda", **{mode: True})
    step = og.state[pg]["step"]
    assert step.device.type == "cuda" and float(step) == 5.0
    r, a = ref.tolerance(dtype, 4)
    np.testing.assert_allclose(to64(pg.detach().cpu()), to64(pc.detach()),
                               rtol=r, atol=a)


@requires_cuda
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,kw", [("SGD", SGD_CASES[2])] + ADAM_CASES[:2])
def test_device_skip_and_unscale(dtype, name, kw):
    """found_inf on the device skips (params, states and step untouched);
    grad_scale unscales; the CUDA trajectory equals the CPU's."""
    cls = getattr(ampc.optim, name)
    found = (0, 1, 0, 1, 1, 0)
    pc, oc = _run(cls, dict(kw, fused=True), dtype, "cpu", steps=6,
                  found=found, scale=512.0)
    pg, og = _run(cls, dict(kw, fused=True), dtype, "cuda", steps=6,
                  found=found, scale=512.0)
    r, a = ref.tolerance(dtype, 4)
    np.testing.assert_allclose(to64(pg.detach().cpu()), to64(pc.detach()),
                               rtol=r, atol=a)
    _exact(pg.grad, pc.grad, "the unscaled grad: ")
    if "step" in og.state[pg]:
        assert float(og.state[pg]["step"]) == 3.0
    # one more skipped step: nothing moves, bit for bit
    before = {k: v.clone() for k, v in _state_tensors(og, pg).items()}
    p_before = pg.detach().clone()
    pg.grad = ampc.ones(tuple(pg.shape)).to(pg.dtype).to("cuda")
    og.found_inf = ampc.tensor(1.0).to("cuda")
    og.grad_scale = ampc.tensor(512.0).to("cuda")
    og.step()
    _exact(pg, p_before)
    for k, v in before.items():
        _exact(og.state[pg][k], v, k + ": ")


@requires_cuda
def test_fused_step_needs_no_host_sync():
    reads = getattr(C, "_cuda_host_reads", None)
    if reads is None:
        pytest.skip("this build does not count host reads")
    p = _param(np.ones((64, 64)), "float32", "cuda")
    opt = ampc.optim.Adam([p], lr=0.01, fused=True)
    p.grad = ampc.ones((64, 64)).to("cuda")
    opt.found_inf = ampc.tensor(0.0).to("cuda")
    opt.grad_scale = ampc.tensor(2.0).to("cuda")
    opt.step()
    before = reads()
    for _ in range(3):
        opt.step()
    assert reads() == before


@requires_cuda
def test_mixed_devices_are_refused():
    p = ampc.zeros(3).to("cuda")
    with pytest.raises(RuntimeError, match="same device"):
        C.sgd_step_(p, ampc.ones(3), None, 0.1, 0.0, 0.0, 0.0, False, False,
                    False)
    with pytest.raises(RuntimeError, match="same device"):
        C.sgd_step_(p, ampc.ones(3).to("cuda"), None, 0.1, 0.0, 0.0, 0.0,
                    False, False, False, found_inf=ampc.tensor(0.0))


@requires_cuda
@pytest.mark.parametrize("name,kw", [("SGD", k) for k in SGD_CASES[1:4]]
                         + ADAM_CASES)
def test_cuda_matches_torch_cuda_fused(name, kw):
    torch = torch_cuda()
    rng = np.random.default_rng(5)
    p0 = rng.normal(size=(33, 17)).astype(np.float32)
    tp = torch.tensor(p0, device="cuda", requires_grad=True)
    ap = ampc.nn.Parameter(ampc.tensor(p0).to("cuda"))
    topt = getattr(torch.optim, name)([tp], fused=True, **kw)
    aopt = getattr(ampc.optim, name)([ap], fused=True, **kw)
    for fi in (0.0, 1.0, 0.0, 0.0):
        g = (rng.normal(size=p0.shape) * 256.0).astype(np.float32)
        tp.grad = torch.tensor(g, device="cuda")
        ap.grad = ampc.tensor(g).to("cuda")
        topt.grad_scale = torch.tensor(256.0, device="cuda")
        topt.found_inf = torch.tensor(fi, device="cuda")
        aopt.grad_scale = ampc.tensor(256.0).to("cuda")
        aopt.found_inf = ampc.tensor(fi).to("cuda")
        topt.step()
        aopt.step()
        np.testing.assert_array_equal(to64(ap.grad.cpu()),
                                      tp.grad.double().cpu().numpy())
    np.testing.assert_allclose(to64(ap.detach().cpu()),
                               tp.detach().double().cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
