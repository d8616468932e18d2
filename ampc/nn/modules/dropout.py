"""``Dropout``: zero elements with probability p while training;
``Dropout1d``, ``Dropout2d``, ``Dropout3d``: zero whole channels.

>>> import ampc
>>> ampc.nn.Dropout(0.25)
Dropout(p=0.25, inplace=False)
"""
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class _DropoutNd(Module):
    """The probability check and repr the dropout layers share."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p.__class__ is bool or not isinstance(p, (int, float)) or \
                not 0 <= p <= 1:
            raise ValueError(
                f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training mode, zero each element with probability ``p`` and scale
    the others by 1/(1-p); in eval mode, the identity.

    >>> import ampc
    >>> d = ampc.nn.Dropout(0.5).eval()
    >>> d(ampc.ones(3))
    tensor([1., 1., 1.])
    """

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """``F.dropout1d``: whole channels of (N, C, L) or (C, L) inputs."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """``F.dropout2d``: whole channels of (N, C, H, W) inputs."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """``F.dropout3d``: whole channels of (N, C, D, H, W) or (C, D, H, W)
    inputs."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)
