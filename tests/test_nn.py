"""ampc.nn: Module semantics (registration, names, modes, dtype moves,
state dicts, repr), default initialisation, the functional ops' autograd
against finite differences of a float64 NumPy composite, matmul's
autograd, and layers against torch.nn with copied weights."""
import collections
import math

import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
import reference as ref
from helpers import assert_close, gradcheck, to64, torch_or_skip


class SimpleCNN(nn.Module):
    """The lab's model (for a size x size input)."""

    def __init__(self, size=32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(32, 64, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(64 * (size // 4) ** 2, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.features(x)
        x = ampc.flatten(x, 1)
        return self.classifier(x)


MP = ("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, "
      "ceil_mode=False)")
SIMPLE_CNN_REPR = f"""SimpleCNN(
  (features): Sequential(
    (0): Conv2d(3, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    (1): ReLU()
    (2): {MP}
    (3): Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    (4): ReLU()
    (5): {MP}
  )
  (classifier): Sequential(
    (0): Linear(in_features=4096, out_features=512, bias=True)
    (1): ReLU()
    (2): Linear(in_features=512, out_features=10, bias=True)
  )
)"""


class WithState(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(ampc.ones(3))
        self.register_buffer("count", ampc.zeros(1, dtype=ampc.int64))
        self.register_buffer("mean", ampc.zeros(3))
        self.register_buffer("scratch", ampc.zeros(2), persistent=False)
        self.inner = nn.Linear(3, 2)
        self.plain = ampc.ones(1)       # a plain attribute, not state

    def forward(self, x):
        return self.inner(x * self.scale + self.mean)


# ----------------------------------------------------------------------------
# registration and names


def test_named_parameters_order_and_prefixes():
    m = SimpleCNN()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["features.0.weight", "features.0.bias",
                     "features.3.weight", "features.3.bias",
                     "classifier.0.weight", "classifier.0.bias",
                     "classifier.2.weight", "classifier.2.bias"]
    assert all(isinstance(p, nn.Parameter) for p in m.parameters())
    assert sum(p.numel() for p in m.parameters()) == 2122186
    assert [n for n, _ in m.named_children()] == ["features", "classifier"]
    assert [n for n, _ in m.named_modules()][:3] == ["", "features",
                                                     "features.0"]
    assert len(list(m.modules())) == 12
    assert [n for n, _ in m.features.named_parameters(prefix="f")][0] == \
        "f.0.weight"
    assert list(m.parameters(recurse=False)) == []


def test_registration_of_state():
    m = WithState()
    assert [n for n, _ in m.named_parameters()] == \
        ["scale", "inner.weight", "inner.bias"]
    assert [n for n, _ in m.named_buffers()] == ["count", "mean", "scratch"]
    assert list(m.state_dict()) == ["scale", "count", "mean", "inner.weight",
                                    "inner.bias"]
    assert "plain" not in m.state_dict()
    m.scale = None                       # a parameter slot may hold None
    assert "scale" not in dict(m.named_parameters())
    m.scale = nn.Parameter(ampc.ones(3))
    del m.inner
    assert [n for n, _ in m.named_parameters()] == ["scale"]


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(4, 4)
    m = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(m.named_parameters(remove_duplicate=False))) == 4
    assert len(list(m.modules())) == 3


def test_registration_errors():
    m = nn.Module()
    with pytest.raises(TypeError, match="cannot assign 'ampc.FloatTensor' "
                                        "object to parameter 'w'"):
        m.register_parameter("w", ampc.ones(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("training", ampc.ones(1))
    m.p = nn.Parameter(ampc.ones(1))
    with pytest.raises(TypeError, match="cannot assign 'ampc.FloatTensor' as "
                                        "parameter 'p'"):
        m.p = ampc.ones(1)
    m.sub = nn.ReLU()
    with pytest.raises(TypeError, match="as child module 'sub'"):
        m.sub = 3
    with pytest.raises(ValueError, match="non-leaf Tensor"):
        _register_non_leaf()
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ampc.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def _register_non_leaf():
    p = nn.Parameter(ampc.ones(1))
    q = (p * 2)
    q.__class__ = nn.Parameter
    nn.Module().register_parameter("q", q)


def test_train_eval_propagate():
    m = SimpleCNN()
    assert m.training and m.features[0].training
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    with pytest.raises(ValueError, match="boolean"):
        m.train("yes")


def test_sequential_and_modulelist():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)]
    s = nn.Sequential(*layers)
    assert len(s) == 3 and list(s) == layers and s[-1] is layers[2]
    assert isinstance(s[1:], nn.Sequential) and list(s[1:]) == layers[1:]
    od = nn.Sequential(collections.OrderedDict(fc=layers[0], act=layers[1]))
    assert od.fc is layers[0] and [n for n, _ in od.named_children()] == \
        ["fc", "act"]
    s.append(nn.Identity())
    assert len(s) == 4
    del s[0]
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"]
    with pytest.raises(IndexError):
        s[7]
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    ml.append(nn.Linear(2, 1))
    ml += [nn.ReLU()]
    assert len(ml) == 5 and len(list(ml.parameters())) == 8
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2


def test_apply_and_requires_grad_():
    m = SimpleCNN()
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "SimpleCNN" and seen.count("Conv2d") == 2
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_repr_like_torch():
    m = SimpleCNN()
    assert repr(m) == SIMPLE_CNN_REPR
    assert repr(nn.Conv2d(3, 4, (3, 5), stride=2, dilation=2, bias=False)) \
        == ("Conv2d(3, 4, kernel_size=(3, 5), stride=(2, 2), dilation=(2, "
            "2), bias=False)")
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(nn.Dropout(0.2)) == "Dropout(p=0.2, inplace=False)"
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    p = nn.Parameter(ampc.zeros(2))
    assert repr(p).startswith("Parameter containing:\ntensor([0., 0.]")


def test_repr_matches_torch_text():
    torch = torch_or_skip()
    tnn = torch.nn

    class T(tnn.Module):
        def __init__(self):
            super().__init__()
            self.features = tnn.Sequential(
                tnn.Conv2d(3, 32, kernel_size=3, padding=1), tnn.ReLU(),
                tnn.MaxPool2d(kernel_size=2, stride=2),
                tnn.Conv2d(32, 64, kernel_size=3, padding=1), tnn.ReLU(),
                tnn.MaxPool2d(kernel_size=2, stride=2))
            self.classifier = tnn.Sequential(
                tnn.Linear(64 * 8 * 8, 512), tnn.ReLU(), tnn.Linear(512, 10))

    assert repr(T()).replace("T(", "SimpleCNN(", 1) == SIMPLE_CNN_REPR


# ----------------------------------------------------------------------------
# dtype and device moves


def test_half_bfloat16_float_and_to():
    m = WithState()
    assert m.half() is m
    assert m.scale.dtype is ampc.float16 and m.inner.weight.dtype is \
        ampc.float16
    assert m.mean.dtype is ampc.float16
    assert m.count.dtype is ampc.int64            # only floats change
    assert isinstance(m.inner.weight, nn.Parameter)
    assert m.inner.weight.requires_grad and m.inner.weight.is_leaf
    m.bfloat16()
    assert all(p.dtype is ampc.bfloat16 for p in m.parameters())
    m.float()
    assert all(p.dtype is ampc.float32 for p in m.parameters())
    m.to(ampc.float16)
    assert m.inner.bias.dtype is ampc.float16
    m.to(ampc.zeros(1))                           # to(tensor): its dtype
    assert m.inner.bias.dtype is ampc.float32
    same = m.inner.weight
    m.to("cpu")
    m.cpu()
    assert m.inner.weight is same                 # nothing to change
    with pytest.raises(TypeError, match="only accepts floating point"):
        m.to(ampc.int64)


def test_half_keeps_grad_and_forward_runs_in_float16():
    m = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    x = ampc.randn(2, 5)
    m(x).sum().backward()
    m.half()
    assert m[0].weight.grad.dtype is ampc.float16
    y = m(x.half())
    assert y.dtype is ampc.float16
    y.float().sum().backward()
    assert m[2].bias.grad.dtype is ampc.float16


# ----------------------------------------------------------------------------
# state dicts


def test_state_dict_shares_memory_and_is_detached():
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    assert isinstance(sd, collections.OrderedDict)
    w = sd["weight"]
    assert not w.requires_grad and w.grad_fn is None
    w.fill_(7.0)
    assert float(m.weight[0, 0]) == 7.0
    kv = m.state_dict(keep_vars=True)
    assert kv["weight"] is m.weight


def test_load_state_dict_roundtrip_and_strict_errors():
    a, b = WithState(), WithState()
    ampc.manual_seed(5)
    b.inner.reset_parameters()
    res = b.load_state_dict(a.state_dict())
    assert repr(res) == "<All keys matched successfully>"
    assert res.missing_keys == [] and res.unexpected_keys == []
    np.testing.assert_array_equal(to64(b.inner.weight),
                                  to64(a.inner.weight))
    sd = a.state_dict()
    del sd["inner.bias"]
    sd["extra"] = ampc.ones(1)
    sd["inner.ghost"] = ampc.ones(1)
    with pytest.raises(RuntimeError) as e:
        b.load_state_dict(sd)
    msg = str(e.value)
    assert msg.startswith("Error(s) in loading state_dict for WithState:")
    assert 'Missing key(s) in state_dict: "inner.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "extra", "inner.ghost".' in msg
    res = b.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["inner.bias"]
    assert sorted(res.unexpected_keys) == ["extra", "inner.ghost"]
    bad = a.state_dict()
    bad["inner.weight"] = ampc.ones(3, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for inner.weight: "
                       r"copying a param with shape ampc.Size\(\[3, 3\]\)"):
        b.load_state_dict(bad)


def test_load_state_dict_casts_dtype():
    a = nn.Linear(3, 2)
    b = nn.Linear(3, 2).half()
    b.load_state_dict(a.state_dict())
    assert b.weight.dtype is ampc.float16
    assert_close(b.weight, to64(a.weight), "float16")


def test_zero_grad():
    m = nn.Linear(3, 2)
    m(ampc.ones(1, 3)).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is g and float(g.abs().sum()) == 0
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None


# ----------------------------------------------------------------------------
# default initialisation


@pytest.mark.parametrize("make,fan_in", [
    (lambda: nn.Linear(4096, 512), 4096),
    (lambda: nn.Linear(7, 33), 7),
    (lambda: nn.Conv2d(32, 64, 3), 288),
    (lambda: nn.Conv2d(3, 5, (1, 3)), 9),
])
def test_default_init_bounds_and_spread(make, fan_in):
    m = make()
    bound = 1 / math.sqrt(fan_in)      # kaiming_uniform_(a=sqrt(5))
    for p in (m.weight, m.bias):
        v = to64(p).ravel()
        assert np.all(np.abs(v) <= bound * (1 + 1e-6))
        if v.size >= 1000:
            # U(-b, b): mean 0, std b/sqrt(3), covers the range
            assert abs(v.mean()) < 0.05 * bound
            assert v.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)
            assert v.max() > 0.95 * bound and v.min() < -0.95 * bound


def test_init_repeatable_with_seed():
    ampc.manual_seed(11)
    a = nn.Linear(5, 5)
    ampc.manual_seed(11)
    b = nn.Linear(5, 5)
    np.testing.assert_array_equal(to64(a.weight), to64(b.weight))


def test_init_functions():
    init = nn.init
    w = ampc.empty(300, 200)
    init.xavier_uniform_(w, gain=2.0)
    a = 2.0 * math.sqrt(6 / 500)
    assert np.abs(to64(w)).max() <= a and np.abs(to64(w)).max() > 0.9 * a
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert to64(w).std() == pytest.approx(math.sqrt(2 / 300), rel=0.05)
    init.xavier_normal_(w)
    assert to64(w).std() == pytest.approx(math.sqrt(2 / 500), rel=0.05)
    init.normal_(w, 1.0, 0.5)
    assert to64(w).mean() == pytest.approx(1.0, abs=0.01)
    assert to64(init.ones_(ampc.empty(2))).tolist() == [1, 1]
    assert to64(init.constant_(ampc.empty(2), 3.5)).tolist() == [3.5, 3.5]
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", 0.2) == \
        pytest.approx(math.sqrt(2 / 1.04))
    assert init._calculate_fan_in_and_fan_out(ampc.empty(8, 4, 3, 3)) == \
        (36, 72)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.kaiming_uniform_(ampc.empty(3))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="Mode fan_mid not supported"):
        init.kaiming_uniform_(w, mode="fan_mid")
    p = nn.Parameter(ampc.ones(3))
    init.zeros_(p)                      # under no_grad: fine on a leaf
    assert p.requires_grad and p.grad_fn is None


# ----------------------------------------------------------------------------
# autograd of the functional ops: a float64 NumPy composite


def test_composite_gradients_vs_finite_differences():
    """conv2d -> relu -> max_pool2d -> flatten -> linear -> cross_entropy,
    every gradient against central differences in float64."""
    rng = np.random.default_rng(7)
    target = np.array([1, 3])
    shapes = [(2, 2, 5, 5), (3, 2, 3, 3), (3,), (4, 12), (4,)]

    def ref_fn(x, w, b, lw, lb):
        h = ref.conv2d(x, w, b, padding=(1, 1), relu=True)
        h = ref.max_pool2d(h, (2, 2))[0].reshape(2, -1)
        return ref.cross_entropy(ref.linear(h, lw, lb), target)

    def ampc_fn(x, w, b, lw, lb):
        h = F.relu(F.conv2d(x, w, b, padding=1))
        h = F.max_pool2d(h, 2).flatten(1)
        return F.cross_entropy(F.linear(h, lw, lb), ampc.tensor(target))

    gradcheck(ampc_fn, ref_fn, shapes, rng=rng, rtol=2e-3, atol=2e-4)


def test_fused_sequential_matches_unfused():
    """Sequential runs Conv2d+ReLU and Linear+ReLU fused; outputs and
    gradients must equal the layers run one by one."""
    ampc.manual_seed(1)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                        nn.Flatten(), nn.Linear(4 * 36, 5), nn.ReLU())
    x = ampc.randn(2, 3, 6, 6)
    y1 = seq(x)
    y1.sum().backward()
    g1 = [p.grad.clone() for p in seq.parameters()]
    seq.zero_grad()
    h = x
    for layer in seq:
        h = layer(h)
    h.sum().backward()
    np.testing.assert_array_equal(to64(y1), to64(h))
    for a, p in zip(g1, seq.parameters()):
        np.testing.assert_array_equal(to64(a), to64(p.grad))


@pytest.mark.parametrize("fn,ref_fn", [
    (lambda x: F.softmax(x, 1), lambda x: ref.softmax(x, 1)),
    (lambda x: F.log_softmax(x, dim=-1), lambda x: ref.log_softmax(x, -1)),
    (lambda x: F.mse_loss(x, ampc.ones(3, 4)),
     lambda x: ref.mse_loss(x, np.ones((3, 4)))),
    (lambda x: F.mse_loss(x, ampc.ones(3, 4), reduction="sum"),
     lambda x: ref.mse_loss(x, np.ones((3, 4)), "sum")),
    (lambda x: F.nll_loss(x, ampc.tensor([0, 3, 1]), reduction="sum"),
     lambda x: ref.nll_loss(x, np.array([0, 3, 1]), reduction="sum")[0]),
    (lambda x: F.cross_entropy(x, ampc.tensor([2, 0, 1]),
                               label_smoothing=0.2),
     lambda x: ref.cross_entropy(x, np.array([2, 0, 1]),
                                 label_smoothing=0.2)),
], ids=["softmax", "log_softmax", "mse", "mse_sum", "nll", "ce_smooth"])
def test_functional_gradients(fn, ref_fn):
    gradcheck(fn, ref_fn, [(3, 4)], rtol=2e-3, atol=2e-4)


def test_mse_loss_target_gradient():
    x = ampc.randn(3, 4)
    t = ampc.randn(3, 4, requires_grad=True)
    F.mse_loss(x, t).backward()
    assert_close(t.grad, -2 * (to64(x) - to64(t)) / 12, "float32")


def test_dropout_modes_and_gradient():
    x = ampc.ones(1000, requires_grad=True)
    d = nn.Dropout(0.25)
    y = d(x)
    kept = to64(y) != 0
    assert 0.65 < kept.mean() < 0.85
    np.testing.assert_allclose(to64(y)[kept], 1 / 0.75, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(to64(x.grad), kept / 0.75, rtol=1e-6)
    assert d.eval()(x) is x
    ampc.manual_seed(4)
    a = to64(F.dropout(ampc.ones(50)))
    ampc.manual_seed(4)
    assert np.array_equal(a, to64(F.dropout(ampc.ones(50))))
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_relu_inplace():
    x = ampc.tensor([-1.0, 2.0, -3.0], requires_grad=True)
    h = x * 1.0
    out = F.relu(h, inplace=True)
    assert out is h
    out.sum().backward()
    assert to64(x.grad).tolist() == [0, 1, 0]


def test_max_pool2d_indices_and_unbatched():
    x = ampc.arange(32.0).view(2, 4, 4)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    assert y.shape == (2, 2, 2)
    assert idx.dtype is ampc.int64 and to64(idx[0]).tolist() == \
        [[5, 7], [13, 15]]


# ----------------------------------------------------------------------------
# matmul (the autograd Function over _C.matmul)


@pytest.mark.parametrize("sa,sb", [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)), ((3,), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)),
])
def test_matmul_gradients(sa, sb):
    gradcheck(lambda a, b: a @ b, lambda a, b: np.matmul(a, b), [sa, sb])


