"""scatter/scatter_add/index_add/take and F.one_hot (ampc/_scatter.py,
ampc/nn/_encoding.py): values, gradients and errors against torch on
random data (every dim of a 3-D tensor, repeated indices), against a NumPy
loop where torch is absent, and 16-bit sums formed in float32."""
import numpy as np
import pytest

import ampc
from helpers import assert_close, torch_or_skip

F = ampc.nn.functional


def scatter_reference(base, dim, index, src, add):
    """NumPy loop over index's elements (the definition)."""
    out = base.copy()
    for pos in np.ndindex(*index.shape):
        at = list(pos)
        at[dim] = index[pos]
        if add:
            out[tuple(at)] += src[pos]
        else:
            out[tuple(at)] = src[pos]
    return out


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_scatter_add_matches_a_loop(dim):
    rng = np.random.default_rng(dim + 5)
    base = rng.normal(size=(4, 5, 3)).astype(np.float32)
    ishape = [3, 4, 2]
    index = rng.integers(0, base.shape[dim], size=ishape)
    src = rng.normal(size=(4, 5, 3)).astype(np.float32)
    got = ampc.tensor(base).scatter_add(dim, ampc.tensor(index),
                                        ampc.tensor(src))
    want = scatter_reference(base.astype(np.float64), dim % 3, index,
                             src.astype(np.float64), True)
    assert_close(got, want, "float32")


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scatter_and_index_add_match_torch(dim):
    torch = torch_or_skip()
    rng = np.random.default_rng(dim)
    base = rng.normal(size=(4, 5, 3)).astype(np.float32)
    n = base.shape[dim]
    # unique positions along dim per column, so scatter's result is defined
    index = np.argsort(rng.random((4, 5, 3)), axis=dim).take(
        np.arange(2), axis=dim)
    # (src of index's shape: torch's backward refuses a larger one)
    src = rng.normal(size=index.shape).astype(np.float32)
    shape = list(base.shape)
    shape[dim] = 3
    source = rng.normal(size=shape).astype(np.float32)
    w = rng.normal(size=base.shape).astype(np.float32)
    results = []
    for lib in (ampc, torch):
        b = lib.tensor(base, requires_grad=True)
        s = lib.tensor(src, requires_grad=True)
        so = lib.tensor(source, requires_grad=True)
        i = lib.tensor(index)
        out = (b * 1).scatter(dim, i, s) + (b * 1).scatter(dim, i, 2.5)
        added = (b * 1).index_add(dim, lib.tensor([n - 1, 0, n - 1]), so,
                                  alpha=0.5)
        ((out + added) * lib.tensor(w)).sum().backward()
        results.append([out.detach().numpy(), added.detach().numpy(),
                        b.grad.numpy(), s.grad.numpy(), so.grad.numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_take_and_one_hot_match_torch():
    torch = torch_or_skip()
    vals = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    idx = np.array([[11, 0], [-1, 5]])
    x = ampc.tensor(vals, requires_grad=True)
    t = torch.tensor(vals, requires_grad=True)
    got, want = x.take(ampc.tensor(idx)), t.take(torch.tensor(idx))
    np.testing.assert_array_equal(got.detach().numpy(),
                                  want.detach().numpy())
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    labels = np.array([[0, 3], [2, 2]])
    for n in (-1, 6):
        np.testing.assert_array_equal(
            F.one_hot(ampc.tensor(labels), n).numpy(),
            torch.nn.functional.one_hot(torch.tensor(labels), n).numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_scatter_add_sums_in_float32(dtype):
    """2049 ones into one element: 2049 (float32 sum, one rounding), where
    adding in 16 bits one at a time would stop at 2048."""
    x = ampc.zeros(2, dtype=getattr(ampc, dtype))
    x.scatter_add_(0, ampc.zeros(2049, dtype=ampc.int64),
                   ampc.ones(2049, dtype=getattr(ampc, dtype)))
    assert_close(x, np.array([2048.0 if dtype == "bfloat16" else 2049.0,
                              0.0]), dtype)


def test_errors_name_the_problem():
    x = ampc.zeros(3, 5)
    idx = ampc.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]])
    with pytest.raises(RuntimeError, match=r"scatter\(\): Expected index "
                                           r"\[2, 5\] to be no larger than "
                                           r"self \[3, 5\] apart from "
                                           r"dimension 0 and to be no larger "
                                           r"size than src \[1, 5\]"):
        x.scatter(0, idx, ampc.ones(1, 5))
    with pytest.raises(IndexError, match=r"scatter_\(\): index 5 is out of "
                                         r"bounds for dimension 0 with size "
                                         r"3"):
        x.scatter(0, ampc.tensor([[5]]), 1.0)
    with pytest.raises(RuntimeError, match="reduce argument"):
        x.scatter(0, idx, 1.0, reduce="max")
    with pytest.raises(RuntimeError, match="source tensor shape must match"):
        x.index_add_(0, ampc.tensor([0]), ampc.ones(2, 5))
    with pytest.raises(RuntimeError, match="Expected a long tensor"):
        x.take(ampc.tensor([0.0]))
    for labels, n, msg in [([0, 5], 4, "smaller than num_classes"),
                           ([0, -1], -1, "non-negative"),
                           ([], -1, "Can not infer")]:
        with pytest.raises(RuntimeError, match=msg):
            F.one_hot(ampc.tensor(labels, dtype=ampc.int64), n)
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(ampc.tensor([0.0, 1.0]))


