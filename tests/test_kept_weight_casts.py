"""ampc.amp.keep_weight_casts: persistent float16/bfloat16 weight copies
that autocast uses instead of casting, rewritten by the fused optimizer
steps (csrc/weight_casts.c, autocast_policy.c, cpu/optim_loops.h,
cuda/optim.cu).

Every test runs on the CPU and, marked ``cuda``, on a GPU.  The kept copy
is checked against a float64 NumPy rounding of the float32 weight, bit for
bit; a model with kept casts must give the same outputs, gradients and
training trajectory, bit for bit, as the same model without them.
"""
import gc

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import reference as ref
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import to64, torch_or_skip

C = ampc._C
LOW = ("float16", "bfloat16")


def _np(t):
    return to64(t.detach().cpu())


def _expected_cast(param, dtype):
    """float64 NumPy: the float32 weight rounded to ``dtype``."""
    return ref.round_to(_np(param), dtype)


def _same(a, b):
    return np.array_equal(_np(a), _np(b), equal_nan=True)


def _model(device, seed=0):
    ampc.manual_seed(seed)
    # odd sizes: no dimension fills a vector
    return nn.Sequential(nn.Linear(37, 29), nn.ReLU(),
                         nn.Linear(29, 11)).to(device)


def _batch(device, seed=1, rows=13):
    ampc.manual_seed(seed)
    return (ampc.randn(rows, 37).to(device),
            ampc.randint(0, 11, (rows,)).to(device))


def _loss(model, x, y, dtype, device):
    with ampc.autocast(device, dtype=dtype):
        return nn.functional.cross_entropy(model(x), y)


@pytest.fixture(autouse=True)
def _released():
    yield
    gc.collect()
    assert C._kept_weight_cast_count() == 0


@pytest.mark.parametrize("dtype", LOW)
def test_kept_cast_is_the_rounded_weight(device, dtype):
    model = _model(device)
    casts = ampc.amp.keep_weight_casts(model, dtype=getattr(ampc, dtype))
    assert len(casts) == 4 and casts.names == [
        "0.weight", "0.bias", "2.weight", "2.bias"]
    for p in model.parameters():
        k = C._kept_weight_cast(p)
        assert k.dtype == getattr(ampc, dtype) and k.device == p.device
        assert tuple(k.shape) == tuple(p.shape)
        np.testing.assert_array_equal(_np(k), _expected_cast(p, dtype))
    n = sum(p.numel() for p in model.parameters())
    assert casts.nbytes == 2 * n
    assert casts.by_device == {str(model[0].weight.device): 2 * n}
    assert repr(casts) == f"KeptWeightCasts({dtype}, 4 tensors, {2 * n} bytes)"
    casts.release()
    assert len(casts) == 0 and C._kept_weight_cast(model[0].weight) is None


@pytest.mark.parametrize("dtype", LOW)
def test_forward_and_grads_equal_the_cast_path(device, dtype):
    dt = getattr(ampc, dtype)
    plain, kept = _model(device), _model(device)
    x, y = _batch(device)
    ampc.amp.keep_weight_casts(kept, dtype=dt)
    with ampc.autocast(device, dtype=dt):
        out_p = plain(x)
        out_k = kept(x)
        # the weights were not cast: the region's cache holds views of the
        # kept copies
        ptrs = {C._kept_weight_cast(p).data_ptr() for p in kept.parameters()}
        cached = [t for t in C._autocast_cache_tensors()
                  if t.data_ptr() in ptrs]
        assert len(cached) == 4
        loss_p = nn.functional.cross_entropy(out_p, y)
        loss_k = nn.functional.cross_entropy(out_k, y)
    assert out_k.dtype == dt and _same(out_p, out_k)
    loss_p.backward()
    loss_k.backward()
    for a, b in zip(plain.parameters(), kept.parameters()):
        assert b.grad.dtype == ampc.float32
        assert _same(a.grad, b.grad)


OPTIMIZERS = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, foreach=False)),
    ("SGD", dict(lr=0.05, momentum=0.9, fused=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, foreach=False)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, fused=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=0.01, foreach=False)),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01)),
    ("Adagrad", dict(lr=0.05, fused=True)),
]


@pytest.mark.parametrize("name,kw", OPTIMIZERS,
                         ids=[f"{n}-{'-'.join(k)}" for n, k in OPTIMIZERS])
