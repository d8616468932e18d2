"""randperm, bernoulli, normal, multinomial and exponential_
(ampc/_random_more.py): distributions (moments, chi-square with fixed
seeds), reproducibility under ampc.manual_seed and generator=, errors."""
import numpy as np
import pytest

import ampc
from ampc.utils.data import Generator
from helpers import to64


def _chi2_ok(counts, probs, n):
    """Pearson's statistic below the 0.999 quantile (about k + 4 sqrt(2k)
    for k degrees of freedom), for these fixed seeds."""
    expected = np.asarray(probs) * n
    keep = expected > 0
    stat = (((counts[keep] - expected[keep]) ** 2) / expected[keep]).sum()
    k = keep.sum() - 1
    assert stat < k + 4.5 * np.sqrt(2 * k) + 6, stat
    assert counts[~keep].sum() == 0


def _repeatable(fn):
    ampc.manual_seed(123)
    a = to64(fn())
    ampc.manual_seed(123)
    b = to64(fn())
    assert np.array_equal(a, b)
    c = to64(fn())
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("n", (1, 7, 33, 1031))
def test_randperm_is_a_permutation(n):
    p = ampc.randperm(n)
    assert p.dtype is ampc.int64 and p.shape == (n,)
    assert sorted(p.tolist()) == list(range(n))
    assert ampc.randperm(n, dtype=ampc.float32).dtype is ampc.float32


def test_randperm_uniform_and_repeatable():
    _repeatable(lambda: ampc.randperm(50))
    first = np.array([ampc.randperm(4)[0].item() for _ in range(2000)])
    _chi2_ok(np.bincount(first, minlength=4), [0.25] * 4, 2000)
    g1, g2 = Generator().manual_seed(5), Generator().manual_seed(5)
    assert ampc.randperm(20, generator=g1).tolist() == \
        ampc.randperm(20, generator=g2).tolist()
    assert ampc.randperm(0).shape == (0,)
    with pytest.raises(RuntimeError, match="randperm.*negative dimension"):
        ampc.randperm(-1)
    with pytest.raises(TypeError, match="randperm.*'n'"):
        ampc.randperm(2.5)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
def test_bernoulli_tensor_probabilities(dtype):
    p = ampc.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).to(getattr(ampc, dtype))
    draws = to64(ampc.bernoulli(p.expand(4000, 5)))
    assert ampc.bernoulli(p).dtype is p.dtype
    assert set(np.unique(draws)) <= {0.0, 1.0}
    mean = draws.mean(0)
    assert mean[0] == 0 and mean[4] == 1
    assert np.allclose(mean[1:4], to64(p)[1:4], atol=0.03)
    _repeatable(lambda: ampc.bernoulli(ampc.full((64,), 0.5)))


def test_bernoulli_number_and_in_place():
    x = ampc.bernoulli(ampc.zeros(5000), 0.3)
    assert abs(to64(x).mean() - 0.3) < 0.03
    y = ampc.zeros(3, 4000)
    assert y.bernoulli_(ampc.tensor([[0.2], [0.5], [0.8]])) is y
    assert np.allclose(to64(y).mean(1), [0.2, 0.5, 0.8], atol=0.03)
    z = ampc.zeros(3000, dtype=ampc.int64)
    z.bernoulli_(0.25)
    assert abs(to64(z).mean() - 0.25) < 0.03
    w = ampc.zeros(8, 8)[:, ::2]            # non-contiguous
    w.bernoulli_(1.0)
    assert to64(w).sum() == 32


def test_bernoulli_errors():
    with pytest.raises(RuntimeError, match=r"bernoulli\(\).*p_in >= 0"):
        ampc.bernoulli(ampc.tensor([0.5, 1.5]))
    with pytest.raises(NotImplementedError, match="bernoulli"):
        ampc.bernoulli(ampc.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"bernoulli_\(\).*p_in"):
        ampc.zeros(2).bernoulli_(ampc.tensor([-0.5, 0.5]))
    with pytest.raises(RuntimeError, match=r"bernoulli_\(\).*\[0, 1\]"):
        ampc.zeros(2).bernoulli_(2.0)


def test_normal_overloads_moments():
    a = ampc.normal(2.0, 3.0, (20000,))
    assert a.dtype is ampc.float32 and a.shape == (20000,)
    v = to64(a)
    assert abs(v.mean() - 2) < 0.1 and abs(v.std() - 3) < 0.1
    assert ampc.normal(0.0, 1.0, size=(2, 3), dtype=ampc.float16).dtype \
        is ampc.float16
    m = ampc.tensor([[-5.0], [0.0], [5.0]])
    b = to64(ampc.normal(m.expand(3, 5000), 0.5))
    assert np.allclose(b.mean(1), [-5, 0, 5], atol=0.05)
    assert np.allclose(b.std(1), 0.5, atol=0.05)
    s = ampc.tensor([0.1, 1.0, 10.0])
    c = to64(ampc.normal(1.0, s.expand(8000, 3)))
    assert np.allclose(c.std(0), [0.1, 1.0, 10.0], rtol=0.05)
    d = ampc.normal(ampc.zeros(4, 1), ampc.ones(5))
    assert d.shape == (4, 5)
    h = ampc.normal(ampc.zeros(3).half(), 1.0)
    assert h.dtype is ampc.float16
    assert ampc.normal(ampc.ones(3), 0.0).tolist() == [1.0, 1.0, 1.0]
    _repeatable(lambda: ampc.normal(0.0, 1.0, (16,)))
    g = [Generator().manual_seed(9) for _ in range(2)]
    assert ampc.normal(0.0, 1.0, (5,), generator=g[0]).tolist() == \
        ampc.normal(0.0, 1.0, (5,), generator=g[1]).tolist()


