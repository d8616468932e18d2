"""``embedding``: rows of a weight table at integer indices, PyTorch's
``F.embedding`` with ``padding_idx`` (that row gets no gradient),
``max_norm`` / ``norm_type`` (the rows looked up are renormalised in place
first, as ``torch.embedding_renorm_``) and ``scale_grad_by_freq`` (each
row's gradient divided by how often the batch names it).  The lookup is
ampc's index gather and the weight gradient its scatter-add
(``_C.index_gather`` / ``_C.index_put_``), written with differentiable ops
so that create_graph goes through.

>>> import ampc
>>> import ampc.nn.functional as F
>>> w = ampc.arange(6.0).view(3, 2)
>>> F.embedding(ampc.tensor([[2, 0]]), w)
tensor([[[4., 5.],
         [0., 1.]]])
"""
from .. import _C
from .._creation import ones, zeros
from ..autograd import Function, _mode, no_grad
from ._args import _tensor


def _check(input, weight, padding_idx):
    _tensor("embedding", "input", 1, input)
    _tensor("embedding", "weight", 2, weight)
    if input.dtype is not _C.int64:
        raise RuntimeError(
            "embedding(): Expected tensor for argument #1 'indices' to have "
            f"scalar type Long; but got {input.dtype.name} instead")
    if weight.ndim != 2:
        raise RuntimeError(
            f"embedding(): weight must be 2-D (num_embeddings, "
            f"embedding_dim), got {weight.ndim}-D")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError(
                f"embedding(): padding_idx {padding_idx} must be within "
                f"num_embeddings ({n})")
        padding_idx %= n
    return padding_idx


def _weight_grad(g, index, num, padding_idx, scale_grad_by_freq):
    """The weight's gradient (num, D) from g (.., D) at the flat indices,
    with differentiable ops."""
    rows = g.reshape(-1, g.shape[-1])
    keep = None
    if padding_idx is not None:
        keep = index != padding_idx
    if scale_grad_by_freq:
        counts = zeros(num, dtype=rows.dtype, device=rows.device)
        counts.index_add_(0, index, ones(index.shape[0], dtype=rows.dtype,
                                         device=rows.device))
        rows = rows / counts.index_select(0, index).unsqueeze(1)
    if keep is not None:
        rows = rows.masked_fill(~keep.unsqueeze(1), 0.0)
    out = zeros(num, rows.shape[1], dtype=rows.dtype, device=rows.device)
    return out.index_add(0, index, rows)


class _Embedding(Function):
    node_name = "EmbeddingBackward0"

    @staticmethod
    def forward(ctx, weight, input, padding_idx, scale_grad_by_freq):
        index = input.reshape(-1)
        ctx.num = weight.shape[0]
        ctx.padding_idx = padding_idx
        ctx.scale = scale_grad_by_freq
        ctx.save_for_backward(index)
        out = weight.index_select(0, index)
        return out.reshape(*input.shape, weight.shape[1])

    @staticmethod
    def backward(ctx, g):
        index, = ctx.saved_tensors
        return (_weight_grad(g, index, ctx.num, ctx.padding_idx, ctx.scale),
                None, None, None)


def formulas():
    """The differentiable backward here, for ``backward(create_graph=
    True)`` (autograd/higher_order.py)."""
    return {_Embedding: _Embedding.backward}


@no_grad()
def _renorm(weight, index, max_norm, norm_type):
    """torch.embedding_renorm_: each row named in index whose norm exceeds
    max_norm is scaled to max_norm (in place, not recorded)."""
    sub = weight.index_select(0, index)
    norms = sub.norm(p=norm_type, dim=1, keepdim=True)
    # (a NaN norm leaves its row alone, as PyTorch)
    scale = (max_norm / (norms + 1e-7)).masked_fill(~(norms > max_norm),
                                                    1.0)
    # a repeated index writes the same scaled row each time
    weight[index] = sub * scale


def embedding(input, weight, padding_idx=None, max_norm=None,
              norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """weight's rows at the int64 indices ``input``: a tensor of
    input.shape + (embedding_dim,)."""
    padding_idx = _check(input, weight, padding_idx)
    if sparse:
        raise RuntimeError(
            "embedding(): sparse=True needs sparse gradients, which ampc "
            "does not have; use sparse=False (a dense weight gradient)")
    if max_norm is not None:
        _renorm(weight, input.reshape(-1), float(max_norm),
                float(norm_type))
    if _mode.enabled and weight.requires_grad:
        return _Embedding.apply(weight, input, padding_idx,
                                bool(scale_grad_by_freq))
    out = weight.index_select(0, input.reshape(-1))
    return out.reshape(*input.shape, weight.shape[1])
