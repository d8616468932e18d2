"""RNN, LSTM, GRU and their cells: a float64 NumPy reference of each step
(written out), finite differences of it for the gradients, and, where
installed, torch (values, h_n/c_n and gradients of the input, hx and every
parameter, with torch's weights), plus dtypes, dropout, errors, autocast
and pad_sequence."""
import numpy as np
import pytest

import ampc
from ampc import nn
from ampc.nn.utils.rnn import pad_sequence
from cuda_helpers import requires_cuda

try:
    import torch
except ImportError:     # the torch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ----------------------------------------------------------------------------
# float64 NumPy reference


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def ref_step(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One step in float64 with PyTorch's gate orders; (h', c')."""
    gx, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    if mode == "lstm":
        i, f, g, o = np.split(gx + gh, 4, axis=-1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        return _sig(o) * np.tanh(c), c
    if mode == "gru":
        xr, xz, xn = np.split(gx, 3, axis=-1)
        hr, hz, hn = np.split(gh, 3, axis=-1)
        r, z = _sig(xr + hr), _sig(xz + hz)
        n = np.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    pre = gx + gh
    return (np.tanh(pre) if mode == "rnn_tanh" else np.maximum(pre, 0)), None


def ref_layer(mode, x, h, c, w, reverse):
    """One direction over x (T, N, I); (outputs (T, N, H), h_n, c_n)."""
    outs = [None] * len(x)
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        h, c = ref_step(mode, x[t], h, c, *w)
        outs[t] = h
    return np.stack(outs), h, c


def _np(t):
    return t.detach().float().numpy().astype(np.float64)


def ref_module(m, x, h0=None, c0=None):
    """An ampc RNN/LSTM/GRU module (no proj_size) in float64 NumPy."""
    mode = m.mode.lower()
    dirs = 2 if m.bidirectional else 1
    shape = (m.num_layers * dirs, x.shape[1], m.hidden_size)
    h0 = np.zeros(shape) if h0 is None else h0
    c0 = np.zeros(shape) if c0 is None else c0
    hn, cn = [], []
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            s = f"_l{layer}" + ("_reverse" if d else "")
            w = [_np(getattr(m, n + s)) for n in
                 ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            k = layer * dirs + d
            out, h, c = ref_layer(mode, x, h0[k], c0[k], w, d == 1)
            outs.append(out)
            hn.append(h)
            cn.append(c)
        x = np.concatenate(outs, axis=-1)
    return x, np.stack(hn), np.stack(cn)


@pytest.mark.parametrize("cls,kw", [
    (nn.LSTM, {}), (nn.GRU, {}), (nn.RNN, {}),
    (nn.RNN, {"nonlinearity": "relu"}),
    (nn.LSTM, {"num_layers": 2, "bidirectional": True}),
    (nn.GRU, {"num_layers": 2, "bidirectional": True}),
])
def test_module_matches_the_numpy_reference(cls, kw):
    ampc.manual_seed(0)
    m = cls(3, 5, **kw)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 2, 3)).astype(np.float32)
    dirs = 2 if m.bidirectional else 1
    h0 = rng.standard_normal((m.num_layers * dirs, 2, 5)).astype(np.float32)
    c0 = rng.standard_normal(h0.shape).astype(np.float32)
    hx = (ampc.tensor(h0), ampc.tensor(c0)) if cls is nn.LSTM \
        else ampc.tensor(h0)
    with ampc.no_grad():
        out, hn = m(ampc.tensor(x), hx)
    want, whn, wcn = ref_module(m, x.astype(np.float64), h0, c0)
    np.testing.assert_allclose(out.numpy(), want, atol=1e-5)
    if cls is nn.LSTM:
        hn, cn = hn
        np.testing.assert_allclose(cn.numpy(), wcn, atol=1e-5)
    np.testing.assert_allclose(hn.numpy(), whn, atol=1e-5)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_cell_gradients_match_finite_differences(mode):
    """Gradients of sum(w_out * h') (+ c') for input, hx, cx and W_hh
    against central differences of the float64 reference."""
    ampc.manual_seed(2)
    cls = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}.get(mode, nn.RNNCell)
    m = cls(3, 4) if cls is not nn.RNNCell else \
        cls(3, 4, nonlinearity=mode[4:])
    rng = np.random.default_rng(3)
    x, h, c = (rng.standard_normal((2, n)) for n in (3, 4, 4))
    wo, wc = rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    w = [_np(p) for p in (m.weight_ih, m.weight_hh, m.bias_ih, m.bias_hh)]

    def loss(x, h, c, w_hh):
        h2, c2 = ref_step(mode, x, h, c, w[0], w_hh, w[2], w[3])
        return (wo * h2).sum() + (0 if c2 is None else (wc * c2).sum())

    args = [x, h, c, w[1]]
    ts = [ampc.tensor(a.astype(np.float32), requires_grad=True)
          for a in args[:3]]
    if mode == "lstm":
        h2, c2 = m(ts[0], (ts[1], ts[2]))
        out = (h2 * ampc.tensor(wo.astype(np.float32))).sum() + \
            (c2 * ampc.tensor(wc.astype(np.float32))).sum()
    else:
        out = (m(ts[0], ts[1]) * ampc.tensor(wo.astype(np.float32))).sum()
    out.backward()
    got = [t.grad for t in ts] + [m.weight_hh.grad]
    for k, a in enumerate(args):
        if got[k] is None:      # cx of a cell without one
            continue
        num = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            lo, hi = [v.copy() for v in args], [v.copy() for v in args]
            lo[k][idx] -= 1e-6
            hi[k][idx] += 1e-6
            num[idx] = (loss(*hi) - loss(*lo)) / 2e-6
        np.testing.assert_allclose(got[k].numpy(), num, atol=1e-4)


