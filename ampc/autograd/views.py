"""View Functions: outputs that share storage with their input (and
DiagEmbed, the diagonal view's adjoint)."""
from .. import _C
from .function import Function, _ViewFunction, _dev_str


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


# -- diagonals


def diagonal_geometry(a, offset, d1, d2):
    """(shape, strides, storage offset) of a's diagonal view over dims d1
    and d2 (wrapped, distinct), PyTorch's: those dims dropped and one of
    the diagonal's length appended, its stride the sum of theirs."""
    shape, stride = list(a.shape), list(a.stride())
    n1, n2 = shape[d1], shape[d2]
    if offset >= 0:
        size, start = max(min(n1, n2 - offset), 0), offset * stride[d2]
    else:
        size, start = max(min(n1 + offset, n2), 0), -offset * stride[d1]
    step = stride[d1] + stride[d2]
    for d in sorted((d1, d2), reverse=True):
        del shape[d], stride[d]
    return (tuple(shape + [size]), tuple(stride + [step]),
            a.storage_offset() + (start if size else 0))


def diagonal_view(a, offset, d1, d2):
    return a._as_strided(*diagonal_geometry(a, offset, d1, d2))


def embed_diagonal(v, shape, offset, d1, d2):
    """Zeros of ``shape`` with v written into their diagonal (offset, d1,
    d2): the adjoint of taking the diagonal."""
    out = _C.full(tuple(shape), 0, v.dtype, _dev_str(v))
    _C.copy_(diagonal_view(out, offset, d1, d2), v)
    return out


class Diagonal(_ViewFunction):
    node_name = "DiagonalBackward0"

    @staticmethod
    def forward(ctx, a, offset, d1, d2):
        ctx.in_shape = tuple(a.shape)
        ctx.diag = (offset, d1, d2)
        return diagonal_view(a, offset, d1, d2)

    @staticmethod
    def backward(ctx, g):
        return embed_diagonal(g, ctx.in_shape, *ctx.diag), None, None, None


class DiagEmbed(Function):
    """v written into the diagonal of zeros of ``shape`` (diag_embed, and
    the differentiable gradient of Diagonal); its gradient is the
    diagonal."""

    node_name = "DiagEmbedBackward0"

    @staticmethod
    def forward(ctx, v, shape, offset, d1, d2):
        ctx.diag = (offset, d1, d2)
        return embed_diagonal(v, shape, offset, d1, d2)

    @staticmethod
    def backward(ctx, g):
        return Diagonal.apply(g, *ctx.diag), None, None, None, None


def formulas():
    """The differentiable backward of the diagonals, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    return {
        Diagonal: lambda node, g: (DiagEmbed.apply(g, node.in_shape,
                                                   *node.diag),
                                   None, None, None),
        DiagEmbed: lambda node, g: (Diagonal.apply(g, *node.diag),
                                    None, None, None, None),
    }
