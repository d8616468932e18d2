"""The pointwise part of one recurrent step, forward and backward written
out, for the RNN layers and cells (``_rnn.py``): from the input's gates
``gx`` = x W_ih^T + b_ih and the hidden state's ``gh`` = h W_hh^T + b_hh to
the new state, in float32 whatever the storage dtype (PyTorch's gate
orders: LSTM i, f, g, o; GRU r, z, n).

Each ``*_step(gx, gh, h, c)`` returns ``(h', c', saved)`` (float32;
``c'`` None but for LSTM) and each ``*_back(dh, dc, saved)`` returns
``(dgx, dgh, dc_prev, dh_prev_direct)``: the gradients of the two gate
pre-activations, of the previous cell state, and the part of the previous
hidden state's gradient that does not go through W_hh (None where there
is none).
"""
from .. import _C

_F32 = _C.float32


def _f32(t):
    return t if t.dtype is _F32 else _C.cast(t, _F32)


def _add(a, b):
    return _C.binary("add", a, b)


def _mul(a, b):
    return _C.binary("mul", a, b)


def _cols(t, k, size):
    """Columns [k*size, (k+1)*size) of a 2-D tensor (a view)."""
    return t[:, k * size:(k + 1) * size]


def lstm_step(gx, gh, h, c):
    size = c.shape[1]
    gates = _add(_f32(gx), _f32(gh))
    act = _C.unary("sigmoid", gates)
    i, f, o = _cols(act, 0, size), _cols(act, 1, size), _cols(act, 3, size)
    g = _C.unary("tanh", _cols(gates, 2, size))
    c = _f32(c)
    c2 = _add(_mul(f, c), _mul(i, g))
    tc = _C.unary("tanh", c2)
    return _mul(o, tc), c2, (i, f, g, o, c, tc)


def lstm_back(dh, dc, saved):
    i, f, g, o, c, tc = saved
    dh = _f32(dh)
    dc = _C.binary("tanh_backward", _mul(dh, o), tc) if dc is None else \
        _add(_f32(dc), _C.binary("tanh_backward", _mul(dh, o), tc))
    dgates = _C.cat([
        _C.binary("sigmoid_backward", _mul(dc, g), i),
        _C.binary("sigmoid_backward", _mul(dc, c), f),
        _C.binary("tanh_backward", _mul(dc, i), g),
        _C.binary("sigmoid_backward", _mul(dh, tc), o)], 1)
    return dgates, dgates, _mul(dc, f), None


def gru_step(gx, gh, h, c):
    size = h.shape[1]
    gx, gh, h = _f32(gx), _f32(gh), _f32(h)
    rz = _C.unary("sigmoid", _add(gx[:, :2 * size], gh[:, :2 * size]))
    r, z = _cols(rz, 0, size), _cols(rz, 1, size)
    ghn = _cols(gh, 2, size)
    n = _C.unary("tanh", _add(_cols(gx, 2, size), _mul(r, ghn)))
    h2 = _add(n, _mul(z, _C.binary("sub", h, n)))    # (1 - z) n + z h
    return h2, None, (r, z, n, ghn, h)


def gru_back(dh, dc, saved):
    r, z, n, ghn, h = saved
    dh = _f32(dh)
    dhz = _mul(dh, z)
    dn = _C.binary("tanh_backward", _C.binary("sub", dh, dhz), n)
    drz = _C.cat([
        _C.binary("sigmoid_backward", _mul(dn, ghn), r),
        _C.binary("sigmoid_backward",
                  _mul(dh, _C.binary("sub", h, n)), z)], 1)
    return _C.cat([drz, dn], 1), _C.cat([drz, _mul(dn, r)], 1), None, dhz


def rnn_tanh_step(gx, gh, h, c):
    h2 = _C.unary("tanh", _add(_f32(gx), _f32(gh)))
    return h2, None, (h2,)


def rnn_tanh_back(dh, dc, saved):
    d = _C.binary("tanh_backward", _f32(dh), saved[0])
    return d, d, None, None


def rnn_relu_step(gx, gh, h, c):
    h2 = _C.unary("relu", _add(_f32(gx), _f32(gh)))
    return h2, None, (h2,)


def rnn_relu_back(dh, dc, saved):
    d = _C.relu_backward(_f32(dh), saved[0])
    return d, d, None, None


# mode -> (step, back, gates per hidden unit)
CELLS = {
    "lstm": (lstm_step, lstm_back, 4),
    "gru": (gru_step, gru_back, 3),
    "rnn_tanh": (rnn_tanh_step, rnn_tanh_back, 1),
    "rnn_relu": (rnn_relu_step, rnn_relu_back, 1),
}
