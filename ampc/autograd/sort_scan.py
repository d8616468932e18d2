"""Autograd for cumsum, cumprod, sort, topk (ampc/_tensor_sort.py), cummax
and cummin (ampc/_tensor_select.py): PyTorch's gradients, written with
ampc's differentiable tensor ops, so the same formulas give the plain
backward and, under ``create_graph=True``, a gradient with a graph of its
own (higher_order.py).

* cumsum: the gradient summed from the end (a reversed cumsum).
* cumprod: as PyTorch's ``cumprod_backward``.  Along a line without zeros,
  the reversed cumsum of ``g * out`` divided by the input.  Where the line
  has a zero, positions before its first zero keep that formula (``out``
  is 0 from the zero on, so only the earlier terms count), the first zero
  gets the reversed cumsum of ``g * cumprod(x with that zero taken as
  1)``, and positions after it get 0 (their products all hold the zero).
* sort, topk, cummax, cummin: each value's gradient goes back to the
  index it came from (summed where cummax repeats one); the indices are
  not differentiable.
"""
from .. import _C
from .function import Function, _dev_str


def _reversed_cumsum(t, dim):
    return t.flip(dim).cumsum(dim).flip(dim)


class Cumsum(Function):
    """cumsum(x, dim), autocast's fp32_set_opt_dtype on CUDA."""

    node_name = "CumsumBackward0"
    autocast_op = "cumsum"

    @staticmethod
    def forward(ctx, x, dim, dtype):
        ctx.dim = dim
        ctx.in_dtype = x.dtype
        return _C.cumsum(x, dim)

    @staticmethod
    def backward(ctx, g):
        return cumsum_grad(ctx, g), None, None


class CumsumNoAutocast(Cumsum):
    """cumsum with dtype= given: autocast leaves it alone."""

    node_name = "CumsumBackward0"
    autocast_op = None


class Cumprod(Function):
    node_name = "CumprodBackward0"
    autocast_op = "cumprod"

    @staticmethod
    def forward(ctx, x, dim, dtype):
        out = _C.cumprod(x, dim)
        ctx.dim = dim
        ctx.in_dtype = x.dtype
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return cumprod_grad(ctx, g, x, out), None, None


class CumprodNoAutocast(Cumprod):
    node_name = "CumprodBackward0"
    autocast_op = None


def cumsum_grad(node, g):
    if g.ndim == 0:
        return g.to(node.in_dtype)
    return _reversed_cumsum(g, node.dim).to(node.in_dtype)


def cumprod_grad(node, g, x, out):
    from .._tensor_where import where
    dim = node.dim
    if g.ndim == 0:
        return g.to(node.in_dtype)
    zero = x == 0
    if not zero.any().item():
        return (_reversed_cumsum(g * out, dim) / x).to(node.in_dtype)
    seen = zero.cumsum(dim)             # zeros up to and at each position
    before = seen == 0
    first = zero & (seen == 1)
    x1 = where(zero, 1, x)
    g_before = _reversed_cumsum(g * out, dim) / x1
    g_first = _reversed_cumsum(g * where(first, 1, x).cumprod(dim), dim)
    return where(before, g_before,
                 where(first, g_first, 0)).to(node.in_dtype)


class _Selection(Function):
    """An op returning (values, indices) with values = x at indices along
    a dim: forward runs ``_C.<op>(x, *args)``, backward sends the values'
    gradient back to the indices."""

    @classmethod
    def forward(cls, ctx, x, *args):
        values, indices = getattr(_C, cls._op)(x, *args)
        ctx.dim = args[cls._dim_arg]
        ctx.in_shape = tuple(x.shape)
        ctx.n_args = len(args)
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g):
        indices, = ctx.saved_tensors
        return (scatter_grad(ctx, g, indices),) + (None,) * ctx.n_args


class Sort(_Selection):
    """sort(x, dim, descending) -> (values, indices)."""

    node_name = "SortBackward0"
    _op, _dim_arg = "sort", 0


class Topk(_Selection):
    """topk(x, k, dim, largest) -> (values, indices)."""

    node_name = "TopkBackward0"
    _op, _dim_arg = "topk", 1


class Cummax(_Selection):
    """cummax(x, dim) -> (values, indices)."""

    node_name = "CummaxBackward0"
    _op, _dim_arg = "cummax", 0


class Cummin(_Selection):
    """cummin(x, dim) -> (values, indices)."""

    node_name = "CumminBackward0"
    _op, _dim_arg = "cummin", 0


def scatter_grad(node, g, indices):
    """g (values' gradient) added at the indices it came from, zeros
    elsewhere (sort and topk name each index once per line; cummax and
    cummin may name one many times, and the adds sum them)."""
    if g.ndim == 0:
        return g
    zeros = _C.full(node.in_shape, 0, g.dtype, _dev_str(g))
    return zeros.scatter_add(node.dim, indices, g)


def formulas():
    """Function class -> formula(node, g), for higher_order.py's table."""
    from .higher_order import _saved_output

    def cumprod(node, g):
        x, out = node.saved_tensors
        return cumprod_grad(node, g, x, _saved_output(node, out)), None, None

    def by_indices(node, g):
        indices, = node.saved_tensors
        grads = (scatter_grad(node, g, indices),)
        return grads + (None,) * (len(node.needs_input_grad) - 1)

    def cumsum(node, g):
        return cumsum_grad(node, g), None, None

    return {Cumsum: cumsum, CumsumNoAutocast: cumsum,
            Cumprod: cumprod, CumprodNoAutocast: cumprod,
            Sort: by_indices, Topk: by_indices, Cummax: by_indices,
            Cummin: by_indices}
