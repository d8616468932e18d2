"""use_deterministic_algorithms (csrc/deterministic.c, ampc/_deterministic.py):
the flag's semantics as PyTorch's (warn_only, the debug modes, the
errors), empty()'s fill, and the deterministic paths: on the CPU a
repeated index's plain writes land in index order (the last wins, as
PyTorch); on a GPU (tests marked cuda) index_put_/index_add_ and float
scatter_reduce sorted by destination give the same bits every run and the
CPU's, embedding_bag's weight gradient takes the sorted composite, and
conv2d keeps to deterministic cuDNN algorithms."""
import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
from cuda_helpers import requires_cuda
from helpers import to64


@pytest.fixture(autouse=True)
def _restore_mode():
    before = ampc._C._deterministic_algorithms()
    fill = ampc.utils.deterministic.fill_uninitialized_memory
    yield
    ampc.use_deterministic_algorithms(before[0], warn_only=before[1])
    ampc.utils.deterministic.fill_uninitialized_memory = fill


# ----------------------------------------------------------------------------
# the flag


def test_flag_and_debug_modes():
    assert ampc.are_deterministic_algorithms_enabled() is False
    assert ampc.get_deterministic_debug_mode() == 0
    ampc.use_deterministic_algorithms(True)
    assert ampc.are_deterministic_algorithms_enabled() is True
    assert ampc.is_deterministic_algorithms_warn_only_enabled() is False
    assert ampc.get_deterministic_debug_mode() == 2
    ampc.use_deterministic_algorithms(True, warn_only=True)
    assert ampc.is_deterministic_algorithms_warn_only_enabled() is True
    assert ampc.get_deterministic_debug_mode() == 1
    ampc.use_deterministic_algorithms(False)
    assert not ampc.are_deterministic_algorithms_enabled()
    assert not ampc.is_deterministic_algorithms_warn_only_enabled()
    for mode, want in [("warn", (True, True)), ("error", (True, False)),
                       ("default", (False, False)), (1, (True, True)),
                       (2, (True, False)), (0, (False, False))]:
        ampc.set_deterministic_debug_mode(mode)
        assert (ampc.are_deterministic_algorithms_enabled(),
                ampc.is_deterministic_algorithms_warn_only_enabled()) == want
    # the cuDNN flag stays its own, as in PyTorch
    ampc.use_deterministic_algorithms(True)
    assert ampc.backends.cudnn.deterministic is False


def test_flag_errors_are_pytorchs():
    with pytest.raises(TypeError, match="argument 'mode' \\(position 1\\) "
                       "must be bool, not int"):
        ampc.use_deterministic_algorithms(1)
    with pytest.raises(TypeError, match="argument 'warn_only' must be bool, "
                       "not int"):
        ampc.use_deterministic_algorithms(True, warn_only=1)
    with pytest.raises(TypeError):
        ampc.use_deterministic_algorithms(True, False)     # keyword-only
    with pytest.raises(RuntimeError, match="expected one of `default`, "
                       "`warn`, `error`, but got strict"):
        ampc.set_deterministic_debug_mode("strict")
    with pytest.raises(RuntimeError, match="expected 0, 1, or 2, but got 3"):
        ampc.set_deterministic_debug_mode(3)
    with pytest.raises(TypeError, match="debug_mode must be str or int"):
        ampc.set_deterministic_debug_mode(1.0)
    assert not ampc.are_deterministic_algorithms_enabled()


def test_flag_matches_torch():
    torch = pytest.importorskip("torch")
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        for mode in ["default", "warn", "error", 0, 1, 2]:
            ampc.set_deterministic_debug_mode(mode)
            torch.set_deterministic_debug_mode(mode)
            assert ampc.get_deterministic_debug_mode() == \
                torch.get_deterministic_debug_mode()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def test_empty_fills_uninitialized_memory():
    ampc.use_deterministic_algorithms(True)
    assert np.isnan(to64(ampc.empty(7))).all()
    for dt in (ampc.float16, ampc.bfloat16):
        assert np.isnan(to64(ampc.empty(3, 5, dtype=dt))).all()
    assert (ampc.empty(4, dtype=ampc.int64) == 2 ** 63 - 1).all()
    assert ampc.empty(4, dtype=ampc.bool).all()
    assert np.isnan(to64(ampc.empty_like(ampc.ones(3)))).all()
    assert np.isnan(to64(ampc.ones(2).new_empty(5))).all()
    ampc.utils.deterministic.fill_uninitialized_memory = False
    big = ampc.ones(1 << 20)
    del big                 # (its block may come back: ones, not NaN)
    assert not np.isnan(to64(ampc.empty(1 << 20))).all()


# ----------------------------------------------------------------------------
# the CPU: a repeated index's writes in order


