"""F.normalize, F.cosine_similarity, F.pairwise_distance and the
CosineSimilarity / PairwiseDistance modules (ampc/nn/_similarity.py)
against float64 NumPy, finite differences and torch."""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import requires_cuda
from helpers import (FLOAT_NAMES, assert_close, gradcheck, make,
                     rand_values, to64, to_torch, torch_or_skip)


def _norm(v, p, axis, keepdims=True):
    return np.sum(np.abs(v) ** p, axis=axis, keepdims=keepdims) ** (1 / p)


def _cos(a, b, dim, eps=1e-8):
    a, b = np.broadcast_arrays(a, b)
    na = np.maximum(_norm(a, 2, dim), eps)
    nb = np.maximum(_norm(b, 2, dim), eps)
    return np.sum((a / na) * (b / nb), axis=dim)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", (1, 7, 33, 1031))
def test_normalize(dtype, n, rng):
    v = rand_values((3, n), dtype, rng)
    x = make(v, dtype, "step")
    for p, dim in ((2.0, 1), (1.0, 0), (3.0, -1)):
        want = v / np.maximum(_norm(v, p, dim), 1e-12)
        assert_close(F.normalize(x, p, dim), want, dtype, k=8)
    assert F.normalize(ampc.zeros(2, 3)).tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("n", (1, 7, 33, 1031))
def test_cosine_similarity(dtype, n, rng):
    a = rand_values((4, n), dtype, rng)
    b = rand_values((1, n), dtype, rng)
    x, y = make(a, dtype, "step"), make(b, dtype)
    got = F.cosine_similarity(x, y, dim=1)
    assert got.dtype.name == dtype and got.shape == (4,)
    assert_close(got, _cos(a, b, 1), dtype, k=8)
    assert_close(nn.CosineSimilarity(dim=0)(x, x), _cos(a, a, 0), dtype,
                 k=8)


