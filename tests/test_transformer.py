"""nn.TransformerEncoderLayer and nn.TransformerEncoder against torch's,
with torch's weights loaded through state_dict (dropout 0 for exact
comparisons): outputs and gradients for post-/pre-norm, relu/gelu/callable
activations, batch_first, unbatched input, masks and is_causal; the
deep-copied layers, PyTorch's nested-tensor padding zeros and warnings;
CUDA against the CPU (skipped without a GPU)."""
import copy

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
from cuda_helpers import requires_cuda
from helpers import to64

torch = pytest.importorskip("torch")


def copy_weights(tm, am):
    result = am.load_state_dict({k: ampc.tensor(v.detach().numpy())
                                 for k, v in tm.state_dict().items()})
    assert not result.missing_keys and not result.unexpected_keys


def compare(tm, am, x, call_t=None, call_a=None, grad=True):
    xt = torch.tensor(x, requires_grad=grad)
    xa = ampc.tensor(x, requires_grad=grad)
    ot, oa = tm(xt, **(call_t or {})), am(xa, **(call_a or {}))
    np.testing.assert_allclose(to64(oa), ot.detach().numpy(), atol=2e-5)
    if not grad:
        return oa
    g = np.random.default_rng(5).standard_normal(tuple(ot.shape)) \
        .astype(np.float32)
    (ot * torch.tensor(g)).sum().backward()
    (oa * ampc.tensor(g)).sum().backward()
    np.testing.assert_allclose(to64(xa.grad), xt.grad.numpy(), atol=2e-5)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(to64(am.get_parameter(name).grad),
                                   p.grad.numpy(), atol=5e-5, err_msg=name)
    return oa


ACTIVATIONS = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
               "fn": (torch.nn.functional.silu, F.silu),
               "module": (torch.nn.GELU(), nn.GELU())}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_encoder_layer_matches_torch(rng, norm_first, activation):
    act_t, act_a = ACTIVATIONS[activation]
    kw = dict(dim_feedforward=24, dropout=0.0, norm_first=norm_first)
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoderLayer(16, 4, activation=act_t, **kw)
    am = nn.TransformerEncoderLayer(16, 4, activation=act_a, **kw)
    copy_weights(tm, am)
    compare(tm, am, rng.standard_normal((7, 3, 16)).astype(np.float32))


@pytest.mark.parametrize("case", ["batch_first", "unbatched", "no_bias",
                                  "masks", "causal"])
def test_encoder_layer_options_match_torch(rng, case):
    kw = dict(dim_feedforward=24, dropout=0.0, layer_norm_eps=1e-6,
              batch_first=case == "batch_first", bias=case != "no_bias")
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoderLayer(16, 4, **kw)
    am = nn.TransformerEncoderLayer(16, 4, **kw)
    copy_weights(tm, am)
    shape = (7, 16) if case == "unbatched" else (7, 3, 16)
    x = rng.standard_normal(shape).astype(np.float32)
    call_t, call_a = {}, {}
    if case == "masks":
        kpm = np.where(rng.random((3, 7)) < 0.3, -np.inf, 0.0)
        kpm[:, 0] = 0.0
        kpm = kpm.astype(np.float32)
        mask = (rng.standard_normal((7, 7))).astype(np.float32)
        call_t = {"src_mask": torch.tensor(mask),
                  "src_key_padding_mask": torch.tensor(kpm)}
        call_a = {"src_mask": ampc.tensor(mask),
                  "src_key_padding_mask": ampc.tensor(kpm)}
    if case == "causal":
        mask = np.triu(np.full((7, 7), -np.inf, dtype=np.float32), 1)
        call_t = {"src_mask": torch.tensor(mask), "is_causal": True}
        call_a = {"src_mask": ampc.tensor(mask), "is_causal": True}
    compare(tm, am, x, call_t, call_a)


def test_encoder_layer_state_dict_and_repr():
    tm = torch.nn.TransformerEncoderLayer(16, 4, 32, bias=False)
    am = nn.TransformerEncoderLayer(16, 4, 32, bias=False)
    assert list(am.state_dict()) == list(tm.state_dict())
    assert am.activation is F.relu and am.activation_relu_or_gelu == 1
    assert nn.TransformerEncoderLayer(16, 4, activation="gelu") \
        .activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(16, 4, activation=F.silu) \
        .activation_relu_or_gelu == 0
    assert "(norm2): LayerNorm((16,), eps=1e-05, elementwise_affine=True, " \
           "bias=False)" in repr(am)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, "
                       "not tanh"):
        nn.TransformerEncoderLayer(16, 4, activation="tanh")