def test_repeated_index_put_keeps_the_last_write_on_the_cpu():
    """Enough writes to one element that the tuples would be split over
    threads: in the mode the last one lands, as PyTorch's."""
    ampc.use_deterministic_algorithms(True)
    n = 200_003
    idx = ampc.tensor(np.arange(n) % 3)
    vals = ampc.arange(float(n))
    last = [float(max(j for j in range(n - 3, n) if j % 3 == k))
            for k in range(3)]
    x = ampc.zeros(3)
    x[idx] = vals
    assert x.tolist() == last
    y = ampc.zeros(3, 2)
    y.index_put_((idx,), vals.unsqueeze(1).expand(n, 2).contiguous())
    assert y[:, 1].tolist() == last
    z = ampc.zeros(3, 4).scatter_(
        0, ampc.tensor([[0, 1, 0, 2], [0, 1, 2, 2]]),
        ampc.arange(8.0).reshape(2, 4) + 1)
    assert z.tolist() == [[5, 0, 3, 0], [0, 6, 0, 0], [0, 0, 7, 8]]


def test_repeated_index_put_matches_torch_in_the_mode():
    torch = pytest.importorskip("torch")
    before = torch.are_deterministic_algorithms_enabled()
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 7, 50_001)
    vals = rng.standard_normal(50_001).astype(np.float32)
    try:
        torch.use_deterministic_algorithms(True)
        ampc.use_deterministic_algorithms(True)
        x, tx = ampc.zeros(7), torch.zeros(7)
        x[ampc.tensor(idx)] = ampc.tensor(vals)
        tx[torch.tensor(idx)] = torch.tensor(vals)
        assert np.array_equal(to64(x), tx.double().numpy())
    finally:
        torch.use_deterministic_algorithms(before)


# ----------------------------------------------------------------------------
# CUDA: the sorted paths


def _twice(fn):
    """fn() run twice on fresh copies: both results' float64 values."""
    return to64(fn().cpu()), to64(fn().cpu())


@pytest.mark.cuda
@requires_cuda
def test_cuda_accumulations_are_deterministic_and_the_cpus():
    ampc.use_deterministic_algorithms(True)
    rng = np.random.default_rng(4)
    n, rows = 300_007, 13
    idx = rng.integers(0, rows, n)
    src = rng.standard_normal((n, 5)).astype(np.float32)

    def run(device):
        i, s = ampc.tensor(idx, device=device), ampc.tensor(src,
                                                            device=device)
        out = {}
        out["index_add_"] = ampc.zeros(rows, 5, device=device) \
            .index_add_(0, i, s)
        acc = ampc.zeros(rows, 5, device=device)
        acc.index_put_((i,), s, accumulate=True)
        out["index_put_"] = acc
        put = ampc.zeros(rows, 5, device=device)
        put[i] = s
        out["put"] = put
        i2 = i.unsqueeze(1).expand(n, 5)
        for op in ("sum", "mean", "prod"):
            out[op] = ampc.ones(rows, 5, device=device).scatter_reduce(
                0, i2, s * 0.01 + 1 if op == "prod" else s, op)
        out["scatter_add_"] = ampc.zeros(rows, 5, device=device) \
            .scatter_add_(0, i2, s)
        return {k: to64(v.cpu()) for k, v in out.items()}

    cpu, gpu, again = run("cpu"), run("cuda"), run("cuda")
    for k in cpu:
        assert np.array_equal(gpu[k], again[k]), k
        assert np.array_equal(gpu[k], cpu[k]), k


@pytest.mark.cuda
@requires_cuda
def test_cuda_gradients_through_the_sorted_paths_repeat_exactly():
    ampc.use_deterministic_algorithms(True)
    rng = np.random.default_rng(5)
    table = rng.standard_normal((11, 64)).astype(np.float32)
    tokens = rng.integers(0, 11, (64, 129))
    img = rng.standard_normal((2, 3, 9, 7)).astype(np.float32)

    def grads():
        w = ampc.tensor(table, device="cuda", requires_grad=True)
        x = ampc.tensor(img, device="cuda", requires_grad=True)
        tok = ampc.tensor(tokens, device="cuda")
        F.embedding(tok, w).sum().backward()
        for mode in ("sum", "mean", "max"):
            F.embedding_bag(tok, w, mode=mode).pow(2).sum().backward()
        (F.interpolate(x, scale_factor=2.7).pow(2).sum()
         + F.pad(x, (2, 3, 1, 1), mode="reflect").pow(2).sum()).backward()
        return to64(w.grad.cpu()), to64(x.grad.cpu())

    (a, b), (c, d) = grads(), grads()
    assert np.array_equal(a, c) and np.array_equal(b, d)


@pytest.mark.cuda
@requires_cuda
def test_cuda_conv2d_keeps_to_deterministic_algorithms():
    """The mode is part of the algorithm cache's key (a separate choice,
    from the deterministic algorithms only), and results repeat."""
    ampc.backends.cudnn.clear_algorithm_cache()
    x = ampc.randn(8, 16, 33, 31, device="cuda", requires_grad=True)
    w = ampc.randn(32, 16, 3, 3, device="cuda", requires_grad=True)

    def run():
        x.grad = w.grad = None
        F.conv2d(x, w, padding=1).pow(2).sum().backward()
        return to64(w.grad.cpu()), to64(x.grad.cpu())

    run()
    before = ampc.backends.cudnn.algorithm_cache_info().entries
    ampc.use_deterministic_algorithms(True)
    first = run()
    assert ampc.backends.cudnn.algorithm_cache_info().entries > before
    second = run()
    assert all(np.array_equal(p, q) for p, q in zip(first, second))
