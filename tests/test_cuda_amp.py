"""AMP on CUDA: GradScaler("cuda") scenario sequences against
GradScaler("cpu") and torch.amp.GradScaler("cuda"); the number of host
syncs per training step; autocast("cuda")'s policy against torch.  The
kernels underneath (unscale, scale update, gradient norm) are
tests/test_cuda_amp_kernels.py.  Each GPU test is marked ``cuda`` and skips
without a GPU.
"""
import math
import pickle
import random
import warnings

import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import requires_cuda, torch_cuda
from helpers import to64

C = ampc._C
# elements per block of the CUDA unscale kernel (cuda/amp.cu)
CHUNK = 16384


@pytest.fixture(autouse=True)
def _quiet():
    """GradScaler's diagnostics warn once per scaler; tests that check
    them use pytest.warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


# ----------------------------------------------------------------------------
# GradScaler("cuda")


def _make_world(kind, init, momentum, hp, torch=None):
    """(params, optimizer, scaler, tensor factory) of one side of a
    comparison: "cpu" and "cuda" are ampc, "torch" is torch on the GPU."""
    if kind == "torch":
        ps = [torch.nn.Parameter(torch.tensor(v, device="cuda"))
              for v in init]
        opt = torch.optim.SGD(ps, lr=0.01, momentum=momentum)
        sc = torch.amp.GradScaler("cuda", **hp)

        def mk(a):
            return torch.tensor(a, dtype=torch.float32, device="cuda")
        return ps, opt, sc, mk, torch
    ps = [ampc.nn.Parameter(ampc.tensor(v).to(kind)) for v in init]
    opt = ampc.optim.SGD(ps, lr=0.01, momentum=momentum)
    sc = ampc.amp.GradScaler(kind if kind == "cpu" else "cuda", **hp)

    def mk(a):
        return ampc.tensor(a, dtype=ampc.float32).to(kind)
    return ps, opt, sc, mk, ampc


def _call(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:          # noqa: BLE001 (compared by type/text)
        return None, e


def _arr(t):
    t = t.detach()
    return np.asarray(t.cpu().numpy(), dtype=np.float64)


SHAPES = [(3, 4), (5,), (1,), (2, 3, 2)]
OPS = ("iteration", "scale", "backward", "unscale_", "step", "update",
       "zero_grad", "new_scale", "reload")
WEIGHTS = (6, 2, 3, 1, 3, 3, 2, 0.4, 0.6)
ITERATION = (("zero_grad", "scale", "backward", "step", "update"),
             ("zero_grad", "scale", "backward", "unscale_", "step",
              "update"))


@pytest.mark.cuda
@requires_cuda
def test_grad_scaler_cuda_random_sequences_match_cpu_and_torch():
    """tests/test_grad_scaler.py's 300 random scenario sequences, run by
    GradScaler("cuda") beside GradScaler("cpu") (itself checked against
    torch there) and torch.amp.GradScaler("cuda") where importable."""
    try:
        torch = torch_cuda()
    except pytest.skip.Exception:
        torch = None
    kinds = ["cpu", "cuda"] + (["torch"] if torch is not None else [])
    rng = random.Random(1234)
    nprng = np.random.default_rng(1234)
    for seq in range(300):
        hp = dict(init_scale=2.0 ** rng.randint(-2, 20),
                  growth_factor=rng.choice([2.0, 1.5, 4.0]),
                  backoff_factor=rng.choice([0.5, 0.25, 0.9]),
                  growth_interval=rng.choice([1, 2, 3, 5]))
        momentum = rng.choice([0.0, 0.9])
        init = [nprng.standard_normal(s).astype(np.float32) for s in SHAPES]
        worlds = {k: list(_make_world(k, init, momentum, hp, torch))
                  for k in kinds}
        ops = ["scale"]
        for _ in range(rng.randint(4, 12)):
            op = rng.choices(OPS, WEIGHTS)[0]
            ops += rng.choice(ITERATION) if op == "iteration" else [op]
        for step, op in enumerate(ops):
            what = f"sequence {seq} step {step} {op}"
            outcome = {}
            if op == "backward":
                scale = worlds["cpu"][2].get_scale() \
                    if worlds["cpu"][2]._scale is not None else 1.0
                grads = []
                for p in worlds["cpu"][0]:
                    if rng.random() < 0.15:
                        grads.append(None)
                        continue
                    g = (nprng.standard_normal(p.shape) *
                         np.float32(scale)).astype(np.float32)
                    if rng.random() < 0.15:
                        g.reshape(-1)[rng.randrange(g.size)] = rng.choice(
                            [np.inf, -np.inf, np.nan])
                    grads.append(g)
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    for p, g in zip(ps, grads):
                        if g is None:
                            continue
                        if p.grad is None:
                            p.grad = mk(g)
                        else:
                            with lib.no_grad():
                                p.grad.add_(mk(g))
            elif op == "scale":
                loss = float(nprng.standard_normal())
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(sc.scale, mk(loss))
            elif op in ("unscale_", "step"):
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(getattr(sc, op), opt)
            elif op == "update":
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(sc.update)
            elif op == "new_scale":
                ns = float(2.0 ** rng.randint(-3, 12))
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    outcome[k] = _call(sc.update, ns)
            elif op == "zero_grad":
                for k, (ps, opt, sc, mk, lib) in worlds.items():
                    opt.zero_grad()
            elif op == "reload" and \
                    len(worlds["cpu"][2]._per_optimizer_states) == 0:
                for k, w in worlds.items():
                    cls = torch.amp.GradScaler if k == "torch" else \
                        ampc.amp.GradScaler
                    s2 = cls("cpu" if k == "cpu" else "cuda")
                    s2.load_state_dict(w[2].state_dict())
                    w[2] = pickle.loads(pickle.dumps(s2))
            if outcome:
                ra, ea = outcome["cpu"]
                for k, (r, e) in outcome.items():
                    assert type(e) is type(ea), f"{what}: {k} {e!r} vs {ea!r}"
                    if e is not None:
                        assert str(e).startswith(str(ea)) or \
                            str(ea).startswith(str(e)), f"{what}: {k} {e}"
                    if op == "scale" and e is None:
                        assert r.item() == ra.item(), f"{what}: {k}"
                        if k == "cuda":
                            assert r.device.type == "cuda", what
                    if op in ("unscale_", "step"):
                        assert (r is None) == (ra is None), f"{what}: {k}"
            ref_sc = worlds["cpu"][2]
            for k, (ps, opt, sc, mk, lib) in worlds.items():
                assert sc.get_scale() == ref_sc.get_scale(), f"{what}: {k}"
                assert sc._get_growth_tracker() == \
                    ref_sc._get_growth_tracker(), f"{what}: {k}"
                assert sc.state_dict() == ref_sc.state_dict(), f"{what}: {k}"
                for p, pc in zip(ps, worlds["cpu"][0]):
                    np.testing.assert_allclose(
                        _arr(p), _arr(pc), rtol=1e-6, atol=1e-7,
                        err_msg=f"{what}: {k}")
                    if pc.grad is None:
                        assert p.grad is None, f"{what}: {k}"
                    else:
                        np.testing.assert_array_equal(
                            _arr(p.grad), _arr(pc.grad),
                            err_msg=f"{what}: {k}")
            cuda_sc = worlds["cuda"][2]
            if cuda_sc._scale is not None:
                assert cuda_sc._scale.device.type == "cuda", what
                assert cuda_sc._growth_tracker.device.type == "cuda", what


def _tiny_model(dev, seed=0):
    ampc.manual_seed(seed)
    model = ampc.nn.Sequential(ampc.nn.Linear(16, 32), ampc.nn.ReLU(),
                               ampc.nn.Linear(32, 4)).to(dev)
    rng = np.random.default_rng(seed)
    x = ampc.tensor(rng.standard_normal((8, 16)).astype(np.float32)).to(dev)
    y = ampc.tensor(rng.standard_normal((8, 4)).astype(np.float32)).to(dev)
    return model, x, y


def _train(dev, steps, fused=False, poison=(), reads=None, **bounds):
    """SGD with a GradScaler on dev; the gradient of the first parameter
    is poisoned with inf at the steps in `poison`; reads: a list that gets
    each step's host-read count; bounds: min_scale, max_scale."""
    model, x, y = _tiny_model(dev)
    kw = {"fused": True} if fused else {}
    opt = ampc.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **kw)
    scaler = ampc.amp.GradScaler("cuda" if dev == "cuda" else "cpu",
                                 init_scale=2.0 ** 10, growth_interval=2,
                                 **bounds)
    first = next(iter(model.parameters()))
    for i in range(steps):
        before = C._cuda_host_reads()
        opt.zero_grad()
        out = model(x)
        loss = ((out - y) * (out - y)).mean()
        scaler.scale(loss).backward()
        if i in poison:
            with ampc.no_grad():
                first.grad.mul_(float("inf"))
        scaler.step(opt)
        scaler.update()
        if reads is not None:
            reads.append(C._cuda_host_reads() - before)
    return model, scaler


