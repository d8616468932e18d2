"""``multi_head_attention_forward``: the computation of
``nn.MultiheadAttention``, as PyTorch's function of the same name
(sequence-first (L, N, E) or unbatched (L, E) inputs, its checks and
messages).

Masks follow ``MultiheadAttention``'s convention, the opposite of
``scaled_dot_product_attention``'s: a bool ``True`` marks a position that
may *not* be attended; float masks are added to the scores.  With
``need_weights`` the weights are computed with a plain softmax (a query
whose keys are all masked gives NaN, as PyTorch's); without, through
``scaled_dot_product_attention`` (zeros there).

>>> import ampc
>>> import ampc.nn as nn
>>> mha = nn.MultiheadAttention(8, 2)
>>> x = ampc.randn(5, 3, 8)
>>> out, w = mha(x, x, x)
>>> out.shape, w.shape
(ampc.Size([5, 3, 8]), ampc.Size([3, 5, 5]))
"""
import math
import warnings

from .. import _C
from .._creation import cat, zeros, zeros_like
from ._attention import scaled_dot_product_attention

_OP = "multi_head_attention_forward"


def _canonical_mask(mask, mask_name, other_type, other_name, target_type,
                    check_other=True):
    """A bool mask as a float one (-inf where True); float masks as
    given."""
    if mask is None:
        return None
    is_float = mask.is_floating_point()
    if mask.dtype.name != "bool" and not is_float:
        raise AssertionError(
            f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is "
            "deprecated. Use same type for both instead.", stacklevel=2)
    if not is_float:
        mask = zeros_like(mask, dtype=target_type).masked_fill_(
            mask, -math.inf)
    return mask


def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, _C.TensorBase):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or "
                       "torch.Tensor")


