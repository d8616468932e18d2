"""nn.MultiheadAttention and F.multi_head_attention_forward: PyTorch's
parameters (names, shapes, initialisation), and, with torch's weights
loaded through state_dict, torch's outputs, attention weights and
gradients for every layout, mask kind and option; PyTorch's errors."""
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from helpers import to64

torch = pytest.importorskip("torch")


def copy_weights(tm, am):
    """Load torch module tm's state_dict into ampc module am."""
    result = am.load_state_dict({k: ampc.tensor(v.detach().numpy())
                                 for k, v in tm.state_dict().items()})
    assert not result.missing_keys and not result.unexpected_keys


def make_mask(rng, kind, shape):
    """A bool (True = masked out) or float mask; no row fully masked."""
    m = rng.random(shape) > 0.6
    m[..., 0] = False
    if kind == "float":
        m = (np.where(m, -1e9, 0.0) * rng.random(shape)).astype(np.float32)
    if kind == "causal":
        m = np.triu(np.ones(shape, dtype=bool), 1)
    return m


def run_pair(rng, module_kw=None, call_kw=None, batch_first=False,
             batched=True, self_attn=True, L=5, S=7, N=3, E=8, H=2):
    """Run torch's and ampc's module on the same inputs and weights;
    compare outputs, weights and all gradients."""
    module_kw, call_kw = module_kw or {}, dict(call_kw or {})
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first,
                                     **module_kw)
    am = nn.MultiheadAttention(E, H, batch_first=batch_first, **module_kw)
    copy_weights(tm, am)
    kd, vd = module_kw.get("kdim", E), module_kw.get("vdim", E)
    S = L if self_attn else S

    def shape(n, d):
        if not batched:
            return (n, d)
        return (N, n, d) if batch_first else (n, N, d)

    def arr(*s):
        return rng.standard_normal(s).astype(np.float32)

    q = arr(*shape(L, E))
    k = q if self_attn else arr(*shape(S, kd))
    v = k if k is q or call_kw.pop("kv_same", False) else arr(*shape(S, vd))
    ins = {}
    for lib, mk in (("t", torch.tensor), ("a", ampc.tensor)):
        qx = mk(q, requires_grad=True)
        kx = qx if k is q else mk(k, requires_grad=True)
        vx = kx if v is k else mk(v, requires_grad=True)
        ins[lib] = (qx, kx, vx)
    kwt, kwa = {}, {}
    for name, val in call_kw.items():
        if name in ("key_padding_mask", "attn_mask"):
            if name == "key_padding_mask":
                m = make_mask(rng, val, (N, S) if batched else (S,))
            elif val == "3d":
                m = make_mask(rng, "bool", ((N if batched else 1) * H, L, S))
            else:
                m = make_mask(rng, val, (L, S))
            kwt[name], kwa[name] = torch.tensor(m), ampc.tensor(m)
        else:
            kwt[name] = kwa[name] = val
    to, tw = tm(*ins["t"], **kwt)
    ao, aw = am(*ins["a"], **kwa)
    np.testing.assert_allclose(to64(ao), to.detach().numpy(), atol=1e-6)
    assert (aw is None) == (tw is None)
    if tw is not None:
        np.testing.assert_allclose(to64(aw), tw.detach().numpy(), atol=1e-6)
    g = rng.standard_normal(tuple(to.shape)).astype(np.float32)
    (to * torch.tensor(g)).sum().backward()
    (ao * ampc.tensor(g)).sum().backward()
    for x, y in zip(ins["t"], ins["a"]):
        np.testing.assert_allclose(to64(y.grad), x.grad.numpy(), atol=2e-6)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(to64(am.get_parameter(name).grad),
                                   p.grad.numpy(), atol=5e-6, err_msg=name)
    return ao, aw


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("self_attn", [True, False])
def test_layouts_match_torch(rng, batch_first, batched, self_attn):
    run_pair(rng, batch_first=batch_first, batched=batched,
             self_attn=self_attn)


@pytest.mark.parametrize("module_kw", [
    {"bias": False}, {"add_bias_kv": True}, {"add_zero_attn": True},
    {"kdim": 5, "vdim": 6}, {"add_bias_kv": True, "add_zero_attn": True},
])
def test_options_match_torch(rng, module_kw):
    run_pair(rng, module_kw, {"key_padding_mask": "bool",
                              "attn_mask": "bool"}, self_attn=False)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masks", [
    {"key_padding_mask": "bool"}, {"key_padding_mask": "float"},
    {"attn_mask": "bool"}, {"attn_mask": "float"}, {"attn_mask": "3d"},
    {"attn_mask": "float", "key_padding_mask": "float"},
    {"attn_mask": "causal", "is_causal": True},
    {"attn_mask": "causal", "is_causal": True, "key_padding_mask": "bool"},
])
def test_masks_match_torch(rng, need_weights, masks):
    run_pair(rng, call_kw=dict(masks, need_weights=need_weights),
             self_attn="is_causal" in masks)


