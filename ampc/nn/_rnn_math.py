"""The pointwise part of one recurrent step, forward and backward written
out, for the RNN layers and cells (``_rnn.py``): from the input's gates
``gx`` = x W_ih^T + b_ih and the hidden state's ``gh`` = h W_hh^T + b_hh to
the new state, in float32 whatever the storage dtype (PyTorch's gate
orders: LSTM i, f, g, o; GRU r, z, n).

Each ``*_step(o, gx, gh, h, c)`` returns ``(h', c', saved)`` (float32;
``c'`` None but for LSTM) and each ``*_back(o, dh, dc, saved)`` returns
``(dgx, dgh, dc_prev, dh_prev_direct)``: the gradients of the two gate
pre-activations, of the previous cell state, and the part of the previous
hidden state's gradient that does not go through W_hh (None where there
is none).  ``o`` is the set of ops they run on: ``RAW``, ``_C``'s kernels
with no autograd (the node's forward and backward), or ``GRAPH``, ampc's
differentiable ops (the same math as a graph, for second derivatives).
"""
import operator

from .. import _C

_F32 = _C.float32


class RAW:
    """``_C``'s kernels, called directly (no autograd); the functions
    are used from the class (``RAW.add(a, b)``)."""

    def add(a, b):
        return _C.binary("add", a, b)

    def sub(a, b):
        return _C.binary("sub", a, b)

    def mul(a, b):
        return _C.binary("mul", a, b)

    def sigmoid(a):
        return _C.unary("sigmoid", a)

    def tanh(a):
        return _C.unary("tanh", a)

    def relu(a):
        return _C.unary("relu", a)

    def cat(ts):
        return _C.cat(ts, 0)

    def cat1(ts):
        return _C.cat(ts, 1)

    matmul = _C.matmul
    relu_back = _C.relu_backward

    def linear(x, w, b):
        return _C.linear(x, w, b, False)

    def sigmoid_back(g, y):
        return _C.binary("sigmoid_backward", g, y)

    def tanh_back(g, y):
        return _C.binary("tanh_backward", g, y)

    def cast(t, dtype):
        return t if t is None or t.dtype is dtype else _C.cast(t, dtype)

    def weight_grads(g, x, w, need_w, need_b):
        """(gw, gb) of y = x w^T + b for y's gradient g."""
        return _C.linear_backward(g, x, w, (False, need_w, need_b))[1:]


class GRAPH:
    """ampc's differentiable ops (grad mode on: they build a graph)."""

    add, sub, mul = operator.add, operator.sub, operator.mul

    def sigmoid(a):
        return a.sigmoid()

    def tanh(a):
        return a.tanh()

    def relu(a):
        from .functional import relu
        return relu(a)

    def cat(ts):
        from .._creation import cat
        return cat(ts, 0)

    def cat1(ts):
        from .._creation import cat
        return cat(ts, 1)

    def matmul(a, b):
        return a @ b

    def linear(x, w, b):
        from .functional import linear
        return linear(x, w, b)

    def sigmoid_back(g, y):
        return g * (y * (1 - y))

    def tanh_back(g, y):
        return g * (1 - y * y)

    def relu_back(g, y):
        return g * (y > 0)

    def cast(t, dtype):
        return t if t is None or t.dtype is dtype else t.to(dtype)

    def weight_grads(g, x, w, need_w, need_b):
        return (g.t() @ x if need_w else None,
                g.sum(0) if need_b else None)


def _cols(t, k, size):
    """Columns [k*size, (k+1)*size) of a 2-D tensor (a view)."""
    return t[:, k * size:(k + 1) * size]


def lstm_step(o, gx, gh, h, c):
    size = c.shape[1]
    gates = o.add(o.cast(gx, _F32), o.cast(gh, _F32))
    act = o.sigmoid(gates)
    i, f, og = _cols(act, 0, size), _cols(act, 1, size), _cols(act, 3, size)
    g = o.tanh(_cols(gates, 2, size))
    c = o.cast(c, _F32)
    c2 = o.add(o.mul(f, c), o.mul(i, g))
    tc = o.tanh(c2)
    return o.mul(og, tc), c2, (i, f, g, og, c, tc)


def lstm_back(o, dh, dc, saved):
    i, f, g, og, c, tc = saved
    dh = o.cast(dh, _F32)
    dc2 = o.tanh_back(o.mul(dh, og), tc)
    dc = dc2 if dc is None else o.add(o.cast(dc, _F32), dc2)
    dgates = o.cat1([
        o.sigmoid_back(o.mul(dc, g), i),
        o.sigmoid_back(o.mul(dc, c), f),
        o.tanh_back(o.mul(dc, i), g),
        o.sigmoid_back(o.mul(dh, tc), og)])
    return dgates, dgates, o.mul(dc, f), None


def gru_step(o, gx, gh, h, c):
    size = h.shape[1]
    gx, gh, h = o.cast(gx, _F32), o.cast(gh, _F32), o.cast(h, _F32)
    rz = o.sigmoid(o.add(gx[:, :2 * size], gh[:, :2 * size]))
    r, z = _cols(rz, 0, size), _cols(rz, 1, size)
    ghn = _cols(gh, 2, size)
    n = o.tanh(o.add(_cols(gx, 2, size), o.mul(r, ghn)))
    h2 = o.add(n, o.mul(z, o.sub(h, n)))    # (1 - z) n + z h
    return h2, None, (r, z, n, ghn, h)


def gru_back(o, dh, dc, saved):
    r, z, n, ghn, h = saved
    dh = o.cast(dh, _F32)
    dhz = o.mul(dh, z)
    dn = o.tanh_back(o.sub(dh, dhz), n)
    drz = o.cat1([o.sigmoid_back(o.mul(dn, ghn), r),
                  o.sigmoid_back(o.mul(dh, o.sub(h, n)), z)])
    return o.cat1([drz, dn]), o.cat1([drz, o.mul(dn, r)]), None, dhz


def rnn_tanh_step(o, gx, gh, h, c):
    h2 = o.tanh(o.add(o.cast(gx, _F32), o.cast(gh, _F32)))
    return h2, None, (h2,)


def rnn_tanh_back(o, dh, dc, saved):
    d = o.tanh_back(o.cast(dh, _F32), saved[0])
    return d, d, None, None


def rnn_relu_step(o, gx, gh, h, c):
    h2 = o.relu(o.add(o.cast(gx, _F32), o.cast(gh, _F32)))
    return h2, None, (h2,)


def rnn_relu_back(o, dh, dc, saved):
    d = o.relu_back(o.cast(dh, _F32), saved[0])
    return d, d, None, None


# mode -> (step, back)
CELLS = {
    "lstm": (lstm_step, lstm_back),
    "gru": (gru_step, gru_back),
    "rnn_tanh": (rnn_tanh_step, rnn_tanh_back),
    "rnn_relu": (rnn_relu_step, rnn_relu_back),
}