# ----------------------------------------------------------------------------
# against torch


def _copy_from_torch(tm, am):
    am.load_state_dict({k: ampc.tensor(v.detach().numpy())
                        for k, v in tm.state_dict().items()})


def _flat(out):
    if isinstance(out, tuple):
        return [t for o in out for t in (o if isinstance(o, tuple) else (o,))]
    return [out]


def _compare(tcls, acls, kw, x, hx=None, atol=2e-5):
    torch.manual_seed(0)
    tm = tcls(**kw)
    am = acls(**kw)
    _copy_from_torch(tm, am)
    tx = torch.tensor(x, requires_grad=True)
    ax = ampc.tensor(x, requires_grad=True)
    thx = ahx = None
    if hx is not None:
        thx = tuple(torch.tensor(h, requires_grad=True) for h in hx)
        ahx = tuple(ampc.tensor(h, requires_grad=True) for h in hx)
    tout = _flat(tm(tx, thx if thx is None or len(thx) > 1 else thx[0]))
    aout = _flat(am(ax, ahx if ahx is None or len(ahx) > 1 else ahx[0]))
    assert len(tout) == len(aout)
    weights = np.random.default_rng(9).standard_normal(len(tout))
    for t, a in zip(tout, aout):
        assert tuple(a.shape) == tuple(t.shape)
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(),
                                   atol=atol)
    sum(float(w) * (t ** 2).sum() for w, t in zip(weights, tout)).backward()
    loss = None
    for w, a in zip(weights, aout):
        term = (a * a).sum() * float(w)
        loss = term if loss is None else loss + term
    loss.backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), atol=atol)
    for th, ah in zip(thx or (), ahx or ()):
        np.testing.assert_allclose(ah.grad.numpy(), th.grad.numpy(),
                                   atol=atol)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(getattr(am, name).grad.numpy(),
                                   p.grad.numpy(), atol=atol, err_msg=name)