@pytest.mark.cuda
@requires_cuda
def test_grad_scaler_training_on_cuda_matches_cpu():
    poison = (2, 5)
    mc, sc = _train("cpu", 8, poison=poison)
    mg, sg = _train("cuda", 8, poison=poison)
    assert sg.get_scale() == sc.get_scale()
    assert sg._get_growth_tracker() == sc._get_growth_tracker()
    for a, b in zip(mg.parameters(), mc.parameters()):
        np.testing.assert_allclose(_arr(a), _arr(b), rtol=1e-4, atol=1e-5)
    st_g, st_c = sg.stats(), sc.stats()
    for key in ("steps", "skipped_steps", "last_step_skipped", "scale",
                "growth_tracker"):
        assert st_g[key] == st_c[key], key
    assert st_g["skipped_steps"] == len(poison)


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("fused", [False, True])
def test_scale_bounds_on_cuda_match_cpu_without_a_sync(fused):
    """min_scale/max_scale clamp on the device: the same scales as the
    CPU, and no host read beyond the unbounded scaler's."""
    bounds = dict(min_scale=2.0 ** 9, max_scale=2.0 ** 11)
    poison = (3, 4, 5)
    _, sc = _train("cpu", 10, poison=poison, **bounds)
    reads = []
    _, sg = _train("cuda", 10, fused=fused, poison=poison, reads=reads,
                   **bounds)
    assert sg.get_scale() == sc.get_scale()
    plain = []
    _train("cuda", 10, fused=fused, poison=poison, reads=plain)
    assert reads == plain


