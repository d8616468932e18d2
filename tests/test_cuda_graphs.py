"""CUDA graphs (ampc.cuda.CUDAGraph, ampc.cuda.graph): capture, replay,
reset, shared pools, the refusal of host reads during capture, captured
element-wise work against the CPU, and whole training steps captured and
replayed against the same steps run eagerly.  The first group runs
anywhere (what a machine without a GPU must say); the rest needs a GPU and
is marked ``cuda``.
"""
import numpy as np
import pytest

import ampc
from cuda_helpers import assert_same, cuda_available, requires_cuda

no_gpu = pytest.mark.skipif(cuda_available(),
                            reason="checks the messages without a GPU")


# ----------------------------------------------------------------------------
# without a GPU


@no_gpu
def test_graph_refused_without_gpu():
    with pytest.raises(RuntimeError, match=r"ampc\.cuda\.CUDAGraph\(\)"):
        ampc.cuda.CUDAGraph()


def test_not_capturing_outside_a_graph():
    assert ampc.cuda.is_current_stream_capturing() is False


def test_graph_context_needs_a_cudagraph():
    with pytest.raises(TypeError, match="'cuda_graph' must be an "
                       "ampc.cuda.CUDAGraph, got int"):
        ampc.cuda.graph(3)


def test_c_graph_functions_check_their_arguments():
    with pytest.raises(TypeError, match=r"CUDAGraph\.replay\(\): argument "
                       "'graph' must be a graph handle"):
        ampc._C.cuda_graph_replay(object())
    with pytest.raises(TypeError, match=r"CUDAGraph\.reset\(\)"):
        ampc._C.cuda_graph_reset(None)