def test_matmul_functions():
    a, b = ampc.randn(2, 3), ampc.randn(3, 4)
    want = np.matmul(to64(a), to64(b))
    assert_close(ampc.matmul(a, b), want, "float32", k=4)
    assert_close(a.mm(b), want, "float32", k=4)
    assert_close(ampc.mm(a, b), want, "float32", k=4)
    with pytest.raises(RuntimeError, match="mm\\(\\): self must be a "
                                           "matrix"):
        ampc.randn(3).mm(b)
    with pytest.raises(TypeError, match="matmul"):
        a.matmul([1, 2, 3])


# ----------------------------------------------------------------------------
# against torch.nn with copied weights


def copy_to_torch(torch, ampc_model, torch_model):
    with torch.no_grad():
        for (n, p), (tn, tp) in zip(ampc_model.named_parameters(),
                                    torch_model.named_parameters()):
            assert n == tn
            tp.copy_(torch.from_numpy(to64(p).astype(np.float32)))


def test_simple_cnn_matches_torch():
    torch = torch_or_skip()
    tnn = torch.nn

    class T(tnn.Module):
        def __init__(self):
            super().__init__()
            self.features = tnn.Sequential(
                tnn.Conv2d(3, 32, 3, padding=1), tnn.ReLU(),
                tnn.MaxPool2d(2, 2), tnn.Conv2d(32, 64, 3, padding=1),
                tnn.ReLU(), tnn.MaxPool2d(2, 2))
            self.classifier = tnn.Sequential(
                tnn.Linear(64 * 4 * 4, 512), tnn.ReLU(), tnn.Linear(512, 10))

        def forward(self, x):
            return self.classifier(torch.flatten(self.features(x), 1))

    ampc.manual_seed(2)
    m = SimpleCNN(size=16)
    t = T()
    copy_to_torch(torch, m, t)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 3, 16, 16)).astype(np.float32)
    y = rng.integers(0, 10, size=6)
    out = m(ampc.tensor(x))
    loss = nn.CrossEntropyLoss()(out, ampc.tensor(y))
    loss.backward()
    tout = t(torch.from_numpy(x))
    tloss = tnn.CrossEntropyLoss()(tout, torch.from_numpy(y))
    tloss.backward()
    np.testing.assert_allclose(to64(out), tout.detach().double().numpy(),
                               rtol=1e-4, atol=1e-5)
    assert float(loss) == pytest.approx(tloss.item(), rel=1e-5)
    for (n, p), tp in zip(m.named_parameters(), t.parameters()):
        g = tp.grad.double().numpy()
        scale = np.abs(g).max()
        np.testing.assert_allclose(to64(p.grad), g, rtol=1e-3,
                                   atol=1e-4 * scale, err_msg=n)