@pytest.mark.cuda
@requires_cuda
def test_one_host_sync_per_step_and_none_with_a_fused_optimizer():
    reads = []
    _train("cuda", 6, reads=reads)
    # the first step creates the scale on the device (no read either)
    assert reads[1:] == [1] * 5, reads
    try:
        ampc.optim.SGD([ampc.nn.Parameter(ampc.ones(1))], lr=0.1,
                       fused=True)
    except TypeError:
        pytest.skip("ampc.optim.SGD has no fused=True yet")
    reads = []
    _, scaler = _train("cuda", 6, fused=True, poison=(3,), reads=reads)
    assert reads[1:] == [0] * 5, reads
    before = C._cuda_host_reads()
    st = scaler.stats()
    assert C._cuda_host_reads() > before       # stats() reads on demand
    assert st["skipped_steps"] == 1 and st["steps"] == 6


@pytest.mark.cuda
@requires_cuda
def test_fused_optimizer_matches_the_synced_path():
    try:
        ampc.optim.SGD([ampc.nn.Parameter(ampc.ones(1))], lr=0.1,
                       fused=True)
    except TypeError:
        pytest.skip("ampc.optim.SGD has no fused=True yet")
    poison = (1, 4)
    ma, sa = _train("cuda", 7, poison=poison)
    mb, sb = _train("cuda", 7, fused=True, poison=poison)
    assert sa.get_scale() == sb.get_scale()
    assert sa._get_growth_tracker() == sb._get_growth_tracker()
    for a, b in zip(ma.parameters(), mb.parameters()):
        np.testing.assert_allclose(_arr(a), _arr(b), rtol=1e-5, atol=1e-6)
    assert sb.stats()["skipped_steps"] == sa.stats()["skipped_steps"] == 2