def test_normal_errors():
    with pytest.raises(TypeError, match="normal.*'size'"):
        ampc.normal(0.0, 1.0)
    with pytest.raises(RuntimeError, match="normal.*std >= 0.0"):
        ampc.normal(0.0, -1.0, (3,))
    with pytest.raises(RuntimeError, match="normal.*std >= 0.0"):
        ampc.normal(ampc.zeros(3), -1.0)
    with pytest.raises(RuntimeError, match="normal.*all elements of std"):
        ampc.normal(ampc.zeros(3), -ampc.ones(3))
    with pytest.raises(RuntimeError, match="size of tensor a"):
        ampc.normal(ampc.zeros(3), ampc.ones(2))


def test_multinomial_with_replacement_chi_square():
    w = ampc.tensor([1.0, 0.0, 2.0, 3.0, 4.0])
    idx = ampc.multinomial(w, 5000, replacement=True)
    assert idx.dtype is ampc.int64 and idx.shape == (5000,)
    _chi2_ok(np.bincount(idx.tolist(), minlength=5), [.1, 0, .2, .3, .4],
             5000)
    rows = ampc.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 5.0]]).half()
    r = ampc.multinomial(rows, 100, True)
    assert r.shape == (2, 100)
    assert set(r[0].tolist()) <= {0, 1} and set(r[1].tolist()) == {2}
    _repeatable(lambda: ampc.multinomial(w, 40, True))
    _repeatable(lambda: w.multinomial(3))
    assert set(ampc.full((50,), 0.5).bernoulli().tolist()) <= {0.0, 1.0}


def test_multinomial_without_replacement():
    w = ampc.tensor([[1.0, 2.0, 3.0, 4.0, 0.0]]).expand(3000, 5)
    idx = ampc.multinomial(w, 4)
    rows = np.array(idx.tolist())
    assert (np.sort(rows, 1) == np.arange(4)).all()   # distinct, never 4
    _chi2_ok(np.bincount(rows[:, 0], minlength=5), [.1, .2, .3, .4, 0],
             3000)
    # second draws: P(j second) = sum_i p_i p_j / (1 - p_i)
    p = np.array([.1, .2, .3, .4])
    second = [sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j)
              for j in range(4)]
    _chi2_ok(np.bincount(rows[:, 1], minlength=4), second, 3000)


def test_multinomial_errors():
    one = ampc.tensor([1.0, 0.0, 0.0])
    with pytest.raises(RuntimeError, match="multinomial.*n_sample > "
                       "prob_dist"):
        ampc.multinomial(one, 4)
    with pytest.raises(RuntimeError, match="multinomial.*not enough"):
        ampc.multinomial(one, 2)
    with pytest.raises(RuntimeError, match="multinomial.*element < 0"):
        ampc.multinomial(ampc.tensor([-1.0, 1.0]), 1)
    with pytest.raises(RuntimeError, match="multinomial.*sum of "
                       "probabilities <= 0"):
        ampc.multinomial(ampc.zeros(3), 1)
    with pytest.raises(RuntimeError, match="multinomial.*1 or 2 dim"):
        ampc.multinomial(ampc.ones(2, 2, 2), 1)
    with pytest.raises(RuntimeError, match="multinomial.*n_sample <= 0"):
        ampc.multinomial(one, 0)


@pytest.mark.parametrize("lambd", (0.5, 1.0, 4.0))
def test_exponential_moments(lambd):
    x = ampc.empty(20000)
    assert x.exponential_(lambd) is x
    v = to64(x)
    assert (v >= 0).all()
    assert abs(v.mean() * lambd - 1) < 0.03
    assert abs(v.var() * lambd ** 2 - 1) < 0.08
    # P(X > 1/lambd) = e^-1
    assert abs((v > 1 / lambd).mean() - np.exp(-1)) < 0.015


def test_exponential_dtypes_repeatable_errors():
    h = ampc.empty(4, 6).half()[:, ::2]
    h.exponential_()
    assert (to64(h) >= 0).all()
    _repeatable(lambda: ampc.empty(8).exponential_(2.0))
    with pytest.raises(RuntimeError, match="exponential_.*lambda > 0.0"):
        ampc.empty(2).exponential_(0)
    with pytest.raises(RuntimeError, match="exponential_.*floating point"):
        ampc.zeros(2, dtype=ampc.int64).exponential_()