@pytest.mark.parametrize("dtype", LOW)
def test_optimizer_step_rewrites_the_kept_cast(device, cpu_level, name, kw,
                                               dtype):
    model = _model(device)
    opt = getattr(ampc.optim, name)(model.parameters(), **kw)
    ampc.amp.keep_weight_casts(opt, dtype=getattr(ampc, dtype))
    x, y = _batch(device)
    for _ in range(3):
        opt.zero_grad()
        _loss(model, x, y, getattr(ampc, dtype), device).backward()
        opt.step()
        for p in model.parameters():
            # written by the step itself: fresh, so never cast again
            assert C._kept_weight_cast_is_fresh(p) is True
            k = C._kept_weight_cast(p)
            np.testing.assert_array_equal(_np(k), _expected_cast(p, dtype))


def _train(model, opt, scaler, device, dtype, steps, bad_step):
    x, y = _batch(device)
    skipped = []
    for i in range(steps):
        opt.zero_grad()
        xi = x * float("inf") if i == bad_step else x
        loss = _loss(model, xi, y, dtype, device)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        skipped.append(scaler.stats()["last_step_skipped"])
    return skipped


TRAJECTORY_OPTIMIZERS = [
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, fused=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, fused=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("Adagrad", dict(lr=0.05, fused=True)),
]


@pytest.mark.parametrize("name,kw", TRAJECTORY_OPTIMIZERS,
                         ids=[f"{n}-{'-'.join(k)}"
                              for n, k in TRAJECTORY_OPTIMIZERS])
@pytest.mark.parametrize("dtype", LOW)
def test_training_trajectory_is_unchanged(device, cpu_level, dtype, name,
                                          kw):
    """GradScaler loop with a skipped (overflowing) step: the kept casts
    change nothing but where the 16-bit weights come from."""
    dt = getattr(ampc, dtype)
    runs = []
    for keep in (False, True):
        model = _model(device)
        opt = getattr(ampc.optim, name)(model.parameters(), **kw)
        if keep:
            ampc.amp.keep_weight_casts(model, dtype=dt)
        scaler = ampc.amp.GradScaler(device, init_scale=256.0,
                                     enabled=dtype == "float16")
        skipped = _train(model, opt, scaler, device, dt, 5,
                         2 if dtype == "float16" else None)
        runs.append((model, skipped))
    (plain, s0), (kept, s1) = runs
    assert s0 == s1
    if dtype == "float16":
        assert s0[2] is True
    for a, b in zip(plain.parameters(), kept.parameters()):
        assert _same(a, b)
        # kept fresh by the steps themselves, skipped one included
        assert C._kept_weight_cast_is_fresh(b) is True
        np.testing.assert_array_equal(_np(C._kept_weight_cast(b)),
                                      _expected_cast(b, dtype))


@pytest.mark.parametrize("dtype", LOW)
def test_other_writes_make_it_stale_and_it_is_cast_again(device, dtype):
    dt = getattr(ampc, dtype)
    model = _model(device)
    ampc.amp.keep_weight_casts(model, dtype=dt)
    x, _ = _batch(device)
    w = model[0].weight
    with ampc.no_grad():
        w.mul_(2.0)                                   # an in-place write
    assert C._kept_weight_cast_is_fresh(w) is False
    reference = _model(device)
    with ampc.no_grad():
        reference[0].weight.mul_(2.0)
    with ampc.autocast(device, dtype=dt):
        assert _same(model(x), reference(x))
    assert C._kept_weight_cast_is_fresh(w) is True

    reference.load_state_dict(_model(device, seed=5).state_dict())
    model.load_state_dict(_model(device, seed=5).state_dict())
    assert C._kept_weight_cast_is_fresh(w) is False
    with ampc.autocast(device, dtype=dt):
        assert _same(model(x), reference(x))

    # a new .data of another shape: a new copy of that shape
    old = C._kept_weight_cast(w)
    w.data = ampc.randn(29, 37).to(device)[:, :36].contiguous()
    assert C._kept_weight_cast_is_fresh(w) is False
    ampc.amp.keep_weight_casts([w], dtype=dt)          # brings it up to date
    k = C._kept_weight_cast(w)
    assert k is not old and tuple(k.shape) == (29, 36)
    np.testing.assert_array_equal(_np(k), _expected_cast(w, dtype))


