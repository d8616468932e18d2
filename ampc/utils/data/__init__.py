"""``ampc.utils.data``: data sets, samplers, collation and the
``DataLoader``, with the names and behaviour of ``torch.utils.data``.

>>> import ampc
>>> from ampc.utils.data import DataLoader, TensorDataset
>>> loader = DataLoader(TensorDataset(ampc.zeros(6, 2)), batch_size=4)
>>> [b[0].shape[0] for b in loader]
[4, 2]
"""
from ._collate import default_collate, default_convert
from ._random import Generator
from ._worker import WorkerInfo, get_worker_info
from .dataloader import DataLoader
from .dataset import (ConcatDataset, Dataset, Subset, TensorDataset,
                      random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler,
                      SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)

__all__ = [
    "DataLoader", "Dataset", "TensorDataset", "ConcatDataset", "Subset",
    "random_split", "Sampler", "SequentialSampler", "RandomSampler",
    "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
    "default_collate", "default_convert", "get_worker_info", "WorkerInfo",
    "Generator",
]