def test_cosine_similarity_matches_torch_with_gradients():
    torch = torch_or_skip()
    rng = np.random.default_rng(4)
    a = rng.normal(size=(5, 7)).astype(np.float32)
    b = rng.normal(size=(7,)).astype(np.float32)
    a[1] = 0.0                                       # a norm below eps
    a[2] = 1e-9
    for dim in (1, -1):
        xa = ampc.tensor(a, requires_grad=True)
        xb = ampc.tensor(b, requires_grad=True)
        ta = torch.tensor(a, requires_grad=True)
        tb = torch.tensor(b, requires_grad=True)
        out = F.cosine_similarity(xa, xb, dim, eps=1e-6)
        ref = torch.nn.functional.cosine_similarity(ta, tb, dim, eps=1e-6)
        assert np.allclose(to64(out), ref.detach().numpy(), atol=1e-6)
        w = rng.normal(size=5).astype(np.float32)
        (out * ampc.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        assert np.allclose(to64(xa.grad), ta.grad.numpy(), rtol=1e-4,
                           atol=1e-5)
        assert np.allclose(to64(xb.grad), tb.grad.numpy(), rtol=1e-4,
                           atol=1e-5)


def test_cosine_similarity_finite_differences_and_dtypes():
    gradcheck(lambda a, b: F.cosine_similarity(a, b, 0),
              lambda a, b: _cos(a, b, 0), [(4, 3), (4, 1)])
    i = ampc.ones(2, 3, dtype=ampc.int64)
    assert F.cosine_similarity(i, ampc.ones(2, 3)).dtype is ampc.float32
    with pytest.raises(RuntimeError, match="cosine_similarity.*common "
                       "dtype to be floating point"):
        F.cosine_similarity(i, i)
    with pytest.raises(RuntimeError, match="size of tensor a"):
        F.cosine_similarity(ampc.zeros(3, 4), ampc.zeros(3, 5))
    with pytest.raises(TypeError, match="cosine_similarity.*'x2'"):
        F.cosine_similarity(ampc.zeros(3), [1.0])


def test_pairwise_distance():
    torch = torch_or_skip()
    rng = np.random.default_rng(7)
    a = rng.normal(size=(6, 33)).astype(np.float32)
    b = rng.normal(size=(33,)).astype(np.float32)
    for p in (2.0, 1.0, 3.0, float("inf")):
        for keepdim in (False, True):
            out = F.pairwise_distance(ampc.tensor(a), ampc.tensor(b), p,
                                      keepdim=keepdim)
            ref = torch.nn.functional.pairwise_distance(
                torch.tensor(a), torch.tensor(b), p, keepdim=keepdim)
            assert out.shape == tuple(ref.shape)
            assert np.allclose(to64(out), ref.numpy(), rtol=1e-5)
    d = nn.PairwiseDistance(p=1.0, eps=0.0)(ampc.zeros(2, 3), ampc.ones(3))
    assert d.tolist() == [3.0, 3.0]
    diff = lambda x, y: _norm(x - y + 1e-6, 2, -1, False)  # noqa: E731
    gradcheck(F.pairwise_distance, diff, [(3, 4), (3, 4)])
    with pytest.raises(RuntimeError, match="size of tensor a"):
        F.pairwise_distance(ampc.zeros(3, 4), ampc.zeros(3, 5))


def test_normalize_matches_torch_gradient():
    torch = torch_or_skip()
    v = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    x = ampc.tensor(v, requires_grad=True)
    t = torch.tensor(v, requires_grad=True)
    F.normalize(x).pow(3).sum().backward()
    torch.nn.functional.normalize(t).pow(3).sum().backward()
    assert np.allclose(to64(x.grad), t.grad.numpy(), atol=1e-6)
    with pytest.raises(RuntimeError, match="normalize.*floating point"):
        F.normalize(ampc.ones(2, 2, dtype=ampc.int64))


def test_similarity_module_reprs():
    assert repr(nn.CosineSimilarity()) == "CosineSimilarity()"
    assert repr(nn.PairwiseDistance()) == "PairwiseDistance()"


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_float32_ops():
    """prod, logsumexp and cosine_similarity run in float32 under CUDA
    autocast, as PyTorch lists them."""
    x = ampc.randn(4, 8, device="cuda").half()
    with ampc.autocast("cuda"):
        assert x.prod(1).dtype is ampc.float32
        assert x.logsumexp(1).dtype is ampc.float32
        assert F.cosine_similarity(x, x).dtype is ampc.float32
        assert ampc.addmm(x.float()[:, :4], x.float(),
                          x.float().t()[:, :4]).dtype is ampc.float16
    cpu = x.cpu().float()
    assert np.allclose(to64(x.float().prod(1).cpu()), to64(cpu.prod(1)),
                       rtol=1e-5)
    assert np.allclose(to64(x.float().logsumexp(1).cpu()),
                       to64(cpu.logsumexp(1)), rtol=1e-5)
    assert np.allclose(to64(x.float().tril(1).cpu()), to64(cpu.tril(1)))


def test_cpu_autocast_leaves_float32_policy_ops_alone():
    torch = torch_or_skip()
    x = ampc.randn(3, 5).bfloat16()
    with ampc.autocast("cpu"):
        a = x.logsumexp(1)
        b = F.cosine_similarity(x, x)
    with torch.autocast("cpu"):
        tx = to_torch(torch, x)
        assert a.dtype.name == str(tx.logsumexp(1).dtype).split(".")[1]
        assert b.dtype.name == str(torch.nn.functional.cosine_similarity(
            tx, tx).dtype).split(".")[1]


def test_second_derivatives_match_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(8)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=(3, 4)).astype(np.float32)
    x, tx = ampc.tensor(a, requires_grad=True), torch.tensor(
        a, requires_grad=True)
    y, ty = ampc.tensor(b), torch.tensor(b)
    for f, tf in ((F.cosine_similarity, torch.nn.functional.cosine_similarity),
                  (F.pairwise_distance, torch.nn.functional.pairwise_distance),
                  (F.normalize, torch.nn.functional.normalize)):
        g, = ampc.autograd.grad(f(x, y).pow(2).sum() if f is not F.normalize
                                else f(x).pow(3).sum(), x, create_graph=True)
        tg, = torch.autograd.grad(tf(tx, ty).pow(2).sum() if f is not
                                  F.normalize else tf(tx).pow(3).sum(), tx,
                                  create_graph=True)
        h, = ampc.autograd.grad(g.pow(2).sum(), x)
        th, = torch.autograd.grad(tg.pow(2).sum(), tx)
        assert np.allclose(to64(h), th.numpy(), rtol=1e-3, atol=1e-4), f