def test_losses_and_softmax_match_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 5)).astype(np.float32)
    y = rng.integers(0, 5, size=7)
    y[2] = -100
    w = rng.uniform(0.5, 2, size=5).astype(np.float32)
    tF = torch.nn.functional
    X, Y, W = (torch.from_numpy(a) for a in (x, y, w))
    cases = [
        (F.cross_entropy(ampc.tensor(x), ampc.tensor(y), ampc.tensor(w)),
         tF.cross_entropy(X, Y, W)),
        (F.cross_entropy(ampc.tensor(x), ampc.tensor(y), reduction="none",
                         label_smoothing=0.1),
         tF.cross_entropy(X, Y, reduction="none", label_smoothing=0.1)),
        (F.nll_loss(F.log_softmax(ampc.tensor(x), 1), ampc.tensor(y),
                    reduction="sum"),
         tF.nll_loss(tF.log_softmax(X, 1), Y, reduction="sum")),
        (F.softmax(ampc.tensor(x), dim=0), tF.softmax(X, dim=0)),
        (F.mse_loss(ampc.tensor(x), ampc.tensor(x[::-1].copy())),
         tF.mse_loss(X, torch.from_numpy(x[::-1].copy()))),
    ]
    for a, t in cases:
        np.testing.assert_allclose(to64(a), t.double().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_soft_target_and_nd_cross_entropy_match_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 4, 2, 5)).astype(np.float32)
    y = rng.integers(0, 4, size=(3, 2, 5))
    p = rng.uniform(0, 1, size=(3, 4)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    tF = torch.nn.functional
    a = F.cross_entropy(ampc.tensor(x), ampc.tensor(y), reduction="none")
    t = tF.cross_entropy(torch.from_numpy(x), torch.from_numpy(y),
                         reduction="none")
    assert a.shape == (3, 2, 5)
    np.testing.assert_allclose(to64(a), t.double().numpy(), rtol=1e-5,
                               atol=1e-6)
    a = F.cross_entropy(ampc.tensor(x[:, :, 0, 0].copy()), ampc.tensor(p),
                        label_smoothing=0.1)
    t = tF.cross_entropy(torch.from_numpy(x[:, :, 0, 0].copy()),
                         torch.from_numpy(p), label_smoothing=0.1)
    assert float(a) == pytest.approx(float(t), rel=1e-5)


def test_functional_argument_errors():
    x = ampc.randn(2, 3)
    with pytest.raises(TypeError, match=r"linear\(\): argument 'input' "
                                        r"\(position 1\) must be Tensor"):
        F.linear([1, 2, 3], ampc.ones(2, 3))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="groups' expected a positive"):
        F.conv2d(ampc.ones(1, 2, 4, 4), ampc.ones(2, 1, 3, 3), groups=0)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        F.mse_loss(x, x, size_average=False)
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        F.softmax(x)


