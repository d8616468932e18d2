"""The fused optimizer steps of ampc._C (sgd_step_, adam_step_): every
option of torch.optim.SGD and Adam/AdamW, for every float dtype on every CPU
level, step by step against a float64 NumPy transcription of torch's
formulas (reference.py), over several steps against torch.optim itself where
it is installed, and the argument checks.
"""
import numpy as np
import pytest

import ampc
import reference as ref
from helpers import FLOAT_NAMES, assert_close, from_values, rand_values, to64

C = ampc._C

SIZES = (1, 33)
BIG = 70001             # split over threads
STEPS = 4

SGD_OPTIONS = [
    dict(momentum=0.0),
    dict(momentum=0.0, weight_decay=0.01, maximize=True),
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.1, weight_decay=0.05),
    dict(momentum=0.9, nesterov=True),
    dict(momentum=0.5, nesterov=True, weight_decay=0.01, maximize=True),
]

ADAM_OPTIONS = [
    dict(),
    dict(weight_decay=0.01),
    dict(weight_decay=0.01, decoupled=True),
    dict(amsgrad=True),
    dict(amsgrad=True, maximize=True, weight_decay=0.1, decoupled=True),
    # 1 - beta1 >= 0.5 takes the other branch of torch's lerp
    dict(beta1=0.4, beta2=0.5, eps=1e-3, maximize=True),
]


def ids(options):
    return ["-".join(f"{k}={v}" for k, v in o.items()) or "default"
            for o in options]


def tensor(values, dtype):
    return from_values(np.asarray(values, dtype=np.float64), dtype)


def sgd_call(p, g, buf, lr, first, momentum=0.0, dampening=0.0,
             weight_decay=0.0, nesterov=False, maximize=False):
    C.sgd_step_(p, g, buf, lr, momentum, dampening, weight_decay, nesterov,
                maximize, first)


def adam_call(p, g, m, v, vmax, step, lr, beta1=0.9, beta2=0.999, eps=1e-8,
              weight_decay=0.0, amsgrad=False, maximize=False,
              decoupled=False):
    C.adam_step_(p, g, m, v, vmax, step, lr, beta1, beta2, eps, weight_decay,
                 amsgrad, maximize, decoupled)


def tol(dtype):
    return dict(zip(("rtol", "atol"), ref.tolerance(dtype, 4)))


# ----------------------------------------------------------------------------
# step by step against the float64 transcription


SGD_CASES = [(n, o) for n in SIZES for o in SGD_OPTIONS] + \
    [(BIG, SGD_OPTIONS[3]), (BIG, SGD_OPTIONS[5])]
ADAM_CASES = [(n, o) for n in SIZES for o in ADAM_OPTIONS] + \
    [(BIG, ADAM_OPTIONS[1]), (BIG, ADAM_OPTIONS[4])]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n,opts", SGD_CASES,
                         ids=[f"{n}-{i}" for n, i in
                              zip([c[0] for c in SGD_CASES],
                                  ids([c[1] for c in SGD_CASES]))])
def test_sgd_step(cpu_level, dtype, n, opts, rng):
    """Each step from ampc's own state: the float64 formula on the same
    values, rounded to the dtype."""
    lr = 0.1
    p = tensor(rand_values((n,), dtype, rng), dtype)
    momentum = opts["momentum"]
    buf = C.empty((n,), getattr(ampc, dtype)) if momentum else None
    for step in range(STEPS):
        g = rand_values((n,), dtype, rng)
        p0 = to64(p)
        b0 = None if step == 0 or not momentum else to64(buf)
        want_p, want_b = ref.sgd_step(p0, g, b0, lr, **opts)
        sgd_call(p, tensor(g, dtype), buf, lr, step == 0, **opts)
        assert C.kernel_variant("sgd_step") == cpu_level
        assert_close(p, want_p, dtype, **tol(dtype))
        if momentum:
            assert_close(buf, want_b, dtype, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n,opts", ADAM_CASES,
                         ids=[f"{n}-{i}" for n, i in
                              zip([c[0] for c in ADAM_CASES],
                                  ids([c[1] for c in ADAM_CASES]))])
def test_adam_step(cpu_level, dtype, n, opts, rng):
    lr = 0.01
    p = tensor(rand_values((n,), dtype, rng), dtype)
    zeros = np.zeros(n)
    m, v = tensor(zeros, dtype), tensor(zeros, dtype)
    vmax = tensor(zeros, dtype) if opts.get("amsgrad") else None
    for step in range(1, STEPS + 1):
        g = rand_values((n,), dtype, rng)
        state = [to64(t) if t is not None else None for t in (p, m, v, vmax)]
        want = ref.adam_step(*state[:1], g, *state[1:], step, lr, **opts)
        adam_call(p, tensor(g, dtype), m, v, vmax, step, lr, **opts)
        assert C.kernel_variant("adam_step") == cpu_level
        for got, w, name in zip((p, m, v, vmax), want,
                                ("param", "exp_avg", "exp_avg_sq",
                                 "max_exp_avg_sq")):
            if got is not None:
                assert_close(got, w, dtype, **tol(dtype),
                             msg=f"step {step} {name}: ")


