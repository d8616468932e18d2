"""The multi-tensor optimizer steps, ``_C.sgd_foreach_step_`` and
``_C.adam_foreach_step_``: a list of parameters updated in one call (one
kernel launch on a GPU) gives the same bits as ``sgd_step_`` /
``adam_step_`` on each parameter in turn, for every dtype and option, over
lists of odd sizes (empty tensors, sizes around the GPU's 4096-element
chunks, more parameters than one launch takes), with host step numbers
and with per-parameter step counters; tensors that share memory; the
argument checks; and the optimizers' batching (one call per device and
dtype, and for Adam per step count; ``foreach=False`` one call per
parameter).
"""
import numpy as np
import pytest

import ampc
from cuda_helpers import requires_cuda as _requires_cuda
from helpers import FLOAT_NAMES, from_values, rand_values, to64

C = ampc._C

OPTIONS = [
    dict(momentum=0.0),
    dict(momentum=0.0, weight_decay=0.01, maximize=True),
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.1, weight_decay=0.05),
    dict(momentum=0.5, nesterov=True, weight_decay=0.01, maximize=True),
]
# around the GPU kernel's chunk of 4096 elements, and empty
SIZES = (0, 1, 7, 33, 4095, 4097, 3 * 4096 + 5)


def requires_cuda(fn):
    return pytest.mark.cuda(_requires_cuda(fn))


def ids(options):
    return ["-".join(f"{k}={v}" for k, v in o.items()) for o in options]


def args(o):
    return (o.get("momentum", 0.0), o.get("dampening", 0.0),
            o.get("weight_decay", 0.0), o.get("nesterov", False),
            o.get("maximize", False))


def make(sizes, dtype, rng, device="cpu"):
    """params, momentum buffers and per-step grads as float64 arrays."""
    ps = [rand_values((n,), dtype, rng) for n in sizes]
    bs = [np.zeros(n) for n in sizes]
    gs = [[rand_values((n,), dtype, rng) for n in sizes] for _ in range(3)]
    return ps, bs, gs


def tensors(values, dtype, device="cpu"):
    out = [from_values(v, dtype) for v in values]
    return [t.to(device) for t in out] if device != "cpu" else out


def exact(a, b, what):
    x, y = to64(a.cpu()), to64(b.cpu())
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    assert same.all(), f"{what}: {(~same).sum()} elements differ"


def amp_kwargs(device, scale, found, step):
    """The fused-step keywords on `device`: grad_scale and this step's
    found_inf where given."""
    kw = {}
    if scale is not None:
        kw["grad_scale"] = ampc.tensor(scale).to(device)
    if found is not None:
        kw["found_inf"] = ampc.tensor(found[step]).to(device)
    return kw


def run_both(sizes, dtype, o, rng, device="cpu", scale=None, found=None):
    """Three steps of sgd_foreach_step_ on `device` and three of sgd_step_
    per parameter on the CPU; returns both (params, buffers, grads)."""
    ps, bs, gs = make(sizes, dtype, rng)
    lr = 0.05
    momentum = o.get("momentum", 0.0)
    multi = [tensors(ps, dtype, device), tensors(bs, dtype, device)]
    single = [tensors(ps, dtype), tensors(bs, dtype)]
    last_grads = [None, None]
    for step, g in enumerate(gs):
        kw_m, kw_s = (amp_kwargs(d, scale, found, step)
                      for d in (device, "cpu"))
        gm, gsg = tensors(g, dtype, device), tensors(g, dtype)
        C.sgd_foreach_step_(multi[0], gm, multi[1] if momentum else None,
                            lr, *args(o), step == 0, **kw_m)
        for p, gr, b in zip(single[0], gsg, single[1]):
            C.sgd_step_(p, gr, b if momentum else None, lr, *args(o),
                        step == 0, **kw_s)
        last_grads = [gm, gsg]
    return multi + [last_grads[0]], single + [last_grads[1]]


def assert_same_run(multi, single):
    for name, ms, ss in zip(("param", "momentum_buffer", "grad"), multi,
                            single):
        for i, (m, s) in enumerate(zip(ms, ss)):
            exact(m, s, f"{name} {i}")