MODULE_CASES = [
    ("LSTM", {}), ("GRU", {}), ("RNN", {}),
    ("RNN", {"nonlinearity": "relu"}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("GRU", {"num_layers": 2, "batch_first": True}),
    ("RNN", {"bidirectional": True, "bias": False}),
    ("LSTM", {"proj_size": 3}),
    ("LSTM", {"num_layers": 2, "proj_size": 2, "bidirectional": True,
              "batch_first": True}),
]


@needs_torch
@pytest.mark.parametrize("name,kw", MODULE_CASES)
@pytest.mark.parametrize("t,n,h", [(7, 3, 5), (1, 1, 33)])
def test_module_matches_torch(name, kw, t, n, h):
    kw = dict(kw, input_size=4, hidden_size=h)
    rng = np.random.default_rng(t * 10 + n)
    shape = (n, t, 4) if kw.get("batch_first") else (t, n, 4)
    x = rng.standard_normal(shape).astype(np.float32)
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1) * dirs
    hx = [rng.standard_normal((layers, n, kw.get("proj_size") or h))]
    if name == "LSTM":
        hx.append(rng.standard_normal((layers, n, h)))
    hx = [a.astype(np.float32) for a in hx]
    _compare(getattr(torch.nn, name), getattr(nn, name), kw, x, hx)
    _compare(getattr(torch.nn, name), getattr(nn, name), kw, x)


@needs_torch
@pytest.mark.parametrize("name,kw", [("LSTM", {"num_layers": 2}),
                                     ("GRU", {"bidirectional": True}),
                                     ("RNN", {})])
def test_unbatched_module_matches_torch(name, kw):
    kw = dict(kw, input_size=4, hidden_size=5)
    x = np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32)
    _compare(getattr(torch.nn, name), getattr(nn, name), kw, x)


