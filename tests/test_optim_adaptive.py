"""The fused RMSprop and Adagrad steps of ampc._C (rmsprop_step_,
adagrad_step_ and their _foreach_ forms): every option, for every float
dtype on every CPU level, step by step against a float64 NumPy
transcription of torch's formulas; the list call equals the per-parameter
call bit for bit (host step numbers and step counters, odd sizes, a
grad_scale and skipped steps); the step counters; the argument checks; and
on a GPU (marked ``cuda``) the CPU's bits.  The optimizers themselves are
tested against torch.optim in test_optim_more.py.
"""
import itertools

import numpy as np
import pytest

import ampc
import reference as ref
from cuda_helpers import requires_cuda as _requires_cuda
from helpers import FLOAT_NAMES, assert_close, from_values, rand_values, to64

C = ampc._C

STEPS = 4
SIZES = (1, 33, 70001)          # the last is split over threads
# around the GPU kernel's chunk of 4096 elements, and empty
LIST_SIZES = (0, 1, 7, 33, 4095, 4097, 3 * 4096 + 5)

RMSPROP_OPTIONS = [
    dict(alpha=alpha, momentum=momentum, centered=centered,
         weight_decay=wd, maximize=maximize)
    for alpha, momentum, centered, wd, maximize in itertools.product(
        (0.99, 0.3), (0.0, 0.9), (False, True), (0.0, 0.1), (False, True))
]
ADAGRAD_OPTIONS = [
    dict(lr_decay=lr_decay, weight_decay=wd, maximize=maximize)
    for lr_decay, wd, maximize in itertools.product(
        (0.0, 0.05), (0.0, 0.1), (False, True))
]


def requires_cuda(fn):
    return pytest.mark.cuda(_requires_cuda(fn))


def ids(options):
    return ["-".join(f"{k}={v}" for k, v in o.items()) for o in options]


def tensor(values, dtype, device="cpu"):
    t = from_values(np.asarray(values, dtype=np.float64), dtype)
    return t.to(device) if device != "cpu" else t


def rms_hyper(o, lr=0.01, eps=1e-8):
    return (lr, o.get("alpha", 0.99), eps, o.get("weight_decay", 0.0),
            o.get("momentum", 0.0), o.get("centered", False),
            o.get("maximize", False))


def ada_hyper(o, lr=0.1, eps=1e-10):
    return (lr, o.get("lr_decay", 0.0), o.get("weight_decay", 0.0), eps,
            o.get("maximize", False))


# ----------------------------------------------------------------------------
# the float64 transcriptions of torch/optim/rmsprop.py and adagrad.py


def rmsprop_ref(p, g, v, m, buf, lr, alpha, eps, weight_decay, momentum,
                centered, maximize):
    d = -g if maximize else g
    d = d + weight_decay * p
    v = alpha * v + (1 - alpha) * d * d
    if centered:
        m = m + (1 - alpha) * (d - m)
        den = np.sqrt(v - m * m) + eps
    else:
        den = np.sqrt(v) + eps
    if momentum > 0:
        buf = momentum * buf + d / den
        p = p - lr * buf
    else:
        p = p - lr * d / den
    return p, v, m, buf


def adagrad_ref(p, g, s, step, lr, lr_decay, weight_decay, eps, maximize):
    d = -g if maximize else g
    d = d + weight_decay * p
    s = s + d * d
    p = p - lr / (1 + (step - 1) * lr_decay) * d / (np.sqrt(s) + eps)
    return p, s


