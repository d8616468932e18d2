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

Second derivatives (``create_graph=True``) go through: the node's graph
backward runs the same steps again with differentiable ops.
"""
from .. import _C
from ..autograd import Function, _mode
from .._creation import zeros_like
from ._rnn_math import CELLS, GRAPH, RAW


def _acc(o, a, b):
    return b if a is None else (a if b is None else o.add(a, b))


def _rows(t, n):
    """The first n rows of t (t itself when it has n)."""
    return t if t is None or t.shape[0] == n else t[:n]


def _merge(o, head, full):
    """head over the first rows of full: the state after a step that only
    some (the first) sequences of the batch take."""
    if head is None or head.shape[0] == full.shape[0]:
        return head
    return o.cat([head, o.cast(full[head.shape[0]:], head.dtype)])


class _Steps:
    """What the steps of one layer and direction keep for backward."""

    def __init__(self, mode, reverse, batch_sizes):
        self.mode, self.batch_sizes = mode, batch_sizes
        self.starts = [0]
        for b in batch_sizes:
            self.starts.append(self.starts[-1] + b)
        order = range(len(batch_sizes))
        self.steps = order[::-1] if reverse else order
        self.saved, self.prev, self.raw = {}, {}, {}


def _run(o, gx, h0, c0, w_hh, b_hh, w_hr, rec):
    """The steps forward: (output (S, H_out), h_n, c_n)."""
    step, dtype, starts = CELLS[rec.mode][0], w_hh.dtype, rec.starts
    gx = o.cast(gx, dtype)
    h, c, hs = h0, c0, {}
    for t in rec.steps:
        b = rec.batch_sizes[t]
        h_in = rec.prev[t] = _rows(h, b)
        h2, c2, rec.saved[t] = step(o, gx[starts[t]:starts[t + 1]],
                                    o.linear(h_in, w_hh, b_hh), h_in,
                                    _rows(c, b))
        h2 = o.cast(h2, dtype)
        if w_hr is not None:
            rec.raw[t] = h2
            h2 = o.matmul(h2, w_hr.t())
        hs[t] = h2
        h, c = _merge(o, h2, h), _merge(o, o.cast(c2, dtype), c)
    return o.cat([hs[t] for t in range(len(hs))]), h, c


def _run_back(o, rec, dout, dh, dc, w_hh, b_hh, w_hr, needs):
    """The steps backward: the gradients of gx, h0, c0, w_hh, b_hh and
    w_hr (in w_hh's dtype)."""
    back, dtype, starts = CELLS[rec.mode][1], w_hh.dtype, rec.starts
    dgx, dgh, dhs = {}, {}, {}
    for t in reversed(rec.steps):
        b = rec.batch_sizes[t]
        dh_t = _acc(o, dout[starts[t]:starts[t + 1]], _rows(dh, b))
        if w_hr is not None:
            dhs[t] = dh_t
            dh_t = o.matmul(o.cast(dh_t, dtype), w_hr)
        gx_t, gh_t, dc_t, direct = back(o, dh_t, _rows(dc, b),
                                        rec.saved[t])
        dgx[t], dgh[t] = o.cast(gx_t, dtype), o.cast(gh_t, dtype)
        dh = _merge(o, _acc(o, o.matmul(dgh[t], w_hh), direct), dh)
        dc = _merge(o, dc_t, dc)
    order = range(len(dgx))
    g_whh = g_bhh = g_whr = None
    if needs[3] or needs[4]:
        g_whh, g_bhh = o.weight_grads(
            o.cat([dgh[t] for t in order]),
            o.cat([rec.prev[t] for t in order]), w_hh, needs[3],
            needs[4] and b_hh is not None)
    if w_hr is not None and needs[5]:
        g_whr = o.weight_grads(
            o.cast(o.cat([dhs[t] for t in order]), dtype),
            o.cat([rec.raw[t] for t in order]), w_hr, True, False)[0]
    return (o.cat([dgx[t] for t in order]), o.cast(dh, dtype),
            o.cast(dc, dtype), g_whh, g_bhh, g_whr)


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
        ctx.rec = _Steps(mode, reverse, batch_sizes)
        ctx.args = (mode, reverse, batch_sizes)
        ctx.save_for_backward(gx, h0, c0, w_hh, b_hh, w_hr)
        out, h, c = _run(RAW, gx, h0, c0, w_hh, b_hh, w_hr, ctx.rec)
        return (out, h, c) if mode == "lstm" else (out, h)

    @staticmethod
    def backward(ctx, dout, dh_n, dc_n=None):
        gx, h0, c0, w_hh, b_hh, w_hr = ctx.saved_tensors
        grads = _run_back(RAW, ctx.rec, dout, dh_n, dc_n, w_hh, b_hh, w_hr,
                          ctx.needs_input_grad)
        return (RAW.cast(grads[0], gx.dtype),) + grads[1:] + (None,) * 3


def _graph_grads(node, *grads):
    """_Recurrent's input gradients as a graph (create_graph=True): the
    steps run again with differentiable ops from the saved inputs, then
    the same backward math on them."""
    gx, h0, c0, w_hh, b_hh, w_hr = node.saved_tensors
    rec = _Steps(*node.args)
    outs = _run(GRAPH, gx, h0, c0, w_hh, b_hh, w_hr, rec)
    dout, dh, dc = (g if g is not None or o is None else zeros_like(o)
                    for g, o in zip(grads + (None,) * 3, outs))
    res = _run_back(GRAPH, rec, dout, dh, dc, w_hh, b_hh, w_hr,
                    node.needs_input_grad)
    return (GRAPH.cast(res[0], gx.dtype),) + res[1:] + (None,) * 3


def formulas():
    """The differentiable backward of the recurrent node, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    return {_Recurrent: _graph_grads}


def _layer(mode, x, h0, c0, weights, reverse, batch_sizes):
    """One direction of one layer over packed x (S, I); weights is (w_ih,
    w_hh, b_ih, b_hh, w_hr), the biases and w_hr possibly None.  The input
    projection is one GEMM over every step."""
    from .functional import _linear
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    if _C.autocast_active() and h0.dtype != w_hh.dtype and \
            h0.dtype.name in ("float16", "bfloat16"):
        # a 16-bit hidden state under autocast (a 16-bit input, the modes
        # the policy leaves alone): PyTorch's composite casts each step's
        # linear to it, so the steps run in its dtype
        w_hh, b_hh, w_hr = (None if w is None else w.to(h0.dtype)
                            for w in (w_hh, b_hh, w_hr))
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