def test_loss_and_activation_modules():
    x = ampc.randn(4, 3)
    y = ampc.tensor([0, 2, 1, 2])
    w = ampc.tensor([1.0, 2.0, 0.5])
    ce = nn.CrossEntropyLoss(weight=w, reduction="sum", ignore_index=1)
    assert "weight" in ce.state_dict()
    assert float(ce(x, y)) == pytest.approx(float(F.cross_entropy(
        x, y, w, reduction="sum", ignore_index=1)))
    nll = nn.NLLLoss()
    logp = nn.LogSoftmax(dim=1)(x)
    assert float(nll(logp, y)) == pytest.approx(float(F.cross_entropy(x, y)),
                                                rel=1e-6)
    assert_close(nn.Softmax(dim=1)(x), ref.softmax(to64(x), 1), "float32")
    assert float(nn.MSELoss(reduction="sum")(x, x * 0)) == \
        pytest.approx(float((x * x).sum()), rel=1e-6)
    assert nn.Identity(54, unused=1)(x) is x
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.MSELoss(reduce=False).reduction == "none"


def test_deepcopy_module():
    import copy
    m = nn.Sequential(nn.Linear(3, 4), nn.CrossEntropyLoss(
        weight=ampc.ones(4)))
    c = copy.deepcopy(m)
    assert c[0].weight is not m[0].weight
    assert isinstance(c[0].weight, nn.Parameter) and c[0].weight.requires_grad
    np.testing.assert_array_equal(to64(c[0].weight), to64(m[0].weight))
    assert list(c.state_dict()) == ["0.weight", "0.bias", "1.weight"]


