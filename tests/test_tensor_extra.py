"""Tensor methods of ampc/_tensor_extra.py against float64 NumPy and, where
installed, torch: amax/amin (ties share the gradient), median, select,
dot/mv/trace, clamp_min/max, mT, tensor_split and h/v/dsplit,
nansum/nanmean, diff, unique, bincount, softmax/log_softmax methods."""
import numpy as np
import pytest

import ampc

try:
    import torch
except ImportError:     # the torch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
RNG = np.random.default_rng(3)


@pytest.mark.parametrize("shape, dim", [((7,), ()), ((5, 33), 1),
                                        ((3, 4, 5), (0, 2)), ((3, 4, 5), -1),
                                        ((2, 3), None)])
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_values_and_tied_gradients(shape, dim, name):
    # small integers: many ties, so the shared gradient is exercised
    x = RNG.integers(0, 3, shape).astype(np.float32)
    t = ampc.tensor(x, requires_grad=True)
    out = getattr(t, name)(dim if dim is not None else ())
    axes = None if dim in ((), None) else dim
    ref = (np.max if name == "amax" else np.min)(x, axis=axes)
    np.testing.assert_array_equal(out.detach().numpy(), ref)
    out.sum().backward()
    kept = (np.max if name == "amax" else np.min)(x, axis=axes,
                                                  keepdims=True)
    ties = (x == kept).astype(np.float64)
    want = ties / ties.sum(axis=axes, keepdims=True)
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-6)
    assert getattr(ampc, name)(ampc.tensor(x), dim if dim is not None else
                               (), keepdim=True).ndim == len(shape)


def test_amax_errors_and_nan():
    with pytest.raises(IndexError, match="non-zero size"):
        ampc.zeros(0, 3).amax(0)
    with pytest.raises(RuntimeError, match="multiple times"):
        ampc.zeros(2, 3).amax((1, -1))
    assert np.isnan(ampc.tensor([1.0, float("nan")]).amax().item())


