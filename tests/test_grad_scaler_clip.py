"""GradScaler.clip_grad_norm_: unscale_ and clip_grad_norm_ in two fused
passes, bit for bit the two calls for a power-of-two scale, against torch's
recipe, with overflow, the optimizer state machine and its errors."""
import math
import warnings

import numpy as np
import pytest

import ampc
from cuda_helpers import requires_cuda
from helpers import assert_close, to64, torch_or_skip

SHAPES = ((7, 3), (33,), (5, 1, 3), (1,))


def setup(rng, dtype=ampc.float32, scale=2.0 ** 10, device="cpu",
          shapes=SHAPES):
    """Parameters of odd sizes with scaled gradients planted directly, and
    their float64 unscaled values."""
    params, raw = [], []
    for shape in shapes:
        p = ampc.nn.Parameter(ampc.zeros(*shape, dtype=dtype, device=device))
        g = rng.uniform(-1, 1, shape).astype(np.float32)
        p.grad = ampc.tensor(g * scale).to(dtype).to(device)
        raw.append(to64(p.grad.cpu()) / scale)
        params.append(p)
    opt = ampc.optim.SGD(params, lr=0.1)
    scaler = ampc.amp.GradScaler(device, init_scale=scale)
    # creates the scale, as a loss would
    scaler.scale(ampc.ones(1, device=device))
    return params, opt, scaler, raw


@pytest.mark.filterwarnings("ignore:GradScaler. every gradient is bfloat16")
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
@pytest.mark.parametrize("dtype", [ampc.float32, ampc.bfloat16])
def test_bits_equal_unscale_then_clip(rng, norm_type, max_norm, dtype):
    seed = int(rng.integers(1 << 30))
    fused_p, fused_opt, fused_s, raw = setup(np.random.default_rng(seed),
                                             dtype)
    ref_p, ref_opt, ref_s, _ = setup(np.random.default_rng(seed), dtype)
    norm = fused_s.clip_grad_norm_(fused_opt, max_norm, norm_type)
    ref_s.unscale_(ref_opt)
    ref_norm = ampc.nn.utils.clip_grad_norm_(ref_p, max_norm, norm_type)
    assert norm.dtype is ref_norm.dtype
    assert np.array_equal(to64(norm), to64(ref_norm))
    for a, b in zip(fused_p, ref_p):
        assert np.array_equal(to64(a.grad), to64(b.grad))
    # and against float64: the true norm of the unscaled gradients
    p = math.inf if norm_type == "inf" else norm_type
    flat = np.concatenate([r.ravel() for r in raw])
    want = np.max(np.abs(flat)) if p == math.inf else \
        np.sum(np.abs(flat) ** p) ** (1 / p)
    assert_close(norm, want, dtype.name, k=len(flat))
    coef = min(1.0, max_norm / (want + 1e-6))
    for prm, r in zip(fused_p, raw):
        assert_close(prm.grad, r * coef, dtype.name, k=4)


def test_matches_torchs_recipe(rng):
    torch = torch_or_skip()
    params, opt, scaler, raw = setup(rng, scale=2.0 ** 16)
    tparams = [torch.nn.Parameter(torch.zeros(*s)) for s in SHAPES]
    for tp, p in zip(tparams, params):
        tp.grad = torch.from_numpy(p.grad.numpy().copy())
    topt = torch.optim.SGD(tparams, lr=0.1)
    tscaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    tscaler.scale(torch.ones(1))
    norm = scaler.clip_grad_norm_(opt, 0.75)
    tscaler.unscale_(topt)
    tnorm = torch.nn.utils.clip_grad_norm_(tparams, 0.75)
    assert_close(norm, tnorm.double().numpy(), "float32", k=60)
    for p, tp in zip(params, tparams):
        assert_close(p.grad, tp.grad.double().numpy(), "float32", k=4)
    scaler.step(opt)
    tscaler.step(topt)
    for p, tp in zip(params, tparams):
        assert_close(p, tp.detach().double().numpy(), "float32", k=4)


def test_an_overflow_is_found_and_the_step_skipped(rng):
    params, opt, scaler, _ = setup(rng)
    params[1].grad[4] = math.inf
    norm = scaler.clip_grad_norm_(opt, 1.0)
    assert math.isinf(norm.item())
    before = [to64(p).copy() for p in params]
    scaler.step(opt)
    scaler.update()
    for p, b in zip(params, before):
        assert np.array_equal(to64(p), b)
    stats = scaler.stats()
    assert stats["skipped_steps"] == 1 and stats["scale"] == 2.0 ** 9
    assert stats["overflow"] == {"param_group[0][1]": {"inf": 1, "nan": 0}}