@pytest.mark.parametrize("norm", [False, True])
def test_encoder_matches_torch(rng, norm):
    kw = dict(dim_feedforward=24, dropout=0.0, batch_first=True)
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(16, 4, **kw)
    al = nn.TransformerEncoderLayer(16, 4, **kw)
    tm = torch.nn.TransformerEncoder(
        tl, 3, norm=torch.nn.LayerNorm(16) if norm else None,
        enable_nested_tensor=False)
    am = nn.TransformerEncoder(al, 3, norm=nn.LayerNorm(16) if norm else None,
                               enable_nested_tensor=False)
    # different weights in each layer
    for p in tm.parameters():
        torch.nn.init.normal_(p, std=0.3)
    copy_weights(tm, am)
    assert list(am.state_dict()) == list(tm.state_dict())
    x = rng.standard_normal((2, 6, 16)).astype(np.float32)
    compare(tm, am, x)
    causal = np.triu(np.full((6, 6), -np.inf, dtype=np.float32), 1)
    kpm = np.zeros((2, 6), dtype=np.float32)
    kpm[1, 4:] = -np.inf
    compare(tm, am, x, {"mask": torch.tensor(causal),
                        "src_key_padding_mask": torch.tensor(kpm)},
            {"mask": ampc.tensor(causal),
             "src_key_padding_mask": ampc.tensor(kpm)})


def test_encoder_deep_copies_the_layer():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    assert len(enc.layers) == 2 and enc.num_layers == 2
    ps = [enc.layers[i].linear1.weight for i in range(2)]
    assert ps[0] is not ps[1] and ps[0] is not layer.linear1.weight
    assert np.array_equal(to64(ps[0]), to64(layer.linear1.weight))
    assert len(list(enc.parameters())) == 2 * len(list(layer.parameters()))


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_encoder_nested_tensor_padding_is_zero(rng):
    kw = dict(dim_feedforward=24, dropout=0.0, batch_first=True)
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(16, 4, **kw), 2)
    am = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, **kw), 2)
    copy_weights(tm, am)
    tm.eval()
    am.eval()
    x = rng.standard_normal((2, 6, 16)).astype(np.float32)
    kpm = np.zeros((2, 6), dtype=bool)
    kpm[1, 3:] = True
    with torch.no_grad(), ampc.no_grad():
        out = compare(tm, am, x, {"src_key_padding_mask": torch.tensor(kpm)},
                      {"src_key_padding_mask": ampc.tensor(kpm)}, grad=False)
    assert not to64(out)[1, 3:].any() and to64(out)[0].all()


def test_encoder_warnings_are_pytorchs():
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    with pytest.warns(UserWarning, match="enable_nested_tensor is True, but "
                      "self.use_nested_tensor is False because encoder_layer"
                      ".self_attn.batch_first was not True"):
        enc = nn.TransformerEncoder(layer, 1)
    assert enc.use_nested_tensor is False
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True,
                                       norm_first=True)
    with pytest.warns(UserWarning, match="encoder_layer.norm_first was True"):
        nn.TransformerEncoder(layer, 1)


def test_encoder_trains(rng):
    ampc.manual_seed(0)
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2,
        enable_nested_tensor=False)
    opt = ampc.optim.Adam(enc.parameters(), lr=1e-2)
    x = ampc.tensor(rng.standard_normal((4, 5, 16)).astype(np.float32))
    y = ampc.tensor(rng.standard_normal((4, 5, 16)).astype(np.float32))
    losses = []
    for _ in range(15):
        loss = F.mse_loss(enc(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_encoder_layer_cuda_matches_cpu(rng, dtype):
    ampc.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0,
                                       batch_first=True)
    gpu = copy.deepcopy(layer).to("cuda")
    layer, gpu = layer.to(getattr(ampc, dtype)), gpu.to(getattr(ampc, dtype))
    x = ampc.tensor(rng.standard_normal((2, 7, 16)).astype(np.float32)) \
        .to(getattr(ampc, dtype))
    kpm = ampc.tensor(np.arange(7) >= np.array([[7], [5]]))
    outs = []
    for m, dev in ((layer, "cpu"), (gpu, "cuda")):
        xd = x.to(dev).detach().requires_grad_()
        out = m(xd, src_key_padding_mask=kpm.to(dev))
        out.float().sum().backward()
        outs.append((to64(out.cpu()), to64(xd.grad.cpu()),
                     to64(m.linear1.weight.grad.cpu())))
    tol = 1e-4 if dtype == "float32" else 5e-2
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, atol=tol, rtol=tol)