@pytest.mark.parametrize("n", [1, 4, 7, 33])
def test_median_is_the_lower_middle_value(n):
    x = RNG.standard_normal((3, n)).astype(np.float32)
    t = ampc.tensor(x, requires_grad=True)
    values, indices = t.median(1)
    want = np.sort(x, 1)[:, (n - 1) // 2]
    np.testing.assert_array_equal(values.detach().numpy(), want)
    np.testing.assert_array_equal(x[np.arange(3), indices.numpy()], want)
    values.sum().backward()
    grad = np.zeros_like(x)
    grad[np.arange(3), indices.numpy()] = 1
    np.testing.assert_array_equal(t.grad.numpy(), grad)
    assert t.median().item() == np.sort(x.ravel())[(x.size - 1) // 2]
    assert t.median(0, keepdim=True).values.shape == (1, n)


@needs_torch
def test_median_with_nan_matches_torch():
    x = np.array([[3., 1., 2., 4.], [np.nan, 1., 0., np.nan]], np.float32)
    a, b = ampc.tensor(x).median(1), torch.tensor(x).median(1)
    np.testing.assert_array_equal(a.values.numpy(), b.values.numpy())
    np.testing.assert_array_equal(a.indices.numpy(), b.indices.numpy())
    assert np.isnan(ampc.tensor(x).median().item())


def test_select_dot_mv_trace_mT_and_clamps():
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    t = ampc.tensor(x)
    np.testing.assert_array_equal(t.select(1, -2).numpy(), x[:, -2])
    np.testing.assert_array_equal(ampc.select(t, 2, 0).numpy(), x[:, :, 0])
    with pytest.raises(IndexError, match="out of range"):
        t.select(0, 4)
    a, b = RNG.standard_normal(33), RNG.standard_normal(33)
    np.testing.assert_allclose(
        ampc.tensor(a.astype(np.float32)).dot(
            ampc.tensor(b.astype(np.float32))).item(), a @ b, rtol=1e-5)
    assert ampc.tensor([1, 2]).dot(ampc.tensor([3, 4])).item() == 11
    m = RNG.standard_normal((7, 33)).astype(np.float32)
    np.testing.assert_allclose(
        ampc.tensor(m).mv(ampc.tensor(b.astype(np.float32))).numpy(),
        m.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)
    for shape in ((3, 5), (5, 3), (0, 2), (4, 4)):
        sq = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(ampc.tensor(sq).trace().item(),
                                   np.trace(sq), rtol=1e-6, atol=1e-6)
    assert t.mT.shape == (4, 6, 5)
    np.testing.assert_array_equal(t.clamp_min(0.5).numpy(),
                                  np.maximum(x, 0.5))
    np.testing.assert_array_equal(ampc.clamp_max(t, 0.5).numpy(),
                                  np.minimum(x, 0.5))
    c = t.clone()
    c.clamp_min_(0.0)
    assert float(c.min()) >= 0


def test_vector_op_errors():
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D "
                       "and 1D tensors"):
        ampc.ones(2, 2).dot(ampc.ones(2))
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        ampc.ones(2).dot(ampc.ones(3))
    with pytest.raises(RuntimeError, match="same dtype, but found Float and "
                       "Half"):
        ampc.ones(2).dot(ampc.ones(2).half())
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(2\)"):
        ampc.ones(2, 2).mv(ampc.ones(3))
    with pytest.raises(RuntimeError, match="trace: expected a matrix"):
        ampc.ones(2, 2, 2).trace()
    with pytest.raises(RuntimeError, match="mT is only supported"):
        ampc.ones(3).mT


def test_splits():
    x = ampc.arange(7)
    assert [p.tolist() for p in x.tensor_split(3)] == [[0, 1, 2], [3, 4],
                                                       [5, 6]]
    assert [p.tolist() for p in x.tensor_split([1, 5])] == [[0], [1, 2, 3, 4],
                                                            [5, 6]]
    assert [p.tolist() for p in x.tensor_split([-2, 9])] == [[0, 1, 2, 3, 4],
                                                             [5, 6], []]
    m = ampc.arange(24).reshape(2, 4, 3)
    assert [tuple(p.shape) for p in m.hsplit(2)] == [(2, 2, 3)] * 2
    assert [tuple(p.shape) for p in m.vsplit(2)] == [(1, 4, 3)] * 2
    assert [tuple(p.shape) for p in m.dsplit([1])] == [(2, 4, 1),
                                                       (2, 4, 2)]
    with pytest.raises(RuntimeError, match="not divisible"):
        m.hsplit(3)
    with pytest.raises(RuntimeError, match="at least 3 dimension"):
        ampc.ones(2, 2).dsplit(2)


def test_nansum_nanmean_diff():
    x = RNG.standard_normal((5, 33)).astype(np.float32)
    x[RNG.random(x.shape) < 0.2] = np.nan
    t = ampc.tensor(x)
    np.testing.assert_allclose(t.nansum().item(), np.nansum(x), rtol=1e-5)
    np.testing.assert_allclose(t.nansum(1).numpy(), np.nansum(x, 1),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.nanmean(0).numpy(), np.nanmean(x, 0),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="floating point"):
        ampc.ones(3, dtype=ampc.int64).nanmean()
    y = RNG.integers(-9, 9, (4, 7))
    for n in (1, 2, 3):
        np.testing.assert_array_equal(ampc.tensor(y).diff(n, 1).numpy(),
                                      np.diff(y, n, 1))
    np.testing.assert_array_equal(
        ampc.tensor(y).diff(dim=0, prepend=ampc.tensor(y[:1]),
                            append=ampc.tensor(y[-1:])).numpy(),
        np.diff(y, 1, 0, prepend=y[:1], append=y[-1:]))
    b = ampc.tensor([True, True, False])
    assert b.diff().tolist() == [False, True]


def test_unique_and_bincount():
    v = RNG.integers(0, 9, 33)
    vals, inv, counts = ampc.unique(ampc.tensor(v), return_inverse=True,
                                    return_counts=True)
    want = np.unique(v, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(vals.numpy(), want[0])
    np.testing.assert_array_equal(inv.numpy(), want[1].reshape(-1))
    np.testing.assert_array_equal(counts.numpy(), want[2])
    rows = ampc.tensor([[1, 2], [1, 2], [0, 1]])
    u, i = rows.unique(dim=0, return_inverse=True)
    assert u.tolist() == [[0, 1], [1, 2]] and i.tolist() == [1, 1, 0]
    assert ampc.tensor([2.5, 1.0, 2.5]).half().unique().dtype is \
        ampc.float16
    np.testing.assert_array_equal(ampc.bincount(ampc.tensor(v)).numpy(),
                                  np.bincount(v))
    w = RNG.random(33).astype(np.float32)
    np.testing.assert_allclose(
        ampc.tensor(v).bincount(ampc.tensor(w), minlength=12).numpy(),
        np.bincount(v, w, minlength=12), rtol=1e-6)
    with pytest.raises(RuntimeError, match="non-negative integral"):
        ampc.tensor([-1, 2]).bincount()


def test_softmax_methods():
    x = RNG.standard_normal((3, 7)).astype(np.float32)
    t = ampc.tensor(x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(t.softmax(1).numpy(),
                               e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(ampc.log_softmax(t, -1).numpy(),
                               np.log(e / e.sum(1, keepdims=True)),
                               rtol=1e-5, atol=1e-6)
    assert t.half().softmax(1, dtype=ampc.float32).dtype is ampc.float32


@needs_torch
def test_gradients_match_torch():
    x = RNG.integers(0, 4, (4, 6)).astype(np.float32)
    outs = []
    for m in (ampc, torch):
        t = m.tensor(x, requires_grad=True)
        loss = (t.amax(1) * 2).sum() + t.amin((0, 1)) + \
            t.median(1).values.sum() + t.select(0, 1).sum() + \
            t.diff(dim=1).pow(2).sum() + t.nansum() + t.trace()
        loss.backward()
        outs.append((loss.item(), t.grad.numpy()))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-6)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-6)
