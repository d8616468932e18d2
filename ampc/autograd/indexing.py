"""Autograd for advanced indexing (ampc/_indexing.py's ``IndexPlan``):
reading at an index, writing there, and adding there.  Each is the other's
adjoint, so their gradients are written with each other (and so are their
second derivatives, in higher_order.py).
"""
from .. import _C
from .function import Function

_cast = _C.cast


class IndexGather(Function):
    """``a[index]``: the gradient goes back to the indexed elements, added
    where an index repeats."""

    node_name = "IndexBackward0"

    @staticmethod
    def forward(ctx, a, plan):
        ctx.plan = plan
        ctx.in_shape = a.shape
        return plan.gather(a)

    @staticmethod
    def backward(ctx, g):
        return ctx.plan.scatter_add(g, ctx.in_shape), None


class IndexScatterAdd(Function):
    """Zeros of ``shape`` with ``g`` added at the index (IndexGather's
    gradient, as an op, for second derivatives)."""

    @staticmethod
    def forward(ctx, g, plan, shape):
        ctx.plan = plan
        return plan.scatter_add(g, shape)

    @staticmethod
    def backward(ctx, gg):
        return ctx.plan.gather(gg), None, None


class IndexPut(Function):
    """``a`` with ``a[index] = value``, as a new tensor (``inplace`` writes it
    back): a's gradient is zero where it was overwritten, value's is the
    gradient read at the index."""

    node_name = "IndexPutBackward0"

    @staticmethod
    def forward(ctx, a, plan, value):
        ctx.plan = plan
        return plan.put(_cast(a, a.dtype), value)

    @staticmethod
    def backward(ctx, g):
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = ctx.plan.put(_cast(g, g.dtype), 0)
        if ctx.needs_input_grad[2]:
            gv = ctx.plan.gather(g)
        return ga, None, gv


class IndexAdd(Function):
    """``a`` with ``value`` added at the index (``index_put_(...,
    accumulate=True)``): a's gradient is g, value's g read at the index."""

    node_name = "IndexPutBackward0"

    @staticmethod
    def forward(ctx, a, plan, value):
        ctx.plan = plan
        return plan.put(_cast(a, a.dtype), value, accumulate=True)

    @staticmethod
    def backward(ctx, g):
        gv = ctx.plan.gather(g) if ctx.needs_input_grad[2] else None
        return g, None, gv


for _cls in (IndexPut, IndexAdd):
    _cls._saves_self = False
