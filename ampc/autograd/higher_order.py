"""Differentiable backward formulas: what ``backward(create_graph=True)``
and ``autograd.grad(..., create_graph=True)`` run, so that a gradient has a
graph of its own and can be differentiated again (a gradient penalty, as
in PyTorch's ``test_grad_scaling_penalty``).

The ordinary backward of ampc's ops calls ``_C`` kernels directly (fast,
no graph).  Here each supported op's input gradients are written with
ampc's differentiable tensor operations instead; the engine runs them with
grad mode on and autocast off (each gradient keeps its forward's dtype).
An output the op saved for backward is used through a fresh alias whose
``grad_fn`` is the op's own node, as PyTorch unpacks a saved output, so
the second derivative flows through it.  A user's ``Function`` runs its own
``backward`` with grad mode on (as in PyTorch: differentiable when written
with tensor operations).  Any other ampc op raises ``NotImplementedError``
naming it.

>>> import ampc
>>> x = ampc.tensor([1.0, 2.0], requires_grad=True)
>>> g, = ampc.autograd.grad((x ** 3).sum(), x, create_graph=True)
>>> g.grad_fn is not None
True
>>> ampc.autograd.grad(g.sum(), x)[0]          # d2/dx2 x^3 = 6x
tensor([ 6., 12.])
"""
from .. import _C
from . import functions as _fn
from . import indexing as _idx
from . import math_functions as _math
from . import reductions as _red
from . import scatter as _scatter
from . import sort_scan as _sort_scan
from . import higher_order_writes as _writes
from . import views as _views
from .function import Function, _dev_str

_TB = _C.TensorBase
_formulas = None        # Function class -> formula(node, g), made at first use


def graph_backward(node, *grads):
    """``node``'s input gradients for its incoming gradients (one per
    differentiable output), as a graph (grad mode is on)."""
    global _formulas
    if _formulas is None:
        _formulas = _make_formulas()
    fn = node._function
    formula = _formulas.get(fn)
    if formula is not None:
        return formula(node, *grads)
    if not fn.__module__.startswith("ampc."):
        return _user_backward(node, *grads)
    raise NotImplementedError(
        f"{node.name()}: ampc has no differentiable backward for this op, "
        "so create_graph=True (higher-order gradients) cannot go through "
        "it; it can through element-wise arithmetic (+ - * / neg pow sqrt "
        "rsqrt reciprocal exp log abs relu sigmoid tanh floor ceil round trunc "
        "frac sin cos tan log1p expm1 log2 log10 erf erfc asin acos atan "
        "sinh cosh asinh acosh atanh atan2 fmod remainder clamp maximum "
        "minimum), gelu, silu, "
        "the composite activations (elu, softplus, hardtanh, ...), "
        "leaky_relu, where, "
        "masked_fill, casts "
        "and device moves, "
        "sum, mean, max, min, norm, cat, stack, views (reshape, view, flatten, transpose, "
        "permute, expand, squeeze, unsqueeze, contiguous, diagonal), "
        "diag_embed, indexing, "
        "scatter_reduce, cumsum, cumprod, sort, topk, "
        "in-place writes, matmul, linear, conv2d (with a fused ReLU and "
        "max-pool too), conv_transpose2d, max_pool2d, avg_pool2d, "
        "adaptive_avg_pool2d, adaptive_max_pool2d, embedding_bag, "
        "dropout, softmax, log_softmax, "
        "nll_loss, cross_entropy, binary_cross_entropy_with_logits, "
        "binary_cross_entropy, "
        "mse_loss, batch_norm, layer_norm, group_norm, conv1d, pad and "
        "interpolate")


def _saved_output(node, t):
    """The saved output ``t`` as a tensor whose grad_fn is ``node`` (the
    saved copy itself is detached: keeping the node there would make a
    reference cycle)."""
    out = t._detach()
    out.requires_grad = True
    out.grad_fn = node
    return out


