"""SubsetRandomSampler and WeightedRandomSampler: torch's behaviour
(lengths, what can be drawn, the empirical distribution, errors and their
words, generators, DataLoader use); not its random stream."""
import numpy as np
import pytest

import ampc
from ampc.utils.data import (DataLoader, Generator, SubsetRandomSampler,
                             TensorDataset, WeightedRandomSampler)
from helpers import torch_or_skip


def test_subset_random_sampler_permutes_the_indices():
    idx = [9, 4, 4, 17, 2]
    s = SubsetRandomSampler(idx)
    assert len(s) == 5
    orders = {tuple(s) for _ in range(30)}
    assert all(sorted(o) == sorted(idx) for o in orders)
    assert len(orders) > 1                        # a new order each epoch
    assert list(SubsetRandomSampler([])) == []
    r = SubsetRandomSampler(range(3, 10, 2))      # any sequence
    assert sorted(r) == [3, 5, 7, 9]


def test_subset_random_sampler_generator_repeats():
    a = list(SubsetRandomSampler(range(50), Generator().manual_seed(3)))
    b = list(SubsetRandomSampler(range(50), Generator().manual_seed(3)))
    c = list(SubsetRandomSampler(range(50), Generator().manual_seed(4)))
    assert a == b != c
    ampc.manual_seed(1)
    d = list(SubsetRandomSampler(range(50)))
    ampc.manual_seed(1)
    assert d == list(SubsetRandomSampler(range(50)))


def test_weighted_with_replacement_follows_the_weights():
    w = [0.1, 0.0, 0.6, 0.3]
    s = WeightedRandomSampler(w, 20000, generator=Generator().manual_seed(0))
    assert len(s) == 20000 and s.replacement is True
    assert s.weights.dtype == np.float64 and s.weights.shape == (4,)
    counts = np.bincount(list(s), minlength=4) / 20000
    assert counts[1] == 0
    np.testing.assert_allclose(counts, w, atol=0.015)


def test_weighted_without_replacement():
    w = np.array([5.0, 1.0, 0.0, 3.0, 0.5])
    for seed in range(20):
        got = list(WeightedRandomSampler(w, 5, replacement=False,
                                         generator=Generator().manual_seed(
                                             seed)))
        assert sorted(got) == [0, 1, 2, 3, 4]
        assert got[-1] == 2           # a zero weight comes after the others
    firsts = [next(iter(WeightedRandomSampler(
        w, 1, False, Generator().manual_seed(s)))) for s in range(3000)]
    freq = np.bincount(firsts, minlength=5) / 3000
    np.testing.assert_allclose(freq, w / w.sum(), atol=0.03)
    # the second draw follows the remaining weights (w / (1 - w_first))
    pairs = [list(WeightedRandomSampler([1.0, 1.0, 2.0], 2, False,
                                        Generator().manual_seed(s)))
             for s in range(4000)]
    after_2 = [b for a, b in pairs if a == 2]
    assert abs(np.mean(np.array(after_2) == 0) - 0.5) < 0.05


def test_weighted_accepts_tensors_and_generators():
    w = ampc.tensor([1.0, 2.0, 3.0])
    a = list(WeightedRandomSampler(w, 10, generator=Generator().manual_seed(
        7)))
    b = list(WeightedRandomSampler([1, 2, 3], 10,
                                   generator=Generator().manual_seed(7)))
    assert a == b and all(0 <= i < 3 for i in a)
    ds = TensorDataset(ampc.arange(6).float())
    loader = DataLoader(ds, batch_size=4, sampler=WeightedRandomSampler(
        [0, 0, 0, 1, 0, 0], 8))
    assert [b[0].tolist() for b in loader] == [[3.0] * 4] * 2


ERRORS = [
    (lambda: WeightedRandomSampler([1.0], 0), ValueError,
     "num_samples should be a positive integer value, but got "
     "num_samples=0"),
    (lambda: WeightedRandomSampler([1.0], 2.0), ValueError,
     "num_samples=2.0"),
    (lambda: WeightedRandomSampler([1.0], True), ValueError,
     "num_samples=True"),
    (lambda: WeightedRandomSampler([1.0], 1, replacement=1), ValueError,
     "replacement should be a boolean value, but got replacement=1"),
    (lambda: WeightedRandomSampler([[1.0, 2.0]], 1), ValueError,
     r"weights should be a 1d sequence but given weights have shape "
     r"\(1, 2\)"),
]


@pytest.mark.parametrize("make,exc,msg", ERRORS)
def test_constructor_errors(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()


ITER_ERRORS = [([-1.0, 1.0], 1, True), ([0.0, 0.0], 1, True),
               ([1.0, float("nan")], 1, True), ([1.0, float("inf")], 1, True),
               ([1.0, 1.0], 3, False)]


@pytest.mark.parametrize("w,n,replacement", ITER_ERRORS)
def test_bad_weights_raise_when_iterated(w, n, replacement):
    s = WeightedRandomSampler(w, n, replacement)
    with pytest.raises(RuntimeError):
        list(s)


def test_errors_are_torch_s():
    T = torch_or_skip().utils.data.WeightedRandomSampler
    cases = [([1.0], 0, True), ([1.0], 2.0, True), ([1.0], 1, 1),
             ([[1.0, 2.0]], 1, True)] + ITER_ERRORS
    for w, n, r in cases:
        with pytest.raises(Exception) as want:
            list(T(w, n, r))
        with pytest.raises(Exception) as got:
            list(WeightedRandomSampler(w, n, r))
        assert (type(got.value), str(got.value)) == \
            (type(want.value), str(want.value))


def test_docstrings():
    import doctest
    import importlib
    for name in ("ampc.utils.data.sampler",):
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, name
