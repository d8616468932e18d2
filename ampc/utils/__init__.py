"""``ampc.utils``: ``ampc.utils.data`` (Dataset, DataLoader, ...) and
``ampc.utils.hooks`` (``RemovableHandle``), as ``torch.utils``.

>>> import ampc
>>> ampc.utils.data.TensorDataset(ampc.zeros(4, 2))[0][0].shape
ampc.Size([2])
"""
from . import data, hooks  # noqa: F401

__all__ = ["data", "hooks"]
