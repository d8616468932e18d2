"""``ampc.utils``: ``ampc.utils.data`` (Dataset, DataLoader, ...),
``ampc.utils.hooks`` (``RemovableHandle``) and ``ampc.utils.deterministic``
(``fill_uninitialized_memory``), as ``torch.utils``.

>>> import ampc
>>> ampc.utils.data.TensorDataset(ampc.zeros(4, 2))[0][0].shape
ampc.Size([2])
"""
from . import data, deterministic, hooks  # noqa: F401

__all__ = ["data", "deterministic", "hooks"]
