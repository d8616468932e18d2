"""avg_pool2d and adaptive_avg_pool2d (csrc/nn_avg_pool.c, cpu/avg_pool_loops.h,
cuda/avg_pool.cu, ampc/nn/_avg_pool.py): forward and backward against a
float64 NumPy reference written from torch's definitions, on every CPU
level, every float dtype and odd sizes; gradients by finite differences and
through create_graph; against torch where installed; on a GPU against the
CPU bit for bit in float32 (the same order of sums)."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import (FLOAT_NAMES, assert_close, from_values, gradcheck,
                     rand_values, to64)

C = ampc._C


# ----------------------------------------------------------------------------
# the reference


def _out_size(n, k, s, p, ceil_mode):
    """torch's pooling_output_shape (dilation 1)."""
    num = n + 2 * p - k + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _windows(n, k, s, p, ceil_mode, count_include_pad):
    """[(lo, hi, divisor factor)] of each output along one axis."""
    out = []
    for o in range(_out_size(n, k, s, p, ceil_mode)):
        start = o * s - p
        end = min(start + k, n + p)
        lo, hi = max(start, 0), min(end, n)
        out.append((lo, hi, end - start if count_include_pad else hi - lo))
    return out


def _adaptive_windows(n, on):
    return [(o * n // on, -(-(o + 1) * n // on),
             -(-(o + 1) * n // on) - o * n // on) for o in range(on)]


def _pairs(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _geometry(h, w, kernel_size, stride=None, padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    k = _pairs(kernel_size)
    s = k if stride is None else _pairs(stride)
    p = _pairs(padding)
    rows = _windows(h, k[0], s[0], p[0], ceil_mode, count_include_pad)
    cols = _windows(w, k[1], s[1], p[1], ceil_mode, count_include_pad)
    return rows, cols, divisor_override


def _adaptive_geometry(h, w, output_size):
    oh, ow = _pairs(output_size)
    oh = h if oh is None else oh
    ow = w if ow is None else ow
    return _adaptive_windows(h, oh), _adaptive_windows(w, ow), None


def pool_ref(x, rows, cols, div):
    out = np.zeros(x.shape[:-2] + (len(rows), len(cols)))
    for i, (r0, r1, fh) in enumerate(rows):
        for j, (c0, c1, fw) in enumerate(cols):
            total = x[..., r0:r1, c0:c1].sum(axis=(-1, -2))
            out[..., i, j] = total / (div or fh * fw)
    return out


def pool_grad_ref(g, in_shape, rows, cols, div):
    gx = np.zeros(in_shape)
    for i, (r0, r1, fh) in enumerate(rows):
        for j, (c0, c1, fw) in enumerate(cols):
            gx[..., r0:r1, c0:c1] += (g[..., i, j] / (div or fh * fw))[
                ..., None, None]
    return gx


# (shape, avg_pool2d keyword arguments)
CASES = [
    ((2, 3, 7, 9), dict(kernel_size=2)),
    ((1, 5, 9, 11), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 2, 9, 11), dict(kernel_size=3, stride=2, padding=1,
                         ceil_mode=True)),
    ((2, 2, 8, 13), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                         count_include_pad=False)),
    ((3, 6, 7), dict(kernel_size=(3, 2), stride=(1, 2),
                     divisor_override=5)),
    ((1, 1, 5, 5), dict(kernel_size=5)),
    ((2, 3, 4, 37), dict(kernel_size=(1, 4), stride=(1, 3), padding=(0, 2))),
    # ceil_mode's last window reaches past the padding: its divisor counts
    # only up to H + padding
    ((1, 2, 8, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
]
ADAPTIVE = [((2, 3, 7, 9), 1), ((1, 4, 10, 11), (3, 4)),
            ((2, 2, 5, 6), (None, 4)), ((3, 7, 9), (7, 9)),
            ((1, 2, 4, 5), (9, 11))]


def _values(shape, dtype, seed):
    return rand_values(shape, dtype, np.random.default_rng(seed))


# ----------------------------------------------------------------------------
# the kernels against NumPy


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape,kw", CASES)
def test_avg_pool2d_matches_numpy(device, cpu_level, dtype, shape, kw):
    xv = _values(shape, dtype, 0)
    geo = _geometry(*shape[-2:], **kw)
    y = C.avg_pool2d(from_values(xv, dtype).to(device), **kw)
    assert y.dtype.name == dtype and y.device.type == device
    assert_close(y.cpu(), pool_ref(xv, *geo), dtype, k=4)
    gv = _values(tuple(y.shape), dtype, 1)
    gx = C.avg_pool2d_backward(from_values(gv, dtype).to(device), shape,
                               **kw)
    assert tuple(gx.shape) == shape and gx.dtype.name == dtype
    assert_close(gx.cpu(), pool_grad_ref(gv, shape, *geo), dtype, k=4)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("shape,size", ADAPTIVE)
def test_adaptive_avg_pool2d_matches_numpy(device, cpu_level, dtype, shape,
                                           size):
    xv = _values(shape, dtype, 2)
    geo = _adaptive_geometry(*shape[-2:], size)
    y = C.adaptive_avg_pool2d(from_values(xv, dtype).to(device), size)
    assert tuple(y.shape) == shape[:-2] + (len(geo[0]), len(geo[1]))
    assert_close(y.cpu(), pool_ref(xv, *geo), dtype, k=4)
    gv = _values(tuple(y.shape), dtype, 3)
    gx = C.adaptive_avg_pool2d_backward(from_values(gv, dtype).to(device),
                                        shape)
    assert_close(gx.cpu(), pool_grad_ref(gv, shape, *geo), dtype, k=4)


def test_empty_batch_and_empty_output(device):
    x = ampc.zeros(0, 3, 5, 5).to(device)
    assert tuple(F.avg_pool2d(x, 2).shape) == (0, 3, 2, 2)
    y = F.adaptive_avg_pool2d(ampc.ones(1, 2, 5, 5).to(device), 0)
    assert tuple(y.shape) == (1, 2, 0, 0)
    g = C.adaptive_avg_pool2d_backward(y, (1, 2, 5, 5))
    assert not to64(g.cpu()).any()


# ----------------------------------------------------------------------------
# autograd


@pytest.mark.parametrize("shape,kw", CASES[:4])
def test_avg_pool2d_gradient_by_finite_differences(shape, kw):
    geo = _geometry(*shape[-2:], **kw)
    gradcheck(lambda x: F.avg_pool2d(x, **kw),
              lambda x: pool_ref(x, *geo), [shape])


@pytest.mark.parametrize("shape,size", ADAPTIVE[:3])
def test_adaptive_gradient_by_finite_differences(shape, size):
    geo = _adaptive_geometry(*shape[-2:], size)
    gradcheck(lambda x: F.adaptive_avg_pool2d(x, size),
              lambda x: pool_ref(x, *geo), [shape])


@pytest.mark.parametrize("adaptive", [False, True])
def test_create_graph_through_the_gradient(device, adaptive):
    """gx = pool^T g is linear in g: d<gx, v>/dg = pool(v)."""
    shape = (2, 3, 7, 9)
    pool = ((lambda t: F.adaptive_avg_pool2d(t, (3, 4))) if adaptive else
            (lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False)))
    rng = np.random.default_rng(4)
    x = ampc.tensor(rng.normal(size=shape).astype(np.float32),
                    requires_grad=True, device=device)
    y = pool(x)
    g = ampc.tensor(rng.normal(size=tuple(y.shape)).astype(np.float32),
                    requires_grad=True, device=device)
    gx, = ampc.autograd.grad(y, x, grad_outputs=g, create_graph=True)
    assert gx.grad_fn is not None
    v = ampc.tensor(rng.normal(size=shape).astype(np.float32),
                    device=device)
    gg, = ampc.autograd.grad((gx * v).sum(), g)
    np.testing.assert_allclose(to64(gg.cpu()), to64(pool(v).cpu()),
                               rtol=1e-5, atol=1e-6)


def test_no_graph_without_grad():
    x = ampc.ones(1, 1, 4, 4)
    assert F.avg_pool2d(x, 2).grad_fn is None
    y = F.avg_pool2d(x.requires_grad_(), 2)
    assert y.grad_fn.name() == "AvgPool2DBackward0"
    assert F.adaptive_avg_pool2d(x, 1).grad_fn.name() == \
        "AdaptiveAvgPool2DBackward0"


# ----------------------------------------------------------------------------
# modules, autocast, torch


def test_modules():
    m = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
    assert repr(m) == "AvgPool2d(kernel_size=3, stride=2, padding=1)"
    x = ampc.randn(2, 3, 8, 8)
    assert ampc.equal(m(x), F.avg_pool2d(x, 3, 2, 1,
                                         count_include_pad=False))
    a = nn.AdaptiveAvgPool2d((None, 3))
    assert repr(a) == "AdaptiveAvgPool2d(output_size=(None, 3))"
    assert tuple(a(x).shape) == (2, 3, 8, 3)


def test_autocast_keeps_the_input_dtype():
    x = ampc.randn(2, 3, 6, 6)
    with ampc.autocast("cpu", dtype=ampc.float16):
        assert F.avg_pool2d(x, 2).dtype == ampc.float32
        assert F.adaptive_avg_pool2d(x.half(), 1).dtype == ampc.float16


@pytest.mark.parametrize("shape,kw", CASES)
def test_avg_pool2d_matches_torch(shape, kw):
    torch = pytest.importorskip("torch")
    xv = np.random.default_rng(5).normal(size=shape).astype(np.float32)
    x = ampc.tensor(xv, requires_grad=True)
    y = F.avg_pool2d(x, **kw)
    tx = torch.from_numpy(xv).requires_grad_()
    ty = torch.nn.functional.avg_pool2d(tx, **kw)
    np.testing.assert_allclose(to64(y), ty.detach().double().numpy(),
                               rtol=1e-6, atol=1e-6)
    gv = np.random.default_rng(6).normal(size=ty.shape).astype(np.float32)
    y.backward(ampc.tensor(gv))
    ty.backward(torch.from_numpy(gv))
    np.testing.assert_allclose(to64(x.grad), tx.grad.double().numpy(),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,size", ADAPTIVE)
def test_adaptive_matches_torch(shape, size):
    torch = pytest.importorskip("torch")
    xv = np.random.default_rng(7).normal(size=shape).astype(np.float32)
    x = ampc.tensor(xv, requires_grad=True)
    y = F.adaptive_avg_pool2d(x, size)
    tx = torch.from_numpy(xv).requires_grad_()
    ty = torch.nn.functional.adaptive_avg_pool2d(tx, size)
    np.testing.assert_allclose(to64(y), ty.detach().double().numpy(),
                               rtol=1e-6, atol=1e-6)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(to64(x.grad), tx.grad.double().numpy(),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.skipif(not ampc.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape,kw", CASES + [((2, 3, 7, 9), "adaptive")])
def test_cuda_gives_the_cpu_bits_in_float32(shape, kw):
    xv = np.random.default_rng(8).normal(size=shape).astype(np.float32)

    def run(dev):
        x = ampc.tensor(xv, device=dev, requires_grad=True)
        y = (F.adaptive_avg_pool2d(x, (3, 4)) if kw == "adaptive"
             else F.avg_pool2d(x, **kw))
        (y * y).sum().backward()
        return to64(y.cpu()), to64(x.grad.cpu())
    for a, b in zip(run("cpu"), run("cuda")):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("call,exc,match", [
    (lambda x: F.avg_pool2d(x, 0), RuntimeError,
     r"avg_pool2d\(\): kernel_size must be greater than zero"),
    (lambda x: F.avg_pool2d(x, 2, padding=2), RuntimeError,
     "padding should be at most half of kernel_size"),
    (lambda x: F.avg_pool2d(x, 2, divisor_override=0), RuntimeError,
     "divisor must be not zero"),
    (lambda x: F.avg_pool2d(x, 9), RuntimeError, "Output size is too small"),
    (lambda x: F.avg_pool2d(x[0, 0], 2), RuntimeError,
     r"Expected 3D \(C, H, W\) or 4D"),
    (lambda x: F.avg_pool2d(x, "2"), TypeError,
     "argument 'kernel_size' must be an int"),
    (lambda x: F.avg_pool2d(x > 0, 2), RuntimeError,
     "expected input to have a floating-point dtype"),
    (lambda x: F.adaptive_avg_pool2d(x, -1), RuntimeError,
     "output_size must be greater than or equal to 0"),
    (lambda x: F.adaptive_avg_pool2d(x, (1, 2, 3)), TypeError,
     "output_size must be an int or a pair"),
    (lambda x: C.avg_pool2d_backward(ampc.ones(1, 2, 3, 3), (1, 2, 8, 8),
                                     2), RuntimeError, "grad_output"),
    (lambda x: F.avg_pool2d([1.0], 2), TypeError, "input"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call(ampc.ones(1, 2, 8, 8))


def test_adaptive_windows_cover_each_input_once_per_window():
    """The backward's inverse window rule (avg_pool_math.h ampc_avg_cover)
    agrees with the forward's windows: pooling then its adjoint of ones
    counts, for each input element, the windows holding it."""
    shape = (1, 1, 13, 17)
    for size in [(5, 7), (13, 17), (20, 3), (1, 1)]:
        rows, cols, _ = _adaptive_geometry(13, 17, size)
        count = np.zeros(shape)
        for r0, r1, fh in rows:
            for c0, c1, fw in cols:
                count[..., r0:r1, c0:c1] += 1.0 / (fh * fw)
        got = C.adaptive_avg_pool2d_backward(ampc.ones(1, 1, *[
            len(rows), len(cols)]), shape)
        np.testing.assert_allclose(to64(got), count, rtol=1e-6)
    assert math.isclose(float(F.adaptive_avg_pool2d(
        ampc.arange(6.0).view(1, 1, 2, 3), 1).item()), 2.5)
