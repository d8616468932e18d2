"""Map-style data sets: ``Dataset``, ``TensorDataset``, ``ConcatDataset``,
``Subset`` and ``random_split``, as in ``torch.utils.data``.

A data set may also offer ``_batch_getter()``: a callable that builds a
whole collated batch from an index array at once (fancy indexing instead
of one ``__getitem__`` per sample), or None.  The DataLoader uses it when
the default collate is in use; it must give what
``default_collate([ds[i] for i in indices])`` gives.

>>> import ampc
>>> from ampc.utils.data import TensorDataset, random_split
>>> ds = TensorDataset(ampc.arange(10), ampc.zeros(10))
>>> len(ds), ds[3][0].item()
(10, 3)
>>> [len(s) for s in random_split(ds, [0.8, 0.2])]
[8, 2]
"""
import bisect
import math
import numbers

import numpy as np

from ... import _C
from ..._dtype_device import bfloat16
from ...tensor import Tensor
from ._random import numpy_rng

__all__ = ["Dataset", "TensorDataset", "ConcatDataset", "Subset",
           "random_split"]


class Dataset:
    """The base of map-style data sets: subclasses define ``__getitem__``
    (and usually ``__len__``).

    >>> from ampc.utils.data import Dataset
    >>> class Squares(Dataset):
    ...     def __len__(self):
    ...         return 4
    ...     def __getitem__(self, i):
    ...         return i * i
    >>> Squares()[3]
    9
    """

    def __getitem__(self, index):
        raise NotImplementedError(
            f"{type(self).__name__}: subclasses of Dataset should implement "
            "__getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in tensors)``; every tensor has the
    same first dimension.

    >>> import ampc
    >>> from ampc.utils.data import TensorDataset
    >>> x, y = TensorDataset(ampc.ones(3, 2), ampc.arange(3))[1]
    >>> x.tolist(), y.item()
    ([1.0, 1.0], 1)
    """

    def __init__(self, *tensors):
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"TensorDataset(): argument {i} must be a Tensor, got "
                    f"{type(t).__name__}")
            if t.ndim == 0:
                raise ValueError(
                    f"TensorDataset(): tensor {i} is 0-d; each tensor needs "
                    "a first dimension to index")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            raise ValueError(
                "TensorDataset(): Size mismatch between tensors: first "
                f"dimensions are {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0] if self.tensors else 0

    def _batch_getter(self):
        # Only what NumPy can gather without a copy back: CPU tensors of a
        # NumPy dtype that carry no autograd history.
        for t in self.tensors:
            if (t.device.type != "cpu" or t.dtype is bfloat16
                    or t.requires_grad):
                return None
        if not self.tensors:
            return None
        return _TensorBatch([t.numpy() for t in self.tensors])


class _TensorBatch:
    """TensorDataset's batch getter: one fancy-index gather per tensor."""

    def __init__(self, arrays):
        self.arrays = arrays

    def __call__(self, indices):
        return [_C.from_numpy(a[indices]) for a in self.arrays]


class ConcatDataset(Dataset):
    """Several data sets one after another.

    >>> from ampc.utils.data import ConcatDataset
    >>> ds = ConcatDataset([[1, 2], [3]])
    >>> len(ds), ds[2]
    (3, 3)
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError(
                "ConcatDataset(): datasets should not be an empty iterable")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(
                    "ConcatDataset: absolute value of index should not "
                    "exceed dataset length")
            index = len(self) + index
        d = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[d - 1] if d else 0
        return self.datasets[d][index - start]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``.

    >>> from ampc.utils.data import Subset
    >>> Subset(["a", "b", "c"], [2, 0])[0]
    'c'
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)

    def _batch_getter(self):
        inner = getattr(self.dataset, "_batch_getter", None)
        inner = inner() if inner is not None else None
        if inner is None:
            return None
        return _SubsetBatch(inner, np.asarray(self.indices, dtype=np.int64))


class _SubsetBatch:
    def __init__(self, inner, indices):
        self.inner = inner
        self.indices = indices

    def __call__(self, indices):
        return self.inner(self.indices[indices])


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random Subsets of the given
    lengths (ints that sum to ``len(dataset)``, or fractions that sum to
    1).

    >>> from ampc.utils.data import random_split, Generator
    >>> a, b = random_split(range(10), [7, 3],
    ...                     generator=Generator().manual_seed(0))
    >>> sorted(list(a) + list(b)) == list(range(10))
    True
    """
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(x, numbers.Real)
                       and not isinstance(x, numbers.Integral)
                       for x in lengths) and math.isclose(sum(lengths), 1):
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(
                    f"random_split(): fraction at index {i} is not between 0 "
                    "and 1")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        # Hand out the remainder one by one, round-robin (PyTorch's rule).
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(
            "random_split(): Sum of input lengths does not equal the length "
            f"of the input dataset! ({sum(lengths)} vs {n})")
    perm = numpy_rng(generator).permutation(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out