def test_sgd_step_levels_agree(rng):
    """Every level gives the same bits (no FMA contraction, same order)."""
    results = []
    for level in ampc.backends.cpu.levels():
        C._set_cpu_level(level)
        try:
            p = tensor(np.linspace(-1, 1, 1001), "float16")
            b = C.empty((1001,), ampc.float16)
            for step in range(3):
                g = tensor(np.cos(np.arange(1001) * (step + 1)), "float16")
                sgd_call(p, g, b, 0.1, step == 0, momentum=0.9,
                         weight_decay=0.01, nesterov=True)
            results.append(to64(p))
        finally:
            C._set_cpu_level(ampc.backends.cpu.best_level())
    for r in results[1:]:
        assert np.array_equal(r, results[0])


def test_adam_step_in_place_and_versions():
    p = tensor(np.ones(5), "float32")
    m, v = tensor(np.zeros(5), "float32"), tensor(np.zeros(5), "float32")
    versions = [t._version for t in (p, m, v)]
    data = p.data_ptr() if hasattr(p, "data_ptr") else None
    adam_call(p, tensor(np.ones(5), "float32"), m, v, None, 1, 0.1)
    assert all(t._version > k for t, k in zip((p, m, v), versions))
    if data is not None:
        assert p.data_ptr() == data
    # the first step moves every parameter by lr (the bias-corrected ratio
    # m / sqrt(v) is 1)
    assert_close(p, np.full(5, 0.9), "float32")


def test_sgd_step_strided_grad(rng):
    g = rand_values((4, 3), "float32", rng)
    p = tensor(np.zeros((3, 4)), "float32")
    sgd_call(p, tensor(g, "float32").t(), None, 1.0, True)
    assert_close(p, -g.T, "float32")


def test_sgd_step_no_momentum_ignores_buffer():
    p = tensor(np.ones(3), "float32")
    buf = tensor(np.full(3, 7.0), "float32")
    sgd_call(p, tensor(np.ones(3), "float32"), buf, 0.5, False)
    assert_close(p, np.full(3, 0.5), "float32")
    assert_close(buf, np.full(3, 7.0), "float32")


# ----------------------------------------------------------------------------
# against torch.optim


def torch_params(torch, values, dtype):
    return [torch.tensor(v).to(getattr(torch, dtype)).requires_grad_()
            for v in values]


def run_torch(torch, opt_cls, kwargs, values, grads, dtype):
    params = torch_params(torch, values, dtype)
    opt = opt_cls(params, **kwargs)
    for gs in grads:
        for q, g in zip(params, gs):
            q.grad = torch.tensor(g).to(getattr(torch, dtype))
        opt.step()
    return params, opt


def torch_tol(dtype):
    """torch rounds float16/bfloat16 after every op, ampc once per step, so
    low-precision trajectories may part by a few ulps per step."""
    if dtype == "float32":
        return dict(rtol=2e-5, atol=1e-6)
    eps = ref.EPS[dtype]
    return dict(rtol=4 * STEPS * eps, atol=4 * STEPS * eps)


def torch_value(t):
    return t.detach().double().numpy()


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("opts", SGD_OPTIONS, ids=ids(SGD_OPTIONS))
def test_sgd_torch(dtype, opts, rng):
    torch = pytest.importorskip("torch")
    shapes = [(7, 3), (33,)]
    values = [rand_values(s, dtype, rng) for s in shapes]
    grads = [[rand_values(s, dtype, rng) for s in shapes]
             for _ in range(STEPS)]
    kwargs = dict(lr=0.05, momentum=opts["momentum"],
                  dampening=opts.get("dampening", 0.0),
                  weight_decay=opts.get("weight_decay", 0.0),
                  nesterov=opts.get("nesterov", False),
                  maximize=opts.get("maximize", False))
    tparams, topt = run_torch(torch, torch.optim.SGD, kwargs, values, grads,
                              dtype)
    params = [tensor(v, dtype) for v in values]
    bufs = [C.empty(v.shape, getattr(ampc, dtype)) if opts["momentum"]
            else None for v in values]
    for step, gs in enumerate(grads):
        for p, b, g in zip(params, bufs, grads[step]):
            sgd_call(p, tensor(g, dtype), b, 0.05, step == 0, **opts)
    for p, b, q in zip(params, bufs, tparams):
        assert_close(p, torch_value(q), dtype, **torch_tol(dtype))
        if b is not None:
            tb = topt.state[q]["momentum_buffer"]
            assert_close(b, torch_value(tb), dtype, **torch_tol(dtype))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("opts", ADAM_OPTIONS, ids=ids(ADAM_OPTIONS))