# ----------------------------------------------------------------------------
# the list step equals the per-parameter step


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("o", OPTIONS, ids=ids(OPTIONS))
def test_foreach_equals_single(dtype, o):
    rng = np.random.default_rng(0)
    assert_same_run(*run_both(SIZES, dtype, o, rng))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_foreach_grad_scale_and_found_inf(dtype):
    """the fused-optimizer contract: skipped steps write nothing, the others
    unscale the grads in place, as the single-tensor step does"""
    rng = np.random.default_rng(1)
    o = dict(momentum=0.9, weight_decay=0.01)
    assert_same_run(*run_both((5, 33, 0, 4097), dtype, o, rng,
                              scale=1024.0, found=(0.0, 1.0, 0.0)))


def test_foreach_empty_list_and_no_momentum_buffers():
    C.sgd_foreach_step_([], [], None, 0.1, 0.0, 0.0, 0.0, False, False, True)
    p = from_values(np.ones(3), "float32")
    C.sgd_foreach_step_([p], [from_values(np.ones(3), "float32")], None, 0.5,
                        0.0, 0.0, 0.0, False, False, True)
    exact(p, from_values(np.full(3, 0.5), "float32"), "param")


def test_foreach_strided_grad_and_versions():
    rng = np.random.default_rng(2)
    g = rand_values((4, 3), "float32", rng)
    p = from_values(np.zeros((3, 4)), "float32")
    q = from_values(np.zeros(2), "float32")
    v = p._version, q._version
    C.sgd_foreach_step_([p, q], [from_values(g, "float32").t(),
                                 from_values(np.ones(2), "float32")],
                        None, 1.0, 0.0, 0.0, 0.0, False, False, True)
    exact(p, from_values(-g.T, "float32"), "param")
    assert p._version > v[0] and q._version > v[1]


def test_foreach_shared_grad_is_unscaled_once_per_parameter():
    """two parameters given one grad tensor: as the per-parameter loop,
    the second step sees the grad the first step unscaled"""
    def run(step):
        ps = [from_values(np.zeros(4), "float32") for _ in range(2)]
        g = from_values(np.full(4, 8.0), "float32")
        step(ps, g)
        return ps, g

    scale = ampc.tensor(2.0)
    multi = run(lambda ps, g: C.sgd_foreach_step_(
        ps, [g, g], None, 1.0, 0.0, 0.0, 0.0, False, False, True,
        grad_scale=scale))
    single = run(lambda ps, g: [C.sgd_step_(
        p, g, None, 1.0, 0.0, 0.0, 0.0, False, False, True,
        grad_scale=scale) for p in ps])
    for a, b in zip(multi[0] + [multi[1]], single[0] + [single[1]]):
        exact(a, b, "shared grad")
    exact(multi[1], from_values(np.full(4, 2.0), "float32"), "grad")


# ----------------------------------------------------------------------------
# argument checks


def f32(n=3):
    return from_values(np.zeros(n), "float32")


def call(ps, gs, bs=None, lr=0.1, momentum=0.0, nesterov=False, **kw):
    C.sgd_foreach_step_(ps, gs, bs, lr, momentum, 0.0, 0.0, nesterov, False,
                        True, **kw)


@pytest.mark.parametrize("make_call,exc,match", [
    (lambda: call([f32(), f32()], [f32()]), ValueError,
     r"sgd_foreach_step_\(\): grads has 1 tensors but params has 2; every "
     r"list needs one per parameter"),
    (lambda: call([f32()], [f32()], [f32(), f32()], momentum=0.9),
     ValueError, r"momentum_buffers has 2 tensors but params has 1"),
    (lambda: call(f32(), [f32()]), TypeError,
     r"params must be a list or tuple of tensors, not Tensor"),
    (lambda: call([f32(), from_values(np.zeros(3), "float16")],
                  [f32(), from_values(np.zeros(3), "float16")]),
     RuntimeError, r"expected params\[1\] to have dtype float32 \(the "
     r"params\[0\]'s\), got float16"),
    (lambda: call([f32(), f32()], [f32(), f32(4)]), RuntimeError,
     r"grads\[1\]"),
    (lambda: call([f32()], [f32()], momentum=0.9), ValueError,
     r"momentum_buffers\[0\] is required when momentum != 0"),
    (lambda: call([f32()], [f32()], [from_values(np.zeros(3), "bfloat16")],
                  momentum=0.9), RuntimeError, r"momentum_buffers\[0\]"),
    (lambda: call([f32(), 3.0], [f32(), f32()]), TypeError, r"params\[1\]"),
    (lambda: call([f32()], [f32()], lr=-1.0), ValueError,
     r"Invalid learning rate: -1.0"),
    (lambda: call([f32()], [f32()], nesterov=True), ValueError,
     r"Nesterov momentum requires a momentum"),
    (lambda: call([f32()], [f32()], grad_scale=f32()), RuntimeError,
     r"expected grad_scale to be a one-element float32 tensor"),
    (lambda: call([from_values(np.zeros(4), "float32")[::2]], [f32(2)]),
     RuntimeError, r"params\[0\] must be contiguous"),
])
def test_foreach_argument_errors(make_call, exc, match):
    with pytest.raises(exc, match=match):
        make_call()


