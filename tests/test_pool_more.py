"""max_pool1d, adaptive_max_pool1d/2d and adaptive_avg_pool1d
(ampc/nn/_pool_more.py; the adaptive max pooling's kernels in
csrc/nn_adaptive_max_pool.c, cpu/ref/adaptive_max_pool.c,
cuda/adaptive_max_pool.cu): values and indices against a float64 NumPy
reference written from torch's definitions (odd sizes, every float dtype,
NaN and ties), gradients by finite differences and through create_graph,
torch's results and errors where torch is installed, and the same tests on
a GPU (marked cuda)."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import (FLOAT_NAMES, assert_close, from_values, gradcheck,
                     rand_values, to64)

# ----------------------------------------------------------------------------
# the reference


def _adaptive(n, on):
    return [(o * n // on, -(-(o + 1) * n // on)) for o in range(on)]


def _window_max(vals, positions):
    """torch's rule over (value, index) in scan order: from -inf, a later
    element wins when greater or NaN; the index starts at the first."""
    best, at = -math.inf, positions[0][1] if positions else 0
    for v, i in positions:
        if v > best or math.isnan(v):
            best, at = v, i
    return best, at


def ref_adaptive_max2d(x, oh, ow):
    """x (..., H, W) float64 -> (values, indices) (..., OH, OW)."""
    *lead, h, w = x.shape
    flat = x.reshape(-1, h, w)
    vals = np.zeros((flat.shape[0], oh, ow))
    idx = np.zeros((flat.shape[0], oh, ow), dtype=np.int64)
    for p in range(flat.shape[0]):
        for i, (h0, h1) in enumerate(_adaptive(h, oh)):
            for j, (w0, w1) in enumerate(_adaptive(w, ow)):
                pos = [(flat[p, a, b], a * w + b) for a in range(h0, h1)
                       for b in range(w0, w1)]
                vals[p, i, j], idx[p, i, j] = _window_max(flat, pos)
    return vals.reshape(*lead, oh, ow), idx.reshape(*lead, oh, ow)


def _out_len(n, k, s, p, d, ceil_mode):
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def ref_max_pool1d(x, k, s, p, d, ceil_mode):
    """x (..., L) float64 -> (values, indices) (..., OL)."""
    *lead, n = x.shape
    flat = x.reshape(-1, n)
    ol = _out_len(n, k, s, p, d, ceil_mode)
    vals = np.zeros((flat.shape[0], ol))
    idx = np.zeros((flat.shape[0], ol), dtype=np.int64)
    for r in range(flat.shape[0]):
        for o in range(ol):
            start = o * s - p
            taps = [start + t * d for t in range(k)]
            first = next((t for t in taps if t >= 0), 0)
            pos = [(flat[r, t], t) for t in taps if 0 <= t < n]
            best, at = _window_max(flat, pos)
            vals[r, o], idx[r, o] = best, at if pos else first
    return vals.reshape(*lead, ol), idx.reshape(*lead, ol)


def _values(shape, dtype, seed, nan=False):
    rng = np.random.default_rng(seed)
    v = rand_values(shape, dtype, rng)
    flat = v.reshape(-1)
    flat[1::7] = flat[0::7][:flat[1::7].size]   # ties
    if nan:
        flat[3] = math.nan
    return v


# ----------------------------------------------------------------------------
# values and indices


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape,size", [
    ((2, 3, 7, 9), (3, 4)), ((3, 13, 5), (5, 5)), ((1, 2, 5, 7), (9, 11)),
    ((1, 1, 33, 1), (7, 1)), ((2, 1, 6, 8), (1, 1)), ((1, 2, 4, 4), (4, 4)),
])
def test_adaptive_max_pool2d_matches_numpy(device, cpu_level, dtype, shape,
                                          size):
    vals = _values(shape, dtype, 1)
    x = from_values(vals, dtype).to(device)
    y, i = F.adaptive_max_pool2d(x, size, return_indices=True)
    ev, ei = ref_adaptive_max2d(vals, *size)
    assert y.dtype is x.dtype and i.dtype is ampc.int64
    assert_close(y.cpu(), ev, dtype, rtol=0, atol=0)
    assert np.array_equal(i.cpu().numpy(), ei)


def test_adaptive_max_pool2d_nan_wins_and_none_keeps_a_dim(device):
    vals = _values((2, 5, 7), "float32", 2, nan=True)
    x = from_values(vals, "float32").to(device)
    y, i = F.adaptive_max_pool2d(x, (3, None), True)
    ev, ei = ref_adaptive_max2d(vals, 3, 7)
    assert_close(y.cpu(), ev, "float32", rtol=0, atol=0)
    assert np.array_equal(i.cpu().numpy(), ei)
    assert np.isnan(to64(y.cpu())).any()


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape,args", [
    ((2, 3, 10), (3, 2, 1, 2, True)), ((3, 33), (4, None, 2, 1, False)),
    ((1, 2, 7), (2, 3, 1, 1, True)), ((2, 1, 19), (5, 2, 2, 3, False)),
    ((1, 1, 8), (1, 1, 0, 1, False)),
])
def test_max_pool1d_matches_numpy(device, cpu_level, dtype, shape, args):
    k, s, p, d, ceil_mode = args
    vals = _values(shape, dtype, 3)
    x = from_values(vals, dtype).to(device)
    y, i = F.max_pool1d(x, k, s, p, d, ceil_mode, return_indices=True)
    ev, ei = ref_max_pool1d(vals, k, k if s is None else s, p, d, ceil_mode)
    assert_close(y.cpu(), ev, dtype, rtol=0, atol=0)
    assert np.array_equal(i.cpu().numpy(), ei)
    m = nn.MaxPool1d(k, s, p, d, return_indices=False, ceil_mode=ceil_mode)
    assert_close(m(x).cpu(), ev, dtype, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape,size", [((2, 3, 11), 4), ((3, 7), (3,)),
                                        ((1, 2, 5), 8)])
def test_adaptive_pool1d_matches_numpy(device, dtype, shape, size):
    vals = _values(shape, dtype, 4)
    x = from_values(vals, dtype).to(device)
    n = size if isinstance(size, int) else size[0]
    y, i = F.adaptive_max_pool1d(x, size, return_indices=True)
    ev, ei = ref_adaptive_max2d(vals[..., None, :], 1, n)
    assert_close(y.cpu(), ev[..., 0, :], dtype, rtol=0, atol=0)
    assert np.array_equal(i.cpu().numpy(), ei[..., 0, :])
    mean = np.stack([vals[..., a:b].mean(-1) for a, b in
                     _adaptive(shape[-1], n)], -1)
    assert_close(F.adaptive_avg_pool1d(x, size).cpu(), mean, dtype, k=2)
    assert_close(nn.AdaptiveAvgPool1d(size)(x).cpu(), mean, dtype, k=2)
    assert_close(nn.AdaptiveMaxPool1d(size)(x).cpu(), ev[..., 0, :], dtype,
                 rtol=0, atol=0)


def test_empty_batch_and_empty_output(device):
    x = ampc.zeros(0, 2, 5, 7, device=device)
    y, i = F.adaptive_max_pool2d(x, 3, True)
    assert y.shape == (0, 2, 3, 3) and i.shape == (0, 2, 3, 3)
    y = F.adaptive_max_pool2d(ampc.ones(1, 5, 7, device=device), 0)
    assert y.shape == (1, 0, 0)


# ----------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("shape,size", [((2, 3, 7, 9), (3, 4)),
                                        ((2, 5, 6), (4, 9))])
def test_adaptive_max_pool2d_gradient(shape, size):
    def ref(x):
        return ref_adaptive_max2d(x, *size)[0]
    gradcheck(lambda x: F.adaptive_max_pool2d(x, size), ref, [shape])


@pytest.mark.parametrize("args", [(3, 2, 1, 2, True), (4, 1, 2, 1, False)])
def test_max_pool1d_gradient(args):
    k, s, p, d, c = args

    def ref(x):
        return ref_max_pool1d(x, k, s, p, d, c)[0]
    gradcheck(lambda x: F.max_pool1d(x, k, s, p, d, c), ref, [(2, 3, 13)])


def test_pool1d_gradients():
    gradcheck(lambda x: F.adaptive_max_pool1d(x, 4),
              lambda x: ref_adaptive_max2d(x[..., None, :], 1, 4)[0][
                  ..., 0, :], [(3, 11)])
    gradcheck(lambda x: F.adaptive_avg_pool1d(x, 4),
              lambda x: np.stack([x[..., a:b].mean(-1) for a, b in
                                  _adaptive(11, 4)], -1), [(2, 3, 11)])


def test_adaptive_max_gradient_is_the_scatter_of_grad(device):
    """Overlapping windows send each output's gradient to its argmax, the
    contributions summed (output larger than the input)."""
    vals = _values((1, 3, 4), "float32", 5)
    x = from_values(vals, "float32").to(device).requires_grad_()
    y, i = F.adaptive_max_pool2d(x, (5, 7), True)
    g = ampc.arange(35.0, device=device).view(1, 5, 7)
    y.backward(g)
    expect = np.zeros(12)
    np.add.at(expect, i.cpu().numpy().reshape(-1), np.arange(35.0))
    assert_close(x.grad.cpu(), expect.reshape(1, 3, 4), "float32")


def test_create_graph_through_adaptive_max(device):
    x = ampc.randn(2, 3, 5, 7, device=device).requires_grad_()
    y = F.adaptive_max_pool2d(x, (3, 2))
    g, = ampc.autograd.grad((y * y).sum(), x, create_graph=True)
    g.sum().backward()
    # d/dx sum(2 * max) at each argmax: 2 per pick
    _, i = F.adaptive_max_pool2d(x.detach(), (3, 2), True)
    counts = np.zeros(2 * 3 * 35)
    flat = i.cpu().numpy().reshape(6, -1) + np.arange(6)[:, None] * 35
    np.add.at(counts, flat.reshape(-1), 1.0)
    assert_close(x.grad.cpu(), 2 * counts.reshape(2, 3, 5, 7), "float32")


def test_autocast_keeps_the_input_dtype():
    x = ampc.randn(2, 3, 7, 7)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        assert F.adaptive_max_pool2d(x, 3).dtype is ampc.float32
        assert F.max_pool1d(x[0], 3).dtype is ampc.float32
        assert F.adaptive_max_pool2d(x.bfloat16(), 3).dtype is \
            ampc.bfloat16


def test_modules():
    assert repr(nn.MaxPool1d(3)) == ("MaxPool1d(kernel_size=3, stride=3, "
                                     "padding=0, dilation=1, "
                                     "ceil_mode=False)")
    assert repr(nn.AdaptiveMaxPool2d((3, None))) == \
        "AdaptiveMaxPool2d(output_size=(3, None))"
    assert repr(nn.AdaptiveMaxPool1d(3)) == "AdaptiveMaxPool1d(output_size=3)"
    assert repr(nn.AdaptiveAvgPool1d(3)) == "AdaptiveAvgPool1d(output_size=3)"
    y, i = nn.AdaptiveMaxPool2d(2, return_indices=True)(ampc.ones(1, 4, 4))
    assert y.shape == (1, 2, 2) and i.dtype is ampc.int64


# ----------------------------------------------------------------------------
# torch


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_matches_torch(dtype):
    torch = _torch()
    rng = np.random.default_rng(6)
    vals = rand_values((2, 3, 9, 11), dtype, rng)
    x = from_values(vals, dtype)
    tx = torch.tensor(vals).to(getattr(torch, dtype))
    for size in (4, (5, 3), (11, 13), (None, 2)):
        y, i = F.adaptive_max_pool2d(x, size, True)
        ty, ti = torch.nn.functional.adaptive_max_pool2d(tx, size, True)
        assert np.array_equal(to64(y), ty.double().numpy())
        assert np.array_equal(i.numpy(), ti.numpy())
    for args in ((3, 2, 1, 2, True), (4, None, 2, 1, False)):
        y, i = F.max_pool1d(x[0], *args, return_indices=True)
        ty, ti = torch.nn.functional.max_pool1d(tx[0], *args,
                                                return_indices=True)
        assert np.array_equal(to64(y), ty.double().numpy())
        assert np.array_equal(i.numpy(), ti.numpy())
    y = F.adaptive_avg_pool1d(x[0], 4)
    ty = torch.nn.functional.adaptive_avg_pool1d(tx[0], 4)
    assert_close(y, ty.double().numpy(), dtype, k=2)


def test_gradient_matches_torch():
    torch = _torch()
    vals = np.random.default_rng(7).normal(size=(2, 3, 6, 9))
    x = ampc.tensor(vals.astype(np.float32), requires_grad=True)
    tx = torch.tensor(vals.astype(np.float32), requires_grad=True)
    (F.adaptive_max_pool2d(x, (4, 5)) * 3).sum().backward()
    (torch.nn.functional.adaptive_max_pool2d(tx, (4, 5)) * 3).sum() \
        .backward()
    assert np.array_equal(x.grad.numpy(), tx.grad.numpy())
    x.grad = None
    tx.grad = None
    F.max_pool1d(x[0], 3, 1, 1).sum().backward()
    torch.nn.functional.max_pool1d(tx[0], 3, 1, 1).sum().backward()
    assert np.array_equal(x.grad.numpy(), tx.grad.numpy())


# ----------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.max_pool1d(ampc.ones(10), 3), RuntimeError,
     "Expected 2D or 3D"),
    (lambda: F.max_pool1d(ampc.ones(1, 1, 10), 3, padding=2), RuntimeError,
     "padding should be at most half of kernel size"),
    (lambda: F.max_pool1d(ampc.ones(1, 1, 10), 0), RuntimeError,
     "kernel_size must be greater than zero"),
    (lambda: F.max_pool1d(ampc.ones(1, 1, 10), 20), RuntimeError,
     "Invalid computed output size"),
    (lambda: F.max_pool1d(ampc.ones(1, 1, 10), (3, 2)), RuntimeError,
     "tuple of ints of size 1"),
    (lambda: F.adaptive_max_pool2d(ampc.ones(5, 7), 2), RuntimeError,
     "Expected 3D or 4D tensor"),
    (lambda: F.adaptive_max_pool2d(ampc.ones(1, 0, 5, 7), 2), RuntimeError,
     "non-zero size for non-batch dimensions"),
    (lambda: F.adaptive_max_pool2d(ampc.ones(1, 5, 7), -1), RuntimeError,
     "greater than or equal to 0"),
    (lambda: F.adaptive_max_pool2d(ampc.ones(1, 5, 7, dtype=ampc.int64), 2),
     RuntimeError, "floating-point"),
    (lambda: F.adaptive_max_pool1d(ampc.ones(7), 3), RuntimeError,
     "Expected 2 to 3 dimensions"),
    (lambda: F.adaptive_max_pool1d(ampc.ones(1, 7), (3, 4)), RuntimeError,
     "should contain one int"),
    (lambda: F.adaptive_avg_pool1d(ampc.ones(7), 3), RuntimeError,
     "Expected 2 to 3 dimensions"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("module", ["ampc.nn._pool_more", "ampc.nn.modules.pooling"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
