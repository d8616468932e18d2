"""Contiguous, reductions (sum, mean, max, min) and joining (cat, stack)."""
from .. import _C
from .function import Function, _dev_str

_binary = _C.binary
_compare = _C.compare
_reduce = _C.reduce


class Contiguous(Function):
    @staticmethod
    def forward(ctx, a):
        return a._contiguous()

    @staticmethod
    def backward(ctx, g):
        return g


# -- reductions
def _keepdim_shape(in_shape, dim):
    """The shape of a keepdim reduction over ``dim`` (None: all dims)."""
    nd = len(in_shape)
    if dim is None:
        return (1,) * nd
    dims = dim if isinstance(dim, tuple) else (dim,)
    dims = {d % nd if nd else 0 for d in dims}
    return tuple(1 if i in dims else s for i, s in enumerate(in_shape))


class Sum(Function):
    autocast_op = "sum"

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.in_shape = a.shape
        ctx.keep = _keepdim_shape(a.shape, dim)
        return _reduce("sum", a, dim, keepdim)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.keep)._expand(tuple(ctx.in_shape))


class Mean(Function):
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.in_shape = a.shape
        ctx.keep = _keepdim_shape(a.shape, dim)
        out = _reduce("mean", a, dim, keepdim)
        n = 1
        for s in a.shape:
            n *= s
        for s in ctx.keep:
            n //= s if s else 1
        ctx.n = n
        return out

    @staticmethod
    def backward(ctx, g):
        g = _binary("div", g, ctx.n)
        return g._reshape(ctx.keep)._expand(tuple(ctx.in_shape))


class MaxAll(Function):
    """max()/min() over all elements: the gradient is shared evenly by the
    elements equal to the result (as PyTorch)."""

    node_name = "MaxBackward1"
    _op = "max"

    @staticmethod
    def forward(ctx, a):
        out = _reduce(ctx._function._op, a)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_tensors
        if out.item() != out.item():    # NaN: the NaNs take the gradient
            mask = _compare("ne", a, a)
        else:
            mask = _compare("eq", a, out)
        count = _reduce("sum", mask)
        return _binary("mul", mask, _binary("div", g, count))


class MinAll(MaxAll):
    node_name = "MinBackward1"
    _op = "min"
    forward = MaxAll.forward
    backward = MaxAll.backward


class MaxDim(Function):
    """max(dim)/min(dim): the gradient goes to the index that won."""

    node_name = "MaxBackward0"
    _op = "max_dim"

    @staticmethod
    def forward(ctx, a, dim, keepdim):
        values, indices = _reduce(ctx._function._op, a, dim, keepdim)
        ctx.in_shape = tuple(a.shape)
        nd = len(ctx.in_shape)
        ctx.dim = dim % nd if nd else 0
        ctx.keepdim = keepdim
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g):
        indices, = ctx.saved_tensors
        shape = ctx.in_shape
        if not shape:
            return g, None, None
        keep = _keepdim_shape(shape, ctx.dim)
        idx = indices._reshape(keep)
        r = shape[ctx.dim]
        ar_shape = tuple(r if i == ctx.dim else 1 for i in range(len(shape)))
        ar = _C.arange(0, r, 1, _C.int64, _dev_str(g))._reshape(ar_shape)
        mask = _compare("eq", ar, idx)
        return _binary("mul", g._reshape(keep), mask), None, None


class MinDim(MaxDim):
    node_name = "MinBackward0"
    _op = "min_dim"
    forward = MaxDim.forward
    backward = MaxDim.backward


# -- joins
class Cat(Function):
    autocast_op = "cat"

    @staticmethod
    def forward(ctx, *tensors, dim=0):
        out = _C.cat(tensors, dim)
        nd = out.ndim
        ctx.dim = dim % nd if nd else 0
        ctx.sizes = [t.shape[ctx.dim] if t.ndim else 0 for t in tensors]
        return out

    @staticmethod
    def backward(ctx, g):
        grads = []
        start = 0
        pre = (slice(None),) * ctx.dim
        for need, n in zip(ctx.needs_input_grad, ctx.sizes):
            if need:
                grads.append(g._getitem(pre + (slice(start, start + n),)))
            else:
                grads.append(None)
            start += n
        return tuple(grads)


class Stack(Function):
    autocast_op = "stack"

    @staticmethod
    def forward(ctx, *tensors, dim=0):
        ctx.dim = dim
        return _C.cat([t._unsqueeze(dim) for t in tensors], dim)

    @staticmethod
    def backward(ctx, g):
        pre = (slice(None),) * ctx.dim
        return tuple(g._getitem(pre + (i,)) if need else None
                     for i, need in enumerate(ctx.needs_input_grad))


# -- in-place writes (the node that an in-place op leaves on its tensor)
