"""``LayerNorm``: normalisation of each sample over its trailing
``normalized_shape`` dims, with a per-element affine; ``GroupNorm``: over
groups of channels, with a per-channel affine.

>>> import ampc
>>> ampc.nn.LayerNorm(768)
LayerNorm((768,), eps=1e-05, elementwise_affine=True, bias=True)
>>> ampc.nn.GroupNorm(8, 64)
GroupNorm(8, 64, eps=1e-05, affine=True, bias=True)
"""
import numbers

from ... import _C
from ..._creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["GroupNorm", "LayerNorm"]


def _affine_parameters(norm, shape, affine, bias, device, dtype):
    """``weight`` and ``bias`` of ``shape`` (None when not ``affine``, the
    bias also without ``bias``), then set to 1 and 0."""
    weight = Parameter(empty(*shape, device=device, dtype=dtype)) \
        if affine else None
    norm.register_parameter("weight", weight)
    bias = Parameter(empty(*shape, device=device, dtype=dtype)) \
        if affine and bias else None
    norm.register_parameter("bias", bias)
    norm.reset_parameters()


def _reset_affine(norm):
    if norm.weight is not None:
        init.ones_(norm.weight)
    if norm.bias is not None:
        init.zeros_(norm.bias)


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last
    ``len(normalized_shape)`` dims of x; ``weight`` (ones) and ``bias``
    (zeros) have shape ``normalized_shape`` when ``elementwise_affine``.

    >>> import ampc
    >>> ln = ampc.nn.LayerNorm(4)
    >>> ln(ampc.randn(2, 3, 4)).shape
    ampc.Size([2, 3, 4])
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine,
                           bias, device, dtype)

    def reset_parameters(self):
        """Weight 1 and bias 0 (as PyTorch)."""
        _reset_affine(self)

    def forward(self, input):
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                "LayerNorm.forward(): expected a Tensor input, but got "
                f"{type(input).__name__}")
        return F.layer_norm(input, self.normalized_shape, self.weight,
                            self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Group normalisation of (N, C, *) input: the ``num_channels``
    channels form ``num_groups`` groups, each sample's group normalised by
    its mean and biased variance, then ``weight`` (ones) and ``bias``
    (zeros), of shape (C,), scale and shift each channel when ``affine``.

    >>> import ampc
    >>> gn = ampc.nn.GroupNorm(2, 6)
    >>> gn(ampc.randn(3, 6, 5)).shape
    ampc.Size([3, 6, 5])
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_groups.__class__ is bool or not isinstance(num_groups, int) \
                or num_groups <= 0:
            raise ValueError(
                f"GroupNorm(): num_groups must be a positive int, got "
                f"{num_groups!r}")
        if num_channels % num_groups:
            raise ValueError(
                f"num_channels ({num_channels}) must be divisible by "
                f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, (num_channels,), affine, bias, device,
                           dtype)

    def reset_parameters(self):
        """Weight 1 and bias 0 (as PyTorch)."""
        _reset_affine(self)

    def forward(self, input):
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                "GroupNorm.forward(): expected a Tensor input, but got "
                f"{type(input).__name__}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias,
                            self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")