def test_foreach_error_leaves_every_parameter_unchanged():
    """the checks run before any parameter is written"""
    ps = [from_values(np.ones(3), "float32") for _ in range(2)]
    with pytest.raises(RuntimeError, match=r"grads\[1\]"):
        call(ps, [from_values(np.ones(3), "float32"), f32(4)])
    for p in ps:
        exact(p, from_values(np.ones(3), "float32"), "param")


# ----------------------------------------------------------------------------
# optim.SGD: one call per (device, dtype) batch of a group


def _model_params(dtypes, rng):
    return [ampc.nn.Parameter(from_values(rand_values((n,), dt, rng), dt))
            for n, dt in zip((5, 33, 7, 1), dtypes)]


def _train(params, foreach, rng_seed=3, **kw):
    opt = ampc.optim.SGD(params, lr=0.1, momentum=0.9, foreach=foreach, **kw)
    rng = np.random.default_rng(rng_seed)
    for _ in range(3):
        for p in params:
            p.grad = from_values(rand_values(tuple(p.shape), str(
                p.dtype).split(".")[-1], rng), str(p.dtype).split(".")[-1])
        opt.step()
    return params


@pytest.mark.parametrize("fused", [None, True])
def test_sgd_batches_by_dtype_and_matches_the_loop(monkeypatch, fused):
    dtypes = ("float32", "float16", "float32", "bfloat16")
    calls = []
    real = C.sgd_foreach_step_

    def counting(ps, *a, **k):
        calls.append([str(p.dtype) for p in ps])
        return real(ps, *a, **k)

    batched = _model_params(dtypes, np.random.default_rng(4))
    monkeypatch.setattr(C, "sgd_foreach_step_", counting)
    _train(batched, None, fused=fused)
    monkeypatch.undo()
    # three steps, three dtypes: float32's two parameters go together
    assert len(calls) == 9
    assert sorted(map(len, calls[:3])) == [1, 1, 2]
    looped = _model_params(dtypes, np.random.default_rng(4))
    _train(looped, False, fused=None if fused is None else True)
    for a, b in zip(batched, looped):
        exact(a.detach(), b.detach(), "param")