def _user_backward(node, *grads):
    """A user's Function: its own backward (grad mode is on), with each
    saved output seen as an alias whose grad_fn is the output's node, as
    PyTorch unpacks a saved output, so that the second derivative flows
    through it (without the alias it would be a constant: silently
    wrong)."""
    slots = node._out_slots
    if not slots:
        return node._function.backward(node, *grads)
    saved = node._saved
    if node._slot_grads is None:
        nodes = dict.fromkeys(slots, node)
    else:               # several outputs: each output's own node
        from .multi_output import output_node
        nodes = {i: output_node(node, node._out_of_slot[i]) for i in slots}
    node._saved = tuple(_saved_output(nodes[i], t) if i in slots else t
                        for i, t in enumerate(saved))
    try:
        return node._function.backward(node, *grads)
    finally:
        node._saved = saved     # (no cycle: the node keeps no alias)


def _other(saved, scalar):
    return scalar if saved is None else saved


# -- element-wise


def _add(node, g):
    return g, g


def _sub(node, g):
    return g, (-g if node.needs_input_grad[1] else None)


def _mul(node, g):
    sa, sb = node.saved_tensors
    a, b = _other(sa, node.a), _other(sb, node.b)
    need_a, need_b = node.needs_input_grad
    return (g * b if need_a else None), (g * a if need_b else None)


def _div(node, g):
    b, out = node.saved_tensors
    b = _other(b, node.b)
    ga = g / b
    gb = None
    if node.needs_input_grad[1]:
        gb = -(ga * _saved_output(node, out))
    return (ga if node.needs_input_grad[0] else None), gb


def _pow(node, g):
    a, b, out = node.saved_tensors
    need_a, need_b = node.needs_input_grad
    ga = gb = None
    if need_a:
        bb = _other(b, node.b)
        if bb.__class__ in (int, float) and bb == 0:
            ga = g * 0.0
        else:
            ga = g * bb * a ** (bb - 1)
    if need_b:
        log_a = (a.log() if a is not None else
                 _C.full((), node.a, out.dtype, _dev_str(out)).log())
        gb = g * _saved_output(node, out) * log_a
    return ga, gb


def _maximum(node, g):
    a, b = node.saved_tensors
    win = _C.compare(node._function._cmp, a, b)
    tie = _C.compare("eq", a, b)
    w = _C.binary("add", win, _C.binary("mul", tie, 0.5))
    ga = g * w
    return ga, ((g - ga) if node.needs_input_grad[1] else None)


def _neg(node, g):
    return -g


def _abs(node, g):
    a, = node.saved_tensors
    return g * _C.unary("sign", a)


def _sqrt(node, g):
    out, = node.saved_tensors
    return g / (_saved_output(node, out) * 2)