def test_a_transposed_data_of_the_same_shape_is_stale(device):
    lin = nn.Linear(8, 8).to(device)
    ampc.amp.keep_weight_casts(lin, dtype=ampc.float16)
    w = lin.weight
    # same storage, data pointer, version and shape: only the strides tell
    w.data = w.detach().t()
    assert C._kept_weight_cast_is_fresh(w) is False
    x = ampc.randn(3, 8).to(device)
    with ampc.autocast(device, dtype=ampc.float16):
        out = lin(x)
    plain = nn.Linear(8, 8).to(device)
    plain.load_state_dict(lin.state_dict())
    with ampc.autocast(device, dtype=ampc.float16):
        assert _same(out, plain(x))


def _zero_kept(model):
    """Zeroes the kept copies behind autocast's back (their weights'
    versions do not change): an output that uses them shows it."""
    for p in model.parameters():
        C._kept_weight_cast(p).zero_()


@pytest.mark.parametrize("dtype", LOW)
def test_autocast_of_another_dtype_casts_as_usual(device, dtype):
    other = ampc.bfloat16 if dtype == "float16" else ampc.float16
    model, plain = _model(device), _model(device)
    ampc.amp.keep_weight_casts(model, dtype=getattr(ampc, dtype))
    _zero_kept(model)
    x, _ = _batch(device)
    with ampc.autocast(device, dtype=other):
        out = model(x)
        assert out.dtype == other and _same(out, plain(x))


def test_frozen_weights_and_no_grad_use_the_kept_cast(device):
    model, plain = _model(device), _model(device)
    for p in model.parameters():
        p.requires_grad_(False)
    casts = ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
    assert len(casts) == 4
    x, _ = _batch(device)
    with ampc.no_grad(), ampc.autocast(device, dtype=ampc.float16):
        assert _same(model(x), plain(x))
    with ampc.autocast(device, dtype=ampc.float16):
        out, expected = model(x), plain(x)
    assert not out.requires_grad and _same(out, expected)
    _zero_kept(model)                   # the copies are what is read
    with ampc.no_grad(), ampc.autocast(device, dtype=ampc.float16):
        assert not _np(model(x)).any()
    with ampc.autocast(device, dtype=ampc.float16):
        assert not _np(model(x)).any()


def test_a_large_step_without_the_gil_writes_the_copy(device):
    """Above 65536 elements the CPU step runs without the GIL."""
    lin = nn.Linear(301, 300).to(device)
    opt = ampc.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    ampc.amp.keep_weight_casts(lin, dtype=ampc.bfloat16)
    x = ampc.randn(5, 301).to(device)
    for _ in range(2):
        opt.zero_grad()
        with ampc.autocast(device, dtype=ampc.bfloat16):
            lin(x).float().sum().backward()
        opt.step()
    assert C._kept_weight_cast_is_fresh(lin.weight) is True
    np.testing.assert_array_equal(_np(C._kept_weight_cast(lin.weight)),
                                  _expected_cast(lin.weight, "bfloat16"))


def test_more_parameters_than_one_launch_takes(device):
    """130 parameters: a CUDA step takes two launches of 128."""
    model = nn.Sequential(*[nn.Linear(3, 3) for _ in range(65)]).to(device)
    opt = ampc.optim.SGD(model.parameters(), lr=0.01, fused=True)
    ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
    x = ampc.randn(2, 3).to(device)
    with ampc.autocast(device, dtype=ampc.float16):
        model(x).float().sum().backward()
    opt.step()
    for p in model.parameters():
        assert C._kept_weight_cast_is_fresh(p) is True
        np.testing.assert_array_equal(_np(C._kept_weight_cast(p)),
                                      _expected_cast(p, "float16"))


def test_half_after_keeping_frees_the_float32_weights(device):
    model = nn.Linear(256, 128).to(device)
    ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
    before = ampc.memory_allocated(device)
    model.half()
    gc.collect()
    freed = before - ampc.memory_allocated(device)
    # the float32 weights (4 bytes each) gave way to float16 ones (2 each)
    assert freed >= 2 * (256 * 128 + 128)
    with ampc.autocast(device, dtype=ampc.float16):
        out = model(ampc.randn(2, 256).to(device).half())
    assert out.dtype == ampc.float16


def test_cache_info_does_not_count_the_kept_copies(device):
    model = _model(device)
    ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
    x, _ = _batch(device)
    with ampc.autocast(device, dtype=ampc.float16):
        model(x)
        assert ampc.amp.autocast_cache_info().entries == 0