@needs_torch
@pytest.mark.parametrize("name,kw", [("LSTMCell", {}), ("GRUCell", {}),
                                     ("RNNCell", {}),
                                     ("RNNCell", {"nonlinearity": "relu"}),
                                     ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [True, False])
def test_cell_matches_torch(name, kw, batched, with_hx):
    kw = dict(kw, input_size=4, hidden_size=5)
    rng = np.random.default_rng(6)
    lead = (3,) if batched else ()
    x = rng.standard_normal(lead + (4,)).astype(np.float32)
    hx = None
    if with_hx:
        hx = [rng.standard_normal(lead + (5,)).astype(np.float32)
              for _ in range(2 if name == "LSTMCell" else 1)]
    _compare(getattr(torch.nn, name), getattr(nn, name), kw, x, hx)


@needs_torch
@pytest.mark.parametrize("dtype,atol", [("float16", 1e-2),
                                        ("bfloat16", 5e-2)])
@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_low_precision_modules_are_close_to_float32(name, dtype, atol):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(4, 8, 2)
    am = getattr(nn, name)(4, 8, 2)
    _copy_from_torch(tm, am)
    am.to(getattr(ampc, dtype))
    x = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(
        np.float32)
    ax = ampc.tensor(x).to(getattr(ampc, dtype)).requires_grad_()
    out = am(ax)[0]
    assert out.dtype == getattr(ampc, dtype)
    tx = torch.tensor(x, requires_grad=True)
    tout = tm(tx)[0]
    np.testing.assert_allclose(out.float().detach().numpy(),
                               tout.detach().numpy(), atol=atol)
    out.float().sum().backward()
    tout.sum().backward()
    assert ax.grad.dtype == getattr(ampc, dtype)
    np.testing.assert_allclose(ax.grad.float().numpy(), tx.grad.numpy(),
                               atol=4 * atol)


# ----------------------------------------------------------------------------
# parameters, init, repr, dropout


@needs_torch
@pytest.mark.parametrize("args,kw", [
    ((4, 6), {}), ((4, 6, 2), {"bidirectional": True, "proj_size": 3}),
    ((4, 6), {"bias": False, "batch_first": True, "dropout": 0.1,
              "num_layers": 2})])
def test_lstm_parameters_and_repr_are_torchs(args, kw):
    tm, am = torch.nn.LSTM(*args, **kw), nn.LSTM(*args, **kw)
    assert [(k, tuple(v.shape)) for k, v in am.named_parameters()] == \
        [(k, tuple(v.shape)) for k, v in tm.named_parameters()]
    assert repr(am) == repr(tm)


@needs_torch
def test_cell_and_rnn_reprs_are_torchs():
    for args in [(4, 6, True, "relu"), (4, 6, False)]:
        assert repr(nn.RNNCell(*args)) == repr(torch.nn.RNNCell(*args))
    assert repr(nn.GRUCell(3, 2)) == repr(torch.nn.GRUCell(3, 2))
    assert repr(nn.RNN(3, 2, 2, "relu")) == repr(torch.nn.RNN(3, 2, 2,
                                                              "relu"))


def test_initialisation_is_uniform_in_one_over_sqrt_hidden():
    ampc.manual_seed(0)
    m = nn.GRU(30, 25, 2, bidirectional=True)
    for p in m.parameters():
        v = p.detach().numpy()
        assert np.abs(v).max() <= 0.2 and np.abs(v).max() > 0.19
    cell = nn.LSTMCell(3, 100)
    assert np.abs(cell.weight_hh.detach().numpy()).max() <= 0.1


def test_dropout_between_layers():
    m = nn.LSTM(4, 6, num_layers=2, dropout=0.5)
    x = ampc.randn(5, 3, 4)
    ampc.manual_seed(7)
    a = m(x)[0]
    ampc.manual_seed(7)
    b = m(x)[0]
    c = m(x)[0]
    assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    assert not np.array_equal(a.detach().numpy(), c.detach().numpy())
    m.eval()
    e = m(x)[0]
    m.dropout = 0.0
    assert np.array_equal(e.detach().numpy(), m(x)[0].detach().numpy())


@pytest.mark.parametrize("p", [0.3, 0.5, 1.0])
def test_dropout_statistics(p):
    """Layer 1 puts out ones, layer 2 passes its input through (relu,
    identity W_ih, zero W_hh): its output is the dropout mask, zeros with
    probability p and 1 / (1 - p) elsewhere."""
    size = 2000
    m = nn.RNN(1, size, num_layers=2, nonlinearity="relu", bias=False,
               dropout=p)
    with ampc.no_grad():
        m.weight_ih_l0.fill_(1.0)
        m.weight_hh_l0.zero_()
        m.weight_ih_l1.copy_(ampc.tensor(np.eye(size, dtype=np.float32)))
        m.weight_hh_l1.zero_()
    ampc.manual_seed(3)
    out = m(ampc.ones(2, 4, 1))[0].detach().numpy()
    zeros = (out == 0).mean()
    assert abs(zeros - p) < 0.02
    if p < 1:
        np.testing.assert_allclose(out[out != 0], 1 / (1 - p), rtol=1e-6)
    m.eval()
    assert (m(ampc.ones(2, 4, 1))[0].detach().numpy() == 1).all()


def test_dropout_warning_and_errors():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(4, 6, dropout=0.5)
    with pytest.raises(ValueError, match=r"dropout should be a number in "
                                         r"range \[0, 1\]"):
        nn.GRU(4, 6, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater"):
        nn.RNN(4, 0)
    with pytest.raises(ValueError, match="num_layers must be greater"):
        nn.RNN(4, 3, 0)
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(4, 3, proj_size=3)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.RNNBase("GRU", 4, 6, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'x'"):
        nn.RNNCell(4, 6, nonlinearity="x")


# ----------------------------------------------------------------------------
# errors


def _raises(exc, match, fn):
    with pytest.raises(exc, match=match):
        fn()


def test_shape_errors_have_torchs_wording():
    m = nn.LSTM(4, 6, num_layers=2)
    x = ampc.randn(5, 3, 4)
    _raises(RuntimeError, r"input.size\(-1\) must be equal to input_size. "
            "Expected 4, got 5", lambda: m(ampc.randn(5, 3, 5)))
    _raises(RuntimeError, r"Expected hidden\[0\] size \(2, 3, 6\), got "
            r"\[1, 3, 6\]", lambda: m(x, (ampc.zeros(1, 3, 6),
                                          ampc.zeros(2, 3, 6))))
    _raises(RuntimeError, r"Expected hidden\[1\] size \(2, 3, 6\), got "
            r"\[2, 2, 6\]", lambda: m(x, (ampc.zeros(2, 3, 6),
                                          ampc.zeros(2, 2, 6))))
    _raises(RuntimeError, "For unbatched 2-D input, hx and cx should also "
            r"be 2-D but got \(3-D, 3-D\) tensors",
            lambda: m(ampc.randn(5, 4), (ampc.zeros(2, 3, 6),
                                         ampc.zeros(2, 3, 6))))
    _raises(ValueError, "LSTM: Expected input to be 2D or 3D, got 4D "
            "instead", lambda: m(ampc.randn(5, 3, 4, 1)))
    g = nn.GRU(4, 6)
    _raises(RuntimeError, r"Expected hidden size \(1, 3, 6\), got "
            r"\[2, 3, 6\]", lambda: g(x, ampc.zeros(2, 3, 6)))
    _raises(RuntimeError, "For batched 3-D input, hx should also be 3-D but "
            "got 2-D tensor", lambda: g(x, ampc.zeros(3, 6)))
    c = nn.LSTMCell(4, 6)
    _raises(RuntimeError, "input has inconsistent input_size: got 5 "
            "expected 4", lambda: c(ampc.randn(3, 5)))
    _raises(RuntimeError, "Input batch size 3 doesn't match hidden0 batch "
            "size 2", lambda: c(ampc.randn(3, 4), (ampc.zeros(2, 6),
                                                    ampc.zeros(3, 6))))
    _raises(RuntimeError, "hidden1 has inconsistent hidden_size: got 5, "
            "expected 6", lambda: c(ampc.randn(3, 4), (ampc.zeros(3, 6),
                                                        ampc.zeros(3, 5))))
    _raises(ValueError, "LSTMCell: Expected input to be 1D or 2D, got 3D "
            "instead", lambda: c(ampc.randn(3, 4, 1)))


def test_dtype_mismatch_is_torchs_error():
    m = nn.LSTM(4, 6).bfloat16()
    _raises(ValueError, "RNN input dtype .* does not match weight dtype",
            lambda: m(ampc.randn(5, 3, 4)))


@pytest.mark.parametrize("name,kw", [
    ("LSTM", {"proj_size": 2, "bidirectional": True}),
    ("GRU", {"num_layers": 2}), ("RNN", {"nonlinearity": "relu"})])
def test_create_graph_gives_the_plain_gradient(name, kw):
    m = getattr(nn, name)(3, 4, **kw)
    x = ampc.randn(5, 2, 3, requires_grad=True)
    out = m(x)[0]
    plain, = ampc.autograd.grad((out * out).sum(), x, retain_graph=True)
    graph, = ampc.autograd.grad((out * out).sum(), x, create_graph=True)
    assert graph.grad_fn is not None
    np.testing.assert_allclose(graph.detach().numpy(), plain.numpy(),
                               rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("name,kw,packed", [
    ("LSTM", {"proj_size": 2, "bidirectional": True}, False),
    ("GRU", {"num_layers": 2}, False),
    ("RNN", {"nonlinearity": "relu"}, False),
    ("RNN", {}, True), ("LSTM", {}, True)])
def test_second_derivatives_match_torch(name, kw, packed):
    """d/dW_hh of |d(sum out^2)/dx|^2, torch in float64."""
    from ampc.nn.utils.rnn import pack_padded_sequence as apack
    from torch.nn.utils.rnn import pack_padded_sequence as tpack
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4, **kw).double()
    am = getattr(nn, name)(3, 4, **kw)
    am.load_state_dict({k: ampc.tensor(v.float().numpy())
                        for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(
        np.float32)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ax = ampc.tensor(x, requires_grad=True)
    tout = tm(tpack(tx, [5, 3]) if packed else tx)[0]
    aout = am(apack(ax, [5, 3]) if packed else ax)[0]
    if packed:
        tout, aout = tout.data, aout.data
    tg, = torch.autograd.grad((tout ** 2).sum(), tx, create_graph=True)
    ag, = ampc.autograd.grad((aout * aout).sum(), ax, create_graph=True)
    np.testing.assert_allclose(ag.detach().numpy(), tg.detach().numpy(),
                               atol=1e-4)
    want = torch.autograd.grad((tg ** 2).sum(), tm.weight_hh_l0)[0].numpy()
    got = ampc.autograd.grad((ag * ag).sum(), am.weight_hh_l0)[0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-3,
                               atol=1e-3 * np.abs(want).max())


# ----------------------------------------------------------------------------
# autocast


def _policy_built():
    return ampc._C.autocast_policy("lstm", "cpu") is not None


needs_policy = pytest.mark.skipif(
    not _policy_built(), reason="_C built before the RNN autocast entries")


@needs_policy
def test_cpu_autocast_dtypes_are_torchs():
    """LSTM and RNN come out bfloat16 (PyTorch: mkldnn_rnn_layer and
    composite linear steps), GRU and the LSTM/GRU cells float32."""
    x = ampc.randn(5, 3, 4)
    want = {nn.LSTM: ampc.bfloat16, nn.RNN: ampc.bfloat16,
            nn.GRU: ampc.float32}
    for cls, dtype in want.items():
        with ampc.autocast("cpu"):
            out, h = cls(4, 6)(x)
        assert out.dtype == dtype, cls
    with ampc.autocast("cpu"):
        assert nn.LSTMCell(4, 6)(x[0])[0].dtype == ampc.float32
        assert nn.GRUCell(4, 6)(x[0]).dtype == ampc.float32
        assert nn.RNNCell(4, 6)(x[0]).dtype == ampc.bfloat16


@needs_policy
def test_cpu_autocast_lstm_equals_the_bfloat16_model():
    m = nn.LSTM(4, 6, 2)
    x = ampc.randn(5, 3, 4, requires_grad=True)
    with ampc.autocast("cpu"):
        out, (h, c) = m(x)
    assert h.dtype == c.dtype == ampc.bfloat16
    out.float().sum().backward()
    assert x.grad.dtype == ampc.float32
    assert m.weight_hh_l1.grad.dtype == ampc.float32
    control = nn.LSTM(4, 6, 2)
    control.load_state_dict(m.state_dict())
    control.bfloat16()
    want = control(x.detach().bfloat16())[0]
    assert np.array_equal(out.detach().float().numpy(),
                          want.detach().float().numpy())


@needs_torch
@needs_policy
@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN", "LSTMCell",
                                  "GRUCell", "RNNCell"])
def test_cpu_autocast_is_close_to_torchs(name):
    tm, am = getattr(torch.nn, name)(4, 8), getattr(nn, name)(4, 8)
    _copy_from_torch(tm, am)
    x = np.random.default_rng(0).standard_normal((6, 3, 4)).astype(
        np.float32)
    x = x[0] if "Cell" in name else x
    with torch.autocast("cpu"):
        want = _flat(tm(torch.tensor(x)))
    with ampc.autocast("cpu"):
        got = _flat(am(ampc.tensor(x)))
    for a, t in zip(got, want):
        assert str(a.dtype)[5:] == str(t.dtype)[6:]
        np.testing.assert_allclose(a.detach().float().numpy(),
                                   t.detach().float().numpy(), atol=2e-2)


@needs_torch
@needs_policy
@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN", "LSTMCell",
                                  "GRUCell", "RNNCell"])
def test_cpu_autocast_takes_a_bfloat16_input_as_torch(name):
    """A bfloat16 input (a lower-precision layer's output) into float32
    weights: under autocast the policy casts (no dtype error, as
    PyTorch checks the dtypes only outside autocast)."""
    tm, am = getattr(torch.nn, name)(4, 8), getattr(nn, name)(4, 8)
    _copy_from_torch(tm, am)
    x = np.random.default_rng(1).standard_normal((6, 3, 4)).astype(
        np.float32)
    x = x[0] if "Cell" in name else x
    with torch.autocast("cpu"):
        want = _flat(tm(torch.tensor(x).bfloat16()))
    with ampc.autocast("cpu"):
        got = _flat(am(ampc.tensor(x).bfloat16()))
    for a, t in zip(got, want):
        assert str(a.dtype)[5:] == str(t.dtype)[6:]
        np.testing.assert_allclose(a.detach().float().numpy(),
                                   t.detach().float().numpy(), atol=3e-2)


# ----------------------------------------------------------------------------
# pad_sequence


def test_pad_sequence():
    a, b = ampc.ones(3, 2, requires_grad=True), ampc.full((1, 2), 2.0)
    y = pad_sequence([a, b], padding_value=-1)
    assert y.shape == (3, 2, 2)
    assert y[:, 1, 0].tolist() == [2.0, -1.0, -1.0]
    y = pad_sequence([a, b], batch_first=True, padding_side="left")
    assert y[1, :, 0].tolist() == [0.0, 0.0, 2.0]
    y.sum().backward()
    assert a.grad.tolist() == [[1.0, 1.0]] * 3
    _raises(RuntimeError, "received an empty list", lambda: pad_sequence([]))
    _raises(RuntimeError, "Expected padding_side to be one of left or "
            "right, but got up.", lambda: pad_sequence([a], padding_side="up"))


@needs_torch
def test_pad_sequence_matches_torch():
    from torch.nn.utils.rnn import pad_sequence as tpad
    rng = np.random.default_rng(0)
    seqs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (4, 1, 6)]
    for kw in ({}, {"batch_first": True, "padding_value": 0.5},
               {"padding_side": "left"}):
        got = pad_sequence([ampc.tensor(s) for s in seqs], **kw)
        want = tpad([torch.tensor(s) for s in seqs], **kw)
        assert np.array_equal(got.numpy(), want.numpy())