def test_fused_optimizer_stats_on_the_cpu():
    # The device-side skip path on the CPU: same scale, tracker, weights
    # and skip counts as the synced path.
    poison = (1, 4)
    ma, sa = _train("cpu", 7, poison=poison)
    mb, sb = _train("cpu", 7, fused=True, poison=poison)
    assert sa.get_scale() == sb.get_scale()
    assert sa._get_growth_tracker() == sb._get_growth_tracker()
    for a, b in zip(ma.parameters(), mb.parameters()):
        np.testing.assert_allclose(_arr(a), _arr(b), rtol=1e-5, atol=1e-6)
    for key in ("steps", "skipped_steps", "last_step_skipped"):
        assert sb.stats()[key] == sa.stats()[key], key
    assert sb.stats()["skipped_steps"] == 2


@pytest.mark.cuda
@requires_cuda
def test_stats_counts_on_cuda_match_cpu():
    rng = np.random.default_rng(12)
    shapes = [(40, 3), (7,), (CHUNK + 2,)]
    vals = [ref.round_to(rng.standard_normal(s) * 2.0 ** rng.integers(
        -40, 10, s), "float32") for s in shapes]
    vals[1][3] = np.inf
    vals[2][-1] = np.nan
    stats = []
    for dev in ("cpu", "cuda"):
        ps = [ampc.nn.Parameter(ampc.zeros(*s, device=dev)) for s in shapes]
        opt = ampc.optim.SGD(ps, lr=0.1)
        s = ampc.amp.GradScaler(dev, init_scale=2.0 ** 20)
        s.scale(ps[0].sum() * 0.0)
        for p, v in zip(ps, vals):
            p.grad = ampc.tensor(v).to(dev)
        s.step(opt)
        s.update()
        stats.append(s.stats())
    assert stats[1] == stats[0]
    assert set(stats[1]["overflow"]) == {"param_group[0][1]",
                                         "param_group[0][2]"}


@pytest.mark.cuda
@requires_cuda
def test_scaler_state_lives_on_the_device():
    s = ampc.amp.GradScaler("cuda", init_scale=8.0)
    w = ampc.nn.Parameter(ampc.ones(3, device="cuda"))
    opt = ampc.optim.SGD([w], lr=0.5)
    out = s.scale((w * w).sum())
    assert out.device.type == "cuda" and out.item() == 24.0
    assert s._scale.device.type == "cuda"
    assert s._growth_tracker.device.type == "cuda"
    out.backward()
    s.unscale_(opt)
    found = s._found_inf_per_device(opt)
    assert [k.type for k in found] == ["cuda"]
    assert all(v.device.type == "cuda" for v in found.values())
    assert w.grad.cpu().tolist() == [2.0, 2.0, 2.0]
    s.step(opt)
    s.update(new_scale=ampc.tensor(4.0, device="cuda"))
    assert s.get_scale() == 4.0
    s.update(new_scale=2.0)
    assert s.get_scale() == 2.0
    s.load_state_dict({"scale": 16.0, "growth_factor": 2.0,
                       "backoff_factor": 0.5, "growth_interval": 5,
                       "_growth_tracker": 3})
    assert s.get_scale() == 16.0 and s._get_growth_tracker() == 3
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.get_scale() == 16.0 and s2._scale is None


# ----------------------------------------------------------------------------
# autocast("cuda")


