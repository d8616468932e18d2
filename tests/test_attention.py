"""F.scaled_dot_product_attention: values against a float64 NumPy
reference (odd sizes, float32/float16/bfloat16, bool and float masks,
causal, GQA, scale, all-masked rows), gradients against torch, dropout
statistics from ampc's generator, autocast, PyTorch's errors, and CUDA
against the CPU (skipped without a GPU)."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
from cuda_helpers import requires_cuda
from helpers import assert_close, from_values, rand_values, to64, to_torch

SDPA = F.scaled_dot_product_attention
_OP = "scaled_dot_product_attention"


def ref_sdpa(q, k, v, mask=None, causal=False, scale=None, gqa=False):
    """float64 attention; rows with every key masked give 0 (PyTorch)."""
    if gqa:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        mask = np.tril(np.ones(s.shape[-2:], dtype=bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    top = s.max(-1, keepdims=True)
    dead = np.isneginf(top)
    e = np.exp(s - np.where(dead, 0.0, top))
    w = np.where(dead, 0.0, e / np.where(dead, 1.0, e.sum(-1, keepdims=True)))
    return w @ v


def qkv(rng, dtype, batch, L, S, E, Ev, heads_kv=None):
    hk = batch if heads_kv is None else batch[:-1] + (heads_kv,)
    vals = [rand_values(batch + (L, E), dtype, rng, -2, 2),
            rand_values(hk + (S, E), dtype, rng, -2, 2),
            rand_values(hk + (S, Ev), dtype, rng, -2, 2)]
    return vals, [from_values(x, dtype) for x in vals]


SIZES = [((), 1, 1, 1, 1), ((2,), 7, 5, 33, 3), ((1, 3), 33, 7, 1, 9),
         ((2, 2), 5, 33, 7, 1)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal",
                                  "scale"])
def test_values_match_numpy(rng, dtype, size, kind):
    batch, L, S, E, Ev = size
    vals, (q, k, v) = qkv(rng, dtype, batch, L, S, E, Ev)
    mask = m = None
    if kind == "bool":
        mask = rng.random((L, S)) < 0.6
        mask[:, 0] = True
        m = ampc.tensor(mask)
    elif kind == "float":
        mask = rand_values((L, S), dtype, rng)
        m = from_values(mask, dtype)
    out = SDPA(q, k, v, attn_mask=m, is_causal=kind == "causal",
               scale=0.3 if kind == "scale" else None)
    assert out.dtype.name == dtype and out.shape == batch + (L, Ev)
    want = ref_sdpa(*vals, mask=mask, causal=kind == "causal",
                    scale=0.3 if kind == "scale" else None)
    assert_close(out, want, dtype, k=max(S, E))


def test_gqa_and_broadcast_batch_dims(rng):
    vals, (q, k, v) = qkv(rng, "float32", (2, 6), 5, 7, 9, 3, heads_kv=2)
    out = SDPA(q, k, v, enable_gqa=True)
    assert_close(out, ref_sdpa(*vals, gqa=True), "float32", k=9)
    # key and value may have different head counts, each dividing query's
    v1 = v[:, :1]
    out = SDPA(q, k, v1, enable_gqa=True)
    want = ref_sdpa(vals[0], np.repeat(vals[1], 3, 1),
                    np.repeat(vals[2][:, :1], 6, 1))
    assert_close(out, want, "float32", k=9)
    # without GQA, batch dims broadcast as in matmul
    out = SDPA(q, k[:1, :1], v[:1, :1])
    assert_close(out, ref_sdpa(vals[0], vals[1][:1, :1], vals[2][:1, :1]),
                 "float32", k=9)


def test_fully_masked_rows_give_zeros(rng):
    vals, (q, k, v) = qkv(rng, "float32", (2,), 4, 6, 5, 3)
    for q_ in (q, v):
        q_.requires_grad_()
    mask = np.ones((2, 4, 6), dtype=bool)
    mask[0, 1] = False
    fmask = np.where(mask, 0.0, -np.inf).astype(np.float32)
    for m in (ampc.tensor(mask), ampc.tensor(fmask)):
        out = SDPA(q, k, v, attn_mask=m)
        assert_close(out, ref_sdpa(*vals, mask=mask), "float32", k=6)
        assert (to64(out)[0, 1] == 0).all()
        q.grad = v.grad = None
        out.sum().backward()
        assert (to64(q.grad)[0, 1] == 0).all()
        assert np.isfinite(to64(v.grad)).all()
    # no keys at all: zeros, as PyTorch
    out = SDPA(q, k[:, :0], v[:, :0])
    assert out.shape == (2, 4, 3) and not to64(out).any()


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal", "gqa",
                                  "dead"])
def test_gradients_match_torch(rng, kind):
    torch = pytest.importorskip("torch")
    hk = 2 if kind == "gqa" else 4
    _, (q, k, v) = qkv(rng, "float32", (2, 4), 7, 5, 33, 3, heads_kv=hk)
    m = None
    if kind == "bool" or kind == "dead":
        b = rng.random((2, 1, 7, 5)) < 0.6
        b[..., 0] = kind != "dead"
        m = ampc.tensor(b)
    elif kind == "float":
        m = ampc.tensor(rng.normal(size=(7, 5)).astype(np.float32),
                        requires_grad=True)
    a_in = [x.requires_grad_() for x in (q, k, v)]
    t_in = [to_torch(torch, x).requires_grad_() for x in a_in]
    tm = None if m is None else to_torch(torch, m).requires_grad_(
        m.requires_grad)
    kw = {"is_causal": kind == "causal", "enable_gqa": kind == "gqa"}
    a = SDPA(*a_in, attn_mask=m, **kw)
    t = torch.nn.functional.scaled_dot_product_attention(*t_in,
                                                         attn_mask=tm, **kw)
    g = rng.normal(size=tuple(t.shape)).astype(np.float32)
    (a * ampc.tensor(g)).sum().backward()
    (t * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(to64(a), t.detach().numpy(), atol=2e-6)
    pairs = list(zip(a_in, t_in)) + ([(m, tm)] if kind == "float" else [])
    for x, y in pairs:
        np.testing.assert_allclose(to64(x.grad), y.grad.numpy(), atol=5e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs_compute_in_float32_like_torch(rng, dtype):
    torch = pytest.importorskip("torch")
    _, (q, k, v) = qkv(rng, dtype, (2,), 17, 7, 33, 9)
    a = SDPA(q, k, v)
    t = torch.nn.functional.scaled_dot_product_attention(
        *(to_torch(torch, x) for x in (q, k, v)))
    assert a.dtype.name == dtype
    eps = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[dtype]
    np.testing.assert_allclose(to64(a), t.double().numpy(), atol=2 * eps)
    q.requires_grad_()
    SDPA(q, k, v).sum().backward()
    assert q.grad.dtype.name == dtype


def test_dropout_statistics_and_seed():
    S, p = 200, 0.25
    q = ampc.zeros(1, 64, 8)
    k = ampc.zeros(1, S, 8)
    v = ampc.eye(S).unsqueeze(0)       # the output is the weights
    ampc.manual_seed(7)
    w = to64(SDPA(q, k, v, dropout_p=p))
    kept = w != 0
    assert abs(kept.mean() - (1 - p)) < 0.02
    np.testing.assert_allclose(w[kept], 1.0 / (S * (1 - p)), rtol=1e-5)
    ampc.manual_seed(7)
    assert np.array_equal(to64(SDPA(q, k, v, dropout_p=p)), w)
    assert not np.array_equal(to64(SDPA(q, k, v, dropout_p=p)), w)
    # the gradient of v is the dropped weights, summed over queries
    v.requires_grad_()
    ampc.manual_seed(3)
    out = SDPA(q, k, v, dropout_p=p)
    out.sum().backward()
    np.testing.assert_allclose(to64(v.grad)[0], np.repeat(
        to64(out)[0].sum(0)[:, None], S, 1), rtol=1e-5)
    assert not to64(SDPA(q, k, v, dropout_p=1.0)).any()


def test_autocast_runs_in_lower_precision(rng):
    _, (q, k, v) = qkv(rng, "float32", (2,), 5, 6, 8, 4)
    q.requires_grad_()
    for dev in ("cpu", "cuda"):
        assert ampc._C.autocast_policy(_OP, dev) == "lower"
    for dtype in (ampc.bfloat16, ampc.float16):
        with ampc.autocast("cpu", dtype=dtype):
            out = SDPA(q, k, v, attn_mask=ampc.ones(5, 6, dtype=ampc.bool))
        assert out.dtype is dtype
        want = SDPA(q.detach().to(dtype), k.to(dtype), v.to(dtype))
        assert np.array_equal(to64(out), to64(want))
        out.float().sum().backward()
        assert q.grad.dtype is ampc.float32


def test_errors_name_the_argument():
    q, k, v = ampc.ones(3, 8), ampc.ones(4, 8), ampc.ones(4, 2)
    with pytest.raises(TypeError, match=r"scaled_dot_product_attention\(\): "
                       r"argument 'query' \(position 1\) must be Tensor, "
                       "not str"):
        SDPA("a", k, v)
    with pytest.raises(TypeError, match="argument 'attn_mask' must be "
                       "Tensor, not int"):
        SDPA(q, k, v, attn_mask=3)
    with pytest.raises(RuntimeError, match="to have the same dtype, but got "
                       "query.dtype: float key.dtype: c10::Half and "
                       "value.dtype: float instead"):
        SDPA(q, k.half(), v)
    with pytest.raises(RuntimeError, match="at least 2 dimensional, but got "
                       "query.dim: 1 key.dim: 2 and value.dim: 2"):
        SDPA(ampc.ones(8), k, v)
    with pytest.raises(RuntimeError, match="attn_mask.dtype: long int and  "
                       "query.dtype: float"):
        SDPA(q, k, v, attn_mask=ampc.zeros(3, 4, dtype=ampc.int64))
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be "
                       "set when is_causal=True"):
        SDPA(q, k, v, attn_mask=ampc.zeros(3, 4), is_causal=True)
    with pytest.raises(RuntimeError, match="Number of heads in key and value "
                       "must divide"):
        SDPA(ampc.ones(4, 3, 8), ampc.ones(3, 4, 8), ampc.ones(3, 4, 2),
             enable_gqa=True)
    with pytest.raises(RuntimeError, match="dropout probability has to be "
                       "between 0 and 1, but got 1.5"):
        SDPA(q, k, v, dropout_p=1.5)
    with pytest.raises(RuntimeError, match=r"key's last dim \(7\) must equal "
                       r"query's \(8\)"):
        SDPA(q, ampc.ones(4, 7), v)
    with pytest.raises(RuntimeError, match="same sequence length"):
        SDPA(q, k, ampc.ones(5, 2))
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \[2, 1, 3, "
                       r"4\] does not broadcast to the attention scores' "
                       r"shape \[3, 4\]"):
        SDPA(q, k, v, attn_mask=ampc.zeros(2, 1, 3, 4))


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kind", ["none", "bool", "causal", "dead"])
def test_cuda_matches_cpu(rng, dtype, kind):
    _, cpu = qkv(rng, dtype, (2, 3), 17, 9, 33, 5)
    m = None
    if kind in ("bool", "dead"):
        b = rng.random((17, 9)) < 0.5
        b[:, 0] = kind == "bool"
        m = ampc.tensor(b)
    outs, grads = [], []
    for dev in ("cpu", "cuda"):
        x = [t.to(dev).detach().requires_grad_() for t in cpu]
        out = SDPA(*x, attn_mask=None if m is None else m.to(dev),
                   is_causal=kind == "causal")
        out.float().sum().backward()
        outs.append(to64(out.cpu()))
        grads.append([to64(t.grad.cpu()) for t in x])
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    np.testing.assert_allclose(outs[1], outs[0], atol=tol, rtol=tol)
    for g1, g0 in zip(grads[1], grads[0]):
        np.testing.assert_allclose(g1, g0, atol=4 * tol, rtol=4 * tol)
