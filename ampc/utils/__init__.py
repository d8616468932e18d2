"""``ampc.utils``: ``ampc.utils.data`` (Dataset, DataLoader, ...), as
``torch.utils``.

>>> import ampc
>>> ampc.utils.data.TensorDataset(ampc.zeros(4, 2))[0][0].shape
ampc.Size([2])
"""
from . import data  # noqa: F401

__all__ = ["data"]