def test_edge_cases_match_torch():
    """Negative indices are out of bounds for gather/scatter/index_add/
    index_select (take wraps them); 0-d tensors and empty indices work."""
    torch = torch_or_skip()
    x, t = ampc.zeros(3), torch.zeros(3)
    for fn in (lambda lib, v: v.scatter(0, lib.tensor([-1]), 1.0),
               lambda lib, v: v.gather(0, lib.tensor([-1])),
               lambda lib, v: v.clone().index_add_(0, lib.tensor([-1]),
                                                   lib.ones(1)),
               lambda lib, v: v.index_select(0, lib.tensor([-1]))):
        with pytest.raises((RuntimeError, IndexError), match="index -1 is "
                           "out of bounds|out of range"):
            fn(torch, t)
        with pytest.raises(IndexError, match="index -1 is out of bounds "
                                             "for dimension 0 with size 3"):
            fn(ampc, x)
    cases = [lambda lib: lib.tensor(1.0).scatter(0, lib.tensor(0), 2.0),
             lambda lib: lib.tensor(5.0).gather(0, lib.tensor(0)),
             lambda lib: lib.tensor(1.0).index_add(0, lib.tensor([0]),
                                                   lib.tensor(3.0)),
             lambda lib: lib.tensor(7.0).take(lib.tensor(0)),
             lambda lib: lib.zeros(3).scatter(
                 0, lib.zeros(0, 2, dtype=lib.int64), 1.0),
             lambda lib: lib.zeros(3).gather(0, lib.zeros(0, 2,
                                                          dtype=lib.int64)),
             lambda lib: lib.arange(6.0).take(lib.tensor([-1, 0]))]
    for case in cases:
        got, want = case(ampc), case(torch)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_more_errors_name_the_problem():
    x = ampc.zeros(3)
    with pytest.raises(RuntimeError, match=r"Expected self.dtype to be "
                                           "equal to src.dtype"):
        x.scatter(0, ampc.tensor([0]), ampc.ones(1, dtype=ampc.float16))
    with pytest.raises(RuntimeError, match=r"self \(float32\) and source "
                                           r"\(float16\) must have the same"):
        x.index_add(0, ampc.tensor([0]), ampc.ones(1, dtype=ampc.float16))
    with pytest.raises(RuntimeError, match="reduce argument must be either "
                                           "add or multiply"):
        x.scatter(0, ampc.tensor([0]), 1.0, reduce="sum")
    with pytest.raises(IndexError, match=r"start out of range \(expected "
                                         r"to be in range of \[-3, 3\], but "
                                         "got -6"):
        x.narrow(0, -6, 1)
    with pytest.raises(RuntimeError, match="length must be non-negative"):
        x.narrow(0, 0, -1)
    with pytest.raises(RuntimeError, match="0-dim tensor"):
        ampc.tensor(1.0).narrow(0, 0, 1)
    with pytest.raises(RuntimeError, match="num_classes should be -1 or"):
        F.one_hot(ampc.tensor([0]), True)


def test_index_put_with_0_d_indices_matches_torch():
    """Ints only: a basic index, written (or added to) in place, with
    gradients through the write."""
    torch = torch_or_skip()
    results = []
    for lib in (ampc, torch):
        for acc in (False, True):
            x = lib.arange(6.0).reshape(2, 3).requires_grad_()
            y = x * 1
            v = lib.tensor(5.0, requires_grad=True)
            y.index_put_((lib.tensor(1), lib.tensor(2)), v, accumulate=acc)
            (y * lib.arange(1.0, 7.0).reshape(2, 3)).sum().backward()
            results.append([y.detach().numpy(), x.grad.numpy(),
                            v.grad.numpy()])
    for got, want in zip(results[:2], results[2:]):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64",
                                   "bool"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_add_without_autograd_equals_the_autograd_path(dtype, dim):
    """Outside autograd index_add_ runs the scatter kernel over an expanded
    index; with autograd the advanced-index path: same values (repeated
    indices, 16-bit sums rounded once), checked against float64 NumPy."""
    rng = np.random.default_rng(dim)
    shape = (5, 7, 33)
    n = 9
    index = rng.integers(0, shape[dim], n)
    src_shape = list(shape)
    src_shape[dim] = n
    base = rng.integers(-3, 4, shape).astype(np.float32)
    src = rng.integers(-3, 4, src_shape).astype(np.float32)
    dt = getattr(ampc, dtype if dtype != "bool" else "bool")
    a = ampc.tensor(base).to(dt)
    s = ampc.tensor(src).to(dt)
    fast = a.clone().index_add_(dim, ampc.tensor(index), s)
    if dt.is_floating_point:
        slow = a.clone().requires_grad_()
        slow = (slow * 1).index_add_(dim, ampc.tensor(index), s)
        np.testing.assert_array_equal(fast.float().numpy(),
                                      slow.detach().float().numpy())
    ref = base.astype(np.float64)
    if dtype == "bool":
        ref = ref != 0
        np.logical_or.at(ref, (slice(None),) * dim + (index,),
                         src != 0)
    else:
        np.add.at(ref, (slice(None),) * dim + (index,), src)
    np.testing.assert_allclose(fast.float().numpy() if dt.is_floating_point
                               else fast.numpy(), ref,
                               rtol=1e-2 if dtype in ("float16", "bfloat16")
                               else 0)