def test_docstrings():
    import doctest
    import ampc.cuda.graphs as graphs
    result = doctest.testmod(graphs, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 2


@pytest.mark.skipif(ampc.cuda.is_built(), reason="CPU-only build")
def test_cpu_only_build_has_no_graphs():
    with pytest.raises(RuntimeError, match="built without CUDA support"):
        ampc._C.cuda_graph_new("cuda")


# ----------------------------------------------------------------------------
# on a GPU

gpu = [pytest.mark.cuda, requires_cuda]


def _cuda(a, dtype=ampc.float32):
    return ampc.tensor(np.asarray(a, dtype=np.float32), dtype=dtype,
                       device="cuda")


def _host(t):
    return np.asarray(t.detach().cpu().float().numpy(), dtype=np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.cuda
@requires_cuda
def test_capture_and_replay_elementwise(dtype):
    dt = getattr(ampc, dtype)
    rng = np.random.default_rng(0)
    x = _cuda(rng.normal(size=(37, 129)), dt)
    w = _cuda(rng.normal(size=(129,)), dt)
    y = (x * w + 1).relu()            # warm-up, eagerly
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        y = (x * w + 1).relu()
    for step in range(3):
        new = rng.normal(size=(37, 129))
        x.copy_(_cuda(new, dt))
        g.replay()
        # The same op on the CPU from the same (rounded) inputs.
        want = (x.cpu() * w.cpu() + 1).relu()
        assert_same(y, want, msg=f"replay {step}: ")


@pytest.mark.cuda
@requires_cuda
def test_replays_draw_new_random_numbers_as_eager_ops_would():
    x = ampc.ones(1001, device="cuda")
    ampc.nn.functional.dropout(x, 0.5)          # warm-up
    ampc.manual_seed(7)
    rng_state, set_rng_state = ampc._C.get_rng_state, ampc._C.set_rng_state
    before = rng_state()[1]
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        u = ampc.rand(517, device="cuda")
        d = ampc.nn.functional.dropout(x, 0.5)
    used = rng_state()[1] - before
    assert used == 520 + 1004
    # Eagerly, from the generator's state at each replay: the same draws.
    want = []
    for step in range(3):
        state = rng_state()
        want.append((ampc.rand(517, device="cuda").cpu(),
                     ampc.nn.functional.dropout(x, 0.5).cpu()))
        set_rng_state(state)
        g.replay()
        assert_same(u, want[-1][0], msg=f"rand, replay {step}: ")
        assert_same(d, want[-1][1], msg=f"dropout, replay {step}: ")
        assert rng_state() == (state[0], state[1] + used)
    assert not np.array_equal(_host(want[0][0]), _host(want[1][0]))
    # The seed, too, is read at replay (as PyTorch): a manual_seed() after
    # the capture gives a replay the draws of that seed.
    for seed in (123, 7):
        ampc.manual_seed(seed)
        eager = ampc.rand(517, device="cuda").cpu()
        ampc.manual_seed(seed)
        g.replay()
        assert_same(u, eager, msg=f"seed {seed}: ")


@pytest.mark.cuda
@requires_cuda
def test_capture_does_not_run_the_work():
    x = _cuda(np.ones(1000))
    x.mul_(2)                          # warm-up
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        x.mul_(2)
    # Captured, not run: x is still 2 (from the warm-up).
    np.testing.assert_array_equal(_host(x), 2.0)
    g.replay()
    g.replay()
    np.testing.assert_array_equal(_host(x), 8.0)


@pytest.mark.cuda
@requires_cuda
def test_capturing_flag():
    x = _cuda(np.ones(8))
    g = ampc.cuda.CUDAGraph()
    seen = []
    with ampc.cuda.graph(g):
        seen.append(ampc.cuda.is_current_stream_capturing())
        x.add_(1)
    assert seen == [True]
    assert ampc.cuda.is_current_stream_capturing() is False


@pytest.mark.parametrize("read", ["item", "numpy", "bool", "tolist"])
@pytest.mark.cuda
@requires_cuda
def test_host_read_during_capture_raises_and_recovers(read):
    x = _cuda(np.arange(4.0))
    s = x.sum()
    g = ampc.cuda.CUDAGraph()
    with pytest.raises(RuntimeError,
                       match="cannot read a CUDA tensor during CUDA graph "
                       "capture"):
        with ampc.cuda.graph(g):
            s = x.sum()
            if read == "item":
                s.item()
            elif read == "numpy":
                s.cpu()
            elif read == "bool":
                bool(s > 0)
            else:
                x.tolist()
    # The capture was abandoned: the stream and the allocator work again,
    # and the same graph object can capture afresh.
    assert ampc.cuda.is_current_stream_capturing() is False
    assert x.sum().item() == 6.0
    with ampc.cuda.graph(g):
        s = x.sum()
    x.add_(1)
    g.replay()
    assert s.item() == 10.0


@pytest.mark.cuda
@requires_cuda
def test_exception_in_body_abandons_capture():
    x = _cuda(np.ones(4))
    g = ampc.cuda.CUDAGraph()
    with pytest.raises(KeyError):
        with ampc.cuda.graph(g):
            x.add_(1)
            raise KeyError("boom")
    assert ampc.cuda.is_current_stream_capturing() is False
    with pytest.raises(RuntimeError, match=r"CUDAGraph\.replay\(\): the "
                       "graph has not been captured"):
        g.replay()
    np.testing.assert_array_equal(_host(x), 1.0)


@pytest.mark.cuda
@requires_cuda
def test_misuse_messages():
    g = ampc.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="has not been captured"):
        g.replay()
    with pytest.raises(RuntimeError, match="no capture is in progress"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="no memory pool yet"):
        g.pool()
    x = _cuda(np.ones(4))
    g.capture_begin()
    try:
        with pytest.raises(RuntimeError, match="already being captured"):
            g.capture_begin()
        x.add_(1)
    finally:
        g.capture_end()
    with pytest.raises(RuntimeError, match="already captured; call "
                       r"reset\(\)"):
        g.capture_begin()
    g.reset()
    g.reset()                           # twice is harmless
    with pytest.raises(RuntimeError, match="has not been captured"):
        g.replay()


@pytest.mark.cuda
@requires_cuda
def test_captures_cannot_nest():
    x = _cuda(np.ones(4))
    g1, g2 = ampc.cuda.CUDAGraph(), ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g1):
        x.add_(1)
        with pytest.raises(RuntimeError, match="captures cannot nest"):
            with ampc.cuda.graph(g2):
                pass
        with pytest.raises(RuntimeError, match="captures cannot nest"):
            g2.capture_begin()
    # The outer capture was not disturbed.
    g1.replay()
    np.testing.assert_array_equal(_host(x), 2.0)


