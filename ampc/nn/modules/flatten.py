"""``Flatten``: merge a range of dims (by default all but the batch dim).

>>> import ampc
>>> ampc.nn.Flatten()(ampc.ones(2, 3, 4)).shape
ampc.Size([2, 12])
"""
from .module import Module

__all__ = ["Flatten"]


class Flatten(Module):
    """``input.flatten(start_dim, end_dim)``.

    >>> import ampc
    >>> ampc.nn.Flatten()
    Flatten(start_dim=1, end_dim=-1)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
