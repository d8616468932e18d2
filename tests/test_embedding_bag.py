"""embedding_bag and nn.EmbeddingBag (ampc/nn/_embedding_bag.py; kernels
in csrc/nn_embedding_bag.c, cpu/ref/embedding_bag.c, cuda/embedding_bag.cu):
sum, mean and max of bags against a float64 NumPy reference (odd sizes,
empty bags, padding_idx, per_sample_weights, include_last_offset, 2-D
input, every float dtype), gradients by finite differences, through
create_graph, and against torch where installed; the same on a GPU
(marked cuda)."""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import device  # noqa: F401  (fixture)
from helpers import FLOAT_NAMES, assert_close, from_values, rand_values

# ----------------------------------------------------------------------------
# the reference


def ref_bag(weight, indices, starts, mode, psw=None, padding_idx=None,
            end=None):
    """weight (num, D) float64, indices, starts (one per bag) -> (bags, D);
    the last bag ends at `end` (default len(indices))."""
    end = len(indices) if end is None else end
    bounds = list(starts) + [end]
    out = np.zeros((len(starts), weight.shape[1]))
    for b in range(len(starts)):
        ks = [k for k in range(bounds[b], bounds[b + 1])
              if indices[k] != padding_idx]
        if not ks:
            continue
        rows = weight[[indices[k] for k in ks]]
        if mode == "max":
            out[b] = rows.max(0)
            continue
        w = np.ones(len(ks)) if psw is None else psw[ks]
        out[b] = (rows * w[:, None]).sum(0)
        if mode == "mean":
            out[b] /= len(ks)
    return out


def _case(seed, num=13, d=7, n=29, bags=6, dtype="float32"):
    rng = np.random.default_rng(seed)
    weight = rand_values((num, d), dtype, rng)
    indices = rng.integers(0, num, n)
    cuts = np.sort(rng.integers(0, n + 1, bags - 1))
    starts = np.concatenate([[0], cuts])
    starts[2] = starts[3]           # an empty bag
    return weight, indices, starts


# ----------------------------------------------------------------------------
# values


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_matches_numpy(device, dtype, mode, padding_idx):
    weight, indices, starts = _case(1, dtype=dtype)
    indices[::5] = 4
    w = from_values(weight, dtype).to(device)
    out = F.embedding_bag(ampc.tensor(indices, device=device), w,
                          ampc.tensor(starts, device=device), mode=mode,
                          padding_idx=padding_idx)
    expect = ref_bag(weight, indices, starts, mode,
                     padding_idx=padding_idx)
    assert out.dtype is w.dtype and out.shape == expect.shape
    assert_close(out.cpu(), expect, dtype, k=4)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_per_sample_weights(device, dtype):
    weight, indices, starts = _case(2, num=40, d=33, n=101, bags=9,
                                    dtype=dtype)
    psw = rand_values((len(indices),), dtype, np.random.default_rng(3))
    out = F.embedding_bag(ampc.tensor(indices, device=device),
                          from_values(weight, dtype).to(device),
                          ampc.tensor(starts, device=device), mode="sum",
                          per_sample_weights=from_values(psw, dtype)
                          .to(device))
    assert_close(out.cpu(), ref_bag(weight, indices, starts, "sum", psw),
                 dtype, k=8)


def test_include_last_offset_and_2d_input(device):
    weight, indices, starts = _case(4)
    w = from_values(weight, "float32").to(device)
    ends = np.concatenate([starts, [20]])
    out = F.embedding_bag(ampc.tensor(indices, device=device), w,
                          ampc.tensor(ends, device=device), mode="sum",
                          include_last_offset=True)
    assert_close(out.cpu(), ref_bag(weight, indices, starts, "sum",
                                    end=20), "float32")
    two = indices[:28].reshape(7, 4)
    out = F.embedding_bag(ampc.tensor(two, device=device), w, mode="max")
    assert_close(out.cpu(), ref_bag(weight, two.reshape(-1),
                                    np.arange(0, 28, 4), "max"), "float32")


def test_a_large_bag_set(device):
    """Many bags over a big table (the threads' split and the GPU grid)."""
    weight, indices, starts = _case(5, num=1003, d=65, n=5003, bags=777)
    w = from_values(weight, "float32").to(device)
    for mode in ("sum", "mean", "max"):
        out = F.embedding_bag(ampc.tensor(indices, device=device), w,
                              ampc.tensor(starts, device=device), mode=mode)
        assert_close(out.cpu(), ref_bag(weight, indices, starts, mode),
                     "float32", k=8)