def tol(dtype, want=None):
    """A few ulps, relative, and absolute on the array's scale: sums such
    as momentum * buf + d / den may cancel."""
    rtol, atol = ref.tolerance(dtype, 4)
    if want is not None:
        atol *= max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
    return dict(rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------
# step by step against the transcriptions


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("o", RMSPROP_OPTIONS, ids=ids(RMSPROP_OPTIONS))
def test_rmsprop_step(cpu_level, dtype, n, o, rng):
    if n == SIZES[-1] and (o["alpha"] != 0.99 or o["maximize"]):
        pytest.skip("the large size runs half the options")
    hyper = rms_hyper(o)
    p = tensor(rand_values((n,), dtype, rng), dtype)
    v, m, buf = (tensor(np.zeros(n), dtype) for _ in range(3))
    step = ampc.tensor(0.0)
    for k in range(STEPS):
        g = rand_values((n,), dtype, rng)
        want = rmsprop_ref(to64(p), g, to64(v), to64(m), to64(buf), *hyper)
        C.rmsprop_step_(p, tensor(g, dtype), v, buf, m, step, *hyper)
        assert C.kernel_variant("rmsprop_step") == cpu_level
        assert float(step) == k + 1
        for got, w, name, kept in zip(
                (p, v, m, buf), want,
                ("param", "square_avg", "grad_avg", "momentum_buffer"),
                (True, True, o["centered"], o["momentum"] > 0)):
            if kept:
                assert_close(got, w, dtype, **tol(dtype, w),
                             msg=f"step {k + 1} {name}: ")
            else:       # not kept: never written
                assert not to64(got).any(), name


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("o", ADAGRAD_OPTIONS, ids=ids(ADAGRAD_OPTIONS))
def test_adagrad_step(cpu_level, dtype, n, o, rng):
    hyper = ada_hyper(o)
    p = tensor(rand_values((n,), dtype, rng), dtype)
    s = tensor(np.full(n, 0.5), dtype)
    for k in range(1, STEPS + 1):
        g = rand_values((n,), dtype, rng)
        want = adagrad_ref(to64(p), g, to64(s), k, *hyper)
        C.adagrad_step_(p, tensor(g, dtype), s, k, *hyper)
        assert C.kernel_variant("adagrad_step") == cpu_level
        assert_close(p, want[0], dtype, **tol(dtype), msg=f"step {k}: ")
        assert_close(s, want[1], dtype, **tol(dtype), msg=f"step {k}: ")


def test_levels_agree():
    """Every level gives the same bits (no FMA contraction, same order)."""
    results = []
    x = np.linspace(-1, 1, 1001)
    for level in ampc.backends.cpu.levels():
        C._set_cpu_level(level)
        try:
            p, q = tensor(x, "float16"), tensor(x, "float32")
            v, m, b, s = (tensor(np.zeros(1001), dt) for dt in
                          ("float16", "float16", "float16", "float32"))
            for k in range(1, 4):
                g = np.cos(np.arange(1001) * k)
                C.rmsprop_step_(p, tensor(g, "float16"), v, b, m, None,
                                *rms_hyper(dict(momentum=0.9, centered=True,
                                                weight_decay=0.01)))
                C.adagrad_step_(q, tensor(g, "float32"), s, k,
                                *ada_hyper(dict(lr_decay=0.1)))
            results.append(np.concatenate([to64(t) for t in (p, v, m, b, q,
                                                              s)]))
        finally:
            C._set_cpu_level(ampc.backends.cpu.best_level())
    for r in results[1:]:
        assert np.array_equal(r, results[0])


def test_adagrad_counter_equals_host_steps(rng):
    """A counter tensor: advanced by the step, which takes its rate from
    it; the same bits as the step's number."""
    o = dict(lr_decay=0.3, weight_decay=0.01)
    x = rand_values((50,), "float32", rng)
    a, b = tensor(x, "float32"), tensor(x, "float32")
    sa, sb = tensor(np.zeros(50), "float32"), tensor(np.zeros(50), "float32")
    counter = ampc.tensor(0.0)
    for k in range(1, 6):
        g = tensor(rand_values((50,), "float32", rng), "float32")
        C.adagrad_step_(a, g, sa, counter, *ada_hyper(o))
        C.adagrad_step_(b, g, sb, k, *ada_hyper(o))
        assert float(counter) == k
    assert np.array_equal(to64(a), to64(b))
    assert np.array_equal(to64(sa), to64(sb))


def test_in_place_and_versions():
    p, v, s = (tensor(np.ones(5), "float32") for _ in range(3))
    versions = [t._version for t in (p, v, s)]
    C.rmsprop_step_(p, tensor(np.ones(5), "float32"), v, None, None, None,
                    0.1, 0.0, 0.0, 0.0, 0.0, False, False)
    # alpha 0: v = g^2 = 1, so p moves by lr
    assert_close(p, np.full(5, 0.9), "float32")
    C.adagrad_step_(p, tensor(np.ones(5), "float32"), s, 1, 0.1, 0.0, 0.0,
                    0.0, False)
    assert_close(s, np.full(5, 2.0), "float32")
    assert all(t._version > k for t, k in zip((p, v, s), versions))


def test_strided_grad(rng):
    g = rand_values((4, 3), "float32", rng)
    p = tensor(np.zeros((3, 4)), "float32")
    s = tensor(np.zeros((3, 4)), "float32")
    C.adagrad_step_(p, tensor(g, "float32").t(), s, 1, 1.0, 0.0, 0.0, 0.0,
                    False)
    assert_close(p, -np.sign(g.T), "float32")
    assert_close(s, g.T ** 2, "float32")


def test_grad_scale_and_found_inf():
    """PyTorch's fused-step contract: a nonzero found_inf skips the step,
    counters included; a grad_scale unscales the grads, written back."""
    p, v, s = (tensor(np.ones(3), "float32") for _ in range(3))
    g = tensor(np.full(3, 8.0), "float32")
    counter = ampc.tensor(0.0)
    kw = dict(grad_scale=ampc.tensor(4.0), found_inf=ampc.tensor(1.0))
    C.rmsprop_step_(p, g, v, None, None, counter, *rms_hyper({}), **kw)
    C.adagrad_step_(p, g, s, counter, *ada_hyper({}), **kw)
    for t, x in ((p, 1.0), (v, 1.0), (s, 1.0), (g, 8.0), (counter, 0.0)):
        assert to64(t).ravel().tolist() == [x] * t.numel()
    kw["found_inf"] = ampc.tensor(0.0)
    C.adagrad_step_(p, g, s, counter, *ada_hyper({}), **kw)
    assert float(counter) == 1.0
    assert to64(g).tolist() == [2.0] * 3
    assert_close(s, np.full(3, 5.0), "float32")
    assert_close(p, np.full(3, 1.0 - 0.1 * 2.0 / np.sqrt(5.0)), "float32")


# ----------------------------------------------------------------------------
# the list call equals the per-parameter call


def run_both(kind, sizes, dtype, o, rng, device="cpu", counters=True,
             scale=None, found=None):
    """Three steps of the _foreach_ call on `device` and three of the
    single call per parameter on the CPU; returns both runs' tensors."""
    ps = [rand_values((n,), dtype, rng) for n in sizes]
    gs = [[rand_values((n,), dtype, rng) for n in sizes] for _ in range(3)]
    nstate = 3 if kind == "rmsprop" else 1
    runs = []
    for dev, multi in ((device, True), ("cpu", False)):
        params = [tensor(x, dtype, dev) for x in ps]
        states = [[tensor(np.full(n, 0.25), dtype, dev) for n in sizes]
                  for _ in range(nstate)]
        steps = [ampc.zeros(()).to(dev) if dev != "cpu" else ampc.zeros(())
                 for _ in sizes]
        grads = None
        for k, g in enumerate(gs, 1):
            grads = [tensor(x, dtype, dev) for x in g]
            kw = {}
            if scale is not None:
                kw["grad_scale"] = ampc.tensor(scale).to(dev)
            if found is not None:
                kw["found_inf"] = ampc.tensor(found[k - 1]).to(dev)
            if kind == "rmsprop":
                hyper = rms_hyper(o)
                if multi:
                    C.rmsprop_foreach_step_(
                        params, grads, *states,
                        steps if counters else None, *hyper, **kw)
                else:
                    for i, p in enumerate(params):
                        C.rmsprop_step_(
                            p, grads[i], *(st[i] for st in states),
                            steps[i] if counters else None, *hyper, **kw)
            else:
                hyper = ada_hyper(o)
                if multi:
                    C.adagrad_foreach_step_(params, grads, states[0],
                                            steps if counters else k,
                                            *hyper, **kw)
                else:
                    for i, p in enumerate(params):
                        C.adagrad_step_(p, grads[i], states[0][i],
                                        steps[i] if counters else k, *hyper,
                                        **kw)
        runs.append([params, *states, grads, steps])
    return runs


def assert_same_runs(a, b):
    for ts, us in zip(a, b):
        for i, (t, u) in enumerate(zip(ts, us)):
            x, y = to64(t.cpu()), to64(u.cpu())
            same = (x == y) | (np.isnan(x) & np.isnan(y))
            assert same.all(), f"tensor {i}: {(~same).sum()} differ"


FOREACH_CASES = [("rmsprop", o) for o in RMSPROP_OPTIONS[::3]] + \
    [("adagrad", o) for o in ADAGRAD_OPTIONS[::2]]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("kind,o", FOREACH_CASES,
                         ids=[f"{k}-{i}" for k, i in zip(
                             [c[0] for c in FOREACH_CASES],
                             ids([c[1] for c in FOREACH_CASES]))])
def test_foreach_equals_single(dtype, kind, o):
    rng = np.random.default_rng(0)
    assert_same_runs(*run_both(kind, LIST_SIZES, dtype, o, rng))


@pytest.mark.parametrize("kind", ["rmsprop", "adagrad"])
@pytest.mark.parametrize("counters", [True, False])
def test_foreach_grad_scale_and_found_inf(kind, counters):
    rng = np.random.default_rng(1)
    o = dict(momentum=0.9, centered=True, weight_decay=0.01) \
        if kind == "rmsprop" else dict(lr_decay=0.1)
    a, b = run_both(kind, (5, 33, 0, 4097), "float32", o, rng,
                    counters=counters, scale=1024.0, found=(0.0, 1.0, 0.0))
    assert_same_runs(a, b)
    if counters:        # the skipped step did not count
        assert [float(t) for t in a[-1]] == [2.0] * 4


def test_foreach_empty_lists():
    C.rmsprop_foreach_step_([], [], [], None, None, None, *rms_hyper({}))
    C.adagrad_foreach_step_([], [], [], 1, *ada_hyper({}))


# ----------------------------------------------------------------------------
# argument checks


def f32(n=3):
    return tensor(np.zeros(n), "float32")


def rms(p=None, g=None, v=None, buf=None, m=None, step=None, lr=0.01,
        alpha=0.99, eps=1e-8, wd=0.0, momentum=0.0, centered=False, **kw):
    C.rmsprop_step_(f32() if p is None else p, f32() if g is None else g,
                    f32() if v is None else v, buf, m, step, lr, alpha, eps,
                    wd, momentum, centered, False, **kw)


def ada(p=None, g=None, s=None, step=1, lr=0.01, lr_decay=0.0, wd=0.0,
        eps=1e-10, **kw):
    C.adagrad_step_(f32() if p is None else p, f32() if g is None else g,
                    f32() if s is None else s, step, lr, lr_decay, wd, eps,
                    False, **kw)


def ada_list(ps, gs, ss, steps=1):
    C.adagrad_foreach_step_(ps, gs, ss, steps, 0.01, 0.0, 0.0, 1e-10, False)


@pytest.mark.parametrize("make_call,exc,match", [
    (lambda: rms(lr=-1.0), ValueError, r"Invalid learning rate: -1.0"),
    (lambda: rms(alpha=-0.5), ValueError, r"Invalid alpha value: -0.5"),
    (lambda: rms(eps=-1.0), ValueError, r"Invalid epsilon value"),
    (lambda: rms(momentum=-1.0), ValueError, r"Invalid momentum value"),
    (lambda: rms(wd=-1.0), ValueError, r"Invalid weight_decay value"),
    (lambda: rms(momentum=0.9), ValueError,
     r"rmsprop_step_\(\): momentum_buffer is required when momentum > 0"),
    (lambda: rms(centered=True), ValueError,
     r"grad_avg is required when centered is True"),
    (lambda: rms(v=f32(4)), RuntimeError, r"square_avg to have the shape"),
    (lambda: rms(m=tensor(np.zeros(3), "float16"), centered=True),
     RuntimeError, r"grad_avg to have dtype float32"),
    (lambda: rms(step=3), TypeError,
     r"argument 'step' must be None or a one-element float32 tensor"),
    (lambda: rms(step=f32()), RuntimeError,
     r"expected step to be a one-element float32 tensor"),
    (lambda: rms(g=tensor(np.zeros(3), "float16")), RuntimeError,
     r"expected grad to have dtype float32"),
    (lambda: C.rmsprop_foreach_step_([f32()], [f32()], [f32()], None, None,
                                     [f32()], *rms_hyper({})), RuntimeError,
     r"expected steps\[0\] to be a one-element float32 tensor"),
    (lambda: C.rmsprop_foreach_step_([f32()], [f32()], [f32()], None, None,
                                     [1.0], *rms_hyper({})), TypeError,
     r"steps\[0\] must be a one-element float32 tensor"),
    (lambda: C.rmsprop_foreach_step_([f32(), f32()], [f32(), f32()],
                                     [f32()], None, None, None,
                                     *rms_hyper({})), ValueError,
     r"square_avgs has 1 tensors but params has 2"),
    (lambda: C.rmsprop_foreach_step_([f32()], [f32()], [f32()], None, None,
                                     None, *rms_hyper(dict(momentum=0.5))),
     ValueError, r"momentum_buffers\[0\] is required when momentum > 0"),
    (lambda: ada(lr=-1.0), ValueError, r"Invalid learning rate: -1.0"),
    (lambda: ada(lr_decay=-1.0), ValueError, r"Invalid lr_decay value"),
    (lambda: ada(wd=-1.0), ValueError, r"Invalid weight_decay value"),
    (lambda: ada(eps=-1.0), ValueError, r"Invalid epsilon value"),
    (lambda: ada(step=0), ValueError,
     r"adagrad_step_\(\): step is the 1-based number of this step and must "
     r"be >= 1, got 0.0"),
    (lambda: ada(step="1"), TypeError, r"argument 'step' must be a number"),
    (lambda: ada(s=tensor(np.zeros(3), "bfloat16")), RuntimeError,
     r"state_sum to have dtype float32"),
    (lambda: ada(s=tensor(np.zeros(6), "float32")[::2]), RuntimeError,
     r"state_sum must be contiguous"),
    (lambda: ada(grad_scale=f32()), RuntimeError,
     r"expected grad_scale to be a one-element float32 tensor"),
    (lambda: ada_list([f32(), f32()], [f32(), f32(4)], [f32(), f32()]),
     RuntimeError, r"grads\[1\]"),
    (lambda: ada_list([f32()], [f32()], f32()), TypeError,
     r"state_sums must be a list or tuple of tensors, not Tensor"),
    (lambda: ada_list([f32()], [f32()], [f32()], [ampc.zeros(())] * 2),
     ValueError, r"steps has 2 tensors but params has 1"),
    (lambda: ada_list([f32()], [f32()], [None]), ValueError,
     r"adagrad_foreach_step_\(\): state_sums\[0\] is required"),
])
def test_argument_errors(make_call, exc, match):
    with pytest.raises(exc, match=match):
        make_call()


def test_error_leaves_every_parameter_unchanged():
    """the checks run before any parameter is written"""
    ps = [tensor(np.ones(3), "float32") for _ in range(2)]
    with pytest.raises(RuntimeError, match=r"state_sums\[1\]"):
        ada_list(ps, [f32(), f32()], [f32(), f32(4)])
    for p in ps:
        assert to64(p).tolist() == [1.0] * 3


# ----------------------------------------------------------------------------
# on a GPU: one launch per list, the CPU's bits


@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("kind,o", FOREACH_CASES,
                         ids=[f"{k}-{i}" for k, i in zip(
                             [c[0] for c in FOREACH_CASES],
                             ids([c[1] for c in FOREACH_CASES]))])
def test_cuda_equals_cpu(dtype, kind, o):
    rng = np.random.default_rng(6)
    assert_same_runs(*run_both(kind, LIST_SIZES, dtype, o, rng,
                               device="cuda"))


@requires_cuda
@pytest.mark.parametrize("kind", ["rmsprop", "adagrad"])
@pytest.mark.parametrize("counters", [True, False])
def test_cuda_many_parameters_and_skip(kind, counters):
    """300 parameters (three launches of at most 128), a skipped step and
    a grad_scale, on the device"""
    rng = np.random.default_rng(7)
    sizes = [int(n) for n in rng.integers(0, 300, size=300)]
    o = dict(momentum=0.9, centered=True) if kind == "rmsprop" else \
        dict(lr_decay=0.1, weight_decay=0.1)
    assert_same_runs(*run_both(kind, sizes, "float16", o, rng,
                               device="cuda", counters=counters,
                               scale=512.0, found=(0.0, 1.0, 0.0)))


@requires_cuda
@pytest.mark.parametrize("cls,kw", [
    ("RMSprop", dict(momentum=0.9, centered=True)),
    ("RMSprop", dict(weight_decay=0.1, capturable=True)),
    ("Adagrad", dict(lr_decay=0.1)),
    ("Adagrad", dict(weight_decay=0.1, fused=True)),
], ids=str)
def test_cuda_optimizers_equal_cpu(cls, kw):
    """The optimizers on CUDA parameters (step counters on the host, or on
    the device with capturable / fused) give the CPU's bits."""
    rng = np.random.default_rng(8)
    x = rand_values((37, 29), "float32", rng)
    gs = [rand_values((37, 29), "float32", rng) for _ in range(5)]
    out = []
    for dev in ("cpu", "cuda"):
        p = ampc.nn.Parameter(tensor(x, "float32", dev))
        opt = getattr(ampc.optim, cls)([p], lr=0.01, **(
            kw if dev == "cuda" else {k: v for k, v in kw.items()
                                      if k != "capturable"}))
        for g in gs:
            p.grad = tensor(g, "float32", dev)
            opt.step()
        step = opt.state[p]["step"]
        assert step.device_type == ("cuda" if dev == "cuda" and (
            kw.get("capturable") or kw.get("fused")) else "cpu")
        assert float(step) == 5.0
        out.append(to64(p.detach().cpu()))
    assert np.array_equal(out[0], out[1])
