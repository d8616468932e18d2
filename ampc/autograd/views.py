"""View Functions: outputs that share storage with their input."""
from .. import _C
from .function import _ViewFunction, _dev_str


class View(_ViewFunction):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.in_shape = a.shape
        return a._view(shape)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Reshape(_ViewFunction):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.in_shape = a.shape
        return a._reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Flatten(_ViewFunction):
    @staticmethod
    def forward(ctx, a, start, end):
        ctx.in_shape = a.shape
        return a._flatten(start, end)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None, None


class Unsqueeze(_ViewFunction):
    @staticmethod
    def forward(ctx, a, dim):
        ctx.in_shape = a.shape
        return a._unsqueeze(dim)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Squeeze(_ViewFunction):
    @staticmethod
    def forward(ctx, a, dim):
        ctx.in_shape = a.shape
        return a._squeeze(dim)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Transpose(_ViewFunction):
    @staticmethod
    def forward(ctx, a, d0, d1):
        ctx.dims = (d0, d1)
        return a._transpose(d0, d1)

    @staticmethod
    def backward(ctx, g):
        return g._transpose(*ctx.dims), None, None


class Permute(_ViewFunction):
    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims = dims
        return a._permute(dims)

    @staticmethod
    def backward(ctx, g):
        n = len(ctx.dims)
        inv = [0] * n
        for i, d in enumerate(ctx.dims):
            inv[d % n] = i
        return g._permute(tuple(inv)), None


class Expand(_ViewFunction):
    @staticmethod
    def forward(ctx, a, shape):
        return a._expand(shape)

    @staticmethod
    def backward(ctx, g):
        return g, None      # the engine sums it back to the input's shape


class GetItem(_ViewFunction):
    @staticmethod
    def forward(ctx, a, index):
        ctx.in_shape = a.shape
        ctx.index = index
        return a._getitem(index)

    @staticmethod
    def backward(ctx, g):
        out = _C.full(tuple(ctx.in_shape), 0, g.dtype, _dev_str(g))
        _C.copy_(out._getitem(ctx.index), g)
        return out, None
