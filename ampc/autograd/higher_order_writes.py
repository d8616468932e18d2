"""Differentiable backward formulas (see higher_order.py) for writes and
masks: in-place writes through views (``CopySlices``, ``AsStrided``),
basic-index assignment, ``copy_``, ``fill_``, and dropout's mask.

A write through a view records the view's geometry in its base (shape,
strides, offset); its gradients read that region of the incoming gradient,
zero it, or place a gradient into it.  Those three are ops here, each the
adjoint of another (reading and placing) or of itself (zeroing), so every
order of derivative goes through.
"""
from .. import _C
from .function import Function, _fold_broadcast, _zeros_like_geometry
from .inplace import (
    CopyFrom, CopySlices, Overwrite, SetItem, SetItemOutOfPlace,
)

_cast = _C.cast


def _in_base_geometry(g, base_geom):
    """A copy of g (with the base's shape) laid out as the base was, and
    the buffer that holds it."""
    shape, stride = base_geom
    buf, gb = _zeros_like_geometry(g, shape, stride)
    _C.copy_(gb, g)
    return buf, gb


class RegionOf(Function):
    """g (the base's shape) read at a view's geometry, as a new tensor."""

    @staticmethod
    def forward(ctx, g, base_geom, geom):
        ctx.base_geom, ctx.geom = base_geom, geom
        buf, _ = _in_base_geometry(g, base_geom)
        vshape, vstride, off = geom
        region = buf._as_strided(vshape, vstride, off)
        return _cast(region, region.dtype)

    @staticmethod
    def backward(ctx, gg):
        return RegionInto.apply(gg, ctx.base_geom, ctx.geom), None, None


class RegionInto(Function):
    """Zeros of the base's shape with g at a view's geometry (the gradient
    of a strided view)."""

    @staticmethod
    def forward(ctx, g, base_geom, geom):
        ctx.base_geom, ctx.geom = base_geom, geom
        shape, stride = base_geom
        vshape, vstride, off = geom
        buf, gb = _zeros_like_geometry(g, shape, stride)
        g, vshape = _fold_broadcast(g, vshape, vstride)
        _C.copy_(buf._as_strided(vshape, vstride, off), g)
        return gb

    @staticmethod
    def backward(ctx, gg):
        return RegionOf.apply(gg, ctx.base_geom, ctx.geom), None, None


class ZeroRegion(Function):
    """g (the base's shape) with a view's region zeroed: the gradient of
    the base's old values under a write through the view."""

    @staticmethod
    def forward(ctx, g, base_geom, geom):
        ctx.base_geom, ctx.geom = base_geom, geom
        buf, gb = _in_base_geometry(g, base_geom)
        vshape, vstride, off = geom
        _C.fill_(buf._as_strided(vshape, vstride, off), 0)
        return gb

    @staticmethod
    def backward(ctx, gg):
        return ZeroRegion.apply(gg, ctx.base_geom, ctx.geom), None, None


class MaskedScale(Function):
    """g * mask / (1 - p): dropout's gradient, linear in g (its own
    adjoint)."""

    @staticmethod
    def forward(ctx, g, mask, p):
        ctx.p = p
        ctx.save_for_backward(mask)
        return _C.dropout_backward(g, mask, p)

    @staticmethod
    def backward(ctx, gg):
        mask, = ctx.saved_tensors
        return MaskedScale.apply(gg, mask, ctx.p), None, None


def _copy_slices(node, g):
    need_base, need_new = node.needs_input_grad[:2]
    return (ZeroRegion.apply(g, node.base_geom, node.geom) if need_base
            else None,
            RegionOf.apply(g, node.base_geom, node.geom) if need_new
            else None, None)


def _as_strided(node, g):
    return RegionInto.apply(g, node.base_geom, node.geom), None


def _set_item(node, g):
    need_a, need_v = node.needs_input_grad[:2]
    return (SetItemOutOfPlace.apply(g, 0, node.index) if need_a
            else None, g[node.index] if need_v else None, None)


def _dropout(node, g):
    mask, = node.saved_tensors
    return MaskedScale.apply(g, mask, node.p), None


def formulas():
    """Function class -> formula(node, g), for higher_order.py's table."""
    from ..nn import functional as F
    from .function import AsStrided
    table = {
        CopySlices: _copy_slices, AsStrided: _as_strided,
        SetItem: _set_item, SetItemOutOfPlace: _set_item,
        CopyFrom: lambda node, g: (None, g),
        Overwrite: lambda node, g: (None, None),
        F._Dropout: _dropout,
    }
    for op in (RegionOf, RegionInto, ZeroRegion, MaskedScale):
        table[op] = op.backward
    return table
