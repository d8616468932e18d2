"""``Dropout``: zero elements with probability p while training.

>>> import ampc
>>> ampc.nn.Dropout(0.25)
Dropout(p=0.25, inplace=False)
"""
from .. import functional as F
from .module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """In training mode, zero each element with probability ``p`` and scale
    the others by 1/(1-p); in eval mode, the identity.

    >>> import ampc
    >>> d = ampc.nn.Dropout(0.5).eval()
    >>> d(ampc.ones(3))
    tensor([1., 1., 1.])
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p.__class__ is bool or not isinstance(p, (int, float)) or \
                not 0 <= p <= 1:
            raise ValueError(
                f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
