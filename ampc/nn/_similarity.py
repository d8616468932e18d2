"""``normalize``, ``cosine_similarity`` and ``pairwise_distance`` (their
modules, ``CosineSimilarity`` and ``PairwiseDistance``, are in
``modules/distance.py``): PyTorch's formulas, composed from ampc's
differentiable ops.

``cosine_similarity`` is torch's current formula: each input divided by
its own norm first (so the result stays within [-1, 1]), the norms
clamped to ``eps`` in value only, the gradient flowing as if unclamped
(torch clamps them in place under ``no_grad``).  Under CUDA autocast it
runs in float32, as PyTorch lists it.

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.cosine_similarity(ampc.tensor([[1.0, 0.0]]), ampc.tensor([[1.0, 1.0]]))
tensor([0.7071])
"""
from .. import _C
from .._dtype_device import _wrap_dim, float32
from .._tensor_more import _autocast
from ..autograd import Function
from ._args import _number, _tensor
from ._losses import _broadcast_shape

__all__ = ["normalize", "cosine_similarity", "pairwise_distance"]


class _ClampMinValue(Function):
    """max(x, eps) in value, the identity for the gradient."""

    @staticmethod
    def forward(ctx, x, eps):
        return x.clamp(min=eps)

    @staticmethod
    def backward(ctx, g):
        return g, None


def formulas():
    """The create_graph formula: backward above is the identity."""
    return {_ClampMinValue: _ClampMinValue.backward}


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps): unit vectors along ``dim``.
    """
    _tensor("normalize", "input", 1, input)
    if out is not None:
        raise TypeError("normalize(): 'out' is not supported by ampc")
    if not input.dtype.is_floating_point:
        raise RuntimeError("normalize(): expected a floating point input, "
                           f"got {input.dtype.name}")
    p = _number("normalize", "p", p)
    eps = _number("normalize", "eps", eps)
    dim = _wrap_dim("normalize", dim, input.ndim)
    denom = input.norm(p, dim, keepdim=True).clamp(min=eps)
    return input / denom


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between x1 and x2 (broadcast) along
    ``dim``: sum((x1 / |x1|) * (x2 / |x2|)), each norm at least eps."""
    _tensor("cosine_similarity", "x1", 1, x1)
    _tensor("cosine_similarity", "x2", 2, x2)
    eps = _number("cosine_similarity", "eps", eps)
    x1, x2 = _autocast("cosine_similarity", x1, x2)
    dt = _C.result_type(x1, x2)
    if not dt.is_floating_point:
        raise RuntimeError(
            "cosine_similarity(): expected common dtype to be floating "
            f"point, yet common dtype is {dt.name}")
    shape = _broadcast_shape("cosine_similarity", x1.shape, x2.shape)
    a = x1.to(dt).expand(*shape)
    b = x2.to(dt).expand(*shape)
    dim = _wrap_dim("cosine_similarity", dim, len(shape))
    na = _ClampMinValue.apply(a.norm(2, dim, keepdim=True), eps)
    nb = _ClampMinValue.apply(b.norm(2, dim, keepdim=True), eps)
    return ((a / na) * (b / nb)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (of the broadcast inputs)."""
    _tensor("pairwise_distance", "x1", 1, x1)
    _tensor("pairwise_distance", "x2", 2, x2)
    p = _number("pairwise_distance", "p", p)
    eps = _number("pairwise_distance", "eps", eps)
    diff = x1 - x2
    if not diff.dtype.is_floating_point:
        diff = diff.to(float32)
    last = max(x1.ndim, x2.ndim) - 1
    return (diff + eps).norm(p, max(last, 0), keepdim=keepdim)