def _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """PyTorch's ``_mha_shape_check``: whether the inputs are batched."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be "
                f"3-D but found {key.ndim}-D and {value.ndim}-D tensors "
                "respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to "
                f"be `None` or 2-D but found {key_padding_mask.ndim}-D "
                "tensor instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be "
                f"`None`, 2-D or 3-D but found {attn_mask.ndim}-D tensor "
                "instead")
        return True
    if query.ndim != 2:
        raise AssertionError(
            "query should be unbatched 2D or batched 3D tensor but received "
            f"{query.ndim}-D query tensor")
    if key.ndim != 2 or value.ndim != 2:
        raise AssertionError(
            "For unbatched (2-D) `query`, expected `key` and `value` to be "
            f"2-D but found {key.ndim}-D and {value.ndim}-D tensors "
            "respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != 1:
        raise AssertionError(
            "For unbatched (2-D) `query`, expected `key_padding_mask` to be "
            f"`None` or 1-D but found {key_padding_mask.ndim}-D tensor "
            "instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `attn_mask` to be "
                f"`None`, 2-D or 3-D but found {attn_mask.ndim}-D tensor "
                "instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(
                f"Expected `attn_mask` shape to be {expected} but got "
                f"{attn_mask.shape}")
    return False


def _linear(x, w, b):
    from .functional import linear      # functional imports this file
    return linear(x, w, b)


def _in_projection_packed(q, k, v, w, b):
    """q, k and v projected by the rows [0, E), [E, 2E), [2E, 3E) of w (one
    GEMM for self-attention, two when key is value)."""
    E = q.shape[-1]
    if k is v and q is k:
        proj = _linear(q, w, b)
        return proj[..., :E], proj[..., E:2 * E], proj[..., 2 * E:]
    bs = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
    if k is v:
        kv = _linear(k, w[E:], None if b is None else b[E:])
        return _linear(q, w[:E], bs[0]), kv[..., :E], kv[..., E:]
    return (_linear(q, w[:E], bs[0]), _linear(k, w[E:2 * E], bs[1]),
            _linear(v, w[2 * E:], bs[2]))


def _pad_column(mask):
    """mask with a zero column appended on its last dim (the added key)."""
    if mask is None:
        return None
    return cat([mask, zeros(*mask.shape[:-1], 1, dtype=mask.dtype,
                            device=mask.device)], -1)


def _attn_mask_3d(attn_mask, tgt_len, src_len, bsz, num_heads):
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(
                f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                f"should be {(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.ndim == 3:
        if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
            raise RuntimeError(
                f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                f"should be {(bsz * num_heads, tgt_len, src_len)}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not "
                       "supported")


def _masks(query, key_padding_mask, attn_mask, is_causal, need_weights):
    """(key_padding_mask, attn_mask, is_causal) as PyTorch settles them:
    float masks, and the causal hint kept only when SDPA can use it."""
    key_padding_mask = _canonical_mask(
        key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask),
        "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use "
            "the Transformer module method `generate_square_subsequent_mask`"
            " to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        return None, None, True
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "",
                                query.dtype, check_other=False)
    return key_padding_mask, attn_mask, (
        is_causal and key_padding_mask is None)


def multi_head_attention_forward(
        query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
        in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
        out_proj_weight, out_proj_bias, training=True,
        key_padding_mask=None, need_weights=True, attn_mask=None,
        use_separate_proj_weight=False, q_proj_weight=None,
        k_proj_weight=None, v_proj_weight=None, static_k=None,
        static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention of query (L, N, E) over key (S, N, Ek) and
    value (S, N, Ev), or unbatched (L, E), (S, Ek), (S, Ev): returns
    (output (L, N, E), weights (N, L, S) averaged over heads, (N, H, L, S)
    with ``average_attn_weights=False``, or None without
    ``need_weights``)."""
    is_batched = _shape_check(query, key, value, key_padding_mask,
                              attn_mask, num_heads)
    if not is_batched:
        query, key, value = (query.unsqueeze(1), key.unsqueeze(1),
                             value.unsqueeze(1))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask, attn_mask, is_causal = _masks(
        query, key_padding_mask, attn_mask, is_causal, need_weights)
    if embed_dim != embed_dim_to_check:
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, "
            f"but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(
            f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not "
                f"match value's {value.shape[:2]}")
        bs = (None,) * 3 if in_proj_bias is None else (
            in_proj_bias[:embed_dim], in_proj_bias[embed_dim:2 * embed_dim],
            in_proj_bias[2 * embed_dim:])
        q = _linear(query, q_proj_weight, bs[0])
        k = _linear(key, k_proj_weight, bs[1])
        v = _linear(value, v_proj_weight, bs[2])
    else:
        if key.shape != value.shape:
            raise AssertionError(
                f"key shape {key.shape} does not match value shape "
                f"{value.shape}")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight,
                                        in_proj_bias)
    if attn_mask is not None:
        attn_mask = _attn_mask_3d(attn_mask, tgt_len, src_len, bsz,
                                  num_heads)
    if (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k is set but bias_v is None"
                             if bias_k is not None else
                             "bias_v is set but bias_k is None")
    if bias_k is not None:
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask = _pad_column(attn_mask)
        key_padding_mask = _pad_column(key_padding_mask)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads(k, static_k, "static_k", bsz, num_heads, head_dim)
    v = _heads(v, static_v, "static_v", bsz, num_heads, head_dim)
    if add_zero_attn:
        k = cat([k, zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype,
                          device=k.device)], 1)
        v = cat([v, zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype,
                          device=v.device)], 1)
        attn_mask = _pad_column(attn_mask)
        key_padding_mask = _pad_column(key_padding_mask)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        _check_key_padding_mask(key_padding_mask, src_len, bsz)
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(
            bsz, num_heads, 1, src_len).reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        out, weights = _attention_weights(q, k, v, attn_mask, dropout_p)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
    else:
        if attn_mask is not None:
            if attn_mask.shape[0] == 1:
                attn_mask = attn_mask.unsqueeze(0)
            else:
                attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
        out = scaled_dot_product_attention(
            q.reshape(bsz, num_heads, tgt_len, head_dim),
            k.reshape(bsz, num_heads, src_len, head_dim),
            v.reshape(bsz, num_heads, src_len, head_dim),
            attn_mask, dropout_p, is_causal)
        out = out.permute(2, 0, 1, 3)
        weights = None
    out = _linear(out.reshape(tgt_len * bsz, embed_dim), out_proj_weight,
                  out_proj_bias).reshape(tgt_len, bsz, -1)
    if not is_batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights


def _heads(t, static, name, bsz, num_heads, head_dim):
    """t (S, N, E) as (N * H, S, head_dim), or the given static one."""
    if static is None:
        return t.reshape(t.shape[0], bsz * num_heads, head_dim).transpose(
            0, 1)
    if static.shape[0] != bsz * num_heads:
        raise AssertionError(
            f"expecting {name}.size(0) of {bsz * num_heads}, but got "
            f"{static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(
            f"expecting {name}.size(2) of {head_dim}, but got "
            f"{static.shape[2]}")
    return static


def _check_key_padding_mask(mask, src_len, bsz):
    if mask.shape[0] != bsz:
        raise AssertionError(
            f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
            f"{mask.shape[0]}")
    if mask.shape[1] != src_len:
        raise AssertionError(
            f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
            f"{mask.shape[1]}")


def _attention_weights(q, k, v, attn_mask, dropout_p):
    """(softmax(q k^T / sqrt(d) + mask) v, the weights), for the caller
    that wants the weights (``need_weights``), with a plain softmax."""
    from . import functional as F       # functional imports this file
    scores = (q * math.sqrt(1.0 / q.shape[-1])) @ k.transpose(-2, -1)
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = F.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return (weights @ v).transpose(0, 1), weights
