"""nn.TransformerDecoderLayer, nn.TransformerDecoder and nn.Transformer
against torch's, with torch's weights loaded through state_dict (dropout
0): outputs and gradients of tgt, memory/src and every parameter, with
masks, causal hints, pre-norm, batch_first and unbatched inputs."""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
from helpers import to64

torch = pytest.importorskip("torch")


def copy_weights(tm, am):
    result = am.load_state_dict({k: ampc.tensor(v.detach().numpy())
                                 for k, v in tm.state_dict().items()})
    assert not result.missing_keys and not result.unexpected_keys


def compare(tm, am, inputs, masks=None):
    """Call both modules on the arrays ``inputs`` (positional) and the
    array or flag ``masks`` (keywords); compare outputs and gradients."""
    masks = masks or {}
    xt = [torch.tensor(a, requires_grad=True) for a in inputs]
    xa = [ampc.tensor(a, requires_grad=True) for a in inputs]

    def kw(mk):
        return {k: mk(v) if isinstance(v, np.ndarray) else v
                for k, v in masks.items()}
    ot, oa = tm(*xt, **kw(torch.tensor)), am(*xa, **kw(ampc.tensor))
    np.testing.assert_allclose(to64(oa), ot.detach().numpy(), atol=3e-5)
    g = np.random.default_rng(5).standard_normal(tuple(ot.shape)) \
        .astype(np.float32)
    (ot * torch.tensor(g)).sum().backward()
    (oa * ampc.tensor(g)).sum().backward()
    for t, a in zip(xt, xa):
        np.testing.assert_allclose(to64(a.grad), t.grad.numpy(), atol=3e-5)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(to64(am.get_parameter(name).grad),
                                   p.grad.numpy(), atol=1e-4, err_msg=name)


def causal(n):
    return np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)


@pytest.mark.parametrize("case", ["plain", "norm_first", "masks",
                                  "batch_first", "unbatched"])
def test_decoder_layer_matches_torch(rng, case):
    kw = dict(dim_feedforward=24, dropout=0.0, activation="gelu",
              norm_first=case == "norm_first",
              batch_first=case == "batch_first")
    torch.manual_seed(0)
    tm = torch.nn.TransformerDecoderLayer(16, 4, **kw)
    am = nn.TransformerDecoderLayer(16, 4, **kw)
    copy_weights(tm, am)
    if case == "unbatched":
        shapes = [(5, 16), (7, 16)]
    elif case == "batch_first":
        shapes = [(3, 5, 16), (3, 7, 16)]
    else:
        shapes = [(5, 3, 16), (7, 3, 16)]
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    masks = {}
    if case == "masks":
        kpm = np.zeros((3, 7), dtype=np.float32)
        kpm[1, 5:] = -np.inf
        masks = {"tgt_mask": causal(5), "tgt_is_causal": True,
                 "memory_key_padding_mask": kpm,
                 "memory_mask": rng.standard_normal((5, 7)).astype(
                     np.float32)}
    compare(tm, am, inputs, masks)


def test_decoder_and_transformer_match_torch(rng):
    kw = dict(dim_feedforward=24, dropout=0.0, batch_first=True)
    torch.manual_seed(0)
    td = torch.nn.TransformerDecoder(
        torch.nn.TransformerDecoderLayer(16, 4, **kw), 2,
        norm=torch.nn.LayerNorm(16))
    ad = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, **kw), 2,
                               norm=nn.LayerNorm(16))
    for p in td.parameters():
        torch.nn.init.normal_(p, std=0.3)
    copy_weights(td, ad)
    tgt = rng.standard_normal((2, 5, 16)).astype(np.float32)
    mem = rng.standard_normal((2, 6, 16)).astype(np.float32)
    compare(td, ad, [tgt, mem], {"tgt_mask": causal(5)})
    torch.manual_seed(0)
    tt = torch.nn.Transformer(16, 4, 2, 1, **kw)
    at = nn.Transformer(16, 4, 2, 1, **kw)
    assert list(at.state_dict()) == list(tt.state_dict())
    copy_weights(tt, at)
    src = rng.standard_normal((2, 6, 16)).astype(np.float32)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    np.testing.assert_array_equal(
        to64(mask), torch.nn.Transformer.generate_square_subsequent_mask(
            5).numpy())
    compare(tt, at, [src, tgt], {"tgt_mask": to64(mask).astype(np.float32)})


def test_transformer_init_and_errors():
    ampc.manual_seed(0)
    m = nn.Transformer(16, 4, 1, 1, 32, batch_first=True)
    w = to64(m.decoder.layers[0].linear1.weight)
    bound = np.sqrt(6.0 / (16 + 32))            # xavier_uniform_
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not to64(m.encoder.layers[0].self_attn.in_proj_bias).any()
    with pytest.raises(RuntimeError, match="the batch number of src and "
                       "tgt must be equal"):
        m(ampc.ones(2, 3, 16), ampc.ones(3, 3, 16))
    with pytest.raises(RuntimeError, match="the feature number of src and "
                       "tgt must be equal to d_model"):
        m(ampc.ones(2, 3, 16), ampc.ones(2, 3, 8))
