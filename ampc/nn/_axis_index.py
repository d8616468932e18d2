"""Gathers along some axes by an index per axis, the non-constant pads
(``_pad.py``) and nearest upsampling (``_interpolate.py``) as one separable
composite: ``index_select`` axis by axis forward, ``index_add_`` axis by
axis (in reverse) backward, a repeated index adding its gradients.  The
backward is written in differentiable ops, so create_graph goes through.
"""
import numpy as np

from .._creation import tensor, zeros
from .._dtype_device import int64
from ..autograd import Function, autocast_listed
from ._args import _needs_grad


def index_tensor(values, device):
    """An int64 index tensor on ``device`` from a NumPy array."""
    return tensor(np.ascontiguousarray(values, dtype=np.int64), dtype=int64,
                  device=device)


def gather(x, plan):
    """x with each ``(dim, index)`` of plan applied by index_select (a
    copy when plan is empty)."""
    if not plan:
        return x.clone()
    for dim, index in plan:
        x = x.index_select(dim, index)
    return x


def scatter(g, shape, plan):
    """gather's adjoint: g summed back into a tensor of ``shape``."""
    shapes = [tuple(shape)]
    for dim, index in plan[:-1]:
        s = list(shapes[-1])
        s[dim] = index.shape[0]
        shapes.append(tuple(s))
    for (dim, index), s in zip(reversed(plan), reversed(shapes)):
        g = zeros(s, dtype=g.dtype, device=g.device).index_add_(dim, index,
                                                                  g)
    return g


class AxisGather(Function):
    """``gather(x, plan)`` with autograd; subclasses name the node and the
    autocast policy of the op they are."""

    @staticmethod
    def forward(ctx, x, plan):
        ctx.shape = tuple(x.shape)
        ctx.plan = plan
        return gather(x, plan)

    @staticmethod
    def backward(ctx, g):
        return scatter(g, ctx.shape, ctx.plan), None


_SUBCLASSES = []


def subclass(node_name, autocast_op):
    cls = type(node_name.replace("Backward0", ""), (AxisGather,),
               {"node_name": node_name, "autocast_op": autocast_op,
                "__module__": __name__})
    _SUBCLASSES.append(cls)
    return cls


def formulas():
    """The differentiable backward of every gather here, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    return {cls: cls.backward for cls in [AxisGather] + _SUBCLASSES}


def run(cls, x, plan):
    """``cls.apply`` when autograd or autocast needs the node, else the
    gather alone."""
    if _needs_grad(x) or autocast_listed(cls):
        return cls.apply(x, plan)
    return gather(x, plan)