def test_step_after_it_does_not_unscale_again(rng):
    params, opt, scaler, raw = setup(rng)
    scaler.clip_grad_norm_(opt, 1e6)            # no clipping: only unscale
    scaler.step(opt)
    for p, r in zip(params, raw):
        assert_close(p, -0.1 * r, "float32")


def test_after_unscale_it_is_a_plain_clip(rng):
    params, opt, scaler, raw = setup(rng)
    scaler.unscale_(opt)
    norm = scaler.clip_grad_norm_(opt, 0.5)
    flat = np.concatenate([r.ravel() for r in raw])
    want = np.sqrt(np.sum(flat ** 2))
    assert_close(norm, want, "float32", k=len(flat))
    for p, r in zip(params, raw):
        assert_close(p.grad, r * 0.5 / want, "float32", k=4)
    # and the clip-before-unscale warning stays quiet
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ampc.nn.utils.clip_grad_norm_(params, 0.5)


def test_accumulated_gradients_are_clipped_once(rng):
    w = ampc.nn.Parameter(ampc.tensor([3.0, 4.0]))
    opt = ampc.optim.SGD([w], lr=1.0)
    scaler = ampc.amp.GradScaler("cpu", init_scale=256.0)
    for _ in range(2):                           # two micro-batches
        scaler.scale((w * w).sum() / 2).backward()
    norm = scaler.clip_grad_norm_(opt, 5.0)
    assert norm.item() == pytest.approx(10.0)   # grads 2 * (3, 4)
    assert to64(w.grad).tolist() == pytest.approx([3.0, 4.0], rel=1e-6)


def test_disabled_scaler_is_plain_clip_grad_norm(rng):
    w = ampc.nn.Parameter(ampc.zeros(2, dtype=ampc.float16))
    w.grad = ampc.tensor([3.0, 4.0]).half()
    opt = ampc.optim.SGD([w], lr=1.0)
    scaler = ampc.amp.GradScaler("cpu", enabled=False)
    norm = scaler.clip_grad_norm_(opt, 1.0)
    assert norm.dtype is ampc.float16 and norm.item() == 5.0
    assert_close(w.grad, [0.6, 0.8], "float16")


def test_errors(rng):
    params, opt, scaler, _ = setup(rng)
    with pytest.raises(TypeError, match="norm_type must be a number or "
                       "'inf', got 'two'"):
        scaler.clip_grad_norm_(opt, 1.0, "two")
    scaler.clip_grad_norm_(opt, 1.0)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"clip_grad_norm_\(\) is being "
                       r"called after step\(\)"):
        scaler.clip_grad_norm_(opt, 1.0)
    fresh = ampc.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="clip_grad_norm_"):
        fresh.clip_grad_norm_(opt, 1.0)
    half = ampc.nn.Parameter(ampc.zeros(2, dtype=ampc.float16))
    half.grad = ampc.ones(2, dtype=ampc.float16)
    s = ampc.amp.GradScaler("cpu")
    s.scale(ampc.ones(1))
    with pytest.raises(ValueError, match="Attempting to unscale FP16 "
                       "gradients"):
        s.clip_grad_norm_(ampc.optim.SGD([half], lr=1.0), 1.0)


def test_no_gradients():
    w = ampc.nn.Parameter(ampc.zeros(2))
    opt = ampc.optim.SGD([w], lr=1.0)
    scaler = ampc.amp.GradScaler("cpu")
    scaler.scale(ampc.ones(1))
    assert scaler.clip_grad_norm_(opt, 1.0).item() == 0.0
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already"):
        scaler.unscale_(opt)


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_on_the_gpu_bits_of_two_calls_cpus_values_no_host_wait(rng,
                                                              max_norm):
    shapes = SHAPES + ((4096 + 3,), (3 * 4096 + 1,))   # across chunks
    seed = int(rng.integers(1 << 30))
    runs = {}
    for how, device in (("fused", "cuda"), ("two", "cuda"),
                        ("fused", "cpu")):
        params, opt, scaler, _ = setup(np.random.default_rng(seed),
                                       device=device, shapes=shapes)
        if how == "fused":
            before = ampc._C._cuda_host_reads()
            norm = scaler.clip_grad_norm_(opt, max_norm)
            if device == "cuda":
                assert ampc._C._cuda_host_reads() == before
                assert norm.device.type == "cuda"
        else:
            scaler.unscale_(opt)
            norm = ampc.nn.utils.clip_grad_norm_(params, max_norm)
        runs[how, device] = [to64(norm.cpu())] + \
            [to64(p.grad.cpu()) for p in params]
    for a, b in zip(runs["fused", "cuda"], runs["two", "cuda"]):
        assert np.array_equal(a, b)
    for a, b in zip(runs["fused", "cuda"], runs["fused", "cpu"]):
        np.testing.assert_allclose(a, b, rtol=2.0 ** -21)