def _rsqrt(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return g * -0.5 * y ** 3


def _reciprocal(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return -g * (y * y)


def _exp(node, g):
    out, = node.saved_tensors
    return g * _saved_output(node, out)


def _sigmoid(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return g * (y * (1.0 - y))


def _tanh(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return g * (1.0 - y * y)


def _log(node, g):
    a, = node.saved_tensors
    return g / a


def _log2(node, g):
    a, = node.saved_tensors       # log2 and log10 (_ln: ln 2, ln 10)
    return g / (a * node._function._ln)


def _log1p(node, g):
    a, = node.saved_tensors
    return g / (a + 1)


def _expm1(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return g * (y + 1)


def _sin(node, g):
    a, = node.saved_tensors
    return g * a.cos()


def _cos(node, g):
    a, = node.saved_tensors
    return g * -a.sin()


def _erf(node, g):
    a, = node.saved_tensors       # erf and erfc (_slope: +-2/sqrt(pi))
    return g * ((-a.square()).exp() * node._function._slope)


def _relu(node, g):
    out, = node.saved_tensors     # the mask has no derivative: no alias
    return g * _C.compare("gt", out, 0)


def _sign(node, g):
    return g * 0


def _rounding(node, g):
    return _fn.Floor.backward(node, g)     # zeros: no graph to build


def _clamp(node, g):
    a, = node.saved_tensors
    mask = None                   # (as the plain backward: lo <= a <= hi)
    if node.lo is not None:
        mask = _C.compare("ge", a, node.lo)
    if node.hi is not None:
        m = _C.compare("le", a, node.hi)
        mask = m if mask is None else _C.binary("mul", mask, m)
    return g if mask is None else g * mask


def _where(node, g):
    cond, = node.saved_tensors    # (where's gradient is where again)
    need = node.needs_input_grad
    return (None, _fn.Where.apply(cond, g, 0) if need[1] else None,
            _fn.Where.apply(cond, 0, g) if need[2] else None)


def _masked_fill(node, g):
    mask, = node.saved_tensors
    need = node.needs_input_grad
    return (_fn.Where.apply(mask, 0, g) if need[0] else None, None,
            _fn.Where.apply(mask, g, 0) if need[2] else None)


def _cast(node, g):
    return g, None              # the engine casts it back, differentiably


def _identity(node, g):
    return g


def _to_device(node, g):
    return g.to(node.src), None, None


# -- reductions, joins, views


def _sum(node, g):
    return g.reshape(node.keep).expand(tuple(node.in_shape))


def _mean(node, g):
    return (g / node.n).reshape(node.keep).expand(tuple(node.in_shape))


def _cat(node, g):
    grads, start = [], 0
    pre = (slice(None),) * node.dim
    for need, n in zip(node.needs_input_grad, node.sizes):
        grads.append(g[pre + (slice(start, start + n),)] if need else None)
        start += n
    return tuple(grads)


def _stack(node, g):
    dim = node.dim % g.ndim
    pre = (slice(None),) * dim
    return tuple(g[pre + (i,)] if need else None
                 for i, need in enumerate(node.needs_input_grad))


def _reshape(node, g):
    return (g.reshape(tuple(node.in_shape)),) + \
        (None,) * (len(node.next_functions) - 1)


def _transpose(node, g):
    return g.transpose(*node.dims), None, None


def _permute(node, g):
    n = len(node.dims)
    inv = [0] * n
    for i, d in enumerate(node.dims):
        inv[d % n] = i
    return g.permute(*inv), None


class IndexInto(Function):
    """A zero tensor of ``shape`` with ``g`` at ``index``: the gradient of
    a basic-index view, as an op of its own (its gradient is that view of
    the incoming one)."""

    @staticmethod
    def forward(ctx, g, shape, index):
        ctx.index = index
        out = _C.full(tuple(shape), 0, g.dtype, _dev_str(g))
        _C.copy_(out._getitem(index), g)
        return out

    @staticmethod
    def backward(ctx, gg):
        return gg._getitem(ctx.index), None, None


def _getitem(node, g):
    return IndexInto.apply(g, node.in_shape, node.index), None


def _index_into(node, g):
    return g[node.index], None, None


def _index_gather(node, g):
    return _idx.IndexScatterAdd.apply(g, node.plan, node.in_shape), None


def _index_scatter_add(node, g):
    return _idx.IndexGather.apply(g, node.plan), None, None


def _index_put(node, g):
    need_a, _, need_v = node.needs_input_grad
    ga = _idx.IndexPut.apply(g, node.plan, 0) if need_a else None
    gv = _idx.IndexGather.apply(g, node.plan) if need_v else None
    return ga, None, gv


def _index_add(node, g):
    gv = (_idx.IndexGather.apply(g, node.plan)
          if node.needs_input_grad[2] else None)
    return g, None, gv


def _expand(node, g):
    return g, None              # the engine sums it back, differentiably


# -- matmul, linear, mse_loss


def _matmul(node, g):
    a, b = node.saved_tensors
    need_a, need_b = node.needs_input_grad
    a1, b1 = a.ndim == 1, b.ndim == 1
    a2 = a.unsqueeze(0) if a1 else a
    b2 = b.unsqueeze(1) if b1 else b
    if a1 and b1:
        g2 = g.reshape(1, 1)
    elif a1:
        g2 = g.unsqueeze(g.ndim - 1)
    elif b1:
        g2 = g.unsqueeze(g.ndim)
    else:
        g2 = g
    ga = gb = None
    if need_a:
        ga = g2 @ b2.transpose(-2, -1)
        if a1:
            ga = ga.squeeze(ga.ndim - 2)
    if need_b:
        gb = a2.transpose(-2, -1) @ g2
        if b1:
            gb = gb.squeeze(gb.ndim - 1)
    return ga, gb


def _linear(node, g):
    x, weight, out = node.saved_tensors
    if node.relu:
        g = g * _C.compare("gt", out, 0)
    need_x, need_w, need_b = node.needs_input_grad[:3]
    gx = g @ weight if need_x else None
    g2 = g.reshape(-1, g.shape[-1])
    gw = g2.transpose(0, 1) @ x.reshape(-1, x.shape[-1]) if need_w else None
    gb = g2.sum(0) if need_b else None
    return gx, gw, gb, None


# -- conv2d: its two gradients are linear maps, each an op of its own whose
# own gradients are again convolutions and these maps


def _conv(x, w, geom, groups):
    from ..nn.functional import _Conv2d
    return _Conv2d.apply(x, w, None, *geom, False, groups)


class ConvInputGrad(Function):
    """conv2d's input gradient: dy (N, OC, OH, OW) through the weight w
    into an input of shape x_shape (conv_transpose2d's forward)."""

    @staticmethod
    def forward(ctx, dy, w, x_shape, geom, groups):
        ctx.geom, ctx.groups = geom, groups
        ctx.save_for_backward(dy, w)
        return _C.conv2d_input_grad(dy, w, tuple(x_shape), *geom, groups)

    @staticmethod
    def backward(ctx, gg):                  # gg: the input's shape
        dy, w = ctx.saved_tensors
        need_dy, need_w = ctx.needs_input_grad[:2]
        g_dy = _conv(gg, w, ctx.geom, ctx.groups) if need_dy else None
        g_w = ConvWeightGrad.apply(gg, dy, w, ctx.geom, ctx.groups) \
            if need_w else None
        return g_dy, g_w, None, None, None


class ConvWeightGrad(Function):
    """conv2d's weight gradient: of the input x and dy, into the shape of
    like_w (whose values are not read)."""

    @staticmethod
    def forward(ctx, x, dy, like_w, geom, groups):
        ctx.geom, ctx.groups = geom, groups
        ctx.save_for_backward(x, dy)
        return _C.conv2d_backward(dy, x, like_w, *geom, (False, True, False),
                                  groups)[1]

    @staticmethod
    def backward(ctx, gg):                  # gg: the weight's shape
        x, dy = ctx.saved_tensors
        need_x, need_dy = ctx.needs_input_grad[:2]
        g_x = ConvInputGrad.apply(dy, gg, x.shape, ctx.geom, ctx.groups) \
            if need_x else None
        g_dy = _conv(x, gg, ctx.geom, ctx.groups) if need_dy else None
        return g_x, g_dy, None, None, None


def _conv2d(node, g):
    x, weight, out = node.saved_tensors
    if node.relu:
        g = g * _C.compare("gt", out, 0)
    need_x, need_w, need_b = node.needs_input_grad[:3]
    geom = node.geometry
    gx = ConvInputGrad.apply(g, weight, x.shape, geom, node.groups) \
        if need_x else None
    gw = ConvWeightGrad.apply(x, g, weight, geom, node.groups) \
        if need_w else None
    gb = g.sum((0, 2, 3)) if need_b else None
    return gx, gw, gb, None, None, None, None, None


# -- max_pool2d: its input gradient scatters to the indices; that scatter
# and the gather at the indices are each other's gradients


class PoolScatter(Function):
    """max_pool2d's input gradient: g (.., OH, OW) added at the indices
    into in_shape (.., H, W); geometry is (kernel_size, stride, padding
    [, dilation]) or () (it only speeds the CUDA kernel up)."""

    @staticmethod
    def forward(ctx, g, indices, in_shape, geometry, relu_masked):
        ctx.relu_masked = relu_masked
        ctx.geometry = geometry
        ctx.save_for_backward(indices)
        return _C.max_pool2d_backward(g, indices, in_shape, *geometry,
                                      relu_masked=relu_masked)

    @staticmethod
    def backward(ctx, gg):
        indices, = ctx.saved_tensors
        return (PoolGather.apply(gg, indices, ctx.geometry, ctx.relu_masked),
                None, None, None, None)


class PoolGather(Function):
    """x (.., H, W) at the indices of a max_pool2d (0 at a relu_masked
    one)."""

    @staticmethod
    def forward(ctx, x, indices, geometry, relu_masked):
        ctx.relu_masked = relu_masked
        ctx.geometry = geometry
        ctx.in_shape = tuple(x.shape)
        ctx.save_for_backward(indices)
        return _C.max_pool2d_gather(x, indices, relu_masked=relu_masked)

    @staticmethod
    def backward(ctx, gg):
        indices, = ctx.saved_tensors
        return (PoolScatter.apply(gg, indices, ctx.in_shape, ctx.geometry,
                                  ctx.relu_masked), None, None, None)


def _max_pool2d(node, g):
    indices, = node.saved_tensors
    return (PoolScatter.apply(g, indices, node.in_shape, node.geometry,
                              False),) + (None,) * 5


def _conv2d_relu_max_pool(node, g):
    """The fold's gradient: the scatter (with the ReLU's mask in the
    indices), then the convolution's gradients."""
    x, weight, indices = node.saved_tensors
    g = PoolScatter.apply(g, indices, node.out_shape, node.pool, True)
    need_x, need_w, need_b = node.needs_input_grad[:3]
    gx = ConvInputGrad.apply(g, weight, x.shape, node.conv, node.groups) \
        if need_x else None
    gw = ConvWeightGrad.apply(x, g, weight, node.conv, node.groups) \
        if need_w else None
    gb = g.sum((0, 2, 3)) if need_b else None
    return gx, gw, gb, None, None, None, None, None


# -- softmax, log_softmax and the losses on them


def _softmax(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return y * (g - (g * y).sum(node.dim, keepdim=True)), None, None


def _log_softmax(node, g):
    y = _saved_output(node, node.saved_tensors[0])
    return g - y.exp() * g.sum(node.dim, keepdim=True), None, None


def _nll_grad(g, logp, target, weight, reduction, ignore_index,
              total_weight=None):
    """nll_loss's gradient for the incoming g: linear in g and constant in
    the log-probabilities (the loss is linear in them), so the constant
    part comes from the kernel and g multiplies it."""
    if total_weight is None:        # (the fused cross-entropy keeps none)
        total_weight = _C.nll_loss(logp, target, weight, reduction,
                                   ignore_index)[1]
    ones = _C.full(tuple(g.shape), 1.0, g.dtype, _dev_str(g))
    m = _C.nll_loss_backward(ones, logp, target, weight, reduction,
                             ignore_index, total_weight)
    if reduction == "none" and g.ndim > 0:
        g = g.unsqueeze(1)          # (N, ...) -> (N, 1, ...) over classes
    return m * g


def _nll_loss(node, g):
    logp, target, weight, total_weight = node.saved_tensors
    grad = _nll_grad(g, logp, target, weight, node.reduction,
                     node.ignore_index, total_weight)
    return grad, None, None, None, None


def _logits_log_softmax(node, logp, dim):
    """The fused cross-entropy's log-probabilities as a tensor whose
    grad_fn is a LogSoftmax node on the logits' edge (the fused node keeps
    them, not the logits)."""
    from ..nn.functional import _LogSoftmax
    ls = _LogSoftmax._node_cls()
    ls.next_functions = (node.next_functions[0], (None, 0), (None, 0))
    ls._metas = (node._metas[0], None, None)
    ls.needs_input_grad = (True, False, False)
    ls.dim = dim
    ls.save_for_backward(logp)
    ls._seq = node._seq
    return _saved_output(ls, logp)


def _smoothing_grad(g, logp, target, weight, reduction, ignore_index):
    """The gradient in the log-probabilities of label smoothing's term,
    -sum_c w_c logp[i, c] / C per row that is not ignored, reduced as
    PyTorch does (a mean divides by nll_loss's total weight)."""
    dim = 0 if logp.ndim == 1 else 1
    ncls = logp.shape[dim]
    dev = _dev_str(logp)
    kept = _C.cast(_C.compare("ne", target, ignore_index), logp.dtype)
    if reduction == "mean":
        total = _C.nll_loss(logp, target, weight, reduction, ignore_index)[1]
        # (every row ignored: a zero gradient, as the plain backward's)
        kept = _C.where(_C.compare("ne", total, 0),
                        _C.binary("div", kept, total), 0.0)
    w = weight if weight is not None else \
        _C.full((ncls,), 1.0, logp.dtype, dev)
    if logp.ndim > 1:
        kept = kept.unsqueeze(1)
    m = _C.binary("mul", _C.binary("mul", kept, w), -1.0 / ncls)
    if reduction == "none" and g.ndim > 0:
        g = g.unsqueeze(1)
    return m * g


def _cross_entropy(node, g):
    target, weight, logp = node.saved_tensors[:3]
    reduction, ignore_index, label_smoothing = node.args
    g_logp = _nll_grad(g, logp, target, weight, reduction, ignore_index)
    if label_smoothing:
        g_logp = g_logp * (1.0 - label_smoothing) + _smoothing_grad(
            g, logp, target, weight, reduction, ignore_index) * \
            label_smoothing
    dim = 0 if logp.ndim == 1 else 1
    y = _logits_log_softmax(node, logp, dim)
    return (g_logp - y.exp() * g_logp.sum(dim, keepdim=True),
            None, None, None, None, None)


def _max_all(node, g):
    a, out = node.saved_tensors     # (shared evenly by the ties, as PyTorch)
    mask = _C.compare("ne", a, a) if out.item() != out.item() else \
        _C.compare("eq", a, out)
    share = _C.binary("div", _C.cast(mask, g.dtype),
                      _C.reduce("sum", mask))
    return g * share


def _max_dim(node, g):
    indices, = node.saved_tensors   # (the index that won takes it)
    shape = node.in_shape
    if not shape:
        return g, None, None
    keep = _red._keepdim_shape(shape, node.dim)
    r = shape[node.dim]
    at = _C.arange(0, r, 1, _C.int64, _dev_str(g))._reshape(
        tuple(r if i == node.dim else 1 for i in range(len(shape))))
    won = _C.cast(_C.compare("eq", at, indices._reshape(keep)), g.dtype)
    return g.reshape(keep) * won, None, None


def _mse_loss(node, g):
    inp, target = node.saved_tensors
    diff = (inp - target) * 2
    if node.reduction == "mean":
        gi = diff * (g / inp.numel())
    else:
        gi = diff * g
    gt = -gi if node.needs_input_grad[1] else None
    return (gi if node.needs_input_grad[0] else None), gt, None


def _make_formulas():
    from ..nn import (_activations, _activations_more, _avg_pool,
                      _axis_index, _conv1d, _embedding, _embedding_bag,
                      _group_norm, _losses_more, _pad, _pool_more, _resample,
                      _similarity)
    from ..nn import _rnn
    from ..nn import _losses as L
    from ..nn import _norm as N
    from ..nn import functional as F
    from ..nn.modules._backward_hooks import (BackwardHookFunction,
                                             BackwardHooksFunction)
    from .._tensor_stats import Norm, SafeSqrt, norm_grad, safe_sqrt_grad
    from .. import _tensor_more
    from ..nn._bce import _BceWithLogits, bce_grads
    from ..nn._conv_transpose import _ConvTranspose2d
    from .._tensor_extra import _Extreme
    from ..tensor import Matmul
    return {
        _fn.Add: _add, _fn.Sub: _sub, _fn.Mul: _mul, _fn.Div: _div,
        _fn.Pow: _pow, _fn.Maximum: _maximum, _fn.Minimum: _maximum,
        _fn.Neg: _neg, _fn.Abs: _abs, _fn.Sqrt: _sqrt, _fn.Exp: _exp,
        _fn.Rsqrt: _rsqrt, _fn.Reciprocal: _reciprocal,
        _fn.Log: _log, _fn.Relu: _relu, _fn.Sign: _sign,
        _fn.Log2: _log2, _fn.Log10: _log2, _fn.Log1p: _log1p,
        _fn.Expm1: _expm1, _fn.Sin: _sin, _fn.Cos: _cos, _fn.Erf: _erf,
        _fn.Erfc: _erf,
        _fn.Floor: _rounding, _fn.Ceil: _rounding, _fn.Round: _rounding,
        _fn.Trunc: _rounding, _fn.Frac: _identity,
        _fn.Sigmoid: _sigmoid, _fn.Tanh: _tanh,
        _fn.Clamp: _clamp, _fn.Where: _where, _fn.MaskedFill: _masked_fill,
        _fn.Cast: _cast, _fn.Clone: _identity,
        _fn.ToDevice: _to_device,
        _red.Sum: _sum, _red.Mean: _mean, _red.Contiguous: _identity,
        _red.Cat: _cat, _red.Stack: _stack,
        _red.MaxAll: _max_all, _red.MinAll: _max_all,
        _red.MaxDim: _max_dim, _red.MinDim: _max_dim,
        _views.View: _reshape, _views.Reshape: _reshape,
        _views.Flatten: _reshape, _views.Squeeze: _reshape,
        _views.Unsqueeze: _reshape, _views.Transpose: _transpose,
        _views.Permute: _permute, _views.Expand: _expand,
        _views.GetItem: _getitem, IndexInto: _index_into,
        _idx.IndexGather: _index_gather,
        _idx.IndexScatterAdd: _index_scatter_add,
        _idx.IndexPut: _index_put, _idx.IndexAdd: _index_add,
        Matmul: _matmul, F._Linear: _linear, L._MseLoss: _mse_loss,
        F._Relu: _relu, F._Conv2d: _conv2d, F._Softmax: _softmax,
        F._LogSoftmax: _log_softmax, L._NllLoss: _nll_loss,
        L._CrossEntropy: _cross_entropy,
        ConvInputGrad: ConvInputGrad.backward,
        _ConvTranspose2d: ConvInputGrad.backward,
        _Extreme: _Extreme.backward,
        ConvWeightGrad: ConvWeightGrad.backward,
        F._MaxPool2d: _max_pool2d, F._Conv2dReluMaxPool: _conv2d_relu_max_pool,
        PoolScatter: PoolScatter.backward, PoolGather: PoolGather.backward,
        BackwardHookFunction: BackwardHookFunction.backward,
        BackwardHooksFunction: BackwardHooksFunction.backward,
        _BceWithLogits: lambda node, g: bce_grads(node, g,
                                                  *node.saved_tensors),
        Norm: lambda node, g: (norm_grad(node.saved_tensors[0], g, node.p,
                                         node.dims, node.keepdim),
                               None, None, None),
        SafeSqrt: lambda node, g: safe_sqrt_grad(node.saved_tensors[0], g),
        N._BatchNorm: N.batch_norm_graph_grads,
        N._LayerNorm: N.layer_norm_graph_grads,
        **_writes.formulas(),
        **_math.formulas(),
        **_avg_pool.formulas(),
        **_views.formulas(),
        **_activations.formulas(),
        **_activations_more.formulas(),
        **_embedding.formulas(),
        **_embedding_bag.formulas(),
        **_pool_more.formulas(),
        **_rnn.formulas(),
        **_scatter.formulas(),
        **_sort_scan.formulas(),
        **_losses_more.formulas(),
        **_axis_index.formulas(),
        **_resample.formulas(),
        **_pad.formulas(),
        **_conv1d.formulas(),
        **_group_norm.formulas(),
        **_similarity.formulas(),
        **_tensor_more.formulas(),
    }
