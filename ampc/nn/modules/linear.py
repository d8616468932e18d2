"""``Linear`` (y = x W^T + b) and ``Identity``.

>>> import ampc
>>> ampc.nn.Linear(4096, 512)
Linear(in_features=4096, out_features=512, bias=True)
"""
import math

from ... import _C
from ..._creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Linear", "Identity"]


def _check_features(cls, **sizes):
    for name, v in sizes.items():
        if v.__class__ is bool or not isinstance(v, int) or v < 0:
            raise ValueError(
                f"{cls}(): {name} must be a non-negative int, got {v!r}")


class Identity(Module):
    """Returns its input unchanged (any constructor arguments are
    ignored, as in PyTorch).

    >>> import ampc
    >>> ampc.nn.Identity()(ampc.ones(2))
    tensor([1., 1.])
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight^T + bias for x (*, in_features).  ``weight``
    (out_features, in_features) starts as kaiming_uniform_(a=sqrt(5)), i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and ``bias`` as
    U(-1/sqrt(in_features), 1/sqrt(in_features)), as in PyTorch.

    >>> import ampc
    >>> lin = ampc.nn.Linear(3, 2)
    >>> lin(ampc.ones(5, 3)).shape
    ampc.Size([5, 2])
    """

    def __init__(self, in_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        _check_features("Linear", in_features=in_features,
                        out_features=out_features)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features,
                                      device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device,
                                        dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw fresh initial values (PyTorch's default scheme)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def _forward(self, input, relu=False):
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                f"Linear.forward(): expected a Tensor input, but got "
                f"{type(input).__name__}")
        return F._linear(input, self.weight, self.bias, relu)

    def forward(self, input):
        return self._forward(input)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features="
                f"{self.out_features}, bias={self.bias is not None}")
