"""Autograd for scatter_reduce (ampc/_scatter.py): PyTorch's gradients
(``scatter_reduce_backward``), written with ampc's differentiable tensor
ops, so that the same formulas give the plain backward (grad mode off) and,
under ``create_graph=True``, a gradient with a graph of its own
(higher_order.py runs them with the saved output as an alias of the node).

* sum: self's gradient is g, src's is g read at the index.
* mean: both divided by the count of their element (self counted with
  include_self; an element nothing reaches counts 1).
* prod: the product of the others, formed without dividing by zero: self's
  from the product of the values with self's zero taken as 1, src's from
  the product with its single zero taken as 1 (two zeros or more: 0, and a
  second derivative raises, as in PyTorch).
* amax/amin: g shared evenly among the elements equal to the result.
* include_self=False: self's gradient is zero where an element was
  scattered to.
"""
from .. import _C
from .function import Function, _dev_str as _dev

_DOUBLE_ZEROS = (
    "scatter_reduce(): Double backward is unsupported for src when >1 zeros "
    "in src are scattered to the same position in self")


class ScatterReduce(Function):
    """``a`` with ``src`` reduced in at the index (a new tensor;
    ``inplace`` writes it back for ``scatter_reduce_``)."""

    node_name = "ScatterReduceBackward0"

    @staticmethod
    def forward(ctx, a, dim, index, src, op, include_self, name):
        from .._scatter import reduce_into
        out = reduce_into(_C.cast(a, a.dtype), dim, index, src, op,
                          include_self, name)
        ctx.dim, ctx.op, ctx.include_self = dim, op, include_self
        if op in ("sum", "mean"):
            ctx.save_for_backward(index)
        else:
            ctx.save_for_backward(index, a, src, out)
        return out

    @staticmethod
    def backward(ctx, g):
        saved = ctx.saved_tensors
        return grads(ctx, g, *saved)


def grads(node, g, index, a=None, src=None, result=None):
    """(self's gradient, None, None, src's gradient, None, None, None) for
    the incoming gradient g; a, src and result only for prod, amax and
    amin."""
    dim, op = node.dim, node.op
    need_a, need_src = node.needs_input_grad[0], node.needs_input_grad[3]
    ga = gs = None
    if op == "sum":
        ga = g if need_a else None
        gs = g.gather(dim, index) if need_src else None
    elif op == "mean":
        n = _C.full(tuple(g.shape), 1 if node.include_self else 0, g.dtype,
                    _dev(g))
        n.scatter_add_(dim, index, _C.full(tuple(index.shape), 1, g.dtype,
                                           _dev(g)))
        n.masked_fill_(n == 0, 1)
        ga = g / n if need_a else None
        gs = g.gather(dim, index) / n.gather(dim, index) if need_src \
            else None
    elif op == "prod":
        ga, gs = _prod_grads(node, g, index, a, src, result, need_a,
                             need_src)
    else:
        value = result.gather(dim, index)
        a_won = (a == result).to(g.dtype)
        src_won = (src == value).to(g.dtype)
        each = g / a_won.scatter_add(dim, index, src_won)
        ga = each * a_won if need_a else None
        gs = each.gather(dim, index) * src_won if need_src else None
    if ga is not None and not node.include_self:
        ga = ga.scatter(dim, index, 0)
    return ga, None, None, gs, None, None, None


def _prod_grads(node, g, index, a, src, result, need_a, need_src):
    from .._tensor_where import where
    from .grad_mode import _mode
    dim, inc = node.dim, node.include_self
    ga = gs = None
    if need_a:
        a1 = a.masked_fill(a == 0, 1)
        ga = g * a1.scatter_reduce(dim, index, src, "prod",
                                   include_self=inc) / a1
    if need_src:
        zero = src == 0
        zeros = _C.full(tuple(a.shape), 0, g.dtype, _dev(g)).scatter_add(
            dim, index, zero.to(g.dtype)).gather(dim, index)
        single = zero & (zeros == 1)
        others = a.scatter_reduce(dim, index, src.masked_fill(single, 1),
                                  "prod", include_self=inc)
        gs = where(single, (g * others).gather(dim, index),
                   (g * result).gather(dim, index)
                   / src.masked_fill(zero, 1))
        if _mode.enabled and (zeros > 1).any().item():
            gs = DelayedError.apply(gs, _DOUBLE_ZEROS)
    return ga, gs


class DelayedError(Function):
    """Passes x through; its gradient raises ``msg`` (a gradient that
    ampc forms but cannot differentiate again)."""

    @staticmethod
    def forward(ctx, x, msg):
        ctx.msg = msg
        return _C.cast(x, x.dtype)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(ctx.msg)


def formulas():
    """Function class -> formula(node, g), for higher_order.py's table: the
    same gradients, the saved output seen as an alias of the node."""
    from .higher_order import _saved_output

    def scatter_reduce(node, g):
        saved = node.saved_tensors
        if len(saved) == 4:
            saved = saved[:3] + (_saved_output(node, saved[3]),)
        return grads(node, g, *saved)

    return {ScatterReduce: scatter_reduce,
            DelayedError: DelayedError.backward}