def test_layers_follow_autocast_policy():
    """Under autocast (CPU: bfloat16) conv2d, linear and matmul run in the
    low dtype, the losses in float32; gradients reach the float32
    parameters in float32, with or without grad mode."""
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(),
                      nn.Linear(16, 5))
    x = ampc.randn(2, 3, 4, 4)
    with ampc.autocast("cpu"):
        out = m(x)
        loss = F.cross_entropy(out, ampc.tensor([1, 2]))
        assert (x @ ampc.ones(4, 2)).dtype is ampc.bfloat16
        assert F.mse_loss(out, out.detach()).dtype is ampc.float32
        with ampc.no_grad():
            assert m(x).dtype is ampc.bfloat16
    assert out.dtype is ampc.bfloat16 and loss.dtype is ampc.float32
    loss.backward()
    assert m[0].weight.grad.dtype is ampc.float32
    assert m[3].bias.grad.dtype is ampc.float32


@pytest.mark.parametrize("module", [
    "ampc.nn", "ampc.nn.parameter", "ampc.nn.functional", "ampc.nn.init",
    "ampc.nn.modules.module", "ampc.nn.modules.container",
    "ampc.nn.modules.linear", "ampc.nn.modules.conv",
    "ampc.nn.modules.activation", "ampc.nn.modules.pooling",
    "ampc.nn.modules.flatten", "ampc.nn.modules.dropout",
    "ampc.nn.modules.loss", "ampc.optim", "ampc.optim.optimizer",
    "ampc.optim.sgd", "ampc.optim.adam", "ampc.optim.lr_scheduler",
    "ampc.serialization", "ampc.nn._conv1d", "ampc.nn._group_norm",
    "ampc.nn._pad", "ampc.nn._interpolate", "ampc.nn.modules.upsampling",
    "ampc.nn.modules.normalization", "ampc._einsum", "ampc._deterministic",
    "ampc.utils.deterministic", "ampc._tensor_layout",
])
def test_docstring_examples(module):
    import doctest
    import importlib
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
