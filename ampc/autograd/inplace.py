"""In-place ops under autograd: setitem, copy_, version checks, and the
rebasing that routes a write through a view into its base's history."""
from .. import _C
from .function import (
    _LEAF_INPLACE_MSG, _VIEW_LEAF_INPLACE_MSG, AccumulateGrad, AsStrided,
    Function, _dev_str, _fresh_grad_fn, _zeros_like_geometry,
)
from .functions import (
    Abs, Add, Cast, Clamp, Clone, Div, Exp, Log, MaskedFill, Maximum,
    Minimum, Mul, Neg, Pow, Relu, Sign, Sqrt, Sub, Where,
)

_TB = _C.TensorBase
_cast = _C.cast


class SetItem(Function):
    """self[index] = value, done in place: self's gradient is zero where
    it was overwritten, value's is the gradient of the written region."""

    node_name = "CopySlices"

    @staticmethod
    def forward(ctx, a, value, index):
        ctx.index = index
        view = a._getitem(index)
        if isinstance(value, _TB):
            _C.copy_(view, value)
        else:
            _C.fill_(view, value)
        return a

    @staticmethod
    def backward(ctx, g):
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = _cast(g, g.dtype)
            _C.fill_(ga._getitem(ctx.index), 0)
        if ctx.needs_input_grad[1]:
            gv = g._getitem(ctx.index)
        return ga, gv, None


class CopyFrom(Function):
    """dst.copy_(src): the new values come from src only."""

    node_name = "CopyBackwards"

    @staticmethod
    def forward(ctx, dst, src):
        out = _C.empty(tuple(dst.shape), dst.dtype, _dev_str(dst))
        return _C.copy_(out, src)

    @staticmethod
    def backward(ctx, g):
        return None, g


class Overwrite(Function):
    """fill_/zero_/uniform_/...: the old values get no gradient."""

    node_name = "FillBackward0"

    @staticmethod
    def forward(ctx, old, new):
        return new

    @staticmethod
    def backward(ctx, g):
        return None, None


def _check_inplace(t):
    """Checks an in-place op (grad mode on) on ``t``: raises PyTorch's
    errors for a leaf that requires grad or a view of one.  Returns the
    base tensor when t is a view of a non-leaf that is still alive (its
    history must change too), else None."""
    if not t.requires_grad:
        # a view of a tensor without history, written with values that
        # require grad: the base's history changes too.  Needs the C
        # engine's TensorBase._base (the viewed tensor; None for
        # non-views and for detach()); until it exists, only t changes.
        base = getattr(t, "_base", None)
        while base is not None:
            up = getattr(base, "_base", None)
            if up is None:
                break
            base = up
        if base is not None and base.requires_grad and \
                base.grad_fn is None:
            raise RuntimeError(_VIEW_LEAF_INPLACE_MSG)
        return base
    gf = _fresh_grad_fn(t)
    if gf is None:
        raise RuntimeError(_LEAF_INPLACE_MSG)
    if getattr(gf, "_shares_input", False):
        fn = gf.name()
        fn = fn[:-len("Backward")] if fn.endswith("Backward") else fn
        raise RuntimeError(
            f"Output {gf._slot} of {fn} is a view and is being modified "
            "inplace. This view is the output of a function that returns "
            "multiple views. Such functions do not allow the output views "
            "to be modified inplace. You should replace the inplace "
            "operation by an out-of-place one.")
    if not gf._is_view:
        return None
    root = gf._root_ref() if gf._root_ref is not None else None
    if root is None:
        # the base is gone; only a leaf at the end of the chain matters
        node = gf
        while node is not None and node._is_view:
            node = node.next_functions[0][0]
        if node.__class__ is AccumulateGrad:
            raise RuntimeError(_VIEW_LEAF_INPLACE_MSG)
        return None
    if root.grad_fn is None:
        raise RuntimeError(_VIEW_LEAF_INPLACE_MSG)
    return root


def _rebase(t, out):
    """After writing ``out``'s values into ``t``, make ``t`` carry out's
    history (the in-place op becomes t's grad_fn)."""
    if out.grad_fn is None:
        return
    t.requires_grad = True
    t.grad_fn = out.grad_fn


def _rebase_view(view, base, out):
    """``view`` (a view of ``base``) now holds ``out``'s values: base's
    history becomes CopySlices(base's old history, out), and view's a
    strided view of the new base (PyTorch's CopySlices, in small)."""
    geom = (tuple(view.shape), view.stride(),
            view.storage_offset() - base.storage_offset())
    holder = CopySlices.apply(base, out, geom)
    base.requires_grad = True
    base.grad_fn = holder.grad_fn
    alias = AsStrided.apply(base, geom)
    view.requires_grad = True
    view.grad_fn = alias.grad_fn


def inplace(t, fn, *args, **kwargs):
    """Run the out-of-place Function ``fn`` on (t, *args) and write the
    result into ``t`` as an in-place op that autograd sees.  Used when grad
    mode is on and t or an argument requires grad."""
    base = _check_inplace(t)
    src = t
    if fn._saves_self:
        # the Function keeps its input for backward: give it a copy that
        # the write below does not change
        src = Clone.apply(t)
    out = fn.apply(src, *args, **kwargs)
    if out.shape != t.shape:
        raise RuntimeError(
            f"output with shape {list(t.shape)} doesn't match the broadcast "
            f"shape {list(out.shape)}")
    if out.dtype != t.dtype and (out.dtype.is_floating_point
                                 and not t.dtype.is_floating_point):
        raise RuntimeError(
            f"result type {out.dtype.name} can't be cast to the desired "
            f"output type {t.dtype.name}")
    _C.copy_(t, out)
    if base is None:
        _rebase(t, out)
    else:
        _rebase_view(t, base, out)
    return t


class CopySlices(Function):
    """The node an in-place op on a view leaves on the view's base: the
    written region's gradient goes to the new values, the rest to the
    base's old history."""

    node_name = "CopySlices"

    @staticmethod
    def forward(ctx, base, new, geom):
        ctx.geom = geom
        ctx.base_geom = (tuple(base.shape), base.stride())
        return base

    @staticmethod
    def backward(ctx, g):
        shape, stride = ctx.base_geom
        vshape, vstride, off = ctx.geom
        buf, gb = _zeros_like_geometry(g, shape, stride)
        _C.copy_(gb, g)
        region = buf._as_strided(vshape, vstride, off)
        gnew = _cast(region, region.dtype) if ctx.needs_input_grad[1] \
            else None
        _C.fill_(region, 0)
        return gb, gnew, None


class SetItemOutOfPlace(Function):
    """``a`` with a[index] = value, as a new tensor (for writes to views,
    through inplace())."""

    node_name = "CopySlices"

    @staticmethod
    def forward(ctx, a, value, index):
        ctx.index = index
        out = _cast(a, a.dtype)
        view = out._getitem(index)
        if isinstance(value, _TB):
            _C.copy_(view, value)
        else:
            _C.fill_(view, value)
        return out

    backward = SetItem.backward


for _cls in (Add, Sub, Neg, Exp, Sqrt, Relu, Sign, Cast, Clone, CopyFrom,
             Overwrite, SetItemOutOfPlace, Where, MaskedFill):
    _cls._saves_self = False
for _cls in (Mul, Div, Pow, Maximum, Minimum, Abs, Log, Clamp):
    _cls._saves_self = True
Function._saves_self = True
