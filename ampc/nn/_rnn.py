"""The recurrent layers' computation, as PyTorch's RNN, LSTM and GRU (and
their cells): each layer and direction projects its whole input with one
GEMM (x (T*N, I) @ W_ih^T + b_ih), then one autograd node (``_Recurrent``)
runs the time steps: per step one GEMM h @ W_hh^T + b_hh and the pointwise
gate math of ``_rnn_math`` in float32.  Its backward walks the steps back
with one GEMM per step for the hidden state's gradient, then forms W_hh's
(and LSTM's W_hr's) gradients with one GEMM over all steps.  A cell is the
same node with one step.

Second derivatives (``create_graph=True``) through these nodes are not
supported: autograd raises NotImplementedError naming the node.
"""
from .. import _C
from ..autograd import Function, _mode
from ._rnn_math import CELLS


def _acc(a, b):
    return b if a is None else (a if b is None else _C.binary("add", a, b))


def _as(t, dtype):
    return t if t is None or t.dtype is dtype else _C.cast(t, dtype)


def _stack(ts):
    return _C.cat([t.unsqueeze(0) for t in ts], 0)


def _flat(t):
    return t.reshape((t.shape[0] * t.shape[1],) + tuple(t.shape[2:]))


class _Recurrent(Function):
    """One layer, one direction: (gx (T, N, G), h0, c0, w_hh, b_hh, w_hr)
    -> (output (T, N, H), h_n[, c_n]).  The states keep ``w_hh``'s dtype;
    the gate math runs in float32."""

    node_name = "RecurrentBackward0"
    _all_outputs_differentiable = True

    @staticmethod
    def forward(ctx, gx, h0, c0, w_hh, b_hh, w_hr, mode, reverse):
        step = CELLS[mode][0]
        dtype = w_hh.dtype
        ctx.gx_dtype = gx.dtype
        gx = _as(gx, dtype)
        steps = range(gx.shape[0] - 1, -1, -1) if reverse else \
            range(gx.shape[0])
        h, c = h0, c0
        hs, prev, saved, raw = {}, {}, {}, {}
        for t in steps:
            prev[t] = h
            h2, c, saved[t] = step(gx[t], _C.linear(h, w_hh, b_hh, False),
                                   h, c)
            h2 = _as(h2, dtype)
            if w_hr is not None:
                raw[t] = h2
                h2 = _C.matmul(h2, w_hr.t())
            hs[t] = h = h2
            c = _as(c, dtype)
        order = range(gx.shape[0])
        ctx.mode, ctx.steps = mode, steps
        ctx.saved, ctx.prev = saved, prev
        ctx.raw = [raw[t] for t in order] if w_hr is not None else None
        ctx.has_c0 = c0 is not None
        ctx.save_for_backward(w_hh, b_hh, w_hr)
        out = _stack([hs[t] for t in order])
        return (out, h, c) if mode == "lstm" else (out, h)

    @staticmethod
    def backward(ctx, dout, dh_n, dc_n=None):
        w_hh, b_hh, w_hr = ctx.saved_tensors
        back = CELLS[ctx.mode][1]
        dtype = w_hh.dtype
        dgx, dgh, dhs = {}, {}, {}
        dh, dc = dh_n, dc_n
        for t in reversed(ctx.steps):
            dh = _acc(dout[t], dh)
            if w_hr is not None:
                dhs[t] = dh
                dh = _C.matmul(_as(dh, dtype), w_hr)
            gx_t, gh_t, dc, direct = back(dh, dc, ctx.saved[t])
            dgx[t], dgh[t] = _as(gx_t, dtype), _as(gh_t, dtype)
            dh = _acc(_C.matmul(dgh[t], w_hh), direct)
        order = range(len(dgx))
        needs = ctx.needs_input_grad
        g_whh = g_bhh = g_whr = None
        if needs[3] or needs[4]:
            _, g_whh, g_bhh = _C.linear_backward(
                _flat(_stack([dgh[t] for t in order])),
                _flat(_stack([ctx.prev[t] for t in order])), w_hh,
                (False, needs[3], needs[4] and b_hh is not None))
        if w_hr is not None and needs[5]:
            _, g_whr, _ = _C.linear_backward(
                _flat(_as(_stack([dhs[t] for t in order]), dtype)),
                _flat(_stack(ctx.raw)), w_hr, (False, True, False))
        g_gx = _as(_stack([dgx[t] for t in order]), ctx.gx_dtype)
        dc = _as(dc, dtype) if ctx.has_c0 else None
        return g_gx, _as(dh, dtype), dc, g_whh, g_bhh, g_whr, None, None


def _gates(x, w_ih, b_ih):
    """x (T, N, I) @ w_ih^T + b_ih as (T, N, G): one GEMM over all steps."""
    from .functional import _linear
    return _linear(_flat(x), w_ih, b_ih, False).reshape(
        (x.shape[0], x.shape[1], w_ih.shape[0]))


def _layer(mode, x, h0, c0, weights, reverse):
    """One direction of one layer over x (T, N, I); weights is (w_ih, w_hh,
    b_ih, b_hh, w_hr), the biases and w_hr possibly None."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    return _Recurrent.apply(_gates(x, w_ih, b_ih), h0, c0, w_hh, b_hh, w_hr,
                            mode, reverse)


def recurrent(mode, x, h0, c0, weights, num_layers, bidirectional,
              dropout, training):
    """The stacked (bi)directional layers over x (T, N, I) from h0 (and c0
    for LSTM) (L*D, N, ·): (output (T, N, D*H_out), h_n[, c_n])."""
    from .functional import dropout as _dropout
    from .._creation import cat, stack
    dirs = 2 if bidirectional else 1
    hn, cn = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            res = _layer(mode, x, h0[k], None if c0 is None else c0[k],
                         weights[k], d == 1)
            outs.append(res[0])
            hn.append(res[1])
            if c0 is not None:
                cn.append(res[2])
        x = outs[0] if dirs == 1 else cat(outs, 2)
        if dropout and training and layer < num_layers - 1:
            x = _dropout(x, dropout, True)
    return x, stack(hn), (stack(cn) if c0 is not None else None)


def cell(mode, input, hx, cx, w_ih, w_hh, b_ih, b_hh):
    """One step of a cell on input (N, I) from hx (and cx) (N, H): the new
    hx, or (hx, cx) for LSTM.  Autocast applies ``mode + "_cell"``'s
    policy first."""
    if _C.autocast_active():
        input, hx, cx, w_ih, w_hh, b_ih, b_hh = _C.autocast_cast_args(
            mode + "_cell", (input, hx, cx, w_ih, w_hh, b_ih, b_hh),
            _mode.enabled)
    res = _layer(mode, input.unsqueeze(0), hx, cx,
                 (w_ih, w_hh, b_ih, b_hh, None), False)
    return (res[1], res[2]) if mode == "lstm" else res[1]
