"""``TransformerEncoderLayer`` and ``TransformerEncoder``, as PyTorch's:
the same submodules (so a PyTorch ``state_dict`` loads as it is), masks
and defaults.

>>> import ampc
>>> layer = ampc.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32,
...                                         batch_first=True)
>>> enc = ampc.nn.TransformerEncoder(layer, num_layers=2,
...                                  enable_nested_tensor=False)
>>> enc(ampc.randn(2, 5, 16)).shape
ampc.Size([2, 5, 16])
"""
import copy
import math
import warnings

from ... import _C
from ..._creation import arange
from ..._tensor_where import where
from ...autograd import _mode
from .. import functional as F
from .._mha import _canonical_mask, _none_or_dtype
from .activation import GELU, ReLU
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["TransformerEncoderLayer", "TransformerEncoder"]


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _relu_or_gelu(activation):
    """PyTorch's ``activation_relu_or_gelu``: 1 relu, 2 gelu, 0 other."""
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: 0 on and below the diagonal, -inf above."""
    above = arange(sz, device=device).unsqueeze(-1) < arange(sz,
                                                             device=device)
    mask = where(above, -math.inf, 0.0)
    return mask if dtype is None else mask.to(dtype)


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """``is_causal`` when given; otherwise whether ``mask`` is the square
    causal mask of ``size``."""
    if is_causal is not None or mask is None:
        return is_causal is True
    sz = size if size is not None else mask.shape[-2]
    causal = _generate_square_subsequent_mask(sz, device=mask.device,
                                              dtype=mask.dtype)
    if tuple(mask.shape) != tuple(causal.shape):
        return False
    return bool((mask == causal).all())


def _get_seq_len(src, batch_first):
    if src.ndim == 2:
        return src.shape[0]
    return src.shape[1 if batch_first else 0]


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block (linear1, activation,
    dropout, linear2), each with a residual connection and a LayerNorm:
    after each block (post-norm, the default) or before
    (``norm_first=True``).  Inputs are (S, N, E), (N, S, E) with
    ``batch_first``, or unbatched (S, E).

    >>> import ampc
    >>> layer = ampc.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    >>> layer(ampc.randn(5, 3, 8)).shape
    ampc.Size([5, 3, 8])
    """

    __constants__ = ["norm_first"]

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1,
                 activation=F.relu, layer_norm_eps=1e-5, batch_first=False,
                 norm_first=False, bias=True, device=None, dtype=None):
        kw = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias,
            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(activation)
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None,
                is_causal=False):
        src_key_padding_mask = _canonical_mask(
            src_key_padding_mask, "src_key_padding_mask",
            _none_or_dtype(src_mask), "src_mask", src.dtype)
        src_mask = _canonical_mask(src_mask, "src_mask", None, "",
                                   src.dtype, check_other=False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask,
                                   src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask,
                                              src_key_padding_mask,
                                              is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask,
                           key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


def _why_not_nested(layer):
    """PyTorch's reason for not using nested tensors with this layer
    ('' when it would)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use "
                "batch_first for better inference performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` applied in turn,
    then ``norm`` when given.

    Where PyTorch would run on nested tensors (``use_nested_tensor``, eval
    mode, no gradient wanted, a batched input with a left-aligned
    ``src_key_padding_mask`` and no ``mask``, autocast off) its padded
    positions come out as zeros (before ``norm``); ampc gives the same.
    """

    def __init__(self, encoder_layer, num_layers, norm=None,
                 enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(
                "enable_nested_tensor is True, but self.use_nested_tensor is "
                f"False because {why}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None,
                is_causal=None):
        src_key_padding_mask = _canonical_mask(
            src_key_padding_mask, "src_key_padding_mask",
            _none_or_dtype(mask), "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype,
                               check_other=False)
        padded = self._nested_padding(src, mask, src_key_padding_mask)
        batch_first = self.layers[0].self_attn.batch_first
        is_causal = _detect_is_causal_mask(
            mask, is_causal, _get_seq_len(src, batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if padded is not None:
            output = output.masked_fill(padded, 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _nested_padding(self, src, mask, kpm):
        """The (N, S, 1) padded positions where PyTorch would run on nested
        tensors, else None."""
        layer = self.layers[0]
        if not self.use_nested_tensor or layer.training or src.ndim != 3 \
                or kpm is None or mask is not None or _C.autocast_active():
            return None
        if _mode.enabled and any(
                t is not None and t.requires_grad for t in _fast_args(layer,
                                                                      src)):
            return None
        padded = kpm != 0
        # left aligned: once padded, padded to the end
        if self.mask_check and padded.shape[1] > 1 and bool(
                (padded[:, :-1] & ~padded[:, 1:]).any()):
            return None
        return padded.unsqueeze(-1)


def _fast_args(layer, src):
    sa = layer.self_attn
    return (src, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight,
            sa.out_proj.bias, layer.norm1.weight, layer.norm1.bias,
            layer.norm2.weight, layer.norm2.bias, layer.linear1.weight,
            layer.linear1.bias, layer.linear2.weight, layer.linear2.bias)