@pytest.mark.cuda
@requires_cuda
def test_synchronize_during_capture_fails_cleanly():
    g = ampc.cuda.CUDAGraph()
    x = _cuda(np.ones(4))
    with pytest.raises(RuntimeError, match=r"synchronize\(\): cannot wait "
                                           "for the GPU during CUDA graph "
                                           "capture"):
        with ampc.cuda.graph(g):
            x.add_(1)
            ampc.cuda.synchronize()
    assert ampc.cuda.is_current_stream_capturing() is False
    x.add_(1)
    np.testing.assert_array_equal(_host(x), 2.0)


@pytest.mark.cuda
@requires_cuda
def test_reset_and_recapture():
    x = _cuda(np.ones(16))
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        y = x * 3
    g.replay()
    np.testing.assert_array_equal(_host(y), 3.0)
    g.reset()
    with ampc.cuda.graph(g):
        z = x * 5
    g.replay()
    np.testing.assert_array_equal(_host(z), 5.0)


@pytest.mark.cuda
@requires_cuda
def test_shared_pool():
    x = _cuda(np.ones(4096))
    g1 = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g1):
        a = x * 2
    g2 = ampc.cuda.CUDAGraph()
    # Graphs sharing a pool replay in capture order: g2 reads g1's output.
    with ampc.cuda.graph(g2, pool=g1.pool()):
        b = a + 1
    for v in (1.0, 4.0):
        x.fill_(v)
        g1.replay()
        g2.replay()
        np.testing.assert_array_equal(_host(b), 2 * v + 1)
    pool = g1.pool()
    g1.reset()
    # g2 still uses the pool, so it may still be shared ...
    g3 = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g3, pool=pool):
        c = b * 2
    g3.replay()
    np.testing.assert_array_equal(_host(c), 2 * (2 * 4.0 + 1))
    g2.reset()
    g3.reset()
    # ... but not once no graph uses it.
    g4 = ampc.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"CUDAGraph\.capture_begin"):
        g4.capture_begin(pool=pool)
    assert ampc.cuda.is_current_stream_capturing() is False


@pytest.mark.cuda
@requires_cuda
def test_replay_does_not_allocate():
    x = _cuda(np.ones((256, 256)))
    y = (x @ x).relu().sum()            # warm-up
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        y = (x @ x).relu().sum()
    g.replay()
    ampc.cuda.synchronize()
    before = ampc.cuda.memory_allocated()
    for _ in range(10):
        g.replay()
    ampc.cuda.synchronize()
    assert ampc.cuda.memory_allocated() == before
    assert y.item() == 256.0 * 256 * 256


@pytest.mark.cuda
@requires_cuda
def test_gc_of_a_graph_frees_it():
    x = _cuda(np.ones(4))
    for _ in range(20):
        g = ampc.cuda.CUDAGraph()
        with ampc.cuda.graph(g):
            x.add_(1)
        g.replay()
        del g
    np.testing.assert_array_equal(_host(x), 21.0)


# ----------------------------------------------------------------------------
# whole training steps


