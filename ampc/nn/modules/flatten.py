"""``Flatten``: merge a range of dims (by default all but the batch dim);
``Unflatten``: split one dim into several.

>>> import ampc
>>> ampc.nn.Flatten()(ampc.ones(2, 3, 4)).shape
ampc.Size([2, 12])
"""
from .module import Module

__all__ = ["Flatten", "Unflatten"]


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


class Unflatten(Module):
    """``input.unflatten(dim, unflattened_size)``.

    >>> import ampc
    >>> ampc.nn.Unflatten(1, (2, 3))(ampc.ones(4, 6)).shape
    ampc.Size([4, 2, 3])
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(
                "unflattened_size must be a tuple of ints, but found type "
                f"{type(unflattened_size).__name__}")
        for n in unflattened_size:
            if n.__class__ is not int:
                raise TypeError(
                    "unflattened_size must be tuple of ints, but found "
                    f"element of type {type(n).__name__} at pos "
                    f"{list(unflattened_size).index(n)}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
