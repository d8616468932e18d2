"""``scaled_dot_product_attention``: softmax(q k^T * scale + mask) v, as
PyTorch's math backend, composed of ampc's batched matmul, softmax and
dropout so that autograd gives its gradients.

float16 and bfloat16 inputs are computed in float32 and the result cast
back (PyTorch's math path does the same).  A row whose keys are all masked
out gives zeros and zero gradients (PyTorch's ``_safe_softmax``).  Under
autocast it runs in the autocast dtype (PyTorch lists it as lower
precision on CPU and CUDA); the matmuls inside are not cast again.

>>> import ampc
>>> import ampc.nn.functional as F
>>> q = k = v = ampc.ones(1, 2, 3, 4)
>>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
ampc.Size([1, 2, 3, 4])
"""
import math

from .. import _C
from .._creation import arange
from .._dtype_device import bfloat16, bool_, float16, float32
from .._tensor_where import where
from ..autograd import _mode
from ._args import _number, _tensor

_OP = "scaled_dot_product_attention"
_C10 = {"float32": "float", "float64": "double", "float16": "c10::Half",
        "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
        "uint8": "unsigned char", "int8": "signed char", "int16": "short int"}


def _c10(dtype):
    return _C10.get(dtype.name, dtype.name)


def _check(query, key, value, attn_mask, is_causal):
    """PyTorch's checks (validate_sdpa_input), with its messages."""
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got "
            f"query.dtype: {_c10(query.dtype)} key.dtype: "
            f"{_c10(key.dtype)} and value.dtype: {_c10(value.dtype)} "
            "instead.")
    if not (query.device == key.device == value.device):
        raise RuntimeError(
            "Expected query, key, and value to have the same device type, "
            f"but got query.device: {query.device} key.device: "
            f"{key.device} and value.device: {value.device} instead.")
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 "
            f"dimensional, but got query.dim: {query.ndim} key.dim: "
            f"{key.ndim} and value.dim: {value.ndim} instead.")
    if attn_mask is not None and attn_mask.dtype not in (bool_, float32,
                                                         query.dtype):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query "
            f"dtype, but got attn_mask.dtype: {_c10(attn_mask.dtype)} and  "
            f"query.dtype: {_c10(query.dtype)} instead.")
    if is_causal and attn_mask is not None:
        raise RuntimeError(
            "_scaled_dot_product_attention: Explicit attn_mask should not "
            "be set when is_causal=True")
    if not query.is_floating_point():
        raise RuntimeError(
            f"{_OP}(): expected floating-point query, key and value, got "
            f"{query.dtype}")
    if key.shape[-1] != query.shape[-1]:
        raise RuntimeError(
            f"{_OP}(): key's last dim ({key.shape[-1]}) must equal query's "
            f"({query.shape[-1]}); got query {list(query.shape)} and key "
            f"{list(key.shape)}")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(
            f"{_OP}(): key and value must have the same sequence length "
            f"(dim -2); got key {list(key.shape)} and value "
            f"{list(value.shape)}")