def test_unbatched_masks_and_per_head_weights(rng):
    run_pair(rng, call_kw={"attn_mask": "3d", "key_padding_mask": "bool"},
             batched=False, self_attn=False)
    _, w = run_pair(rng, call_kw={"average_attn_weights": False,
                                  "kv_same": True}, self_attn=False)
    assert w.shape == (3, 2, 5, 7)


def test_parameters_and_init():
    m = nn.MultiheadAttention(64, 8)
    assert list(m.state_dict()) == ["in_proj_weight", "in_proj_bias",
                                    "out_proj.weight", "out_proj.bias"]
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(m.out_proj, nn.Linear)
    assert not to64(m.in_proj_bias).any() and not to64(m.out_proj.bias).any()
    w = to64(m.in_proj_weight)
    bound = math.sqrt(6.0 / (64 + 192))        # xavier_uniform_ of (192, 64)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    m = nn.MultiheadAttention(8, 2, bias=False, add_bias_kv=True, kdim=3,
                              vdim=5)
    tm = torch.nn.MultiheadAttention(8, 2, bias=False, add_bias_kv=True,
                                     kdim=3, vdim=5)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    assert m.in_proj_weight is None and m.head_dim == 4


def test_dropout_only_in_training():
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = ampc.randn(4, 2, 8)
    ampc.manual_seed(1)
    a, w = m(x, x, x)
    ampc.manual_seed(1)
    b, _ = m(x, x, x)
    assert np.array_equal(to64(a), to64(b))
    m.eval()
    c, w = m(x, x, x)
    np.testing.assert_allclose(to64(w).sum(-1), 1.0, rtol=1e-5)
    assert not np.allclose(to64(a), to64(c))


def test_functional_matches_module(rng):
    m = nn.MultiheadAttention(8, 2)
    x = ampc.tensor(rng.standard_normal((5, 3, 8)).astype(np.float32))
    out, w = F.multi_head_attention_forward(
        x, x, x, 8, 2, m.in_proj_weight, m.in_proj_bias, None, None, False,
        0.0, m.out_proj.weight, m.out_proj.bias)
    want, want_w = m(x, x, x)
    assert np.array_equal(to64(out), to64(want))
    assert np.array_equal(to64(w), to64(want_w))


def test_errors_are_pytorchs():
    with pytest.raises(ValueError, match="embed_dim and num_heads must be "
                       "greater than 0, got embed_dim=0 and num_heads=2"):
        nn.MultiheadAttention(0, 2)
    with pytest.raises(AssertionError, match="embed_dim must be divisible "
                       "by num_heads"):
        nn.MultiheadAttention(10, 3)
    m = nn.MultiheadAttention(8, 2)
    x = ampc.ones(5, 3, 8)
    with pytest.raises(AssertionError, match="query should be unbatched 2D "
                       "or batched 3D tensor but received 4-D"):
        m(x.unsqueeze(0), x, x)
    with pytest.raises(AssertionError, match="expected `key` and `value` to "
                       "be 3-D but found 2-D and 3-D"):
        m(x, x[0], x)
    with pytest.raises(AssertionError, match="only bool and floating types "
                       "of attn_mask are supported"):
        m(x, x, x, attn_mask=ampc.zeros(5, 5, dtype=ampc.int64))
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask "
                       r"is ampc.Size\(\[4, 5\]\), but should be \(5, 5\)"):
        m(x, x, x, attn_mask=ampc.zeros(4, 5))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying "
                       "the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="Expected key_padded_mask."
                       r"shape\[1\] to be 5, but got 4"):
        m(x, x, x, key_padding_mask=ampc.zeros(3, 4, dtype=ampc.bool))
    with pytest.raises(AssertionError, match="was expecting embedding "
                       "dimension of 8, but got 6"):
        m(ampc.ones(5, 3, 6), x, x)
    with pytest.warns(UserWarning, match="Support for mismatched "
                      "key_padding_mask and attn_mask is deprecated"):
        m(x, x, x, key_padding_mask=ampc.zeros(3, 5, dtype=ampc.bool),
          attn_mask=ampc.zeros(5, 5))