def test_adam_torch(dtype, opts, rng):
    torch = pytest.importorskip("torch")
    shapes = [(5, 7), (33,)]
    values = [rand_values(s, dtype, rng) for s in shapes]
    grads = [[rand_values(s, dtype, rng) for s in shapes]
             for _ in range(STEPS)]
    decoupled = opts.get("decoupled", False)
    kwargs = dict(lr=0.01, betas=(opts.get("beta1", 0.9),
                                  opts.get("beta2", 0.999)),
                  eps=opts.get("eps", 1e-8),
                  weight_decay=opts.get("weight_decay", 0.0),
                  amsgrad=opts.get("amsgrad", False),
                  maximize=opts.get("maximize", False))
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    tparams, topt = run_torch(torch, cls, kwargs, values, grads, dtype)
    state = []
    for v in values:
        z = np.zeros(v.shape)
        state.append((tensor(v, dtype), tensor(z, dtype), tensor(z, dtype),
                      tensor(z, dtype) if opts.get("amsgrad") else None))
    for step, gs in enumerate(grads, 1):
        for (p, m, v, vmax), g in zip(state, gs):
            adam_call(p, tensor(g, dtype), m, v, vmax, step, 0.01, **opts)
    for (p, m, v, vmax), q in zip(state, tparams):
        ts = topt.state[q]
        assert_close(p, torch_value(q), dtype, **torch_tol(dtype))
        assert_close(m, torch_value(ts["exp_avg"]), dtype,
                     **torch_tol(dtype))
        assert_close(v, torch_value(ts["exp_avg_sq"]), dtype,
                     **torch_tol(dtype))
        if vmax is not None:
            assert_close(vmax, torch_value(ts["max_exp_avg_sq"]), dtype,
                         **torch_tol(dtype))


# ----------------------------------------------------------------------------
# errors, one test each


def f32(n=3):
    return tensor(np.zeros(n), "float32")


def test_sgd_negative_lr():
    with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
        sgd_call(f32(), f32(), None, -0.1, True)


def test_sgd_negative_momentum():
    with pytest.raises(ValueError, match="Invalid momentum value"):
        sgd_call(f32(), f32(), f32(), 0.1, True, momentum=-0.5)


def test_sgd_nesterov_needs_momentum():
    with pytest.raises(ValueError, match="Nesterov momentum requires a "
                                         "momentum and zero dampening"):
        sgd_call(f32(), f32(), None, 0.1, True, nesterov=True)


def test_sgd_momentum_needs_buffer():
    with pytest.raises(ValueError, match="momentum_buffer is required"):
        sgd_call(f32(), f32(), None, 0.1, True, momentum=0.9)


def test_sgd_grad_dtype_mismatch():
    with pytest.raises(RuntimeError, match=r"sgd_step_\(\): expected grad to "
                                           r"have dtype float32 \(the "
                                           r"param's\), got float16"):
        sgd_call(f32(), tensor(np.zeros(3), "float16"), None, 0.1, True)


def test_sgd_grad_shape_mismatch():
    with pytest.raises(RuntimeError, match="grad to have the shape"):
        sgd_call(f32(3), f32(4), None, 0.1, True)


def test_sgd_buffer_dtype_mismatch():
    with pytest.raises(RuntimeError, match="momentum_buffer to have dtype"):
        sgd_call(f32(), f32(), tensor(np.zeros(3), "bfloat16"), 0.1, True,
                 momentum=0.9)


def test_sgd_param_not_contiguous():
    p = tensor(np.zeros(6), "float32")[::2]
    with pytest.raises(RuntimeError, match="param must be contiguous"):
        sgd_call(p, f32(), None, 0.1, True)


def test_sgd_int_param():
    p = from_values(np.zeros(3), "int64")
    with pytest.raises(RuntimeError, match="floating-point"):
        sgd_call(p, p, None, 0.1, True)


def test_sgd_param_not_a_tensor():
    with pytest.raises(TypeError, match="'param' must be a Tensor"):
        sgd_call([0.0], f32(), None, 0.1, True)


def test_adam_bad_beta():
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        adam_call(f32(), f32(), f32(), f32(), None, 1, 0.1, beta2=1.0)


def test_adam_negative_eps():
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        adam_call(f32(), f32(), f32(), f32(), None, 1, 0.1, eps=-1.0)


def test_adam_step_zero():
    with pytest.raises(ValueError, match="must be >= 1, got 0.0"):
        adam_call(f32(), f32(), f32(), f32(), None, 0, 0.1)


def test_adam_amsgrad_needs_max_buffer():
    with pytest.raises(ValueError, match="max_exp_avg_sq is required"):
        adam_call(f32(), f32(), f32(), f32(), None, 1, 0.1, amsgrad=True)


def test_adam_state_shape_mismatch():
    with pytest.raises(RuntimeError, match="exp_avg_sq to have the shape"):
        adam_call(f32(3), f32(3), f32(3), f32(4), None, 1, 0.1)
