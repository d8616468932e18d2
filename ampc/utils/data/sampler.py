"""Samplers: the order in which a DataLoader visits a data set.

``SequentialSampler`` (0, 1, 2, ...), ``RandomSampler`` (a fresh random
permutation each epoch, seeded from ampc's generator or a ``Generator``),
``SubsetRandomSampler`` (a permutation of given indices),
``WeightedRandomSampler`` (indices drawn by weight) and ``BatchSampler``
(groups of indices), as in ``torch.utils.data``.

>>> from ampc.utils.data import BatchSampler, SequentialSampler
>>> list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False))
[[0, 1], [2, 3], [4]]
"""
import numbers

import numpy as np

from ._random import numpy_rng

__all__ = ["Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler"]


class Sampler:
    """The base class: subclasses define ``__iter__`` (yielding indices)
    and usually ``__len__``.

    >>> from ampc.utils.data import Sampler
    >>> class Reverse(Sampler):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter(range(self.n - 1, -1, -1))
    ...     def __len__(self):
    ...         return self.n
    >>> list(Reverse(3))
    [2, 1, 0]
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(
            f"{type(self).__name__}: subclasses of Sampler should implement "
            "__iter__.")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1.

    >>> from ampc.utils.data import SequentialSampler
    >>> list(SequentialSampler("abc"))
    [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Random indices: a permutation (several back to back when
    ``num_samples`` exceeds the data set), or independent draws with
    ``replacement=True``.  Each ``iter()`` draws a new seed from
    ``generator`` (or ampc's generator when None).

    >>> import ampc
    >>> from ampc.utils.data import RandomSampler
    >>> _ = ampc.manual_seed(0)
    >>> sorted(RandomSampler(range(4)))
    [0, 1, 2, 3]
    """

    def __init__(self, data_source, replacement=False, num_samples=None,
                 generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(
                "RandomSampler(): replacement should be a boolean value, but "
                f"got replacement={replacement}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        n = self.num_samples
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) \
                or n <= 0:
            raise ValueError(
                "RandomSampler(): num_samples should be a positive integer "
                f"value, but got num_samples={n}")

    @property
    def num_samples(self):
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        rng = numpy_rng(self.generator)
        if self.replacement:
            return iter(rng.integers(0, n, size=self.num_samples).tolist())
        out = []
        while len(out) < self.num_samples:
            out.extend(rng.permutation(n).tolist())
        return iter(out[:self.num_samples])

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The elements of ``indices`` in a fresh random order at each
    ``iter()`` (seeded from ``generator`` or ampc's generator).

    >>> from ampc.utils.data import SubsetRandomSampler
    >>> sorted(SubsetRandomSampler([7, 3, 5]))
    [3, 5, 7]
    """

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in numpy_rng(self.generator).permutation(len(self.indices)):
            yield self.indices[int(i)]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices of ``weights`` (non-negative, not
    necessarily summing to 1), index i drawn with probability
    proportional to ``weights[i]``; without ``replacement`` each index
    at most once.  ``weights`` is kept as a float64 NumPy array (torch
    keeps a double tensor; ampc has no float64).  Bad weights raise
    torch's errors when iterated, as torch's ``multinomial`` does.

    >>> from ampc.utils.data import WeightedRandomSampler
    >>> list(WeightedRandomSampler([0.0, 1.0, 0.0], 3))
    [1, 1, 1]
    >>> sorted(WeightedRandomSampler([1, 2, 3], 3, replacement=False))
    [0, 1, 2]
    """

    def __init__(self, weights, num_samples, replacement=True,
                 generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError(
                "num_samples should be a positive integer value, but got "
                f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(
                "replacement should be a boolean value, but got "
                f"replacement={replacement}")
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(
                "weights should be a 1d sequence but given weights have "
                f"shape {tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        w, n = self.weights, self.num_samples
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise RuntimeError("probability tensor contains either `inf`, "
                               "`nan` or element < 0")
        if not w.sum() > 0:
            raise RuntimeError(
                "invalid multinomial distribution (sum of probabilities <= "
                "0)")
        if not self.replacement and n > len(w):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) "
                               "samples without replacement")
        rng = numpy_rng(self.generator)
        if self.replacement:
            # inverse CDF: a zero weight is never drawn (u * total may
            # round up to total: clamp to the last positive weight)
            cdf = np.cumsum(w)
            u = rng.random(n) * cdf[-1]
            out = np.minimum(np.searchsorted(cdf, u, side="right"),
                             np.flatnonzero(w)[-1])
        else:
            # the exponential race (Efraimidis-Spirakis), as torch: the
            # positive weights come first, then zero-weight indices
            keys = w / rng.exponential(size=len(w))
            out = np.argsort(-keys, kind="stable")[:n]
        yield from out.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one
    shorter unless ``drop_last``.

    >>> from ampc.utils.data import BatchSampler
    >>> list(BatchSampler(range(5), 2, drop_last=True))
    [[0, 1], [2, 3]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(
                batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(
                "batch_size should be a positive integer value, but got "
                f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(
                "drop_last should be a boolean value, but got "
                f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