class _Net(ampc.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = ampc.nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.fc = ampc.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = ampc.nn.functional.max_pool2d(self.conv(x).relu(), 2)
        return self.fc(ampc.flatten(x, 1))


def _fused_sgd(params):
    try:
        return ampc.optim.SGD(params, lr=0.05, momentum=0.9, fused=True)
    except TypeError:
        pytest.skip("ampc.optim.SGD has no fused=True yet")


def _batches(n, rng):
    return [(rng.normal(size=(16, 3, 8, 8)).astype(np.float32),
             rng.integers(0, 10, size=16)) for _ in range(n)]


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.cuda
@requires_cuda
def test_captured_training_step_matches_eager(precision):
    """The same steps, eagerly and replayed from a graph, from the same
    weights: the same losses and weights (the kernels are the same and
    deterministic, so the results agree to the last bit or nearly)."""
    rng = np.random.default_rng(3)
    data = _batches(8, rng)
    autocast_dtype = {"fp32": None, "fp16": ampc.float16,
                      "bf16": ampc.bfloat16}[precision]
    use_scaler = precision == "fp16"
    crit = ampc.nn.CrossEntropyLoss()

    def make():
        ampc.manual_seed(0)
        model = _Net().to("cuda")
        opt = _fused_sgd(model.parameters())
        scaler = ampc.amp.GradScaler("cuda", init_scale=1024.0) \
            if use_scaler else None
        return model, opt, scaler

    def step(model, opt, scaler, x, y):
        opt.zero_grad(set_to_none=False)
        with ampc.autocast("cuda", dtype=autocast_dtype or ampc.float16,
                           enabled=autocast_dtype is not None):
            loss = crit(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss.detach()

    # Eager reference.
    model, opt, scaler = make()
    eager_losses = []
    for xb, yb in data:
        x = ampc.tensor(xb, device="cuda")
        y = ampc.tensor(yb, device="cuda")
        eager_losses.append(step(model, opt, scaler, x, y).item())
    eager_w = [p.detach().cpu() for p in model.parameters()]

    # Graphed: 3 eager warm-up steps, then capture one step (which is not
    # run), then replay the rest.
    model, opt, scaler = make()
    static_x = ampc.tensor(data[0][0], device="cuda")
    static_y = ampc.tensor(data[0][1], device="cuda")
    losses = []
    for xb, yb in data[:3]:
        static_x.copy_(ampc.tensor(xb, device="cuda"))
        static_y.copy_(ampc.tensor(yb, device="cuda"))
        losses.append(step(model, opt, scaler, static_x, static_y).item())
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        static_loss = step(model, opt, scaler, static_x, static_y)
    for xb, yb in data[3:]:
        static_x.copy_(ampc.tensor(xb, device="cuda"))
        static_y.copy_(ampc.tensor(yb, device="cuda"))
        g.replay()
        losses.append(static_loss.item())
    tol = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}[precision]
    np.testing.assert_allclose(losses, eager_losses, rtol=tol, atol=tol)
    for p, w in zip(model.parameters(), eager_w):
        assert_same(p.detach(), w, rtol=tol, atol=tol)


@pytest.mark.cuda
@requires_cuda
@pytest.mark.skipif(ampc.cuda.is_available() and
                    ampc.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_reset_graph_captures_on_the_current_gpu():
    g = ampc.cuda.CUDAGraph()
    x0 = ampc.ones(8, device="cuda:0")
    x0.mul_(2)
    with ampc.cuda.graph(g):
        x0.mul_(2)
    g.reset()
    ampc.cuda.set_device(1)
    try:
        x1 = ampc.ones(8, device="cuda:1")
        x1.mul_(3)
        with ampc.cuda.graph(g):
            x1.mul_(3)
        g.replay()
        np.testing.assert_array_equal(_host(x1), 9.0)
    finally:
        ampc.cuda.set_device(0)


@pytest.mark.cuda
@requires_cuda
def test_copy_from_pinned_memory_during_capture_runs_at_each_replay():
    # copy_ from a pinned tensor (no non_blocking) waits for the copy when
    # run eagerly; captured, it is a node of the graph, with nothing to wait
    # for: the capture must stay valid and each replay copy anew
    host = ampc.tensor(np.arange(64, dtype=np.float32)).pin_memory()
    static_x = ampc.zeros(64, device="cuda")
    static_x.copy_(host)                      # warm-up
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        static_x.copy_(host)
        y = static_x * 2
    for k in range(3):
        host.copy_(ampc.tensor(np.arange(64, dtype=np.float32) + k))
        g.replay()
        np.testing.assert_array_equal(_host(y),
                                      2 * (np.arange(64) + k))
