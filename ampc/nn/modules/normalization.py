"""``LayerNorm``: normalisation of each sample over its trailing
``normalized_shape`` dims, with a per-element affine.

>>> import ampc
>>> ampc.nn.LayerNorm(768)
LayerNorm((768,), eps=1e-05, elementwise_affine=True, bias=True)
"""
import numbers

from ... import _C
from ..._creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["LayerNorm"]


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
        if elementwise_affine:
            self.weight = Parameter(empty(*self.normalized_shape,
                                          device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(*self.normalized_shape,
                                            device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Weight 1 and bias 0 (as PyTorch)."""
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

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