def _inputs(dev, seed=0):
    rng = np.random.default_rng(seed)
    arrays = dict(
        x=rng.standard_normal((4, 3, 6, 6)).astype(np.float32),
        w=rng.standard_normal((5, 3, 3, 3)).astype(np.float32),
        a=rng.standard_normal((4, 7)).astype(np.float32),
        lw=rng.standard_normal((5, 7)).astype(np.float32),
        target=rng.integers(0, 5, 4))
    return {k: ampc.tensor(v).to(dev) for k, v in arrays.items()}, arrays


def _op_cases():
    """(name, fn(module, functional, tensors)) per op."""
    return [
        ("conv2d", lambda m, f, t: f.conv2d(t["x"], t["w"], padding=1)),
        ("linear", lambda m, f, t: f.linear(t["a"], t["lw"])),
        ("matmul", lambda m, f, t: m.matmul(t["a"], t["lw"].t())),
        ("@", lambda m, f, t: t["a"] @ t["lw"].t()),
        ("relu after linear",
         lambda m, f, t: f.relu(f.linear(t["a"], t["lw"]))),
        ("cross_entropy", lambda m, f, t: f.cross_entropy(
            f.linear(t["a"], t["lw"]), t["target"])),
        ("mse_loss", lambda m, f, t: f.mse_loss(
            f.linear(t["a"], t["lw"]), t["a"][:, :5])),
        ("softmax", lambda m, f, t: f.softmax(f.linear(t["a"], t["lw"]), 1)),
        ("log_softmax", lambda m, f, t: f.log_softmax(t["a"].half(), 1)),
        ("sum", lambda m, f, t: t["a"].half().sum()),
        ("exp", lambda m, f, t: t["a"].half().exp()),
        ("cat", lambda m, f, t: m.cat([t["a"], t["a"].half()])),
        ("stack", lambda m, f, t: m.stack([t["a"], t["a"]])),
        ("add mixed", lambda m, f, t: t["a"].half() + t["a"]),
        ("max_pool2d", lambda m, f, t: f.max_pool2d(
            f.conv2d(t["x"], t["w"], padding=1), 2)),
    ]


# amp_semantics.md section 3.8: softmax, log_softmax, sum, exp in float32
# on CUDA (in the input dtype on the CPU); cat/stack by built-in promotion
EXPECTED_CUDA_DTYPES = {
    "conv2d": "low", "linear": "low", "matmul": "low", "@": "low",
    "relu after linear": "low", "cross_entropy": "float32",
    "mse_loss": "float32", "softmax": "float32", "log_softmax": "float32",
    "sum": "float32", "exp": "float32", "cat": "float32",
    "stack": "float32", "add mixed": "float32", "max_pool2d": "low",
}


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,fn", _op_cases(),
                         ids=[name for name, _ in _op_cases()])
def test_cuda_output_dtypes(name, fn, low):
    t, _ = _inputs("cuda")
    with ampc.autocast("cuda", dtype=getattr(ampc, low)):
        out = fn(ampc, F, t)
    want = EXPECTED_CUDA_DTYPES[name]
    assert out.device.type == "cuda"
    assert out.dtype is getattr(ampc, low if want == "low" else want)


@pytest.mark.cuda
@requires_cuda
def test_cuda_default_dtype_is_float16():
    t, _ = _inputs("cuda")
    with ampc.autocast("cuda"):
        assert ampc.get_autocast_dtype("cuda") is ampc.float16
        assert F.linear(t["a"], t["lw"]).dtype is ampc.float16


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,fn", _op_cases(),
                         ids=[name for name, _ in _op_cases()])
