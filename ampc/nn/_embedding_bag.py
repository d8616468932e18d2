"""``embedding_bag``: sums, means or maxima of bags of embedding rows
without the (indices, D) gather in between, PyTorch's ``F.embedding_bag``:
1-D input with ``offsets`` (the start of each bag; with
``include_last_offset`` the last offset ends the last bag) or 2-D input
(each row a bag), ``per_sample_weights`` (sum mode), ``padding_idx`` (not
counted, no gradient), ``max_norm`` (rows renormalised in place first, as
``F.embedding``) and ``scale_grad_by_freq``.  Forward and weight gradient
are kernels (csrc/nn_embedding_bag.c, cpu/ref/embedding_bag.c,
cuda/embedding_bag.cu); the per_sample_weights gradient and the
create_graph formulas are composites of differentiable ops.  Under
``use_deterministic_algorithms(True)`` a CUDA weight gradient is that
composite too (the kernel adds with atomics; the composite's index_add is
sorted by destination).

>>> import ampc
>>> import ampc.nn.functional as F
>>> w = ampc.arange(6.0).view(3, 2)
>>> F.embedding_bag(ampc.tensor([0, 2, 1]), w, ampc.tensor([0, 2]),
...                 mode="sum")
tensor([[4., 6.],
        [2., 3.]])
"""
from .. import _C
from .._creation import arange, cat, ones, zeros
from ..autograd import Function, _mode
from ._args import _opt_tensor, _tensor
from ._embedding import _renorm

_MODES = {"sum": 0, "mean": 1, "max": 2}


def _indices_arg(name, pos, t):
    if t.dtype is not _C.int64:
        raise RuntimeError(
            f"Expected tensor for argument #{pos} '{name}' to have one of "
            f"the following scalar types: Long; but got {t.dtype.name} "
            "instead (while checking arguments for embedding_bag)")


def _bag_of(offsets, n):
    """The bag of each of the n indices (those past the last bag: -1)."""
    lengths = offsets[1:] - offsets[:-1]
    bags = lengths.repeat_interleave()
    if bags.shape[0] == n:
        return bags
    return cat([bags, zeros(n - bags.shape[0], dtype=bags.dtype,
                            device=bags.device) - 1])


def _sample_scale(node, psw, indices):
    """The float32 factor of each index in the weight gradient: its
    per-sample weight, over its frequency with scale_grad_by_freq; None
    for all ones."""
    scale = None if psw is None else psw.float()
    if node.freq:
        n = indices.shape[0]
        counts = zeros(node.num, device=indices.device).index_add_(
            0, indices, ones(n, device=indices.device))
        inv = 1.0 / counts.index_select(0, indices)
        scale = inv if scale is None else scale * inv
    return scale


def _psw_grad(node, g, weight, indices, offsets):
    """d out / d per_sample_weights: each index's row dotted with its
    bag's gradient (0 past the last bag and at padding_idx)."""
    bag = _bag_of(offsets, indices.shape[0])
    inside = bag >= 0
    rows = weight.index_select(0, indices)
    grads = g.index_select(0, bag.clamp(min=0))
    dot = (rows * grads).sum(1)
    keep = inside if node.padding_idx < 0 else inside & (
        indices != node.padding_idx)
    return dot.masked_fill(~keep, 0.0)


class _EmbeddingBag(Function):
    node_name = "EmbeddingBagBackward0"

    @staticmethod
    def forward(ctx, weight, psw, indices, offsets, mode, padding_idx,
                freq):
        out, bag_size, max_idx = _C.embedding_bag(weight, indices, offsets,
                                                  mode, padding_idx, psw)
        ctx.mode, ctx.padding_idx, ctx.freq = mode, padding_idx, freq
        ctx.num = weight.shape[0]
        ctx.save_for_backward(weight, psw, indices, offsets, bag_size,
                              max_idx)
        return out

    @staticmethod
    def backward(ctx, g):
        if g.is_cuda and _C._deterministic_algorithms()[0]:
            return _graph_grads(ctx, g)
        weight, psw, indices, offsets, bag_size, max_idx = ctx.saved_tensors
        gw = gp = None
        if ctx.needs_input_grad[0]:
            gw = _C.embedding_bag_backward(
                g, indices, offsets, bag_size, max_idx, ctx.num, ctx.mode,
                ctx.padding_idx, _sample_scale(ctx, psw, indices))
        if psw is not None and ctx.needs_input_grad[1]:
            gp = _psw_grad(ctx, g, weight, indices, offsets)
        return gw, gp, None, None, None, None, None