def test_sgd_foreach_false_calls_once_per_parameter(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("foreach=False must not batch")

    monkeypatch.setattr(C, "sgd_foreach_step_", refuse)
    _train(_model_params(("float32",) * 4, np.random.default_rng(5)), False)


# ----------------------------------------------------------------------------
# on a GPU: one launch per list, the CPU's bits


@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("o", OPTIONS, ids=ids(OPTIONS))
def test_cuda_foreach_equals_cpu(dtype, o):
    rng = np.random.default_rng(6)
    assert_same_run(*run_both(SIZES, dtype, o, rng, device="cuda"))


@requires_cuda
def test_cuda_foreach_many_parameters_and_skip():
    """300 parameters (three launches of at most 128), a skipped step and
    a grad_scale"""
    rng = np.random.default_rng(7)
    sizes = [int(n) for n in rng.integers(0, 300, size=300)]
    o = dict(momentum=0.9, nesterov=True)
    assert_same_run(*run_both(sizes, "float16", o, rng, device="cuda",
                              scale=512.0, found=(0.0, 1.0, 0.0)))


@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cuda_foreach_misaligned_and_shared_storage(dtype):
    """parameters that are views at odd offsets of one storage (not 16-byte
    aligned, and sharing memory: one launch each)"""
    rng = np.random.default_rng(8)
    base = rand_values((3 * 4100 + 3,), dtype, rng)
    g = [rand_values((4099,), dtype, rng) for _ in range(3)]
    out = []
    for device in ("cpu", "cuda"):
        flat = from_values(base, dtype)
        flat = flat.to(device) if device != "cpu" else flat
        ps = [flat[1 + 4100 * i: 1 + 4100 * i + 4099] for i in range(3)]
        bs = [ampc.zeros(4099, dtype=getattr(ampc, dtype), device=device)
              for _ in range(3)]
        C.sgd_foreach_step_(ps, tensors(g, dtype, device), bs, 0.1, 0.9,
                            0.0, 0.0, False, False, True)
        out.append((flat, bs))
    exact(out[0][0], out[1][0], "params")
    for a, b in zip(out[0][1], out[1][1]):
        exact(a, b, "buffers")


# ----------------------------------------------------------------------------
# Adam and AdamW

ADAM_OPTIONS = [
    dict(),
    dict(weight_decay=0.01, decoupled=True),
    dict(amsgrad=True, maximize=True, weight_decay=0.1),
    dict(beta1=0.4, beta2=0.5, eps=1e-3),
]


def adam_hyper(o, lr=0.01):
    return (lr, o.get("beta1", 0.9), o.get("beta2", 0.999),
            o.get("eps", 1e-8), o.get("weight_decay", 0.0),
            o.get("amsgrad", False), o.get("maximize", False),
            o.get("decoupled", False))


def adam_run_both(sizes, dtype, o, rng, device="cpu", counters=False,
                  scale=None, found=None):
    """Three steps of adam_foreach_step_ on `device` and of adam_step_ per
    parameter on the CPU: (params, exp_avgs, exp_avg_sqs, maxes, grads,
    steps) of each."""
    ps, _, gs = make(sizes, dtype, rng)
    zeros = [np.zeros(n) for n in sizes]
    ams = o.get("amsgrad", False)

    def state(dev):
        return [tensors(ps, dtype, dev)] + \
            [tensors(zeros, dtype, dev) for _ in range(3)] + \
            [[ampc.zeros((), device=dev) for _ in sizes]]

    multi, single = state(device), state("cpu")
    for step, g in enumerate(gs):
        kw_m, kw_s = (amp_kwargs(d, scale, found, step)
                      for d in (device, "cpu"))
        gm, gsg = tensors(g, dtype, device), tensors(g, dtype)
        C.adam_foreach_step_(multi[0], gm, multi[1], multi[2],
                             multi[3] if ams else None,
                             multi[4] if counters else step + 1,
                             *adam_hyper(o), **kw_m)
        for i, gr in enumerate(gsg):
            C.adam_step_(single[0][i], gr, single[1][i], single[2][i],
                         single[3][i] if ams else None,
                         single[4][i] if counters else step + 1,
                         *adam_hyper(o), **kw_s)
        multi_grads, single_grads = gm, gsg
    return multi + [multi_grads], single + [single_grads]


def assert_same_adam(multi, single):
    names = ("param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step",
             "grad")
    for name, ms, ss in zip(names, multi, single):
        for i, (m, s) in enumerate(zip(ms, ss)):
            exact(m, s, f"{name} {i}")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("o", ADAM_OPTIONS, ids=ids(ADAM_OPTIONS) or None)
@pytest.mark.parametrize("counters", [False, True])
def test_adam_foreach_equals_single(dtype, o, counters):
    rng = np.random.default_rng(10)
    assert_same_adam(*adam_run_both(SIZES, dtype, o, rng,
                                    counters=counters))


def test_adam_foreach_grad_scale_and_found_inf():
    rng = np.random.default_rng(11)
    multi, single = adam_run_both((5, 0, 33), "float32", ADAM_OPTIONS[2],
                                  rng, counters=True, scale=256.0,
                                  found=(0.0, 1.0, 0.0))
    assert_same_adam(multi, single)
    # the skipped step did not count
    assert [float(t) for t in multi[4]] == [2.0, 2.0, 2.0]


def adam_call(ps, gs, ms=None, vs=None, xs=None, steps=1, amsgrad=False,
              **kw):
    ms = ms if ms is not None else [f32() for _ in ps]
    vs = vs if vs is not None else [f32() for _ in ps]
    C.adam_foreach_step_(ps, gs, ms, vs, xs, steps, 0.01, 0.9, 0.999, 1e-8,
                         0.0, amsgrad, False, False, **kw)


@pytest.mark.parametrize("make_call,exc,match", [
    (lambda: adam_call([f32(), f32()], [f32(), f32()], ms=[f32()]),
     ValueError, r"adam_foreach_step_\(\): exp_avgs has 1 tensors but "
     r"params has 2"),
    (lambda: adam_call([f32()], [f32()], steps=[ampc.zeros(()),
                                                ampc.zeros(())]),
     ValueError, r"steps has 2 tensors but params has 1"),
    (lambda: adam_call([f32()], [f32()], steps="1"), TypeError,
     r"argument 'step' must be a number or a one-element float32 tensor"),
    (lambda: adam_call([f32()], [f32()], steps=0), ValueError,
     r"step is the 1-based number of this step and must be >= 1"),
    (lambda: adam_call([f32()], [f32()], amsgrad=True), ValueError,
     r"max_exp_avg_sqs\[0\] is required when amsgrad is True"),
    (lambda: adam_call([f32()], [f32()], steps=[ampc.zeros((), dtype=ampc.
                                                           float16)]),
     RuntimeError, r"expected steps\[0\] to be a one-element float32"),
    (lambda: adam_call([f32(), f32()], [f32(), f32()],
                       vs=[f32(), from_values(np.zeros(2), "float32")]),
     RuntimeError, r"exp_avg_sqs\[1\]"),
    (lambda: adam_call([f32(), f32()], [f32(), f32()],
                       steps=[ampc.zeros(()), None]),
     TypeError, r"steps\[1\] must be a one-element float32 tensor"),
    (lambda: adam_call([f32()], [f32()], steps=[None]),
     TypeError, r"steps\[0\] must be a one-element float32 tensor"),
])
def test_adam_foreach_argument_errors(make_call, exc, match):
    with pytest.raises(exc, match=match):
        make_call()


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_adam_batches_by_step_count_and_matches_the_loop(monkeypatch, cls):
    """a parameter added after the first steps has its own count: it goes
    in its own call, and the bits equal foreach=False's loop"""
    rng = np.random.default_rng(12)
    values = [rand_values((n,), "float32", rng) for n in (5, 33, 7)]
    grads = [[rand_values((n,), "float32", rng) for n in (5, 33, 7)]
             for _ in range(4)]

    def train(foreach):
        ps = [ampc.nn.Parameter(from_values(v, "float32")) for v in values]
        opt = getattr(ampc.optim, cls)(ps[:2], lr=0.01, foreach=foreach)
        for k, gs in enumerate(grads):
            if k == 2:
                opt.add_param_group({"params": [ps[2]]})
                opt.param_groups[0]["params"].append(
                    opt.param_groups.pop()["params"][0])
            for p, g in zip(ps, gs):
                p.grad = from_values(g, "float32")
            opt.step()
        return ps

    calls = []
    real = C.adam_foreach_step_

    def counting(ps, *a, **k):
        calls.append((len(ps), a[4]))
        return real(ps, *a, **k)

    monkeypatch.setattr(C, "adam_foreach_step_", counting)
    batched = train(None)
    monkeypatch.undo()
    assert calls == [(2, 1), (2, 2), (2, 3), (1, 1), (2, 4), (1, 2)]
    looped = train(False)
    for a, b in zip(batched, looped):
        exact(a.detach(), b.detach(), "param")


@requires_cuda
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("o", ADAM_OPTIONS, ids=ids(ADAM_OPTIONS) or None)
@pytest.mark.parametrize("counters", [False, True])
def test_cuda_adam_foreach_equals_cpu(dtype, o, counters):
    rng = np.random.default_rng(13)
    assert_same_adam(*adam_run_both(SIZES, dtype, o, rng, device="cuda",
                                    counters=counters))


@requires_cuda
def test_cuda_adam_foreach_many_parameters_skip_and_shared_counter():
    """300 parameters with counters (three launches), a skipped step; then
    two parameters sharing one counter: one launch each, so it advances
    twice, as in the per-parameter loop"""
    rng = np.random.default_rng(14)
    sizes = [int(n) for n in rng.integers(0, 300, size=300)]
    assert_same_adam(*adam_run_both(sizes, "bfloat16", ADAM_OPTIONS[1], rng,
                                    device="cuda", counters=True,
                                    scale=64.0, found=(0.0, 1.0, 0.0)))
    counter = ampc.zeros((), device="cuda")
    ps = [ampc.ones(5, device="cuda") for _ in range(2)]
    C.adam_foreach_step_(ps, [ampc.ones(5, device="cuda")] * 2,
                         [ampc.zeros(5, device="cuda") for _ in range(2)],
                         [ampc.zeros(5, device="cuda") for _ in range(2)],
                         None, [counter, counter], *adam_hyper({}))
    assert float(counter.cpu()) == 2.0