# ----------------------------------------------------------------------------
# CUDA


@pytest.mark.cuda
@requires_cuda
@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("dtype,atol", [("float32", 1e-4),
                                        ("float16", 2e-2)])
def test_cuda_matches_the_cpu(name, dtype, atol):
    ampc.manual_seed(0)
    m = getattr(nn, name)(4, 33, 2, bidirectional=True)
    x = np.random.default_rng(0).standard_normal((7, 3, 4)).astype(
        np.float32)
    results = []
    for dev in ("cpu", "cuda"):
        md = getattr(nn, name)(4, 33, 2, bidirectional=True)
        md.load_state_dict(m.state_dict())
        md.to(dev).to(getattr(ampc, dtype))
        xd = ampc.tensor(x).to(dev).to(getattr(ampc, dtype))
        xd.requires_grad_()
        out = md(xd)[0]
        out.float().sum().backward()
        results.append((out.float().cpu().detach().numpy(),
                        xd.grad.float().cpu().numpy(),
                        md.weight_hh_l0.grad.float().cpu().numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, atol=atol, rtol=atol)


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_runs_lstm_and_cells_in_float16():
    x = ampc.randn(5, 3, 4, device="cuda")
    with ampc.autocast("cuda"):
        for cls in (nn.LSTM, nn.GRU, nn.RNN):
            out = cls(4, 6).cuda()(x)[0]
            assert out.dtype == ampc.float16
        assert nn.LSTMCell(4, 6).cuda()(x[0])[0].dtype == ampc.float16
        assert nn.GRUCell(4, 6).cuda()(x[0]).dtype == ampc.float16


@pytest.mark.parametrize("module", ["ampc.nn.modules.rnn",
                                    "ampc.nn.utils.rnn"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