def _graph_grads(node, g):
    """The backward with differentiable ops (create_graph=True): the bag
    gradients gathered per index, scaled, and added into the rows."""
    weight, psw, indices, offsets, bag_size, max_idx = node.saved_tensors
    gw = gp = None
    if node.needs_input_grad[0] and node.mode == _MODES["max"]:
        d = g.shape[1]
        hit = max_idx >= 0
        flat = (max_idx.clamp(min=0) * d + arange(d, device=g.device))
        gw = zeros(node.num * d, dtype=g.dtype, device=g.device).index_add(
            0, flat.reshape(-1), g.masked_fill(~hit, 0.0).reshape(-1))
        gw = gw.reshape(node.num, d)
    elif node.needs_input_grad[0]:
        bag = _bag_of(offsets, indices.shape[0])
        keep = bag >= 0
        if node.padding_idx >= 0:
            keep = keep & (indices != node.padding_idx)
        factor = keep.to(g.dtype)
        if node.mode == _MODES["mean"]:
            sizes = bag_size.clamp(min=1).to(g.dtype)
            factor = factor / sizes.index_select(0, bag.clamp(min=0))
        scale = _sample_scale(node, psw, indices)
        if scale is not None:
            factor = factor * scale.to(g.dtype)
        rows = g.index_select(0, bag.clamp(min=0)) * factor.unsqueeze(1)
        gw = zeros(node.num, g.shape[1], dtype=g.dtype,
                   device=g.device).index_add(0, indices, rows)
    if psw is not None and node.needs_input_grad[1]:
        gp = _psw_grad(node, g, weight, indices, offsets)
    return gw, gp, None, None, None, None, None


def formulas():
    """The differentiable backward here, for ``backward(create_graph=
    True)`` (autograd/higher_order.py)."""
    return {_EmbeddingBag: _graph_grads}


def _padding(padding_idx, num):
    if padding_idx is None:
        return -1
    if not -num <= padding_idx < num:
        raise AssertionError("embedding_bag(): padding_idx must be within "
                             f"num_embeddings ({num})")
    return padding_idx % num


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """The sum, mean or max of each bag of weight's rows at the int64
    indices ``input`` (see the module docstring): a (bags, embedding_dim)
    tensor, 0 for an empty bag."""
    fn = "embedding_bag"
    _tensor(fn, "input", 1, input)
    _tensor(fn, "weight", 2, weight)
    _opt_tensor(fn, "offsets", 3, offsets)
    _opt_tensor(fn, "per_sample_weights", 9, per_sample_weights)
    psw = per_sample_weights
    if psw is not None and tuple(input.shape) != tuple(psw.shape):
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({list(psw.shape)}) is "
            "not None, then it must have the same shape as the input "
            f"({list(input.shape)})")
    if weight.ndim != 2:
        raise ValueError("weight has to be a 2D Tensor, but got Tensor of "
                         f"dimension {weight.ndim}")
    _indices_arg("indices", 1, input)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is "
                "treated is a mini-batch of fixed length sequences. However, "
                f"found offsets of type {type(offsets).__name__}")
        offsets = arange(0, input.numel(), max(input.shape[1], 1),
                         device=input.device)
        if input.shape[1] == 0:
            offsets = zeros(input.shape[0], dtype=_C.int64,
                            device=input.device)
        input = input.reshape(-1)
        psw = None if psw is None else psw.reshape(-1)
        include_last_offset = False
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        _indices_arg("offsets", 3, offsets)
    else:
        raise ValueError("input has to be 1D or 2D Tensor, but got Tensor of "
                         f"dimension {input.ndim}")
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient "
                         "by the frequency")
    if sparse:
        raise RuntimeError(
            "embedding_bag(): sparse=True needs sparse gradients, which "
            "ampc does not have; use sparse=False (a dense weight gradient)")
    if psw is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. "
            "per_sample_weights is only supported for mode='sum' (got "
            f"mode='{mode}')")
    if offsets.shape[0] == 0:
        raise RuntimeError("embedding_bag(): offsets has to have at least "
                           "one entry")
    pad = _padding(padding_idx, weight.shape[0])
    if max_norm is not None:
        _renorm(weight, input, float(max_norm), float(norm_type))
    if not include_last_offset:
        end = zeros(1, dtype=_C.int64, device=offsets.device) + \
            input.shape[0]
        offsets = cat([offsets, end])
    m = _MODES[mode]
    if _mode.enabled and (weight.requires_grad or (
            psw is not None and psw.requires_grad)):
        return _EmbeddingBag.apply(weight, psw, input, offsets, m, pad,
                                   bool(scale_grad_by_freq))
    return _C.embedding_bag(weight, input, offsets, m, pad, psw)[0]