def test_a_step_between_forward_and_backward_is_refused(device):
    model = _model(device)
    opt = ampc.optim.SGD(model.parameters(), lr=0.1)
    ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
    x, y = _batch(device)
    _loss(model, x, y, ampc.float16, device).backward()
    loss = _loss(model, x, y, ampc.float16, device)
    opt.step()      # rewrites the copies that loss's graph saved
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        loss.backward()


def test_lifetime_release_and_with_block(device):
    model = _model(device)
    with ampc.amp.keep_weight_casts(model, dtype=ampc.float16) as casts:
        assert C._kept_weight_cast_count() == 4
    assert C._kept_weight_cast_count() == 0 and len(casts) == 0
    x, _ = _batch(device)
    with ampc.autocast(device, dtype=ampc.float16):
        model(x)
        assert len(C._autocast_cache_tensors()) == 4     # cast again
    ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
    # the casts live while the weights do, not while the handle does
    assert C._kept_weight_cast_count() == 4
    del model
    gc.collect()
    assert C._kept_weight_cast_count() == 0


def test_default_dtype_is_the_autocast_dtype(device):
    model = _model(device)
    casts = ampc.amp.keep_weight_casts(model.parameters())
    assert casts.dtype == ampc.get_autocast_dtype(device)
    assert casts.names[0] == "params[0]"
    casts.release()


def test_bad_arguments():
    model = _model("cpu")
    with pytest.raises(ValueError, match=r"keep_weight_casts\(\): dtype "
                                         r"must be ampc.float16 or "
                                         r"ampc.bfloat16.*float32"):
        ampc.amp.keep_weight_casts(model, dtype=ampc.float32)
    with pytest.raises(ValueError, match="no float32 weight among the 4"):
        ampc.amp.keep_weight_casts(_model("cpu").half())
    with pytest.raises(TypeError, match="wrap a single tensor in a list"):
        ampc.amp.keep_weight_casts(model[0].weight)
    with pytest.raises(TypeError, match=r"params\[1\] is a int"):
        ampc.amp.keep_weight_casts([model[0].weight, 3])
    with pytest.raises(TypeError, match="not int"):
        ampc.amp.keep_weight_casts(3)
    ampc.amp.keep_weight_casts([model[2].weight], dtype=ampc.float16)
    with pytest.raises(RuntimeError, match="already keeps an ampc.float16 "
                                           "cast; release"):
        ampc.amp.keep_weight_casts(model, dtype=ampc.bfloat16)
    # all or nothing: the weights before 2.weight were not kept either
    assert C._kept_weight_cast(model[0].weight) is None
    assert C._kept_weight_cast_count() == 1
    with pytest.raises(ValueError, match="float32 leaf tensor that is not "
                                         "a view"):
        C._keep_weight_cast(model[0].weight[0], ampc.float16)


def test_matches_torch_autocast():
    torch = torch_or_skip()
    model = _model("cpu")
    ampc.amp.keep_weight_casts(model, dtype=ampc.bfloat16)
    tm = torch.nn.Sequential(torch.nn.Linear(37, 29), torch.nn.ReLU(),
                             torch.nn.Linear(29, 11))
    with torch.no_grad():
        for a, b in zip(model.parameters(), tm.parameters()):
            b.copy_(torch.from_numpy(a.detach().numpy()))
    x, _ = _batch("cpu")
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        out = model(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t_out = tm(torch.from_numpy(x.numpy()))
    np.testing.assert_allclose(_np(out), t_out.double().detach().numpy(),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_replays_write_the_copies_and_keep_them_alive():
    model = _model("cuda")
    opt = ampc.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                         fused=True)
    casts = ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
    scaler = ampc.amp.GradScaler("cuda", init_scale=256.0)
    x, y = _batch("cuda")

    def body():
        with ampc.autocast("cuda", dtype=ampc.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        body()
    opt.zero_grad(set_to_none=True)
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        body()
    for _ in range(3):
        g.replay()
    ampc.cuda.synchronize()
    for p in model.parameters():
        # written by the replayed step, though no version saw it
        assert C._kept_weight_cast_is_fresh(p) is False
        np.testing.assert_array_equal(_np(C._kept_weight_cast(p)),
                                      _expected_cast(p, "float16"))
    casts.release()
    g.replay()              # the graph holds the copies it was captured with
    ampc.cuda.synchronize()
    del g