def _repeat_heads(t, heads):
    """t (..., Hk, S, E) with each head repeated heads // Hk times in a row
    (``repeat_interleave(heads // Hk, dim=-3)``)."""
    hk = t.shape[-3]
    lead = tuple(t.shape[:-3])
    rep = t.unsqueeze(-3).expand(*lead, hk, heads // hk, *t.shape[-2:])
    return rep.reshape(*lead, heads, *t.shape[-2:])


def _gqa(query, key, value):
    if min(query.ndim, key.ndim, value.ndim) < 3:
        raise RuntimeError(
            f"{_OP}(): enable_gqa=True needs query, key and value with a "
            f"heads dim (-3), got {query.ndim}-D, {key.ndim}-D and "
            f"{value.ndim}-D")
    heads = query.shape[-3]
    if heads % key.shape[-3] or heads % value.shape[-3]:
        # PyTorch's message, cut short as it is there
        raise RuntimeError(
            "Number of heads in key and value must divide the number of "
            "heads in ")
    if key.shape[-3] != heads:
        key = _repeat_heads(key, heads)
    if value.shape[-3] != heads:
        value = _repeat_heads(value, heads)
    return key, value


def _additive_mask(attn_mask, is_causal, L, S, dtype, device):
    """(the mask as float to add to the scores, the rows (..., L, 1) whose
    keys are all masked out, or None when there are none)."""
    if is_causal:   # top-left aligned: query i sees keys 0..i
        allowed = arange(L, device=device).unsqueeze(-1) >= \
            arange(S, device=device)
        return where(allowed, 0.0, -math.inf).to(dtype), None
    if attn_mask.dtype is bool_:
        dead = attn_mask.logical_not().all(-1, keepdim=True)
        mask = where(attn_mask, 0.0, -math.inf).to(dtype)
    else:
        mask = attn_mask.to(dtype)
        dead = (mask == -math.inf).all(-1, keepdim=True)
    if S == 0 or not bool(dead.any()):
        return mask, None
    # softmax over -inf only is NaN: attend uniformly there, zero it after
    return where(dead, 0.0, mask), dead


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value for query (..., L, E),
    key (..., S, E) and value (..., S, Ev), batch dims broadcasting.

    ``attn_mask`` broadcasts to (..., L, S): bool (True takes part) or
    float (added to the scores).  ``is_causal`` lets query i see keys
    0..i (no ``attn_mask`` then).  ``scale`` defaults to 1/sqrt(E);
    ``dropout_p`` drops attention weights (ampc's generator);
    ``enable_gqa`` repeats key/value heads (dim -3) to query's count.
    """
    _tensor(_OP, "query", 1, query)
    _tensor(_OP, "key", 2, key)
    _tensor(_OP, "value", 3, value)
    if attn_mask is not None and not isinstance(attn_mask, _C.TensorBase):
        raise TypeError(
            f"{_OP}(): argument 'attn_mask' must be Tensor, not "
            f"{type(attn_mask).__name__}")
    dropout_p = _number(_OP, "dropout_p", dropout_p)
    if dropout_p > 1.0:
        raise RuntimeError(
            "dropout probability has to be between 0 and 1, but got "
            f"{dropout_p}")
    if scale is not None:
        scale = _number(_OP, "scale", scale)
    _check(query, key, value, attn_mask, is_causal)
    if _C.autocast_active():
        query, key, value, attn_mask = _C.autocast_cast_args(
            _OP, (query, key, value, attn_mask), _mode.enabled)
        with _C.autocast(query.device.type, enabled=False):
            return _sdpa(query, key, value, attn_mask, dropout_p, is_causal,
                         scale, enable_gqa)
    return _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale,
                 enable_gqa)


def _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale,
          enable_gqa):
    from . import functional as F       # functional imports this file
    dtype = query.dtype
    if dtype in (float16, bfloat16):
        query, key, value = query.float(), key.float(), value.float()
    if enable_gqa:
        key, value = _gqa(query, key, value)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    L, S = query.shape[-2], key.shape[-2]
    scores = (query * scale) @ key.transpose(-2, -1)
    dead = None
    if attn_mask is not None or is_causal:
        mask, dead = _additive_mask(attn_mask, is_causal, L, S,
                                    scores.dtype, query.device)
        _check_broadcast(scores.shape, mask.shape)
        scores = scores + mask
    weights = F.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    out = weights @ value
    if dead is not None:
        out = where(dead, 0.0, out)
    return out.to(dtype)


def _check_broadcast(shape, mask_shape):
    """PyTorch adds the mask in place: it may not enlarge the scores."""
    ok = len(mask_shape) <= len(shape) and all(
        m in (1, s) for m, s in zip(reversed(mask_shape), reversed(shape)))
    if not ok:
        raise RuntimeError(
            f"{_OP}(): attn_mask of shape {list(mask_shape)} does not "
            f"broadcast to the attention scores' shape {list(shape)} "
            "(..., L, S)")
