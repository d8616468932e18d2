"""F.embedding and nn.Embedding (ampc/nn/_embedding.py,
nn/modules/embedding.py): lookups and weight gradients against a float64
NumPy reference (repeated indices, padding_idx, scale_grad_by_freq,
max_norm renorm) on odd sizes and every float dtype, on the CPU and (marked
cuda) the GPU; finite differences; create_graph; torch where installed;
errors."""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import FLOAT_NAMES, assert_close, from_values, to64


def _ref_grad(g, idx, num, padding_idx=None, scale=False):
    rows = g.reshape(-1, g.shape[-1])
    flat = idx.reshape(-1)
    counts = np.bincount(flat, minlength=num)
    out = np.zeros((num, rows.shape[1]))
    for r, i in zip(rows, flat):
        if i == padding_idx:
            continue
        out[i] += r / counts[i] if scale else r
    return out


IDX = np.array([[1, 3, 3, 10], [6, 0, 1, 3], [10, 10, 2, 5]])


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (3, False),
                                               (None, True), (-1, True)])
def test_lookup_and_gradient(device, dtype, padding_idx, scale):
    rng = np.random.default_rng(0)
    wv = rng.normal(size=(11, 7))
    w = from_values(wv, dtype).to(device).requires_grad_()
    idx = ampc.tensor(IDX).to(device)
    out = F.embedding(idx, w, padding_idx=padding_idx,
                      scale_grad_by_freq=scale)
    assert tuple(out.shape) == (3, 4, 7) and out.dtype.name == dtype
    np.testing.assert_array_equal(to64(out.cpu()), to64(w.cpu())[IDX])
    gv = rng.normal(size=(3, 4, 7))
    out.backward(from_values(gv, dtype).to(device))
    pad = None if padding_idx is None else padding_idx % 11
    want = _ref_grad(to64(from_values(gv, dtype)), IDX, 11, pad, scale)
    assert w.grad.dtype.name == dtype
    assert_close(w.grad.cpu(), want, dtype, k=4)


def test_finite_differences_and_create_graph():
    rng = np.random.default_rng(1)
    wv = rng.normal(size=(5, 3)).astype(np.float32)
    w = ampc.tensor(wv, requires_grad=True)
    idx = ampc.tensor([4, 0, 4, 2])
    weights = rng.normal(size=(4, 3)).astype(np.float32)
    loss = (F.embedding(idx, w) * ampc.tensor(weights)).sum()
    g, = ampc.autograd.grad(loss, w, create_graph=True)
    eps = 1e-3
    numeric = np.zeros_like(wv, dtype=np.float64)
    for i in range(5):
        for j in range(3):
            for sign in (1, -1):
                p = wv.astype(np.float64).copy()
                p[i, j] += sign * eps
                numeric[i, j] += sign * np.sum(p[[4, 0, 4, 2]] * weights)
    numeric /= 2 * eps
    np.testing.assert_allclose(to64(g), numeric, rtol=1e-4, atol=1e-4)
    # the gradient is linear in the upstream gradient: its own gradient
    # (through create_graph) is the lookup again
    v = ampc.tensor(rng.normal(size=(5, 3)).astype(np.float32))
    up = ampc.tensor(weights, requires_grad=True)
    out = F.embedding(idx, w)
    gw, = ampc.autograd.grad(out, w, grad_outputs=up, create_graph=True)
    assert gw.grad_fn is not None
    gu, = ampc.autograd.grad((gw * v).sum(), up)
    np.testing.assert_allclose(to64(gu), to64(v)[[4, 0, 4, 2]], rtol=1e-6)


def test_max_norm_renormalises_the_rows_looked_up(device):
    wv = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0], [1.0, 0.0]])
    w = ampc.tensor(wv.astype(np.float32)).to(device)
    out = F.embedding(ampc.tensor([0, 1, 0, 3]).to(device), w, max_norm=1.0)
    want = wv.copy()
    want[0] = [0.6, 0.8]                  # norm 5 -> 1; row 2 not looked up
    np.testing.assert_allclose(to64(w.cpu()), want, rtol=1e-6)
    np.testing.assert_allclose(to64(out.cpu()), want[[0, 1, 0, 3]],
                               rtol=1e-6)


def test_max_norm_leaves_a_nan_row_alone():
    w = ampc.tensor([[float("nan"), 1.0], [30.0, 40.0]])
    F.embedding(ampc.tensor([0, 1]), w, max_norm=5.0)
    got = to64(w)
    assert np.isnan(got[0, 0]) and got[0, 1] == 1.0
    np.testing.assert_allclose(got[1], [3.0, 4.0], rtol=1e-6)


def test_module():
    emb = nn.Embedding(10, 3, padding_idx=2, max_norm=2.0)
    assert repr(emb) == "Embedding(10, 3, padding_idx=2, max_norm=2.0)"
    assert not to64(emb.weight)[2].any()
    assert emb.weight.requires_grad
    pre = nn.Embedding.from_pretrained(ampc.ones(4, 2))
    assert not pre.weight.requires_grad
    assert tuple(pre(ampc.tensor([[0, 3]])).shape) == (1, 2, 2)
    assert set(emb.state_dict()) == {"weight"}


def test_matches_torch():
    torch = pytest.importorskip("torch")
    wv = np.random.default_rng(2).normal(size=(11, 7)).astype(np.float32)
    w = ampc.tensor(wv, requires_grad=True)
    tw = torch.from_numpy(wv.copy()).requires_grad_()
    kw = dict(padding_idx=3, scale_grad_by_freq=True)
    out = F.embedding(ampc.tensor(IDX), w, **kw)
    tout = torch.nn.functional.embedding(torch.from_numpy(IDX), tw, **kw)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(to64(out), tout.detach().double().numpy())
    np.testing.assert_allclose(to64(w.grad), tw.grad.double().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_bad_arguments():
    w = ampc.randn(5, 3)
    with pytest.raises(RuntimeError, match="to have scalar type Long"):
        F.embedding(ampc.ones(2), w)
    with pytest.raises(RuntimeError, match="weight must be 2-D"):
        F.embedding(ampc.tensor([0]), ampc.randn(5))
    with pytest.raises(AssertionError, match="padding_idx 5 must be within"):
        F.embedding(ampc.tensor([0]), w, padding_idx=5)
    with pytest.raises(RuntimeError, match="sparse=True"):
        F.embedding(ampc.tensor([0]), w, sparse=True)
    with pytest.raises(IndexError):
        F.embedding(ampc.tensor([7]), w)
    with pytest.raises(ValueError, match="num_embeddings must be"):
        nn.Embedding(-1, 3)
