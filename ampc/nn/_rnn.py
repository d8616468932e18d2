"""The recurrent layers' computation, as PyTorch's RNN, LSTM and GRU (and
their cells), over packed sequences (a padded batch is one whose sequences
all run every step): each layer and direction projects its whole input
with one GEMM (x (S, I) @ W_ih^T + b_ih, S = T*N when padded), then one
autograd node (``_Recurrent``) runs the time steps: per step one GEMM
h @ W_hh^T + b_hh and the pointwise gate math of ``_rnn_math`` in
float32.  Its backward walks the steps back
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


def _rows(t, n):
    """The first n rows of t (t itself when it has n)."""
    return t if t.shape[0] == n else t[:n]


def _merge(head, full):
    """head over the first rows of full: the state after a step that only
    some (the first) sequences of the batch take."""
    if head is None or head.shape[0] == full.shape[0]:
        return head
    return _C.cat([head, _as(full[head.shape[0]:], head.dtype)], 0)


class _Recurrent(Function):
    """One layer, one direction over a packed sequence: gx (S, G), step t
    the next batch_sizes[t] rows (the sequences still running, longest
    first; a padded batch has N at every step), h0 (B, H_out) and c0
    (B, H) -> (output (S, H_out), h_n, [c_n]).  A sequence's state stops
    changing after its last step (its h_n); backwards it starts from its
    own last step.  The states keep ``w_hh``'s dtype; the gate math runs
    in float32."""

    node_name = "RecurrentBackward0"
    _all_outputs_differentiable = True

    @staticmethod
    def forward(ctx, gx, h0, c0, w_hh, b_hh, w_hr, mode, reverse,
                batch_sizes):
        step = CELLS[mode][0]
        dtype = w_hh.dtype
        ctx.gx_dtype = gx.dtype
        gx = _as(gx, dtype)
        starts = [0]
        for b in batch_sizes:
            starts.append(starts[-1] + b)
        steps = range(len(batch_sizes))
        steps = steps[::-1] if reverse else steps
        h, c = h0, c0
        hs, prev, saved, raw = {}, {}, {}, {}
        for t in steps:
            b = batch_sizes[t]
            h_in = prev[t] = _rows(h, b)
            h2, c2, saved[t] = step(
                gx[starts[t]:starts[t + 1]],
                _C.linear(h_in, w_hh, b_hh, False), h_in,
                None if c is None else _rows(c, b))
            h2 = _as(h2, dtype)
            if w_hr is not None:
                raw[t] = h2
                h2 = _C.matmul(h2, w_hr.t())
            hs[t] = h2
            h, c = _merge(h2, h), _merge(_as(c2, dtype), c)
        order = range(len(batch_sizes))
        ctx.mode, ctx.steps, ctx.starts = mode, steps, starts
        ctx.batch_sizes = batch_sizes
        ctx.saved, ctx.prev = saved, prev
        ctx.raw = [raw[t] for t in order] if w_hr is not None else None
        ctx.has_c0 = c0 is not None
        ctx.save_for_backward(w_hh, b_hh, w_hr)
        out = _C.cat([hs[t] for t in order], 0)
        return (out, h, c) if mode == "lstm" else (out, h)

    @staticmethod
    def backward(ctx, dout, dh_n, dc_n=None):
        w_hh, b_hh, w_hr = ctx.saved_tensors
        back = CELLS[ctx.mode][1]
        dtype = w_hh.dtype
        starts = ctx.starts
        dgx, dgh, dhs = {}, {}, {}
        dh, dc = dh_n, dc_n
        for t in reversed(ctx.steps):
            b = ctx.batch_sizes[t]
            dh_t = _acc(dout[starts[t]:starts[t + 1]], _rows(dh, b))
            if w_hr is not None:
                dhs[t] = dh_t
                dh_t = _C.matmul(_as(dh_t, dtype), w_hr)
            gx_t, gh_t, dc_t, direct = back(
                dh_t, None if dc is None else _rows(dc, b), ctx.saved[t])
            dgx[t], dgh[t] = _as(gx_t, dtype), _as(gh_t, dtype)
            dh = _merge(_acc(_C.matmul(dgh[t], w_hh), direct), dh)
            dc = _merge(dc_t, dc)
        order = range(len(dgx))
        needs = ctx.needs_input_grad
        g_whh = g_bhh = g_whr = None
        if needs[3] or needs[4]:
            _, g_whh, g_bhh = _C.linear_backward(
                _C.cat([dgh[t] for t in order], 0),
                _C.cat([ctx.prev[t] for t in order], 0), w_hh,
                (False, needs[3], needs[4] and b_hh is not None))
        if w_hr is not None and needs[5]:
            _, g_whr, _ = _C.linear_backward(
                _as(_C.cat([dhs[t] for t in order], 0), dtype),
                _C.cat(ctx.raw, 0), w_hr, (False, True, False))
        g_gx = _as(_C.cat([dgx[t] for t in order], 0), ctx.gx_dtype)
        dc = _as(dc, dtype) if ctx.has_c0 else None
        return (g_gx, _as(dh, dtype), dc, g_whh, g_bhh, g_whr, None, None,
                None)


def _layer(mode, x, h0, c0, weights, reverse, batch_sizes):
    """One direction of one layer over packed x (S, I); weights is (w_ih,
    w_hh, b_ih, b_hh, w_hr), the biases and w_hr possibly None.  The input
    projection is one GEMM over every step."""
    from .functional import _linear
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    return _Recurrent.apply(_linear(x, w_ih, b_ih, False), h0, c0, w_hh,
                            b_hh, w_hr, mode, reverse, batch_sizes)


def recurrent(mode, x, batch_sizes, h0, c0, weights, num_layers,
              bidirectional, dropout, training):
    """The stacked (bi)directional layers over packed x (S, I) (a padded
    (T, N, I) batch flattened, batch_sizes (N,) * T) from h0 (and c0 for
    LSTM) (L*D, B, ·): (output (S, D*H_out), h_n[, c_n])."""
    from .functional import dropout as _dropout
    from .._creation import cat, stack
    dirs = 2 if bidirectional else 1
    hn, cn = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            res = _layer(mode, x, h0[k], None if c0 is None else c0[k],
                         weights[k], d == 1, batch_sizes)
            outs.append(res[0])
            hn.append(res[1])
            if c0 is not None:
                cn.append(res[2])
        x = outs[0] if dirs == 1 else cat(outs, 1)
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
    res = _layer(mode, input, hx, cx, (w_ih, w_hh, b_ih, b_hh, None),
                 False, (input.shape[0],))
    return (res[1], res[2]) if mode == "lstm" else res[1]