def test_cuda_output_dtypes_and_values_match_torch(name, fn, low):
    torch = torch_cuda()
    import torch.nn.functional as TF
    ours, arrays = _inputs("cuda")
    theirs = {k: torch.tensor(v, device="cuda") for k, v in arrays.items()}
    with ampc.autocast("cuda", dtype=getattr(ampc, low)):
        out = fn(ampc, F, ours)
    with torch.autocast("cuda", dtype=getattr(torch, low)):
        want = fn(torch, TF, theirs)
    assert str(out.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    tol = {"float16": 1e-2, "bfloat16": 6e-2}[low]
    np.testing.assert_allclose(
        to64(out.detach().cpu()), want.detach().double().cpu().numpy(),
        rtol=tol, atol=tol)


@pytest.mark.cuda
@requires_cuda
def test_autocast_result_equals_manual_cast_on_cuda():
    t, _ = _inputs("cuda", 3)
    with ampc.autocast("cuda"):
        auto = F.linear(t["a"], t["lw"])
    manual = F.linear(t["a"].half(), t["lw"].half())
    np.testing.assert_array_equal(to64(auto.cpu()), to64(manual.cpu()))


@pytest.mark.cuda
@requires_cuda
def test_each_device_type_autocasts_only_its_own_tensors():
    tg, _ = _inputs("cuda", 1)
    tc, _ = _inputs("cpu", 1)
    with ampc.autocast("cpu"):
        assert F.linear(tg["a"], tg["lw"]).dtype is ampc.float32
        assert F.linear(tc["a"], tc["lw"]).dtype is ampc.bfloat16
    with ampc.autocast("cuda"):
        assert F.linear(tc["a"], tc["lw"]).dtype is ampc.float32
        assert F.linear(tg["a"], tg["lw"]).dtype is ampc.float16
        assert F.softmax(tc["a"].half(), 1).dtype is ampc.float16
    with ampc.autocast("cuda"), ampc.autocast("cpu"):
        assert F.linear(tg["a"], tg["lw"]).dtype is ampc.float16
        assert F.linear(tc["a"], tc["lw"]).dtype is ampc.bfloat16


@pytest.mark.cuda
@requires_cuda
def test_weight_cast_cache_on_cuda():
    t, _ = _inputs("cuda", 4)
    lw = t["lw"].requires_grad_()
    with ampc.autocast("cuda"):
        y1 = F.linear(t["a"], lw)
        assert C._autocast_cache_size() == 1
        y2 = F.linear(t["a"], lw)
        assert C._autocast_cache_size() == 1
        assert y1.device.type == y2.device.type == "cuda"
    assert C._autocast_cache_size() == 0
    (y1.float().sum() + y2.float().sum()).backward()
    assert lw.grad.dtype is ampc.float32 and lw.grad.device.type == "cuda"
    with ampc.autocast("cuda"):
        ref_out = F.linear(t["a"], lw.detach())
    np.testing.assert_array_equal(to64(y1.detach().cpu()),
                                  to64(ref_out.cpu()))


@pytest.mark.cuda
@requires_cuda
def test_amp_training_step_on_cuda_with_autocast_and_scaler():
    """A few fp16 autocast steps with GradScaler("cuda"): the loss falls,
    nothing is NaN, the master weights stay float32 on the device."""
    model, x, y = _tiny_model("cuda", 3)
    opt = ampc.optim.SGD(model.parameters(), lr=0.05)
    scaler = ampc.amp.GradScaler("cuda")
    losses = []
    for _ in range(20):
        opt.zero_grad()
        with ampc.autocast("cuda"):
            out = model(x)
            loss = F.mse_loss(out, y)
        assert out.dtype is ampc.float16 and loss.dtype is ampc.float32
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]
    for p in model.parameters():
        assert p.dtype is ampc.float32 and p.device.type == "cuda"


@pytest.mark.cuda
@requires_cuda
def test_testing_helpers_on_cuda_gradients():
    w = ampc.nn.Parameter(ampc.zeros(2, 3, device="cuda"))
    v = ampc.nn.Parameter(ampc.zeros(4))
    (w.sum() + v.sum()).backward()
    assert ampc.testing.plant_nonfinite(w, (1, 2), value=math.nan) == 5
    ampc.testing.plant_nonfinite(v, -1)
    assert ampc.testing.count_nonfinite([w, v]) == {"inf": 1, "nan": 1}
    assert w.grad.device.type == "cuda"
    with pytest.raises(AssertionError, match="1 inf and 1 NaN"):
        ampc.testing.assert_all_finite([w, v])