# ----------------------------------------------------------------------------
# gradients


def _grad_case(mode, psw=False, padding_idx=None, freq=False):
    weight, indices, starts = _case(6, num=9, d=5, n=23, bags=5)
    indices[::4] = 3
    rng = np.random.default_rng(7)
    g = rng.uniform(0.5, 1.5, size=(len(starts), 5))
    wt = ampc.tensor(weight.astype(np.float32), requires_grad=True)
    ps = None
    if psw:
        pv = rng.uniform(-1, 1, len(indices)).astype(np.float32)
        ps = ampc.tensor(pv, requires_grad=True)
    out = F.embedding_bag(ampc.tensor(indices), wt, ampc.tensor(starts),
                          mode=mode, per_sample_weights=ps,
                          padding_idx=padding_idx, scale_grad_by_freq=freq)
    (out * ampc.tensor(g.astype(np.float32))).sum().backward()
    return weight, indices, starts, g, wt, ps


def _numeric(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        a, b = x.copy(), x.copy()
        a[i] += eps
        b[i] -= eps
        grad[i] = (f(a) - f(b)) / (2 * eps)
    return grad


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_weight_gradient_by_finite_differences(mode, padding_idx):
    weight, indices, starts, g, wt, _ = _grad_case(mode,
                                                   padding_idx=padding_idx)
    pad = padding_idx

    def loss(w):
        return (ref_bag(w, indices, starts, mode, padding_idx=pad) * g).sum()
    assert_close(wt.grad, _numeric(loss, weight.astype(np.float64)),
                 "float32", rtol=1e-4, atol=1e-5)


def test_per_sample_weights_gradient():
    weight, indices, starts, g, wt, ps = _grad_case("sum", psw=True,
                                                    padding_idx=3)
    pv = ps.detach().numpy().astype(np.float64)

    def by_w(w):
        return (ref_bag(w, indices, starts, "sum", pv, 3) * g).sum()

    def by_p(p):
        return (ref_bag(weight, indices, starts, "sum", p, 3) * g).sum()
    assert_close(wt.grad, _numeric(by_w, weight.copy()), "float32",
                 rtol=1e-4, atol=1e-5)
    assert_close(ps.grad, _numeric(by_p, pv.copy()), "float32", rtol=1e-4,
                 atol=1e-5)


def test_scale_grad_by_freq():
    weight, indices, starts, g, wt, _ = _grad_case("mean", freq=True)
    plain = ref_bag
    counts = np.bincount(indices, minlength=9)

    def loss(w):
        return (plain(w, indices, starts, "mean") * g).sum()
    expect = _numeric(loss, weight.copy()) / np.maximum(counts, 1)[:, None]
    assert_close(wt.grad, expect, "float32", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_16bit_gradient_is_rounded_once(device, dtype, mode):
    weight, indices, starts = _case(8, num=11, d=9, n=31, bags=5,
                                    dtype=dtype)
    w = from_values(weight, dtype).to(device).requires_grad_()
    out = F.embedding_bag(ampc.tensor(indices, device=device), w,
                          ampc.tensor(starts, device=device), mode=mode)
    out.float().sum().backward()
    w32 = ampc.tensor(weight.astype(np.float32), requires_grad=True)
    F.embedding_bag(ampc.tensor(indices), w32, ampc.tensor(starts),
                    mode=mode).sum().backward()
    assert w.grad.dtype is w.dtype
    assert_close(w.grad.cpu(), w32.grad.numpy().astype(np.float64), dtype)


def test_create_graph(device):
    weight, indices, starts = _case(9)
    for mode in ("sum", "mean", "max"):
        w = from_values(weight, "float32").to(device).requires_grad_()
        ps = None
        if mode == "sum":
            ps = ampc.rand(len(indices), device=device).requires_grad_()
        out = F.embedding_bag(ampc.tensor(indices, device=device), w,
                              ampc.tensor(starts, device=device), mode=mode,
                              per_sample_weights=ps)
        gw, = ampc.autograd.grad((out * out).sum(), w, create_graph=True)
        plain, = ampc.autograd.grad((out * out).sum(), w, retain_graph=True)
        assert_close(gw.detach().cpu(), plain.cpu().numpy().astype(
            np.float64), "float32", k=4)
        gw.sum().backward()          # through the formula: no error
        assert w.grad is not None


# ----------------------------------------------------------------------------
# module, torch, errors


def test_module():
    bag = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=-1)
    assert repr(bag) == "EmbeddingBag(10, 3, mode='sum', padding_idx=9)"
    assert bag.weight[9].abs().sum().item() == 0
    out = bag(ampc.tensor([1, 2, 4, 5]), ampc.tensor([0, 2]))
    assert out.shape == (2, 3)
    out.sum().backward()
    assert bag.weight.grad.shape == (10, 3)
    pre = nn.EmbeddingBag.from_pretrained(ampc.arange(6.0).view(3, 2),
                                          mode="max")
    assert not pre.weight.requires_grad
    assert pre(ampc.tensor([[0, 2]])).tolist() == [[4.0, 5.0]]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_matches_torch(mode):
    torch = pytest.importorskip("torch")
    weight, indices, starts = _case(10, num=50, d=17, n=203, bags=31)
    indices[::6] = 7
    g = np.random.default_rng(11).normal(size=(31, 17)).astype(np.float32)
    kw = dict(mode=mode, padding_idx=7)
    if mode == "sum":
        psw = np.random.default_rng(12).normal(size=203).astype(np.float32)
    w = ampc.tensor(weight.astype(np.float32), requires_grad=True)
    tw = torch.tensor(weight.astype(np.float32), requires_grad=True)
    a_ps = ampc.tensor(psw, requires_grad=True) if mode == "sum" else None
    t_ps = torch.tensor(psw, requires_grad=True) if mode == "sum" else None
    out = F.embedding_bag(ampc.tensor(indices), w, ampc.tensor(starts),
                          per_sample_weights=a_ps, **kw)
    tout = torch.nn.functional.embedding_bag(
        torch.tensor(indices), tw, torch.tensor(starts),
        per_sample_weights=t_ps, **kw)
    assert_close(out, tout.detach().double().numpy(), "float32", k=4)
    (out * ampc.tensor(g)).sum().backward()
    (tout * torch.tensor(g)).sum().backward()
    assert_close(w.grad, tw.grad.double().numpy(), "float32", k=4)
    if mode == "sum":
        assert_close(a_ps.grad, t_ps.grad.double().numpy(), "float32", k=8)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    weight, indices, starts = _case(13, num=30, d=8, n=61, bags=7,
                                    dtype=dtype)
    for mode in ("sum", "mean", "max"):
        out = F.embedding_bag(ampc.tensor(indices), from_values(weight, dtype),
                              ampc.tensor(starts), mode=mode)
        tout = torch.nn.functional.embedding_bag(
            torch.tensor(indices), torch.tensor(weight).to(getattr(torch,
                                                                   dtype)),
            torch.tensor(starts), mode=mode)
        assert_close(out, tout.double().numpy(), dtype, k=4)


@pytest.mark.parametrize("call,exc,match", [
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w, ampc.tensor([1])),
     RuntimeError, "offsets\\[0\\] has to be 0"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w, ampc.tensor([0, 3])),
     RuntimeError, "outside \\[0, 2\\]"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 9]), w, ampc.tensor([0])),
     IndexError, "valid range"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w, ampc.tensor([0]),
                               mode="max",
                               per_sample_weights=ampc.ones(2)),
     NotImplementedError, "only supported for mode='sum'"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w, ampc.tensor([0]),
                               mode="bad"),
     ValueError, "mode has to be one of sum, mean or max"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w),
     ValueError, "offsets has to be a 1D Tensor but got None"),
    (lambda w: F.embedding_bag(ampc.tensor([[1, 2]]), w, ampc.tensor([0])),
     ValueError, "if input is 2D, then offsets has to be None"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w, ampc.tensor([0]),
                               mode="max", scale_grad_by_freq=True),
     ValueError, "max mode does not support scaling"),
    (lambda w: F.embedding_bag(ampc.tensor([1.0, 2.0]), w, ampc.tensor([0])),
     RuntimeError, "to have one of the following scalar types: Long"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w, ampc.tensor([0]),
                               per_sample_weights=ampc.ones(3)),
     ValueError, "must have the same shape as the input"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w[0], ampc.tensor([0])),
     ValueError, "weight has to be a 2D Tensor"),
    (lambda w: F.embedding_bag(ampc.tensor([1, 2]), w, ampc.tensor([0]),
                               padding_idx=4),
     AssertionError, "padding_idx must be within num_embeddings"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call(ampc.arange(12.0).view(4, 3))


@pytest.mark.parametrize("module", ["ampc.nn._embedding_bag", "ampc.nn.modules.embedding"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
